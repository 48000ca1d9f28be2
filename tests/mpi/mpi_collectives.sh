# No collective in the training loop under the cdp rules, counted two ways:
# a PMPI interposer (every MPI collective the process calls) and cdp's own
# counter in the --metrics summary.  Runs of 3 and 9 steps must make the
# same number of collective calls under cdp.  dp's all-reduce is cdp's own
# ring of point-to-point messages: no MPI collective either, but one
# collective call a step and rank in cdp's count, except on one rank,
# where the sum is the gradient itself and nothing is called.
. "$(dirname "$0")/../lib/lib.sh"
PRELOAD="$top_builddir/tests/lib/.libs/libpmpicount.so"
[ -f "$PRELOAD" ] || { echo "missing $PRELOAD"; exit 1; }
M=mlp:784-32-32-10
common="--data synthetic --model $M --stages 3 --workers 4 --batch 8 --quiet --eval-every 0"
count() {  # rule steps np -> total collectives over ranks (PMPI) and the program's own count
    local rule=$1 steps=$2 np=$3
    rm -f "$TMP"/pmpi.*
    timeout 300 "$MPIRUN" --oversubscribe -np "$np" -x LD_PRELOAD="$PRELOAD" -x CDP_PMPI_OUT="$TMP/pmpi" \
        "$CDP" $common --rule "$rule" --steps "$steps" --metrics "$TMP/m.json" >/dev/null || { echo "run failed"; return 1; }
    local pm own
    pm=$(cat "$TMP"/pmpi.* | awk '{s += $2} END {print s}')
    own=$(tail -n 1 "$TMP/m.json" | sed 's/.*"collective_calls": \([0-9]*\).*/\1/')
    echo "$pm $own"
}
for np in 1 2 3; do
    for rule in cdp-v1 cdp-v2 dp; do
        a=$(count $rule 3 $np) || { fail "$rule on $np ranks did not run"; continue; }
        b=$(count $rule 9 $np) || { fail "$rule on $np ranks did not run"; continue; }
        set -- $a; pm3=$1; own3=$2
        set -- $b; pm9=$1; own9=$2
        if [ "$rule" = dp ] && [ "$np" -gt 1 ]; then
            [ "$pm9" -eq "$pm3" ] && [ "$own3" -eq $((3 * np)) ] && [ "$own9" -eq $((9 * np)) ] \
                && pass "dp, $np ranks: one all-reduce per step and rank, none of them an MPI collective (PMPI $pm3 for 3 and 9 steps, own $own3 -> $own9)" \
                || fail "dp, $np ranks: PMPI $pm3 -> $pm9, own $own3 -> $own9"
        else
            [ "$pm9" -eq "$pm3" ] && [ "$own3" -eq 0 ] && [ "$own9" -eq 0 ] \
                && pass "$rule, $np rank(s): no collective in the training loop (PMPI $pm3 for 3 and 9 steps, own 0)" \
                || fail "$rule, $np ranks: PMPI $pm3 -> $pm9, own $own3 -> $own9"
        fi
    done
done
finish
