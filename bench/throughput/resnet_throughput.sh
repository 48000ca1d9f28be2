#!/bin/bash
# Training throughput (samples/s) of cdp_run against PyTorch on the same
# ResNets, the same samples per step and micro-batching, the same 2 cores,
# in one run; plus the SGEMM bound of the step's GEMM shapes.
#
# Cases (CASES, "MODEL:B ..."): resnet20 at B=128 and resnet18-cifar (3x3
# stem, no max pool) at B=64, input 1x28x28 (synthetic data), 10 classes,
# SGD lr 0.05, momentum 0.9, weight decay 5e-4.
#
# Round-robin: each of the REPS repetitions measures every configuration
# once, back to back, so the noise of other jobs hits them alike.  Figures
# per configuration: samples/s of one repetition = samples per step / mean
# step time after WARMUP untimed steps; reported as the median over the
# repetitions [min-max].  Ratios cdp / best PyTorch are per repetition
# (median of the per-repetition ratios), against the PyTorch configuration
# with the best median.
#
# cdp configurations (CDP_CONFIGS, "RANKSxTHREADS:N:RULE[:ENV] ...",
# micro-batch B/N, N*B/N = B samples per step):
#   1x2:1:cdp-v2   1 rank x 2 threads, one micro-batch of B
#   2x1:2:cdp-v2   2 ranks x 1 thread (mpirun --bind-to none: doc/reference.md
#                  section 9, binding), N=2 micro-batches of B/2: the same total batch
#   ENV, optional: VAR=VALUE[,VAR=VALUE...] set for that configuration's
#                  run only (and part of its label), so that one run compares
#                  e.g. CDP_CONFIGS="1x2:1:cdp-v2:CDP_CONV_DNNL=0 1x2:1:cdp-v2:CDP_CONV_DNNL=1"
#                  (without and with oneDNN's convolutions)
# The synthetic training set holds all the run's steps in one epoch: every
# epoch ends with a drain of the timeline, which on several ranks leaves
# each rank idle for part of a step (with 4-step epochs, as this script
# used before f4753c5, 2026-11-25, the mean step of cdp-v1 on 2 ranks was
# 20% longer).
# Step times from cdp_run --trace (bench/lib/trace_steps.py --skip WARMUP):
# the run's own step_time_s includes the warm-up steps.  cdp_run sets its
# own OpenBLAS kernel and OpenMP spin count (src/cpu/blas_setup.c).
#
# PyTorch configurations (bench/throughput/torch_resnet.py, one process per repetition
# measuring them all round-robin, OPENBLAS_CORETYPE=SkylakeX in the
# environment; PyTorch 1.13 here runs convolutions and BatchNorm through
# oneDNN when torch.backends.mkldnn is enabled, Linear through OpenBLAS):
#   TORCH_CONFIGS, MODE:tT:bB:on|off (torch threads T, OpenBLAS threads B,
#   mkldnn), default "b:t1:b1:on b:t2:b1:on acc2:t2:b1:on b:t1:b1:off b:t2:b1:off":
#   one batch of B (b) or gradient accumulation over 2 micro-batches of B/2
#   (acc2, the micro-batching of the 2x1 cdp configuration).
#   TORCH_PASSIVE=1 adds a second process per repetition with
#   OMP_WAIT_POLICY=PASSIVE running the configurations with T > 1.
# The "best PyTorch" is the configuration with the highest median.
#
# SGEMM bound (bench/kernels/conv_gemm_bound.c, built here against the in-tree
# libcdp): the model's convolutions as im2col GEMMs over the whole batch
# (fwd, dW, dcol) and the Linear's GEMMs, timed with plain cblas_sgemm,
# best of BOUND_ROUNDS rounds per shape, summed: GEMM time alone, nothing
# else of the step.  Variants, each once per repetition: t1 (B, 1 OpenBLAS
# thread: one core), t2 (B, OpenBLAS's 2 threads), split2 (B, cdp's scheme:
# OpenBLAS 1 thread, 2 sample slots over 2 OpenMP threads), 2x t1 (B/2 on
# one thread, twice in parallel: the 2-rank configuration, assuming no
# interference).  Bound of the 2 cores = the best of t2, split2, 2x t1 over
# all repetitions (a bound is a best-of figure; other jobs only lower it);
# FRACTION = cdp's median / that bound.  The summary's figures end the
# output again as result lines (bench/README).
#
# usage: bench/throughput/resnet_throughput.sh [BUILD_DIR]   (BUILD_DIR holds cdp_run and
#        .libs/libcdp.so; default: this tree, built in place by ./bootstrap)
# environment:
#   CASES        "MODEL:B ..."                   ["resnet20:128 resnet18-cifar:64"]
#   SHAPE        input CxHxW                     [1x28x28]
#   REPS         repetitions                     [3]
#   STEPS        timed steps per run             [resnet20: 20, others: 6]
#   WARMUP       untimed steps before them       [2]
#   CDP_CONFIGS  see above                       ["1x2:1:cdp-v2 2x1:2:cdp-v2"]
#   TORCH_CONFIGS see above
#   TORCH_PASSIVE=1  also OMP_WAIT_POLICY=PASSIVE for torch
#   NO_BOUND=1   skip the SGEMM bound
#   BOUND_ROUNDS, BOUND_MIN_MS  rounds per shape and minimum ms per round [3, 20]
#   PY           python with torch and torchvision [/usr/bin/python3]
#   CORETYPE     OPENBLAS_CORETYPE for every run   [SkylakeX]
#   OUT          keep raw results here           [a temporary directory, removed]
# e.g. smoke test: CASES="resnet20:16" REPS=1 STEPS=2 WARMUP=1 bench/throughput/resnet_throughput.sh

set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/common.sh"
BUILD=${1:-${top_builddir:-$bench_top}}
BUILD=$(cd "$BUILD" && pwd)
CDP=$BUILD/cdp_run
PY=${PY:-/usr/bin/python3}
CASES=${CASES:-"resnet20:128 resnet18-cifar:64"}
SHAPE=${SHAPE:-1x28x28}
REPS=${REPS:-3}
WARMUP=${WARMUP:-2}
CDP_CONFIGS=${CDP_CONFIGS:-"1x2:1:cdp-v2 2x1:2:cdp-v2"}
TORCH_CONFIGS=${TORCH_CONFIGS:-"b:t1:b1:on b:t2:b1:on acc2:t2:b1:on b:t1:b1:off b:t2:b1:off"}
BOUND_ROUNDS=${BOUND_ROUNDS:-3}
BOUND_MIN_MS=${BOUND_MIN_MS:-20}
MPIRUN=${MPIRUN:-mpirun}
# one OpenBLAS kernel for cdp, PyTorch and the bound alike (an OPENBLAS_CORETYPE
# already in the environment would otherwise reach cdp only)
CORETYPE=${CORETYPE:-SkylakeX}
HYPER="--lr 0.05 --momentum 0.9 --weight-decay 5e-4"
"$PY" -c 'import torch, torchvision' 2>/dev/null ||
    { echo "resnet_throughput.sh: $PY cannot import torch and torchvision" >&2; exit 2; }
bench_start resnet_throughput.sh results.txt

steps_of() {
    if [ -n "${STEPS:-}" ]; then echo "$STEPS"; return; fi
    case $1 in resnet20) echo 20 ;; *) echo 6 ;; esac
}

# record REP MODEL LABEL SAMPLES_PER_S
record() { echo "$*" | tee -a "$res"; }

# run_cdp REP MODEL B CONFIG     (CONFIG = RANKSxTHREADS:N:RULE[:ENV])
run_cdp() {
    local rep=$1 model=$2 B=$3 cfg=$4 ranks thr n rule cenv launch="" m=$tmp/m.json tr=$tmp/trace.json
    IFS=: read -r rt n rule cenv <<<"$cfg"
    ranks=${rt%x*} thr=${rt#*x}
    if [ $((B % n)) -ne 0 ]; then echo "skip cdp $cfg: B=$B not divisible by N=$n"; return; fi
    local b=$((B / n)) k=$((WARMUP + $(steps_of "$model") + 1))
    [ "$ranks" -gt 1 ] && launch="$MPIRUN --oversubscribe --bind-to none -np $ranks"
    rm -f "$m" "$tr"
    # shellcheck disable=SC2086
    if ! env OPENBLAS_CORETYPE="$CORETYPE" ${cenv//,/ } timeout 1200 $launch "$CDP" --model "$model" --data "synthetic:$SHAPE:n=$((B * (k + 1))):test=$b" \
            --rule "$rule" --workers "$n" --batch "$b" --threads "$thr" --steps "$k" \
            --eval-every 0 --quiet $HYPER --lr-decay-epochs 0 ${CDP_STAGES:+--stages $CDP_STAGES} \
            --metrics "$m" --trace "$tr" >"$tmp/cdp.log" 2>&1; then
        echo "cdp_run failed ($model $cfg):"; tail -5 "$tmp/cdp.log"; return
    fi
    # steps mean_s median_s p10_s (after WARMUP steps)
    local st
    st=$("$PY" "$bench_lib/trace_steps.py" "$tr" --skip "$WARMUP")
    # shellcheck disable=SC2086
    set -- $st
    if [ "$1" = 0 ]; then echo "no step periods in the trace ($model $cfg)"; return; fi
    record "$rep" "$model" "cdp:${rt},N${n}xB${b},$rule${cenv:+,$cenv}" "$(awk -v s="$2" -v n="$B" 'BEGIN {printf "%.2f", n / s}')"
}

# run_torch REP MODEL B PREFIX CONFIGS [ENV...]
run_torch() {
    local rep=$1 model=$2 B=$3 prefix=$4 cfgs=$5; shift 5
    env OPENBLAS_CORETYPE="$CORETYPE" "$@" timeout 1800 "$PY" "$here/torch_resnet.py" --model "$model" \
        --shape "$SHAPE" --batch "$B" --configs "$cfgs" --steps "$(steps_of "$model")" \
        --warmup "$WARMUP" --reps 1 >"$tmp/torch.log" 2>&1 ||
        { echo "torch_resnet.py failed ($model $prefix):"; tail -5 "$tmp/torch.log"; return; }
    [ "$rep" = 1 ] && grep "^#" "$tmp/torch.log" | sed "s/^# /# $prefix: /"
    sed -n 's/^TORCH .* config=\([^ ]*\) core=\([^ ]*\) samples_per_s=\([^ ]*\) .*/\1 \2 \3/p' \
        "$tmp/torch.log" | while read -r cfg core v; do
        record "$rep" "$model" "torch:$prefix,$cfg,$core" "$v"
    done
}

# run_bound REP MODEL B   (records bound:t1, t2, split2, 2xt1)
run_bound() {
    local rep=$1 model=$2 B=$3 v how
    for how in t1 t2 split2 2xt1; do
        local args="$B 1"
        case $how in
            t2) args="$B 2" ;;
            split2) args="$B 2 --split 2" ;;
            2xt1) args="$((B / 2)) 1" ;;
        esac
        # shellcheck disable=SC2086
        OPENBLAS_CORETYPE="$CORETYPE" timeout 900 "$bound_bin" "$model" "$SHAPE" $args \
            --rounds "$BOUND_ROUNDS" --min-ms "$BOUND_MIN_MS" >"$tmp/bound.log" 2>&1 ||
            { echo "conv_gemm_bound failed ($model $how):"; tail -3 "$tmp/bound.log"; continue; }
        [ "$rep" = 1 ] && [ "$how" = t1 ] && sed '/^result\t/d; s/^/    /' "$tmp/bound.log"
        v=$(sed -n 's/.*GEMM bound \([0-9.]*\) samples\/s.*/\1/p' "$tmp/bound.log")
        [ "$how" = 2xt1 ] && v=$(awk -v v="$v" 'BEGIN {printf "%.2f", 2 * v}')
        [ -n "$v" ] && record "$rep" "$model" "bound:$how" "$v"
    done
}

bound_bin=
if [ "${NO_BOUND:-0}" != 1 ]; then
    if [ -e "$BUILD/.libs/libcdp.so" ] &&
       gcc -O2 -std=c11 -D_GNU_SOURCE -fopenmp -I"$bench_top/include" -I"$bench_top/src" \
           "$bench_dir/kernels/conv_gemm_bound.c" \
           -o "$tmp/conv_gemm_bound" -L"$BUILD/.libs" -lcdp -Wl,-rpath,"$BUILD/.libs" \
           -lopenblas -lm 2>"$tmp/bound_build.log"; then
        bound_bin=$tmp/conv_gemm_bound
    else
        echo "note: bench/kernels/conv_gemm_bound.c does not build (needs $BUILD/.libs/libcdp.so):"
        cat "$tmp/bound_build.log" 2>/dev/null
    fi
fi

bench_header
echo "# cdp: $("$CDP" --version 2>&1 | head -1); $CDP"
echo "# cdp banner: $("$CDP" --steps 1 --eval-every 0 --model resnet20 --data "synthetic:$SHAPE:n=64:test=8" --workers 1 --batch 8 2>&1 | sed -n 2p | sed 's/.*backend/backend/')"
echo "# REPS=$REPS WARMUP=$WARMUP SHAPE=$SHAPE CDP_CONFIGS=\"$CDP_CONFIGS\" TORCH_CONFIGS=\"$TORCH_CONFIGS\""

passive_cfgs=$(for c in $TORCH_CONFIGS; do case $c in *:t1:*) ;; *) echo -n "$c " ;; esac; done)
for case_ in $CASES; do
    model=${case_%%:*} B=${case_#*:}
    echo "== $model B=$B $SHAPE, $(steps_of "$model") timed steps after $WARMUP"
    for rep in $(seq 1 "$REPS"); do
        echo "-- repetition $rep, load $(cut -d' ' -f1 /proc/loadavg)"
        # shellcheck disable=SC2086
        set -- $CDP_CONFIGS
        run_cdp "$rep" "$model" "$B" "$1"
        run_torch "$rep" "$model" "$B" SkylakeX "$TORCH_CONFIGS"
        shift
        for c in "$@"; do run_cdp "$rep" "$model" "$B" "$c"; done
        [ "${TORCH_PASSIVE:-0}" = 1 ] && [ -n "$passive_cfgs" ] &&
            run_torch "$rep" "$model" "$B" SkylakeX+PASSIVE "$passive_cfgs" OMP_WAIT_POLICY=PASSIVE
        [ -n "$bound_bin" ] && run_bound "$rep" "$model" "$B"
    done
done

echo
echo "== summary: samples/s, median over $REPS repetitions [min-max]; ratio: median of the"
echo "   per-repetition ratios to the best PyTorch configuration; fraction: of the best 2-core"
echo "   SGEMM bound (GEMMs alone, best over the repetitions)"
"$PY" - "$res" "$SHAPE" <<'EOF'
import sys, statistics, collections
from bench_result import bench_result
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
shape = sys.argv[2]
results = []        # printed after the tables
by = collections.defaultdict(dict)          # (model, label) -> {rep: samples/s}
for rep, model, label, v in rows:
    by[(model, label)][rep] = float(v)
med = {k: statistics.median(d.values()) for k, d in by.items()}
for model in dict.fromkeys(m for m, _ in by):
    labels = [l for (m, l) in by if m == model]
    cdp = [l for l in labels if l.startswith("cdp:")]
    torch = [l for l in labels if l.startswith("torch:")]
    bounds = [l for l in labels if l.startswith("bound:")]
    best_t = max(torch, key=lambda l: med[(model, l)]) if torch else None
    two = [max(by[(model, b)].values()) for b in bounds if b != "bound:t1"]
    bound2 = max(two) if two else None
    print(f"\n{model}")
    print(f"  {'configuration':44s} {'samples/s':>10s} {'[min-max]':>17s} {'ratio':>6s} {'fraction':>8s}")
    for l in cdp + torch + bounds:
        d = by[(model, l)]
        r = f = ""
        if best_t and not l.startswith("bound:"):
            rs = [d[k] / by[(model, best_t)][k] for k in d if k in by[(model, best_t)]]
            r = f"{statistics.median(rs):.2f}" if rs else "nan"
        if bound2 and l.startswith("cdp:"):
            f = f"{med[(model, l)] / bound2:.2f}"
        if l.startswith("bound:"):
            val = f"{max(d.values()):10.1f}"      # a bound: its best repetition
        else:
            val = f"{med[(model, l)]:10.1f}"
        print(f"  {l:44s} {val} {'[%.1f-%.1f]' % (min(d.values()), max(d.values())):>17s} {r:>6s} {f:>8s}")
        cfg = f"{model} {shape} {l}"
        if l.startswith("bound:"):
            results.append((cfg, "throughput_best", max(d.values()), "samples/s"))
        else:
            results.append((cfg, "throughput_median", med[(model, l)], "samples/s"))
        if r:
            results.append((f"{cfg} / {best_t}", "throughput_median",
                            statistics.median(rs) if rs else None, "ratio"))
        if f:
            results.append((f"{cfg} / best 2-core bound", "throughput_median",
                            med[(model, l)] / bound2, "ratio"))
    if best_t:
        print(f"  best PyTorch: {best_t} ({med[(model, best_t)]:.1f} samples/s)")
    for c in cdp:
        line = f"  RESULT {model} {c}: {med[(model, c)]:.1f} samples/s"
        if best_t:
            rs = [by[(model, c)][k] / by[(model, best_t)][k] for k in by[(model, c)] if k in by[(model, best_t)]]
            line += f", cdp/best-PyTorch {statistics.median(rs):.2f}"
        if bound2:
            line += f", fraction of the SGEMM bound ({bound2:.1f}) {med[(model, c)] / bound2:.2f}"
        print(line)
for r in results:
    bench_result("resnet-throughput", *r)
EOF
