#!/bin/bash
# Builds cdp with the CUDA backend on a machine with an NVIDIA GPU, runs the
# GPU tests and the GPU measurements (parity, throughput, memory), in one
# command.  Needs .gpu/ from bench/gpu/fetch.sh (the .debs and the `make
# dist` tarball) copied beside the tree when the machine lacks Open MPI,
# OpenBLAS or Check; see bench/gpu/README.
#
# usage: bench/gpu/run.sh [PHASE...]
#   inventory  the machine: GPU, driver, nvcc, gcc, glibc, python3/torch, the
#              MPI and BLAS the build gets                 (always runs first)
#   build      unpack the tarball (plus any source file of this tree that
#              differs from it), configure --enable-cuda --with-cuda-arch=90,
#              make -j$(nproc), the test programs too
#   test       make check TESTS="tests/gpu/test_gpu tests/gpu/gpu_parity.sh"
#   parity     bench/gpu/parity_models.sh: ResNet and ViT GPU against CPU
#   mlp        bench/gpu/gpu_throughput.sh: the MLP against the cuBLAS bound
#   nets       bench/gpu/nets.sh: resnet50 / vit-b16 at 224x224, cdp_run
#              --backend cuda against PyTorch on the GPU and the cuBLAS bound
#   memory     bench/gpu/memory.sh: peak activations of dp and cdp-v2 at N=8,
#              beside PyTorch's torch.cuda.max_memory_allocated
#   check      the whole `make check` (CPU tests too; not in the default)
#   profile    bench/gpu/profile.sh: ncu's kernel times per kernel of a few
#              resnet50 / vit-b16 steps, beside the step's wall time (not in
#              the default; the first thing to run before tuning the GPU)
#   train      bench/accuracy/accuracy.sh with --backend cuda: the resnet20 and vit-tiny
#              accuracy trainings on Fashion-MNIST, 4 ranks sharing the GPU
#              (needs `bench/gpu/fetch.sh data` here; not in the default):
#              TRAIN_MODEL [resnet20], TRAIN_EPOCHS [15], TRAIN_RULES
#              [dp cdp-v1 cdp-v2], TRAIN_LR, TRAIN_WARMUP, TRAIN_EXTRA
#   default: inventory build test parity mlp memory nets
# A phase that needs the build runs it first when it is missing ($GPU_WORK
# keeps it from one run to the next).
#
# Each phase runs under `timeout`, within its own limit and what is left of
# BUDGET [540] seconds for the whole run (where GPU time is rationed; raise it
# on a machine of your own); a phase that cannot get its minimum is skipped
# (named at the end, to be run in a second run); a failed phase
# does not stop the next one.  Writes at most 8 files to $OUT [$GPU_WORK/out]:
#   summary.txt  inventory, one line per phase, the RESULT lines of every log,
#                then their result lines (bench/README, "Result lines")
#   PHASE.log    build.log test.log parity.log mlp.log nets.log memory.log
#   extra.tar.gz config.log, the GPU tests' logs, the per-shape GEMM timings,
#                check.log
# and prints summary.txt last (the end of the output is the summary).
#
# Environment: BUDGET, LIMIT_<phase> (a phase's maximum, e.g. LIMIT_build=900
# on a slow machine), GPU_WORK [/tmp/cdp-gpu], GPU_DIR [.gpu], CUDA_ARCH [90],
# CUDA_HOME [from nvcc], CDP_GPU_MPI=system (the machine's MPI, not the
# prefix's), JOBS [nproc]; each phase script's own (see their headers).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/env.sh"
. "$here/../lib/common.sh"
GPU_WORK=${GPU_WORK:-/tmp/cdp-gpu}
OUT=${OUT:-$GPU_WORK/out}
B=$GPU_WORK/build
S=$GPU_WORK/src
JOBS=${JOBS:-$(nproc)}
export NVIDIA_TF32_OVERRIDE=0 PYTHONUNBUFFERED=1 EXTRA_DIR=$GPU_WORK/extra
mkdir -p "$OUT"

# limits in seconds: the most a phase may take, the least worth starting.
# Measured on an NVIDIA H200 (16 cores) on 2026-11-26: build 15-16 s, test
# 16 s, parity 20-33 s for resnet20, ~40 s for vit-tiny, ~250 s for
# resnet18-cifar with the envelope runs, mlp 36 s (MLP_REPS=2,
# MLP_STEPS=100), memory 38 s, nets 104 s (REPS=1): the default phases fit
# BUDGET=540 only with parity limited (MODELS) and nets at REPS=1
# (bench/gpu/README, "Time").
declare -A MAXS=([build]=120 [test]=60 [parity]=330 [mlp]=80 [nets]=220 [memory]=80 [check]=500 [train]=540 [profile]=480)
declare -A MINS=([build]=20 [test]=20 [parity]=40 [mlp]=30 [nets]=100 [memory]=40 [check]=120 [train]=60 [profile]=60)
for p in "${!MAXS[@]}"; do     # LIMIT_build=900 etc. override a maximum
    v=LIMIT_$p
    [ -z "${!v:-}" ] || MAXS[$p]=${!v}
done

# ---------------------------------------------------------------- CUDA
# CUDA_HOME: the toolkit holding nvcc, cuda_runtime_api.h, cublas_v2.h and
# libcublas.so; where they are spread over several places (pip's nvidia-*
# wheels), a toolkit of links is made in $GPU_WORK/cuda.
find_cuda() {
    local nv h d f
    nv=$(command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
    [ -n "$nv" ] || { echo "no nvcc on PATH or in /usr/local/cuda/bin"; return 1; }
    nv=$(readlink -f "$nv")
    export NVCC=$nv
    h=${CUDA_HOME:-$(dirname "$(dirname "$nv")")}
    if [ -f "$h/include/cublas_v2.h" ] && ls "$h"/lib*/libcublas.so >/dev/null 2>&1; then
        export CUDA_HOME=$h
        return 0
    fi
    local c=$GPU_WORK/cuda
    if [ -f "$c/include/cublas_v2.h" ] && [ -e "$c/lib64/libcublas.so" ]; then
        export CUDA_HOME=$c      # made by an earlier phase
        return 0
    fi
    echo "cuBLAS is not beside nvcc in $h: looking for it elsewhere"
    rm -rf "$c"
    mkdir -p "$c/include" "$c/lib64"
    ln -sfn "$(dirname "$nv")" "$c/bin"
    for f in $( (find /usr/local /usr/include /usr/lib /opt -maxdepth 8 \
                   \( -name cuda_runtime_api.h -o -name cublas_v2.h \) 2>/dev/null;
                 python3 -c 'import nvidia, os; print(" ".join(nvidia.__path__))' 2>/dev/null |
                     xargs -r -I{} find {} -maxdepth 4 \( -name cuda_runtime_api.h -o -name cublas_v2.h \)
                ) | sort -u); do
        d=$(dirname "$f")
        for h in "$d"/*; do [ -e "$c/include/$(basename "$h")" ] || ln -s "$h" "$c/include/"; done
        d=$(dirname "$d")
        for h in "$d"/lib/lib*.so* "$d"/lib64/lib*.so*; do
            [ -e "$h" ] && [ ! -e "$c/lib64/$(basename "$h")" ] && ln -s "$h" "$c/lib64/"
        done
    done
    # the unversioned names the linker wants
    for n in cudart cublas cublasLt; do
        f=$(ls "$c"/lib64/lib$n.so.* 2>/dev/null | sort -V | tail -1)
        [ -e "$c/lib64/lib$n.so" ] || { [ -n "$f" ] && ln -s "$f" "$c/lib64/lib$n.so"; }
    done
    ls "$c/include/cublas_v2.h" "$c/lib64/libcublas.so" || return 1
    export CUDA_HOME=$c
}

# configure's --with-cudnn: beside the toolkit (found there), pip's
# nvidia-cudnn wheel (DIR/include, DIR/lib with libcudnn.so.9 only, which
# m4/cdp_cudnn.m4 links by that name), or none (im2col convolutions)
cudnn_arg() {
    local d
    if [ -f "$CUDA_HOME/include/cudnn.h" ]; then
        echo "--with-cudnn=yes"
        return
    fi
    d=$(python3 -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null)
    if [ -n "$d" ] && [ -f "$d/include/cudnn.h" ]; then
        echo "--with-cudnn=$d"
    else
        echo "--with-cudnn=no"
    fi
}

# ---------------------------------------------------------------- inventory
inventory() {
    local v
    bench_header
    echo "# phases: $*"
    echo "machine: $(uname -srm); $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME");" \
         "$(nproc) CPUs; $(free -g 2>/dev/null | awk '/^Mem/ {print $2 " GiB"}')"
    local have need
    have=$(ldd --version 2>/dev/null | head -1 | awk '{print $NF}')
    need=$(awk '/^glibc_needed/ {sub("GLIBC_", "", $2); print $2}' "$GPU_DIR/MANIFEST" 2>/dev/null)
    echo "glibc: $have (the .debs need ${need:-?})"
    if [ -n "$need" ] && [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1)" != "$need" ]; then
        echo "RESULT setup WARNING: glibc $have < $need: the prefix's Open MPI will not load (bench/gpu/README)"
    fi
    echo "gpu: $(timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit \
                 --format=csv,noheader 2>&1 | head -2 | tr '\n' ' ')"
    echo "nvcc: ${NVCC:-none} ($("${NVCC:-false}" --version 2>/dev/null | grep -o 'release [0-9.]*, V[0-9.]*'));" \
         "CUDA_HOME ${CUDA_HOME:-none}"
    echo "gcc: $(gcc --version 2>/dev/null | head -1); g++: $(g++ -dumpfullversion 2>/dev/null || echo none);" \
         "make: $(make --version 2>/dev/null | head -1)"
    v=$(timeout 60 python3 -c '
import torch, torchvision
c = torch.cuda.is_available()
print("python3 %s: torch %s (CUDA %s, cuDNN %s), torchvision %s, device %s" % (
    __import__("sys").version.split()[0], torch.__version__, torch.version.cuda,
    torch.backends.cudnn.version(), torchvision.__version__,
    torch.cuda.get_device_name(0) if c else "none"))' 2>&1 | tail -1)
    echo "$v"
    echo "system MPI (not used unless CDP_GPU_MPI=system): mpicc ${SYS_MPICC:-none}, mpirun ${SYS_MPIRUN:-none};" \
         "mpi4py: $(timeout 20 python3 -c 'import mpi4py; print(mpi4py.__version__)' 2>/dev/null || echo none)"
    echo "MPI used: $(command -v mpicc) -> $(mpicc --showme 2>&1 | head -1)"
    echo "  $(mpirun --version 2>&1 | head -1); OPAL_PREFIX=${OPAL_PREFIX:-unset};" \
         "2 ranks: $(timeout 30 mpirun -np 2 hostname 2>&1 | tr '\n' ' ')"
    echo "BLAS used: $(readlink -f "$GPU_WORK/ld/libopenblas.so.0" 2>/dev/null || echo '?')"
    echo "libraries the machine has and the prefix leaves to it:" \
         "$(for n in libz.so.1 libudev.so.1 libnuma.so.1 libatomic.so.1 libgfortran.so.5 libquadmath.so.0; do
                [ -e "$GPU_WORK/ld/$n" ] || printf '%s ' "$n"; done)"
}

# ---------------------------------------------------------------- phases
ph_build() {
    local tgz=$GPU_DIR/cdp.tar.gz top f n=0 stale="" new="" args
    [ -f "$tgz" ] || { echo "no $tgz: run bench/gpu/fetch.sh here"; return 1; }
    find_cuda || return 1
    if [ "$(cksum <"$tgz")" != "$(cat "$GPU_WORK/src.stamp" 2>/dev/null)" ]; then
        rm -rf "$S" "$B"
        mkdir -p "$S"
        tar -xzf "$tgz" -C "$S" --strip-components=1 || return 1
        cksum <"$tgz" >"$GPU_WORK/src.stamp"
    fi
    # this tree's sources where they differ from the tarball (edits made
    # after fetch.sh): copied over, so make rebuilds them; the autotools
    # inputs cannot be (no automake here): then the tarball is stale
    top=$(tar -tzf "$tgz" | head -1 | cut -d/ -f1)
    while read -r f; do
        [ -f "$root/$f" ] && [ -f "$S/$f" ] || continue
        cmp -s "$root/$f" "$S/$f" && continue
        case $f in
            configure.ac|Makefile.am|*.am|m4/*) stale="$stale $f" ;;
            configure|Makefile.in|aclocal.m4|config.h.in|build-aux/*) ;;
            *) cp "$root/$f" "$S/$f" && n=$((n + 1)) && echo "  from this tree: $f" ;;
        esac
    done < <(tar -tzf "$tgz" | sed "s|^$top/||" | grep -v '/$')
    for f in $(cd "$root" && find src include tests -type f \( -name '*.c' -o -name '*.cu' -o -name '*.h' -o -name '*.cuh' \
                  -o -name '*.sh' -o -name '*.py' \) 2>/dev/null); do
        [ -f "$S/$f" ] || new="$new $f"
    done
    echo "build: sources from $tgz, $n file(s) of this tree copied over"
    [ -z "$stale" ] || echo "RESULT build WARNING: the tarball is stale ($stale differ): run bench/gpu/fetch.sh dist and carry .gpu again"
    [ -z "$new" ] || echo "RESULT build WARNING: not in the tarball, not built:$new"
    local cudnn
    cudnn=$(cudnn_arg)
    args="--enable-cuda=yes --with-cuda=$CUDA_HOME --with-cuda-arch=${CUDA_ARCH:-90} $cudnn NVCC=$NVCC ${CDP_CONFIGURE[*]}"
    mkdir -p "$B"
    cd "$B" || return 1
    if [ ! -f config.status ] || [ "$args" != "$(cat .gpu-configure 2>/dev/null)" ]; then
        echo "== configure $args"
        "$S/configure" --enable-cuda=yes --with-cuda="$CUDA_HOME" --with-cuda-arch="${CUDA_ARCH:-90}" \
            "$cudnn" NVCC="$NVCC" "${CDP_CONFIGURE[@]}" || { tail -40 config.log; cp config.log "$GPU_WORK/extra/"; return 1; }
        echo "$args" >.gpu-configure
    fi
    cp config.log "$GPU_WORK/extra/"
    echo "== make -j$JOBS"
    make -j"$JOBS" || return 1
    echo "== the test programs (make check TESTS=)"
    make -j"$JOBS" check TESTS= >/dev/null || make check TESTS= || return 1
    echo "== what cdp_run runs with"
    ./cdp_run --version 2>&1 | head -3
    for f in .libs/cdp_run .libs/libcdp.so .libs/libcdp_cuda.so; do
        echo "$f:"
        LD_LIBRARY_PATH=$B/.libs:$LD_LIBRARY_PATH ldd "$f" 2>&1 |
            awk '/libmpi|open-pal|open-rte|openblas|gfortran|cublas|cudart|libcdp|not found/ {print $1, $3}' |
            while read -r n p; do echo "  $n -> $(readlink -f "$p" 2>/dev/null || echo "$p")"; done
    done
    f=$(dirname "$NVCC")/cuobjdump
    [ -x "$f" ] && "$f" --list-elf .libs/libcdp_cuda.so 2>&1 | sed 's/^/  /' | head -8
    echo "RESULT build ok: $(./cdp_run --version 2>&1 | head -1); CUDA arch ${CUDA_ARCH:-90};" \
         "libmpi $(readlink -f "$(LD_LIBRARY_PATH=$B/.libs:$LD_LIBRARY_PATH ldd .libs/cdp_run |
                                 awk '/libmpi.so/ {print $3}')")"
}

have_build() {
    [ -x "$B/cdp_run" ] && [ -x "$B/tests/lib/st_compare" ] && [ -f "$B/.gpu-configure" ]
}

ph_test() {
    local t rc=0 s
    cd "$B" || return 1
    make check TESTS="tests/gpu/test_gpu tests/gpu/gpu_parity.sh" || rc=$?
    for t in tests/gpu/test_gpu tests/gpu/gpu_parity; do      # the logs drop .sh
        echo "== $t.log"
        cat "$t.log" 2>/dev/null
        cp "$t.log" "$GPU_WORK/extra/" 2>/dev/null
        s=$(sed -n 's/^:test-result: //p' "$t.trs" 2>/dev/null | head -1)
        echo "RESULT test $t: ${s:-no result}"
    done
    grep -q '^:test-result: \(FAIL\|ERROR\)' tests/gpu/test_gpu.trs tests/gpu/gpu_parity.trs 2>/dev/null && return 1
    grep -q '^:test-result: PASS' tests/gpu/test_gpu.trs tests/gpu/gpu_parity.trs 2>/dev/null || return 77
    return $rc
}

ph_parity() { bash "$here/parity_models.sh" "$B"; }
ph_mlp() {
    REPS=${MLP_REPS:-3} STEPS=${MLP_STEPS:-200} bash "$root/bench/gpu/gpu_throughput.sh" "$B" |
        sed 's/^\(  cdp .* of the bound\)$/RESULT mlp \1/; s/^\(  cuBLAS SGEMM bound .*\)$/RESULT mlp \1/'
    return "${PIPESTATUS[0]}"
}
ph_nets() { bash "$here/nets.sh" "$B"; }
ph_memory() { bash "$here/memory.sh" "$B"; }
ph_profile() { bash "$here/profile.sh" "$B"; }
ph_train() {
    local data=$GPU_DIR/data rc
    [ -f "$data/fashion-mnist/train-images-idx3-ubyte.gz" ] ||
        { echo "no $data/fashion-mnist: run bench/gpu/fetch.sh data here and carry .gpu"; return 1; }
    # OUT is the device's return folder: accuracy.sh's logs go to extra/
    CDP_DATA_DIR=$data MODEL=${TRAIN_MODEL:-resnet20} EPOCHS=${TRAIN_EPOCHS:-15} \
        RULES=${TRAIN_RULES:-dp cdp-v1 cdp-v2} LR=${TRAIN_LR:-} WARMUP=${TRAIN_WARMUP:-500} \
        EXTRA="--backend cuda ${TRAIN_EXTRA:-}" OUT=$GPU_WORK/extra/train \
        bash "$root/bench/accuracy/accuracy.sh" "$B" | tee "$GPU_WORK/extra/train.txt"
    rc=${PIPESTATUS[0]}
    sed -n '/^== summary/,$ { s/^  RESULT /RESULT train /p; s/^  \([a-z0-9-]* *test accuracy.*\)/RESULT train \1/p; s/^\(== summary.*\)/RESULT train \1/p }' \
        "$GPU_WORK/extra/train.txt"
    return "$rc"
}
ph_check() {
    cd "$B" || return 1
    make -j"$JOBS" check >"$GPU_WORK/extra/check.log" 2>&1
    local rc=$?
    grep -E '^# (TOTAL|PASS|SKIP|XFAIL|FAIL|XPASS|ERROR)' "$GPU_WORK/extra/check.log" | sed 's/^/RESULT check /'
    grep -E '^(FAIL|ERROR):' "$GPU_WORK/extra/check.log" | sed 's/^/RESULT check /'
    return $rc
}

# ---------------------------------------------------------------- driver
if [ "${1:-}" = --phase ]; then         # one phase, in its own process
    gpu_env >/dev/null || exit 1
    find_cuda >/dev/null 2>&1
    "ph_$2"
    exit $?
fi

SYS_MPICC=$(command -v mpicc 2>/dev/null || true)
SYS_MPIRUN=$(command -v mpirun 2>/dev/null || true)
# every phase; the default runs the first seven, the others on request
ALL_PHASES="inventory build test parity mlp memory nets check train profile"
phases=${*:-inventory build test parity mlp memory nets}
for p in $phases; do
    case " $ALL_PHASES " in *" $p "*) ;;
        *) echo "run.sh: unknown phase '$p' ($ALL_PHASES)" >&2; exit 2 ;;
    esac
done
T0=$(date +%s)
BUDGET=${BUDGET:-540}
rm -rf "$GPU_WORK/extra"
mkdir -p "$GPU_WORK/extra"
sum=$OUT/summary.txt
{
    if gpu_env; then :; else echo "RESULT setup FAILED: the prefix could not be made (see above)"; fi
    find_cuda || echo "RESULT setup WARNING: CUDA not found"
    inventory $phases
} >"$sum" 2>&1
cat "$sum"
echo "== phases (limit, seconds used, status)" | tee -a "$sum"
skipped=""
built=""
run_phase() {
    local p=$1 left lim t rc st
    left=$((BUDGET - ($(date +%s) - T0) - 15))
    lim=${MAXS[$p]}
    [ "$left" -lt "$lim" ] && lim=$left
    if [ "$lim" -lt "${MINS[$p]}" ]; then
        printf '%-8s skipped: %s s left of BUDGET=%s\n' "$p" "$left" "$BUDGET" | tee -a "$sum"
        skipped="$skipped $p"
        return 1
    fi
    t=$(date +%s)
    echo "== $p (at most $lim s) ..."
    timeout -k 15 "$lim" bash "$here/run.sh" --phase "$p" >>"$OUT/$p.log" 2>&1
    rc=$?
    case $rc in
        0) st=ok ;; 77) st=SKIP ;; 124|137) st="TIMEOUT (log so far in $p.log)" ;; *) st="FAILED rc=$rc" ;;
    esac
    printf '%-8s %4s s of %4s s  %s\n' "$p" "$(($(date +%s) - t))" "$lim" "$st" | tee -a "$sum"
    [ $rc = 0 ] || [ $rc = 77 ]
}
for p in $phases; do
    case $p in
        inventory) continue ;;
        build) run_phase build ;;
        *)
            # build first even when a warm machine kept one: the build phase
            # copies this tree's edits over the sources (4 s when nothing
            # changed), and without it `run.sh test` tested the old test
            # program (2026-11-27)
            case " $phases $built " in *" build "*) ;; *) run_phase build; built=" build" ;; esac
            if have_build; then run_phase "$p"; else
                printf '%-8s not run: no build\n' "$p" | tee -a "$sum"
            fi ;;
    esac
done
[ -z "$skipped" ] || echo "to do in another run: bench/gpu/run.sh$skipped" | tee -a "$sum"

{
    echo
    echo "== results (the RESULT lines of each log)"
    for p in $ALL_PHASES; do
        [ -f "$OUT/$p.log" ] && grep -h '^RESULT' "$OUT/$p.log" | cut -c1-300
    done
    echo "total: $(($(date +%s) - T0)) s"
    echo "== result lines"
    for p in $ALL_PHASES; do
        [ -f "$OUT/$p.log" ] && grep -h "^result$(printf '\t')" "$OUT/$p.log"
    done
} >>"$sum"
# at most 8 files come back: summary, 6 phase logs, extra.tar.gz
for p in check train profile; do
    [ -f "$OUT/$p.log" ] && [ "$(ls "$OUT" | wc -l)" -gt 7 ] && mv "$OUT/$p.log" "$GPU_WORK/extra/$p-phase.log"
done
tar -czf "$OUT/extra.tar.gz" -C "$GPU_WORK" extra 2>/dev/null
echo
echo "================================================================ summary.txt"
cat "$sum"
