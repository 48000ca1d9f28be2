#!/bin/bash
# ResNet parity with an independent PyTorch implementation of
# doc/reference.md section 3 (tests/torch/torch_model_reference.py: torchvision
# modules, torch.optim.SGD, nn.BatchNorm2d train-mode forward, running
# statistics once per step from the whole step's batch).
#
#   resnet20        B=4, K=3, L=3: N=2 on one rank, N=4 on two MPI ranks
#   resnet18-cifar  B=2, K=2, L=4: N=2 on two MPI ranks
#
# For every rule (dp, cdp-v1, cdp-v2) cdp_run trains from initial weights
# that PyTorch wrote (torchvision's own initialisation), on Fashion-MNIST in
# file order, and saves P(K); over all parameters and BatchNorm buffers
# together the weights must satisfy
#     rel        = ||cdp - torch|| / ||torch||        <= 1e-4
#     rel_change = ||cdp - torch|| / ||torch - init|| <= 1e-3
# and num_batches_tracked must equal K.  Negative controls (the cdp-v1
# reference against the dp run) must FAIL, so the test cannot pass vacuously.
#
# The stage split is cdp's: `cdp_run --plan` must print a line
#     stages: a,b,c blocks
# (blocks per stage; block 0 = stem, then every residual block of layer1,
# layer2, ..., the last block = head), which is passed to the reference.
#
# ReLU networks' gradients are discontinuous: float32 rounding flips a few
# ReLU inputs near 0 between two float32 implementations, and with micro-
# batches this small one pixel changes a conv gradient by ~1e-4..1e-3.  The
# seeds and the learning rate below are chosen (with --noise, which prints
# the reference's own float32-vs-float64 distance) so that this noise stays
# far below the tolerance; if a case fails, compare its RESULT with its
# NOISE line before suspecting cdp.
#
# Skips (77) without /usr/bin/python3 + torch + torchvision or without the
# data files (tests/torch/parity_lib.sh, which runs the cases).

. "$(dirname "$0")/parity_lib.sh"

# Seeds and lr from a calibration of the reference's float32-vs-float64
# distance (max over rules and N) and of the control's distance (cdp-v1 vs dp):
#   resnet20,       seed 7, lr 0.01: noise rel_change 6.9e-4 (dp N=2; cdp itself
#   within 3.9e-5 without oneDNN, 2.4e-5 with it), control 2.6e-2 (was seed 2: below)
#   resnet18-cifar, seed 7, lr 0.01: noise rel_change 7e-7 (seed 3: cdp float32 against
#   float64 1.7e-3 while the gradient at the same P(1) agrees to 1e-6: a ReLU near its
#   kink, chaos, not a bug)
# (other seeds reach 1e-3..8e-3 noise: one flipped ReLU input is enough).
# The seed must hold for every convolution path cdp may take, since each
# sums in its own order: with oneDNN (a build with it, the default policy)
# resnet20 seed 2 lands 1.6e-3..8.4e-3 (rel_change) from the same run
# without oneDNN, while the oneDNN layers match a float64 convolution to
# 1e-6 of the sum of |terms| in that very run (forward, dx and dw checked
# layer by layer): Fashion-MNIST's constant background makes hundreds of
# pixels share one pre-activation, so one rounding flips them together.
# cdp with oneDNN against without, K=3, max over dp/cdp-v1/cdp-v2 and N=2/4:
# seed 1 5.6e-5, 2 8.4e-3, 3 1.0e-3, 4 1.3e-3, 5 9.6e-4, 6 3.2e-3,
# 7 5.1e-5, 8 8.4e-3; seed 7 passes with oneDNN on and off.
sgd="--lr 0.01 --momentum 0.9 --weight-decay 5e-4"
write_init resnet20 7 "$tmp/resnet20-init.st"
parity resnet20 resnet20 "$tmp/resnet20-init.st" 4 3 3 "2:1 4:2" "$sgd"
write_init resnet18-cifar 7 "$tmp/resnet18-cifar-init.st"
parity resnet18-cifar resnet18-cifar "$tmp/resnet18-cifar-init.st" 2 2 4 "2:2" "$sgd"

load_test resnet20 "--workers 2 --batch 32 --steps 80 --lr 0.02 --rule cdp-v2"

finish "cdp_run's ResNets match the PyTorch reference for dp, cdp-v1, cdp-v2"
