# Frameworks model-parallel and zero: the weights after K steps are bitwise
# those of the replicated framework (same N, L, rule, options) for every
# rule (dp with --deterministic; with collectives to 1e-5), on 2, 3 and 4
# ranks; and no collective in the training loop under cdp (PMPI count).
. "$(dirname "$0")/../lib/lib.sh"
PRELOAD="$top_builddir/tests/lib/.libs/libpmpicount.so"
base="--data synthetic --batch 8 --steps 8 --quiet --eval-every 0 --lr 0.05 --momentum 0.9 --weight-decay 5e-4"
needed() {  # framework N L rule -> ranks the plan says it needs
    "$CDP" --plan --framework "$1" --workers "$2" --stages "$3" --rule "$4" $5 --model "$6" \
        | sed -n 's/^ranks used: \([0-9]*\).*/\1/p'
}
# (model, stages, N) triples: the model-parallel rank counts differ per rule
for cfg in "mlp:784-24-10 2 2" "mlp:784-24-16-10 3 3" "mlp:784-24-16-16-10 4 4"; do
    set -- $cfg
    M=$1 L=$2 N=$3
    for rule in dp cdp-v1 cdp-v2; do
        det=""
        [ $rule = dp ] && det="--deterministic"
        args="$base --model $M --stages $L --workers $N --rule $rule $det"
        run 1 $args --save-weights "$TMP/rep.st" >/dev/null || { fail "replicated $M $rule"; continue; }
        np=$(needed model-parallel $N $L $rule "$det" $M)
        if [ "$np" -le 4 ]; then
            run $np $args --framework model-parallel --save-weights "$TMP/mp.st" >/dev/null \
                && same $M "$TMP/mp.st" "$TMP/rep.st" 0 "model-parallel $rule $det N=$N L=$L on $np ranks = replicated" \
                || fail "model-parallel $rule N=$N L=$L on $np ranks did not run"
        fi
        for np in 2 3 4; do
            [ $np -gt $N ] && continue
            run $np $args --framework zero --save-weights "$TMP/zero.st" >/dev/null \
                && same $M "$TMP/zero.st" "$TMP/rep.st" 0 "zero $rule $det N=$N L=$L on $np ranks = replicated" \
                || fail "zero $rule N=$N L=$L on $np ranks did not run"
        done
    done
done
# dp with collectives (an all-reduce per stage, MPI_Bcast + MPI_Reduce): 1e-5
M=mlp:784-24-10
args="$base --model $M --stages 2 --workers 2 --rule dp"
run 1 $args --save-weights "$TMP/rep.st" >/dev/null || fail "replicated dp"
run 4 $args --framework model-parallel --save-weights "$TMP/mp.st" >/dev/null || fail "model-parallel dp"
same $M "$TMP/mp.st" "$TMP/rep.st" 1e-5 "model-parallel dp (an all-reduce per stage) on 4 ranks within 1e-5"
run 2 $args --framework zero --save-weights "$TMP/zero.st" >/dev/null || fail "zero dp"
same $M "$TMP/zero.st" "$TMP/rep.st" 1e-5 "zero dp (MPI_Bcast, MPI_Reduce) on 2 ranks within 1e-5"
# too few ranks for model-parallel: says how many it needs
out=$(run 2 $base --model mlp:784-24-16-10 --stages 3 --workers 3 --rule dp --framework model-parallel 2>&1) \
    && fail "model-parallel ran on too few ranks" \
    || { echo "$out" | grep -q "needs 9 ranks" && pass "too few ranks: $(echo "$out" | grep error)" || fail "too few ranks: $out"; }
# PMPI: cdp makes the same number of collective calls for 3 and 9 steps
count() {
    rm -f "$TMP"/pmpi.*
    timeout 300 "$MPIRUN" --oversubscribe -np "$1" -x LD_PRELOAD="$PRELOAD" -x CDP_PMPI_OUT="$TMP/pmpi" \
        "$CDP" $2 --steps "$3" >/dev/null || { echo x; return; }
    cat "$TMP"/pmpi.* | awk '{s += $2} END {print s}'
}
for fw in zero model-parallel; do
    a="--data synthetic --model mlp:784-24-16-10 --stages 3 --workers 3 --batch 8 --quiet --eval-every 0 --framework $fw"
    for rule in cdp-v2 dp; do
        np=3
        [ $rule = dp ] && [ $fw = model-parallel ] && np=9
        c3=$(count $np "$a --rule $rule" 3)
        c9=$(count $np "$a --rule $rule" 9)
        if [ $rule = dp ] && [ $fw = zero ]; then
            [ "$c9" != x ] && [ "$c9" -gt "$c3" ] && pass "$fw dp: collectives grow with the steps ($c3 -> $c9)" \
                || fail "$fw dp: PMPI $c3 -> $c9"
        elif [ $rule = dp ]; then
            # its all-reduce per stage is cdp's ring of point-to-point messages
            [ "$c3" != x ] && [ "$c3" = "$c9" ] && pass "$fw dp: no MPI collective in the training loop, the stages' all-reduce is a ring (PMPI $c3 for 3 and 9 steps)" \
                || fail "$fw dp: PMPI $c3 -> $c9"
        else
            [ "$c3" != x ] && [ "$c3" = "$c9" ] && pass "$fw cdp-v2: no collective in the training loop (PMPI $c3 for 3 and 9 steps)" \
                || fail "$fw cdp-v2: PMPI $c3 -> $c9"
        fi
    done
done
finish
