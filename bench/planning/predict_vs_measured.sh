#!/bin/bash
# cdp_run --plan --machine's predicted step time against measured runs:
#
#     nice bench/planning/predict_vs_measured.sh [BUILD_DIR]
#
# For each model of MODELS (B samples a worker, one worker a rank; MODEL@K:
# runs of K steps for that model, else STEPS), on shared memory (NP in
# SHM_RANKS ranks on this machine) and on emulated hosts (tests/lib/hosts.sh,
# 2 hosts x 1 rank, each host's link shaped with --rate RATE, for RATE in
# RATES), REPS rounds of, in turn:
#  - a profiling run: dp, 3 x K steps in three segments (--log-every K),
#    --layer-times-out: the layer rows of the later segments and the start
#    cost (the first segment's time beyond the later ones' median), under
#    the same sharing of the cores as the runs it predicts;
#  - a measured run of K steps of each rule in RULES (cdp_run --quiet:
#    step_time_s, training time / steps of one segment, fill and drain
#    included);
# then the machine file: each compute figure the median of the profiles',
# and cdp_netmeasure, placed as the runs, fills in the link (NP = 1: none;
# on the hosts ranks_per_host is then set to 1) (python3); and for each rule
# the prediction (cdp_run --plan --plan-ranks NP --workers NP --plan-steps K
# --machine FILE: step_s), the measured median, and predicted / measured.
# Result lines (bench_result):
#     result planning "<model> <where> <rule>" predicted_step_s|measured_step_s|ratio
# and per (model, where) whether the dp/cdp ranking predicted is the
# measured one: "yes" when the order is the same, or when both are ties
# (predicted within TIE of each other, measured within 4 TIE: with N = 1
# the two rules run the same timeline).  The table (Markdown) goes to stdout after the rows.
#
# This machine: 2 cores shared with other work; the measured times carry
# its noise (the header's load line says how busy it was).  Needs root for
# the emulated hosts; without it those rows are skipped (hosts.sh exits 77).
#
# environment (defaults):
#   MODELS ["mlp:784-256-128-10@64 resnet20@16"]  B [32]  STEPS [8]  REPS [3]
#   RULES ["dp cdp-v2"]  SHM_RANKS ["1 2 3 4"]  RATES ["1gbit 300mbit 100mbit"]
#   TIE [0.05]  TIMEOUT [300]
#   OUT (keep the machine files and logs there)
# (The MLP's steps take about 1 ms: in 8 of them its start cost, which moves
# by half from run to run, is most of what a run measures.)
# Smoke (~2 min): MODELS=mlp:784-256-128-10 RATES=100mbit REPS=1 bench/planning/predict_vs_measured.sh

set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/common.sh"
MODELS=${MODELS:-"mlp:784-256-128-10@64 resnet20@16"}
B=${B:-32}
STEPS=${STEPS:-8}
REPS=${REPS:-3}
RULES=${RULES:-"dp cdp-v2"}
SHM_RANKS=${SHM_RANKS:-"1 2 3 4"}
RATES=${RATES:-"1gbit 300mbit 100mbit"}
TIE=${TIE:-0.05}
TIMEOUT=${TIMEOUT:-300}
BUILD=${1:-${top_builddir:-$bench_top}}
CDP=$BUILD/cdp_run
NETMEASURE=$BUILD/cdp_netmeasure
bench_start predict_vs_measured.sh rows.txt
HOSTS_SH=$bench_top/tests/lib/hosts.sh
# the emulated hosts start ranks in a clean environment (as ssh does): the
# BLAS kernel choice goes along, or the ranks refuse to mix kernels
blas_env=
for v in OPENBLAS_CORETYPE OPENBLAS_L2_SIZE; do [ -n "${!v:-}" ] && blas_env="$blas_env -x $v"; done
# set_steps K: the measured runs of K steps, the profiling runs of three
# segments of K steps (the machine file's rows from the later two, its
# start_s the first one's extra)
set_steps() {
    steps=$1
    common="--data synthetic --batch $B --steps $steps --eval-every 0 --threads 1"
    profile="--data synthetic --batch $B --steps $((3 * steps)) --log-every $steps --metrics /dev/null \
 --eval-every 0 --threads 1"
}

# median_rows OUT FILE...: the machine files of REPS profiling runs as one,
# each figure of the compute part their median (the load of a shared
# machine changes by the minute; one run's rows may catch a busy one)
median_rows() {
    python3 - "$@" <<'PY'
import json, statistics, sys
out, files = sys.argv[1], sys.argv[2:]
ms = [json.load(open(f)) for f in files]
m = ms[0]
c = m["compute"]
for k in ("loss_s", "flops_per_s", "update_s_per_param", "start_s"):
    if k in c:
        c[k] = statistics.median(x["compute"][k] for x in ms)
rows = [{r["index"]: r for r in x["compute"]["layers"]} for x in ms]
for r in c["layers"]:
    for k in ("fwd_s", "bwd_s"):
        r[k] = statistics.median(x.get(r["index"], {}).get(k, 0.0) for x in rows)
json.dump(m, open(out, "w"), indent=1)
PY
}

# one_per_host FILE: the 2-rank machine file's ranks on hosts of their own
one_per_host() {
    python3 - "$1" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["network"]["ranks_per_host"] = 1
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
}

# links FILE: the measured links of a machine file, for the log
links() {
    python3 -c "import json,sys; n=json.load(open(sys.argv[1]))['network']; \
print(' '.join('%s=%s' % (k, n[k]) for k in sorted(n)))" "$1"
}

# start_of FILE: its measured start cost
start_of() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['compute'].get('start_s', 0))" "$1"; }

median() { sort -g | awk '{a[NR]=$1} END {if (NR) print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# one MODEL WHERE NP SPLIT LAUNCH...: the machine measured, and predicted
# and measured step times for each rule, with LAUNCH (SPLIT 1: the ranks on
# hosts of their own).  The profiling runs and the measured runs take turns,
# run by run, and so do the rules: this VM's speed drifts by 10-20% over
# minutes (other tenants), and a profile taken minutes before the runs it
# predicts had moved by that much.
one() {
    local model=$1 where=$2 np=$3 split=$4
    shift 4
    local rule pred meas r s ratio machine=$tmp/net.json
    declare -A P M
    for rule in $RULES; do : >"$tmp/m-$rule"; done
    rm -f "$tmp"/rows-*.json
    for r in $(seq "$REPS"); do
        "$@" "$CDP" --model "$model" --rule dp --workers "$np" $profile --quiet \
            --layer-times-out "$tmp/rows-$r.json" >>"$tmp/log" 2>&1 \
            || echo "# measuring the machine ($where) failed (see $tmp/log)"
        for rule in $RULES; do
            s=$("$@" "$CDP" --model "$model" --rule "$rule" --workers "$np" $common --quiet \
                    2>>"$tmp/log" | sed -n 's/.*step_time_s \([0-9.e+-]*\).*/\1/p')
            [ -n "$s" ] && echo "$s" >>"$tmp/m-$rule"
        done
    done
    median_rows "$tmp/machine.json" "$tmp"/rows-*.json
    cp "$tmp/machine.json" "$machine"
    if [ "$np" -gt 1 ]; then
        "$@" "$NETMEASURE" --machine "$tmp/machine.json" --machine-out "$machine" >>"$tmp/log" 2>&1 \
            || echo "# measuring the links ($where) failed (see $tmp/log)"
        [ "$split" = 1 ] && one_per_host "$machine"
    fi
    echo "# $model $where: start_s=$(start_of "$machine") $( [ "$np" -gt 1 ] && links "$machine")"
    for rule in $RULES; do
        pred=$("$CDP" --plan --plan-ranks "$np" --workers "$np" --model "$model" --data synthetic \
                   --batch "$B" --rule "$rule" --plan-steps "$steps" --machine "$machine" 2>>"$tmp/log" |
               sed -n "s/^predict: rule=$rule .* step_s=\([^ ]*\) .*/\1/p")
        cp "$tmp/m-$rule" "$tmp/m"
        meas=$(median <"$tmp/m")
        ratio=$(awk -v p="${pred:-0}" -v m="${meas:-0}" 'BEGIN { if (p > 0 && m > 0) printf "%.3f", p / m }')
        P[$rule]=$pred M[$rule]=$meas
        bench_result planning "$model $where $rule" predicted_step_s "$pred" s | tee -a "$res"
        bench_result planning "$model $where $rule" measured_step_s "$meas" s | tee -a "$res"
        bench_result planning "$model $where $rule" ratio "$ratio" predicted/measured | tee -a "$res"
        echo "| $model | $where | $rule | $pred | $meas ($(wc -l <"$tmp/m") runs) | $ratio |" >>"$tmp/table"
    done
    if [ -n "${P[dp]:-}" ] && [ -n "${P[cdp-v2]:-}" ] && [ -n "${M[dp]:-}" ] && [ -n "${M[cdp-v2]:-}" ]; then
        local ok
        ok=$(awk -v a="${P[dp]}" -v b="${P[cdp-v2]}" -v c="${M[dp]}" -v d="${M[cdp-v2]}" -v t="$TIE" \
                 'function rel(x, y) { return (x > y ? x - y : y - x) / (x < y ? x : y) }
                  BEGIN { if (rel(a, b) < t) print (rel(c, d) < 4 * t) ? "yes (tie)" : "no (tie predicted)";
                          else print ((a < b) == (c < d)) ? "yes" : "no" }')
        bench_result planning "$model $where" ranking_right "$ok" - | tee -a "$res"
        echo "| $model | $where | ranking dp vs cdp-v2 right | | | $ok |" >>"$tmp/table"
    fi
}

{
bench_header
echo "# links measured by cdp_netmeasure (shared memory on NP ranks; the host link at each rate)"
: >"$tmp/table"
for spec in $MODELS; do
    model=${spec%@*}
    case $spec in *@*) set_steps "${spec##*@}" ;; *) set_steps "$STEPS" ;; esac
    echo "# $model: runs of $steps steps"
    for np in $SHM_RANKS; do
        one "$model" "shm np=$np" "$np" 0 timeout "$TIMEOUT" mpirun --oversubscribe --bind-to none -np "$np"
    done
    for rate in $RATES; do
        "$HOSTS_SH" --hosts 2 --slots 1 -- true >/dev/null 2>&1
        if [ $? -eq 77 ]; then
            echo "# emulated hosts not available here (hosts.sh exit 77): rate $rate skipped"
            continue
        fi
        one "$model" "2 hosts $rate" 2 1 "$HOSTS_SH" --hosts 2 --slots 1 --rate "$rate" -- \
            timeout "$TIMEOUT" mpirun --bind-to none -np 2 $blas_env
    done
done
echo
echo "| model | where | rule | predicted step_s | measured step_s (median) | predicted/measured |"
echo "| --- | --- | --- | --- | --- | --- |"
cat "$tmp/table"
} | tee "$tmp/rows.out"
