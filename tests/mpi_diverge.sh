# A diverging run (non-finite loss) stops within 64 steps with one error line
# that says what to lower, exit status 3, and leaves the checkpoint alone.
. "$(dirname "$0")/lib.sh"
diverge() {  # np expected-substring args...
    local np=$1 want=$2
    shift 2
    local out rc line last
    out=$(timeout 60 "$MPIRUN" --oversubscribe -np "$np" "$CDP" --data synthetic --epochs 5 \
          --lr 1e6 "$@" 2>&1 >/dev/null)
    rc=$?
    line=$(printf '%s\n' "$out" | grep '^cdp_run: error:')
    last=$(printf '%s\n' "$line" | sed -n 's/.* in steps [0-9]*\.\.\([0-9]*\):.*/\1/p')
    if [ $rc -eq 124 ]; then
        fail "np=$np $*: hung"
    elif [ $rc -ne 3 ]; then
        fail "np=$np $*: exit $rc, not 3: $out"
    elif [ "$(printf '%s\n' "$line" | grep -c .)" -ne 1 ]; then
        fail "np=$np $*: not one error line: $out"
    elif ! printf '%s\n' "$line" | grep -q "training loss is not finite (\(nan\|inf\)) in steps.*lower --lr (now 1e+06)"; then
        fail "np=$np $*: unexpected message: $line"
    elif [ -z "$last" ] || [ "$last" -gt 64 ]; then
        fail "np=$np $*: not stopped within 64 steps: $line"
    elif ! printf '%s\n' "$line" | grep -q -- "$want"; then
        fail "np=$np $*: error does not mention '$want': $line"
    else
        pass "np=$np $*: $line"
    fi
}
for np in 1 2; do
    diverge $np "cdp-v2 less stable than dp.*lowering --lr or --momentum"
    diverge $np "cdp-v1 less stable than dp" --rule cdp-v1
    diverge $np "now 1e+06)$" --rule dp
    # no checkpoint of the diverged state, and an earlier one is left as it was
    rm -f "$TMP/c.st"
    diverge $np "c.st not written" --checkpoint "$TMP/c.st"
    [ ! -e "$TMP/c.st" ] || fail "np=$np: a checkpoint of the diverged state was written"
    run $np --data synthetic --steps 10 --quiet --checkpoint "$TMP/c.st" >/dev/null \
        || fail "np=$np: the first checkpoint could not be written"
    cp "$TMP/c.st" "$TMP/c0.st"
    diverge $np "c.st not written (the last one written, if any, holds the last good state" --checkpoint "$TMP/c.st"
    cmp -s "$TMP/c.st" "$TMP/c0.st" && pass "np=$np: checkpoint left alone" \
        || fail "np=$np: the checkpoint was overwritten by the diverged state"
    # a run that does not diverge still exits 0
    if run $np --data synthetic --steps 100 --quiet >/dev/null 2>&1; then
        pass "np=$np: a normal run exits 0"
    else
        fail "np=$np: a normal run exits $?"
    fi
done
finish
