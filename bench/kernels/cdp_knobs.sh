#!/bin/bash
# cdp_run under different thread / environment settings, measured round-robin
# (profiling hints: where does the second core go?).  Step time = median of
# the per-step periods of --trace (bench/lib/trace_steps.py), per repetition; the
# summary gives the median over repetitions and the ratio to the first
# variant measured back to back, then as result lines (bench/README).
#
# usage: bench/kernels/cdp_knobs.sh [BUILD_DIR]
# environment: REPS [3], MODEL [mlp:784-1024-1024-10], SHAPES ["4:32 1:128"]
#   (N:B pairs), RULE [cdp-v2], OUT (keep raw results)
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/common.sh"
BUILD=${1:-${top_builddir:-$bench_top}}
CDP=$BUILD/cdp_run
MPIRUN=${MPIRUN:-mpirun}
PY=${PY:-python3}
REPS=${REPS:-3}
MODEL=${MODEL:-mlp:784-1024-1024-10}
SHAPES=${SHAPES:-"4:32 1:128"}
RULE=${RULE:-cdp-v2}
ONLY=${ONLY:-}     # a grep -E pattern: run only the variants whose label matches
STEPS=${STEPS:-150}
bench_start cdp_knobs.sh knobs.txt
bench_header

# label|ranks|threads|environment (space-separated VAR=value, or -).
# cdp_run sets GOMP_SPINCOUNT=50000 unless OMP_WAIT_POLICY or GOMP_SPINCOUNT
# is already set; OMP_WAIT_POLICY= (set, empty) keeps it from doing so, so
# libgomp uses its default (spin ~300,000 iterations, then sleep).
VARIANTS=(
    "T2 (default: GOMP_SPINCOUNT=50000 set by cdp)|1|2|-"
    "T1|1|1|-"
    "T2 OMP_WAIT_POLICY=PASSIVE|1|2|OMP_WAIT_POLICY=PASSIVE"
    "T2 OMP_WAIT_POLICY=ACTIVE|1|2|OMP_WAIT_POLICY=ACTIVE"
    "T2 OMP_WAIT_POLICY='' (libgomp default spin)|1|2|OMP_WAIT_POLICY="
    "T2 GOMP_SPINCOUNT=20000|1|2|GOMP_SPINCOUNT=20000"
    "T2 GOMP_SPINCOUNT=200000|1|2|GOMP_SPINCOUNT=200000"
    "T2 CDP_GEMM_SPLIT=1|1|2|CDP_GEMM_SPLIT=1"
    "T2 CDP_GEMM_SPLIT=4|1|2|CDP_GEMM_SPLIT=4"
    "T1 CDP_GEMM_SPLIT=1|1|1|CDP_GEMM_SPLIT=1"
    "2 ranks x T1|2|1|-"
)

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'); load $(cut -d' ' -f1-3 /proc/loadavg); $CDP --model $MODEL --rule $RULE --steps $STEPS"
for shape in $SHAPES; do
    IFS=: read -r n b <<<"$shape"
    for rep in $(seq 1 "$REPS"); do
        for v in "${VARIANTS[@]}"; do
            IFS='|' read -r label ranks thr envs <<<"$v"
            [ "$ranks" -gt "$n" ] && continue
            [ -n "$ONLY" ] && ! grep -qE "$ONLY" <<<"$label" && continue
            launch=
            [ "$ranks" -gt 1 ] && launch="$MPIRUN --allow-run-as-root --oversubscribe -np $ranks"
            [ "$envs" = - ] && envs=
            rm -f "$tmp/trace.json"
            # shellcheck disable=SC2086
            if ! env $envs timeout 300 $launch "$CDP" --model "$MODEL" --rule "$RULE" --workers "$n" \
                    --batch "$b" --threads "$thr" --steps "$STEPS" --eval-every 0 --quiet \
                    --trace "$tmp/trace.json" >"$tmp/log" 2>&1; then
                echo "failed: $label"; cat "$tmp/log"; continue
            fi
            med=$("$PY" "$bench_lib/trace_steps.py" "$tmp/trace.json" | awk '{print $3}')
            echo "N${n}xB${b}|$label|$rep|$med" | tee -a "$res"
        done
    done
done

echo
echo "== summary: median step period (ms) and samples/s; ratio to the first variant (back to back)"
"$PY" - "$res" "$MODEL $RULE" <<'EOF'
import sys, statistics, collections
from bench_result import bench_result
d = collections.defaultdict(dict)
order = []
for l in open(sys.argv[1]):
    shape, label, rep, med = l.rstrip("\n").split("|")
    d[(shape, label)][rep] = float(med)
    if (shape, label) not in order:
        order.append((shape, label))
shapes = list(dict.fromkeys(s for s, _ in order))
results = []
for s in shapes:
    labels = [l for (sh, l) in order if sh == s]
    base = d[(s, labels[0])]
    n, b = s[1:].split("xB")
    sps = int(n) * int(b)
    print(s)
    for l in labels:
        x = d[(s, l)]
        m = statistics.median(x.values())
        rs = [x[r] / base[r] for r in x if r in base]
        print(f"  {l:48s} {m * 1e3:8.2f} ms {sps / m:9.0f} samples/s  x{statistics.median(rs):.2f}")
        results.append((f"{sys.argv[2]} {s} {l}", m * 1e3, sps / m, statistics.median(rs)))
for cfg, ms, sps, ratio in results:
    bench_result("knobs", cfg, "step_time_median", ms, "ms")
    bench_result("knobs", cfg, "throughput", sps, "samples/s")
    bench_result("knobs", cfg, "step_time/first_variant", ratio, "ratio")
EOF
