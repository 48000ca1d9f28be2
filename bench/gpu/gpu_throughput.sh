#!/bin/bash
# GPU training throughput of cdp_run (--backend cuda) on a large MLP, as
# samples/s and as a fraction of the cuBLAS SGEMM bound measured on the same
# shapes in the same run (bench/gpu/cublas_limit.cu).  The target: the training
# step reaches at least 70% of the GEMM-only throughput.
#
#   bench/gpu/gpu_throughput.sh BUILD_DIR     (a build configured with --enable-cuda)
#
# Environment: MODEL [mlp:784-4096-4096-4096-10], BATCH samples per step
# [1024], STEPS [200], REPS [3], NVCC [nvcc from PATH or /usr/local/cuda].
# Runs, per repetition and round-robin: the SGEMM bound, cdp_run with one
# micro-batch of BATCH (dp = cdp-v2 at N = 1), and cdp-v2 / dp with 4
# micro-batches of BATCH/4.  Exits 77 (skipped) without a usable GPU.  The
# summary's figures end the output again as result lines (bench/README).
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/common.sh"
BUILD=${1:?usage: bench/gpu/gpu_throughput.sh BUILD_DIR (configured with --enable-cuda)}
CDP=$BUILD/cdp_run
MODEL=${MODEL:-mlp:784-4096-4096-4096-10}
BATCH=${BATCH:-1024}
STEPS=${STEPS:-200}
REPS=${REPS:-3}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$CDP" ] || { echo "gpu_throughput.sh: $CDP not found (build first)" >&2; exit 2; }
tmp=$(mktemp -d /tmp/cdp_gpu.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

. "$bench_top/tests/gpu/cuda_probe.sh"
cuda_probe "$CDP"   # exits 77 where there is no CUDA to measure
"$NVCC" -O2 "$here/cublas_limit.cu" -o "$tmp/cublas_limit" -lcublas >"$tmp/nvcc.log" 2>&1 \
    || { echo "cublas_limit.cu does not build:"; cat "$tmp/nvcc.log"; exit 1; }

dims=${MODEL#mlp:}
q=$((BATCH / 4))
res=$tmp/res.txt
: >"$res"
bench_header
echo "# $("$CDP" --version 2>&1 | head -1); $MODEL, $BATCH samples per step, $STEPS steps"
cdp() {  # label rule N B
    "$CDP" --backend cuda --data synthetic --model "$MODEL" --rule "$2" --workers "$3" --batch "$4" \
        --steps "$STEPS" --eval-every 0 --quiet --metrics "$tmp/m.json" >"$tmp/cdp.log" 2>&1 \
        || { echo "cdp_run failed ($1):"; cat "$tmp/cdp.log"; return; }
    echo "$rep $1 $(grep -o '"samples_per_s": [0-9.e+]*' "$tmp/m.json" | tail -1 | awk '{print $2}')" | tee -a "$res"
}
for rep in $(seq 1 "$REPS"); do
    "$tmp/cublas_limit" "$dims" "$BATCH" >"$tmp/limit.log" || { cat "$tmp/limit.log"; exit 1; }
    [ "$rep" = 1 ] && sed '/^result\t/d; s/^/    /' "$tmp/limit.log"
    echo "$rep bound $(sed -n 's/.*GEMM bound \([0-9.]*\) samples\/s.*/\1/p' "$tmp/limit.log")" | tee -a "$res"
    cdp "N1xB$BATCH" cdp-v2 1 "$BATCH"
    cdp "N4xB$q,cdp-v2" cdp-v2 4 "$q"
    cdp "N4xB$q,dp" dp 4 "$q"
done
echo
echo "== median over $REPS repetitions (samples/s) and fraction of the SGEMM bound (target >= 0.70)"
python3 - "$res" "$MODEL steps=$STEPS" <<'EOF'
import sys, statistics, collections
from bench_result import bench_result
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) == 3:
        v[p[1]].append(float(p[2]))
bound = statistics.median(v.pop("bound"))
print("  %-22s %10.0f" % ("cuBLAS SGEMM bound", bound))
results = [(f"{sys.argv[2]} cuBLAS SGEMM bound", "throughput_median", bound, "samples/s")]
for k, xs in v.items():
    m = statistics.median(xs)
    print("  %-22s %10.0f   %.2f of the bound" % ("cdp " + k, m, m / bound))
    results += [(f"{sys.argv[2]} cdp {k}", "throughput_median", m, "samples/s"),
                (f"{sys.argv[2]} cdp {k} / bound", "throughput_median", m / bound, "ratio")]
for r in results:
    bench_result("gpu-throughput", *r)
EOF
