#!/usr/bin/env python3
"""Writes a torch.nn.Module as a cdp model description (doc/reference.md
section 11.1) and, optionally, its weights, so that cdp_run trains it:

    python3 examples/export_model.py MODULE OUT.json [WEIGHTS.safetensors]
        [--input C,H,W] [--classes N]

MODULE is a torchvision model's name (resnet18: torchvision.models.resnet18
with num_classes N), or PACKAGE.MODULE:FUNCTION, a function returning the
module.  The module is traced with torch.fx; every call must be one the
builder has (Conv2d, BatchNorm2d, ReLU, ReLU6, Dropout, MaxPool2d,
AdaptiveAvgPool2d(1), Flatten, Linear, and +), else the export stops with
one line naming the module path.  Layers keep their module paths, so cdp's
weights load back with load_state_dict(strict=True).  Blocks (the units
stages are cut from) start where a top-level child (layer1.0, ...) does,
where exactly one tensor crosses and the block's first layer is not in
place nor a view.  Needs torch and torchvision."""
import argparse
import importlib
import json
import operator
import os
import sys

import torch
import torch.fx
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cdp_files import st_write  # noqa: E402


class Unsupported(Exception):
    pass


def pair(v, what, path):
    """a square size: an int, or a pair of equal ints"""
    if isinstance(v, int):
        return v
    if len(v) == 2 and v[0] == v[1]:
        return v[0]
    raise Unsupported(f"{path}: {what} {v}: cdp's layers are square")


def layer_of(m, path):
    """the description fields of module m (at path), or Unsupported"""
    if isinstance(m, nn.Conv2d):
        if m.padding_mode != "zeros" or pair(m.dilation, "dilation", path) != 1 or \
                isinstance(m.padding, str):
            raise Unsupported(f"{path}: Conv2d with dilation, string padding or "
                              f"padding_mode {m.padding_mode}")
        return {"kind": "conv2d", "name": path, "out_channels": m.out_channels,
                "kernel_size": pair(m.kernel_size, "kernel_size", path),
                "stride": pair(m.stride, "stride", path),
                "padding": pair(m.padding, "padding", path), "groups": m.groups,
                "bias": m.bias is not None}
    if isinstance(m, nn.BatchNorm2d):
        if m.eps != 1e-5 or m.momentum != 0.1 or not m.affine or not m.track_running_stats:
            raise Unsupported(f"{path}: BatchNorm2d other than eps 1e-5, momentum 0.1, affine")
        return {"kind": "batchnorm2d", "name": path}
    if isinstance(m, nn.ReLU):
        return {"kind": "relu"}
    if isinstance(m, nn.ReLU6):
        return {"kind": "relu6"}
    if isinstance(m, nn.Dropout):
        return {"kind": "dropout", "name": path, "p": m.p}
    if isinstance(m, nn.MaxPool2d):
        if pair(m.dilation, "dilation", path) != 1 or m.ceil_mode:
            raise Unsupported(f"{path}: MaxPool2d with dilation or ceil_mode")
        return {"kind": "maxpool2d", "kernel_size": pair(m.kernel_size, "kernel_size", path),
                "stride": pair(m.stride, "stride", path),
                "padding": pair(m.padding, "padding", path)}
    if isinstance(m, nn.AdaptiveAvgPool2d):
        if pair(m.output_size, "output_size", path) != 1:
            raise Unsupported(f"{path}: AdaptiveAvgPool2d to {m.output_size}, cdp pools to 1")
        return {"kind": "avgpool"}
    if isinstance(m, nn.Flatten):
        if m.start_dim != 1 or m.end_dim != -1:
            raise Unsupported(f"{path}: Flatten other than from dim 1")
        return {"kind": "flatten"}
    if isinstance(m, nn.Linear):
        return {"kind": "linear", "name": path, "out_features": m.out_features,
                "bias": m.bias is not None}
    raise Unsupported(f"{path}: {type(m).__name__} is not a layer cdp has")


def describe(module, input_shape, classes):
    gm = torch.fx.symbolic_trace(module)
    mods = dict(gm.named_modules())
    layers, owner, made = [], [], {}   # made: fx node -> its layer's id
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            made[node] = "input"
            continue
        if node.op == "output":
            continue
        args = [a for a in node.args if isinstance(a, torch.fx.Node)]
        if node.op == "call_module":
            ly = layer_of(mods[node.target], node.target)
            top = node.target.split(".")
            top = ".".join(top[:2]) if len(top) > 2 else top[0]
        elif node.op == "call_function" and node.target in (operator.add, torch.add) and \
                len(args) == 2 and len(node.args) == 2 and not node.kwargs:
            ly, top = {"kind": "add"}, None
        elif node.op == "call_function" and node.target is torch.flatten and \
                tuple(node.args[1:]) == (1,) and not node.kwargs:
            ly, top = {"kind": "flatten"}, None
        else:
            raise Unsupported(f"{node.name}: {node.op} {node.target} is not a layer cdp has")
        if ly.get("kind") == "linear" and not ly.pop("bias"):
            raise Unsupported(f"{node.target}: Linear without bias")
        ly["id"] = node.name
        ly["in"] = made[args[0]]
        if ly["kind"] == "add":
            ly["in2"] = made[args[1]]
        made[node] = node.name
        layers.append((ly, top, [made[a] for a in args]))
    # blocks: a new one where the owner changes, the cut is clean (only the
    # previous layer's tensor is read from before it) and no in-place layer
    # would overwrite the block's input
    blocks, current, owner_now = [], [], None
    for i, (ly, top, reads) in enumerate(layers):
        if current and top is not None and top != owner_now and ly["kind"] not in ("relu", "relu6", "flatten"):
            before = {l["id"] for l, _, _ in layers[:i]} | {"input"}
            crossing = {r for _, _, rr in layers[i:] for r in rr if r in before}
            if crossing <= {layers[i - 1][0]["id"]}:
                blocks.append(current)
                current = []
        if top is not None:
            owner_now = top
        current.append(ly)
    blocks.append(current)
    prev = "input"
    for ly, _, _ in layers:   # "in" only where it is not the layer before
        if ly["in"] == prev:
            del ly["in"]
        prev = ly["id"]
    return {"format": "cdp-model", "version": 1, "name": type(module).__name__,
            "input": list(input_shape), "classes": classes, "blocks": blocks}


def load(spec, classes):
    if ":" in spec:
        mod, fn = spec.split(":", 1)
        return getattr(importlib.import_module(mod), fn)()
    import torchvision
    if not hasattr(torchvision.models, spec):
        raise Unsupported(f"{spec}: not a torchvision model nor PACKAGE.MODULE:FUNCTION")
    return getattr(torchvision.models, spec)(num_classes=classes)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("module")
    ap.add_argument("out")
    ap.add_argument("weights", nargs="?")
    ap.add_argument("--input", default="3,32,32")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    try:
        shape = [int(v) for v in a.input.split(",")]
        m = load(a.module, a.classes)
        d = describe(m, shape, a.classes)
    except (Unsupported, ValueError, AttributeError, ImportError) as e:
        print(f"export_model.py: error: {e}", file=sys.stderr)
        sys.exit(1)
    with open(a.out, "w") as f:
        f.write("{\n" + ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in d.items()
                                   if k != "blocks"))
        f.write(',\n  "blocks": [\n' + ",\n".join(
            "    [\n" + ",\n".join("      " + json.dumps(l) for l in b) + "\n    ]"
            for b in d["blocks"]) + "\n  ]\n}\n")
    if a.weights:
        st_write(a.weights, dict(m.state_dict()), {"format": "pt"})


if __name__ == "__main__":
    main()
