#!/bin/bash
# cdp's JPEG/PNG decoding and its RandomResizedCrop, flip, Resize and
# CenterCrop against PIL and torchvision on images of many kinds and shapes
# (tests/torch/torch_image_folder.py drives tests/lib/image_probe).
#
# Skips (77) without /usr/bin/python3 + torch (CDP_TORCH_PYTHON overrides the
# interpreter; tests/torch/torch_lib.sh).  Environment (from the automake
# harness): top_builddir, top_srcdir.
. "$(dirname "$0")/torch_lib.sh"
torch_run torch_image_folder.py image_probe
