#!/usr/bin/python3
"""Independent PyTorch implementation of doc/reference.md section 3 for cdp's models.

It shares no code with cdp.  The networks are torchvision's modules with
torchvision's state_dict names: the ResNets (for resnet20/32/56 a small
ResNet-like module built from torchvision's BasicBlock) and the Vision
Transformers (torchvision's VisionTransformer, image size from the data,
conv_proj replaced by a Conv2d with the data's channels under the same name
and torchvision's initialisation).  It evaluates

    P_l(0)   = --init-weights
    P_l(c+1) = OPT(P_l(c), G_l(c))        (torch.optim.SGD or torch.optim.AdamW,
                                           one parameter group per stage)
    P_l(-1)  = P_l(0)
    G_l(c)   = (1/N) * sum_{i=0..N-1, in this order} dLoss_i/dtheta_l
               with worker i of step c at parameters P_l(c - lag(i, l))

for the rules dp, cdp-v1 and cdp-v2, and returns P(K) after K steps (the drain
applies every gradient), parameters and BatchNorm buffers.  The update c is
one optimizer.step() with the mean gradient of step c, so AdamW's bias
correction uses the update count c + 1; the optimizer state is per stage.
In the forward pass BatchNorm normalises each micro-batch with its own
statistics (nn.BatchNorm2d in train mode); the running statistics are
updated once per step c, with momentum 0.1, from the mean and the unbiased
variance over all N*B*H*W values of step c at that layer (per-worker count,
mean and M2 in float64, combined in worker order with Chan et al.'s pairwise
formula).  The ViTs have no BatchNorm (LayerNorm eps 1e-6, no dropout).

Stages are contiguous runs of blocks.  ResNets: block 0 is the stem (conv1,
bn1, relu, maxpool), then every BasicBlock / Bottleneck of layer1, layer2,
... in order, and the last block is the head (avgpool, flatten, fc).  ViTs:
block 0 is the embedding (conv_proj, class_token, encoder.pos_embedding),
then one block per encoder layer (encoder.layers.encoder_layer_j), and the
last block is the head (encoder.ln, x[:, 0], heads.head).  --stages-split
a,b,c gives the number of blocks per stage (cdp's FLOPs-balanced split; the
text "stages: a,b,c blocks" that cdp_run --plan prints is accepted as it is).

Models: resnet20/32/56/110, resnet18/34/50/101/152 and their -cifar variants,
vit:patch=P,dim=D,depth=K,heads=H,mlp=M and the presets vit-tiny, vit-b16,
vit-b32, vit-l16 (cdp's); or FILE.json, a description examples/export_model.py
wrote, with --module PACKAGE.MODULE:FUNCTION, the function it exported: the
module that function returns (its nn.BatchNorm2d as below), the blocks the
file's.

Data: Fashion-MNIST IDX files, --no-shuffle semantics: step k takes samples
[k*N*B, (k+1)*N*B) in file order (wrapping at the end of the training set),
worker i the slice [i*B, (i+1)*B); pixels = byte / 255, 1x28x28.  A
--data-dir holding data_batch_1.bin: CIFAR-10's binary files instead
(data_batch_1..5.bin in order, 3x32x32).

Usage (see --help):
    torch_model_reference.py --write-init W.st --model resnet20 --seed 7
    torch_model_reference.py --model resnet20 --init-weights W.st \\
        --batch 4 --steps 3 --lr 0.05 --momentum 0.9 --weight-decay 5e-4 \\
        --stages-split 4,4,3 --case dp:2:cdp-dp.st --case cdp-v2:4:cdp-v2.st
    torch_model_reference.py --model vit:patch=7,dim=32,depth=3,heads=2,mlp=64 \\
        --init-weights W.st --optimizer adamw --lr 1e-3 --betas 0.9,0.999 \\
        --eps 1e-8 --weight-decay 0.01 --stages-split 2,1,2 --case cdp-v1:4:v1.st
    torch_model_reference.py --evaluate cdp.st --model resnet20
    torch_model_reference.py --list-blocks --model resnet18-cifar
    torch_model_reference.py --self-test

Each comparison prints
    RESULT rule=R N=n rel=X rel_change=Y params_change=Z ok|FAIL
with, over all parameters and float buffers together (num_batches_tracked
must match exactly), rel = ||cdp - ref|| / ||ref|| (<= --tol, 1e-4) and
rel_change = ||cdp - ref|| / ||ref - init|| (<= --tol-change, 1e-3); and
params_change, rel_change over the learned parameters alone (without the
BatchNorm running statistics), <= 10 x --tol-change.

--noise adds, per case, "NOISE rule=R N=n rel=X rel_change=Y": the distance
of this float32 reference from the same computation in float64.  ReLU
networks' gradients are discontinuous, so float32 rounding may flip a ReLU
input near 0 and move a small micro-batch's gradient by 1e-4..1e-3; AdamW
divides every gradient by its own magnitude, so a gradient that is
rounding noise (the key projection's bias: softmax ignores a shift of every
score of a query, so its gradient is exactly 0 but for rounding) moves its
weight by up to lr per update unless --eps dominates that noise.  NOISE
tells such a trajectory from a real mismatch; --tol-noise F also passes a
case within F times its own NOISE (a trajectory chaotic in float32).
Cases that differ only in the file (the same rule and N) train once.

Exit status: 0 ok, 1 some comparison above tolerance (or a self-test
failed), 2 usage or file error.
"""
import argparse
import copy
import importlib
import json
import math
import os
import re
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    import torchvision
    from torchvision.models.resnet import BasicBlock
    from torchvision.models.vision_transformer import VisionTransformer
except ImportError as e:  # the shell test skips before this
    print(f"torch_model_reference: torchvision is needed: {e}", file=sys.stderr)
    sys.exit(2)

# this folder's modules (on sys.path as the script's own, or put there by
# the benches that import this file)
import torch_reference  # noqa: E402  (puts ../examples on sys.path)
from cdp_files import VIT_FORMAT, VIT_PRESETS, idx_path, idx_read, st_read, st_write  # noqa: E402
import cdp_files  # noqa: E402

PROG = "torch_model_reference"
RULES = ("dp", "cdp-v1", "cdp-v2")
BN_MOMENTUM = 0.1


class UsageError(Exception):
    pass


# ----------------------------------------------------------------- data


def load_cifar10(data_dir, train):
    """CIFAR-10's binary batches: records of a label byte and 3x32x32 bytes"""
    names = [f"data_batch_{k}.bin" for k in range(1, 6)] if train else ["test_batch.bin"]
    raw = np.concatenate([np.fromfile(os.path.join(data_dir, n), dtype=np.uint8)
                          for n in names]).reshape(-1, 1 + 3 * 32 * 32)
    return raw[:, 1:].reshape(-1, 3, 32, 32).copy(), raw[:, 0].astype(np.int64)


def load_split(data_dir, train):
    """(images uint8 [n, C, H, W], labels int64 [n]) of Fashion-MNIST (or
    CIFAR-10's files)."""
    if os.path.exists(os.path.join(data_dir, "data_batch_1.bin")):
        return load_cifar10(data_dir, train)
    pre = "train" if train else "t10k"
    x = idx_read(idx_path(data_dir, f"{pre}-images-idx3-ubyte"))
    y = idx_read(idx_path(data_dir, f"{pre}-labels-idx1-ubyte"))
    if x.ndim == 3:
        x = x[:, None, :, :]
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"{data_dir}: {x.shape[0]} images but {y.shape[0]} labels")
    return np.array(x), y.astype(np.int64)      # writable copies


# ----------------------------------------------------------------- models


class DeferredBN(nn.BatchNorm2d):
    """nn.BatchNorm2d whose train-mode forward normalises with the batch's own
    statistics but leaves the running statistics alone; it records (count,
    mean, M2) per channel of every forward in float64 instead.  Eval mode is
    nn.BatchNorm2d's.  Same parameters, buffers and state_dict names."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.stats = []

    def forward(self, x):
        if not self.training:
            return super().forward(x)
        with torch.no_grad():
            x64 = x.detach().double()
            mean = x64.mean(dim=(0, 2, 3))
            m2 = ((x64 - mean[None, :, None, None]) ** 2).sum(dim=(0, 2, 3))
            self.stats.append((x.shape[0] * x.shape[2] * x.shape[3], mean, m2))
        return F.batch_norm(x, None, None, self.weight, self.bias, True, 0.0, self.eps)


class CifarResNet(nn.Module):
    """He et al. 2016's CIFAR ResNet (6n+2 layers) with torchvision's names:
    conv1 3x3/1 16 + bn1 + relu, layer1..3 of n BasicBlocks (16, 32, 64
    channels, stride 2 at the first block of layer2 and layer3, 1x1 conv +
    BN projection where the shape changes), global average pool, fc."""

    def __init__(self, n, num_classes=10, in_channels=3, norm_layer=nn.BatchNorm2d):
        super().__init__()
        self._norm = norm_layer
        self.inplanes = 16
        self.conv1 = nn.Conv2d(in_channels, 16, 3, 1, 1, bias=False)
        self.bn1 = norm_layer(16)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = self._make_layer(16, n, 1)
        self.layer2 = self._make_layer(32, n, 2)
        self.layer3 = self._make_layer(64, n, 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(64, num_classes)
        # torchvision's ResNet initialisation
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def _make_layer(self, planes, blocks, stride):
        down = None
        if stride != 1 or self.inplanes != planes:
            down = nn.Sequential(
                nn.Conv2d(self.inplanes, planes, 1, stride, bias=False),
                self._norm(planes))
        layers = [BasicBlock(self.inplanes, planes, stride, down, norm_layer=self._norm)]
        self.inplanes = planes
        for _ in range(1, blocks):
            layers.append(BasicBlock(planes, planes, norm_layer=self._norm))
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


CIFAR_DEPTH = {"resnet20": 3, "resnet32": 5, "resnet56": 9, "resnet110": 18}
TV_NAMES = ("resnet18", "resnet34", "resnet50", "resnet101", "resnet152")
RESNETS = (list(CIFAR_DEPTH) + [n + "-cifar" for n in TV_NAMES] + list(TV_NAMES))
# the ViT presets (src/models/vit.c's) and vit:... come from cdp_files
MODELS = RESNETS + list(VIT_PRESETS) + [VIT_FORMAT]


def vit_spec(name):
    """(patch, dim, depth, heads, mlp) of a ViT name, None for other models."""
    try:
        return cdp_files.vit_spec(name)
    except ValueError as e:
        raise UsageError(f"--model {e}") from e


def parse_betas(text):
    """'B1,B2' -> (B1, B2), each in [0, 1) (argparse type)."""
    try:
        b = tuple(float(v) for v in text.split(","))
    except ValueError:
        b = ()
    if len(b) != 2 or not all(0.0 <= v < 1.0 for v in b):
        raise argparse.ArgumentTypeError(f"{text!r}: expected B1,B2 in [0, 1), e.g. 0.9,0.999")
    return b


def check_model(name):
    if not name.endswith(".json") and name not in RESNETS and vit_spec(name) is None:
        raise UsageError(f"unknown --model {name} (one of {', '.join(MODELS)})")


def build_vit(name, in_channels, num_classes, image_size):
    """torchvision's VisionTransformer, conv_proj taking in_channels with
    torchvision's initialisation of it (truncated normal, std 1/sqrt(fan_in),
    zero bias)."""
    patch, dim, depth, heads, mlp = vit_spec(name)
    if image_size % patch:
        raise UsageError(f"--model {name}: {image_size}x{image_size} images do not split "
                         f"into {patch}x{patch} patches")
    net = VisionTransformer(image_size, patch, depth, heads, dim, mlp, num_classes=num_classes)
    if in_channels != 3:
        net.conv_proj = nn.Conv2d(in_channels, dim, patch, patch)
        nn.init.trunc_normal_(net.conv_proj.weight,
                              std=math.sqrt(1.0 / (in_channels * patch * patch)))
        nn.init.zeros_(net.conv_proj.bias)
    return net


def build_exported(path, module, norm_layer):
    """The module --module's function returns, for the description at path
    (examples/export_model.py's), every nn.BatchNorm2d made a norm_layer of
    the same size; its blocks (blocks_of) the file's."""
    if not module or ":" not in module:
        raise UsageError(f"--model {path}: --module PACKAGE.MODULE:FUNCTION is required")
    mod, fn = module.split(":", 1)
    net = getattr(importlib.import_module(mod), fn)()
    for name, m in list(net.named_modules()):
        if type(m) is nn.BatchNorm2d and norm_layer is not nn.BatchNorm2d:
            parent, _, leaf = name.rpartition(".")
            setattr(net.get_submodule(parent), leaf, norm_layer(m.num_features))
    with open(path) as f:
        desc = json.load(f)
    blocks = []
    for k, layers in enumerate(desc["blocks"]):
        prefixes = []
        for ly in layers:
            if ly["kind"] == "class_token":
                prefixes.append("class_token")
            elif ly["kind"] == "pos_embed":
                prefixes.append(ly["name"] + ".pos_embedding")
            elif "name" in ly:
                prefixes.append(ly["name"] + ".")
        blocks.append((f"block {k}", prefixes))
    net.cdp_blocks = blocks
    return net


def build_model(name, in_channels=1, num_classes=10, norm_layer=nn.BatchNorm2d, image_size=28,
                module=None):
    """The module with its own (torchvision's) initialisation drawn from
    torch's global generator.  norm_layer: the ResNets' (ViTs have LayerNorm);
    image_size: the ViTs' (ResNets take any); module: FILE.json's function."""
    if name.endswith(".json"):
        return build_exported(name, module, norm_layer)
    if vit_spec(name) is not None:
        return build_vit(name, in_channels, num_classes, image_size)
    if name in CIFAR_DEPTH:
        return CifarResNet(CIFAR_DEPTH[name], num_classes, in_channels, norm_layer)
    base = name[:-len("-cifar")] if name.endswith("-cifar") else name
    if base not in TV_NAMES:
        raise UsageError(f"unknown --model {name} (one of {', '.join(MODELS)})")
    net = getattr(torchvision.models, base)(num_classes=num_classes, norm_layer=norm_layer)
    if name.endswith("-cifar"):      # the small-image stem of the paper's code
        net.conv1 = nn.Conv2d(in_channels, 64, 3, 1, 1, bias=False)
        net.maxpool = nn.Identity()
    elif in_channels != 3:
        net.conv1 = nn.Conv2d(in_channels, 64, 7, 2, 3, bias=False)
    if name.endswith("-cifar") or in_channels != 3:
        nn.init.kaiming_normal_(net.conv1.weight, mode="fan_out", nonlinearity="relu")
    return net


def blocks_of(net):
    """[(block name, [state_dict prefixes])]: cdp's blocks, in order."""
    if hasattr(net, "cdp_blocks"):
        return net.cdp_blocks
    if isinstance(net, VisionTransformer):
        blocks = [("embed", ["conv_proj.", "class_token", "encoder.pos_embedding"])]
        blocks += [(f"encoder_layer_{j}", [f"encoder.layers.encoder_layer_{j}."])
                   for j in range(len(net.encoder.layers))]
        blocks.append(("head", ["encoder.ln.", "heads."]))
        return blocks
    blocks = [("stem", ["conv1.", "bn1."])]
    g = 1
    while hasattr(net, f"layer{g}"):
        for j in range(len(getattr(net, f"layer{g}"))):
            blocks.append((f"layer{g}.{j}", [f"layer{g}.{j}."]))
        g += 1
    blocks.append(("head", ["fc."]))
    return blocks


def block_index(blocks, key):
    for b, (_, prefixes) in enumerate(blocks):
        if any(key.startswith(p) for p in prefixes):
            return b
    raise ValueError(f"{key}: belongs to no block")


def parse_split(text, nblocks, nstages=None):
    """'a,b,c' or cdp's 'stages: a,b,c blocks' -> [a, b, c]."""
    if text is None:
        if nstages in (None, 1):
            return [nblocks]
        raise UsageError("--stages-split is required (cdp decides the split; "
                         "pass the a,b,c of cdp_run --plan's 'stages: a,b,c blocks' line)")
    m = re.search(r"(\d+(?:\s*,\s*\d+)*)", text.split("stages:", 1)[-1])
    if not m:
        raise UsageError(f"--stages-split {text!r}: expected a,b,c (blocks per stage)")
    split = [int(s) for s in m.group(1).split(",")]
    if any(s < 1 for s in split) or sum(split) != nblocks:
        raise UsageError(f"--stages-split {text!r} does not partition the model's "
                         f"{nblocks} blocks into non-empty stages")
    if nstages is not None and len(split) != nstages:
        raise UsageError(f"--stages-split {text!r} has {len(split)} stages, --stages {nstages}")
    return split


# ----------------------------------------------------------------- rules


def lag_table(rule, n, nstages):
    """DESIGN section 4's lag table, as the MLP reference writes it out."""
    if rule not in RULES:
        raise UsageError(f"unknown rule {rule}")
    return torch_reference.lag_table(rule, n, nstages)


def chan_combine(stats):
    """[(count, mean, M2)] in worker order -> (count, mean, M2), float64."""
    n, mean, m2 = stats[0]
    for nb, mb, m2b in stats[1:]:
        tot = n + nb
        delta = mb - mean
        mean = mean + delta * (nb / tot)
        m2 = m2 + m2b + delta * delta * (n * nb / tot)
        n = tot
    return n, mean, m2


# ----------------------------------------------------------------- training


class Setup:
    """Model, data, stage split and hyperparameters of one reference run.
    optimizer "sgd" uses momentum and wd (L2 added to the gradient);
    "adamw" uses betas, eps and wd (decoupled)."""

    def __init__(self, model, init, split, xs, ys, batch, steps, lr, momentum, wd,
                 dtype=torch.float32, optimizer="sgd", betas=(0.9, 0.999), eps=1e-8,
                 precision="fp32", error=None):
        self.model, self.init, self.split = model, init, split
        self.xs, self.ys = xs, ys
        self.batch, self.steps = batch, steps
        self.lr, self.momentum, self.wd = lr, momentum, wd
        self.dtype = dtype
        self.optimizer, self.betas, self.eps = optimizer, tuple(betas), eps
        # "bf16": the forward and the loss under torch.autocast("cpu", bfloat16),
        # float32 master weights, gradients and optimizer (torch's own mixed
        # precision); error: a deliberate misstep for negative controls
        self.precision, self.error = precision, error
        self.module = None                     # FILE.json models: --module

    def with_precision(self, precision, error=None):
        t = copy.copy(self)
        t.precision, t.error = precision, error
        return t

    def with_dtype(self, dtype):
        t = copy.copy(self)
        t.dtype = dtype
        return t

    def make_optimizer(self, params_or_groups):
        if self.optimizer == "sgd":
            return torch.optim.SGD(params_or_groups, lr=self.lr, momentum=self.momentum,
                                   dampening=0.0, weight_decay=self.wd, nesterov=False)
        if self.optimizer == "adamw":
            return torch.optim.AdamW(params_or_groups, lr=self.lr, betas=self.betas,
                                     eps=self.eps, weight_decay=self.wd, amsgrad=False)
        raise UsageError(f"unknown optimizer {self.optimizer} (sgd or adamw)")

    def describe(self):
        if self.optimizer == "adamw":
            return (f"adamw lr {self.lr:g} betas {self.betas[0]:g},{self.betas[1]:g} "
                    f"eps {self.eps:g} wd {self.wd:g}")
        return f"sgd lr {self.lr:g} momentum {self.momentum:g} wd {self.wd:g}"

    def net(self, norm_layer=nn.BatchNorm2d):
        """The module for these weights and data, in self.dtype."""
        torch.manual_seed(0)                 # the module's own init is overwritten
        _, c, h, w = self.xs.shape
        if self.model.endswith(".json"):
            return build_exported(self.model, self.module, norm_layer).to(self.dtype)
        if c != in_channels_of(self.init):
            raise ValueError(f"the initial weights take {in_channels_of(self.init)} channels, "
                             f"the data have {c}")
        if vit_spec(self.model) is not None and h != w:
            raise ValueError(f"{self.model}: torchvision's ViT takes square images, not {h}x{w}")
        return build_model(self.model, c, norm_layer=norm_layer, image_size=h).to(self.dtype)


def pixels(images, dtype):
    """uint8 [B, C, H, W] -> byte / 255 in plain NCHW strides.  A C = 1 array
    from numpy may come with strides such as (784, 1, 28, 1), which torch
    reads as channels_last; torch 1.13's float32 channels-last BatchNorm on
    the CPU is then off by ~1e-5 in the forward and ~5e-3 in the gradients,
    far above the contiguous kernels' ~1e-7."""
    x = torch.empty(images.shape, dtype=dtype)
    x.copy_(torch.from_numpy(np.ascontiguousarray(images)))
    return x / 255.0


def micro_batch(s, k, n, i):
    base = k * n * s.batch + i * s.batch
    idx = (base + np.arange(s.batch)) % s.xs.shape[0]
    return pixels(s.xs[idx], s.dtype), torch.from_numpy(s.ys[idx])


def as_state(init, net, dtype):
    """init converted to the module's dtypes (float -> dtype, counters -> int64)."""
    out = {}
    for key, ref in net.state_dict().items():
        if key not in init:
            raise ValueError(f"{key}: missing in the initial weights")
        t = init[key]
        if tuple(t.shape) != tuple(ref.shape):
            raise ValueError(f"{key}: shape {tuple(t.shape)} in the initial weights, "
                             f"the model has {tuple(ref.shape)}")
        out[key] = t.to(torch.int64) if key.endswith("num_batches_tracked") else t.to(dtype)
    extra = sorted(set(init) - set(out))
    if extra:
        raise ValueError(f"the initial weights have names the model lacks: {', '.join(extra[:5])}")
    return out


def in_channels_of(init):
    for key in ("conv1.weight", "conv_proj.weight"):
        if key in init:
            return int(init[key].shape[1])
    raise ValueError("no conv1.weight (ResNets) or conv_proj.weight (ViTs) in the weights file")


def train(s, rule, n):
    """The reference of doc/reference.md section 3: returns P(K), the state_dict
    (parameters and BatchNorm buffers) after the K updates."""
    net = s.net(norm_layer=DeferredBN)
    state = as_state(s.init, net, s.dtype)
    net.load_state_dict(state, strict=True)
    net.train()
    blocks = blocks_of(net)
    stage_of_block = [l for l, cnt in enumerate(s.split) for _ in range(cnt)]
    if len(stage_of_block) != len(blocks):
        raise UsageError(f"split {s.split} covers {len(stage_of_block)} blocks, "
                         f"{s.model} has {len(blocks)}")
    stage = {key: stage_of_block[block_index(blocks, key)] for key in state}
    nst = len(s.split)

    pnames = [name for name, _ in net.named_parameters()]
    live = dict(net.named_parameters())
    cur = {name: state[name].clone() for name in pnames}           # P(c)
    prev = {name: t.clone() for name, t in cur.items()}             # P(c-1)
    groups = [{"params": [cur[p] for p in pnames if stage[p] == l]} for l in range(nst)]
    groups = [g for g in groups if g["params"]]
    opt = s.make_optimizer(groups)
    bns = [(name, mod) for name, mod in net.named_modules() if isinstance(mod, DeferredBN)]
    buffers = {key: state[key].clone() for key in state if key not in cur}
    lag = lag_table(rule, n, nst)
    inv_n = torch.tensor(1.0 / n, dtype=s.dtype)

    for k in range(s.steps):
        for _, mod in bns:
            mod.stats = []
        gsum = {}
        for i in range(n):
            with torch.no_grad():           # the mixed parameter set of worker i
                for p in pnames:
                    src = prev if lag[i][stage[p]] == 1 else cur
                    live[p].copy_(src[p])
                    live[p].grad = None
            x, y = micro_batch(s, k, n, i)
            if s.precision == "bf16":
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    logits = net(x)
                    if s.error == "logits":     # the loss's input kept in bfloat16
                        loss = F.cross_entropy(logits.bfloat16(), y, reduction="mean")
                    else:                       # autocast's float32 list
                        loss = F.cross_entropy(logits, y, reduction="mean")
            else:
                loss = F.cross_entropy(net(x), y, reduction="mean")
            loss.backward()
            for p in pnames:
                g = live[p].grad
                gsum[p] = g.clone() if i == 0 else gsum[p] + g
                if s.error == "grad-sum":       # the reduction in bfloat16
                    gsum[p] = gsum[p].bfloat16().float()
        # update k of every stage: P(k+1) = OPT(P(k), G(k)) (AdamW: step count k+1),
        # running statistics
        prev = {p: cur[p].clone() for p in pnames}
        for p in pnames:
            cur[p].grad = gsum[p] * inv_n
        opt.step()
        if s.error == "master":                 # bfloat16 master weights
            with torch.no_grad():
                for p in pnames:
                    cur[p].copy_(cur[p].bfloat16().float())
        for name, mod in bns:
            assert len(mod.stats) == n, (name, len(mod.stats))
            cnt, mean, m2 = chan_combine(mod.stats)
            var = m2 / (cnt - 1)
            for key, val in (("running_mean", mean), ("running_var", var)):
                r = buffers[f"{name}.{key}"]
                buffers[f"{name}.{key}"] = ((1 - BN_MOMENTUM) * r.double()
                                            + BN_MOMENTUM * val).to(r.dtype)
            buffers[f"{name}.num_batches_tracked"] += 1
    return {key: (cur[key] if key in cur else buffers[key]).detach().clone() for key in state}


# ----------------------------------------------------------------- compare


def is_counter(key):
    return key.endswith("num_batches_tracked")


PARAMS_CHANGE_FACTOR = 10


def is_running_stat(key):
    return key.endswith("running_mean") or key.endswith("running_var")


def compare(mine, init, other, verbose=False):
    """(ok_names, rel, rel_change, rel_change_params, messages) of `other`
    against `mine`; rel_change_params leaves out the BatchNorm running
    statistics, which can make up most of a few steps' change and would
    hide an error confined to the learned parameters."""
    msgs = []
    ok = True
    missing = [k for k in mine if k not in other]
    extra = [k for k in other if k not in mine]
    if missing:
        msgs.append(f"missing in cdp's file: {', '.join(missing[:8])}"
                    + (f" (+{len(missing) - 8})" if len(missing) > 8 else ""))
        ok = False
    if extra:
        msgs.append(f"not in the model: {', '.join(extra[:8])}"
                    + (f" (+{len(extra) - 8})" if len(extra) > 8 else ""))
        ok = False
    num = den = chg = num_p = chg_p = 0.0
    per = []
    for key, ref in mine.items():
        if key not in other:
            continue
        got = other[key]
        if tuple(got.shape) != tuple(ref.shape):
            msgs.append(f"{key}: shape {tuple(got.shape)}, expected {tuple(ref.shape)}")
            ok = False
            continue
        if is_counter(key):
            g = got.double()
            if not torch.equal(g, g.round()) or int(g.item()) != int(ref.item()):
                msgs.append(f"{key}: {got.item()}, expected {int(ref.item())}")
                ok = False
            continue
        r = ref.double()
        d = got.double() - r
        dn = float((d * d).sum())
        num += dn
        den += float((r * r).sum())
        dc = float(((r - init[key].double()) ** 2).sum())
        chg += dc
        if not is_running_stat(key):
            num_p += dn
            chg_p += dc
        rn = float(r.norm())
        per.append((math.sqrt(dn) / rn if rn > 0 else math.sqrt(dn), key, math.sqrt(dn), rn))
    rel = math.sqrt(num / den) if den > 0 else math.sqrt(num)
    def over_change(n, c):
        if c > 0:
            return math.sqrt(n / c)
        return 0.0 if n == 0 else math.inf
    per.sort(reverse=True)
    for r, key, dn, rn in (per if verbose else per[:4]):
        msgs.append(f"{key:36s} ||a-b|| {dn:.3e}  ||b|| {rn:.3e}  rel {r:.3e}")
    return ok, rel, over_change(num, chg), over_change(num_p, chg_p), msgs


def report(rule, n, path, mine, init, tol, tol_change, verbose):
    try:
        other = st_read(path)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: {e}") from e
    ok, rel, rel_change, rel_change_params, msgs = compare(mine, init, other, verbose)
    # the learned parameters alone, to 10x the bound: their share of a few
    # steps' change is small where BatchNorm's running statistics move most,
    # and float32 noise then reaches 4.2e-3 of it (mobilenet_v2 and resnet18
    # at small widths, dp N=4, against PyTorch); a wrong learning rate or
    # gradient puts it at 3e-2 and beyond (the negative controls)
    good = (ok and rel <= tol and rel_change <= tol_change
            and rel_change_params <= PARAMS_CHANGE_FACTOR * tol_change)
    for m in msgs:                 # problems, then the worst tensors
        if verbose or not good or "||a-b||" not in m:
            print(f"  {m}")
    print(f"RESULT rule={rule} N={n} rel={rel:.3e} rel_change={rel_change:.3e} "
          f"params_change={rel_change_params:.3e} {'ok' if good else 'FAIL'}", flush=True)
    return good


# ----------------------------------------------------------------- evaluate


def evaluate(model, path, data_dir, limit=0, batch=500):
    w = st_read(path)
    c = in_channels_of(w)
    xs, ys = load_split(data_dir, train=False)
    if limit:
        xs, ys = xs[:limit], ys[:limit]
    if xs.shape[1] != c:
        raise ValueError(f"{path}: the first layer takes {c} channels, "
                         f"the data have {xs.shape[1]}")
    net = build_model(model, c, image_size=xs.shape[2])
    sd = {k: (v.to(torch.int64) if is_counter(k) else v.float()) for k, v in w.items()}
    try:
        net.load_state_dict(sd, strict=True)
    except RuntimeError as e:
        raise ValueError(f"{path} does not load into torchvision's {model}: "
                         f"{str(e)[:600]}") from e
    net.eval()
    right = 0
    with torch.no_grad():
        for a in range(0, xs.shape[0], batch):
            x = pixels(xs[a:a + batch], torch.float32)
            right += int((net(x).argmax(1) == torch.from_numpy(ys[a:a + batch])).sum())
    acc = right / xs.shape[0]
    print(f"evaluate: {path} loads into torchvision's {model} (strict); "
          f"test accuracy {acc:.4f} ({right}/{xs.shape[0]})")
    return acc


# ----------------------------------------------------------------- init


def write_init(path, model, seed, in_channels, image_size=28, head_init="zeros"):
    sd = write_init_mem(model, seed, in_channels, image_size, head_init)
    st_write(path, sd, {"format": "pt", "producer": PROG + ".py",
                        "model": model, "seed": seed})
    return sd


def write_init_mem(model, seed, in_channels=1, image_size=28, head_init="zeros"):
    """torchvision's own initialisation of --model, seeded; counters int64 0.
    head_init "linear" (ViTs): heads.head as nn.Linear's default instead of
    torchvision's zeros, so that every block has a gradient from step 0."""
    torch.manual_seed(seed)
    net = build_model(model, in_channels, image_size=image_size)
    if head_init == "linear":
        if not isinstance(net, VisionTransformer):
            raise UsageError("--head-init linear: ViTs only (the ResNets' fc is nn.Linear's)")
        net.heads.head.reset_parameters()
    elif head_init != "zeros":
        raise UsageError(f"--head-init {head_init}: zeros or linear")
    sd = {k: v.detach().clone() for k, v in net.state_dict().items()}
    for k in sd:
        if is_counter(k):
            sd[k] = torch.tensor(0, dtype=torch.int64)
    return sd


def list_blocks(model, in_channels, image_size=28):
    net = build_model(model, in_channels, image_size=image_size)
    blocks = blocks_of(net)
    sd = net.state_dict()
    print(f"{model}: {len(blocks)} blocks (stages are contiguous runs of them)")
    for b, (name, prefixes) in enumerate(blocks):
        n = sum(t.numel() for k, t in net.named_parameters()
                if any(k.startswith(p) for p in prefixes))
        nb = sum(1 for k in sd if any(k.startswith(p) for p in prefixes))
        print(f"  block {b:3d} {name:16s} {n:9d} parameters, {nb} state_dict entries")


# ----------------------------------------------------------------- self-test


def plain_training(s, n, standard_bn):
    """dp by ordinary PyTorch: a gradient accumulation loop over the N
    micro-batches of each step (losses backpropagated one by one, .grad
    summed by autograd in worker order, then times 1/N), one optimizer.
    With standard_bn, nn.BatchNorm2d updates its running statistics in every
    forward (so only with n = 1 do the buffers mean the same)."""
    net = s.net(norm_layer=nn.BatchNorm2d if standard_bn else DeferredBN)
    net.load_state_dict(as_state(s.init, net, s.dtype), strict=True)
    net.train()
    opt = s.make_optimizer(net.parameters())
    inv_n = torch.tensor(1.0 / n, dtype=s.dtype)
    for k in range(s.steps):
        opt.zero_grad(set_to_none=True)
        for i in range(n):
            x, y = micro_batch(s, k, n, i)
            F.cross_entropy(net(x), y).backward()
        with torch.no_grad():
            for p in net.parameters():
                p.grad.mul_(inv_n)
        opt.step()
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


def rel_diff(a, b, keys=None, init=None):
    keys = [k for k in (keys or a) if not is_counter(k)]
    num = sum(float(((a[k].double() - b[k].double()) ** 2).sum()) for k in keys)
    den = sum(float((b[k].double() ** 2).sum()) for k in keys)
    r = math.sqrt(num / den) if den else math.sqrt(num)
    if init is None:
        return r
    chg = sum(float(((b[k].double() - init[k].double()) ** 2).sum()) for k in keys)
    return r, (math.sqrt(num / chg) if chg else math.inf)


VIT_SMALL = "vit:patch=7,dim=32,depth=3,heads=2,mlp=64"      # tests/torch/mpi_vit_parity.sh's


def vit_self_test(setup, check, tol, tol_change):
    """The ViT half of --self-test (the configurations of tests/torch/mpi_vit_parity.sh)."""
    print(f"self-test: {VIT_SMALL}, B=4, K=3, split 2,1,2")
    t0 = time.time()
    check("ViT presets and blocks", vit_spec("vit-b16") == (16, 768, 12, 12, 3072)
          and [n for n, _ in blocks_of(build_model(VIT_SMALL, 1))]
          == ["embed", "encoder_layer_0", "encoder_layer_1", "encoder_layer_2", "head"],
          "vit-b16 = patch 16, dim 768, depth 12, heads 12, mlp 3072; embed, 3 layers, head")
    net = build_model(VIT_SMALL, 1)
    pstd = float(net.conv_proj.weight.std())
    check("conv_proj on 1 channel keeps torchvision's init (std 1/7, zero bias), head zero",
          abs(pstd - 1 / 7) < 0.02 and not net.conv_proj.bias.any()
          and not net.heads.head.weight.any(), f"std {pstd:.4f}")
    for opt, lr, wd, head in (("sgd", 0.05, 5e-4, "linear"), ("adamw", 1e-3, 0.01, "zeros")):
        s = setup(VIT_SMALL, 4, 3, "2,1,2", seed=1, lr=lr, optimizer=opt, wd=wd, head_init=head)
        tag = f"vit {opt}"
        a, b = train(s, "dp", 1), train(s, "cdp-v2", 1)
        check(f"(a) {tag} N=1: cdp-v2 equals dp bitwise",
              all(torch.equal(a[k], b[k]) for k in a), "lag 0 everywhere")
        dp4 = train(s, "dp", 4)
        r = rel_diff(dp4, plain_training(s, 4, standard_bn=True))
        check(f"(c) {tag} N=4 dp equals a gradient accumulation loop with one {opt} optimizer",
              r < 1e-6, f"rel {r:.3e}")
        v1, v2 = train(s, "cdp-v1", 4), train(s, "cdp-v2", 4)
        rc1 = rel_diff(v1, dp4, init=s.init)[1]
        rc2 = min(rel_diff(v2, dp4, init=s.init)[1], rel_diff(v2, v1, init=s.init)[1])
        check(f"(d) {tag} N=4: cdp-v1 differs from dp, cdp-v2 from both",
              rc1 > 10 * tol_change and rc2 > 10 * tol_change,
              f"rel_change {rc1:.3e}, {rc2:.3e}")
        sd = s.with_dtype(torch.float64)
        for n in (2, 4):
            for rule in RULES:
                r, rc = rel_diff(train(s, rule, n), train(sd, rule, n), init=s.init)
                check(f"(e) {tag} {rule} N={n}: float32 within tolerance / 10 of float64",
                      r <= tol / 10 and rc <= tol_change / 10, f"rel {r:.3e} rel_change {rc:.3e}")
    print(f"  ({time.time() - t0:.1f} s)")


def self_test(data_dir, tol, tol_change):
    xs, ys = load_split(data_dir, train=True)
    fails = []

    def check(name, cond, detail):
        print(f"  {'ok  ' if cond else 'FAIL'} {name}: {detail}", flush=True)
        if not cond:
            fails.append(name)

    # the configurations of tests/torch/mpi_resnet_parity.sh
    def setup(model, batch, steps, split, seed=2, lr=0.01, dtype=torch.float32,
              optimizer="sgd", wd=5e-4, head_init="zeros"):
        init = write_init_mem(model, seed, head_init=head_init)
        return Setup(model, init, parse_split(split, len(blocks_of(build_model(model, 1)))),
                     xs, ys, batch, steps, lr, 0.9, wd, dtype, optimizer)

    print("self-test: lag tables")
    for L in (1, 2, 3, 4, 5):
        t = lag_table("cdp-v2", L, L)
        check(f"cdp-v2 N=L={L} reads l >= L-1-i",
              all(t[i][l] == (0 if l >= L - 1 - i else 1) for i in range(L) for l in range(L)),
              f"{t}")
    check("N=1: cdp-v2 is dp", lag_table("cdp-v2", 1, 3) == [[0, 0, 0]], "lag [[0,0,0]]")
    check("blocks resnet20 = 11, resnet18-cifar = 10, resnet50 = 18",
          [len(blocks_of(build_model(m, 1))) for m in ("resnet20", "resnet18-cifar", "resnet50")]
          == [11, 10, 18], "stem + residual blocks + head")
    check("split text of cdp_run --plan", parse_split("stages: 4,4,3 blocks", 11, 3) == [4, 4, 3],
          "'stages: 4,4,3 blocks' -> [4, 4, 3]")

    print("self-test: resnet20, B=4, K=3, split 4,4,3, lr 0.01, init seed 2")
    s = setup("resnet20", 4, 3, "4,4,3")
    init = s.init
    t0 = time.time()
    dp1 = train(s, "dp", 1)
    v2_1 = train(s, "cdp-v2", 1)
    v1_1 = train(s, "cdp-v1", 1)
    check("(a) N=1: cdp-v2 equals dp bitwise",
          all(torch.equal(dp1[k], v2_1[k]) for k in dp1), "lag 0 everywhere")
    r, rc = rel_diff(v1_1, dp1, init=init)
    check("(a) N=1: cdp-v1 (lag 1 by definition, also at N=1) differs from dp",
          rc > 10 * tol_change, f"rel {r:.3e} rel_change {rc:.3e}")
    ref = plain_training(s, 1, standard_bn=True)
    r = rel_diff(dp1, ref)
    bkeys = [k for k in dp1 if "running" in k]
    rb = rel_diff(dp1, ref, bkeys)
    check("(b) N=1 dp equals a plain nn.BatchNorm2d training loop (params + running stats)",
          r < 1e-6 and rb < 1e-6 and all(torch.equal(dp1[k], ref[k]) for k in dp1 if is_counter(k)),
          f"rel all {r:.3e}, running statistics {rb:.3e}, num_batches_tracked equal")
    print(f"  ({time.time() - t0:.1f} s)")

    # (b') the Chan combination over N workers: after one dp step the first
    # BN layer's running statistics are those of the whole N*B batch
    s1 = setup("resnet20", 4, 1, "4,4,3")
    one = train(s1, "dp", 4)
    bn = nn.BatchNorm2d(16, momentum=BN_MOMENTUM)
    bn.load_state_dict({k[len("bn1."):]: init[k] for k in init if k.startswith("bn1.")})
    bn.train()
    conv = nn.Conv2d(1, 16, 3, 1, 1, bias=False)
    conv.weight.data.copy_(init["conv1.weight"])
    x = torch.cat([micro_batch(s1, 0, 4, i)[0] for i in range(4)])
    with torch.no_grad():
        bn(conv(x))
    rb = max(rel_diff(one, {"bn1." + k: v for k, v in bn.state_dict().items()}, [f"bn1.{k}"])
             for k in ("running_mean", "running_var"))
    check("(b') N=4 dp: bn1 running statistics = nn.BatchNorm2d on the whole step's batch",
          rb < 1e-6, f"rel {rb:.3e}")

    t0 = time.time()
    dp4 = train(s, "dp", 4)
    acc = plain_training(s, 4, standard_bn=False)
    pk = [k for k, _ in build_model("resnet20", 1).named_parameters()]
    r = rel_diff(dp4, acc, pk)
    check("(c) N=4 dp equals a gradient accumulation loop (BN in train mode per micro-batch)",
          r == 0.0 or r < 1e-6, f"rel (parameters) {r:.3e}"
          + (" (bitwise)" if all(torch.equal(dp4[k], acc[k]) for k in pk) else ""))
    v1 = train(s, "cdp-v1", 4)
    v2 = train(s, "cdp-v2", 4)
    r, rc = rel_diff(v1, dp4, init=init)
    check("(d) N=4: cdp-v1 differs from dp", rc > 10 * tol_change,
          f"rel {r:.3e} rel_change {rc:.3e}")
    r, rc = rel_diff(v2, dp4, init=init)
    r2, rc2 = rel_diff(v2, v1, init=init)
    check("(d) N=4: cdp-v2 differs from dp and from cdp-v1",
          rc > 10 * tol_change and rc2 > 10 * tol_change,
          f"vs dp rel_change {rc:.3e}, vs cdp-v1 {rc2:.3e}")
    # cdp-v1 with K=1 is dp (P(-1) = P(0)); with K=2 its second step is at P(0)
    sk1 = setup("resnet20", 4, 1, "4,4,3")
    a, b = train(sk1, "cdp-v1", 4), train(sk1, "dp", 4)
    check("(d) K=1: cdp-v1 equals dp bitwise (P(-1) = P(0))",
          all(torch.equal(a[k], b[k]) for k in a), "")
    print(f"  ({time.time() - t0:.1f} s)")

    # (e) float32 noise on the parity test's trajectories: float32 vs float64
    t0 = time.time()
    sd = setup("resnet20", 4, 3, "4,4,3", dtype=torch.float64)
    for n in (2, 4):
        for rule in RULES:
            r, rc = rel_diff(train(s, rule, n), train(sd, rule, n), init=init)
            check(f"(e) {rule} N={n}: float32 reference within tolerance / 10 of float64",
                  r <= tol / 10 and rc <= tol_change / 10, f"rel {r:.3e} rel_change {rc:.3e}")
    # not every trajectory is this quiet: one flipped ReLU input is enough
    sn, sn64 = (setup("resnet20", 4, 3, "4,4,3", seed=8, dtype=dt) for dt in (torch.float32,
                                                                               torch.float64))
    r, rc = rel_diff(train(sn, "dp", 4), train(sn64, "dp", 4), init=sn.init)
    print(f"  info: seed 8 instead, dp N=4: float32 vs float64 rel {r:.3e} rel_change {rc:.3e}")
    print(f"  ({time.time() - t0:.1f} s)")

    print("self-test: resnet18-cifar, B=2, K=2, split 2,3,3,2, lr 0.01, init seed 3")
    t0 = time.time()
    s = setup("resnet18-cifar", 2, 2, "2,3,3,2", seed=3)
    res = {rule: train(s, rule, 2) for rule in RULES}
    r, rc = rel_diff(res["cdp-v1"], res["dp"], init=s.init)
    check("(d) resnet18-cifar N=2 K=2: cdp-v1 differs from dp", rc > 10 * tol_change,
          f"rel {r:.3e} rel_change {rc:.3e}")
    sd = setup("resnet18-cifar", 2, 2, "2,3,3,2", seed=3, dtype=torch.float64)
    for rule in RULES:
        r, rc = rel_diff(res[rule], train(sd, rule, 2), init=s.init)
        check(f"(e) resnet18-cifar {rule} N=2: float32 within tolerance / 10 of float64",
              r <= tol / 10 and rc <= tol_change / 10, f"rel {r:.3e} rel_change {rc:.3e}")
    print(f"  ({time.time() - t0:.1f} s)")

    vit_self_test(setup, check, tol, tol_change)

    print("self-test: files")
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "init.st")
        sd0 = write_init(p, "resnet18", 5, 1)
        back = st_read(p)
        check("write-init round trip, num_batches_tracked I64 0-d",
              list(back) == list(sd0) and all(torch.equal(back[k], sd0[k]) for k in sd0)
              and back["bn1.num_batches_tracked"].dtype == torch.int64
              and back["bn1.num_batches_tracked"].dim() == 0, f"{len(back)} entries")
        out = os.path.join(d, "out.st")
        st_write(out, {k: (v.float() if is_counter(k) else v) for k, v in res["cdp-v2"].items()})
        ok, rel, rc, _, _ = compare(res["cdp-v2"], s.init, st_read(out))
        check("compare accepts num_batches_tracked as F32", ok and rel == 0.0, f"rel {rel:.1e}")
        acc = evaluate("resnet18-cifar", out, data_dir, limit=500)
        check("evaluate: strict load into torchvision", 0.0 <= acc <= 1.0, f"accuracy {acc:.4f}")
        vs = setup(VIT_SMALL, 4, 2, "2,1,2", optimizer="adamw", lr=1e-3, wd=0.01)
        st_write(out, train(vs, "cdp-v2", 2))
        acc = evaluate(VIT_SMALL, out, data_dir, limit=500)
        check("evaluate: a ViT loads into torchvision's VisionTransformer (strict)",
              0.0 <= acc <= 1.0, f"accuracy {acc:.4f}")
    print(f"self-test: {'FAIL: ' + ', '.join(fails) if fails else 'all passed'}")
    return 1 if fails else 0


# ----------------------------------------------------------------- main


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.split("\n")[1:]))
    ap.add_argument("--model", help=f"one of {', '.join(MODELS)}")
    ap.add_argument("--init-weights", metavar="FILE", help="P(0) (safetensors)")
    ap.add_argument("--module", metavar="PACKAGE.MODULE:FUNCTION",
                    help="with --model FILE.json: the function the file was exported from")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--optimizer", choices=("sgd", "adamw"), default="sgd",
                    help="torch.optim.SGD or torch.optim.AdamW, one group per stage [sgd]")
    ap.add_argument("--momentum", type=float, default=0.9, help="sgd [0.9]")
    ap.add_argument("--betas", type=parse_betas, default=(0.9, 0.999), metavar="B1,B2",
                    help="adamw [0.9,0.999]")
    ap.add_argument("--eps", type=float, default=1e-8, help="adamw [1e-8]")
    ap.add_argument("--weight-decay", type=float, default=None,
                    help="sgd: L2 added to the gradient [0]; adamw: decoupled [0.01], "
                         "as cdp_run's defaults")
    ap.add_argument("--rule", choices=RULES, default="cdp-v2")
    ap.add_argument("--stages", type=int, help="L (checked against --stages-split)")
    ap.add_argument("--stages-split", dest="split", metavar="a,b,c",
                    help="blocks per stage, as cdp splits them; cdp_run --plan's line "
                         "'stages: a,b,c blocks' is accepted verbatim [one stage]")
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--double", action="store_true", help="compute in float64")
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                    help="bf16: forward and loss under torch.autocast('cpu', "
                         "dtype=torch.bfloat16), float32 master weights [fp32]; with "
                         "--noise, NOISE is then the distance from the float32 run")
    ap.add_argument("--bf16-error", choices=("grad-sum", "master", "logits"),
                    help="with --precision bf16, a deliberate error for negative controls: "
                         "the gradient sum over workers rounded to bfloat16 after every "
                         "add, the master weights rounded after every update, or the "
                         "loss computed on bfloat16 logits")
    ap.add_argument("--threads", type=int, default=0, help="torch threads [torch default]")
    ap.add_argument("--out", metavar="FILE", help="write P(K) here (with a single case)")
    ap.add_argument("--compare", metavar="FILE", help="cdp_run --save-weights file")
    ap.add_argument("--case", action="append", default=[], metavar="RULE:N:FILE",
                    help="repeatable: run RULE with N workers and compare with FILE "
                         "(overrides --rule, --workers, --compare; one data load)")
    ap.add_argument("--tol", type=float, default=1e-4, help="bound on rel [1e-4]")
    ap.add_argument("--tol-change", type=float, default=1e-3, help="bound on rel_change [1e-3]")
    ap.add_argument("--verbose", action="store_true", help="per-tensor differences")
    ap.add_argument("--tol-noise", type=float, default=0.0, metavar="F",
                    help="with --noise: a case also passes when rel <= F times its NOISE "
                         "rel and rel_change <= F times its NOISE rel_change (a chaotic "
                         "trajectory: cdp as close to this reference as it is to itself "
                         "in float64) [0: never]")
    ap.add_argument("--noise", action="store_true",
                    help="also run each case in float64 and print 'NOISE rule=R N=n rel=X "
                         "rel_change=Y', the reference's own float32 error on this trajectory")
    ap.add_argument("--write-init", metavar="FILE",
                    help="write the module's own initialisation (--model, --seed) and exit")
    ap.add_argument("--seed", type=int, default=1, help="for --write-init")
    ap.add_argument("--in-channels", type=int, default=1,
                    help="for --write-init and --list-blocks [1]")
    ap.add_argument("--head-init", choices=("zeros", "linear"), default="zeros",
                    help="ViTs, --write-init: heads.head as torchvision (zeros) or as "
                         "nn.Linear's default, so that every block has a gradient from "
                         "step 0 [zeros]")
    ap.add_argument("--image-size", type=int, default=28,
                    help="ViTs: for --write-init and --list-blocks [28]; training and "
                         "--evaluate take it from the data")
    ap.add_argument("--evaluate", metavar="FILE",
                    help="load FILE into torchvision's --model (strict) and print test accuracy")
    ap.add_argument("--eval-limit", type=int, default=0, metavar="M",
                    help="--evaluate: only the first M test images [all]")
    ap.add_argument("--list-blocks", action="store_true", help="print --model's blocks and exit")
    ap.add_argument("--self-test", action="store_true", help="check this reference and exit")
    a = ap.parse_args(argv)

    if a.threads:
        torch.set_num_threads(a.threads)
    try:
        if a.self_test:
            return self_test(a.data_dir, a.tol, a.tol_change)
        if not a.model:
            raise UsageError("--model is required")
        check_model(a.model)
        if a.list_blocks:
            list_blocks(a.model, a.in_channels, a.image_size)
            return 0
        if a.write_init:
            write_init(a.write_init, a.model, a.seed, a.in_channels, a.image_size, a.head_init)
            return 0
        if a.evaluate:
            evaluate(a.model, a.evaluate, a.data_dir, a.eval_limit)
            return 0
        if not a.init_weights:
            raise UsageError("--init-weights is required")
        if a.workers < 1 or a.batch < 1 or a.steps < 0:
            raise UsageError("--workers and --batch must be >= 1, --steps >= 0")
        cases = []
        for c in a.case:
            parts = c.split(":", 2)
            if len(parts) != 3 or parts[0] not in RULES or not parts[1].isdigit() \
                    or int(parts[1]) < 1:
                raise UsageError(f"--case {c}: expected RULE:N:FILE")
            cases.append((parts[0], int(parts[1]), parts[2]))
        if not cases:
            cases = [(a.rule, a.workers, a.compare)]
        if a.out and len(cases) > 1:
            raise UsageError("--out takes a single case")
        init = st_read(a.init_weights)
        dtype = torch.float64 if a.double else torch.float32
        xs, ys = load_split(a.data_dir, train=True)
        if a.weight_decay is None:
            a.weight_decay = 0.01 if a.optimizer == "adamw" else 0.0
        s = Setup(a.model, init, None, xs, ys, a.batch, a.steps, a.lr, a.momentum,
                  a.weight_decay, dtype, a.optimizer, a.betas, a.eps, a.precision,
                  a.bf16_error)
        s.module = a.module
        if a.bf16_error and a.precision != "bf16":
            raise UsageError("--bf16-error needs --precision bf16")
        split = s.split = parse_split(a.split, len(blocks_of(s.net())), a.stages)
    except UsageError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    except (OSError, ValueError, KeyError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2

    status = 0
    done = {}    # (rule, n) -> P(K): cases that differ only in the file train once
    for rule, n, path in cases:
        t0 = time.time()
        tol, tol_change = a.tol, a.tol_change
        try:
            final = done[rule, n] = done[rule, n] if (rule, n) in done else train(s, rule, n)
        except (UsageError, ValueError) as e:
            print(f"{PROG}: {e}", file=sys.stderr)
            return 2
        print(f"{PROG}: {a.model} rule {rule} N={n} B={a.batch} K={a.steps} "
              f"split {','.join(map(str, split))} {s.describe()} "
              f"{'float64' if a.double else 'bf16 autocast' if a.precision == 'bf16' else 'float32'}"
              f"{' with error ' + a.bf16_error if a.bf16_error else ''} "
              f"({time.time() - t0:.1f} s)" + (f" vs {path}" if path else ""), flush=True)
        if a.noise and a.precision == "bf16":
            r, rc = rel_diff(final, train(s.with_precision("fp32"), rule, n), init=init)
            print(f"NOISE rule={rule} N={n} rel={r:.3e} rel_change={rc:.3e} "
                  "(this reference under bf16 autocast against float32)", flush=True)
        elif a.noise and not a.double:
            if (rule, n, "noise") not in done:
                done[rule, n, "noise"] = rel_diff(final, train(s.with_dtype(torch.float64), rule, n),
                                                  init=init)
            r, rc = done[rule, n, "noise"]
            print(f"NOISE rule={rule} N={n} rel={r:.3e} rel_change={rc:.3e} "
                  "(this reference in float32 against float64)", flush=True)
            if a.tol_noise:
                tol, tol_change = max(a.tol, a.tol_noise * r), max(a.tol_change, a.tol_noise * rc)
        if a.out:      # float32, as cdp reads and writes them
            st_write(a.out, {k: (v if is_counter(k) else v.float()) for k, v in final.items()},
                     {"format": "pt", "producer": PROG + ".py", "model": a.model,
                      "rule": rule, "step": a.steps})
        if path:
            try:
                if not report(rule, n, path, final, init, tol, tol_change, a.verbose):
                    status = 1
            except ValueError as e:
                print(f"{PROG}: {e}", file=sys.stderr)
                return 2
    return status


if __name__ == "__main__":
    sys.exit(main())
