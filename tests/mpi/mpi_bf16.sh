# --precision bf16 keeps every exactness promise of float32: for an MLP, a
# ResNet (BatchNorm, residual adds) and a ViT (attention, LayerNorm, GELU),
# under every rule and framework (lib.sh's frameworks_bitwise, which names
# the model without "bf16": read the lines above each), cdp-v1,
# cdp-v2 and dp --deterministic bitwise identical on 1, 2, 3 and 4 ranks
# and to the serial reference (--verify), zero and model-parallel equal to
# replicated; 2 threads equal to 1; a bf16 run cut by a checkpoint and
# resumed ends with the uninterrupted run's weights, and a float32 run
# refuses to resume it.  Each bf16 run must differ from the float32 run of
# the same options, or none of this would test the mode.
. "$(dirname "$0")/../lib/lib.sh"
bf="--precision bf16 --quiet --eval-every 0 --threads 1"
check_model() {
    local M=$1 common="$2 $bf"
    # dp with its ring all-reduce: the sum order's last bits, amplified by
    # BatchNorm and AdamW (as tests/mpi/mpi_resnet.sh and mpi_vit.sh)
    AR_TOL=$3 frameworks_bitwise "$M" "$common"
    run 1 $common --rule cdp-v2 --save-weights "$TMP/b1.st" >/dev/null || fail "$M: bf16 did not run"
    run 1 $common --rule cdp-v2 --threads 2 --save-weights "$TMP/b2.st" >/dev/null \
        || fail "$M: bf16 with 2 threads did not run"
    same "$M" "$TMP/b2.st" "$TMP/b1.st" 0 "$M bf16 cdp-v2: 2 threads bitwise equal to 1 thread"
    run 1 ${common/--precision bf16/} --rule cdp-v2 --save-weights "$TMP/f1.st" >/dev/null \
        || fail "$M: float32 did not run"
    differ "$M" "$TMP/b1.st" "$TMP/f1.st" "$M: bf16 against float32"
}
check_model mlp:784-64-32-16-10 "--data synthetic --model mlp:784-64-32-16-10 --stages 4 --workers 4 --batch 8 --steps 8 --lr 0.05 --momentum 0.9" 1e-5
check_model resnet20 "--data synthetic:1x16x16:n=256:test=64 --model resnet20 --stages 4 --workers 4 --batch 4 --steps 4 --lr 0.05 --momentum 0.9" norm:5e-4
V=vit:patch=7,dim=32,depth=2,heads=2,mlp=64
check_model "$V" "--data synthetic:1x28x28:n=256:test=64 --model $V --stages 4 --workers 4 --batch 4 --steps 4 --optimizer adamw --lr 1e-3" 1e-3

# resume: the float32 master state is the whole state
M=mlp:784-64-32-10
common="--data synthetic --model $M --workers 4 --batch 8 --lr 0.05 --momentum 0.9 $bf"
for np in 1 2; do
    run $np $common --rule cdp-v2 --steps 40 --save-weights "$TMP/full.st" >/dev/null || fail "full run"
    run $np $common --rule cdp-v2 --steps 17 --checkpoint "$TMP/c.st" >/dev/null || fail "first part"
    run $np $common --rule cdp-v2 --steps 40 --resume "$TMP/c.st" --save-weights "$TMP/res.st" >/dev/null \
        || fail "resume"
    same $M "$TMP/res.st" "$TMP/full.st" 0 "bf16 cdp-v2 on $np ranks: checkpoint at step 17 + resume = uninterrupted run"
done
out=$(run 1 ${common/--precision bf16/} --rule cdp-v2 --steps 40 --resume "$TMP/c.st" 2>&1)
if [ $? -ne 0 ] && echo "$out" | grep -q -- "--precision"; then
    pass "a float32 run refuses the bf16 checkpoint, naming --precision"
else
    fail "a float32 run resumed a bf16 checkpoint, or its error names no --precision: $out"
fi
finish
