# GPU backend against the CPU backend: 20 training steps of dp, cdp-v1 and
# cdp-v2 give weights within 1e-4 (relative), and the GPU run is
# deterministic (the same bits twice) and rank-invariant under cdp.
# Skipped (exit 77) when this build has no CUDA or the machine no GPU.
. "$(dirname "$0")/../lib/lib.sh"
M=mlp:784-256-128-10
common="--data synthetic --model $M --workers 4 --batch 16 --steps 20 --no-shuffle --quiet --eval-every 0 --lr 0.05 --momentum 0.9 --weight-decay 5e-4"
. "$(dirname "$0")/cuda_probe.sh"
cuda_probe "$CDP"   # skipped (77) only where there is no CUDA to test
for rule in dp cdp-v1 cdp-v2; do
    run 1 $common --rule $rule --backend cpu --save-weights "$TMP/cpu.st" >/dev/null || fail "cpu $rule"
    run 1 $common --rule $rule --backend cuda --save-weights "$TMP/gpu.st" >/dev/null || fail "cuda $rule"
    same $M "$TMP/gpu.st" "$TMP/cpu.st" 1e-4 "$rule: GPU within 1e-4 of the CPU after 20 steps"
    run 1 $common --rule $rule --backend cuda --save-weights "$TMP/gpu2.st" >/dev/null || fail "cuda $rule again"
    same $M "$TMP/gpu2.st" "$TMP/gpu.st" 0 "$rule: GPU deterministic"
    if [ $rule != dp ]; then
        run 2 $common --rule $rule --backend cuda --save-weights "$TMP/gpu_p2.st" >/dev/null || fail "cuda $rule on 2 ranks"
        same $M "$TMP/gpu_p2.st" "$TMP/gpu.st" 0 "$rule: GPU on 2 ranks bitwise equal to 1 rank"
    fi
done
finish
