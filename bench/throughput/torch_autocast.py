#!/usr/bin/python3
"""PyTorch's step time under torch.autocast("cpu", dtype=torch.bfloat16)
(bench/throughput/bf16_conv_speed.sh): the ResNets cdp_run trains, as a
PyTorch user writes mixed precision on the CPU.

The networks are tests/torch/torch_model_reference.py's builders, the step
bench/lib/torch_step.py's (mean cross-entropy, SGD lr 0.05, momentum 0.9,
weight decay 5e-4), under autocast; synthetic data (fixed random images and
labels).  PyTorch 1.13 runs the bf16 convolutions, BatchNorm and pooling
through oneDNN (MKL-DNN 2.6.3) with the AVX512_BF16 instructions where the
CPU has them.

Configurations (--configs, space or comma separated), LAYOUT:tT:
  LAYOUT  nchw | cl   the model and input contiguous (NCHW), or
                      torch.channels_last (NHWC: oneDNN's convolutions
                      then need no reorders between layers)
  tT      torch.set_num_threads(T)
All configurations are measured round-robin in one process (--reps rounds;
each runs --warmup untimed steps, then --steps timed steps), so the noise of
other jobs hits them alike.

Output: per configuration and round
  AUTOCAST model=M batch=B config=C rep=R step_s=S   (median step time)
then per configuration the median over the rounds
  AUTOCASTSUM model=M batch=B config=C step_s=S min=A max=B
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "torch"))
from torch_model_reference import build_model  # noqa: E402
from torch_step import (add_round_robin_args, parse_round_robin_args,  # noqa: E402
                        time_round_robin, train_step)


def parse_config(text):
    parts = text.split(":")
    if len(parts) != 2 or parts[0] not in ("nchw", "cl") or not parts[1].startswith("t") \
            or not parts[1][1:].isdigit():
        raise SystemExit(f"torch_autocast.py: bad configuration '{text}' (nchw|cl:tT)")
    return {"name": text, "cl": parts[0] == "cl", "threads": int(parts[1][1:])}


class Trainer:
    def __init__(self, a, cfg):
        torch.manual_seed(a.seed)
        fmt = torch.channels_last if cfg["cl"] else torch.contiguous_format
        self.model = build_model(a.model, in_channels=a.shape[0], num_classes=a.classes,
                                 image_size=a.shape[2]).to(memory_format=fmt)
        self.model.train()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=a.lr, momentum=a.momentum,
                                   weight_decay=a.weight_decay)
        g = torch.Generator().manual_seed(a.seed)
        self.x = torch.randn((a.batch,) + tuple(a.shape), generator=g).to(memory_format=fmt)
        self.y = torch.randint(0, a.classes, (a.batch,), generator=g)

    def step(self):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            train_step(self.model, self.opt, self.x, self.y, 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.split("\n")[1:]))
    ap.add_argument("--model", default="resnet18-cifar")
    ap.add_argument("--shape", default="3x32x32", help="CxHxW of one sample")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--configs", default="nchw:t2 cl:t2")
    add_round_robin_args(ap, steps=5, reps=3)
    a = parse_round_robin_args(ap, "torch_autocast.py")
    configs = [parse_config(c) for c in a.configs.replace(",", " ").split()]
    trainers = [Trainer(a, c) for c in configs]
    print(f"# torch {torch.__version__}, mkldnn available {torch.backends.mkldnn.is_available()}, "
          f"threads available {torch.get_num_threads()}", flush=True)
    time_round_robin(("AUTOCAST", "AUTOCASTSUM"), a.model, a.batch, configs,
                     [tr.step for tr in trainers], a.reps, a.warmup, a.steps)


if __name__ == "__main__":
    main()
