# The soak: random but valid option combinations on 1 to 4 ranks, every
# rule, framework and optimizer, MLPs, ViTs and resnet20 on synthetic data
# (tests/lib/soak_gen.py SEED COUNT), each of which must either train to the
# weights of --verify's serial reference (exit 0, the verify line saying
# bitwise equal; for dp with a collective within 1e-5, or 1e-3 where
# AdamW or BatchNorm amplify the sum order's last bits) or be refused
# with exactly one line "cdp_run: error: ..." naming what is wrong, within
# a time limit.  First the combinations the soak once found broken, then
# SOAK_COUNT generated from SOAK_SEED (make check: a short fixed slice;
# bench/reliability/soak.sh: a long one).  A failing combination prints the command
# that replays it.
. "$(dirname "$0")/../lib/lib.sh"
: "${top_srcdir:=$top_builddir}"
: "${SOAK_SEED:=20261128}"
: "${SOAK_COUNT:=30}"
: "${PYTHON:=python3}"
GEN="$top_srcdir/tests/lib/soak_gen.py"
verified=0 refused=0 bad=0 nfixed=0

# replay NP ARGS: how to run a combination again by hand
replay() {
    local np=$1
    shift
    echo "  replay: mpirun --oversubscribe -np $np $CDP $*"
}

# verify_combo NP WANT ARGS...: --verify passes, and the difference it
# reports is within WANT: bitwise (the exact rules), 1e-5 (dp with a
# collective) or 1e-3 (dp with a collective where the sum order's last
# bits grow: AdamW, whose update divides by the gradient's size, and
# BatchNorm on small micro-batches; --verify allows 1e-3 there too)
verify_combo() {
    local np=$1 want=$2 out rc line errs rel
    shift 2
    out=$(timeout 120 "$MPIRUN" --oversubscribe -np "$np" "$CDP" "$@" --verify --quiet 2>&1)
    rc=$?
    line=$(printf '%s\n' "$out" | grep '^verify: serial reference')
    errs=$(printf '%s\n' "$out" | grep '^cdp_run: ')
    rel=$(printf '%s\n' "$line" | sed -n 's/.*max relative difference \([0-9.e+-]*\),.*/\1/p')
    if [ $rc -eq 124 ]; then
        fail "np=$np $*: hung (120 s)"
    elif [ -z "$line" ]; then
        fail "np=$np $*: exit $rc, no verify line: ${errs:-$(printf '%s\n' "$out" | tail -n 5)}"
    elif [ $rc -ne 0 ]; then
        fail "np=$np $*: exit $rc: $line $errs"
    elif [ -n "$errs" ]; then
        fail "np=$np $*: exit 0 with: $errs"
    elif [ "$want" = bitwise ] && ! printf '%s\n' "$line" | grep -q ' 0 of [0-9]* values differ bitwise'; then
        fail "np=$np $*: not bitwise: $line"
    elif [ "$want" != bitwise ] && ! awk -v r="$rel" -v w="$want" 'BEGIN { exit !(r != "" && r + 0 <= w + 0) }'; then
        fail "np=$np $*: not within $want: $line"
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
# collectives (MPI_ERR_TRUNCATE after training); a ResNet whose last
# BatchNorm saw one value per channel in a step (N = B = 1, 1x1 pixels)
# made its running variance 0/0 and the run "diverged" (exit 3, "lower
# --lr"): refused before training, while two values (N = 2) train
while IFS=$tab read -r expect np want args; do
    combo "$expect" "$np" "$want" "$args" </dev/null   # mpirun reads stdin
    nfixed=$((nfixed + 1))
done <<EOF
verify${tab}2${tab}bitwise${tab}--model mlp:48-16-10 --data synthetic:3x4x4:n=64 --batch 4 --steps 2 --rule cdp-v1 --framework zero --stages 1
verify${tab}4${tab}1e-5${tab}--model mlp:48-16-10 --data synthetic:3x4x4:n=64 --batch 4 --steps 2 --rule dp --framework zero --stages 1
verify${tab}3${tab}bitwise${tab}--model mlp:48-10 --data synthetic:3x4x4:n=64 --batch 4 --steps 2 --rule cdp-v1 --framework model-parallel --workers 2
refuse${tab}1${tab}1 value per channel${tab}--model resnet20 --data synthetic:1x4x4:n=4 --workers 1 --batch 1 --steps 2
refuse${tab}2${tab}layer3.0.bn1 normalises 1 value${tab}--model resnet20 --data synthetic:1x4x4:n=4 --workers 1 --batch 1 --steps 2 --framework model-parallel --stages 1
verify${tab}2${tab}bitwise${tab}--model resnet20 --data synthetic:1x4x4:n=4 --workers 2 --batch 1 --steps 2 --rule cdp-v1
verify${tab}3${tab}1e-3${tab}--model vit:patch=4,dim=4,depth=2,heads=1,mlp=8 --data synthetic:1x8x8:n=12 --rule dp --stages 1 --batch 1 --steps 5 --optimizer adamw --lr 0.001 --betas 0.9,0.999 --eps 1e-8 --seed 763692
EOF

gen=$("$PYTHON" "$GEN" "$SOAK_SEED" "$SOAK_COUNT") || { fail "soak_gen.py $SOAK_SEED $SOAK_COUNT did not run"; finish; }
while IFS=$tab read -r expect np want args; do
    combo "$expect" "$np" "$want" "$args" </dev/null   # mpirun reads stdin
done <<EOF
$gen
EOF
echo "soak: seed $SOAK_SEED, $((SOAK_COUNT + nfixed)) combinations ($nfixed fixed): $verified verified," \
     "$refused refused, $bad failed, $(( $(date +%s) - start )) s"
finish
