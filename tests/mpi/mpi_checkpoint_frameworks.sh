# Checkpoints are per stage, not per rank: replicated, zero and
# model-parallel write byte-identical checkpoints of the same step, and a
# checkpoint written by any framework on any number of ranks resumes under
# any other (here: other P, other framework) to exactly the weights of the
# uninterrupted run, also after SIGTERM or SIGINT; --checkpoint-every-steps
# K (segments cut at K, 2K, ...), --keep-checkpoints M (FILE.step-NNNNNNNN,
# the last M kept), --resume latest (the newest; a damaged one passed over,
# another run's refused, none: an error); a damaged or foreign checkpoint
# under zero and model-parallel is refused and not overwritten.
. "$(dirname "$0")/../lib/lib.sh"
M=mlp:784-32-16-10
# N = 4 workers, L = 2 stages: model-parallel cdp uses 4 ranks, 2 per stage
common="--data synthetic --model $M --workers 4 --stages 2 --batch 8 --quiet --eval-every 0 --lr 0.05 --momentum 0.9"
adamw="--data synthetic --model $M --workers 4 --stages 2 --batch 8 --quiet --eval-every 0 --lr 0.003 --optimizer adamw"
# cmp_same A B WHAT: byte-identical files
cmp_same() {
    if cmp -s "$1" "$2"; then pass "$3"; else fail "$3 ($(cmp "$1" "$2" 2>&1))"; fi
}

for opts in "$common --rule cdp-v2" "$adamw --rule cdp-v1"; do
    # every pair for SGD; AdamW's (two state buffers) across zero and model-parallel
    pairs="r.st:2:replicated r.st:2:zero z.st:3:zero z.st:5:model-parallel mp.st:5:model-parallel mp.st:3:zero mp.st:1:replicated"
    case $opts in *adamw*) pairs="z.st:5:model-parallel mp.st:3:zero" ;; esac
    tag=$(echo "$opts" | grep -o 'rule [a-z0-9-]*' | cut -d' ' -f2)-$(echo "$opts" | grep -q adamw && echo adamw || echo sgd)
    run 1 $opts --steps 150 --save-weights "$TMP/full.st" >/dev/null || fail "$tag: full run"
    # the same step written by the three frameworks: the same bytes
    run 1 $opts --steps 70 --checkpoint "$TMP/r.st" >/dev/null || fail "$tag: replicated, 1 rank"
    run 2 $opts --steps 70 --framework zero --checkpoint "$TMP/z.st" >/dev/null || fail "$tag: zero, 2 ranks"
    run 4 $opts --steps 70 --framework model-parallel --checkpoint "$TMP/mp.st" >/dev/null \
        || fail "$tag: model-parallel, 4 ranks"
    cmp_same "$TMP/z.st" "$TMP/r.st" "$tag: zero on 2 ranks writes replicated's checkpoint byte for byte"
    cmp_same "$TMP/mp.st" "$TMP/r.st" "$tag: model-parallel on 4 ranks writes replicated's checkpoint byte for byte"
    # each resumed on another number of ranks and (but one) another framework
    for pair in $pairs; do
        set -- $(echo "$pair" | tr : ' ')
        rm -f "$TMP/resumed.st"
        run $2 $opts --steps 150 --framework $3 --resume "$TMP/$1" --save-weights "$TMP/resumed.st" \
            >/dev/null || fail "$tag: $1 resumed by $3 on $2 ranks did not run"
        cmp_same "$TMP/resumed.st" "$TMP/full.st" "$tag: $1 (step 70) resumed by $3 on $2 ranks = uninterrupted run"
    done
done

# SIGTERM to one rank of zero on 2 ranks, resumed by zero on 3; SIGINT to
# one rank of model-parallel on 4, resumed by replicated on 2: the weights
# of the uninterrupted run (signal_run: lib.sh)
big="--data synthetic --model mlp:784-64-32-10 --workers 4 --stages 2 --batch 16 --quiet --eval-every 0 --lr 0.05 --rule cdp-v2"
run 1 $big --steps 3000 --save-weights "$TMP/full2.st" >/dev/null || fail "full run (signals)"
for case in "2 TERM 143 zero 3 zero" "4 INT 130 model-parallel 2 replicated"; do
    set -- $case
    np=$1 sig=$2 want=$3 fw=$4 np2=$5 fw2=$6
    rm -f "$TMP/s.st"
    signal_run $np rank $sig $big --steps 3000 --framework $fw --checkpoint "$TMP/s.st"
    if [ $rc -eq $want ] && [ -f "$TMP/s.st" ] &&
       grep -q "^cdp_run: SIG$sig: stopped at step [0-9]* of 3000, checkpoint $TMP/s.st written$" "$TMP/sig.err"; then
        pass "SIG$sig to a rank of $fw on $np ranks: checkpoint written, exit $rc ($(grep '^cdp_run:' "$TMP/sig.err"))"
        run $np2 $big --steps 3000 --framework $fw2 --resume "$TMP/s.st" --save-weights "$TMP/resumed2.st" \
            >/dev/null || fail "resume of the SIG$sig checkpoint by $fw2 on $np2 ranks"
        cmp_same "$TMP/resumed2.st" "$TMP/full2.st" \
            "SIG$sig'd $fw on $np ranks, resumed by $fw2 on $np2 ranks = uninterrupted run"
    else
        fail "SIG$sig to a rank of $fw on $np ranks: exit $rc, $(cat "$TMP/sig.err")"
    fi
done

# --checkpoint-every-steps 32 --keep-checkpoints 3 on 150 steps: written
# after 32, 64, 96, 128 and 150 (segments cut there), the last 3 kept
d="$TMP/every"
mkdir -p "$d"
run 2 $common --rule cdp-v2 --framework zero --steps 150 --checkpoint "$d/c.st" \
    --checkpoint-every-steps 32 --keep-checkpoints 3 >/dev/null || fail "--checkpoint-every-steps run"
files=$(cd "$d" && ls | tr '\n' ' ')
[ "$files" = "c.st.step-00000096 c.st.step-00000128 c.st.step-00000150 " ] \
    && pass "--checkpoint-every-steps 32 --keep-checkpoints 3: $files" \
    || fail "--checkpoint-every-steps 32 --keep-checkpoints 3: files $files"
grep -q '"step":"96"' "$d/c.st.step-00000096" && pass "c.st.step-00000096 holds step 96" \
    || fail "c.st.step-00000096 does not hold step 96"
# step 96 is not a 64-step segment boundary: resumed, the uninterrupted run
run 1 $common --rule cdp-v2 --steps 150 --save-weights "$TMP/full3.st" >/dev/null || fail "full run (steps)"
run 4 $common --rule cdp-v2 --framework model-parallel --steps 150 --resume "$d/c.st.step-00000096" \
    --save-weights "$TMP/r96.st" >/dev/null || fail "resume of step 96"
cmp_same "$TMP/r96.st" "$TMP/full3.st" "step-96 checkpoint of zero resumed by model-parallel = uninterrupted run"
# --keep-checkpoints 1 (the default): one file, the last
d1="$TMP/one"
mkdir -p "$d1"
run 1 $common --rule cdp-v2 --steps 150 --checkpoint "$d1/c.st" --checkpoint-every-steps 50 \
    >/dev/null || fail "--checkpoint-every-steps with one file"
[ "$(ls "$d1")" = "c.st" ] && grep -q '"step":"150"' "$d1/c.st" \
    && pass "--checkpoint-every-steps 50 without --keep-checkpoints: one file c.st, step 150" \
    || fail "--checkpoint-every-steps 50 without --keep-checkpoints: $(ls "$d1")"

# --resume latest: the newest (step 150 of a 150-step run cut short at 100)
d2="$TMP/latest"
mkdir -p "$d2"
run 2 $common --rule cdp-v2 --steps 100 --checkpoint "$d2/c.st" --checkpoint-every-steps 32 \
    --keep-checkpoints 2 >/dev/null || fail "run for --resume latest"
out=$(run 3 ${common/--quiet/} --rule cdp-v2 --framework zero --steps 150 --checkpoint "$d2/c.st" \
      --resume latest --save-weights "$TMP/latest.st" 2>&1) || fail "--resume latest: $out"
echo "$out" | grep -q "^resumed from $d2/c.st.step-00000100 at step 100$" \
    && pass "--resume latest took the newest, c.st.step-00000100" || fail "--resume latest: $out"
cmp_same "$TMP/latest.st" "$TMP/full3.st" "--resume latest = uninterrupted run"
# the newest damaged (one bit): passed over with a warning for step 96
rm -f "$d2/c.st"
f="$d2/c.st.step-00000100"
sz=$(wc -c < "$f")
byte=$(od -An -tu1 -j$((sz - 100)) -N1 "$f" | tr -d ' ')
printf "$(printf '\\%03o' $((byte ^ 4)))" | dd of="$f" bs=1 seek=$((sz - 100)) conv=notrunc 2>/dev/null
out=$(run 2 ${common/--quiet/} --rule cdp-v2 --steps 150 --checkpoint "$d2/c.st" --resume latest \
      --save-weights "$TMP/latest2.st" 2>&1) || fail "--resume latest past a damaged one: $out"
echo "$out" | grep -q "^cdp_run: warning: --resume latest: passing over $f: damaged checkpoint" &&
    echo "$out" | grep -q "^resumed from $d2/c.st.step-00000096 at step 96$" \
    && pass "--resume latest passed over the damaged newest: $(echo "$out" | grep warning)" \
    || fail "--resume latest past a damaged one: $out"
cmp_same "$TMP/latest2.st" "$TMP/full3.st" "--resume latest from step 96 = uninterrupted run"
# the newest another run's (other --lr): refused, nothing written
cp "$TMP/z.st" "$d2/c.st.step-00000200"   # the AdamW run's, step 70
before=$(cd "$d2" && ls -l --time-style=+%s.%N; md5sum *)
out=$(run 2 $common --rule cdp-v2 --steps 300 --checkpoint "$d2/c.st" --resume latest 2>&1) \
    && fail "--resume latest resumed another run's checkpoint" \
    || { [ "$(echo "$out" | grep -c '^cdp_run: error:')" -eq 1 ] &&
         echo "$out" | grep -q "c.st.step-00000200: written by an --optimizer adamw run.*belongs to another run" \
         && pass "--resume latest refuses another run's newest: $(echo "$out" | grep error)" \
         || fail "--resume latest, another run's: $out"; }
[ "$before" = "$(cd "$d2" && ls -l --time-style=+%s.%N; md5sum *)" ] \
    && pass "nothing written or removed after the refusal" || fail "files changed after the refusal"
out=$(run 2 $common --rule cdp-v2 --steps 150 --checkpoint "$TMP/nothing.st" --resume latest 2>&1) \
    && fail "--resume latest without checkpoints ran" \
    || { echo "$out" | grep -q "^cdp_run: error: --resume latest: no checkpoint $TMP/nothing.st or" \
         && pass "no checkpoint for --resume latest: $(echo "$out" | grep error)" \
         || fail "--resume latest without checkpoints: $out"; }
out=$(run 1 $common --steps 150 --resume latest 2>&1) && fail "--resume latest without --checkpoint ran" \
    || { echo "$out" | grep -q "^cdp_run: error: --resume latest needs --checkpoint FILE" \
         && pass "--resume latest without --checkpoint: $(echo "$out" | grep error)" \
         || fail "--resume latest without --checkpoint: $out"; }

# damaged, truncated or foreign checkpoints under zero and model-parallel:
# refused with one line, the file (also the --checkpoint) left as it was
cp "$TMP/mp.st" "$TMP/keep.st"                          # AdamW, step 70
head -c 1000 "$TMP/keep.st" > "$TMP/cut.st"
cp "$TMP/r96.st" "$TMP/weights.st"                      # a weight file, not a checkpoint
for case in "cut.st zero 2 damaged\|truncated\|leave" "keep.st model-parallel 4 optimizer adamw run" \
            "weights.st zero 2 not a cdp checkpoint"; do
    set -- $case
    file=$1 fw=$2 np=$3
    shift 3
    cp "$TMP/$file" "$TMP/before.st"
    out=$(run $np $common --rule cdp-v2 --framework $fw --steps 150 --checkpoint "$TMP/$file" \
          --resume "$TMP/$file" 2>&1) && fail "$file resumed by $fw" \
        || { [ "$(echo "$out" | grep -c '^cdp_run: error:')" -eq 1 ] && echo "$out" | grep -q "$*" &&
             cmp -s "$TMP/$file" "$TMP/before.st" \
             && pass "$fw on $np ranks refuses $file, left as it was: $(echo "$out" | grep error)" \
             || fail "$fw refusing $file: $out"; }
done
finish
