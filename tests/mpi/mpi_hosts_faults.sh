# Faults and mismatches across hosts (emulated by tests/lib/hosts.sh: 2 hosts,
# 1 rank each, mpirun on node1 with the keepalive settings cdp recommends):
#  (a) node2's link cut mid-run (--timeout 5): rank 0 names rank 1 and node2
#      within the watchdog's time, and the job ends within --timeout + 30 s,
#      never a hang; the last checkpoint (written by rank 0 on node1) is intact
#      and resumes;
#  (b) node2's rank stopped (SIGSTOP): the same line, and the job ends within
#      --timeout + 30 s with status 4;
#  (c) node2's rank killed: the job ends within 30 s, mpirun naming the rank
#      and node2;
#  (d) without those keepalive settings, rank 0 warns at start that a lost
#      host would outlast --timeout (and is silent with them, or on one host);
#  (e) hosts of different numerics: another BLAS kernel (OPENBLAS_CORETYPE)
#      or other convolution paths (CDP_CONV_DNNL) on node2 only: refused at
#      start with one line naming the ranks, hosts and values; accepted with
#      --allow-mixed-numerics (a warning says the run is not reproducible);
#      --flush-denormals given to node2's rank only: refused naming the
#      option, the rank and the host; another build on node2 (the identity
#      compared, tests/lib/identity_probe) named; a smaller GEMM split on node2
#      only (CDP_GEMM_SPLIT) does not change a bit: every host uses rank 0's.
# Every job runs under `timeout`; the hosts are removed on exit.
. "$(dirname "$0")/../lib/lib.sh"
command -v "$MPIRUN" >/dev/null 2>&1 || { echo "SKIP: no $MPIRUN"; exit 77; }
. "$(dirname "$0")/../lib/hosts.sh"
HOSTS_SLOTS=1
hosts_up 2 || exit $?
trap 'hosts_down; rm -rf "$TMP"' EXIT
OUT="$TMP/out"
T=5
# mpirun notices a lost daemon after 2 s idle + 3 probes 4 s apart: between
# 12 and 14 s, after the watchdog's line (T + 2 s), as cdp recommends
KEEPALIVE="--mca oob_tcp_keepalive_time 2 --mca oob_tcp_keepalive_intvl 4 --mca oob_tcp_keepalive_probes 3"

# on_hosts ARGS...: mpirun ARGS on node1, 200 s at most
on_hosts() {
    hosts_exec 1 timeout 200 "$MPIRUN" "$@"
}

# start ARGS...: a long training on 2 hosts in the background, with JOB its
# pid; returns once it trains (its first epoch line)
start() {
    rm -f "$OUT"
    on_hosts $KEEPALIVE -np 2 "$CDP" --data synthetic --steps 1000000 --eval-every 0 \
        --threads 1 --timeout $T "$@" >"$OUT" 2>&1 &
    JOB=$!
    for _ in $(seq 1100); do
        grep -q '^epoch' "$OUT" 2>/dev/null && return 0
        kill -0 $JOB 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# node2_ranks: the pids of this build's cdp_run on node2
node2_ranks() {
    local p
    for p in $(hosts_pids 2); do
        tr '\0' ' ' </proc/$p/cmdline 2>/dev/null | grep -q "^[^ ]*cdp_run " && echo $p
    done
}

# finish_job: waits for the job; RC its status, SECS since FAULT_AT
finish_job() {
    wait $JOB
    RC=$?
    SECS=$((($(date +%s%N) - FAULT_AT) / 1000000000))
}

named() {   # the watchdog's line about rank 1 on node2
    grep -E "^cdp_run: rank 0 \(host node1\): no progress for $T s .*rank 1 \(host node2\) does not answer" "$OUT"
}

# (a) the link cut, with a checkpoint every 16 steps
CK="$TMP/ck.bin"
if ! start --checkpoint "$CK" --checkpoint-every-steps 16; then
    fail "link cut: the job did not start: $(tail -c 1500 "$OUT")"
else
    sleep 2   # past a checkpoint or two
    FAULT_AT=$(date +%s%N)
    hosts_link 2 down
    finish_job
    hosts_link 2 up
    line=$(named)
    if [ $RC -eq 0 ] || [ $RC -eq 124 ] || [ $SECS -gt $((T + 30)) ]; then
        fail "link cut: exit $RC after $SECS s (want non-zero within $((T + 30)) s): $(tail -c 1500 "$OUT")"
    elif [ -z "$line" ]; then
        fail "link cut: exit $RC after $SECS s, but no line names rank 1 on node2: $(tail -c 1500 "$OUT")"
    else
        pass "link cut: exit $RC after $SECS s: $line"
    fi
    if [ -f "$CK" ] && out=$(run 1 --data synthetic --steps 100000 --eval-every 0 --threads 1 \
            --resume "$CK" --steps 200 2>&1) && echo "$out" | grep -q "^resumed from .* at step [1-9]"; then
        pass "link cut: the last checkpoint is intact: $(echo "$out" | grep '^resumed')"
    else
        fail "link cut: the checkpoint does not resume: $(ls -l "$TMP"; echo "$out" | tail -n 3)"
    fi
fi

# signal_node2 SIG: a job started, SIG sent to node2's rank, the job waited
# for (RC, SECS); 1 when the job did not start or no rank was found
signal_node2() {
    local victims
    start || { fail "SIG$1: the job did not start: $(tail -c 1500 "$OUT")"; return 1; }
    victims=$(node2_ranks)
    [ -n "$victims" ] || { fail "SIG$1: no rank found on node2"; finish_job; return 1; }
    FAULT_AT=$(date +%s%N)
    kill -"$1" $victims
    finish_job
    kill -CONT $victims 2>/dev/null
    return 0
}

# (b) node2's rank stopped
if signal_node2 STOP; then
    line=$(named)
    if [ $RC -ne 4 ] || [ $SECS -gt $((T + 30)) ] || [ -z "$line" ]; then
        fail "SIGSTOP on node2: exit $RC after $SECS s (want 4 within $((T + 30)) s, rank 1 and node2 named): $(tail -c 1500 "$OUT")"
    else
        pass "SIGSTOP on node2: exit 4 after $SECS s: $line"
    fi
fi

# (c) node2's rank killed
if signal_node2 KILL; then
    line=$(grep -E "rank 1 .*node2.*(signal 9|Killed)" "$OUT")
    if [ $RC -eq 0 ] || [ $RC -eq 124 ] || [ $SECS -gt 30 ] || [ -z "$line" ]; then
        fail "SIGKILL on node2: exit $RC after $SECS s (want non-zero within 30 s, rank 1 on node2 named): $(tail -c 1500 "$OUT")"
    else
        pass "SIGKILL on node2: exit $RC after $SECS s: $line"
    fi
fi

# (d) the keepalive warning
short="--data synthetic --steps 2 --eval-every 0 --threads 1 --timeout $T"
out=$(on_hosts -np 2 "$CDP" $short 2>&1)
warn=$(echo "$out" | grep '^cdp_run: warning: this job spans 2 hosts')
if [ -n "$warn" ] && echo "$warn" | grep -q "oob_tcp_keepalive_time 2 .*oob_tcp_keepalive_intvl [0-9]"; then
    pass "Open MPI's default keepalive: rank 0 warns: $warn"
else
    fail "Open MPI's default keepalive: no warning with the settings: $out"
fi
out=$(on_hosts $KEEPALIVE -np 2 "$CDP" $short 2>&1)
echo "$out" | grep -q 'warning: this job spans' && fail "keepalive set: still a warning: $out" \
    || pass "keepalive set as recommended: no warning"
out=$(run 2 $short 2>&1)
echo "$out" | grep -q 'warning: this job spans' && fail "one host: a warning: $out" \
    || pass "one host: no keepalive warning"

# (e) numerics that differ between hosts
# mixed HOSTS_ENV ARGS...: cdp_run ARGS on 2 hosts made anew with HOSTS_ENV
# ("node2=VAR=VALUE ..."): its output in out, its status in rc
mixed() {
    local env=$1
    shift
    hosts_down
    HOSTS_ENV=$env
    hosts_up 2 || exit $?
    out=$(on_hosts -np 2 "$CDP" "$@" 2>&1)
    rc=$?
}
small="--data synthetic --model mlp:784-64-10 --batch 8 --steps 3 --eval-every 0 --threads 1"
for e in OPENBLAS_CORETYPE=Prescott CDP_CONV_DNNL=0; do
    mixed "node2=$e" $small
    errs=$(echo "$out" | grep '^cdp_run: error:')
    if [ $rc -ne 0 ] && [ "$(echo "$errs" | grep -c .)" -eq 1 ] &&
       echo "$errs" | grep -q 'different numerics.* on rank 0 (node1), .* on rank 1 (node2)'; then
        pass "$e on node2 only: refused: $errs"
    else
        fail "$e on node2 only: exit $rc: $out"
    fi
done
mixed "node2=OPENBLAS_CORETYPE=Prescott" $small --allow-mixed-numerics
if [ $rc -eq 0 ] && echo "$out" | grep -q '^cdp_run: warning: the ranks compute with different numerics.*not reproducible'; then
    pass "--allow-mixed-numerics: the mixed job runs, with the warning"
else
    fail "--allow-mixed-numerics: exit $rc: $out"
fi
mixed "" $small
out=$(on_hosts -np 1 "$CDP" $short : -np 1 "$CDP" $short --flush-denormals 2>&1)
rc=$?
errs=$(echo "$out" | grep '^cdp_run: error:')
if [ $rc -ne 0 ] && echo "$errs" | grep -q 'different options: rank 1 (host node2) has --flush-denormals where rank 0 (host node1) has none'; then
    pass "--flush-denormals on node2 only: refused: $errs"
else
    fail "--flush-denormals on node2 only: exit $rc: $out"
fi
# another cdp build on node2 (the comparison of the build lines; no second
# build is made): named with its rank and host; the same build everywhere
# agrees
PROBE="$top_builddir/tests/lib/identity_probe"
out=$(on_hosts -np 2 "$PROBE" 1 2>&1)
if echo "$out" | grep -q '^differ: build: "cdp 0.1.*" on rank 0 (node1), "cdp 0.0.0-other.*" on rank 1 (node2)$'; then
    pass "another build on node2: $out"
else
    fail "another build on node2: $out"
fi
out=$(on_hosts -np 2 "$PROBE" -1 2>&1)
[ "$out" = same ] && pass "one build on both hosts: the same identity" \
    || fail "one build on both hosts: $out"
# the GEMM split: a wide model, so that the split changes the bits; through
# OpenBLAS (CDP_GEMM_DNNL=0), whose sgemm gives other bits on other blocks
# (oneDNN's gave the same bits for both splits of this model)
W="--data synthetic --model mlp:784-512-256-10 --workers 2 --batch 64 --steps 3 --eval-every 0 --threads 1 --rule cdp-v2 --quiet"
CDP_GEMM_DNNL=0 CDP_GEMM_SPLIT=1 run 1 $W --save-weights "$TMP/split1.st" >/dev/null ||
    fail "split 1, 1 rank"
CDP_GEMM_DNNL=0 CDP_GEMM_SPLIT=2 run 1 $W --save-weights "$TMP/split2.st" >/dev/null ||
    fail "split 2, 1 rank"
differ mlp:784-512-256-10 "$TMP/split1.st" "$TMP/split2.st" "GEMM split 1 against 2"
# (rank 0 runs beside mpirun on node1, in this script's environment)
CDP_GEMM_DNNL=0 mixed "node1=CDP_GEMM_SPLIT=2 node2=CDP_GEMM_SPLIT=1 node2=CDP_GEMM_DNNL=0" \
    $W --save-weights "$TMP/hosts.st"
[ $rc -eq 0 ] || fail "split 2 on node1, 1 on node2: exit $rc: $out"
same mlp:784-512-256-10 "$TMP/hosts.st" "$TMP/split2.st" 0 \
    "GEMM split 2 on rank 0's host, 1 on node2: the weights of split 2 on one rank"
finish
