# Sourced by the GPU tests and benchmarks (tests/gpu/gpu_parity.sh,
# bench/gpu/gpu_throughput.sh, bench/gpu/*.sh): one 1-step run decides whether
# there is a GPU to use.
#
# cuda_probe CDP_RUN [BACKEND [PREFIX]]: returns where a 1-step --backend
# BACKEND (cuda) run works; where the build or the machine has no CUDA,
# prints "SKIP: <its error line>" and exits 77 (reported as skipped, never
# as passed); where CUDA is there but the run breaks, prints its last
# lines and "PREFIX FAIL: ..." and exits 1.
cuda_probe() {
    local out
    if out=$("$1" --backend "${2:-cuda}" --data synthetic --model mlp:8-4-10 --steps 1 \
                 --eval-every 0 --quiet 2>&1); then
        return 0
    fi
    if echo "$out" | grep -qE 'has no CUDA backend|no CUDA device found'; then
        echo "SKIP: $(echo "$out" | grep error)"
        exit 77
    fi
    echo "$out" | tail -5 | sed 's/^/  /'
    echo "${3:-}FAIL: a 1-step --backend ${2:-cuda} run failed, and not for want of CUDA"
    exit 1
}
