# AdamW and the lr schedules under the cdp rules: with --optimizer adamw
# --lr-schedule cosine --warmup-steps 5 on the default MLP, cdp-v1 and
# cdp-v2 give weights bitwise equal to the serial reference on 1 rank and
# bitwise equal to those on 2, 3 and 4 ranks, under the replicated, zero and
# model-parallel frameworks; the options really change the run; an AdamW
# run cut in two by a checkpoint resumes bit for bit; a checkpoint of the
# other optimizer is refused with one line; bad values are refused.
. "$(dirname "$0")/../lib/lib.sh"
M=mlp:784-256-128-10    # the default model
opt="--optimizer adamw --lr-schedule cosine --warmup-steps 5 --lr 0.002"
common="--data synthetic --model $M --workers 4 --batch 8 --steps 12 --quiet --eval-every 0"
for rule in cdp-v1 cdp-v2; do
    out=$(run 1 $common $opt --rule $rule --verify --save-weights "$TMP/$rule-1.st" 2>&1)
    if [ $? -eq 0 ] && echo "$out" | grep -q " 0 of .* differ bitwise"; then
        pass "adamw cosine warm-up $rule: 1 rank equals the serial reference bitwise"
    else
        fail "adamw $rule --verify: $out"
    fi
    for np in 2 3 4; do
        run $np $common $opt --rule $rule --save-weights "$TMP/$rule-$np.st" >/dev/null \
            || fail "adamw $rule on $np ranks did not run"
        same $M "$TMP/$rule-$np.st" "$TMP/$rule-1.st" 0 "adamw $rule: $np ranks bitwise equal to 1 rank"
    done
    run 2 $common $opt --rule $rule --framework zero --save-weights "$TMP/$rule-zero.st" >/dev/null \
        && same $M "$TMP/$rule-zero.st" "$TMP/$rule-1.st" 0 "adamw $rule: zero on 2 ranks = replicated" \
        || fail "adamw $rule --framework zero did not run"
    # model-parallel with N = L = 3 (3 ranks: one per stage)
    np=$("$CDP" --plan --framework model-parallel --workers 3 --rule $rule --model $M |
         sed -n 's/^ranks used: \([0-9]*\).*/\1/p')
    if [ -n "$np" ] && [ "$np" -le 4 ]; then
        run 1 $common $opt --rule $rule --workers 3 --save-weights "$TMP/$rule-n3.st" >/dev/null \
            || fail "adamw $rule N=3 did not run"
        run $np $common $opt --rule $rule --workers 3 --framework model-parallel \
                --save-weights "$TMP/$rule-mp.st" >/dev/null \
            && same $M "$TMP/$rule-mp.st" "$TMP/$rule-n3.st" 0 "adamw $rule N=3: model-parallel on $np ranks = replicated" \
            || fail "adamw $rule --framework model-parallel on $np ranks did not run"
    else
        fail "model-parallel N=3: the plan asks for '$np' ranks"
    fi
done
# each option changes the run (else the checks above prove little)
run 1 $common --rule cdp-v2 --lr 0.002 --save-weights "$TMP/sgd.st" >/dev/null || fail "sgd run"
run 1 $common --rule cdp-v2 --optimizer adamw --lr 0.002 --save-weights "$TMP/adamw.st" >/dev/null \
    || fail "adamw step run"
run 1 $common --rule cdp-v2 --optimizer adamw --lr 0.002 --lr-schedule cosine --save-weights "$TMP/cos.st" \
    >/dev/null || fail "adamw cosine run"
differ $M "$TMP/sgd.st" "$TMP/adamw.st" "--optimizer adamw against sgd"
differ $M "$TMP/adamw.st" "$TMP/cos.st" "--lr-schedule cosine against step"
differ $M "$TMP/cos.st" "$TMP/cdp-v2-1.st" "--warmup-steps 5 against none"
# SGD given explicitly as the defaults are: the bits of the defaults
run 1 $common --rule cdp-v2 --lr 0.002 --optimizer sgd --lr-schedule step --warmup-steps 0 \
    --save-weights "$TMP/sgd2.st" >/dev/null || fail "explicit sgd run"
same $M "$TMP/sgd2.st" "$TMP/sgd.st" 0 "--optimizer sgd --lr-schedule step --warmup-steps 0 = the defaults"
# an AdamW run (step schedule: the run's length is free) cut in two by a
# checkpoint, on 1 and 2 ranks, is the uninterrupted run
ck="--data synthetic --model mlp:784-32-16-10 --workers 4 --batch 8 --quiet --eval-every 0 --rule cdp-v1"
ck="$ck --optimizer adamw --warmup-steps 4 --lr 0.003 --lr-decay-epochs 1"
for np in 1 2; do
    run $np $ck --steps 40 --save-weights "$TMP/full.st" >/dev/null || fail "adamw full run"
    run $np $ck --steps 17 --checkpoint "$TMP/c.st" >/dev/null || fail "adamw first part"
    run $np $ck --steps 40 --resume "$TMP/c.st" --save-weights "$TMP/resumed.st" >/dev/null \
        || fail "adamw resume"
    same mlp:784-32-16-10 "$TMP/resumed.st" "$TMP/full.st" 0 "adamw on $np ranks: checkpoint at step 17 + resume = uninterrupted run"
done
# the other optimizer's checkpoint: one line, exit 1
sgdck="--data synthetic --model mlp:784-32-16-10 --workers 4 --batch 8 --quiet --eval-every 0 --rule cdp-v1"
run 1 $sgdck --steps 3 --checkpoint "$TMP/sgd.ckpt" >/dev/null || fail "sgd checkpoint run"
for case in "$TMP/c.st|$sgdck --steps 40|--optimizer adamw run, cannot resume with --optimizer sgd" \
            "$TMP/sgd.ckpt|$sgdck --steps 40 --optimizer adamw|--optimizer sgd run, cannot resume with --optimizer adamw"; do
    IFS='|' read -r file args want <<<"$case"
    out=$(timeout 60 "$CDP" $args --resume "$file" 2>&1)
    rc=$?
    if [ $rc -eq 1 ] && [ "$(echo "$out" | grep -c .)" -eq 1 ] && echo "$out" | grep -q -- "$want"; then
        pass "optimizer mismatch refused: $out"
    else
        fail "optimizer mismatch: exit $rc: $out"
    fi
done
# bad values: one error line naming the option, exit 1
for bad in "--optimizer adam" "--betas 0.9" "--betas 0.9,1" "--betas -0.1,0.9" "--eps -1" \
           "--lr-schedule linear" "--warmup-steps -1" "--warmup-steps x" "--betas 0.8,0.9" \
           "--optimizer adamw --momentum 0.5" "--lr-schedule cosine --lr-gamma 0.1"; do
    out=$(timeout 60 "$CDP" $bad 2>&1)
    rc=$?
    if [ $rc -eq 1 ] && [ "$(echo "$out" | grep -c .)" -eq 1 ] && echo "$out" | grep -q "^cdp_run: error: .*--"; then
        pass "$bad refused: $out"
    else
        fail "$bad: exit $rc: $out"
    fi
done
# AdamW's defaults are torch.optim.AdamW's (lr 0.001, weight decay 0.01),
# SGD's stay lr 0.03 and no decay; a given --lr wins
defaults() {  # want args...
    local want=$1 out
    shift
    out=$(run 1 --data synthetic --steps 1 --eval-every 0 "$@" 2>&1)
    printf '%s\n' "$out" | grep -q -- "$want" && pass "defaults $*: $want" \
        || fail "defaults $*: no '$want' in: $out"
}
defaults "optimizer adamw: lr 0.001, betas 0.9,0.999, eps 1e-08, weight decay 0.01;" --optimizer adamw
defaults "optimizer adamw: lr 0.02, .* weight decay 0.01;" --optimizer adamw --lr 0.02
defaults "optimizer sgd: lr 0.03, momentum 0.9, weight decay 0;" --warmup-steps 1
finish
