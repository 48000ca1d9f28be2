#!/bin/bash
# Where a GPU step's time goes.  Per case, first cdp_run --layer-times
# (every layer between two syncs: the kinds' shares and the 15 largest
# layers), then, by default (PROFILER=trace), a CUPTI activity trace of
# every kernel, copy and memset on the GPU's clock (bench/gpu/kernel_trace.c,
# built here against the machine's CUPTI and loaded with LD_PRELOAD) of
# cdp_run and of PyTorch's same step (torch_gpu.py), each over max(6, STEPS)
# steps; bench/gpu/profile_trace.py finds the steps in the trace and gives,
# per step of the middle ones, the span, the GPU's busy time (span - busy:
# launch and host overhead, synchronisation), the time by kind of kernel and
# the TOP kernels.  The trace costs the programs little (seconds for the
# two runs of a case).  PROFILER=ncu instead runs Nsight Compute (one metric,
# gpu__time_duration.sum; profile_sum.py adds its launches up): ncu
# serialises kernels and costs far more (on an H100, 2026-11-27, two cases
# of 3 steps did not finish in 240 s); NCU_RUN=0 stops after --layer-times.
#
#   bench/gpu/profile.sh BUILD
#
# Environment: CASES "MODEL:SAMPLES:N ..." [resnet50:64:1 vit-b16:32:1]
# (N micro-batches of SAMPLES/N, as nets.sh), RULE [dp], SHAPE [3x224x224],
# STEPS [2] for --layer-times and ncu (their first step holds cuBLAS's and
# cuDNN's set-up), TOP [25] kernels listed, RUN_TIMEOUT [200] s per run,
# TRACE_TIMEOUT [60] s per traced run (a run killed then is still read:
# records are written every 100 ms), TRACE_KEEP DIR (keeps the traces,
# gzipped), NCU [ncu on PATH, else the newest /opt/nvidia/nsight-compute/*/ncu].
# Prints RESULT lines and the profilers' result lines (bench/README); with
# PROFILER=ncu exits 77 without ncu.
set -u
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${1:?usage: bench/gpu/profile.sh BUILD_DIR}
CDP=$BUILD/cdp_run
CASES=${CASES:-"resnet50:64:1 vit-b16:32:1"}
RULE=${RULE:-dp}
SHAPE=${SHAPE:-3x224x224}
STEPS=${STEPS:-2}
TOP=${TOP:-25}
RUN_TIMEOUT=${RUN_TIMEOUT:-200}
TRACE_TIMEOUT=${TRACE_TIMEOUT:-60}
PYTHON=${PYTHON:-python3}
NCU=${NCU:-$(command -v ncu 2>/dev/null || ls -d /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | sort -V | tail -1)}
[ -x "$CDP" ] || { echo "profile.sh: $CDP not found (build first)" >&2; exit 2; }
tmp=$(mktemp -d /tmp/cdp_profile.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
PROFILER=${PROFILER:-trace}
ktrace=
if [ "$PROFILER" = trace ]; then
    # bench/gpu/kernel_trace.c against the machine's CUPTI (the toolkit's, or pip's nvidia wheels')
    ch=$(ls -d "${CUDA_HOME:-/usr/local/cuda}"/include/cupti.h "${CUDA_HOME:-/usr/local/cuda}"/extras/CUPTI/include/cupti.h \
               /usr/local/cuda*/include/cupti.h /usr/local/cuda*/extras/CUPTI/include/cupti.h \
               $("$PYTHON" -c 'import nvidia, os; print(" ".join(p + "/*/include/cupti.h " + p + "/*/*/include/cupti.h" for p in nvidia.__path__))' 2>/dev/null) \
               2>/dev/null | head -1)
    cl=$(ls -d "$(dirname "$(dirname "$ch")")"/lib*/libcupti.so* "${CUDA_HOME:-/usr/local/cuda}"/lib*/libcupti.so* \
               /usr/local/cuda*/extras/CUPTI/lib64/libcupti.so* 2>/dev/null | head -1)
    if [ -n "$ch" ] && [ -n "$cl" ] && gcc -O2 -shared -fPIC -o "$tmp/kernel_trace.so" "$here/kernel_trace.c" \
        -I"$(dirname "$ch")" -I"${CUDA_HOME:-/usr/local/cuda}/include" "$cl" -Wl,-rpath,"$(dirname "$cl")" 2>"$tmp/kt.err"; then
        ktrace=$tmp/kernel_trace.so
    else
        echo "# kernel_trace.so not built (cupti.h: ${ch:-none}, libcupti: ${cl:-none}): $(head -3 "$tmp/kt.err" 2>/dev/null)"
    fi
fi
if [ "$PROFILER" = ncu ] && [ "${NCU_RUN:-1}" != 0 ] && { [ -z "$NCU" ] || [ ! -x "$NCU" ]; }; then
    echo "SKIP: no ncu on PATH or under /opt/nvidia/nsight-compute"
    exit 77
fi
. "$here/../lib/common.sh"
bench_header
echo "# $([ -n "$NCU" ] && "$NCU" --version 2>&1 | tail -1); $("$CDP" --version 2>&1 | head -1)"
# traced WHO CASE STEPS COMMAND...: COMMAND under kernel_trace.so, added up
# per step (profile_trace.py); a run that outlasts TRACE_TIMEOUT is killed,
# and what it wrote by then (every 100 ms) is still read
traced() {
    local who=$1 c=$2 st=$3 f=$tmp/$1.tsv
    shift 3
    rm -f "$f"
    timeout -k 5 "$TRACE_TIMEOUT" env CDP_KTRACE_OUT="$f" LD_PRELOAD="$ktrace" "$@" >"$tmp/$who.log" 2>&1 ||
        echo "# $who $c traced: exit $? $(tail -2 "$tmp/$who.log" | tr '\n' ' ')"
    [ -f "$f" ] || : >"$f"   # no CUDA ran: profile_trace.py says there are no records
    [ -z "${TRACE_KEEP:-}" ] || { mkdir -p "$TRACE_KEEP"; gzip -c "$f" >"$TRACE_KEEP/$who-${c//:/-}.tsv.gz"; }
    "$PYTHON" "$here/profile_trace.py" --case "$who $c" --steps "$st" --top "$TOP" <"$f"
}
rc=0
for c in $CASES; do
    IFS=: read -r m s n <<<"$c"
    b=$((s / n))
    run_args() {  # STEPS [LOG]: cdp_run's arguments for a run of STEPS steps, logged every LOG
        args=(--backend "${BACKEND:-cuda}" --model "$m" --data "synthetic:$SHAPE:n=$((s * ($1 + 1))):test=$b"
              --workers "$n" --batch "$b" --rule "$RULE" --steps "$1" --log-every "${2:-0}" --eval-every 0
              --lr 0.05 --momentum 0.9 --weight-decay 5e-4)
    }
    run_args "$STEPS" 1
    # the wall time of each step without ncu
    timeout "$RUN_TIMEOUT" "$CDP" "${args[@]}" --quiet --metrics "$tmp/m.json" >"$tmp/plain.log" 2>&1 ||
        { echo "RESULT profile FAIL: $c without ncu: $(tail -2 "$tmp/plain.log" | tr '\n' ' ')"; rc=1; continue; }
    wall=$(grep '"log": "steps"' "$tmp/m.json" | tail -n +2 | grep -o '"time_s": [0-9.e+-]*' |
           awk '{s += $2; k++} END {if (k) printf "%.6f", s / k}')
    # cdp's own per-layer times (--layer-times: each layer between two
    # syncs), no ncu needed: the kinds' shares and the 15 largest rows
    if timeout "$RUN_TIMEOUT" "$CDP" "${args[@]}" --layer-times --metrics "$tmp/lt.json" \
        >"$tmp/lt.log" 2>&1; then
        echo "== $c ($RULE, $STEPS steps): --layer-times"
        sed -n '/^layer times/,$p' "$tmp/lt.log" | sed -n '2p'
        sed -n '/^layer times/,$p' "$tmp/lt.log" | grep -E '^ +[0-9]+ ' |
            awk '{print $NF, $0}' | sort -rn | head -15 | cut -d' ' -f2-
        grep -E '^  (by kind|timed):' "$tmp/lt.log" | sed "s/^  /RESULT profile $c layer times, /"
    else
        echo "RESULT profile FAIL: $c --layer-times: $(tail -2 "$tmp/lt.log" | tr '\n' ' ')"
        rc=1
    fi
    if [ "$PROFILER" = trace ]; then
        # every kernel on the GPU's clock, cdp_run and then PyTorch's same step
        if [ -z "$ktrace" ]; then
            echo "RESULT profile FAIL: $c: no kernel_trace.so (CUPTI's cupti.h or libcupti.so not found)"
            rc=1
            continue
        fi
        tsteps=$((STEPS < 6 ? 6 : STEPS))
        run_args "$tsteps"   # one segment, no logging: the steps a training run takes between logs
        cfg=b:$s
        [ "$n" = 1 ] || cfg=acc$n:$s
        traced cdp "$c" "$tsteps" "$CDP" "${args[@]}" --quiet || rc=1
        traced torch "$c" "$tsteps" "$PYTHON" "$here/torch_gpu.py" throughput --device "${DEVICE:-cuda}" \
            --model "$m" --shape "$SHAPE" --configs "$cfg" --warmup 2 --steps $((tsteps - 2)) --reps 1 || rc=1
        continue
    fi
    [ "${NCU_RUN:-1}" = 0 ] && continue
    timeout "$RUN_TIMEOUT" "$NCU" --metrics gpu__time_duration.sum --csv --page raw --clock-control none \
        "$CDP" "${args[@]}" --quiet --metrics "$tmp/n.json" >"$tmp/ncu.log" 2>&1
    st=$?
    if [ $st = 124 ]; then
        echo "RESULT profile TIMEOUT: $c under ncu took more than RUN_TIMEOUT=$RUN_TIMEOUT s"
        rc=1
        continue
    fi
    echo "== $c ($RULE, $STEPS steps): ncu exit $st; its first lines:"
    grep -v '^"' "$tmp/ncu.log" | head -5 | sed 's/^/  /'
    grep -m2 '^"' "$tmp/ncu.log" | cut -c1-300 | sed 's/^/  /'
    "$PYTHON" "$here/profile_sum.py" --case "$c" --steps "$STEPS" --top "$TOP" --wall "${wall:-0}" \
        <"$tmp/ncu.log" || rc=1
done
exit $rc
