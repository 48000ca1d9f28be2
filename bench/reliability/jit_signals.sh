#!/usr/bin/env bash
# bench/reliability/jit_signals.sh: why cdp's stop signals have a thread of
# their own (src/train/stop_signals.c).  jit_signals.c runs oneDNN's sgemm
# on 2 OpenMP threads while SIGUSR1 arrives every millisecond or so, TRIES
# times (default 5) in each mode: "compute" (the computing threads run the
# handler, as cdp's did) and "thread" (blocked in them, taken by a thread of
# its own, as cdp's are now).  A try ends by the rounds' end (status 0) or
# by SIGABRT / SIGSEGV, a heap written by a handler frame.
# Needs oneDNN's headers (libdnnl-dev) and a C compiler.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/common.sh"
TRIES=${TRIES:-5}
ROUNDS=${ROUNDS:-20000}
SIGNALS=${SIGNALS:-3000}
bench_args=""
bench_header
bin=$(mktemp -d /tmp/jit_signals.XXXXXX)
trap 'rm -rf "$bin"' EXIT
cc -O2 -fopenmp "$here/jit_signals.c" -o "$bin/jit_signals" -ldnnl || exit 2
for mode in compute thread; do
    crashed=0
    for t in $(seq "$TRIES"); do
        "$bin/jit_signals" $mode "$ROUNDS" > "$bin/out" 2>&1 &
        pid=$!
        until grep -q ready "$bin/out" 2>/dev/null; do sleep 0.05; done
        sent=0
        for _ in $(seq "$SIGNALS"); do
            kill -USR1 $pid 2>/dev/null || break
            sent=$((sent + 1))
            sleep 0.001
        done
        wait $pid
        rc=$?
        [ $rc -ne 0 ] && crashed=$((crashed + 1))
        echo "# $mode try $t: $sent signals sent, status $rc ($(tail -1 "$bin/out"))"
    done
    bench_result jit-signals "mode=$mode tries=$TRIES rounds=$ROUNDS signals=$SIGNALS" crashed "$crashed" tries
done
