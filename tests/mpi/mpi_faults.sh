# A rank that dies or stalls mid-run ends the job, never a hang:
#  (a) SIGKILL to one of 4 ranks: the job ends within 30 s, non-zero, and the
#      output names the lost rank (mpirun's own message);
#  (b) SIGSTOP to one rank with --timeout 5: the watchdog ends the job within
#      20 s with exit status 4 and a line naming the stalled rank and the
#      instruction or collective waited on (a stopped rank may be caught in
#      any of them, the state check at a segment end included); under cdp-v2
#      (point to point, 4 ranks) and dp
#      (MPI_Allreduce, 3 ranks);
#  (c) a run with a short --timeout that does not stall completes (exit 0);
#  (d) bad --timeout values: one error line, exit 1.
# Every job runs under `timeout`, and no rank may be left behind.
. "$(dirname "$0")/../lib/lib.sh"
command -v "$MPIRUN" >/dev/null 2>&1 || { echo "SKIP: no $MPIRUN"; exit 77; }
OUT="$TMP/out"
JOB= KIDS=
# on the way out: the ranks of a job still running, and only those
trap 'for k in $KIDS; do live $k && kill -CONT ${k%:*} && kill -KILL ${k%:*}; done 2>/dev/null; rm -rf "$TMP"' EXIT

# A rank is recorded as PID:START (START: its start time, field 22 of
# /proc/PID/stat), so that a pid used again by another process is never
# signalled.  stat_of PID: "STATE START", empty when PID is gone.
stat_of() {
    sed 's/^.*) //' /proc/$1/stat 2>/dev/null | awk '{print $1, $20}'
}

# live PID:START: that process is still there and has not exited
live() {
    local st
    st=$(stat_of ${1%:*})
    [ -n "$st" ] && [ "${st% *}" != Z ] && [ "${st#* }" = "${1#*:}" ]
}

# start NP ARGS...: a long training run in the background, 150 s at most
# (its start alone took over 30 s on a loaded machine: 2 cores, a 4-rank
# training beside it);
# returns once it trains (its first epoch line), with JOB the timeout's pid
# and KIDS its ranks, the cdp_run children of its mpirun (none when the job
# is not running)
start() {
    local np=$1 t p mp
    shift
    KIDS=
    timeout 150 "$MPIRUN" --oversubscribe -np "$np" "$CDP" --data synthetic --steps 1000000 \
        --eval-every 0 --threads 1 "$@" >"$OUT" 2>&1 &
    JOB=$!
    for t in $(seq 1100); do   # 110 s
        grep -q '^epoch' "$OUT" 2>/dev/null && break
        kill -0 $JOB 2>/dev/null || break
        sleep 0.1
    done
    kill -0 $JOB 2>/dev/null || return 0
    mp=$(pgrep -P $JOB | head -n 1)
    [ -n "$mp" ] || return 0
    for p in $(pgrep -P "$mp"); do   # this build's cdp_run (or its .libs/ binary)
        tr '\0' ' ' </proc/$p/cmdline 2>/dev/null | grep -qF "$top_builddir/" || continue
        t=$(stat_of $p)
        [ -n "$t" ] && KIDS="$KIDS $p:${t#* }"
    done
}

# why_not: what start() saw of a job whose rank could not be signalled
why_not() {
    echo "(ranks found: $(echo $KIDS | wc -w); epoch lines by the end: $(grep -c '^epoch' "$OUT"))"
}

# rank_pid R: the pid of rank R of the job started last
rank_pid() {
    local k
    for k in $KIDS; do
        live $k && tr '\0' '\n' </proc/${k%:*}/environ 2>/dev/null |
            grep -qx "OMPI_COMM_WORLD_RANK=$1" && echo ${k%:*}
    done
}

# signal SIG R: sends SIG to rank R, waits for the job; sets RC and SECS
signal() {
    local victim t0
    victim=$(rank_pid $2)
    if [ -z "$victim" ]; then
        RC=-1 SECS=0
        wait $JOB
        return
    fi
    t0=$(date +%s%N)
    kill -$1 $victim
    wait $JOB
    RC=$?
    SECS=$((($(date +%s%N) - t0) / 1000000000))
    kill -CONT $victim 2>/dev/null
}

# no_strays WHAT: every rank of the job is gone within 10 s of mpirun's exit;
# those left are failures, and killed
no_strays() {
    local t k left
    for t in $(seq 100); do
        left=
        for k in $KIDS; do
            live $k && left="$left $k"
        done
        [ -z "$left" ] && break
        sleep 0.1
    done
    if [ -n "$left" ]; then
        fail "$1: ranks left running:$left"
        for k in $left; do live $k && kill -CONT ${k%:*} && kill -KILL ${k%:*}; done
    else
        pass "$1: no rank left behind"
    fi
    KIDS=
}

# (a) SIGKILL
start 4
signal KILL 2
if [ $RC -eq -1 ]; then
    fail "SIGKILL: the job did not start $(why_not): $(head -c 2000 "$OUT")"
elif [ $RC -eq 0 ] || [ $RC -eq 124 ] || [ $SECS -gt 30 ]; then
    fail "SIGKILL to rank 2 of 4: exit $RC after $SECS s (want non-zero within 30 s): $(tail -c 2000 "$OUT")"
elif ! grep -Eq 'rank 2 .*(signal 9|Killed)|rank 2 does not answer' "$OUT"; then
    fail "SIGKILL to rank 2 of 4: exit $RC after $SECS s, no message names rank 2: $(tail -c 2000 "$OUT")"
else
    pass "SIGKILL to rank 2 of 4: exit $RC after $SECS s: $(grep -E 'rank 2 .*(signal 9|Killed)|rank 2 does not answer' "$OUT" | head -n 1)"
fi
no_strays "SIGKILL"

# (b) SIGSTOP under the watchdog: stalled NP R ARGS...
stalled() {
    local np=$1 r=$2 lines
    shift 2
    start $np --timeout 5 "$@"
    signal STOP $r
    lines=$(grep '^cdp_run: rank [0-9]*: no progress' "$OUT")
    if [ $RC -eq -1 ]; then
        fail "SIGSTOP $*: the job did not start $(why_not): $(head -c 2000 "$OUT")"
    elif [ $RC -ne 4 ] || [ $SECS -gt 20 ]; then
        fail "SIGSTOP to rank $r of $np $*: exit $RC after $SECS s (want 4 within 20 s): $(tail -c 2000 "$OUT")"
    elif ! printf '%s\n' "$lines" | grep -Eq "^cdp_run: rank [0-9]+: no progress for 5 s (waiting on rank $r|in a collective with every rank) \(([A-Z_]+ of stage [0-9]+|ALLREDUCE|the end|the state check)[^)]*step [0-9]+[^)]*\); rank $r does not answer"; then
        fail "SIGSTOP to rank $r of $np $*: exit 4 after $SECS s, but no line names rank $r and the instruction: $(tail -c 2000 "$OUT")"
    elif printf '%s\n' "$lines" | grep -v "rank $r does not answer" | grep -q .; then
        fail "SIGSTOP to rank $r of $np $*: a line blames another rank: $lines"
    else
        pass "SIGSTOP to rank $r of $np $*: exit 4 after $SECS s: $(printf '%s\n' "$lines" | head -n 1)"
    fi
    no_strays "SIGSTOP $*"
}
stalled 4 1
stalled 3 2 --rule dp

# (c) a short deadline does not fire on a run that does not stall
if out=$(run 4 --data synthetic --steps 300 --eval-every 0 --threads 1 --quiet --timeout 2 2>&1); then
    pass "--timeout 2: a run that does not stall completes"
else
    fail "--timeout 2: a run that does not stall exits $?: $out"
fi

# (d) bad values: one error line (mpirun adds its own report)
for v in -1 5s 1e3 2000000 ""; do
    out=$(run 2 --data synthetic --steps 1 --timeout "$v" 2>&1 >/dev/null)
    rc=$?
    errs=$(printf '%s\n' "$out" | grep '^cdp_run: error:')
    if [ $rc -eq 1 ] && [ "$(printf '%s\n' "$errs" | grep -c .)" -eq 1 ] &&
       printf '%s\n' "$errs" | grep -q '^cdp_run: error: --timeout'; then
        pass "--timeout '$v' refused: $errs"
    else
        fail "--timeout '$v': exit $rc: $out"
    fi
done
finish
