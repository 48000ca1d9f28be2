#!/bin/bash
# Training throughput of resnet50 and vit-b16 on one GPU: cdp_run
# --backend cuda against PyTorch on the same GPU (bench/gpu/torch_gpu.py:
# the same torchvision modules, fp32, TF32 off, cuDNN), the same samples per
# step and micro-batching, and both against the cuBLAS SGEMM bound of the
# step's own GEMM shapes (bench/kernels/conv_gemm_bound.c --list: cdp's im2col GEMMs,
# Linear layers and attention products, timed with torch.mm / torch.bmm).
#
#   bench/gpu/nets.sh BUILD      (BUILD: configured with --enable-cuda, built)
#
# Environment:
#   CASES  MODEL:SAMPLES:N ...  [resnet50:64:1 resnet50:64:4 vit-b16:32:1 vit-b16:32:4]
#          SAMPLES per step as N micro-batches of SAMPLES/N: cdp_run --workers N
#          --batch SAMPLES/N (one rank), PyTorch b:SAMPLES (N = 1) or
#          accN:SAMPLES
#   RULES  cdp_run's rules for N > 1 [dp cdp-v2] (N = 1: dp, the same step)
#   SHAPE [3x224x224]  STEPS [20] timed steps, LOG [5]: cdp's figure is the
#          median samples/s of its --log-every windows after the first (the
#          first holds the warm-up); PyTorch: 5 untimed steps, then STEPS
#   REPS [2] rounds, round-robin; RUN_TIMEOUT [90] s per cdp_run
#   BACKEND [cuda] / DEVICE [cuda]: cpu and cpu for a smoke test without a GPU
#   PYTHON [python3]
# Prints RESULT lines (the table) last, then the same figures as result lines
# (bench/README).  Exits 77 without a usable GPU.
set -u
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${1:?usage: bench/gpu/nets.sh BUILD_DIR}
CDP=$BUILD/cdp_run
CASES=${CASES:-"resnet50:64:1 resnet50:64:4 vit-b16:32:1 vit-b16:32:4"}
RULES=${RULES:-"dp cdp-v2"}
SHAPE=${SHAPE:-3x224x224}
STEPS=${STEPS:-20}
LOG=${LOG:-5}
REPS=${REPS:-2}
RUN_TIMEOUT=${RUN_TIMEOUT:-90}
BACKEND=${BACKEND:-cuda}
DEVICE=${DEVICE:-cuda}
PYTHON=${PYTHON:-python3}
[ -x "$CDP" ] || { echo "nets.sh: $CDP not found (build first)" >&2; exit 2; }
tmp=$(mktemp -d /tmp/cdp_nets.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
res=$tmp/res.txt
: >"$res"
mk() { sed -n "s/^$1 = //p" "$BUILD/Makefile"; }
SRC=$(mk abs_top_srcdir)

. "$(dirname "$0")/../../tests/gpu/cuda_probe.sh"
cuda_probe "$CDP" "$BACKEND"   # exits 77 where there is no CUDA to measure
. "$here/../lib/common.sh"
bench_header
echo "# $("$CDP" --version 2>&1 | head -1); $SHAPE, $STEPS steps, windows of $LOG, $REPS rounds; cases: $CASES"

# -- cdp_run (the cases round-robin, REPS rounds), then PyTorch (its
# configurations round-robin in one process)
cdp() {  # rep model samples N rule
    local m=$2 s=$3 n=$4 r=$5 b=$(($3 / $4)) j=$tmp/m.json
    rm -f "$j"
    timeout "$RUN_TIMEOUT" "$CDP" --backend "$BACKEND" --model "$m" \
        --data "synthetic:$SHAPE:n=$((s * 4)):test=$b" --workers "$n" --batch "$b" --rule "$r" \
        --steps "$STEPS" --log-every "$LOG" --eval-every 0 --quiet --metrics "$j" \
        --lr 0.05 --momentum 0.9 --weight-decay 5e-4 >"$tmp/cdp.log" 2>&1
    local rc=$?
    if [ $rc != 0 ]; then
        echo "cdp_run $m N=$n B=$b $r: exit $rc$([ $rc = 124 ] && echo " (over ${RUN_TIMEOUT} s)")"
        tail -3 "$tmp/cdp.log"
        return
    fi
    # windows after the first: steady state; else the whole run
    local sps
    sps=$(grep '"log": "steps"' "$j" | tail -n +2 | grep -o '"samples_per_s": [0-9.e+]*' |
          awk '{print $2}' | sort -g | awk '{v[NR] = $1} END {if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}')
    [ -n "$sps" ] || sps=$(grep -o '"samples_per_s": [0-9.e+]*' "$j" | tail -1 | awk '{print $2}')
    echo "cdp $1 $m:$s:$n $r $sps" | tee -a "$res"
}
models=$(for c in $CASES; do echo "${c%%:*}"; done | awk '!seen[$0]++')
for rep in $(seq 1 "$REPS"); do
    for c in $CASES; do
        IFS=: read -r m s n <<<"$c"
        if [ "$n" = 1 ]; then cdp "$rep" "$m" "$s" 1 dp; else
            for r in $RULES; do cdp "$rep" "$m" "$s" "$n" "$r"; done
        fi
    done
done
for m in $models; do
    cfgs=$(for c in $CASES; do
               IFS=: read -r mm s n <<<"$c"
               [ "$mm" = "$m" ] || continue
               if [ "$n" = 1 ]; then echo "b:$s"; else echo "acc$n:$s"; fi
           done | tr '\n' ' ')
    echo "== PyTorch $m: $cfgs"
    timeout $((RUN_TIMEOUT * 2)) "$PYTHON" "$here/torch_gpu.py" throughput --device "$DEVICE" --model "$m" \
        --shape "$SHAPE" --configs "$cfgs" --steps "$STEPS" --reps "$REPS" >"$tmp/torch.log" 2>&1
    grep -v '^TORCH ' "$tmp/torch.log" | tail -20
    sed -n 's/^TORCH model=\([^ ]*\) samples=\([0-9]*\) config=\([^ ]*\) samples_per_s=\([0-9.]*\).*/torch \1 \3 \4/p' \
        "$tmp/torch.log" | tee -a "$res"
done

# -- the SGEMM bound of each (model, micro-batch) from conv_gemm_bound --list
# (last: the comparison with PyTorch matters more, if the phase runs out of time)
# shellcheck disable=SC2046  # the flags are words
${CC_HOST:-gcc} -O2 -std=c11 -D_GNU_SOURCE -fopenmp -I"$SRC/include" -I"$SRC/src" $(mk OPENBLAS_CFLAGS) "$SRC/bench/kernels/conv_gemm_bound.c" \
    -o "$tmp/cgb" -L"$BUILD/.libs" -lcdp -Wl,-rpath,"$BUILD/.libs" $(mk OPENBLAS_LIBS) -lm \
    >"$tmp/cc.log" 2>&1 || { echo "conv_gemm_bound.c does not build:"; cat "$tmp/cc.log"; }
lists=()
for c in $CASES; do
    IFS=: read -r m s n <<<"$c"
    b=$((s / n))
    f=$tmp/list-$m-$b.txt
    [ -x "$tmp/cgb" ] && [ ! -f "$f" ] || continue
    if "$tmp/cgb" "$m" "$SHAPE" "$b" --list >"$f" 2>&1; then lists+=(--list "$f"); else cat "$f"; fi
done
if [ ${#lists[@]} -gt 0 ]; then
    echo "== cuBLAS SGEMM bound (torch.mm / torch.bmm, FP32) of every GEMM shape:"
    timeout 90 "$PYTHON" "$here/torch_gpu.py" gemm --device "$DEVICE" "${lists[@]}" >"$tmp/gemm.log" 2>&1
    cp "$tmp/gemm.log" "${EXTRA_DIR:-$tmp}/gemm_shapes.log" 2>/dev/null
    grep -v '^GEMM ' "$tmp/gemm.log"
    echo "  the slowest shapes per call:"
    grep '^GEMM ' "$tmp/gemm.log" | sort -t= -k6 -g | tail -6 | sed 's/^/  /'
    sed -n 's/^GEMMBOUND model=\([^ ]*\) batch=\([0-9]*\) .*samples_per_s=\([0-9.]*\).*/bound \1:\2 \3/p' \
        "$tmp/gemm.log" >>"$res"
fi

echo
echo "== samples/s (median), ratio to PyTorch, fraction of the cuBLAS SGEMM bound"
python3 - "$res" "$CASES" "$SHAPE steps=$STEPS" <<'EOF'
import collections, statistics, sys
from bench_result import bench_result
cdp, torch, bound = collections.defaultdict(list), {}, {}
setup, results = sys.argv[3], []
for line in open(sys.argv[1]):
    p = line.split()
    if p[0] == "cdp":
        cdp[(p[2], p[3])].append(float(p[4]))
    elif p[0] == "torch":
        torch[(p[1], p[2])] = float(p[3])
    elif p[0] == "bound":
        bound[p[1]] = float(p[2])
print("RESULT nets %-18s %-7s %10s %10s %8s %9s %9s" %
      ("model:samples:N", "rule", "cdp", "PyTorch", "cdp/PT", "cdp/bound", "PT/bound"))
for c in sys.argv[2].split():
    m, s, n = c.split(":")
    cfg = "b:%s" % s if n == "1" else "acc%s:%s" % (n, s)
    t = torch.get((m, cfg))
    bd = bound.get("%s:%d" % (m, int(s) // int(n)))
    for (cc, rule), v in cdp.items():
        if cc != c:
            continue
        x = statistics.median(v)
        f = lambda a, b: "%.2f" % (a / b) if a and b else "-"
        print("RESULT nets %-18s %-7s %10.1f %10s %8s %9s %9s" %
              (c, rule, x, "%.1f" % t if t else "-", f(x, t), f(x, bd), f(t, bd)))
        run = f"{setup} {c} cdp {rule}"
        results.append((run, "throughput_median", x, "samples/s"))
        if t:
            results.append((f"{run} / PyTorch", "throughput_median", x / t, "ratio"))
        if bd:
            results.append((f"{run} / bound", "throughput_median", x / bd, "ratio"))
    if t:
        results.append((f"{setup} {c} PyTorch {cfg}", "throughput", t, "samples/s"))
        if bd:
            results.append((f"{setup} {c} PyTorch {cfg} / bound", "throughput", t / bd, "ratio"))
    if not any(cc == c for cc, _ in cdp):
        print("RESULT nets %-18s %-7s %10s %10s" % (c, "-", "failed", "%.1f" % t if t else "-"))
for k, v in bound.items():
    print("RESULT nets bound %s (model:micro-batch): %.1f samples/s" % (k, v))
    results.append((f"{setup} bound {k} (model:micro-batch)", "throughput", v, "samples/s"))
for r in results:
    bench_result("gpu-nets", *r)
EOF
