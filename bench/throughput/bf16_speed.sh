#!/bin/bash
# --precision bf16's step time: cdp_run in fp32 and bf16 against PyTorch's
# torch.autocast("cpu", bfloat16) on the same cores, and the bf16 bound of
# the step, in one run.
#
#     bench/run bf16-speed [BUILD_DIR]        vit-tiny (B=64, 1x28x28)
#     bench/run bf16-conv-speed [BUILD_DIR]   resnet18-cifar (B=64, 3x32x32)
#
# Case: MODEL [vit-tiny] on SHAPE [1x28x28] synthetic images, B [64]
# samples a step, one rank, one micro-batch (N=1, L=1), THREADS [2], SGD
# (cdp_run's and PyTorch's: CDP_OPT ["--lr 0.03 --momentum 0.9"], the
# ResNets "--lr 0.05 --momentum 0.9 --weight-decay 5e-4", as the PyTorch
# scripts).  Each of REPS [3] repetitions runs, back to back (the noise of
# other jobs then hits them alike): cdp fp32, cdp bf16 (WARMUP + STEPS
# steps each, the step time the median of the steps after WARMUP, from
# --trace: bench/lib/trace_steps.py), then one PyTorch process measuring
# its configurations round-robin, each the median of STEPS steps after
# WARMUP: for a ViT bench/throughput/torch_vit_bf16.py, TORCH_CONFIGS
# ["bf16:t2:on"] (autocast, 2 threads, oneDNN on: its best here), for a
# ResNet bench/throughput/torch_autocast.py, TORCH_CONFIGS ["nchw:t2
# cl:t2"] (channels-first and channels_last).  Both sides are timed the
# same way: steady steps, start-up left out.  Figures: per configuration
# the median over the repetitions; the ratios fp32/bf16 (cdp's own
# speed-up) and torch/bf16 (above 1 when cdp is faster) against PyTorch's
# best configuration, per repetition, then their median.
# The bound (bench/throughput/bf16_gemm_bound.py, after the repetitions):
# the step's product FLOPs (convolutions, Linear layers, attention) at the
# best bf16 GEMM rate measured here on THREADS threads; fraction = bound /
# cdp's bf16 step time.
#
# environment (defaults): MODEL, SHAPE, B, THREADS, REPS, STEPS [6],
# WARMUP [2], TORCH_CONFIGS, CDP_OPT, PY [/usr/bin/python3], NAME
# [bf16-speed] (the result lines' benchmark name), OUT (keep the raw logs)
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/common.sh"
BUILD=${1:-${top_builddir:-$bench_top}}
CDP=$BUILD/cdp_run
PY=${PY:-/usr/bin/python3}
MODEL=${MODEL:-vit-tiny}
SHAPE=${SHAPE:-1x28x28}
NAME=${NAME:-bf16-speed}
B=${B:-64}
THREADS=${THREADS:-2}
REPS=${REPS:-3}
STEPS=${STEPS:-6}
WARMUP=${WARMUP:-2}
case $MODEL in
vit*) torch_script=torch_vit_bf16.py
      TORCH_CONFIGS=${TORCH_CONFIGS:-"bf16:t2:on"}
      CDP_OPT=${CDP_OPT:-"--lr 0.03 --momentum 0.9"} ;;
*)    torch_script=torch_autocast.py
      TORCH_CONFIGS=${TORCH_CONFIGS:-"nchw:t2 cl:t2"}
      CDP_OPT=${CDP_OPT:-"--lr 0.05 --momentum 0.9 --weight-decay 5e-4"} ;;
esac
"$PY" -c 'import torch, torchvision' 2>/dev/null ||
    { echo "bf16_speed.sh: $PY cannot import torch and torchvision" >&2; exit 2; }
bench_start bf16_speed.sh results
bench_header
echo "# MODEL=$MODEL SHAPE=$SHAPE B=$B THREADS=$THREADS REPS=$REPS STEPS=$STEPS WARMUP=$WARMUP TORCH_CONFIGS=\"$TORCH_CONFIGS\" CDP_OPT=\"$CDP_OPT\""

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2); else print "nan" }'; }

k=$((WARMUP + STEPS + 1))
# run_cdp REP PRECISION: appends the median step time to $tmp/cdp-PRECISION
run_cdp() {
    local rep=$1 p=$2 log=$tmp/cdp-$2-$1.log tr=$tmp/trace.json st
    rm -f "$tr"
    if ! timeout 1800 "$CDP" --model "$MODEL" --data "synthetic:$SHAPE:n=$((B * (k + 1))):test=$B" \
            --workers 1 --stages 1 --batch "$B" --steps "$k" --threads "$THREADS" \
            --eval-every 0 $CDP_OPT --lr-decay-epochs 0 \
            --precision "$p" --trace "$tr" >"$log" 2>&1; then
        tail -3 "$log" >&2
        echo "cdp $p: cdp_run failed" >&2
        return
    fi
    [ "$rep" = 1 ] && [ "$p" = bf16 ] &&
        awk '/^  backend |^  precision bf16/ { on = 1 } /^  host |^epoch / { on = 0 } on' "$log"
    # shellcheck disable=SC2046
    set -- $("$PY" "$bench_lib/trace_steps.py" "$tr" --skip "$WARMUP")
    echo "cdp $p rep $rep: median $3 s/step over $1 steps"
    echo "$3" >>"$tmp/cdp-$p"
    echo "$3" >"$tmp/last-$p"
}

: >"$tmp/cdp-fp32"; : >"$tmp/cdp-bf16"; : >"$tmp/ratio-fp32"; : >"$tmp/ratio-torch"
for rep in $(seq 1 "$REPS"); do
    echo "-- repetition $rep, load $(cut -d' ' -f1 /proc/loadavg)"
    run_cdp "$rep" fp32
    run_cdp "$rep" bf16
    timeout 1800 "$PY" "$here/$torch_script" --model "$MODEL" --shape "$SHAPE" --batch "$B" \
        --configs "$TORCH_CONFIGS" --steps "$STEPS" --warmup "$WARMUP" --reps 1 \
        >"$tmp/torch-$rep.log" 2>&1 ||
        { echo "$torch_script failed:"; tail -5 "$tmp/torch-$rep.log"; }
    [ "$rep" = 1 ] && grep "^#" "$tmp/torch-$rep.log"
    sed -n 's/^\(AUTOCAST\|TORCHREP\) .* config=\([^ ]*\) rep=[0-9]* step_s=\([0-9.]*\).*/\2 \3/p' \
        "$tmp/torch-$rep.log" | while read -r cfg s; do
        echo "torch autocast $cfg rep $rep: median $s s/step"
        echo "$s" >>"$tmp/torch-$cfg"
        echo "$cfg $s" >>"$tmp/torch-rep-$rep"
    done
    h=$(cat "$tmp/last-bf16" 2>/dev/null) f=$(cat "$tmp/last-fp32" 2>/dev/null)
    t=$(sort -k2 -g "$tmp/torch-rep-$rep" 2>/dev/null | head -1 | cut -d' ' -f2)
    awk -v f="$f" -v h="$h" 'BEGIN { if (f > 0 && h > 0) printf "%.4f\n", f / h }' >>"$tmp/ratio-fp32"
    awk -v t="$t" -v h="$h" 'BEGIN { if (t > 0 && h > 0) printf "%.4f\n", t / h }' >>"$tmp/ratio-torch"
    rm -f "$tmp/last-bf16" "$tmp/last-fp32"
done

echo "-- bound, load $(cut -d' ' -f1 /proc/loadavg)"
timeout 1800 "$PY" "$here/bf16_gemm_bound.py" --model "$MODEL" --shape "$SHAPE" --batch "$B" \
    --threads "$THREADS" >"$tmp/bound.log" 2>&1 || { echo "bf16_gemm_bound.py failed:"; tail -5 "$tmp/bound.log"; }
cat "$tmp/bound.log"
bound=$(sed -n 's/^BOUND .* step_s=\([0-9.]*\) .*/\1/p' "$tmp/bound.log")

cfg="$MODEL $SHAPE B=$B N=1 L=1 threads=$THREADS"
f=$(median <"$tmp/cdp-fp32") h=$(median <"$tmp/cdp-bf16")
best_cfg= best=
for c in $TORCH_CONFIGS; do
    [ -s "$tmp/torch-$c" ] || continue
    m=$(median <"$tmp/torch-$c")
    if [ -z "$best" ] || awk -v a="$m" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$m best_cfg=$c; fi
done
rf=$(median <"$tmp/ratio-fp32") rt=$(median <"$tmp/ratio-torch")
frac=$(awk -v b="${bound:-0}" -v h="$h" 'BEGIN { if (b > 0 && h > 0) printf "%.3f", b / h; else print "nan" }')
printf '\n| %s | s/step (median of %s) |\n|---|---|\n' "$cfg" "$REPS"
printf '| cdp fp32 | %s |\n| cdp bf16 | %s |\n' "$f" "$h"
for c in $TORCH_CONFIGS; do
    [ -s "$tmp/torch-$c" ] && printf '| torch autocast %s | %s |\n' "$c" "$(median <"$tmp/torch-$c")"
done
printf '| bf16 bound | %s |\n' "${bound:-nan}"
echo "fp32/bf16 (median of per-repetition ratios): $rf; best torch ($best_cfg)/bf16: $rt; bound/bf16: $frac"
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null) (1, 5, 15 min)"
{
    bench_result "$NAME" "$cfg" fp32_step_s "$f" s
    bench_result "$NAME" "$cfg" bf16_step_s "$h" s
    bench_result "$NAME" "$cfg" fp32_over_bf16 "$rf" ratio
    bench_result "$NAME" "$cfg" torch_autocast_best_step_s "$best" "s ($best_cfg)"
    bench_result "$NAME" "$cfg" torch_best_over_bf16 "$rt" ratio
    bench_result "$NAME" "$cfg" bf16_bound_step_s "${bound:-nan}" s
    bench_result "$NAME" "$cfg" fraction_of_bf16_bound "$frac" ratio
} >>"$res"
cat "$res"
