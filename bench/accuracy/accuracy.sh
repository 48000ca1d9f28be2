#!/bin/bash
# Test accuracy under every rule, as a user runs it: for each rule (RULES),
#   mpirun -np 4 cdp_run --model MODEL --augment A --epochs E --rule RULE
# with, for a ViT (MODEL vit*),
#   --optimizer adamw [--lr LR] [--betas BETAS] [--weight-decay WD] --lr-schedule cosine
#   --warmup-steps W
# and for any other model cdp's defaults (SGD lr 0.03, momentum 0.9, the lr
# halved every 3 epochs), on Fashion-MNIST (4 workers of 32 samples, 4
# stages), one rule after the other (they would share the cores); reports
# each rule's test accuracy after every epoch, its final accuracy and wall
# time, and the largest gap between the rules' final accuracies; then the
# same as result lines (bench/README), the accuracy of every epoch included.
#
# usage: bench/accuracy/accuracy.sh [BUILD_DIR]
#   MODEL=resnet20 EPOCHS=15 bench/accuracy/accuracy.sh      the ResNet accuracy figure
#   MODEL=vit-tiny EPOCHS=15 bench/accuracy/accuracy.sh      the ViT one (the default)
# environment: MODEL [vit-tiny]  RULES ["dp cdp-v1 cdp-v2"]  EPOCHS [15]
#   WARMUP [500] (ViT)  LR, WD, BETAS [unset: cdp's defaults; AdamW's are
#   torch.optim.AdamW's 0.001, 0.01 and 0.9,0.999]  RANKS [4]  EXTRA (more options)
#   CORETYPE [unset: OpenBLAS picks the machine's kernel; an OPENBLAS_CORETYPE
#   in the environment is removed] the kernel fixes sgemm's bits, so rules
#   compared must run on one kernel
#   AUGMENT [crop=4,flip; none: no augmentation]
#   OUT (keep the logs there)
#   MODEL=mlp:784-256-128-10 AUGMENT=none EPOCHS=10 bench/accuracy/accuracy.sh
#                                                   README's MLP table
# Takes EPOCHS x ~3.5-5 min per rule (vit-tiny) or ~2.5-5 min (resnet20) on
# 2 cores (bench/RESULTS.md).
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/common.sh"
BUILD=${1:-${top_builddir:-$bench_top}}
CDP=$BUILD/cdp_run
MODEL=${MODEL:-vit-tiny}
RULES=${RULES:-"dp cdp-v1 cdp-v2"}
EPOCHS=${EPOCHS:-15}
LR=${LR:-}
WD=${WD:-}
BETAS=${BETAS:-}
WARMUP=${WARMUP:-500}
RANKS=${RANKS:-4}
EXTRA=${EXTRA:-}
AUGMENT=${AUGMENT:-crop=4,flip}
aug="--augment $AUGMENT"
[ "$AUGMENT" = none ] && aug=
if [ -n "${CORETYPE:-}" ]; then export OPENBLAS_CORETYPE=$CORETYPE; else unset OPENBLAS_CORETYPE; fi
bench_start accuracy.sh results.txt

case $MODEL in
    vit*) opt="--optimizer adamw${LR:+ --lr $LR}${BETAS:+ --betas $BETAS}${WD:+ --weight-decay $WD} \
--lr-schedule cosine --warmup-steps $WARMUP"
          what="adamw lr ${LR:-0.001} betas ${BETAS:-0.9,0.999} wd ${WD:-0.01}, cosine, warm-up $WARMUP" ;;
    *)    opt="${LR:+--lr $LR}${WD:+ --weight-decay $WD}"
          what="sgd lr ${LR:-0.03} wd ${WD:-0}, momentum 0.9, lr halved every 3 epochs" ;;
esac
bench_header
echo "# cdp: $("$CDP" --version 2>&1 | head -1)"
setup="$MODEL $what, augment $AUGMENT, $EPOCHS epochs, $RANKS ranks${EXTRA:+, $EXTRA}"
: >"$tmp/result_lines.txt"
for rule in $RULES; do
    log=$tmp/$rule.log
    cmd="mpirun --oversubscribe -np $RANKS $CDP --model $MODEL $opt $aug \
--epochs $EPOCHS --rule $rule $EXTRA"
    echo "\$ $cmd"
    t0=$(date +%s)
    # shellcheck disable=SC2086
    if ! $cmd >"$log" 2>&1; then
        tail -5 "$log"
        echo "$rule FAILED"
        continue
    fi
    t1=$(date +%s)
    grep -E "^epoch|^  test|accuracy" "$log" | sed 's/^/  /'
    acc=$(sed -n 's/.*test accuracy *\([0-9.]*\).*/\1/p' "$log" | tail -1)
    [ -n "$acc" ] || acc=$(grep -o "test [0-9.]*%" "$log" | tail -1 | grep -o "[0-9.]*")
    echo "$rule $acc $((t1 - t0))" | tee -a "$res"
    # every epoch's test accuracy ("epoch   3/15 ... test 0.3800/86.39% ..."), kept for the end
    sed -n 's|^ *epoch *\([0-9]*\)/[0-9]* .* test [0-9.]*/\([0-9.]*\)%.*|\1 \2|p' "$log" |
        while read -r e a; do
            bench_result accuracy "$setup $rule epoch=$e" test_accuracy "$a" %
        done >>"$tmp/result_lines.txt"
done
echo
echo "== summary ($MODEL, $what, augment $AUGMENT, $EPOCHS epochs, $RANKS ranks)"
awk -v gap="$tmp/gap" '{ printf "  %-7s test accuracy %s  wall %d s\n", $1, $2, $3;
       if (n == 0 || $2 > hi) hi = $2; if (n == 0 || $2 < lo) lo = $2; n++ }
     END { if (n) { printf "  RESULT largest gap between rules: %.2f points (lowest %s)\n", hi - lo, lo
                    printf "%.2f\n", hi - lo >gap } }' "$res"
{
    cat "$tmp/result_lines.txt"
    while read -r rule acc wall; do
        bench_result accuracy "$setup $rule" test_accuracy "$acc" %
        bench_result accuracy "$setup $rule" run_time "$wall" s
    done <"$res"
    if [ -s "$tmp/gap" ]; then
        bench_result accuracy "$setup" largest_gap "$(cat "$tmp/gap")" points
    fi
}
