#!/usr/bin/python3
"""PyTorch training throughput for the MLPs that cdp_run trains
(bench/throughput/mlp_throughput.sh).

The loop is what a PyTorch user writes: nn.Sequential(Linear, ReLU, ..., Linear),
mean cross-entropy, torch.optim.SGD(lr, momentum 0.9), Fashion-MNIST shuffled
every epoch, pixels byte/255 gathered per step.  One process measures several
configurations, interleaved round-robin so that machine noise hits them alike:

  --threads 1,2          torch.set_num_threads (torch's own OpenMP pool)
  --blas-threads 1,2     openblas_set_num_threads (OpenBLAS's pthread pool;
                         torch 1.13 on Debian calls OpenBLAS for Linear)
  --modes b,accN         b: one batch of --batch per step;
                         accN: gradient accumulation over N micro-batches of
                         --batch/N (the numerics of cdp's dp rule)
  --ddp                  instead: DistributedDataParallel, gloo on 127.0.0.1,
                         world size 2, 1 torch + 1 OpenBLAS thread per rank,
                         --batch/2 samples per rank and step

OPENBLAS_CORETYPE must be set in the environment before the process starts;
the script reports the kernel OpenBLAS actually runs (openblas_get_corename).

Output: one line per configuration,
  TORCH model=... batch=... mode=... threads=T blas=T' core=... samples_per_s=X
        step_median_sps=Y step_p10_sps=Z (reps ...)
X is the median over repetitions of steps*batch/time; Y and Z are batch over
the median and the 10th percentile of the individual step times (robust to
other jobs on a shared machine: Z approximates the uncontended speed).
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
# the same step-time statistics as for cdp_run's traces
from trace_steps import quantile  # noqa: E402
from openblas_ctl import corename, set_blas_threads  # noqa: E402
from cdp_files import idx_path, idx_read  # noqa: E402


def load(data_dir):
    x = idx_read(idx_path(data_dir, "train-images-idx3-ubyte"))
    y = idx_read(idx_path(data_dir, "train-labels-idx1-ubyte"))
    return (torch.from_numpy(x.reshape(x.shape[0], -1).copy()),
            torch.from_numpy(y.astype(np.int64)))


def make_model(spec, seed=1):
    dims = [int(s) for s in spec.replace("mlp:", "").split("-")]
    torch.manual_seed(seed)
    layers = []
    for j in range(len(dims) - 1):
        layers.append(nn.Linear(dims[j], dims[j + 1]))
        if j + 2 < len(dims):
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class Trainer:
    """One configuration: model, optimiser, data cursor."""

    def __init__(self, spec, batch, micro, xs, ys, seed=1, model=None):
        self.model = model if model is not None else make_model(spec, seed)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9)
        self.batch, self.micro = batch, micro
        self.xs, self.ys = xs, ys
        self.g = torch.Generator().manual_seed(seed)
        self.perm = torch.randperm(xs.shape[0], generator=self.g)
        self.pos = 0

    def next_idx(self, n):
        if self.pos + n > self.perm.numel():
            self.perm = torch.randperm(self.xs.shape[0], generator=self.g)
            self.pos = 0
        idx = self.perm[self.pos:self.pos + n]
        self.pos += n
        return idx

    def step(self):
        idx = self.next_idx(self.batch)
        x = self.xs[idx].float().div_(255.0)
        y = self.ys[idx]
        self.opt.zero_grad(set_to_none=True)
        if self.micro == 1:
            F.cross_entropy(self.model(x), y).backward()
        else:
            mb = self.batch // self.micro
            for i in range(self.micro):
                loss = F.cross_entropy(self.model(x[i * mb:(i + 1) * mb]), y[i * mb:(i + 1) * mb])
                (loss / self.micro).backward()
        self.opt.step()

    def timed(self, steps, record=None):
        """Runs steps; returns the total time; appends each step's time to record."""
        t0 = time.perf_counter()
        t = t0
        for _ in range(steps):
            self.step()
            if record is not None:
                u = time.perf_counter()
                record.append(u - t)
                t = u
        return time.perf_counter() - t0


def fmt(batch, means, steps):
    """samples/s: median over repetitions of the mean; per-step median; per-step p10."""
    return (f"samples_per_s={statistics.median(means):.1f} "
            f"step_median_sps={batch / statistics.median(steps):.1f} "
            f"step_p10_sps={batch / quantile(steps, 0.1):.1f} "
            f"(reps {' '.join(f'{v:.0f}' for v in means)})")


def single(a, xs, ys):
    configs = []
    for mode in a.modes.split(","):
        micro = 1 if mode == "b" else int(mode[3:])
        for t in [int(s) for s in a.threads.split(",")]:
            for bt in [int(s) for s in a.blas_threads.split(",")]:
                configs.append((mode, micro, t, bt))
    trainers = {c: Trainer(a.model, a.batch, c[1], xs, ys) for c in configs}
    times = {c: [] for c in configs}
    steps = {c: [] for c in configs}
    for rep in range(a.warmup_reps + a.reps):
        for c in configs:
            torch.set_num_threads(c[2])
            set_blas_threads(c[3])
            tr = trainers[c]
            tr.timed(a.warmup)
            rec = []
            dt = tr.timed(a.steps, rec)
            if rep >= a.warmup_reps:
                times[c].append(a.steps * a.batch / dt)
                steps[c] += rec
    core = corename()
    for c in configs:
        print(f"TORCH model={a.model} batch={a.batch} mode={c[0]} threads={c[2]} "
              f"blas={c[3]} core={core} {fmt(a.batch, times[c], steps[c])}", flush=True)


def ddp_worker(rank, a, init_file, queue):
    import torch.distributed as dist
    torch.set_num_threads(1)
    set_blas_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    xs, ys = load(a.data_dir)
    model = nn.parallel.DistributedDataParallel(make_model(a.model))
    tr = Trainer(a.model, a.batch // 2, 1, xs, ys, seed=1 + rank, model=model)
    res = []
    steps = []
    for rep in range(a.warmup_reps + a.reps):
        tr.timed(a.warmup)
        dist.barrier()
        rec = []
        dt = torch.tensor([tr.timed(a.steps, rec)])
        dist.all_reduce(dt, op=dist.ReduceOp.MAX)
        if rep >= a.warmup_reps:
            res.append(a.steps * a.batch / dt.item())
            steps += rec
    if rank == 0:
        queue.put((res, steps, corename()))
    dist.destroy_process_group()


def ddp(a):
    import torch.multiprocessing as mp
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    d = tempfile.mkdtemp(prefix="torch_ddp_")
    init_file = os.path.join(d, "init")
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    try:
        mp.spawn(ddp_worker, args=(a, init_file, q), nprocs=2, join=True)
        res, steps, core = q.get()
    finally:
        for f in os.listdir(d):
            os.unlink(os.path.join(d, f))
        os.rmdir(d)
    print(f"TORCH model={a.model} batch={a.batch} mode=ddp2 threads=1x2 blas=1x2 core={core} "
          f"{fmt(a.batch, res, steps)}", flush=True)


def sgemm_bound(a):
    """GEMM-only time of one training step through torch.mm (the same OpenBLAS
    sgemm that cdp calls): per micro-batch of rows m = batch/micro, for every
    layer [in -> out]: forward Y = X W^T (m x out x in), weight gradient
    dW = dY^T X (out x in x m) and, except for the first layer, dX = dY W
    (m x in x out).  A fallback when bench/kernels/sgemm_limit.c is not available."""
    torch.set_num_threads(1)
    set_blas_threads(a.bound_blas_threads)
    dims = [int(s) for s in a.model.replace("mlp:", "").split("-")]
    m = a.batch // a.micro
    ops = []
    flops = 0
    for j in range(len(dims) - 1):
        i, o = dims[j], dims[j + 1]
        x, w, dy = torch.randn(m, i), torch.randn(o, i), torch.randn(m, o)
        ops.append((x, w.t(), torch.empty(m, o)))           # Y = X W^T
        ops.append((dy.t(), x, torch.empty(o, i)))          # dW = dY^T X
        flops += 2 * m * i * o * 2
        if j > 0:
            ops.append((dy, w, torch.empty(m, i)))          # dX = dY W
            flops += 2 * m * i * o
    flops *= a.micro
    best = []
    for rep in range(a.reps):
        for _ in range(3):
            for p, q, r in ops:
                torch.mm(p, q, out=r)
        t0 = time.perf_counter()
        n = max(1, a.steps)
        for _ in range(n * a.micro):
            for p, q, r in ops:
                torch.mm(p, q, out=r)
        best.append((time.perf_counter() - t0) / n)
    t = statistics.median(best)
    print(f"SGEMMBOUND model={a.model} batch={a.batch} micro={a.micro} "
          f"blas={a.bound_blas_threads} core={corename()} step_s={t:.6f} "
          f"gflops={flops / t / 1e9:.1f} samples_per_s={a.batch / t:.1f}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="mlp:784-1024-1024-10")
    ap.add_argument("--batch", type=int, default=128, help="samples per step")
    ap.add_argument("--modes", default="b,acc4", help="b, accN (comma list)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--blas-threads", default="2")
    ap.add_argument("--steps", type=int, default=100, help="timed steps per repetition")
    ap.add_argument("--warmup", type=int, default=10, help="untimed steps before each repetition")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup-reps", type=int, default=0)
    ap.add_argument("--ddp", action="store_true")
    ap.add_argument("--sgemm-bound", action="store_true",
                    help="instead: GEMM-only step time via torch.mm (fallback limit)")
    ap.add_argument("--micro", type=int, default=1, help="--sgemm-bound: micro-batches per step")
    ap.add_argument("--bound-blas-threads", type=int, default=2)
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    if a.sgemm_bound:
        sgemm_bound(a)
    elif a.ddp:
        ddp(a)
    else:
        xs, ys = load(a.data_dir)
        single(a, xs, ys)


if __name__ == "__main__":
    main()
