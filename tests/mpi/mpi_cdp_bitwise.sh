# cdp-v1 and cdp-v2: weights after K steps bitwise identical on 1, 2, 3 and
# 4 ranks (N = 4 and N = 6, L = 3) and bitwise equal to the serial
# reference; with N = 1, cdp-v2 is dp; the same with --augment and
# --normalize.
. "$(dirname "$0")/../lib/lib.sh"
M=mlp:784-64-32-10
common="--data synthetic --model $M --stages 3 --batch 8 --steps 10 --quiet --eval-every 0 --lr 0.05 --momentum 0.9 --weight-decay 5e-4"
for N in 4 6; do
    for rule in cdp-v1 cdp-v2; do
        out=$(run 1 $common --workers $N --rule $rule --verify --save-weights "$TMP/$rule-$N-1.st" 2>&1)
        if [ $? -eq 0 ] && echo "$out" | grep -q " 0 of .* differ bitwise"; then
            pass "$rule N=$N: 1 rank equals the serial reference bitwise"
        else
            fail "$rule N=$N --verify: $out"
        fi
        for np in 2 3 4; do
            run $np $common --workers $N --rule $rule --save-weights "$TMP/$rule-$N-$np.st" >/dev/null \
                || fail "$rule N=$N on $np ranks did not run"
            same $M "$TMP/$rule-$N-$np.st" "$TMP/$rule-$N-1.st" 0 "$rule N=$N: $np ranks bitwise equal to 1 rank"
        done
    done
    run 1 $common --workers $N --rule dp --save-weights "$TMP/dp-$N.st" >/dev/null || fail "dp N=$N did not run"
    # the rules must really differ, or the checks above prove nothing
    if "$COMPARE" $M "$TMP/cdp-v2-$N-1.st" "$TMP/dp-$N.st" 0 >/dev/null; then
        fail "cdp-v2 N=$N gives exactly the dp weights: the lag is not applied"
    else
        pass "cdp-v2 N=$N differs from dp"
    fi
    if "$COMPARE" $M "$TMP/cdp-v1-$N-1.st" "$TMP/cdp-v2-$N-1.st" 0 >/dev/null; then
        fail "cdp-v1 and cdp-v2 N=$N give the same weights"
    else
        pass "cdp-v1 N=$N differs from cdp-v2"
    fi
done
# wide layers, so that the GEMMs really run on several threads: 1 rank x 2
# threads, 2 ranks x 1 thread and 4 ranks give the same bits
W=mlp:784-512-256-10
for np in 1 2 4; do
    run $np --data synthetic --model $W --workers 4 --batch 64 --steps 4 --quiet --eval-every 0 \
        --rule cdp-v2 --save-weights "$TMP/wide$np.st" >/dev/null || fail "wide model on $np ranks"
done
same $W "$TMP/wide2.st" "$TMP/wide1.st" 0 "wide model: 2 ranks bitwise equal to 1 rank with 2 threads"
same $W "$TMP/wide4.st" "$TMP/wide1.st" 0 "wide model: 4 ranks bitwise equal to 1 rank with 2 threads"
# micro-batches of 512 rows: OpenBLAS splits K = 512 into blocks, so the
# backward cannot add to the running sum in place (kernels_cpu.c) and the
# executor sums through its scratch buffer; still the reference's bits, and
# the same on 2 ranks
S=mlp:784-16-10
for np in 1 2; do
    out=$(run $np --data synthetic --model $S --workers 4 --batch 512 --steps 3 --quiet --eval-every 0 \
        --rule cdp-v1 --verify --save-weights "$TMP/k512-$np.st" 2>&1)
    if [ $? -eq 0 ] && echo "$out" | grep -q " 0 of .* differ bitwise"; then
        pass "B=512 (sums through scratch), $np rank(s): equals the serial reference bitwise"
    else
        fail "B=512 on $np rank(s) --verify: $out"
    fi
done
# augmentation and normalisation: the pixels depend on (seed, epoch, sample)
# only, so 1 and 3 ranks (and the serial reference) give the same bits; and
# they do change the run
A=mlp:192-32-10
aug="--data synthetic:3x8x8:n=96 --model $A --workers 3 --batch 8 --steps 12 --quiet --eval-every 0 --rule cdp-v2"
tf="--augment crop=2,flip --normalize 0.5,0.4,0.3/0.2,0.25,0.3"
for np in 1 3; do
    out=$(run $np $aug $tf --verify --save-weights "$TMP/aug$np.st" 2>&1)
    if [ $? -eq 0 ] && echo "$out" | grep -q " 0 of .* differ bitwise"; then
        pass "--augment/--normalize, $np rank(s): equals the serial reference bitwise"
    else
        fail "--augment/--normalize on $np rank(s) --verify: $out"
    fi
done
same $A "$TMP/aug3.st" "$TMP/aug1.st" 0 "--augment/--normalize: 3 ranks bitwise equal to 1 rank"
run 1 $aug --save-weights "$TMP/noaug.st" >/dev/null || fail "synthetic:3x8x8 without transforms"
if "$COMPARE" $A "$TMP/aug1.st" "$TMP/noaug.st" 0 >/dev/null; then
    fail "--augment/--normalize change nothing"
else
    pass "--augment/--normalize change the run"
fi
run 1 $common --workers 1 --rule cdp-v2 --save-weights "$TMP/n1-cdp.st" >/dev/null || fail "N=1 cdp-v2"
run 1 $common --workers 1 --rule dp --save-weights "$TMP/n1-dp.st" >/dev/null || fail "N=1 dp"
same $M "$TMP/n1-cdp.st" "$TMP/n1-dp.st" 0 "N=1: cdp-v2 is dp bitwise"
finish
