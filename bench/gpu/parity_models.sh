#!/bin/bash
# tests/gpu_parity.sh's checks for the ResNets and the ViT (issue 12): for
# each model and rule (dp, cdp-v1, cdp-v2), STEPS training steps on the GPU
# give weights within TOL (relative, max|a-b|/max|b|, tests/st_compare) of
# the CPU backend's; the GPU run is deterministic (the same bits twice); and
# cdp-v1 / cdp-v2 on 2 ranks sharing the GPU give the bits of 1 rank.  One
# step of dp against the CPU is printed too: a step-1 difference near 1e-6
# with a larger one after STEPS steps is float32 noise growing through ReLU
# kinks and BatchNorm (tests/mpi_resnet_parity.sh explains it), a large
# step-1 difference is a kernel bug.
#
#   bench/gpu/parity_models.sh BUILD
#
# Environment: MODELS "MODEL:SEED ..." [resnet20:2 resnet18-cifar:7 vit-tiny:1],
# SHAPE [1x28x28], N [4] workers, B [8] samples each, STEPS [20], TOL [1e-4],
# LR [0.01] (SGD, momentum 0.9, weight decay 5e-4, as the parity tests).
# Prints "RESULT parity ..." lines; exits 1 when a check fails, 77 without
# a GPU.  A measurement for the session's notes, not part of make check.
set -u
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${1:?usage: bench/gpu/parity_models.sh BUILD_DIR}
export top_builddir=$BUILD
MODELS=${MODELS:-"resnet20:2 resnet18-cifar:7 vit-tiny:1"}
SHAPE=${SHAPE:-1x28x28}
N=${N:-4}
B=${B:-8}
STEPS=${STEPS:-20}
TOL=${TOL:-1e-4}
LR=${LR:-0.01}
. "$here/../../tests/lib.sh"     # run, CDP, COMPARE, TMP, failures

# cmp_st MODEL A B TOL WHAT: RESULT line with st_compare's figures
cmp_st() {
    local out
    if out=$("$COMPARE" "$1" "$2" "$3" "$4" "$SHAPE" 2>&1); then
        echo "RESULT parity ok: $5 ($out)"
    else
        echo "RESULT parity FAIL: $5 ($out)"
        failures=$((failures + 1))
    fi
}

if ! out=$(run 1 --data synthetic --model mlp:8-4-10 --steps 1 --eval-every 0 --quiet --backend cuda 2>&1); then
    if echo "$out" | grep -qE 'has no CUDA backend|no CUDA device found'; then
        echo "SKIP: $(echo "$out" | grep error)"
        exit 77
    fi
    echo "$out" | tail -5
    echo "RESULT parity FAIL: a 1-step --backend cuda run failed, and not for want of CUDA"
    exit 1
fi

for ms in $MODELS; do
    m=${ms%:*} seed=${ms##*:}
    common="--data synthetic:$SHAPE --model $m --workers $N --batch $B --no-shuffle --quiet --eval-every 0
            --seed $seed --lr $LR --momentum 0.9 --weight-decay 5e-4"
    t0=$(date +%s)
    run 1 $common --steps 1 --rule dp --backend cpu --save-weights "$TMP/c1.st" >/dev/null &&
        run 1 $common --steps 1 --rule dp --backend cuda --save-weights "$TMP/g1.st" >/dev/null &&
        cmp_st "$m" "$TMP/g1.st" "$TMP/c1.st" 1 "$m dp: GPU against CPU after 1 step (for scale, no tolerance)"
    for rule in dp cdp-v1 cdp-v2; do
        if ! run 1 $common --steps "$STEPS" --rule $rule --backend cpu --save-weights "$TMP/cpu.st" >"$TMP/log" 2>&1; then
            echo "RESULT parity FAIL: $m $rule on the CPU: $(tail -1 "$TMP/log")"; failures=$((failures + 1)); continue
        fi
        if ! run 1 $common --steps "$STEPS" --rule $rule --backend cuda --save-weights "$TMP/gpu.st" >"$TMP/log" 2>&1; then
            echo "RESULT parity FAIL: $m $rule on the GPU: $(tail -3 "$TMP/log" | tr '\n' ' ')"
            failures=$((failures + 1)); continue
        fi
        cmp_st "$m" "$TMP/gpu.st" "$TMP/cpu.st" "$TOL" "$m $rule: GPU within $TOL of the CPU after $STEPS steps"
        run 1 $common --steps "$STEPS" --rule $rule --backend cuda --save-weights "$TMP/gpu2.st" >/dev/null 2>&1 &&
            cmp_st "$m" "$TMP/gpu2.st" "$TMP/gpu.st" 0 "$m $rule: GPU deterministic"
        if [ $rule != dp ]; then
            if run 2 $common --steps "$STEPS" --rule $rule --backend cuda --save-weights "$TMP/gpu_p2.st" \
                    >"$TMP/log" 2>&1; then
                cmp_st "$m" "$TMP/gpu_p2.st" "$TMP/gpu.st" 0 "$m $rule: GPU on 2 ranks bitwise equal to 1 rank"
            else
                echo "RESULT parity FAIL: $m $rule on 2 ranks: $(tail -3 "$TMP/log" | tr '\n' ' ')"
                failures=$((failures + 1))
            fi
        fi
    done
    echo "  ($m: $(($(date +%s) - t0)) s)"
done
[ "$failures" = 0 ] && echo "RESULT parity: all checks passed" || echo "RESULT parity: $failures check(s) failed"
[ "$failures" = 0 ]
