#!/usr/bin/env python3
"""Writes a torch.nn.Module as a cdp model description (doc/reference.md
section 11.1) and, optionally, its weights, so that cdp_run trains it:

    python3 examples/export_model.py MODULE OUT.json [WEIGHTS.safetensors]
        [--input C,H,W] [--classes N]

MODULE is a torchvision model's name (resnet18: torchvision.models.resnet18
with num_classes N; the ViTs also with image_size H), or
PACKAGE.MODULE:FUNCTION, a function returning the module.  The module is
traced with torch.fx on a meta tensor of the input's shape; every call must
be one the builder has (Conv2d, BatchNorm2d, ReLU, ReLU6, Dropout, Identity,
MaxPool2d, AdaptiveAvgPool2d, Flatten, Linear, LayerNorm, GELU,
MultiheadAttention, +, torchvision's ViT embedding and class-token
select), else the export stops with one line naming the module path and
the op.  Layers keep their module paths, so cdp's weights load back with
load_state_dict(strict=True).  Blocks (the units stages are cut from)
start where a unit does (the child of the first nn.Sequential or
nn.ModuleList on a path: layer1.0, features.3), where exactly one tensor
crosses and the block's first layer is not in place nor a view (doc/reference.md
section 11.1).  Needs torch and torchvision."""
import argparse
import importlib
import json
import operator
import os
import sys
import warnings

import torch
import torch.fx
import torch.nn.functional as F
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


def layer_of(m, path, tokens):
    """the description fields of module m (at path) reading tokens or an
    image; None for the identity (Dropout(0)), or Unsupported"""
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
        # p = 0 is the identity, in training too: no layer
        return {"kind": "dropout", "name": path, "p": m.p} if m.p > 0 else None
    if isinstance(m, nn.MaxPool2d):
        if pair(m.dilation, "dilation", path) != 1 or m.ceil_mode:
            raise Unsupported(f"{path}: MaxPool2d with dilation or ceil_mode")
        return {"kind": "maxpool2d", "kernel_size": pair(m.kernel_size, "kernel_size", path),
                "stride": pair(m.stride, "stride", path),
                "padding": pair(m.padding, "padding", path)}
    if isinstance(m, nn.AdaptiveAvgPool2d):
        return avgpool(m.output_size, path)
    if isinstance(m, nn.Flatten):
        if m.start_dim != 1 or m.end_dim != -1:
            raise Unsupported(f"{path}: Flatten other than from dim 1")
        return {"kind": "flatten"}
    if isinstance(m, nn.Linear):
        if m.bias is None:
            raise Unsupported(f"{path}: Linear without bias")
        ly = {"kind": "linear", "name": path, "out_features": m.out_features}
        if tokens:
            ly["tokens"] = True
        return ly
    if isinstance(m, nn.LayerNorm):
        if not tokens or len(m.normalized_shape) != 1 or not m.elementwise_affine:
            raise Unsupported(f"{path}: LayerNorm other than over the last dim of tokens, affine")
        return {"kind": "layernorm", "name": path, "eps": m.eps}
    if isinstance(m, nn.GELU):
        if m.approximate != "none":
            raise Unsupported(f"{path}: GELU with approximate={m.approximate!r}")
        return {"kind": "gelu"}
    if isinstance(m, nn.MultiheadAttention):
        if not tokens or not m.batch_first or not m._qkv_same_embed_dim or \
                m.in_proj_bias is None or m.bias_k is not None or m.add_zero_attn or m.dropout:
            raise Unsupported(f"{path}: MultiheadAttention other than batch_first self-attention "
                              "with biases and no dropout")
        return {"kind": "attention", "name": path, "num_heads": m.num_heads}
    raise Unsupported(f"{path}: {type(m).__name__} is not a layer cdp has")


def avgpool(size, path):
    o = pair(size, "output_size", path)
    if o is None:
        raise Unsupported(f"{path}: AdaptiveAvgPool2d to {size}")
    return {"kind": "avgpool", "output_size": o} if o != 1 else {"kind": "avgpool"}


def owner(path, mods):
    """the unit a layer at path belongs to, where blocks may start: the
    child of the first nn.Sequential or nn.ModuleList on its path (layer1.0,
    features.3, encoder.layers.encoder_layer_0), else its top-level module"""
    parts = path.split(".")
    for i in range(1, len(parts)):
        if isinstance(mods[".".join(parts[:i])], (nn.Sequential, nn.ModuleList)):
            return ".".join(parts[:i + 1])
    return parts[0]


def trace(module, input_shape):
    """the module's fx graph, traced on a meta tensor of the input's shape so
    that Python code on shapes (torchvision's ViT: n, c, h, w = x.shape)
    runs with numbers; nn.MultiheadAttention's (output, weights) pair may be
    unpacked"""
    from torch.fx.experimental import meta_tracer
    mods = dict(module.named_modules())

    def unpack(proxy):
        n = proxy.node
        if n.op == "call_module" and isinstance(mods.get(n.target), nn.MultiheadAttention):
            return iter((proxy[0], proxy[1]))
        return plain_iter(proxy)
    plain_iter = torch.fx.proxy.Proxy.__iter__
    torch.fx.proxy.Proxy.__iter__ = unpack
    class PathTracer(meta_tracer.MetaTracer):
        """records in each node the path of the module whose forward made it"""
        stack = [""]

        def call_module(self, m, forward, args, kwargs):
            self.stack.append(self.path_of_module(m))
            try:
                return super().call_module(m, forward, args, kwargs)
            finally:
                self.stack.pop()

        def create_node(self, *a, **k):
            node = super().create_node(*a, **k)
            node.meta["cdp_path"] = self.stack[-1]
            return node
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # meta shapes a module on the CPU cannot give
            tracer = PathTracer()
            graph = tracer.trace(module, {"x": torch.zeros([2] + list(input_shape), device="meta")})
            return torch.fx.GraphModule(tracer.root, graph, type(module).__name__)
    finally:
        torch.fx.proxy.Proxy.__iter__ = plain_iter


def where(node):
    """a node's module path, and for a function or method its name too"""
    if node.op == "call_module":
        return node.target
    path = node.meta.get("cdp_path") or "(the top module)"
    return f"{path}: {node.name}"


def describe(module, input_shape, classes):
    mods = dict(module.named_modules())
    try:
        gm = trace(module, input_shape)
    except Unsupported:
        raise
    except Exception as e:   # control flow fx cannot trace
        raise Unsupported(f"{type(module).__name__}: cannot be traced with torch.fx: "
                          f"{str(e).splitlines()[0] if str(e) else type(e).__name__}")
    layers = []          # (layer, owner or None, the ids it reads)
    made, tokens = {}, {}   # fx node -> the id of the tensor it is, and whether tokens
    special = {}         # fx node -> ("attr", target) | ("patches", conv id) | ("cls",) |
    #                       ("attention", id): nodes that are no tensor of cdp's by themselves

    def emit(node, ly, top, reads, tok):
        ly["id"] = node.name
        ly["in"] = reads[0]
        if ly["kind"] == "add":
            ly["in2"] = reads[1]
        made[node], tokens[node] = node.name, tok
        layers.append((ly, top, reads))

    def alias(node, arg):
        made[node], tokens[node] = made[arg], tokens[arg]

    def bad(node, what=None):
        target = getattr(node.target, "__name__", node.target)
        raise Unsupported(f"{where(node)}: {what or f'{node.op} {target}'} is not a layer "
                          "cdp has")

    # checks (torch._assert(x.dim() == 3)) and what only they read: no layers
    checks = set()
    for node in reversed(gm.graph.nodes):
        if (node.op == "call_function" and node.target is torch._assert) or \
                (node.users and node.op != "placeholder" and all(u in checks for u in node.users)):
            checks.add(node)
    for node in gm.graph.nodes:
        op, tgt = node.op, node.target
        args = [a for a in node.args if isinstance(a, torch.fx.Node)]
        if node in checks:
            continue
        if op == "placeholder":
            made[node], tokens[node] = "input", False
            continue
        if op == "output":
            continue
        if not node.users:      # unused: the attention weights, a dead computation
            continue
        if op == "get_attr":
            special[node] = ("attr", tgt)
            continue
        if op == "call_module":
            m = mods[tgt]
            if isinstance(m, nn.MultiheadAttention):
                q = node.kwargs.get("query", node.args[0] if node.args else None)
                k = node.kwargs.get("key", node.args[1] if len(node.args) > 1 else None)
                v = node.kwargs.get("value", node.args[2] if len(node.args) > 2 else None)
                extra = {a: b for a, b in node.kwargs.items()
                         if a not in ("query", "key", "value", "need_weights")}
                if not (q is k is v) or len(node.args) > 3 or any(b is not None for b in extra.values()):
                    bad(node, "MultiheadAttention other than on (x, x, x) without masks")
                ly = layer_of(m, tgt, tokens[q])
                emit(node, ly, owner(tgt, mods), [made[q]], True)
                special[node] = ("attention",)
                continue
            if len(args) != 1 or len(node.args) != 1 or node.kwargs:
                bad(node, f"{type(m).__name__} called on {len(node.args)} arguments")
            ly = None if isinstance(m, nn.Identity) else layer_of(m, tgt, tokens[args[0]])
            if ly is None:
                alias(node, args[0])
            else:
                tok = tokens[args[0]]
                emit(node, ly, owner(tgt, mods), [made[args[0]]], tok)
            continue
        f = tgt
        sp = [special.get(a) for a in args]
        if op == "call_function" and f is operator.getitem and args and sp[0] == ("attention",):
            if node.args[1] != 0:
                bad(node, "the attention weights")
            alias(node, args[0])
        elif op == "call_function" and f is operator.getitem and len(args) == 1 and \
                tokens.get(args[0]) and node.args[1] == (slice(None), 0):
            emit(node, {"kind": "token_select"}, None, [made[args[0]]], False)
        elif op == "call_function" and f in (operator.add, torch.add) and len(args) == 2 and \
                len(node.args) == 2 and not node.kwargs:
            attr = [s for s in sp if s and s[0] == "attr"]
            if attr:   # tokens + a learned position embedding: pos_embed
                name = attr[0][1]
                x = args[0] if sp[1] else args[1]
                if not name.endswith(".pos_embedding") or not tokens.get(x):
                    bad(node, f"an add of {name}")
                emit(node, {"kind": "pos_embed", "name": name[:-len(".pos_embedding")]}, None,
                     [made[x]], True)
            elif any(sp):
                bad(node)
            else:
                emit(node, {"kind": "add"}, None, [made[a] for a in args], tokens[args[0]])
        elif (op == "call_function" and f is torch.flatten and tuple(node.args[1:]) == (1,)
              and not node.kwargs) or \
                (op == "call_method" and f == "flatten" and tuple(node.args[1:]) == (1,)):
            emit(node, {"kind": "flatten"}, None, [made[args[0]]], False)
        elif op == "call_function" and f is F.adaptive_avg_pool2d and len(node.args) == 2 and \
                not node.kwargs:
            emit(node, avgpool(node.args[1], node.name), None, [made[args[0]]], False)
        elif op == "call_function" and f in (F.relu, torch.relu) and len(node.args) == 1:
            emit(node, {"kind": "relu"}, None, [made[args[0]]], tokens[args[0]])
        # torchvision's ViT: conv_proj's [N, D, h, w] to tokens [N, h*w, D]
        # (reshape, permute), the class token in front (expand, cat)
        elif op == "call_method" and f == "reshape" and len(node.args) == 4 and \
                args[0].op == "call_module" and isinstance(mods[args[0].target], nn.Conv2d) and \
                node.args[2] == mods[args[0].target].out_channels:
            special[node] = ("reshaped", args[0])
        elif op == "call_method" and f == "permute" and sp[0] and sp[0][0] == "reshaped" and \
                tuple(node.args[1:]) == (0, 2, 1):
            special[node] = ("patches", sp[0][1])
        elif op == "call_method" and f == "expand" and sp[0] == ("attr", "class_token") and \
                tuple(node.args[2:]) == (-1, -1):
            special[node] = ("cls",)
        elif op == "call_function" and f is torch.cat and len(node.args) == 1 and \
                node.kwargs == {"dim": 1} and len(node.args[0]) == 2 and \
                special.get(node.args[0][0]) == ("cls",) and \
                (special.get(node.args[0][1]) or ("",))[0] == "patches":
            emit(node, {"kind": "class_token"}, None, [made[special[node.args[0][1]][1]]], True)
        else:
            bad(node)
        if node not in made and node not in special:
            bad(node)
    # blocks: a new one where the owner changes, the cut is clean (only the
    # previous layer's tensor is read from before it) and no in-place layer
    # would overwrite the block's input
    blocks, current, owner_now = [], [], None
    for i, (ly, top, reads) in enumerate(layers):
        if current and top is not None and top != owner_now and \
                ly["kind"] not in ("relu", "relu6", "flatten"):
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


def load(spec, classes, shape):
    if ":" in spec:
        mod, fn = spec.split(":", 1)
        return getattr(importlib.import_module(mod), fn)()
    import torchvision
    if not hasattr(torchvision.models, spec):
        raise Unsupported(f"{spec}: not a torchvision model nor PACKAGE.MODULE:FUNCTION")
    kw = {"num_classes": classes}
    if spec.startswith("vit_"):   # its position embedding is made for one image size
        kw["image_size"] = shape[1]
    return getattr(torchvision.models, spec)(**kw)


def write_description(path, d):
    """d as JSON, one layer a line"""
    with open(path, "w") as f:
        f.write("{\n" + ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in d.items()
                                   if k != "blocks"))
        f.write(',\n  "blocks": [\n' + ",\n".join(
            "    [\n" + ",\n".join("      " + json.dumps(l) for l in b) + "\n    ]"
            for b in d["blocks"]) + "\n  ]\n}\n")


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
        m = load(a.module, a.classes, shape)
        # the weights before tracing: a traced BatchNorm counts a batch
        state = {k: v.clone() for k, v in m.state_dict().items()}
        d = describe(m, shape, a.classes)
    except (Unsupported, ValueError, AttributeError, ImportError) as e:
        print(f"export_model.py: error: {e}", file=sys.stderr)
        sys.exit(1)
    write_description(a.out, d)
    if a.weights:
        st_write(a.weights, state, {"format": "pt"})


if __name__ == "__main__":
    main()
