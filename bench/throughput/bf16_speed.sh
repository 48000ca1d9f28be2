#!/bin/bash
# --precision bf16 against fp32: the step time of the same run in both
# precisions, one rank, measured alternately (fp32, bf16, fp32, ...) so
# that the noise of other jobs on a shared machine hits both alike; per
# model the median of REPS step times of each, and fp32 / bf16 (the
# speed-up: above 1 when bf16 is faster).
#
#     bench/run bf16-speed [BUILD_DIR]
#
# The step time is cdp_run's own (whole run / steps, "step time" of the
# summary).  On the CPU, bf16 runs the Linear layers and all of
# attention's products through oneDNN's bf16 matmul (doc/reference.md
# section 3.12); the banner of the first bf16 run, kept in the output,
# names it.  PyTorch's bf16 autocast on the same network:
# bench/throughput/torch_vit_bf16.py.
#
# environment (defaults): CASES ["vit-tiny:1x28x28:64"] (MODEL:CxHxW:B, B
# the micro-batch), N [1] workers, L [1] stages, STEPS [8], THREADS [2],
# REPS [3]
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/common.sh"
BUILD=${1:-${top_builddir:-$bench_top}}
CDP=$BUILD/cdp_run
CASES=${CASES:-"vit-tiny:1x28x28:64"}
N=${N:-1}
L=${L:-1}
STEPS=${STEPS:-8}
THREADS=${THREADS:-2}
REPS=${REPS:-3}
bench_start bf16_speed.sh results
bench_header

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2); else print "nan" }'; }

printf '| model | input | B | fp32 s/step | bf16 s/step | fp32/bf16 |\n|---|---|---|---|---|---|\n' >"$tmp/table"
for c in $CASES; do
    IFS=: read -r model shape b <<<"$c"
    : >"$tmp/fp32" ; : >"$tmp/bf16"
    for rep in $(seq 1 "$REPS"); do
        for p in fp32 bf16; do
            log=$tmp/$model-$p-$rep.log
            if ! timeout 1800 "$CDP" --model "$model" --data "synthetic:$shape:n=$((STEPS * N * b)):test=$b" \
                    --workers "$N" --stages "$L" --batch "$b" --steps "$STEPS" --threads "$THREADS" \
                    --eval-every 0 --precision "$p" >"$log" 2>&1; then
                tail -3 "$log" >&2
                echo "$model $p: cdp_run failed" >&2
                continue
            fi
            [ "$rep" = 1 ] && [ "$p" = bf16 ] && awk '/^  backend |^  precision bf16/ { on = 1 } /^  host |^epoch / { on = 0 } on' "$log"
            st=$(sed -n 's/^ *step time *\([0-9.]*\) s.*/\1/p' "$log")
            echo "$model $shape B=$b $p rep $rep: $st s/step"
            echo "$st" >>"$tmp/$p"
        done
    done
    f=$(median <"$tmp/fp32") h=$(median <"$tmp/bf16")
    ratio=$(awk -v f="$f" -v h="$h" 'BEGIN { if (f > 0 && h > 0) printf "%.3f", f / h; else print "nan" }')
    printf '| %s | %s | %s | %s | %s | %s |\n' "$model" "$shape" "$b" "$f" "$h" "$ratio" >>"$tmp/table"
    bench_result bf16-speed "$model $shape B=$b N=$N L=$L threads=$THREADS" fp32_step_s "$f" s >>"$res"
    bench_result bf16-speed "$model $shape B=$b N=$N L=$L threads=$THREADS" bf16_step_s "$h" s >>"$res"
    bench_result bf16-speed "$model $shape B=$b N=$N L=$L threads=$THREADS" fp32_over_bf16 "$ratio" ratio >>"$res"
done
cat "$tmp/table"
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null) (1, 5, 15 min)"
cat "$res"
