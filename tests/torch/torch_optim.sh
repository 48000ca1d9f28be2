#!/bin/bash
# cdp's optimizers (SGD, AdamW) and learning-rate schedules (step, cosine,
# linear warm-up) against torch.optim.SGD / torch.optim.AdamW driven by a
# LambdaLR, over 40-50 updates of random gradients (tests/torch/torch_optim.py
# drives tests/lib/optim_probe).  Skips (77) without python3 + torch
# (tests/torch/torch_lib.sh).
. "$(dirname "$0")/torch_lib.sh"
torch_run torch_optim.py optim_probe
