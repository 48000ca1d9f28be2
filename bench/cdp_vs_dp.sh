#!/bin/bash
# Step time of --rule dp vs cdp-v1 vs cdp-v2 with otherwise identical options,
# measured round-robin (dp, cdp-v1, cdp-v2, dp, ...) so that machine noise
# hits the three alike.  Reports the median step time per rule and the median
# of the per-repetition ratios cdp/dp (target: cdp at most 5% more per step).
#
# usage: bench/cdp_vs_dp.sh [BUILD_DIR]
# environment:
#   REPS     repetitions                              [5]
#   CASES    "RANKS:THREADS:MODEL:N:B ..."            [see below]
#   EXTRA    extra cdp_run options (e.g. --deterministic)
#   OUT      keep raw results here                   [a temporary directory]
set -u
BUILD=${1:-${top_builddir:-/work/build-bench}}
CDP=$BUILD/cdp_run
MPIRUN=${MPIRUN:-mpirun}
REPS=${REPS:-5}
EXTRA=${EXTRA:-}
PY=${PY:-python3}
CASES=${CASES:-"1:2:mlp:784-1024-1024-10:4:32 2:1:mlp:784-1024-1024-10:4:32 1:2:mlp:784-256-128-10:4:32 2:1:mlp:784-256-128-10:4:32"}
[ -x "$CDP" ] || { echo "cdp_vs_dp.sh: $CDP not found (build first)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT"; tmp=$OUT
else
    tmp=$(mktemp -d /tmp/cdp_vs_dp.XXXXXX); trap 'rm -rf "$tmp"' EXIT
fi
res=$tmp/cdp_vs_dp.txt
: >"$res"

steps_for() { case $1 in *1024-1024*) echo 100 ;; *) echo 400 ;; esac; }

echo "# $(date -u '+%Y-%m-%d %H:%M UTC') $(uname -n); $(nproc) CPUs; load: $(cut -d' ' -f1-3 /proc/loadavg)"
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
            rm -f "$tmp/m.json"
            # shellcheck disable=SC2086
            if ! /usr/bin/time -f '%e %U %S' -o "$tmp/time" timeout 300 $launch "$CDP" \
                    --model "$model" --rule $rule --workers "$n" \
                    --batch "$b" --threads "$thr" --steps "$steps" --eval-every 0 --quiet \
                    --metrics "$tmp/m.json" $EXTRA >"$tmp/log" 2>&1; then
                echo "failed: $rule"; cat "$tmp/log"; continue
            fi
            st=$(grep -o '"step_time_s": [0-9.e+-]*' "$tmp/m.json" | tail -1 | awk '{print $2}')
            cpu=$(awk -v b="$base" -v k="$steps" 'END {printf "%.6g", ($2 + $3 - b) / (k - 2)}' "$tmp/time")
            echo "$key $rule $rep $st $cpu" | tee -a "$res"
        done
    done
done

echo
echo "== summary (median step time; ratio = median over repetitions of cdp/dp measured back to back)"
"$PY" - "$res" <<'EOF'
import sys, statistics, collections
wall = collections.defaultdict(dict)
cpu = collections.defaultdict(dict)
for l in open(sys.argv[1]):
    key, rule, rep, st, c = l.split()
    wall[(key, rule)][rep] = float(st)
    cpu[(key, rule)][rep] = float(c)
keys = list(dict.fromkeys(k for k, _ in wall))
for name, d in (("wall-clock step time (ms, from cdp_run's summary)", wall),
                ("CPU time per step (ms, user+sys of all threads and ranks, start-up subtracted)", cpu)):
    print(name)
    print(f"  {'case':44s} {'dp':>8s} {'cdp-v1':>8s} {'cdp-v2':>8s} {'v1/dp':>7s} {'v2/dp':>7s}"
          "   best (min) of the repetitions: dp v1 v2 v1/dp v2/dp")
    for k in keys:
        dp = d.get((k, "dp"), {})
        row = [statistics.median(d[(k, r)].values()) * 1e3 if d.get((k, r)) else float("nan")
               for r in ("dp", "cdp-v1", "cdp-v2")]
        ratios = []
        for r in ("cdp-v1", "cdp-v2"):
            x = d.get((k, r), {})
            rs = [x[i] / dp[i] for i in x if i in dp]
            ratios.append(statistics.median(rs) if rs else float("nan"))
        best = [min(d[(k, r)].values()) * 1e3 if d.get((k, r)) else float("nan")
                for r in ("dp", "cdp-v1", "cdp-v2")]
        print(f"  {k:44s} {row[0]:8.2f} {row[1]:8.2f} {row[2]:8.2f} {ratios[0]:7.3f} {ratios[1]:7.3f}"
              f"   best: {best[0]:.2f} {best[1]:.2f} {best[2]:.2f}  {best[1] / best[0]:.3f} {best[2] / best[0]:.3f}")
print("target: cdp/dp <= 1.05 (ratios: median over repetitions of back-to-back runs)")
EOF
