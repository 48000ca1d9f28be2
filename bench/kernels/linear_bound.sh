#!/bin/bash
# Each Linear layer of a model (a ViT's attention projections included),
# forward and backward as cdp runs it, against the SGEMM bound of its shapes
# on the same threads: bench/kernels/linear_bound.c, run once per OpenBLAS
# kernel this CPU can run (OPENBLAS_CORETYPE), since a process loads one.
# The bound of a pass is the fastest configuration of any kernel or oneDNN
# (each library with its own threading, or single-threaded on row or column
# blocks); fraction = bound / cdp (1.0: cdp's layer runs at the bound).
#
# usage: bench/kernels/linear_bound.sh [BUILD_DIR]
# environment: MODELS ["vit-tiny:1x28x28:64 vit-b16:3x224x224:2"]
#   (MODEL:CxHxW:BATCH ...)  THREADS ["1 2"]
#   CORETYPES [the AVX2 and AVX-512 kernels the CPU has: Haswell SkylakeX
#   Cooperlake]  ROUNDS [5]  MIN_MS [20]  OUT
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/common.sh"
BUILD=${1:-${top_builddir:-$bench_top}}
CDP=$BUILD/cdp_run
MODELS=${MODELS:-"vit-tiny:1x28x28:64 vit-b16:3x224x224:2"}
THREADS=${THREADS:-"1 2"}
ROUNDS=${ROUNDS:-5}
MIN_MS=${MIN_MS:-20}
bench_start linear_bound.sh results.txt

flags=$(grep -o 'avx512_bf16\|avx512f\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')
default_cores=
case $flags in *avx2*) default_cores="Haswell" ;; esac
case $flags in *avx512f*) default_cores="$default_cores SkylakeX" ;; esac
case $flags in *avx512_bf16*) default_cores="$default_cores Cooperlake" ;; esac
CORETYPES=${CORETYPES:-${default_cores:-Prescott}}

dnnl=()
grep -q '^#define HAVE_DNNL 1' "$BUILD/config.h" 2>/dev/null && dnnl=(-ldnnl)
gcc -O2 -std=c11 -D_GNU_SOURCE -fopenmp -I"$bench_top/include" -I"$bench_top/src" -I"$BUILD" \
    "$here/linear_bound.c" -o "$tmp/linear_bound" -L"$BUILD/.libs" -lcdp \
    -Wl,-rpath,"$BUILD/.libs" -lopenblas "${dnnl[@]}" -lm 2>"$tmp/build.log" ||
    { echo "linear_bound.sh: bench/kernels/linear_bound.c does not build:"; cat "$tmp/build.log"; exit 2; }

bench_header
echo "# MODELS=\"$MODELS\" THREADS=\"$THREADS\" CORETYPES=\"$CORETYPES\""
for m in $MODELS; do
    IFS=: read -r model shape batch <<<"$m"
    for t in $THREADS; do
        for core in $CORETYPES; do
            echo "== $model $shape B=$batch, $t thread(s), OPENBLAS_CORETYPE=$core"
            OPENBLAS_CORETYPE=$core timeout 1800 "$tmp/linear_bound" "$model" "$shape" "$batch" \
                "$t" --rounds "$ROUNDS" --min-ms "$MIN_MS" >"$tmp/one.log" 2>&1 ||
                { echo "linear_bound failed:"; tail -3 "$tmp/one.log"; continue; }
            grep -v "^result" "$tmp/one.log"
            grep "^result" "$tmp/one.log" >>"$res"
        done
    done
done

# per model, threads, layer and pass: the best bound over the kernels, and
# cdp's fastest figure (its own GEMM library does not depend on the kernel
# unless CDP_GEMM_DNNL=0)
python3 - "$res" <<'EOF'
import re, sys
from bench_result import bench_result
rows = {}
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("\t")
    if len(f) != 6 or f[3] not in ("cdp_ms", "bound_ms"):
        continue
    m = re.match(r"(\S+) input=(\S+) B=(\d+) threads=(\d+) kernel=(\S+) (.*) (fwd|bwd)$", f[2])
    if not m:
        continue
    key = (m.group(1), m.group(2), m.group(3), m.group(4), m.group(6), m.group(7))
    r = rows.setdefault(key, {"cdp_ms": 1e30, "bound_ms": 1e30, "bound_kernel": ""})
    v = float(f[4])
    if v < r[f[3]]:
        r[f[3]] = v
        if f[3] == "bound_ms":
            r["bound_kernel"] = m.group(5)
print("\nbest bound over the OpenBLAS kernels and oneDNN (fraction = bound / cdp):")
print("  %-10s %-10s %3s %2s  %-44s %4s %9s %9s %-11s %8s" %
      ("model", "input", "B", "t", "layer", "pass", "cdp ms", "bound ms", "kernel", "fraction"))
for k in sorted(rows):
    r = rows[k]
    frac = r["bound_ms"] / r["cdp_ms"]
    print("  %-10s %-10s %3s %2s  %-44s %4s %9.3f %9.3f %-11s %8.2f" %
          (k[0], k[1], k[2], k[3], k[4], k[5], r["cdp_ms"], r["bound_ms"], r["bound_kernel"], frac))
    bench_result("linear-bound", "%s input=%s B=%s threads=%s %s %s" % k, "best_fraction",
                frac, "ratio")
EOF
