# Bad input: one clear error line, a non-zero exit on every rank, no hang.
. "$(dirname "$0")/lib.sh"
check() {  # np expected-substring args...
    local np=$1 want=$2
    shift 2
    local out rc n
    out=$(timeout 60 "$MPIRUN" --oversubscribe -np "$np" "$CDP" "$@" 2>&1 >/dev/null)
    rc=$?
    n=$(printf '%s\n' "$out" | grep -c '^cdp_run: error:')
    if [ $rc -eq 124 ]; then
        fail "np=$np $*: hung"
    elif [ $rc -eq 0 ]; then
        fail "np=$np $*: exit 0"
    elif [ "$n" -ne 1 ]; then
        fail "np=$np $*: $n error lines: $out"
    elif ! printf '%s\n' "$out" | grep '^cdp_run: error:' | grep -q -- "$want"; then
        fail "np=$np $*: error does not mention '$want': $out"
    else
        pass "np=$np $*: $(printf '%s\n' "$out" | grep '^cdp_run: error:')"
    fi
}
printf 'not a weights file' > "$TMP/garbage.st"
run 1 --data synthetic --model mlp:784-16-10 --steps 1 --quiet --save-weights "$TMP/small.st" >/dev/null \
    || fail "could not write a weights file"
head -c 100 "$TMP/small.st" > "$TMP/truncated.st"
for np in 1 3; do
    check $np "--rule" --rule bogus
    check $np "--lr" --lr abc
    check $np "--steps" --steps -1
    check $np "unknown option" --frobnicate
    check $np "--model" --model mlp:784-x-10
    check $np "--stages" --model mlp:784-16-10 --stages 3
    check $np "dataset-fashion-mnist" --data-dir "$TMP/nowhere"
    check $np "garbage.st" --data synthetic --init-weights "$TMP/garbage.st"
    check $np "truncated.st" --data synthetic --model mlp:784-16-10 --init-weights "$TMP/truncated.st"
    check $np "shape" --data synthetic --model mlp:784-32-10 --init-weights "$TMP/small.st"
    check $np "missing.st" --data synthetic --init-weights "$TMP/missing.st"
    check $np "inputs" --model mlp:100-10
done
check 3 "fewer than the 3 ranks" --data synthetic --workers 2
finish
