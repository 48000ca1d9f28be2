#!/bin/bash
# Peak activation memory on one GPU at N = 8 workers: cdp_run
# --backend cuda, one process, dp and cdp-v2 with L stages, next to PyTorch's
# gradient accumulation over the same 8 micro-batches
# (bench/gpu/torch_gpu.py memory: torch.cuda.max_memory_allocated).
#
#   bench/gpu/memory.sh BUILD
#
# cdp's figures come from its --metrics summary: peak_activation_bytes (the
# activations the executor held at its peak), activation_reserved_bytes_per_rank,
# model_state_bytes_per_rank, workspace_bytes_per_rank, step_time_s; beside
# them the device memory the run used, sampled every 0.1 s from nvidia-smi
# (memory.used less what was used before the run: CUDA context and cuBLAS
# workspace included, so an upper bound).  PyTorch: the bytes allocated after
# zero_grad (parameters + momentum), the peak of the step, and the peak less
# both and the gradients (what activations and workspaces took).  Note that
# PyTorch's accumulation keeps one micro-batch's activations at a time; dp
# and cdp-v2 keep several workers' (the timeline's N*L and N*(L+1)/2
# stage-activations).
#
# Environment: MODELS "MODEL:B ..." [resnet50:2 vit-b16:1] (B samples per
# micro-batch), N [8], L [4], SHAPE [3x224x224], STEPS [2], BALANCE [flops],
# RUN_TIMEOUT [120], BACKEND/DEVICE [cuda] (cpu/cpu: smoke test), PYTHON
# [python3].  Prints RESULT lines last, then the same figures as result lines
# (bench/README).  Exits 77 without a usable GPU.
set -u
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${1:?usage: bench/gpu/memory.sh BUILD_DIR}
CDP=$BUILD/cdp_run
MODELS=${MODELS:-"resnet50:2 vit-b16:1"}
N=${N:-8}
L=${L:-4}
SHAPE=${SHAPE:-3x224x224}
STEPS=${STEPS:-2}
BALANCE=${BALANCE:-flops}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
BACKEND=${BACKEND:-cuda}
DEVICE=${DEVICE:-cuda}
PYTHON=${PYTHON:-python3}
[ -x "$CDP" ] || { echo "memory.sh: $CDP not found (build first)" >&2; exit 2; }
tmp=$(mktemp -d /tmp/cdp_mem.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
res=$tmp/res.txt
: >"$res"
. "$(dirname "$0")/../../tests/gpu/cuda_probe.sh"
cuda_probe "$CDP" "$BACKEND"   # exits 77 where there is no CUDA to measure
. "$here/../lib/common.sh"
bench_header
echo "# $("$CDP" --version 2>&1 | head -1); N=$N, L=$L, $SHAPE, $STEPS steps, balance $BALANCE"

used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1 |
         grep -E '^[0-9]+$'; }
# sampled CMD...: runs CMD while sampling memory.used; sets peak_mib (less
# the memory used before; empty without nvidia-smi) and rc
sampled() {
    local before s max=0
    before=$(used)
    "$@" &
    local pid=$!
    while kill -0 $pid 2>/dev/null; do
        s=$(used)
        [ -n "$s" ] && [ "$s" -gt "$max" ] && max=$s
        sleep 0.1
    done
    wait $pid
    rc=$?
    peak_mib=$([ -n "$before" ] && echo $((max - before)))
}
key() { grep '"summary": true' "$1" | tail -1 | grep -o "\"$2\": [0-9.e+-]*" | awk '{print $2}'; }

for mb in $MODELS; do
    m=${mb%%:*} b=${mb##*:}
    data="synthetic:$SHAPE:n=$((N * b * 2)):test=$b"
    common=(--backend "$BACKEND" --model "$m" --data "$data" --workers "$N" --stages "$L" --batch "$b"
            --balance "$BALANCE" --lr 0.05 --momentum 0.9 --weight-decay 5e-4)
    "$CDP" "${common[@]}" --rule cdp-v2 --plan >"$tmp/plan.txt" 2>&1 &&
        grep -E '^stages:|^peak activations:' "$tmp/plan.txt" | sed "s/^/# plan $m: /"
    for rule in dp cdp-v2; do
        j=$tmp/$m-$rule.json
        sampled timeout "$RUN_TIMEOUT" "$CDP" "${common[@]}" --rule "$rule" --steps "$STEPS" --eval-every 0 \
            --quiet --metrics "$j" >"$tmp/log.txt" 2>&1
        if [ $rc != 0 ]; then
            echo "cdp_run $m $rule failed (exit $rc):"; tail -5 "$tmp/log.txt"; continue
        fi
        echo "cdp $m $rule $(key "$j" peak_activation_bytes) $(key "$j" activation_reserved_bytes_per_rank)" \
             "$(key "$j" model_state_bytes_per_rank) $(key "$j" workspace_bytes_per_rank)" \
             "$(key "$j" step_time_s) ${peak_mib:--}" | tee -a "$res"
    done
    sampled timeout "$RUN_TIMEOUT" "$PYTHON" "$here/torch_gpu.py" memory --device "$DEVICE" --model "$m" \
        --shape "$SHAPE" --micro "$b" --accum "$N" >"$tmp/torch.txt" 2>&1
    grep -v '^TORCHMEM' "$tmp/torch.txt" | tail -5
    t=$(grep '^TORCHMEM' "$tmp/torch.txt")
    [ -n "$t" ] && echo "torch $m $(echo "$t" | grep -oE '[a-z_]+=-?[0-9]+' | tr '\n' ' ')smi_mib=${peak_mib:--}" |
        tee -a "$res"
done

echo
echo "== peak activations at N=$N, L=$L (MB = 1e6 bytes); nvidia-smi: device memory used during the run"
python3 - "$res" "$N" "$L" "$SHAPE N=$N L=$L balance=$BALANCE steps=$STEPS" <<'EOF'
import sys
from bench_result import bench_result
res, N, L, setup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
results = []
MB = 1e6
cdp, torch = {}, {}
for line in open(res):
    p = line.split()
    if p[0] == "cdp":
        cdp[(p[1], p[2])] = p[3:]
    elif p[0] == "torch":
        torch[p[1]] = dict(kv.split("=") for kv in p[2:])
print("RESULT memory %-10s %-8s %12s %12s %12s %9s %10s" %
      ("model", "run", "peak act MB", "reserved MB", "state MB", "step s", "smi MiB"))
models = sorted({m for m, _ in cdp} | set(torch))
for m in models:
    for rule in ("dp", "cdp-v2"):
        v = cdp.get((m, rule))
        if v:
            act, resv, state, ws, st, smi = v
            f = lambda x: "%.1f" % (float(x) / MB) if x not in ("", "-") else "-"
            print("RESULT memory %-10s %-8s %12s %12s %12s %9.3f %10s" %
                  (m, rule, f(act), f(resv), f(state), float(st or 0), smi))
            cfg = f"{m} {setup} {rule}"
            results += [(cfg, "peak_activation_bytes", act, "bytes"),
                        (cfg, "activation_reserved_bytes_per_rank", resv, "bytes"),
                        (cfg, "model_state_bytes_per_rank", state, "bytes"),
                        (cfg, "workspace_bytes_per_rank", ws, "bytes"),
                        (cfg, "step_time", st, "s"), (cfg, "device_memory_used", smi, "MiB")]
    t = torch.get(m)
    if t and int(t["peak_bytes"]) > 0:     # (0 without CUDA: --device cpu)
        print("RESULT memory %-10s %-8s %12.1f %12s %12.1f %9s %10s" %
              (m, "PyTorch", int(t["act_bytes"]) / MB, "peak %.1f" % (int(t["peak_bytes"]) / MB),
               int(t["base_bytes"]) / MB, "-", t.get("smi_mib", "-")))
        cfg = f"{m} {setup} PyTorch"
        results += [(cfg, "activation_bytes", int(t["act_bytes"]), "bytes"),
                    (cfg, "peak_bytes", int(t["peak_bytes"]), "bytes"),
                    (cfg, "base_bytes", int(t["base_bytes"]), "bytes"),
                    (cfg, "device_memory_used", t.get("smi_mib"), "MiB")]
    d, c = cdp.get((m, "dp")), cdp.get((m, "cdp-v2"))
    if d and c and float(d[0]) > 0:
        print("RESULT memory %s cdp-v2/dp peak activations %.3f (timeline (L+1)/(2L) = %.3f)" %
              (m, float(c[0]) / float(d[0]), (L + 1) / (2 * L)))
        results += [(f"{m} {setup} cdp-v2/dp", "peak_activation_bytes", float(c[0]) / float(d[0]),
                     "ratio"),
                    (f"{m} {setup} cdp-v2/dp", "timeline_prediction", (L + 1) / (2 * L), "ratio")]
    if c and t and int(t["peak_bytes"]) > 0 and int(t["act_bytes"]) > 0:
        print("RESULT memory %s cdp-v2 / PyTorch accumulation (activations) %.2f" %
              (m, float(c[0]) / int(t["act_bytes"])))
        results.append((f"{m} {setup} cdp-v2/PyTorch accumulation", "activation_bytes",
                        float(c[0]) / int(t["act_bytes"]), "ratio"))
for r in results:
    bench_result("gpu-memory", *r)
EOF
