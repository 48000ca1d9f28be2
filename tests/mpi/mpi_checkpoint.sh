# Checkpoints resume bit for bit: a run cut in two (at a step boundary, and
# by SIGTERM, on 1 and 2 ranks) ends with exactly the weights of the
# uninterrupted run; SIGTERM and SIGINT stop every rank with one message and
# the status README gives, with or without --checkpoint; a
# checkpoint from other options or a damaged file (truncated, one bit
# flipped) is refused; --resume latest removes the temporary files of dead
# writers of this host, and only those.
. "$(dirname "$0")/../lib/lib.sh"
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
# --resume latest removes the temporary files of dead writers of this
# host (a SIGKILL leaves them, as large as a checkpoint), exactly those, and
# says so in one line; a live process's and another host's stay
me=$(hostname | tr -c 'A-Za-z0-9._\n-' '_')
sh -c 'exit 0' &
dead=$!
wait $dead
run 2 $common --rule dp --steps 70 --checkpoint "$TMP/k.st" --keep-checkpoints 2 >/dev/null || fail "run for --resume latest"
stale="k.st.step-00000070.tmp.$me.$dead"
head -c 1000000 /dev/zero > "$TMP/$stale"
keep="k.st.step-00000070.tmp.$me.$$ k.st.step-00000070.tmp.elsewhere-$me.$dead k.st.tmp.$dead k.st.step-00000070.tmp.$me.0$dead"
for f in $keep; do echo x > "$TMP/$f"; done
run 2 $common --rule dp --steps 80 --checkpoint "$TMP/k.st" --keep-checkpoints 2 --resume latest \
    >/dev/null 2>"$TMP/k.err" || fail "--resume latest with stale temporary files: $(cat "$TMP/k.err")"
line="cdp_run: --resume latest: removed 1 temporary file of dead processes of this host ($me, 1.0 MB) in $TMP: $stale; left 2 temporary files of live processes or other hosts alone: "
left=
for f in $keep; do [ -f "$TMP/$f" ] || left="$left $f"; done
if [ -e "$TMP/$stale" ]; then
    fail "--resume latest: the dead process's temporary file $stale is still there"
elif [ -n "$left" ]; then
    fail "--resume latest removed what was not a dead writer's of this host:$left"
elif [ "$(grep -c '^cdp_run: --resume latest:' "$TMP/k.err")" -ne 1 ] || ! grep -qF "$line" "$TMP/k.err"; then
    fail "--resume latest: not the one line expected: $(cat "$TMP/k.err")"
elif printf '%s\n' $keep > "$TMP/k.keep" && ls "$TMP" | grep '\.tmp\.' | grep -qvxF -f "$TMP/k.keep"; then
    fail "--resume latest: a temporary file of its own was left: $(ls "$TMP" | grep '\.tmp\.')"
else
    pass "--resume latest removed the stale temporary file only ($(cat "$TMP/k.err"))"
fi

# SIGTERM: one process, stopped once it is training (its first epoch line
# is out), resumed: the weights are those of the uninterrupted run
big="--data synthetic --model mlp:784-128-64-10 --workers 4 --batch 32 --quiet --eval-every 1 --lr 0.05"
run 1 $big --rule cdp-v2 --steps 3000 --save-weights "$TMP/full2.st" >/dev/null || fail "full run"
M2=mlp:784-128-64-10
"$CDP" $big --rule cdp-v2 --steps 3000 --checkpoint "$TMP/t.st" --metrics "$TMP/t.json" >/dev/null 2>"$TMP/term.err" &
pid=$!
until_nonempty "$TMP/t.json" 30
kill -TERM $pid
wait $pid
rc=$?
if [ $rc -eq 143 ] && [ -f "$TMP/t.st" ] &&
   grep -q "^cdp_run: SIGTERM: stopped at step [0-9]* of 3000, checkpoint $TMP/t.st written$" "$TMP/term.err"; then
    pass "SIGTERM: checkpoint written, exit 143 ($(cat "$TMP/term.err"))"
    run 1 $big --rule cdp-v2 --steps 3000 --resume "$TMP/t.st" --save-weights "$TMP/resumed2.st" >/dev/null \
        || fail "resume after SIGTERM"
    same $M2 "$TMP/resumed2.st" "$TMP/full2.st" 0 "SIGTERM + resume = uninterrupted run"
else
    fail "SIGTERM: exit $rc, $(cat "$TMP/term.err")"
fi
# SIGINT without --checkpoint: stops at the next segment boundary (64 steps at most), says so, 130
"$CDP" $big --rule cdp-v2 --steps 3000 --metrics "$TMP/i.json" >/dev/null 2>"$TMP/int.err" &
pid=$!
until_nonempty "$TMP/i.json" 30
kill -INT $pid
wait $pid
rc=$?
[ $rc -eq 130 ] && grep -q "^cdp_run: SIGINT: stopped at step [0-9]* of 3000, no checkpoint written" "$TMP/int.err" \
    && pass "SIGINT without --checkpoint: exit 130 ($(cat "$TMP/int.err"))" \
    || fail "SIGINT without --checkpoint: exit $rc, $(cat "$TMP/int.err")"

# Under mpirun (2 ranks): signal_run (lib.sh) leaves mpirun's status in rc
# and the run's stderr in $TMP/sig.err.
msgs() { grep -c "^cdp_run: SIG" "$TMP/sig.err"; }
# A second SIGTERM while the checkpoint is being written (its temporary
# file is there): the process ends at once (killed by the signal), removes
# the temporary file, and the previous checkpoint stays as it was
wide="--data synthetic:n=1024:test=32 --model mlp:784-2048-2048-2048-10 --workers 4 --batch 8 --quiet --eval-every 0"
run 1 $wide --steps 2 --checkpoint "$TMP/w.st" >/dev/null || fail "wide run for the second signal"
cp "$TMP/w.st" "$TMP/w.before"
"$CDP" $wide --steps 100000 --checkpoint "$TMP/w.st" --metrics "$TMP/w.json" >/dev/null 2>&1 &
pid=$!
until_nonempty "$TMP/w.json" 60
kill -TERM $pid
seen=
for _ in $(seq 12000); do   # 120 s: the next segment boundary, then the write
    ls "$TMP"/w.st.tmp.* >/dev/null 2>&1 && { seen=1; break; }
    kill -0 $pid 2>/dev/null || break
    sleep 0.01
done
kill -TERM $pid 2>/dev/null
wait $pid
rc=$?
left=$(ls "$TMP"/w.st.tmp.* 2>/dev/null)
if [ -z "$seen" ]; then
    fail "second SIGTERM: the checkpoint's temporary file was never seen (exit $rc)"
elif [ -n "$left" ]; then
    fail "second SIGTERM during the checkpoint's write: exit $rc, left $left"
elif ! cmp -s "$TMP/w.st" "$TMP/w.before"; then
    fail "second SIGTERM during the checkpoint's write: the previous checkpoint changed"
else
    pass "second SIGTERM during the checkpoint's write: exit $rc, no temporary file left, the previous checkpoint intact"
fi

# SIGTERM to one rank: every rank stops at the same step, the checkpoint is
# written, mpirun passes the ranks' 143 on; the resume equals the full run
run 2 $big --rule cdp-v1 --steps 1500 --save-weights "$TMP/full3.st" >/dev/null || fail "full run on 2 ranks"
signal_run 2 rank TERM $big --rule cdp-v1 --steps 1500 --checkpoint "$TMP/r.st"
if [ $rc -eq 143 ] && [ "$(msgs)" -eq 1 ] && [ -f "$TMP/r.st" ] &&
   grep -q "^cdp_run: SIGTERM: stopped at step [0-9]* of 1500, checkpoint $TMP/r.st written$" "$TMP/sig.err"; then
    pass "SIGTERM to one of 2 ranks: mpirun exits 143 ($(grep '^cdp_run:' "$TMP/sig.err"))"
    run 2 $big --rule cdp-v1 --steps 1500 --resume "$TMP/r.st" --save-weights "$TMP/resumed3.st" >/dev/null \
        || fail "resume on 2 ranks after SIGTERM"
    same $M2 "$TMP/resumed3.st" "$TMP/full3.st" 0 "2 ranks: SIGTERM + resume = uninterrupted run"
else
    fail "SIGTERM to one of 2 ranks: mpirun exit $rc, $(cat "$TMP/sig.err")"
fi
# SIGINT to one rank, no --checkpoint: 130
signal_run 2 rank INT $big --rule dp --steps 20000
[ $rc -eq 130 ] && [ "$(msgs)" -eq 1 ] &&
    grep -q "^cdp_run: SIGINT: stopped at step [0-9]* of 20000, no checkpoint written" "$TMP/sig.err" \
    && pass "SIGINT to one of 2 ranks: mpirun exits 130 ($(grep '^cdp_run:' "$TMP/sig.err"))" \
    || fail "SIGINT to one of 2 ranks: mpirun exit $rc, $(cat "$TMP/sig.err")"
# SIGTERM (or Ctrl-C's SIGINT) to mpirun itself: Open MPI 4.1 sends SIGTERM
# to the ranks, which stop and write the checkpoint within its second of
# grace, and mpirun exits 1 whatever the ranks return (README, Checkpoints)
for sig in TERM INT; do
    rm -f "$TMP/m.st"
    signal_run 2 mpirun $sig $big --rule cdp-v2 --steps 20000 --checkpoint "$TMP/m.st"
    { [ $rc -eq 1 ] || [ $rc -eq 143 ]; } && [ "$(msgs)" -eq 1 ] && [ -f "$TMP/m.st" ] &&
        grep -q "^cdp_run: SIGTERM: stopped at step [0-9]* of 20000, checkpoint $TMP/m.st written$" "$TMP/sig.err" \
        && pass "SIG$sig to mpirun: the ranks stop with a checkpoint, mpirun exits $rc ($(grep '^cdp_run:' "$TMP/sig.err"))" \
        || fail "SIG$sig to mpirun: mpirun exit $rc, $(cat "$TMP/sig.err")"
done

# refusals
# the line names the options that differ, the checkpoint's value and ours
out=$(run 2 $common --rule dp --lr 0.1 --steps 150 --resume "$TMP/c.st" 2>&1) \
    && fail "a checkpoint resumed under another --lr" \
    || { echo "$out" | grep -q "c.st: written by a run with --lr 0.05 (this run: 0.1); resume with the options" \
         && pass "other options refused: $(echo "$out" | grep error)" || fail "other options: $out"; }
out=$(run 1 $common --rule cdp-v1 --batch 16 --no-shuffle --steps 150 --resume "$TMP/c.st" 2>&1) \
    && fail "a checkpoint resumed under another --batch" \
    || { echo "$out" | grep -q "written by a run with --batch 8 (this run: 16), --rule dp (this run: cdp-v1), --no-shuffle off (this run: on); resume" \
         && pass "other options refused: $(echo "$out" | grep error)" || fail "other options: $out"; }
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
