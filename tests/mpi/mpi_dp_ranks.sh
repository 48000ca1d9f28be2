# Rule dp on 1, 2 and 4 ranks: the same weights to 1e-6 with MPI_Allreduce,
# bitwise with --deterministic (the ring sums in worker order), and the
# deterministic run is bitwise equal to the serial reference.
. "$(dirname "$0")/../lib/lib.sh"
M=mlp:784-64-32-10
common="--data synthetic --model $M --stages 3 --workers 4 --batch 16 --steps 12 --rule dp --quiet --eval-every 0 --lr 0.05 --momentum 0.9 --weight-decay 5e-4"
for np in 1 2 4; do
    run $np $common --save-weights "$TMP/dp$np.st" >/dev/null || fail "dp on $np ranks did not run"
    run $np $common --deterministic --save-weights "$TMP/det$np.st" >/dev/null || fail "dp --deterministic on $np ranks did not run"
done
same $M "$TMP/dp2.st" "$TMP/dp1.st" 1e-6 "dp: 2 ranks vs 1 rank within 1e-6"
same $M "$TMP/dp4.st" "$TMP/dp1.st" 1e-6 "dp: 4 ranks vs 1 rank within 1e-6"
same $M "$TMP/det2.st" "$TMP/det1.st" 0 "dp --deterministic: 2 ranks bitwise equal to 1 rank"
same $M "$TMP/det4.st" "$TMP/det1.st" 0 "dp --deterministic: 4 ranks bitwise equal to 1 rank"
out=$(run 4 $common --deterministic --verify 2>&1) && echo "$out" | grep -q " 0 of .* differ bitwise" \
    && pass "dp --deterministic on 4 ranks equals the serial reference bitwise" \
    || fail "dp --deterministic --verify on 4 ranks: $out"
out=$(run 2 $common --verify 2>&1) && pass "dp with its ring all-reduce within 1e-5 of the reference: $(echo "$out" | grep verify)" \
    || fail "dp --verify on 2 ranks: $out"
finish
