# examples/custom_model.c, a program built on the public API alone: its own
# residual CNN trains (the loss falls), gives bitwise the same weights on 1
# and 2 ranks under cdp-v1, equal to the serial reference, and different
# from dp's; --model and --list-models know it; bad options end it with
# cdp_run's one error line.
. "$(dirname "$0")/../lib/lib.sh"
EXAMPLE="$top_builddir/examples/custom_model"

# example NP ARGS...: the example on NP ranks, 300 s at most
example() {
    local np=$1
    shift
    timeout 300 "$MPIRUN" --oversubscribe -np "$np" "$EXAMPLE" "$@"
}

# the mean train_loss of --log-every line number N of a metrics file
window_loss() {
    grep '"log": "steps"' "$1" | sed -n "$2p" | sed 's/.*"train_loss": \([-0-9.e+]*\).*/\1/'
}

out=$(example 1 "$TMP/w1.st" --metrics "$TMP/m1.json" --log-every 10 2>&1)
rc=$?
if [ $rc -eq 0 ] && echo "$out" | grep -q "tiny-resnet on 3x16x16 images: 5410 parameters in 38 tensors, 4 stages" &&
    echo "$out" | grep -q "custom_model: fc.weight  *160 values, norm"; then
    pass "1 rank: built, trained, its weights read back"
else
    fail "1 rank: status $rc: $out"
fi
first=$(window_loss "$TMP/m1.json" 1)
last=$(window_loss "$TMP/m1.json" 4)
if [ -n "$first" ] && [ -n "$last" ] && awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.95 * a) }'; then
    pass "the loss falls: steps 1-10 $first, steps 31-40 $last"
else
    fail "the loss does not fall: steps 1-10 '$first', steps 31-40 '$last'"
fi

out=$(example 2 "$TMP/w2.st" --quiet --verify 2>&1)
if [ $? -eq 0 ] && echo "$out" | grep -q " 0 of .* differ bitwise"; then
    pass "2 ranks: equal to the serial reference bitwise"
else
    fail "2 ranks --verify: $out"
fi
if cmp -s "$TMP/w1.st" "$TMP/w2.st"; then
    pass "cdp-v1: the weight files of 1 and 2 ranks are bitwise identical"
else
    fail "cdp-v1: the weight files of 1 and 2 ranks differ"
fi
# the rule really acts, or the equality above proves little: dp's weights
# differ (the norms the example prints, since the files' headers differ too)
norms() { grep "norm" | sed 's/.*norm //'; }
n1=$(example 1 "$TMP/v1.st" --quiet 2>&1 | norms)
ndp=$(example 1 "$TMP/dp.st" --quiet --rule dp 2>&1 | norms)
if [ -n "$n1" ] && [ -n "$ndp" ] && [ "$n1" != "$ndp" ]; then
    pass "cdp-v1 and dp give different weights"
else
    fail "cdp-v1 and dp: the same weights, or none ('$n1' / '$ndp')"
fi

out=$(example 1 "$TMP/l.st" --list-models 2>&1)
echo "$out" | grep -qE "^tiny-resnet +defined +from data +a residual CNN" &&
    pass "--list-models lists the program's model" || fail "--list-models: $out"
out=$(example 2 "$TMP/s.st" --stages 5 2>&1)
rc=$?
[ $rc -eq 1 ] && [ "$(echo "$out" | grep -c "error:")" -eq 1 ] &&
    echo "$out" | grep -q "cdp_run: error: --stages: 5 stages for a model of 4 blocks" &&
    pass "--stages 5 of 4 blocks: status 1, one line" || fail "--stages 5: status $rc: $out"
out=$(example 2 "$TMP/b.st" --steps x 2>&1)
rc=$?
[ $rc -eq 1 ] && [ "$(echo "$out" | grep -c "error:")" -eq 1 ] &&
    echo "$out" | grep -q "cdp_run: error: --steps: expected an integer, got 'x'" &&
    pass "a bad option: status 1, one error line" || fail "--steps x: status $rc: $out"
out=$(example 1 2>&1)
rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "usage: custom_model WEIGHTS" &&
    pass "no weight file: status 2, its usage" || fail "no arguments: status $rc: $out"
finish
