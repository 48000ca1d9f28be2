#!/bin/bash
# Step time of --rule dp vs cdp-v1 vs cdp-v2 with otherwise identical options,
# measured round-robin (dp, cdp-v1, cdp-v2, dp, ...) so that the noise of
# other jobs on the machine hits the three alike.
#
# Four figures per run:
#   wall  cdp_run's own step time (whole run / steps, from --metrics)
#   med   median of the individual step periods (from --trace, rank 0,
#         bench/lib/trace_steps.py)
#   p10   10th percentile of the step periods: the fast steps, the best
#         estimate of the uncontended step time on a shared machine
#   cpu   user+sys CPU time per step of all threads and ranks (/usr/bin/time,
#         start-up, data loading and evaluation subtracted with a 2-step run)
# For each: the median over repetitions per rule, and the median of the
# per-repetition ratios cdp/dp (target: cdp at most 5% more per step);
# the same figures end the output as result lines (bench/README).
#
# usage: bench/throughput/cdp_vs_dp.sh [BUILD_DIR]
# environment:
#   REPS     repetitions                              [5]
#   CASES    "RANKS:THREADS:MODEL:N:B ..."            [see below]
#   EXTRA    extra cdp_run options (e.g. --deterministic)
#   OUT      keep raw results here                    [a temporary directory]
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/common.sh"
BUILD=${1:-${top_builddir:-$bench_top}}
CDP=$BUILD/cdp_run
MPIRUN=${MPIRUN:-mpirun}
REPS=${REPS:-5}
EXTRA=${EXTRA:-}
PY=${PY:-python3}
CASES=${CASES:-"1:2:mlp:784-1024-1024-10:4:32 2:1:mlp:784-1024-1024-10:4:32 1:2:mlp:784-256-128-10:4:32 2:1:mlp:784-256-128-10:4:32"}
bench_start cdp_vs_dp.sh cdp_vs_dp.txt

steps_for() { case $1 in *1024-1024*) echo 100 ;; *) echo 400 ;; esac; }

bench_header
echo "# $CDP; extra options: ${EXTRA:-none}"
for c in $CASES; do
    IFS=: read -r ranks thr m1 m2 n b <<<"$c"
    model=$m1:$m2
    launch=
    [ "$ranks" -gt 1 ] && launch="$MPIRUN --allow-run-as-root --oversubscribe -np $ranks"
    steps=$(steps_for "$model")
    key="P=$ranks,T=$thr,$model,N=$n,B=$b"
    echo "== $key: cdp_run --model $model --workers $n --batch $b --threads $thr --steps $steps --eval-every 0 --quiet $EXTRA  (${launch:-1 rank})"
    for rep in $(seq 1 "$REPS"); do
        # CPU time of start-up, data loading and final evaluation: a 2-step run
        # shellcheck disable=SC2086
        /usr/bin/time -f '%e %U %S' -o "$tmp/time" timeout 300 $launch "$CDP" --model "$model" \
            --rule dp --workers "$n" --batch "$b" --threads "$thr" --steps 2 --eval-every 0 \
            --quiet $EXTRA >/dev/null 2>&1
        base=$(awk 'END {print $2 + $3}' "$tmp/time")
        for rule in dp cdp-v1 cdp-v2; do
            rm -f "$tmp/m.json" "$tmp/trace.json"
            # shellcheck disable=SC2086
            if ! /usr/bin/time -f '%e %U %S' -o "$tmp/time" timeout 300 $launch "$CDP" \
                    --model "$model" --rule $rule --workers "$n" \
                    --batch "$b" --threads "$thr" --steps "$steps" --eval-every 0 --quiet \
                    --metrics "$tmp/m.json" --trace "$tmp/trace.json" $EXTRA >"$tmp/log" 2>&1; then
                echo "failed: $rule"; cat "$tmp/log"; continue
            fi
            st=$(grep -o '"step_time_s": [0-9.e+-]*' "$tmp/m.json" | tail -1 | awk '{print $2}')
            cpu=$(awk -v b="$base" -v k="$steps" 'END {printf "%.6g", ($2 + $3 - b) / (k - 2)}' "$tmp/time")
            # steps mean median p10
            tr=$("$PY" "$bench_lib/trace_steps.py" "$tmp/trace.json" | awk '{print $3, $4}')
            echo "$key $rule $rep $st $tr $cpu" | tee -a "$res"
        done
    done
done

echo
echo "== summary (ms per step; ratios: median over repetitions of cdp/dp measured back to back)"
"$PY" - "$res" "$EXTRA" <<'EOF'
import sys, statistics, collections
from bench_result import bench_result
extra = " " + sys.argv[2] if sys.argv[2] else ""      # EXTRA: part of every configuration
metrics = ("step_time_wall", "step_time_median", "step_time_p10", "cpu_time")
names = ("wall-clock step time (cdp_run --metrics step_time_s)",
         "median step period (--trace)",
         "10th-percentile step period (--trace; fast steps)",
         "CPU time per step (user+sys, all threads and ranks, start-up subtracted)")
d = [collections.defaultdict(dict) for _ in names]
for l in open(sys.argv[1]):
    f = l.split()
    key, rule, rep = f[:3]
    for j in range(len(names)):
        d[j][(key, rule)][rep] = float(f[3 + j])
keys = list(dict.fromkeys(k for k, _ in d[0]))
results = []        # printed after the tables
for name, metric, dd in zip(names, metrics, d):
    print(name)
    print(f"  {'case':44s} {'dp':>8s} {'cdp-v1':>8s} {'cdp-v2':>8s} {'v1/dp':>7s} {'v2/dp':>7s}")
    for k in keys:
        dp = dd.get((k, "dp"), {})
        row = [statistics.median(dd[(k, r)].values()) * 1e3 if dd.get((k, r)) else float("nan")
               for r in ("dp", "cdp-v1", "cdp-v2")]
        ratios = []
        for r in ("cdp-v1", "cdp-v2"):
            x = dd.get((k, r), {})
            rs = [x[i] / dp[i] for i in x if i in dp]
            ratios.append(statistics.median(rs) if rs else float("nan"))
        print(f"  {k:44s} {row[0]:8.2f} {row[1]:8.2f} {row[2]:8.2f} {ratios[0]:7.3f} {ratios[1]:7.3f}")
        for r, v in zip(("dp", "cdp-v1", "cdp-v2"), row):
            results.append((f"{k}{extra} {r}", metric, v, "ms"))
        for r, v in zip(("cdp-v1/dp", "cdp-v2/dp"), ratios):
            results.append((f"{k}{extra} {r}", metric, v, "ratio"))
print("target: cdp/dp <= 1.05")
for r in results:
    bench_result("cdp-vs-dp", *r)
EOF
