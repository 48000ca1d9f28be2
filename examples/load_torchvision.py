#!/usr/bin/env python3
"""Loads a cdp weight file (safetensors) into torchvision's own module with
load_state_dict(strict=True) and evaluates it on the Fashion-MNIST test set.
Needs torch, torchvision and numpy (no safetensors package):

    python3 examples/load_torchvision.py weights.safetensors MODEL [DATA_DIR]

MODEL is cdp_run's --model: resnet18, resnet34, resnet50 and their -cifar
variants, or a ViT (vit-tiny, vit-b16, vit-b32, vit-l16,
vit:patch=P,dim=D,depth=K,heads=H,mlp=M).  torchvision has no resnet20/32/56:
tests/torch/torch_model_reference.py --evaluate builds those with the same names.
The only change made to torchvision's module is its first layer, to take
the data's channels (and, for -cifar, the paper's small-image stem).  An
MLP (mlp:...) is not torchvision's: examples/load_weights.py loads it."""
import struct, sys

MLP_HINT = "an MLP's weights load with examples/load_weights.py (plain torch, no torchvision)"


def die(msg):
    print(f"load_torchvision.py: error: {msg}", file=sys.stderr)
    sys.exit(1)


# before torch is imported: the right script named even where it is missing
if __name__ == "__main__" and len(sys.argv) > 2 and sys.argv[2].startswith("mlp:"):
    die(f"{sys.argv[2]}: torchvision has no MLP; {MLP_HINT}")

import numpy as np
import torch
import torchvision
from cdp_files import VIT_PRESETS, idx_read, st_read, vit_spec

RESNETS = ("resnet18", "resnet34", "resnet50")


def build(name, sd, image_size):
    if "fc0.weight" in sd:
        die(f"the file holds an MLP's tensors (fc0.weight), not {name}'s; {MLP_HINT}")
    try:
        vit = vit_spec(name)
    except ValueError as e:
        die(f"{e}")
    if vit:
        patch, dim, depth, heads, mlp = vit
        net = torchvision.models.VisionTransformer(image_size, patch, depth, heads, dim, mlp,
                                                   num_classes=sd["heads.head.weight"].shape[0])
        cin = sd["conv_proj.weight"].shape[1]
        net.conv_proj = torch.nn.Conv2d(cin, dim, patch, patch)
        return net
    base = name[:-len("-cifar")] if name.endswith("-cifar") else name
    if base not in RESNETS:
        die(f"{name}: not a torchvision model (one of {', '.join(RESNETS)}, "
            f"their -cifar variants, {', '.join(VIT_PRESETS)}, vit:...)")
    net = getattr(torchvision.models, base)(num_classes=sd["fc.weight"].shape[0])
    cin = sd["conv1.weight"].shape[1]
    if name.endswith("-cifar"):          # the paper's small-image stem
        net.conv1 = torch.nn.Conv2d(cin, 64, 3, 1, 1, bias=False)
        net.maxpool = torch.nn.Identity()
    else:
        net.conv1 = torch.nn.Conv2d(cin, 64, 7, 2, 3, bias=False)
    return net


def main():
    if len(sys.argv) not in (3, 4):
        die("usage: load_torchvision.py WEIGHTS.safetensors MODEL [DATA_DIR]")
    path, name = sys.argv[1], sys.argv[2]
    d = sys.argv[3] if len(sys.argv) > 3 else "/usr/share/datasets/fashion-mnist"
    try:
        sd = st_read(path)
        x = idx_read(f"{d}/t10k-images-idx3-ubyte.gz")[:, None]    # one channel
        y = torch.from_numpy(idx_read(f"{d}/t10k-labels-idx1-ubyte.gz").astype(np.int64))
    except (OSError, ValueError, KeyError, struct.error) as e:
        die(f"{e}")
    try:
        net = build(name, sd, x.shape[2])
    except KeyError as e:
        die(f"{path} has no tensor {e}: not a weight file of {name}")
    try:
        net.load_state_dict(sd, strict=True)
    except (RuntimeError, KeyError) as e:
        die(f"{path} does not load into torchvision's {name}: {' '.join(str(e).split())[:400]}")
    net.eval()
    # a copy in plain NCHW strides: numpy's C = 1 strides would read as
    # channels_last
    x = torch.tensor(x, dtype=torch.float32).contiguous() / 255.0
    right = 0
    with torch.no_grad():
        for a in range(0, len(y), 500):
            right += int((net(x[a:a + 500]).argmax(1) == y[a:a + 500]).sum())
    print(f"{name}: loads into torchvision (strict), test accuracy {right / len(y):.4f} "
          f"({right}/{len(y)})")


main()
