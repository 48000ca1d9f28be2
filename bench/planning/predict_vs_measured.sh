#!/bin/bash
# cdp_run --plan --machine's predicted step time against measured runs:
#
#     nice bench/planning/predict_vs_measured.sh [BUILD_DIR]
#
# For each model of MODELS (B samples a worker, one worker a rank):
#  1. the machine: a dp run of STEPS steps on NP ranks with
#     --layer-times-out writes the layer rows (measured under the same
#     sharing of the cores as the runs below: NP ranks on this machine);
#     its network part is then set to the link under test (python3);
#  2. shared memory, NP in SHM_RANKS: ranks_per_host NP, shared-memory
#     links of SHM_LATENCY s and SHM_BW B/s (assumed, not measured);
#  3. emulated hosts (tests/lib/hosts.sh, 2 hosts x 1 rank, each host's
#     link shaped with --rate RATE, for RATE in RATES): ranks_per_host 1,
#     the host link at RATE/8 bytes a second and HOST_LATENCY s (assumed:
#     TCP through veth pairs and a bridge);
# and for each rule in RULES: the prediction (cdp_run --plan --plan-ranks
# NP --workers NP --plan-steps STEPS --machine FILE: step_s) and REPS
# measured runs of STEPS steps (cdp_run --quiet: step_time_s, the same
# figure: training time / steps of one segment, fill and drain included),
# their median, and predicted / measured.  Result lines (bench_result):
#     result planning "<model> <where> <rule>" predicted_step_s|measured_step_s|ratio
# and per (model, where) whether the dp/cdp ranking predicted is the
# measured one.  The table (Markdown) goes to stdout after the rows.
#
# This machine: 2 cores shared with other work; the measured times carry
# its noise (the header's load line says how busy it was).  Needs root for
# the emulated hosts; without it those rows are skipped (hosts.sh exits 77).
#
# environment (defaults):
#   MODELS ["mlp:784-256-128-10 resnet20"]  B [32]  STEPS [8]  REPS [3]
#   RULES ["dp cdp-v2"]  SHM_RANKS ["1 2"]  RATES ["1gbit 300mbit 100mbit"]
#   SHM_LATENCY [2e-6]  SHM_BW [2e9]  HOST_LATENCY [1e-4]  TIMEOUT [300]
#   OUT (keep the machine files and logs there)
# Smoke (~2 min): MODELS=mlp:784-256-128-10 RATES=100mbit REPS=1 bench/planning/predict_vs_measured.sh

set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/common.sh"
MODELS=${MODELS:-"mlp:784-256-128-10 resnet20"}
B=${B:-32}
STEPS=${STEPS:-8}
REPS=${REPS:-3}
RULES=${RULES:-"dp cdp-v2"}
SHM_RANKS=${SHM_RANKS:-"1 2"}
RATES=${RATES:-"1gbit 300mbit 100mbit"}
SHM_LATENCY=${SHM_LATENCY:-2e-6}
SHM_BW=${SHM_BW:-2e9}
HOST_LATENCY=${HOST_LATENCY:-1e-4}
TIMEOUT=${TIMEOUT:-300}
BUILD=${1:-${top_builddir:-$bench_top}}
CDP=$BUILD/cdp_run
bench_start predict_vs_measured.sh rows.txt
HOSTS_SH=$bench_top/tests/lib/hosts.sh
# the emulated hosts start ranks in a clean environment (as ssh does): the
# BLAS kernel choice goes along, or the ranks refuse to mix kernels
blas_env=
for v in OPENBLAS_CORETYPE OPENBLAS_L2_SIZE; do [ -n "${!v:-}" ] && blas_env="$blas_env -x $v"; done
common="--data synthetic --batch $B --steps $STEPS --eval-every 0 --threads 1"

# set_net IN OUT RANKS_PER_HOST LATENCY BYTES_PER_S: the machine file IN
# with its network part replaced (both links the same: one kind is used)
set_net() {
    python3 - "$@" <<'PY'
import json, sys
src, dst, h, lat, bw = sys.argv[1:6]
m = json.load(open(src))
link = {"latency_s": float(lat), "bandwidth_Bps": float(bw)}
m["network"] = {"ranks_per_host": int(h), "intra_host": link, "inter_host": link}
json.dump(m, open(dst, "w"), indent=1)
PY
}

# rate_bytes RATE: tc's 100mbit as bytes a second
rate_bytes() {
    python3 -c "import re,sys; v,u=re.fullmatch(r'([0-9.]+)([kmg]?)bit',sys.argv[1]).groups(); \
print(float(v)*{'':1,'k':1e3,'m':1e6,'g':1e9}[u]/8)" "$1"
}

median() { sort -g | awk '{a[NR]=$1} END {if (NR) print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# one MODEL WHERE NP MACHINE LAUNCH...: predicted and measured for each rule
one() {
    local model=$1 where=$2 np=$3 machine=$4
    shift 4
    local rule pred meas r s ratio
    declare -A P M
    for rule in $RULES; do
        pred=$("$CDP" --plan --plan-ranks "$np" --workers "$np" --model "$model" --data synthetic \
                   --batch "$B" --rule "$rule" --plan-steps "$STEPS" --machine "$machine" 2>>"$tmp/log" |
               sed -n "s/^predict: rule=$rule .* step_s=\([^ ]*\) .*/\1/p")
        : >"$tmp/m"
        for r in $(seq "$REPS"); do
            s=$("$@" "$CDP" --model "$model" --rule "$rule" --workers "$np" $common --quiet \
                    2>>"$tmp/log" | sed -n 's/.*step_time_s \([0-9.e+-]*\).*/\1/p')
            [ -n "$s" ] && echo "$s" >>"$tmp/m"
        done
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
        ok=$(awk -v a="${P[dp]}" -v b="${P[cdp-v2]}" -v c="${M[dp]}" -v d="${M[cdp-v2]}" \
                 'BEGIN { print ((a < b) == (c < d)) ? "yes" : "no" }')
        bench_result planning "$model $where" ranking_right "$ok" - | tee -a "$res"
        echo "| $model | $where | ranking dp vs cdp-v2 right | | | $ok |" >>"$tmp/table"
    fi
}

{
bench_header
echo "# shared-memory links assumed ${SHM_LATENCY} s + bytes / ${SHM_BW} B/s; host links ${HOST_LATENCY} s + bytes / (RATE/8)"
: >"$tmp/table"
for model in $MODELS; do
    for np in $SHM_RANKS 2; do   # the 2-rank file also serves the hosts
        [ -f "$tmp/machine-$np.json" ] && continue
        timeout "$TIMEOUT" mpirun --oversubscribe --bind-to none -np "$np" "$CDP" --model "$model" \
            --rule dp --workers "$np" $common --quiet --layer-times-out "$tmp/machine-$np.json" \
            >>"$tmp/log" 2>&1 || echo "# measuring the machine on $np ranks failed (see $tmp/log)"
    done
    for np in $SHM_RANKS; do
        set_net "$tmp/machine-$np.json" "$tmp/shm-$np.json" "$np" "$SHM_LATENCY" "$SHM_BW"
        one "$model" "shm np=$np" "$np" "$tmp/shm-$np.json" \
            timeout "$TIMEOUT" mpirun --oversubscribe --bind-to none -np "$np"
    done
    for rate in $RATES; do
        set_net "$tmp/machine-2.json" "$tmp/hosts-$rate.json" 1 "$HOST_LATENCY" "$(rate_bytes "$rate")"
        "$HOSTS_SH" --hosts 2 --slots 1 -- true >/dev/null 2>&1
        if [ $? -eq 77 ]; then
            echo "# emulated hosts not available here (hosts.sh exit 77): rate $rate skipped"
            continue
        fi
        one "$model" "2 hosts $rate" 2 "$tmp/hosts-$rate.json" \
            "$HOSTS_SH" --hosts 2 --slots 1 --rate "$rate" -- \
            timeout "$TIMEOUT" mpirun --bind-to none -np 2 $blas_env
    done
    rm -f "$tmp"/machine-*.json
done
echo
echo "| model | where | rule | predicted step_s | measured step_s (median) | predicted/measured |"
echo "| --- | --- | --- | --- | --- | --- |"
cat "$tmp/table"
} | tee "$tmp/rows.out"
