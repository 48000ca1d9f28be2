# The summary's model state bytes per rank: the scheduled figure (each
# buffer that leaves the rank counted as gone at the instruction that
# sends it) is the same every run, whatever the timing, and the measured
# one (held until the send completes) is never below it.  On 1 rank
# nothing is sent, so both equal what the parameter count gives: dp holds
# the parameters, the optimizer state and the gradient block, (2 + state
# buffers) x 4 bytes x nparams.
. "$(dirname "$0")/../lib/lib.sh"
key() { grep '"summary": true' "$1" | grep -o "\"$2\": [0-9]*" | grep -o '[0-9]*$'; }
# mlp:784-32-16-10: 784*32+32 + 32*16+16 + 16*10+10 parameters
np_=$((784 * 32 + 32 + 32 * 16 + 16 + 16 * 10 + 10))
for opt in "sgd 3" "adamw 4"; do
    set -- $opt
    run 1 --data synthetic --model mlp:784-32-16-10 --workers 4 --batch 8 --rule dp --steps 8 \
        --eval-every 0 --quiet --optimizer $1 --metrics "$TMP/one.json" >/dev/null || fail "1 rank, $1"
    want=$(($2 * 4 * np_))
    s=$(key "$TMP/one.json" model_state_bytes_per_rank_scheduled)
    m=$(key "$TMP/one.json" model_state_bytes_per_rank)
    [ "$s" = "$want" ] && [ "$m" = "$want" ] \
        && pass "1 rank, dp, $1: scheduled = measured = $2 x 4 x $np_ = $want" \
        || fail "1 rank, dp, $1: scheduled $s, measured $m, want $want"
done
# zero and replicated on 4 ranks, 8 stages: the scheduled figure is the
# same in a run alone and in one beside another (other timing)
M=mlp:784-512-512-512-512-512-512-512-10
args="--data synthetic --model $M --stages 8 --workers 4 --batch 8 --rule cdp-v2 --steps 64 --eval-every 0 --quiet"
for fw in replicated zero; do
    run 4 $args --framework $fw --metrics "$TMP/a.json" >/dev/null || fail "$fw alone"
    run 4 $args --framework $fw --metrics "$TMP/b.json" >/dev/null & p1=$!
    run 4 $args --framework $fw --metrics "$TMP/c.json" >/dev/null || fail "$fw beside another"
    wait $p1 || fail "$fw beside another"
    sa=$(key "$TMP/a.json" model_state_bytes_per_rank_scheduled)
    bad=
    for j in a b c; do
        s=$(key "$TMP/$j.json" model_state_bytes_per_rank_scheduled)
        m=$(key "$TMP/$j.json" model_state_bytes_per_rank)
        [ -n "$s" ] && [ "$s" = "$sa" ] || bad="$bad scheduled $s against $sa;"
        [ -n "$m" ] && [ "$m" -ge "$s" ] || bad="$bad measured $m below scheduled $s;"
    done
    eval "sched_$fw=$sa"
    [ -z "$bad" ] && pass "4 ranks, $fw: scheduled $sa in all three runs, measured $(key "$TMP/a.json" model_state_bytes_per_rank) $(key "$TMP/b.json" model_state_bytes_per_rank) $(key "$TMP/c.json" model_state_bytes_per_rank)" \
        || fail "4 ranks, $fw:$bad"
done
awk -v z="$sched_zero" -v r="$sched_replicated" 'BEGIN { exit !(z > 0 && z / r < 0.35) }' \
    && pass "zero/replicated, scheduled: $(awk -v z="$sched_zero" -v r="$sched_replicated" 'BEGIN { printf "%.3f", z / r }')" \
    || fail "zero/replicated, scheduled: $sched_zero / $sched_replicated"
finish
