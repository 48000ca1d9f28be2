#!/bin/bash
# cdp_run --plan --machine's memory per rank against a run's measured peaks:
#
#     nice bench/planning/memory_vs_measured.sh [BUILD_DIR]
#
# For each NAME@B of MODELS and each rule of RULES, N workers and L stages
# on one rank, 3x224x224 synthetic images, STEPS steps: the prediction's
# act_bytes_per_rank and state_bytes_per_rank (--plan --plan-steps STEPS
# --machine: a machine file with a FLOP rate only, as memory does not
# depend on times) against the run's summary lines "peak activation bytes
# per rank" and "model state bytes per rank, scheduled" (and "measured"),
# doc/reference.md section 7, and predicted / measured.  Result lines:
#     result planning-memory "<model> B=<b> <rule> N=<n> L=<l>" act_ratio|state_ratio
# and a Markdown table on stdout.
#
# environment (defaults): MODELS ["resnet50@2 vit-b16@1"], RULES ["dp cdp-v2"],
# N [8], L [4], STEPS [2], THREADS [2], OUT (keep the logs there)
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/common.sh"
BUILD=${1:-${top_builddir:-$bench_top}}
CDP=$BUILD/cdp_run
MODELS=${MODELS:-"resnet50@2 vit-b16@1"}
RULES=${RULES:-"dp cdp-v2"}
N=${N:-8}
L=${L:-4}
STEPS=${STEPS:-2}
THREADS=${THREADS:-2}
bench_start memory_vs_measured.sh results
bench_header
cat >"$tmp/machine.json" <<'EOF'
{"format": "cdp-machine-1", "compute": {"flops_per_s": 1e10, "update_s_per_param": 1e-9},
 "network": {"ranks_per_host": 1, "intra_host": {"latency_s": 1e-6, "bandwidth_Bps": 5e9},
             "inter_host": {"latency_s": 5e-5, "bandwidth_Bps": 1.25e8}}}
EOF
ratio() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN { if (a > 0 && b > 0) printf "%.4f", a / b; else print "nan" }'; }
printf '| model | B | rule | activations predicted | measured | ratio | state predicted | scheduled | measured | ratio (scheduled) |\n'
printf '|---|---|---|---|---|---|---|---|---|---|\n'
for mb in $MODELS; do
    model=${mb%@*} b=${mb#*@}
    data="synthetic:3x224x224:n=$((STEPS * N * b)):test=$b"
    for rule in $RULES; do
        args="--model $model --data $data --rule $rule --workers $N --stages $L --batch $b"
        pred=$("$CDP" --plan $args --plan-steps "$STEPS" --machine "$tmp/machine.json" 2>>"$tmp/log" |
               grep "^predict: rule=$rule ")
        pa=$(echo "$pred" | sed -n 's/.* act_bytes_per_rank=\([0-9]*\).*/\1/p')
        ps=$(echo "$pred" | sed -n 's/.* state_bytes_per_rank=\([0-9]*\).*/\1/p')
        log=$tmp/$model-$rule.log
        timeout 3600 "$CDP" $args --steps "$STEPS" --threads "$THREADS" --eval-every 0 >"$log" 2>&1 \
            || { tail -3 "$log" >&2; echo "$model $rule: cdp_run failed" >&2; }
        ma=$(sed -n 's/^ *peak activation bytes per rank *\([0-9]*\).*/\1/p' "$log")
        ms=$(sed -n 's/^ *model state bytes per rank, scheduled *\([0-9]*\).*/\1/p' "$log")
        mm=$(sed -n 's/^ *model state bytes per rank, measured *\([0-9]*\).*/\1/p' "$log")
        ra=$(ratio "$pa" "$ma") rs=$(ratio "$ps" "$ms")
        printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$model" "$b" "$rule" \
            "${pa:-?}" "${ma:-?}" "$ra" "${ps:-?}" "${ms:-?}" "${mm:-?}" "$rs"
        bench_result planning-memory "$model B=$b $rule N=$N L=$L" act_ratio "$ra" predicted/measured >>"$res"
        bench_result planning-memory "$model B=$b $rule N=$N L=$L" state_ratio "$rs" predicted/scheduled >>"$res"
    done
done
cat "$res"
