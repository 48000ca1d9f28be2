#!/bin/bash
# Per-layer parity of the CPU backend's kernels with PyTorch: forward and
# backward of conv2d (grouped and depthwise too), batchnorm2d (training, evaluation, running
# statistics), relu, relu6, dropout, maxpool2d, global average pooling, linear (fused relu,
# relu-masked dx, accumulate), the residual add and softmax cross-entropy,
# on random inputs (tests/torch/torch_layers.py drives tests/lib/layer_probe).
#
# Skips (77) without /usr/bin/python3 + torch (CDP_TORCH_PYTHON overrides the
# interpreter; tests/torch/torch_lib.sh).  Environment (from the automake
# harness): top_builddir, top_srcdir.
. "$(dirname "$0")/torch_lib.sh"
torch_run torch_layers.py layer_probe
