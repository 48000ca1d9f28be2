#!/usr/bin/python3
"""PyTorch's training step time of a ViT in float32 and under bf16 autocast
(bench/throughput/bf16_speed.sh's torch comparison).

The network is tests/torch/torch_model_reference.py's builder (torchvision's
VisionTransformer modules and names, as cdp_run --model vit-tiny), imported,
not copied.  A step is what a PyTorch user writes for mixed precision on the
CPU: the forward and the loss under torch.autocast("cpu",
dtype=torch.bfloat16), backward, torch.optim.SGD (lr 0.03, momentum 0.9, as
cdp_run's defaults), zero_grad.  Synthetic data (fixed random images and
labels), as cdp_run --data synthetic.

Configurations (--configs), PREC:tT:MKLDNN:
  PREC    fp32 | bf16 (autocast)
  tT      torch.set_num_threads(T)
  MKLDNN  on | off (torch.backends.mkldnn.enabled: autocast's bf16 Linear
          runs through oneDNN with it)
All configurations are measured round-robin in one process (--reps rounds;
--warmup untimed steps, then --steps timed steps each).

Output: per configuration and round
  TORCHREP model=M batch=B config=C rep=R step_s=S
(S: the median step time of the round), then per configuration
  TORCH model=M batch=B config=C step_s=MED min=A max=B
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "torch"))
from torch_model_reference import build_model  # noqa: E402
from torch_step import time_round_robin  # noqa: E402


def parse_config(text):
    p = text.split(":")
    if len(p) != 3 or p[0] not in ("fp32", "bf16") or not p[1].startswith("t") \
            or p[2] not in ("on", "off"):
        raise SystemExit(f"torch_vit_bf16.py: bad configuration '{text}' (fp32|bf16:tT:on|off)")
    return {"name": text, "bf16": p[0] == "bf16", "threads": int(p[1][1:]), "mkldnn": p[2] == "on"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="vit-tiny")
    ap.add_argument("--shape", default="1x28x28")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--configs", default="fp32:t2:on bf16:t1:on bf16:t2:on bf16:t2:off")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    shape = [int(v) for v in a.shape.lower().split("x")]
    configs = [parse_config(c) for c in a.configs.replace(",", " ").split()]
    torch.manual_seed(1)
    g = torch.Generator().manual_seed(1)
    x = torch.randn([a.batch] + shape, generator=g)
    y = torch.randint(0, a.classes, (a.batch,), generator=g)
    models = []
    for c in configs:
        torch.manual_seed(1)
        m = build_model(a.model, in_channels=shape[0], num_classes=a.classes, image_size=shape[2])
        m.train()
        models.append((m, torch.optim.SGD(m.parameters(), lr=0.03, momentum=0.9)))
    print(f"# torch {torch.__version__}, mkldnn {torch.backends.mkldnn.is_available()}, "
          f"bf16 autocast on the CPU", flush=True)
    loss_fn = torch.nn.CrossEntropyLoss()

    def stepper(c, m, opt):
        def step():
            with torch.backends.mkldnn.flags(enabled=c["mkldnn"]):
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=c["bf16"]):
                    loss = loss_fn(m(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad()
        return step

    time_round_robin(("TORCHREP", "TORCH"), a.model, a.batch, configs,
                     [stepper(c, m, opt) for c, (m, opt) in zip(configs, models)], a.reps,
                     a.warmup, a.steps)


if __name__ == "__main__":
    main()
