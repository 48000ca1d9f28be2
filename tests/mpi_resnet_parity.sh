#!/bin/bash
# ResNet parity with an independent PyTorch implementation of
# doc/reference.md section 3 (tests/torch_resnet_reference.py: torchvision modules,
# torch.optim.SGD, nn.BatchNorm2d train-mode forward, running statistics once
# per step from the whole step's batch).
#
#   resnet20        B=4, K=3, L=3: N=2 on one rank, N=4 on two MPI ranks
#   resnet18-cifar  B=2, K=2, L=4: N=2 on two MPI ranks
#
# For every rule (dp, cdp-v1, cdp-v2) cdp_run trains from initial weights
# that PyTorch wrote (torchvision's own initialisation), on Fashion-MNIST in
# file order, and saves P(K); over all parameters and BatchNorm buffers
# together the weights must satisfy
#     rel        = ||cdp - torch|| / ||torch||        <= 1e-4
#     rel_change = ||cdp - torch|| / ||torch - init|| <= 1e-3
# and num_batches_tracked must equal K.  Negative controls (the cdp-v1
# reference against the dp run) must FAIL, so the test cannot pass vacuously.
#
# The stage split is cdp's: `cdp_run --plan` must print a line
#     stages: a,b,c blocks
# (blocks per stage; block 0 = stem, then every residual block of layer1,
# layer2, ..., the last block = head), which is passed to the reference.
#
# ReLU networks' gradients are discontinuous: float32 rounding flips a few
# ReLU inputs near 0 between two float32 implementations, and with micro-
# batches this small one pixel changes a conv gradient by ~1e-4..1e-3.  The
# seeds and the learning rate below are chosen (with --noise, which prints
# the reference's own float32-vs-float64 distance) so that this noise stays
# far below the tolerance; if a case fails, compare its RESULT with its
# NOISE line before suspecting cdp.
#
# Skips (77) without /usr/bin/python3 + torch + torchvision or without the
# data files.  Environment (from the automake harness): top_builddir,
# top_srcdir, MPIRUN.

set -u

PY=${CDP_TORCH_PYTHON:-/usr/bin/python3}
DATA=${CDP_FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
here=$(cd "$(dirname "$0")" && pwd)
srcdir=${top_srcdir:-$(cd "$here/.." && pwd)}
builddir=${top_builddir:-$(pwd)}
REF=$srcdir/tests/torch_resnet_reference.py
CDP=$builddir/cdp_run
MPIRUN=${MPIRUN:-mpirun}
TOL=1e-4
TOL_CHANGE=1e-3

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

[ -x "$PY" ] || skip "$PY not found"
"$PY" -c 'import torch, torchvision, numpy' >/dev/null 2>&1 \
    || skip "$PY cannot import torch, torchvision and numpy"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte; do
    [ -f "$DATA/$f.gz" ] || [ -f "$DATA/$f" ] || skip "Fashion-MNIST file $DATA/$f(.gz) missing"
done
[ -f "$REF" ] || fail "$REF missing"
[ -x "$CDP" ] || fail "$CDP missing (build first)"

TO=
TOPY=
if command -v timeout >/dev/null 2>&1; then
    TO="timeout 300"
    TOPY="timeout 600"
fi
have_mpi=1
if [ "$MPIRUN" = none ] || ! command -v "${MPIRUN%% *}" >/dev/null 2>&1; then
    have_mpi=0
    echo "note: no MPI launcher ($MPIRUN); the 2-rank cases run on one rank"
fi
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cdp_resnet_parity.XXXXXX") || fail "mktemp"
trap 'rm -rf "$tmp"' EXIT

bad=0

# run_model MODEL SEED B K L LR "N:RANKS ..."
run_model() {
    local model=$1 seed=$2 B=$3 K=$4 L=$5 lr=$6 configs=$7
    local opts="--batch $B --steps $K --lr $lr --momentum 0.9 --weight-decay 5e-4"
    local init=$tmp/$model-init.st
    echo "== $model: B=$B K=$K L=$L lr=$lr, init seed $seed"
    $TOPY "$PY" "$REF" --write-init "$init" --model "$model" --seed "$seed" --in-channels 1 \
        || fail "$model: could not write the initial weights"

    # cdp's stage split (FLOPs-balanced, decided by cdp)
    local plan=$tmp/$model-plan.log first_n=${configs%%:*}
    # shellcheck disable=SC2086
    if ! $TO "$CDP" --plan --model "$model" --data fashion-mnist --data-dir "$DATA" \
            --stages "$L" --workers "$first_n" --batch "$B" --rule cdp-v2 >"$plan" 2>&1; then
        cat "$plan"
        fail "$model: cdp_run --plan failed"
    fi
    local split
    split=$(sed -n 's/^stages: \([0-9][0-9,]*\) blocks$/\1/p' "$plan" | head -1)
    [ -n "$split" ] || { cat "$plan"; fail "$model: cdp_run --plan printed no 'stages: a,b,c blocks' line"; }
    echo "cdp's split: $split blocks"

    local cases=() cfg n ranks launch out log last_n=
    for cfg in $configs; do
        n=${cfg%%:*}
        ranks=${cfg##*:}
        launch=
        if [ "$ranks" -gt 1 ] && [ $have_mpi = 1 ]; then
            launch="$MPIRUN --allow-run-as-root --oversubscribe -np $ranks"
        else
            ranks=1
        fi
        for rule in dp cdp-v1 cdp-v2; do
            out=$tmp/$model-$rule-n$n.st
            log=$tmp/$model-$rule-n$n.log
            echo "cdp_run --model $model --rule $rule --workers $n ($ranks rank(s))"
            # shellcheck disable=SC2086
            if ! $TO $launch "$CDP" --model "$model" --data fashion-mnist --data-dir "$DATA" \
                    --no-shuffle --rule $rule --workers $n $opts --stages "$L" \
                    --init-weights "$init" --save-weights "$out" \
                    --eval-every 0 --quiet >"$log" 2>&1; then
                cat "$log"
                fail "cdp_run --model $model --rule $rule --workers $n on $ranks rank(s) failed"
            fi
            [ -s "$out" ] || { cat "$log"; fail "cdp_run wrote no $out"; }
            cases+=(--case "$rule:$n:$out")
        done
        last_n=$n
    done
    # negative control: the cdp-v1 trajectory must not match the dp run
    cases+=(--case "cdp-v1:$last_n:$tmp/$model-dp-n$last_n.st")
    local nexp=${#cases[@]}
    nexp=$((nexp / 2))

    local rlog=$tmp/$model-ref.log rc
    # shellcheck disable=SC2086
    $TOPY "$PY" "$REF" --model "$model" --init-weights "$init" $opts \
        --stages-split "$split" --stages "$L" --data-dir "$DATA" \
        --tol $TOL --tol-change $TOL_CHANGE --noise "${cases[@]}" >"$rlog" 2>&1
    rc=$?
    cat "$rlog"
    [ $rc = 0 ] || [ $rc = 1 ] || fail "$model: torch_resnet_reference.py exited with $rc"
    local nres
    nres=$(grep -c '^RESULT ' "$rlog")
    [ "$nres" = "$nexp" ] || fail "$model: expected $nexp RESULT lines, got $nres"
    local i=0 line
    while IFS= read -r line; do
        i=$((i + 1))
        if [ $i -lt "$nexp" ]; then
            case $line in
                *" ok") ;;
                *) echo "mismatch ($model): $line"; bad=1 ;;
            esac
        else
            case $line in
                *" FAIL") echo "negative control ($model) differs as it should: $line" ;;
                *) echo "negative control ($model) matched (the comparison is vacuous): $line"; bad=1 ;;
            esac
        fi
    done < <(grep '^RESULT ' "$rlog")
}

# Seeds and lr from a calibration of the reference's float32-vs-float64
# distance (max over rules and N) and of the control's distance (cdp-v1 vs dp):
#   resnet20,       seed 2, lr 0.01: noise rel_change 5e-5, control 3.6e-2
#   resnet18-cifar, seed 7, lr 0.01: noise rel_change 7e-7 (seed 3: cdp float32 against
#   float64 1.7e-3 while the gradient at the same P(1) agrees to 1e-6: a ReLU near its
#   kink, chaos, not a bug)
# (other seeds reach 1e-3..8e-3 noise: one flipped ReLU input is enough).
#          model          seed B K L lr   N:ranks
run_model  resnet20       2    4 3 3 0.01 "2:1 4:2"
run_model  resnet18-cifar 7    2 2 4 0.01 "2:2"

# cdp's weights (running statistics included) load into torchvision's module
# with strict=True and give cdp's own test accuracy (float rounding may move
# a handful of the 10,000 predictions)
w=$tmp/trained.st
out=$($TO "$CDP" --model resnet20 --data fashion-mnist --data-dir "$DATA" --workers 2 --batch 32 \
      --steps 40 --lr 0.05 --rule cdp-v2 --quiet --save-weights "$w" 2>&1) || { echo "$out"; fail "training resnet20 for the load test failed"; }
cdp_acc=$(echo "$out" | sed -n 's/^test_accuracy \([0-9.]*\).*/\1/p')
ev=$($TO "$PY" "$REF" --evaluate "$w" --model resnet20 --data-dir "$DATA" 2>&1) || { echo "$ev"; fail "torchvision did not load cdp's resnet20 (strict)"; }
echo "$ev"
t_acc=$(echo "$ev" | sed -n 's/.*test accuracy \([0-9.]*\).*/\1/p')
if awk -v a="$cdp_acc" -v b="$t_acc" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0.3 && d <= 0.002) }'; then
    echo "load: cdp test accuracy $cdp_acc, torchvision with cdp's weights $t_acc"
else
    echo "load: cdp test accuracy '$cdp_acc' vs torchvision '$t_acc' (want > 0.3 and within 0.002)"; bad=1
fi

[ $bad = 0 ] || fail "cdp_run and the PyTorch reference disagree"
echo "PASS: cdp_run's ResNets match the PyTorch reference for dp, cdp-v1, cdp-v2 (rel <= $TOL, rel_change <= $TOL_CHANGE)"
exit 0
