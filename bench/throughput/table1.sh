#!/usr/bin/env bash
# The paper's Table 1, measured: every framework (replicated on 1 and on 4
# ranks, model-parallel, zero on 4 ranks) under dp and cdp-v2 on one model,
# with the figures cdp_run measures.  Collective calls per step come from a
# PMPI interposer (tests/lib/pmpi_count.c): the difference between a run of
# 2K and one of K steps, divided by K, so start-up and reporting cancel out.
#
#   bench/throughput/table1.sh [BUILD_DIR]   (default: the source tree, built in place)
#
# Environment: MODEL, STAGES, WORKERS, BATCH, STEPS to change the run.
# The table's figures end the output again as result lines (bench/README).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/common.sh"
build=${1:-$bench_top}
CDP="$build/cdp_run"
PRELOAD="$build/tests/lib/.libs/libpmpicount.so"
[ -x "$CDP" ] || { echo "table1: build cdp first (no $CDP)"; exit 1; }
[ -f "$PRELOAD" ] || make -C "$build" tests/lib/libpmpicount.la >/dev/null
MODEL=${MODEL:-mlp:512-512-512-512-512-512-512-512-10}
STAGES=${STAGES:-8}
WORKERS=${WORKERS:-4}
BATCH=${BATCH:-32}
STEPS=${STEPS:-10}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
results=$tmp/result_lines.txt
: >"$results"
common="--data synthetic --model $MODEL --stages $STAGES --workers $WORKERS --batch $BATCH --quiet --eval-every 0"

cell() {  # name framework np rule
    local name=$1 fw=$2 np=$3 rule=$4
    local steps2=$((2 * STEPS))
    for k in $STEPS $steps2; do
        rm -f "$tmp"/pmpi.*
        timeout 900 mpirun --oversubscribe --bind-to none -np "$np" -x LD_PRELOAD="$PRELOAD" \
            -x CDP_PMPI_OUT="$tmp/pmpi" "$CDP" $common --framework "$fw" --rule "$rule" --steps "$k" \
            --metrics "$tmp/m$k.json" >/dev/null
        cat "$tmp"/pmpi.* | awk '{s += $2} END {print s}' > "$tmp/c$k"
    done
    python3 - "$name" "$rule" "$tmp/m$steps2.json" "$(cat "$tmp/c$STEPS")" "$(cat "$tmp/c$steps2")" "$STEPS" \
        "$results" "$MODEL L=$STAGES N=$WORKERS B=$BATCH" <<'PY'
import json, sys
from bench_result import bench_result
name, rule, path, c1, c2, k, results, setup = sys.argv[1:]
s = json.loads(open(path).read().strip().splitlines()[-1])
per_step = (int(c2) - int(c1)) / int(k)
mib = lambda b: "%.2f" % (b / 2**20)
print("| %-22s | %-6s | %5d | %9s | %9s | %9s | %7.1f | %9s | %9.2f |" % (
    name, rule, s["ranks"], mib(s["peak_activation_bytes"]), mib(s["peak_activation_bytes_per_rank"]),
    mib(s["model_state_bytes_per_rank"]), per_step, mib(s["bytes_sent_peak_tick"]),
    s["step_time_s"] * 1e3))
cfg = f"{setup} {name} {rule}"
with open(results, "a") as out:        # printed after the table
    for key, unit in (("ranks", "count"), ("peak_activation_bytes", "bytes"),
                      ("peak_activation_bytes_per_rank", "bytes"),
                      ("model_state_bytes_per_rank", "bytes"), ("bytes_sent_peak_tick", "bytes")):
        bench_result("table1", cfg, key, s[key], unit, file=out)
    bench_result("table1", cfg, "collective_calls_per_step", per_step, "count", file=out)
    bench_result("table1", cfg, "step_time", s["step_time_s"] * 1e3, "ms", file=out)
PY
}

needed() {
    "$CDP" --plan --framework model-parallel --workers "$WORKERS" --stages "$STAGES" --rule "$1" \
        --model "$MODEL" | sed -n 's/^ranks used: \([0-9]*\).*/\1/p'
}

bench_header
echo "cdp Table 1, measured: $MODEL, L=$STAGES stages, N=$WORKERS workers x B=$BATCH, synthetic data, $(nproc) cores, $(date -u +%F)"
echo
echo "| framework              | rule   | ranks | act. peak | act./rank | state/rank | coll./step | peak tick | step (ms) |"
echo "|------------------------|--------|------:|----------:|----------:|-----------:|-----------:|----------:|----------:|"
for rule in dp cdp-v2; do cell "replicated, P = 1" replicated 1 $rule; done
for rule in dp cdp-v2; do cell "replicated, P = 4" replicated 4 $rule; done
for rule in dp cdp-v2; do cell "model-parallel" model-parallel "$(needed $rule)" $rule; done
for rule in dp cdp-v2; do cell "zero, P = 4" zero 4 $rule; done
echo
echo "act. peak: largest activation bytes live at one tick, all ranks (MiB); act./rank: the same per rank;"
echo "state/rank: parameters, momentum, gradient buffers held by a rank at its peak (MiB);"
echo "coll./step: MPI collective calls per training step, all ranks, counted by PMPI;"
echo "peak tick: bytes sent in the busiest tick, all ranks (MiB; an all-reduce counts 2(P-1)/P x its size per rank);"
echo "step: wall time per step. Ranks beyond the 2 cores are oversubscribed: compare step times within a row pair only."
cat "$results"
