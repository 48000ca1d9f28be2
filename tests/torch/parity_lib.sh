# Shared by the parity tests against tests/torch/torch_model_reference.py
# (mpi_resnet_parity.sh, mpi_vit_parity.sh): paths, skips, timeouts, and
#   write_init MODEL SEED FILE [reference options]
#   parity TAG MODEL INIT B K L "N:RANKS[:RULE,...] ..." "OPTIONS" [TOL_CHANGE]
#   load_test MODEL "cdp_run OPTIONS"
#   finish WHAT
# parity runs cdp_run for dp, cdp-v1 and cdp-v2 (or the RULEs given) with
# every N:RANKS from the weights INIT, with OPTIONS (the training options
# cdp_run and the reference share: --lr, --momentum, --weight-decay,
# --optimizer, --betas, --eps), on Fashion-MNIST in file order, saves
# P(K), and has the reference compare each run (RESULT lines, all "ok") and
# a negative control (the cdp-v1 reference against the last dp run: the
# last N:RANKS must run dp) that must FAIL.  TOL_CHANGE, where a
# case's calibration allows it, is a tighter bound on rel_change than the
# 1e-3 of doc/reference.md (every RESULT must meet both).
#
# Each run's weights stay in $tmp/TAG-RULE-nN-rRANKS.st.
#
# A test on other data sets before sourcing this file: PARITY_SPLITS (the
# Fashion-MNIST files it needs, "" for none), and after it PARITY_DATA (cdp_run's
# data options), PARITY_REF_OPTS (the reference's data and model options),
# PARITY_NOISE ("" leaves out the reference's float64 run).
#
# Skips (77) without /usr/bin/python3 + torch + torchvision or without the
# data files.  Environment (from the automake harness): top_builddir,
# top_srcdir, MPIRUN; CDP_TORCH_PYTHON, CDP_FMNIST_DIR override the python
# and the data directory.

set -u

. "$(dirname "$0")/torch_lib.sh"
# shellcheck disable=SC2086
torch_parity_setup torch_model_reference.py "torch torchvision numpy" cdp_parity ${PARITY_SPLITS-train t10k}
PARITY_DATA="--data fashion-mnist --data-dir $DATA"
PARITY_REF_OPTS="--data-dir $DATA"
PARITY_NOISE=--noise
TOL=1e-4
TOL_CHANGE=1e-3
started_at=$(date +%s)
TO=
TOPY=
if command -v timeout >/dev/null 2>&1; then
    TO="timeout 300"
    TOPY="timeout 600"
fi

bad=0

# write_init MODEL SEED FILE [reference options]: torchvision's own init
write_init() {
    local model=$1 seed=$2 file=$3
    shift 3
    $TOPY "$PY" "$REF" --write-init "$file" --model "$model" --seed "$seed" --in-channels 1 "$@" \
        || fail "$model: could not write the initial weights"
}

# parity TAG MODEL INIT B K L "N:RANKS[:RULE,...] ..." "OPTIONS" [TOL_CHANGE]
parity() {
    local tag=$1 model=$2 init=$3 B=$4 K=$5 L=$6 configs=$7 train=$8 tolc=${9:-$TOL_CHANGE}
    local opts="--batch $B --steps $K $train"
    echo "== $tag: $model, B=$B K=$K L=$L, $train (rel <= $TOL, rel_change <= $tolc)"

    # cdp's stage split (FLOPs-balanced, decided by cdp)
    local plan=$tmp/$tag-plan.log first_n=${configs%%:*}
    # shellcheck disable=SC2086
    if ! $TO "$CDP" --plan --model "$model" $PARITY_DATA \
            --stages "$L" --workers "$first_n" --batch "$B" --rule cdp-v2 >"$plan" 2>&1; then
        cat "$plan"
        fail "$tag: cdp_run --plan failed"
    fi
    local split
    split=$(sed -n 's/^stages: \([0-9][0-9,]*\) blocks$/\1/p' "$plan" | head -1)
    [ -n "$split" ] || { cat "$plan"; fail "$tag: cdp_run --plan printed no 'stages: a,b,c blocks' line"; }
    echo "cdp's split: $split blocks"

    local cases=() cfg n ranks rules launch out log last=
    for cfg in $configs; do
        n=${cfg%%:*}
        ranks=${cfg#*:}
        rules="dp cdp-v1 cdp-v2"
        case $ranks in
            *:*) rules=${ranks#*:}; rules=${rules//,/ }; ranks=${ranks%%:*} ;;
        esac
        launch=
        if [ "$ranks" -gt 1 ] && [ $have_mpi = 1 ]; then
            launch="$MPIRUN --allow-run-as-root --oversubscribe -np $ranks"
        else
            ranks=1
        fi
        for rule in $rules; do
            out=$tmp/$tag-$rule-n$n-r$ranks.st
            log=$tmp/$tag-$rule-n$n-r$ranks.log
            echo "cdp_run --model $model --rule $rule --workers $n ($ranks rank(s))"
            # shellcheck disable=SC2086
            if ! $TO $launch "$CDP" --model "$model" $PARITY_DATA \
                    --no-shuffle --rule $rule --workers $n $opts --stages "$L" \
                    --init-weights "$init" --save-weights "$out" \
                    --eval-every 0 --quiet >"$log" 2>&1; then
                cat "$log"
                fail "cdp_run --model $model --rule $rule --workers $n on $ranks rank(s) failed"
            fi
            [ -s "$out" ] || { cat "$log"; fail "cdp_run wrote no $out"; }
            cases+=(--case "$rule:$n:$out")
        done
        last=$n-r$ranks
    done
    # negative control: the cdp-v1 trajectory must not match the dp run
    cases+=(--case "cdp-v1:${last%-r*}:$tmp/$tag-dp-n$last.st")
    local nexp=${#cases[@]}
    nexp=$((nexp / 2))

    local rlog=$tmp/$tag-ref.log rc
    # shellcheck disable=SC2086
    $TOPY "$PY" "$REF" --model "$model" --init-weights "$init" $opts \
        --stages-split "$split" --stages "$L" $PARITY_REF_OPTS \
        --tol $TOL --tol-change "$tolc" $PARITY_NOISE "${cases[@]}" >"$rlog" 2>&1
    rc=$?
    cat "$rlog"
    [ $rc = 0 ] || [ $rc = 1 ] || fail "$tag: torch_model_reference.py exited with $rc"
    local nres
    nres=$(grep -c '^RESULT ' "$rlog")
    [ "$nres" = "$nexp" ] || fail "$tag: expected $nexp RESULT lines, got $nres"
    local i=0 line
    while IFS= read -r line; do
        i=$((i + 1))
        if [ $i -lt "$nexp" ]; then
            case $line in
                *" ok") ;;
                *) echo "mismatch ($tag): $line"; bad=1 ;;
            esac
        else
            case $line in
                *" FAIL") echo "negative control ($tag) differs as it should: $line" ;;
                *) echo "negative control ($tag) matched (the comparison is vacuous): $line"; bad=1 ;;
            esac
        fi
    done < <(grep '^RESULT ' "$rlog")
}

# load_test MODEL "cdp_run OPTIONS": cdp's weights (running statistics
# included) load into torchvision's module with strict=True and give cdp's
# own test accuracy (float rounding may move a handful of the 10,000
# predictions); where torchvision has the model, the user's example
# examples/load_torchvision.py prints the reference's accuracy exactly
load_test() {
    local model=$1 train=$2 w=$tmp/trained.st out ev ex cdp_acc t_acc
    # shellcheck disable=SC2086
    out=$($TO "$CDP" --model "$model" --data fashion-mnist --data-dir "$DATA" $train \
          --quiet --save-weights "$w" 2>&1) || { echo "$out"; fail "training $model for the load test failed"; }
    cdp_acc=$(echo "$out" | sed -n 's/^test_accuracy \([0-9.]*\).*/\1/p')
    ev=$($TO "$PY" "$REF" --evaluate "$w" --model "$model" --data-dir "$DATA" 2>&1) \
        || { echo "$ev"; fail "torchvision did not load cdp's $model (strict)"; }
    echo "$ev"
    t_acc=$(echo "$ev" | sed -n 's/.*test accuracy \([0-9.]*\).*/\1/p')
    if awk -v a="$cdp_acc" -v b="$t_acc" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0.3 && d <= 0.002) }'; then
        echo "load: $model: cdp test accuracy $cdp_acc, torchvision with cdp's weights $t_acc"
    else
        echo "load: $model: cdp test accuracy '$cdp_acc' vs torchvision '$t_acc' (want > 0.3 and within 0.002)"
        bad=1
    fi
    case $model in
        resnet18*|resnet34*|resnet50*|vit*)
            ex=$($TO "$PY" "$srcdir/examples/load_torchvision.py" "$w" "$model" "$DATA" 2>&1) \
                || { echo "$ex"; fail "examples/load_torchvision.py did not load cdp's $model"; }
            echo "$ex"
            case $ex in
                *"test accuracy $t_acc "*) ;;
                *) echo "load: examples/load_torchvision.py disagrees with the reference ($t_acc)"; bad=1 ;;
            esac ;;
    esac
}

# finish WHAT: the verdict
finish() {
    [ $bad = 0 ] || fail "cdp_run and the PyTorch reference disagree"
    echo "PASS: $* (rel <= $TOL, rel_change <= $TOL_CHANGE)"
    echo "# $(($(date +%s) - started_at)) s"   # for keeping make check within its time
    exit 0
}
