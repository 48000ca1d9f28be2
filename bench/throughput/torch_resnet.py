#!/usr/bin/python3
"""PyTorch training throughput of the ResNets cdp_run trains
(bench/throughput/resnet_throughput.sh).

The networks are tests/torch/torch_model_reference.py's builders (torchvision's
modules and names; resnet20/32/56 from torchvision's BasicBlock), imported,
not copied.  The loop is what a PyTorch user writes: model.train(), mean
cross-entropy, torch.optim.SGD(lr 0.05, momentum 0.9, weight decay 5e-4),
one optimizer step per batch; float32, channels-first (NCHW) tensors.  The
data is synthetic (fixed random images and labels, like cdp_run --data
synthetic): the figure is compute, not input pipeline.

PyTorch 1.13 as Debian ships it runs convolutions, BatchNorm and pooling
through oneDNN (MKL-DNN 2.6.3, JIT AVX-512) when torch.backends.mkldnn is
enabled (the default), and Linear layers through OpenBLAS; with mkldnn
disabled, convolutions fall back to ATen's im2col + GEMM (slow_conv2d, which
calls OpenBLAS sgemm).

Configurations (--configs, space or comma separated), MODE:tT:bB:MKLDNN:
  MODE    b      one batch of --batch samples per step
          accN   gradient accumulation over N micro-batches of --batch/N
                 (BatchNorm per micro-batch: the numerics of cdp's N workers)
  tT      torch.set_num_threads(T)        (torch's OpenMP pool, oneDNN's too)
  bB      openblas_set_num_threads(B)     (OpenBLAS's own pthread pool)
  MKLDNN  on | off                        (torch.backends.mkldnn.enabled)
e.g. "b:t1:b1:on b:t2:b1:on acc2:t2:b1:on b:t2:b1:off".  All configurations
are measured round-robin in one process (--reps rounds; each round runs
--warmup untimed steps, then --steps timed steps, per configuration), so
the noise of other jobs hits them alike.  OPENBLAS_CORETYPE must be set in
the environment before the process starts; the kernel OpenBLAS runs is
printed.

Output: one line per configuration and round,
  TORCHREP model=M batch=B config=C rep=R samples_per_s=X step_median_sps=Y
(X = steps * batch / time of the timed steps; Y = batch / median step time),
then a summary line per configuration,
  TORCH model=M batch=B config=C core=K samples_per_s=MED min=A max=B
(median, minimum and maximum of X over the rounds).
"""
import argparse
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "torch"))
from torch_model_reference import build_model  # noqa: E402
from openblas_ctl import corename, set_blas_threads  # noqa: E402
from torch_step import add_round_robin_args, parse_round_robin_args, train_step  # noqa: E402


def parse_config(text):
    parts = text.split(":")
    if len(parts) != 4 or not parts[1].startswith("t") or not parts[2].startswith("b") \
            or parts[3] not in ("on", "off") or not (parts[0] == "b" or parts[0].startswith("acc")):
        raise SystemExit(f"torch_resnet.py: bad configuration '{text}' (MODE:tT:bB:on|off)")
    micro = 1 if parts[0] == "b" else int(parts[0][3:])
    return {"name": text, "micro": micro, "threads": int(parts[1][1:]),
            "blas": int(parts[2][1:]), "mkldnn": parts[3] == "on"}


class Trainer:
    def __init__(self, a, cfg):
        torch.manual_seed(a.seed)
        self.model = build_model(a.model, in_channels=a.shape[0], num_classes=a.classes,
                                 image_size=a.shape[2])
        self.model.train()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=a.lr, momentum=a.momentum,
                                   weight_decay=a.weight_decay)
        g = torch.Generator().manual_seed(a.seed)
        self.x = torch.randn((a.batch,) + tuple(a.shape), generator=g).contiguous()
        self.y = torch.randint(0, a.classes, (a.batch,), generator=g)
        self.cfg = cfg
        if a.batch % cfg["micro"]:
            raise SystemExit(f"torch_resnet.py: batch {a.batch} not divisible by {cfg['micro']}")

    def step(self):
        train_step(self.model, self.opt, self.x, self.y, self.cfg["micro"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.split("\n")[1:]))
    ap.add_argument("--model", default="resnet20")
    ap.add_argument("--shape", default="1x28x28", help="CxHxW of one sample")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--batch", type=int, default=128, help="samples per step")
    ap.add_argument("--configs", default="b:t1:b1:on b:t2:b1:on")
    add_round_robin_args(ap, steps=10, reps=1)
    a = parse_round_robin_args(ap, "torch_resnet.py")
    configs = [parse_config(c) for c in a.configs.replace(",", " ").split()]
    trainers = [Trainer(a, c) for c in configs]
    res = {c["name"]: [] for c in configs}
    core = corename()
    print(f"# torch {torch.__version__}, OpenBLAS kernel {core}, mkldnn available "
          f"{torch.backends.mkldnn.is_available()}, "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}", flush=True)
    for rep in range(a.reps):
        for c, tr in zip(configs, trainers):
            torch.set_num_threads(c["threads"])
            set_blas_threads(c["blas"])
            with torch.backends.mkldnn.flags(enabled=c["mkldnn"]):
                for _ in range(a.warmup):
                    tr.step()
                steps = []
                t0 = time.perf_counter()
                t = t0
                for _ in range(a.steps):
                    tr.step()
                    u = time.perf_counter()
                    steps.append(u - t)
                    t = u
                total = t - t0
            sps = a.steps * a.batch / total
            res[c["name"]].append(sps)
            print(f"TORCHREP model={a.model} batch={a.batch} config={c['name']} rep={rep + 1} "
                  f"samples_per_s={sps:.2f} step_median_sps={a.batch / statistics.median(steps):.2f}",
                  flush=True)
    for c in configs:
        v = res[c["name"]]
        print(f"TORCH model={a.model} batch={a.batch} config={c['name']} core={core} "
              f"samples_per_s={statistics.median(v):.2f} min={min(v):.2f} max={max(v):.2f}",
              flush=True)


if __name__ == "__main__":
    main()
