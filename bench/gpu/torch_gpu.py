#!/usr/bin/env python3
"""PyTorch on the GPU beside cdp_run --backend cuda (bench/gpu/nets.sh, memory.sh).

The networks are tests/torch/torch_model_reference.py's builders (torchvision's
resnet50 and VisionTransformer with cdp's presets such as vit-b16), imported,
not copied, with 10 classes like cdp_run's synthetic data.  float32
throughout and TF32 off on both paths (torch.backends.cuda.matmul.allow_tf32
and torch.backends.cudnn.allow_tf32 False, matmul precision "highest"; run.sh
also sets NVIDIA_TF32_OVERRIDE=0), NCHW, synthetic data already on the
device, the loop a PyTorch user writes: model.train(), mean cross-entropy,
torch.optim.SGD(lr 0.05, momentum 0.9, weight decay 5e-4), zero_grad(),
backward per micro-batch (loss / N), one optimizer step.

Subcommands:
  throughput  --model M --shape CxHxW --configs "b:64 acc4:64"
              MODE:SAMPLES, MODE b (one batch of SAMPLES) or accN (N
              micro-batches of SAMPLES/N accumulated); all configurations
              round-robin in one process, --reps rounds of --warmup untimed
              and --steps timed steps (synchronised per step).  Prints
                TORCHREP model= samples= config= rep= samples_per_s= step_median_sps=
                TORCH model= samples= config= samples_per_s=MEDIAN min= max=
  memory      --model M --shape CxHxW --micro B --accum N
              one warm step, then one measured step: the bytes allocated
              after zero_grad (parameters + optimizer state), the peak
              (torch.cuda.max_memory_allocated) and their difference less
              the gradients, i.e. what the step's activations and
              workspaces took:
                TORCHMEM model= micro= accum= param_bytes= base_bytes= peak_bytes=
                         act_bytes= reserved_bytes=
  gemm        --list FILE [--list FILE ...]  (bench/kernels/conv_gemm_bound.c --list
              output; the micro-batch B from its "model ..., batch B:" line)
              times every GEMM shape of a list with torch.mm (cuBLAS SGEMM,
              operands transposed as listed; fresh random operands, CUDA
              events, median of --reps calls after 3 warm-ups), counted as
              often as it occurs; the per-(sample, head) attention products
              as one torch.bmm over all of them (cdp's gemm_batched).
                GEMM model:B what op M= N= K= count= us= tflops=
                GEMMBOUND model= batch=B ms= tflops= samples_per_s=
              (per micro-batch of B: the bound of N micro-batches of B is the
              same samples/s)
--device cpu runs any of them on the CPU (smoke tests without a GPU).
"""
import argparse
import os
import re
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "torch"))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from torch_step import train_step  # noqa: E402  (bench/lib/)


def setup(a):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    torch.backends.cudnn.benchmark = bool(a.cudnn_benchmark)
    if a.device == "cuda" and not torch.cuda.is_available():
        print("SKIP: torch sees no CUDA device", flush=True)
        sys.exit(77)
    dev = torch.device(a.device)
    name = torch.cuda.get_device_name(0) if a.device == "cuda" else "cpu"
    print(f"# torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN "
          f"{torch.backends.cudnn.version()}, device {name}, TF32 off, cudnn.benchmark "
          f"{torch.backends.cudnn.benchmark}", flush=True)
    return dev


def shape_of(text):
    try:
        s = [int(v) for v in text.lower().split("x")]
        assert len(s) == 3
        return s
    except (ValueError, AssertionError):
        raise SystemExit(f"torch_gpu.py: bad --shape {text} (CxHxW)")


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


class Trainer:
    def __init__(self, a, dev, samples, micro):
        from torch_model_reference import build_model
        torch.manual_seed(a.seed)
        c, h, _ = a.shape
        self.model = build_model(a.model, in_channels=c, num_classes=a.classes,
                                 image_size=h).to(dev)
        self.model.train()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=a.lr, momentum=a.momentum,
                                   weight_decay=a.weight_decay)
        g = torch.Generator().manual_seed(a.seed)
        self.x = torch.randn((samples,) + tuple(a.shape), generator=g).to(dev)
        self.y = torch.randint(0, a.classes, (samples,), generator=g).to(dev)
        if samples % micro:
            raise SystemExit(f"torch_gpu.py: {samples} samples not divisible by {micro}")
        self.micro = micro

    def step(self):
        train_step(self.model, self.opt, self.x, self.y, self.micro)


def parse_config(text):
    m = re.fullmatch(r"(b|acc(\d+)):(\d+)", text)
    if not m:
        raise SystemExit(f"torch_gpu.py: bad configuration '{text}' (b:SAMPLES or accN:SAMPLES)")
    return {"name": text, "micro": int(m.group(2) or 1), "samples": int(m.group(3))}


def throughput(a, dev):
    configs = [parse_config(c) for c in a.configs.replace(",", " ").split()]
    res = {c["name"]: [] for c in configs}
    trainers = {}
    for rep in range(a.reps):
        for c in configs:
            tr = trainers.get(c["name"])
            if tr is None:      # one model at a time on the GPU
                trainers.clear()
                if dev.type == "cuda":
                    torch.cuda.empty_cache()
                tr = trainers[c["name"]] = Trainer(a, dev, c["samples"], c["micro"])
            for _ in range(a.warmup):
                tr.step()
            sync(dev)
            steps = []
            t0 = t = time.perf_counter()
            for _ in range(a.steps):
                tr.step()
                sync(dev)
                u = time.perf_counter()
                steps.append(u - t)
                t = u
            sps = a.steps * c["samples"] / (t - t0)
            res[c["name"]].append(sps)
            print(f"TORCHREP model={a.model} samples={c['samples']} config={c['name']} rep={rep + 1} "
                  f"samples_per_s={sps:.2f} step_median_sps={c['samples'] / statistics.median(steps):.2f}",
                  flush=True)
    for c in configs:
        v = res[c["name"]]
        print(f"TORCH model={a.model} samples={c['samples']} config={c['name']} "
              f"samples_per_s={statistics.median(v):.2f} min={min(v):.2f} max={max(v):.2f}", flush=True)


def memory(a, dev):
    tr = Trainer(a, dev, a.micro * a.accum, a.accum)
    tr.step()                      # the optimizer state exists from here on
    sync(dev)
    tr.opt.zero_grad(set_to_none=True)
    params = sum(p.numel() * p.element_size() for p in tr.model.parameters())
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        base = 0
    tr.step()
    sync(dev)
    peak = torch.cuda.max_memory_allocated() if dev.type == "cuda" else 0
    reserved = torch.cuda.max_memory_reserved() if dev.type == "cuda" else 0
    print(f"TORCHMEM model={a.model} micro={a.micro} accum={a.accum} param_bytes={params} "
          f"base_bytes={base} peak_bytes={peak} act_bytes={peak - base - params} "
          f"reserved_bytes={reserved}", flush=True)


LINE = re.compile(r"^\s+(.*?)\s+(NN|NT|TN|TT) M\s+(\d+) N\s+(\d+) K\s+(\d+)\s+samples in (\w)\s+x(\d+)")


def time_call(fn, dev, reps):
    for _ in range(3):
        fn()
    if dev.type == "cuda":
        ts = []
        for _ in range(reps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            ts.append(s.elapsed_time(e) * 1e-3)
    else:
        ts = []
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def gemm_one(path, a, dev):
    shapes = []
    model, batch = "?", 0
    for line in open(path):
        m = re.match(r"model (\S+), input \S+, batch (\d+):", line)
        if m:
            model, batch = m.group(1), int(m.group(2))
        m = LINE.match(line)
        if m:
            what, op = m.group(1), m.group(2)
            M, N, K, count = (int(m.group(i)) for i in (3, 4, 5, 7))
            shapes.append((what, op, M, N, K, count))
    if not shapes or not batch:
        print(f"torch_gpu.py gemm: no shapes or no batch in {path}", flush=True)
        return
    total_t = total_f = 0.0
    for what, op, M, N, K, count in shapes:
        ta, tb = op[0] == "T", op[1] == "T"
        batched = count > 1 and what.startswith("attention T")
        nb = count if batched else 1
        # A is [M,K] (or [K,M] transposed), B [K,N] (or [N,K]): row-major,
        # as conv_gemm_bound.c lists them
        A = torch.randn((nb, K, M) if ta else (nb, M, K), device=dev)
        Bm = torch.randn((nb, N, K) if tb else (nb, K, N), device=dev)
        opA = A.transpose(1, 2) if ta else A
        opB = Bm.transpose(1, 2) if tb else Bm
        if batched:
            fn = lambda: torch.bmm(opA, opB)  # noqa: E731
        else:
            a2, b2 = opA[0], opB[0]
            fn = lambda: torch.mm(a2, b2)  # noqa: E731
        t = time_call(fn, dev, a.reps)
        calls = 1 if batched else count
        flops = 2.0 * M * N * K * count
        total_t += t * calls
        total_f += flops
        print(f"GEMM {model}:{batch} {what!r} {op} M={M} N={N} K={K} count={count}"
              f"{' (one bmm)' if batched else ''} us={t * 1e6:.1f} tflops={flops / calls / t / 1e12:.2f}",
              flush=True)
        del A, Bm, opA, opB
    print(f"GEMMBOUND model={model} batch={batch} ms={total_t * 1e3:.3f} "
          f"tflops={total_f / total_t / 1e12:.2f} samples_per_s={batch / total_t:.1f}", flush=True)


def gemm(a, dev):
    for path in a.list:
        gemm_one(path, a, dev)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.split("\n")[1:]))
    ap.add_argument("what", choices=["throughput", "memory", "gemm"])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--shape", default="3x224x224")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--configs", default="b:64 acc4:64")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--micro", type=int, default=2)
    ap.add_argument("--accum", type=int, default=8)
    ap.add_argument("--list", action="append", default=[])
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--cudnn-benchmark", type=int, default=1,
                    help="torch.backends.cudnn.benchmark (1: PyTorch's fastest algorithms)")
    a = ap.parse_args()
    a.shape = shape_of(a.shape)
    dev = setup(a)
    if a.what == "gemm":
        a.reps = max(a.reps, 10)
        if not a.list:
            raise SystemExit("torch_gpu.py gemm: --list FILE is required")
    {"throughput": throughput, "memory": memory, "gemm": gemm}[a.what](a, dev)


if __name__ == "__main__":
    main()
