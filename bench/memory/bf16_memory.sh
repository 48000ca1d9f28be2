#!/bin/bash
# --precision bf16 against fp32: the measured peak activation bytes of the
# same run in both precisions, as a ratio, for resnet50 and vit-b16 on
# 3x224x224 synthetic images (cdp-v2 and dp, N workers, L stages, one rank).
# One command:
#
#     nice bench/memory/bf16_memory.sh [BUILD_DIR]
#
# The bytes are the executor's activation allocator at its peak (the
# "peak activation bytes per rank" of the summary; doc/reference.md
# section 7): stage outputs and saved areas, which bf16 keeps in bfloat16,
# and the gradients between stages, which stay float32.
#
# environment (defaults): MODELS ["resnet50@2 vit-b16@1"] (NAME@B), RULES
# ["cdp-v2 dp"], N [8], L [4], STEPS [2], THREADS [2]
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/common.sh"
BUILD=${1:-${top_builddir:-$bench_top}}
CDP=$BUILD/cdp_run
MODELS=${MODELS:-"resnet50@2 vit-b16@1"}
RULES=${RULES:-"cdp-v2 dp"}
N=${N:-8}
L=${L:-4}
STEPS=${STEPS:-2}
THREADS=${THREADS:-2}
bench_start bf16_memory.sh results
bench_header
printf '| model | B | rule | N | L | fp32 bytes | bf16 bytes | bf16/fp32 |\n|---|---|---|---|---|---|---|---|\n'
for mb in $MODELS; do
    model=${mb%@*} b=${mb#*@}
    [ "$b" = "$mb" ] && b=2
    for rule in $RULES; do
        declare -A got=()
        for p in fp32 bf16; do
            log=$tmp/$model-$rule-$p.log
            if ! timeout 3600 "$CDP" --model "$model" --data "synthetic:3x224x224:n=$((STEPS * N * b)):test=$b" \
                    --rule "$rule" --workers "$N" --stages "$L" --batch "$b" --steps "$STEPS" \
                    --threads "$THREADS" --eval-every 0 --precision "$p" >"$log" 2>&1; then
                tail -3 "$log" >&2
                echo "$model $rule $p: cdp_run failed" >&2
            fi
            got[$p]=$(sed -n 's/^ *peak activation bytes per rank *\([0-9]*\).*/\1/p' "$log")
        done
        ratio=$(awk -v a="${got[bf16]:-0}" -v b="${got[fp32]:-0}" 'BEGIN { if (a > 0 && b > 0) printf "%.4f", a / b; else print "nan" }')
        printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$model" "$b" "$rule" "$N" "$L" \
            "${got[fp32]:-?}" "${got[bf16]:-?}" "$ratio"
        bench_result bf16-memory "$model B=$b $rule N=$N L=$L" bf16_over_fp32_activations "$ratio" ratio >>"$res"
        unset got
    done
done
cat "$res"
