# The soak: random but valid option combinations on 1 to 4 ranks, every
# rule, framework and optimizer, MLPs, ViTs and resnet20 on synthetic data
# (tests/soak_gen.py SEED COUNT), each of which must either train to the
# weights of --verify's serial reference (exit 0, the verify line saying
# bitwise equal, or within 1e-5 for dp with a collective) or be refused
# with exactly one line "cdp_run: error: ..." naming what is wrong, within
# a time limit.  First the combinations the soak once found broken, then
# SOAK_COUNT generated from SOAK_SEED (make check: a short fixed slice;
# bench/soak.sh: a long one).  A failing combination prints the command
# that replays it.
. "$(dirname "$0")/lib.sh"
: "${top_srcdir:=$top_builddir}"
: "${SOAK_SEED:=20261128}"
: "${SOAK_COUNT:=30}"
: "${PYTHON:=python3}"
GEN="$top_srcdir/tests/soak_gen.py"
verified=0 refused=0 bad=0

# replay NP ARGS: how to run a combination again by hand
replay() {
    local np=$1
    shift
    echo "  replay: mpirun --oversubscribe -np $np $CDP $*"
}

# verify_combo NP WANT ARGS...: WANT bitwise (the exact rules) or 1e-5
verify_combo() {
    local np=$1 want=$2 out rc line
    shift 2
    out=$(timeout 120 "$MPIRUN" --oversubscribe -np "$np" "$CDP" "$@" --verify --quiet 2>&1)
    rc=$?
    line=$(printf '%s\n' "$out" | grep '^verify: serial reference')
    if [ $rc -eq 124 ]; then
        fail "np=$np $*: hung (120 s)"
    elif [ $rc -ne 0 ]; then
        fail "np=$np $*: exit $rc: $(printf '%s\n' "$out" | grep -v '^  \|^test_\|^$' | tail -n 4)"
    elif [ -z "$line" ]; then
        fail "np=$np $*: no verify line: $out"
    elif printf '%s\n' "$out" | grep -q '^cdp_run: error:'; then
        fail "np=$np $*: exit 0 with an error line: $out"
    elif [ "$want" = bitwise ] && ! printf '%s\n' "$line" | grep -q ' 0 of [0-9]* values differ bitwise'; then
        fail "np=$np $*: not bitwise: $line"
    else
        pass "np=$np $*: ${line#verify: serial reference }"
        verified=$((verified + 1))
        return 0
    fi
    return 1
}

# combo EXPECT NP WANT ARGS: one line of soak_gen.py (fields as there)
combo() {
    local expect=$1 np=$2 want=$3 args=$4 before=$failures
    [ -n "$expect" ] || return 0   # SOAK_COUNT=0: the fixed ones only
    case $expect in
        verify) verify_combo "$np" "$want" $args ;;
        refuse)
            one_error "$np" "$want" $args
            [ "$failures" -eq "$before" ] && refused=$((refused + 1)) ;;
        *) fail "soak_gen.py: unknown verdict '$expect'" ;;
    esac
    if [ "$failures" -ne "$before" ]; then
        bad=$((bad + 1))
        [ "$expect" = verify ] && replay "$np" "$args --verify" || replay "$np" "$args"
    fi
}

start=$(date +%s)
tab=$(printf '\t')
# found by the soak: one rank held the whole model (zero's owner of a
# one-stage model, the used ranks of a one-stage model-parallel run) while
# another held none, and gathering the final weights mixed up the ranks'
# collectives (MPI_ERR_TRUNCATE after training)
while IFS=$tab read -r expect np want args; do
    combo "$expect" "$np" "$want" "$args" </dev/null   # mpirun reads stdin
done <<EOF
verify${tab}2${tab}bitwise${tab}--model mlp:48-16-10 --data synthetic:3x4x4:n=64 --batch 4 --steps 2 --rule cdp-v1 --framework zero --stages 1
verify${tab}4${tab}1e-5${tab}--model mlp:48-16-10 --data synthetic:3x4x4:n=64 --batch 4 --steps 2 --rule dp --framework zero --stages 1
verify${tab}3${tab}bitwise${tab}--model mlp:48-10 --data synthetic:3x4x4:n=64 --batch 4 --steps 2 --rule cdp-v1 --framework model-parallel --workers 2
EOF

gen=$("$PYTHON" "$GEN" "$SOAK_SEED" "$SOAK_COUNT") || { fail "soak_gen.py $SOAK_SEED $SOAK_COUNT did not run"; finish; }
while IFS=$tab read -r expect np want args; do
    combo "$expect" "$np" "$want" "$args" </dev/null   # mpirun reads stdin
done <<EOF
$gen
EOF
echo "soak: seed $SOAK_SEED, $((SOAK_COUNT + 3)) combinations (3 fixed): $verified verified," \
     "$refused refused, $bad failed, $(( $(date +%s) - start )) s"
finish
