# SIGTERM and SIGINT are taken by a thread of their own, "cdp-signals",
# and blocked in every other thread of a rank (main, OpenMP, MPI), also in
# the threads that compute: a handler run by a thread inside oneDNN's JIT
# GEMM writes its frame into the heap (that kernel points the stack pointer
# at a heap buffer), which corrupted the heap of runs stopped by a signal.
# Read from /proc while 2 ranks train on 2 threads each; then a SIGTERM
# still stops the job as README says.
. "$(dirname "$0")/../lib/lib.sh"
[ -r /proc/self/task/$$/status ] || { echo "SKIP: no /proc/PID/task/TID/status here"; exit 77; }
M=mlp:784-512-512-10
args="--data synthetic:n=4096:test=64 --model $M --workers 4 --batch 64 --threads 2 --quiet --eval-every 0"
# the stop signals' bits in a SigBlk mask: SIGINT (2) and SIGTERM (15)
want=$(( (1 << 1) | (1 << 14) ))

# check_rank PID WHAT: every thread but cdp-signals blocks both, cdp-signals
# blocks neither, and there is one cdp-signals
check_rank() {
    local pid=$1 what=$2 t name blk nsig=0 nthr=0 bad=
    for t in /proc/"$pid"/task/*; do
        name=$(cat "$t/comm" 2>/dev/null) || continue
        blk=$(awk '/^SigBlk:/ { print $2 }' "$t/status" 2>/dev/null) || continue
        [ -n "$blk" ] || continue
        nthr=$((nthr + 1))
        if [ "$name" = cdp-signals ]; then
            nsig=$((nsig + 1))
            [ $(( 0x$blk & want )) -eq 0 ] || bad="$bad cdp-signals blocks them (SigBlk $blk);"
        elif [ $(( 0x$blk & want )) -ne $want ]; then
            bad="$bad thread ${t##*/} ($name) takes them (SigBlk $blk);"
        fi
    done
    if [ "$nsig" -ne 1 ]; then
        fail "$what: $nsig threads named cdp-signals among $nthr"
    elif [ "$nthr" -lt 3 ]; then
        fail "$what: only $nthr threads (main, OpenMP and cdp-signals expected at least)"
    elif [ -n "$bad" ]; then
        fail "$what:$bad"
    else
        pass "$what: $nthr threads, the stop signals blocked in all but cdp-signals"
    fi
}

# 2 ranks under mpirun
rm -f "$TMP/m.json"
timeout 300 "$MPIRUN" --oversubscribe -np 2 "$CDP" $args --steps 100000 --metrics "$TMP/m.json" \
    >/dev/null 2>"$TMP/m.err" &
tpid=$!
until_nonempty "$TMP/m.json" 120 || fail "2 ranks: no metrics line within 120 s: $(cat "$TMP/m.err")"
mp=$(pgrep -P $tpid)
ranks=$(pgrep -P "$mp" | tr '\n' ' ')
set -- $ranks
[ $# -eq 2 ] || fail "2 ranks: found $# rank processes ($ranks)"
for p in "$@"; do
    check_rank "$p" "rank process $p"
done
kill -TERM "$1"
wait $tpid
rc=$?
[ $rc -eq 143 ] && grep -q "^cdp_run: SIGTERM: stopped at step [0-9]* of 100000, no checkpoint written" "$TMP/m.err" \
    && pass "SIGTERM to a rank taken by cdp-signals: mpirun exits 143" \
    || fail "SIGTERM to a rank: mpirun exit $rc, $(cat "$TMP/m.err")"

# one process without mpirun (a singleton), stopped by SIGINT
rm -f "$TMP/s.json"
"$CDP" $args --steps 100000 --metrics "$TMP/s.json" >/dev/null 2>"$TMP/s.err" &
pid=$!
until_nonempty "$TMP/s.json" 120 || fail "singleton: no metrics line within 120 s: $(cat "$TMP/s.err")"
check_rank $pid "singleton"
kill -INT $pid
wait $pid
rc=$?
[ $rc -eq 130 ] && grep -q "^cdp_run: SIGINT: stopped at step" "$TMP/s.err" \
    && pass "SIGINT to a singleton: exit 130" || fail "SIGINT to a singleton: exit $rc, $(cat "$TMP/s.err")"
finish
