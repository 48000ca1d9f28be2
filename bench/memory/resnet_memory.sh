#!/bin/bash
# The activation-memory claim of cdp-v2 against dp, measured: one process
# (1 rank) trains MODEL on synthetic SHAPE images with N workers of B
# samples and L stages, under dp and cdp-v2, with the stages cut by
# --balance flops (the paper's split) and --balance activations (kept
# bytes), and reports from cdp_run --metrics:
#   peak_activation_bytes   the activations the executor held at its peak
#   peak_rss_bytes          the process's peak resident set (everything:
#                           parameters, optimizer state, workspace, data)
#   step_time_s             wall time per step (K steps, warm-up included)
# and, per balance, the ratios cdp-v2 / dp of both peaks, next to
#   - the timeline's prediction: cdp-v2 keeps at most N*(L+1)/2 stage-
#     activations alive where dp keeps N*L: (L+1)/(2L) = 0.625 for L = 4,
#     if every stage kept the same bytes;
#   - cdp_run --plan's byte figure for this cut ("peak activations: ...
#     (X bytes at B=..); dp: .. (Y bytes)"), which counts a stage's
#     activations from its forward to its backward (the executor frees a
#     stage's output earlier, so the measured peaks are lower).
# The summary's figures end the output again as result lines (bench/README).
#
# usage: bench/memory/resnet_memory.sh [BUILD_DIR]   (BUILD_DIR holds cdp_run;
#        default: this tree, built in place by ./bootstrap)
# environment (defaults: the paper's ImageNet setting):
#   MODEL [resnet50]  SHAPE [3x224x224]  N [8]  L [4]  B [2]  STEPS [2]
#   THREADS [2]  BALANCES ["flops activations"]  OUT [temporary, removed]
# Takes ~45 s with the defaults on 2 nearly idle cores (each run ~10 s;
# bench/raw/2026-11-23/resnet_memory.txt).
# Smoke test: MODEL=resnet20 SHAPE=3x32x32 bench/memory/resnet_memory.sh

set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/common.sh"
BUILD=${1:-${top_builddir:-$bench_top}}
CDP=$BUILD/cdp_run
MODEL=${MODEL:-resnet50}
SHAPE=${SHAPE:-3x224x224}
N=${N:-8}
L=${L:-4}
B=${B:-2}
STEPS=${STEPS:-2}
THREADS=${THREADS:-2}
BALANCES=${BALANCES:-"flops activations"}
bench_start resnet_memory.sh results.txt

# the data set is tiny on purpose: cdp_run evaluates the test set at the
# end, and synthetic data's default size (up to 256 MiB) would count in RSS
data="synthetic:$SHAPE:n=$((N * B * 2)):test=$B"
common=(--model "$MODEL" --data "$data" --workers "$N" --stages "$L" --batch "$B"
        --threads "$THREADS" --lr 0.05 --momentum 0.9 --weight-decay 5e-4)

# key FILE NAME: a number from the metrics' summary line
key() { tail -1 "$1" | grep -o "\"$2\": [0-9.e+-]*" | awk '{print $2}'; }

bench_header
echo "# cdp: $("$CDP" --version 2>&1 | head -1); $CDP"
echo "# $MODEL on $SHAPE, N=$N workers x B=$B, L=$L stages, $STEPS steps, 1 rank x $THREADS threads"
for bal in $BALANCES; do
    # --plan: the byte figures of the timeline (cdp-v2, with dp's alongside)
    if "$CDP" "${common[@]}" --rule cdp-v2 --balance "$bal" --plan >"$tmp/plan-$bal.txt" 2>&1; then
        grep -E '^stages:|^peak activations:' "$tmp/plan-$bal.txt" | sed "s/^/# plan ($bal): /"
    else
        echo "cdp_run --plan failed ($bal):"; tail -3 "$tmp/plan-$bal.txt"
    fi
    for rule in dp cdp-v2; do
        m=$tmp/m-$bal-$rule.json
        t0=$(date +%s.%N)
        if ! "$CDP" "${common[@]}" --rule "$rule" --balance "$bal" --steps "$STEPS" --eval-every 0 \
                --quiet --metrics "$m" >"$tmp/log-$bal-$rule.txt" 2>&1; then
            echo "cdp_run failed ($bal $rule):"; tail -5 "$tmp/log-$bal-$rule.txt"; continue
        fi
        wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
        echo "$bal $rule $(key "$m" peak_activation_bytes) $(key "$m" peak_rss_bytes) $(key "$m" step_time_s) $wall" |
            tee -a "$res"
    done
done

echo
echo "== summary ($MODEL, $SHAPE, N=$N, L=$L, B=$B)"
python3 - "$res" "$N" "$L" "$tmp" "$MODEL $SHAPE N=$N L=$L B=$B" $BALANCES <<'EOF'
import re, sys
from bench_result import bench_result
res, N, L, tmp, setup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
results = []        # printed after the summary
rows = {}
for line in open(res):
    bal, rule, act, rss, st, wall = line.split()
    rows[(bal, rule)] = (int(act), int(rss), float(st), float(wall))
MB = 1e6
print(f"  {'balance':12s} {'rule':7s} {'peak act MB':>12s} {'peak RSS MB':>12s} {'step s':>8s} {'run s':>7s}")
for (bal, rule), (act, rss, st, wall) in rows.items():
    print(f"  {bal:12s} {rule:7s} {act / MB:12.1f} {rss / MB:12.1f} {st:8.2f} {wall:7.1f}")
    cfg = f"{setup} balance={bal} {rule}"
    results += [(cfg, "peak_activation_bytes", act, "bytes"), (cfg, "peak_rss_bytes", rss, "bytes"),
                (cfg, "step_time", st, "s"), (cfg, "run_time", wall, "s")]
pred = N * (L + 1) / 2 / (N * L)
print(f"\n  timeline prediction N*(L+1)/2 / (N*L) = {N * (L + 1) / 2:g} / {N * L} = {pred:.3f}")
results.append((setup, "timeline_prediction", pred, "ratio"))
for bal in sys.argv[6:]:
    plan = ""
    try:
        txt = open(f"{tmp}/plan-{bal}.txt").read()
        m = re.search(r"peak activations: \S+ stage-activations \((\d+) bytes[^)]*\); dp: \S+ \((\d+) bytes\)", txt)
        if m:
            pc, pd = int(m.group(1)), int(m.group(2))
            plan = f"; --plan bytes {pc / MB:.1f} / {pd / MB:.1f} MB = {pc / pd:.3f}"
            results.append((f"{setup} balance={bal} cdp-v2/dp", "plan_activation_bytes",
                            pc / pd, "ratio"))
    except OSError:
        pass
    d, c = rows.get((bal, "dp")), rows.get((bal, "cdp-v2"))
    if d and c:
        print(f"  RATIO balance {bal}: cdp-v2/dp peak activations {c[0] / d[0]:.3f}, "
              f"peak RSS {c[1] / d[1]:.3f}, step time {c[2] / d[2]:.2f} "
              f"(prediction {pred:.3f}{plan})")
        cfg = f"{setup} balance={bal} cdp-v2/dp"
        results += [(cfg, "peak_activation_bytes", c[0] / d[0], "ratio"),
                    (cfg, "peak_rss_bytes", c[1] / d[1], "ratio"),
                    (cfg, "step_time", c[2] / d[2], "ratio")]
    else:
        print(f"  RATIO balance {bal}: missing runs{plan}")
for r in results:
    bench_result("resnet-memory", *r)
EOF
