#!/bin/bash
# Where a GPU step's time goes: Nsight Compute (ncu, part of the device
# image) times every kernel of a short cdp_run --backend cuda run (one
# metric, gpu__time_duration.sum, so one pass and no replay; clocks not
# locked), and bench/gpu/profile_sum.py adds the launches up per kernel
# (cdp's own kernels by name, cuBLAS's and cuDNN's as they are called).
# Beside it the same run without ncu gives the step's wall time: the part
# of it that no kernel covers is launch and host overhead (ncu serialises
# kernels, so only the kernel times, not ncu's wall time, are a measure).
#
#   bench/gpu/profile.sh BUILD
#
# Environment: CASES "MODEL:SAMPLES:N ..." [resnet50:64:1 vit-b16:32:1]
# (N micro-batches of SAMPLES/N, as nets.sh), RULE [dp], SHAPE [3x224x224],
# STEPS [2] (the first step's cuBLAS heuristics and allocations are
# counted apart: profile_sum.py reports per step over the last STEPS-1),
# TOP [25] kernels listed, NCU [ncu on PATH, else the newest
# /opt/nvidia/nsight-compute/*/ncu], RUN_TIMEOUT [200] s per run.
# ncu costs far more than the kernels: on an H100 (2026-11-27) the default
# two cases at STEPS=3 did not finish within the phase's 240 s and printed
# nothing.  Give the phase a call of its own (LIMIT_profile=540) or one case
# (CASES=vit-b16:32:1); a run ncu does not finish is reported as such.
# Before ncu, each case runs once with cdp_run --layer-times (every layer
# between two syncs: the kinds' shares and the 15 largest layers; seconds,
# not minutes); NCU_RUN=0 stops there (BACKEND=cpu: the same on the CPU).
# Prints RESULT lines, and profile_sum.py's result lines (bench/README);
# exits 77 without ncu or a usable GPU.
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
        -I"$(dirname "$ch")" "$cl" -Wl,-rpath,"$(dirname "$cl")" 2>"$tmp/kt.err"; then
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
rc=0
for c in $CASES; do
    IFS=: read -r m s n <<<"$c"
    b=$((s / n))
    run_args() {  # STEPS: cdp_run's arguments for a run of STEPS steps
        args=(--backend "${BACKEND:-cuda}" --model "$m" --data "synthetic:$SHAPE:n=$((s * ($1 + 1))):test=$b"
              --workers "$n" --batch "$b" --rule "$RULE" --steps "$1" --log-every 1 --eval-every 0
              --lr 0.05 --momentum 0.9 --weight-decay 5e-4)
    }
    run_args "$STEPS"
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
        run_args "$tsteps"
        timeout "$RUN_TIMEOUT" env CDP_KTRACE_OUT="$tmp/cdp.tsv" LD_PRELOAD="$ktrace" "$CDP" "${args[@]}" \
            --quiet --metrics "$tmp/tm.json" \
            >"$tmp/t.log" 2>&1 || echo "RESULT profile FAIL: $c traced: $(tail -2 "$tmp/t.log" | tr '\n' ' ')"
        "$PYTHON" "$here/profile_trace.py" --case "cdp $c" --steps "$tsteps" --top "$TOP" <"$tmp/cdp.tsv" || rc=1
        cfg=b:$s
        [ "$n" = 1 ] || cfg=acc$n:$s
        timeout "$RUN_TIMEOUT" env CDP_KTRACE_OUT="$tmp/torch.tsv" LD_PRELOAD="$ktrace" "$PYTHON" \
            "$here/torch_gpu.py" throughput --device "${DEVICE:-cuda}" --model "$m" --shape "$SHAPE" --configs "$cfg" --warmup 2 --steps $((tsteps - 2)) \
            --reps 1 >"$tmp/tt.log" 2>&1 || echo "RESULT profile FAIL: $c PyTorch traced: $(tail -2 "$tmp/tt.log" | tr '\n' ' ')"
        "$PYTHON" "$here/profile_trace.py" --case "torch $c" --steps "$tsteps" --top "$TOP" <"$tmp/torch.tsv" || rc=1
        [ -z "${TRACE_KEEP:-}" ] || { mkdir -p "$TRACE_KEEP"; gzip -c "$tmp/cdp.tsv" >"$TRACE_KEEP/cdp-${m}-$n.tsv.gz"
                                      gzip -c "$tmp/torch.tsv" >"$TRACE_KEEP/torch-${m}-$n.tsv.gz"; }
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
