# Checkpoints resume bit for bit: a run cut in two (at a step boundary, and
# by SIGTERM) ends with exactly the weights of the uninterrupted run; a
# checkpoint from other options or a damaged file (truncated, one bit
# flipped) is refused.
. "$(dirname "$0")/lib.sh"
M=mlp:784-32-16-10
common="--data synthetic --model $M --workers 4 --batch 8 --quiet --eval-every 0 --lr 0.05 --momentum 0.9"
for np in 1 2; do
    for rule in cdp-v1 dp; do
        run $np $common --rule $rule --steps 150 --save-weights "$TMP/full.st" >/dev/null || fail "full run"
        run $np $common --rule $rule --steps 70 --checkpoint "$TMP/c.st" >/dev/null || fail "first half"
        run $np $common --rule $rule --steps 150 --resume "$TMP/c.st" --save-weights "$TMP/resumed.st" >/dev/null \
            || fail "resume"
        same $M "$TMP/resumed.st" "$TMP/full.st" 0 "$rule on $np ranks: checkpoint at step 70 + resume = uninterrupted run"
    done
done
# SIGTERM: one process, stopped once it is training (its first epoch line
# is out), resumed: the weights are those of the uninterrupted run
big="--data synthetic --model mlp:784-128-64-10 --workers 4 --batch 32 --quiet --eval-every 1 --lr 0.05"
run 1 $big --rule cdp-v2 --steps 3000 --save-weights "$TMP/full2.st" >/dev/null || fail "full run"
M2=mlp:784-128-64-10
"$CDP" $big --rule cdp-v2 --steps 3000 --checkpoint "$TMP/t.st" --metrics "$TMP/t.json" >/dev/null 2>"$TMP/term.err" &
pid=$!
for _ in $(seq 300); do
    [ -s "$TMP/t.json" ] && break
    sleep 0.1
done
kill -TERM $pid
wait $pid
rc=$?
if [ $rc -eq 143 ] && [ -f "$TMP/t.st" ] && grep -q SIGTERM "$TMP/term.err"; then
    pass "SIGTERM: checkpoint written, exit 143 ($(cat "$TMP/term.err"))"
    run 1 $big --rule cdp-v2 --steps 3000 --resume "$TMP/t.st" --save-weights "$TMP/resumed2.st" >/dev/null \
        || fail "resume after SIGTERM"
    same $M2 "$TMP/resumed2.st" "$TMP/full2.st" 0 "SIGTERM + resume = uninterrupted run"
else
    fail "SIGTERM: exit $rc, $(cat "$TMP/term.err")"
fi
# refusals
out=$(run 2 $common --rule cdp-v2 --lr 0.1 --steps 150 --resume "$TMP/c.st" 2>&1) \
    && fail "a checkpoint resumed under another --lr" \
    || { echo "$out" | grep -q "other --model" && pass "other options refused: $(echo "$out" | grep error)" \
         || fail "other options: $out"; }
head -c 300 "$TMP/c.st" > "$TMP/cut.st"
out=$(run 2 $common --rule dp --steps 150 --resume "$TMP/cut.st" 2>&1) \
    && fail "a truncated checkpoint was accepted" \
    || { [ "$(echo "$out" | grep -c '^cdp_run: error:')" -eq 1 ] && pass "truncated checkpoint refused: $(echo "$out" | grep error)" \
         || fail "truncated checkpoint: $out"; }
# one bit flipped in the data (a momentum float, in the middle): the
# checksum refuses it on every rank, with one line
hlen=$(od -An -tu8 -N8 "$TMP/c.st" | tr -d ' ')
each=$(( ($(wc -c < "$TMP/c.st") - 8 - hlen - 8) / 3 ))   # params, params_prev, momentum, step
at=$(( 8 + hlen + 2 * each + each / 2 ))
byte=$(od -An -tu1 -j"$at" -N1 "$TMP/c.st" | tr -d ' ')
cp "$TMP/c.st" "$TMP/flip.st"
printf "$(printf '\\%03o' $((byte ^ 16)))" | dd of="$TMP/flip.st" bs=1 seek="$at" conv=notrunc 2>/dev/null
if cmp -s "$TMP/c.st" "$TMP/flip.st"; then
    fail "could not flip a bit of the checkpoint"
else
    out=$(run 2 $common --rule dp --steps 150 --resume "$TMP/flip.st" 2>&1) \
        && fail "a checkpoint with a flipped bit was resumed" \
        || { [ "$(echo "$out" | grep -c '^cdp_run: error:')" -eq 1 ] && echo "$out" | grep -q "damaged checkpoint" \
             && pass "flipped bit refused: $(echo "$out" | grep error)" \
             || fail "flipped bit: $out"; }
fi
finish
