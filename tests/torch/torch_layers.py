#!/usr/bin/python3
"""Per-layer forward/backward parity of cdp's CPU kernels with PyTorch.

For every layer kind cdp's models are made of (conv2d, with groups too, batchnorm2d in
training and evaluation mode with its running statistics, relu, relu6,
dropout (cdp's draws, computed here again, applied as PyTorch's), maxpool2d,
global average pooling, linear with its fused relu and relu-masked dx,
the residual add, softmax cross-entropy; layernorm, gelu, multi-head
self-attention and the ViT's token path: class token, position embedding,
class-token output) and several shapes, this script
draws random inputs, parameters and upstream gradients dy from
torch.Generator (fixed seeds), computes forward and autograd backward with
the torch.nn modules in float32, has tests/lib/layer_probe run the same layer
with the CPU backend's kernels (one process for all cases, request and
output files in the format described in layer_probe.c), and compares every
tensor:

    rel = max|cdp - torch| / max|torch|      (max|torch| = 0: the difference)

against FWD_TOL for forward results, BWD_TOL for gradients, DBL_TOL for
the statistics BatchNorm keeps in double; index tensors (max-pool argmax,
correct-prediction counts) must be equal.  Two negative controls check that
the comparison can fail: a forward and a backward tensor compared with the
torch result of a slightly perturbed input must exceed their tolerance.
(Checked by hand: scaling the conv2d forward GEMM by 1 + 1e-5, or its dw
GEMM by 1 + 1e-4, fails every conv2d y, or dw, comparison.)

Prints one line per comparison, the worst difference per layer kind, and
exits 0 when everything agrees, 1 otherwise, 77 without torch, 2 when the
probe fails.

Usage: torch_layers.py --probe BUILDDIR/tests/lib/layer_probe [--keep DIR]
"""
import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover
    print(f"SKIP: cannot import torch/numpy ({e})")
    sys.exit(77)

# Measured worst cases (x86-64, OpenBLAS, torch 1.13): forward 6e-7 (the
# 7x7 stem convolution), gradients 1e-6 (conv2d dw, sums over B*OH*OW); the
# tolerances leave a margin for other BLAS kernels and torch builds.
FWD_TOL = 5e-6   # forward (float32 results)
BWD_TOL = 2e-5   # gradients
DBL_TOL = 1e-12  # BatchNorm's per-micro-batch statistics, kept in double

DT_F32, DT_I32, DT_F64, DT_BYTES = 0, 1, 2, 3
_NP = {DT_F32: np.float32, DT_I32: np.int32, DT_F64: np.float64, DT_BYTES: np.uint8}


# ------------------------------------------------------------- file format

def write_request(path, layer, dims, arrays, floats=None):
    def rec(name, dtype, arr):
        arr = np.ascontiguousarray(arr, dtype=np.dtype(_NP[dtype]).newbyteorder("<"))
        nb = name.encode()
        return (struct.pack("<I", len(nb)) + nb + struct.pack("<IQ", dtype, arr.size)
                + arr.tobytes())
    parts = [b"CDPLPRQ1", rec("layer", DT_BYTES, np.frombuffer(layer.encode(), np.uint8)),
             rec("dims", DT_I32, np.array(dims, np.int32))]
    for name, v in (floats or {}).items():
        parts.append(rec(name, DT_F32, np.array([v], np.float32)))
    for name, t in arrays.items():
        if t is None:
            continue
        if isinstance(t, np.ndarray) and t.dtype == np.float64:
            parts.append(rec(name, DT_F64, t))
            continue
        t = t.detach().cpu().contiguous()
        if t.dtype in (torch.int32, torch.int64):
            parts.append(rec(name, DT_I32, t.numpy().astype(np.int32)))
        else:
            parts.append(rec(name, DT_F32, t.numpy().astype(np.float32)))
    with open(path, "wb") as f:
        f.write(b"".join(parts))


def read_output(path):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:8] != b"CDPLPOT1":
        raise ValueError(f"{path}: not a layer_probe output")
    out, off = {}, 8
    while off < len(raw):
        (n,) = struct.unpack_from("<I", raw, off)
        name = raw[off + 4:off + 4 + n].decode()
        off += 4 + n
        dtype, count = struct.unpack_from("<IQ", raw, off)
        off += 12
        dt = np.dtype(_NP[dtype]).newbyteorder("<")
        out[name] = np.frombuffer(raw, dtype=dt, count=count, offset=off).copy()
        off += count * dt.itemsize
    return out


# ------------------------------------------------------------- cases
# Each case: (kind, label, layer, dims, floats, arrays for the probe,
# expected: name -> (torch tensor, tolerance class)).

class Gen:
    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)

    def randn(self, *shape, scale=1.0, shift=0.0):
        return torch.randn(*shape, generator=self.g) * scale + shift

    def rand(self, *shape, lo=0.0, hi=1.0):
        return torch.rand(*shape, generator=self.g) * (hi - lo) + lo

    def randint(self, hi, *shape):
        return torch.randint(0, hi, shape, generator=self.g)


def leaf(t):
    return t.clone().requires_grad_(True)


def conv_case(seed, B, Cin, H, W, Cout, k, stride, pad, bias, acc=False, groups=1):
    g = Gen(seed)
    m = nn.Conv2d(Cin, Cout, k, stride=stride, padding=pad, bias=bias, groups=groups)
    with torch.no_grad():
        m.weight.copy_(g.randn(*m.weight.shape, scale=0.3))
        if bias:
            m.bias.copy_(g.randn(Cout))
    x = leaf(g.randn(B, Cin, H, W))
    y = m(x)
    dy = g.randn(*y.shape)
    y.backward(dy)
    arrays = {"x": x, "w": m.weight, "b": m.bias if bias else None, "dy": dy}
    exp = {"y": (y, "fwd"), "dx": (x.grad, "bwd"), "dw": (m.weight.grad, "bwd")}
    if bias:
        exp["db"] = (m.bias.grad, "bwd")
    if acc:
        dw0 = g.randn(*m.weight.shape)
        arrays["dw0"] = dw0
        exp["dw_acc"] = (dw0 + m.weight.grad, "bwd")
        if bias:
            db0 = g.randn(Cout)
            arrays["db0"] = db0
            exp["db_acc"] = (db0 + m.bias.grad, "bwd")
    label = (f"{k}x{k}/{stride} pad {pad} {'bias' if bias else 'no bias'} "
             f"x[{B},{Cin},{H},{W}] -> {Cout}{f' groups {groups}' if groups > 1 else ''}"
             f"{' +acc' if acc else ''}")
    return ("conv2d", label, "conv2d",
            [B, Cin, H, W, Cout, k, k, stride, pad, int(bias), groups], None, arrays, exp)


def bn_case(seed, B, C, H, W, N, eps=1e-5, momentum=0.1, shift=0.0, scale=1.0):
    g = Gen(seed)
    m = nn.BatchNorm2d(C, eps=eps, momentum=momentum)
    rmean, rvar = g.randn(C, scale=0.5), g.rand(C, lo=0.5, hi=2.0)
    with torch.no_grad():
        m.weight.copy_(g.randn(C, scale=0.5, shift=1.0))
        m.bias.copy_(g.randn(C, scale=0.5))
        m.running_mean.copy_(rmean)
        m.running_var.copy_(rvar)
    m.train()
    x = leaf(g.randn(B, C, H, W, scale=scale, shift=shift))
    y = m(x)
    dy = g.randn(*y.shape)
    y.backward(dy)
    xd = x.detach().double()
    mean = xd.mean(dim=(0, 2, 3))
    var = xd.var(dim=(0, 2, 3), unbiased=False)
    n = B * H * W
    me = nn.BatchNorm2d(C, eps=eps, momentum=momentum)
    with torch.no_grad():
        me.weight.copy_(m.weight)
        me.bias.copy_(m.bias)
        me.running_mean.copy_(rmean)
        me.running_var.copy_(rvar)
    me.eval()
    with torch.no_grad():
        y_eval = me(x.detach())
    arrays = {"x": x, "gamma": m.weight, "beta": m.bias, "dy": dy, "rmean": rmean, "rvar": rvar}
    exp = {"y": (y, "fwd"),
           "save_mean": (mean.float(), "fwd"),
           "save_invstd": ((1.0 / torch.sqrt(var + eps)).float(), "fwd"),
           "stat_mean": (mean, "dbl"),
           "stat_m2": (var * n, "dbl"),
           "dx": (x.grad, "bwd"),
           "dx_inplace": (x.grad, "bwd"),
           "dgamma": (m.weight.grad, "bwd"),
           "dbeta": (m.bias.grad, "bwd"),
           "y_eval": (y_eval, "fwd"),
           "rmean_out": (m.running_mean, "fwd"),
           "rvar_out": (m.running_var, "fwd")}
    label = (f"x[{B},{C},{H},{W}] mean {shift:g} sd {scale:g} eps {eps:g} "
             f"momentum {momentum:g}, running stats from {N} micro-batch(es)")
    return ("batchnorm2d", label, "batchnorm2d", [B, C, H, W, N],
            {"eps": eps, "momentum": momentum}, arrays, exp)


def relu_case(seed, n):
    g = Gen(seed)
    x = g.randn(n)
    x[::7] = 0.0
    x[3::11] = -0.0
    x = leaf(x)
    y = F.relu(x)
    dy = g.randn(n)
    y.backward(dy)
    return ("relu", f"n {n} (with +-0 inputs)", "relu", [n], None, {"x": x, "dy": dy},
            {"y": (y, "fwd"), "dx": (x.grad, "bwd")})


def relu6_case(seed, n):
    """values at and around both kinks (0 and 6, where the gradient is 0)"""
    g = Gen(seed)
    x = g.randn(n, scale=4.0, shift=3.0)
    x[::5] = 0.0
    x[1::5] = 6.0
    x[2::9] = -0.0
    x = leaf(x)
    y = nn.ReLU6()(x)
    dy = g.randn(n)
    y.backward(dy)
    return ("relu6", f"n {n} (with 0, -0 and 6 inputs)", "relu6", [n], None,
            {"x": x, "dy": dy}, {"y": (y, "fwd"), "dx": (x.grad, "bwd")})


# cdp's counter-based draws (cdp/rng.h), written again here from
# doc/reference.md: SplitMix64's finaliser, three rounds
_U64 = np.uint64


def mix64(x):
    with np.errstate(over="ignore"):
        x = x + _U64(0x9e3779b97f4a7c15)
        x = (x ^ (x >> _U64(30))) * _U64(0xbf58476d1ce4e5b9)
        x = (x ^ (x >> _U64(27))) * _U64(0x94d049bb133111eb)
        return x ^ (x >> _U64(31))


def rand_u64(seed, stream, index):
    return mix64(mix64(mix64(_U64(seed)) ^ _U64(stream)) ^ np.asarray(index, dtype=np.uint64))


STREAM_DROPOUT = 0x6364702d64726f70  # "cdp-drop"


def dropout_case(seed, B, n, p, layer, rseed, step, sample0):
    """cdp's mask (its draws computed here from the formula), applied as
    PyTorch's dropout applies its own: y = x * noise, noise =
    bernoulli(1 - p).div_(1 - p), dx = dy * noise"""
    g = Gen(seed)
    x = leaf(g.randn(B, n))
    stream = rand_u64(STREAM_DROPOUT, step, layer)
    idx = (np.arange(B, dtype=np.uint64)[:, None] + _U64(sample0)) * _U64(n) + \
        np.arange(n, dtype=np.uint64)[None, :]
    u = (rand_u64(rseed, stream, idx) >> _U64(40)).astype(np.float64) / 16777216.0
    keep = torch.from_numpy(u >= p)
    y = x * keep.float().div_(1 - p)
    dy = g.randn(B, n)
    y.backward(dy)
    # the formula is PyTorch's: its own dropout scales what it keeps the same way
    t = g.randn(4096)
    td = F.dropout(t, p, training=True)
    kept = td != 0
    if not torch.equal(td[kept], t[kept] * torch.ones(1).div_(1 - p)):
        raise AssertionError(f"F.dropout(p={p}) does not scale by 1 / (1 - p) in float")
    return ("dropout", f"[{B},{n}] p {p:g} layer {layer} seed {rseed} step {step} "
            f"sample0 {sample0}", "dropout", [B, n, layer, rseed, step, sample0], None,
            {"x": x, "dy": dy, "p": np.array([p], np.float64)},
            {"y": (y, "fwd"), "dx": (x.grad, "bwd")})


def maxpool_case(seed, B, C, H, W, k=3, stride=2, pad=1, kind="randn"):
    g = Gen(seed)
    if kind == "ties":
        x = g.randint(3, B, C, H, W).float()
    elif kind == "negative":
        x = -g.rand(B, C, H, W, lo=1.0, hi=2.0)
    else:
        x = g.randn(B, C, H, W)
    x = leaf(x)
    y, idx = F.max_pool2d(x, k, stride, pad, return_indices=True)
    dy = g.randn(*y.shape)
    y.backward(dy)
    return ("maxpool2d", f"{k}x{k}/{stride} pad {pad} x[{B},{C},{H},{W}] {kind}", "maxpool2d",
            [B, C, H, W, k, stride, pad], None, {"x": x, "dy": dy},
            {"y": (y, "fwd"), "idx": (idx, "int"), "dx": (x.grad, "bwd")})


def avgpool_case(seed, B, C, H, W):
    g = Gen(seed)
    x = leaf(g.randn(B, C, H, W, shift=0.5))
    y = nn.AdaptiveAvgPool2d(1)(x)
    dy = g.randn(*y.shape)
    y.backward(dy)
    return ("avgpool", f"x[{B},{C},{H},{W}]", "avgpool", [B, C, H, W], None,
            {"x": x, "dy": dy}, {"y": (y, "fwd"), "dx": (x.grad, "bwd")})


def adaptive_avgpool_case(seed, B, C, H, W, o):
    """nn.AdaptiveAvgPool2d(o) where the windows overlap (H not a multiple
    of o) and where o is larger than the image (VGG's (7, 7) on 1x1)"""
    g = Gen(seed)
    x = leaf(g.randn(B, C, H, W, shift=0.5))
    y = nn.AdaptiveAvgPool2d(o)(x)
    dy = g.randn(*y.shape)
    y.backward(dy)
    return ("adaptive_avgpool", f"x[{B},{C},{H},{W}] to {o}x{o}", "adaptive_avgpool",
            [B, C, H, W, o, o], None, {"x": x, "dy": dy},
            {"y": (y, "fwd"), "dx": (x.grad, "bwd")})


def linear_case(seed, B, fin, fout, relu=False, relu_dx=False, acc=False):
    g = Gen(seed)
    m = nn.Linear(fin, fout)
    with torch.no_grad():
        m.weight.copy_(g.randn(fout, fin, scale=fin ** -0.5))
        m.bias.copy_(g.randn(fout, scale=0.1))
    z = leaf(g.randn(B, fin))
    x = F.relu(z) if relu_dx else z
    y = m(x)
    if relu:
        y = F.relu(y)
    dy = g.randn(*y.shape)
    y.backward(dy)
    arrays = {"x": x, "w": m.weight, "b": m.bias, "dy": dy}
    exp = {"y": (y, "fwd"), "dx": (z.grad, "bwd"), "dw": (m.weight.grad, "bwd"),
           "db": (m.bias.grad, "bwd")}
    if acc:
        dw0, db0 = g.randn(fout, fin), g.randn(fout)
        arrays.update(dw0=dw0, db0=db0)
        exp["dw_acc"] = (dw0 + m.weight.grad, "bwd")
        exp["db_acc"] = (db0 + m.bias.grad, "bwd")
    flags = "".join([" relu(y)" if relu else "", " relu-masked dx" if relu_dx else "",
                     " +acc" if acc else ""])
    return ("linear", f"[{B},{fin}] -> {fout}{flags}", "linear",
            [B, fin, fout, int(relu), int(relu_dx)], None, arrays, exp)


def add_case(seed, n):
    g = Gen(seed)
    a, b = leaf(g.randn(n)), leaf(g.randn(n))
    y = a + b
    dy = g.randn(n)
    y.backward(dy)
    return ("add", f"n {n}", "add", [n], None, {"a": a, "b": b, "dy": dy},
            {"y": (y, "fwd"), "da": (a.grad, "bwd"), "db": (b.grad, "bwd")})


def xent_case(seed, B, C, scale=1.0):
    g = Gen(seed)
    z = leaf(g.randn(B, C, scale=scale))
    labels = g.randint(C, B)
    loss = F.cross_entropy(z, labels)
    loss.backward()
    correct = (z.detach().argmax(dim=1) == labels).sum().double()
    return ("xent", f"logits[{B},{C}] sd {scale:g}", "xent", [B, C], None,
            {"logits": z, "labels": labels.int()},
            {"loss": (loss.detach().double(), "fwd"), "correct": (correct, "int"),
             "dlogits": (z.grad, "bwd")})


def layernorm_case(seed, B, T, D, eps=1e-6, shift=0.0, scale=1.0):
    g = Gen(seed)
    m = nn.LayerNorm(D, eps=eps)
    with torch.no_grad():
        m.weight.copy_(g.randn(D, scale=0.5, shift=1.0))
        m.bias.copy_(g.randn(D, scale=0.3))
    x = leaf(g.randn(B, T, D, scale=scale, shift=shift))
    y = m(x)
    dy = g.randn(*y.shape)
    y.backward(dy)
    return ("layernorm", f"[{B},{T},{D}] eps {eps:g} shift {shift:g}", "layernorm",
            [B, T, D], {"eps": eps}, {"x": x, "w": m.weight, "b": m.bias, "dy": dy},
            {"y": (y, "fwd"), "dx": (x.grad, "bwd"), "dw": (m.weight.grad, "bwd"),
             "db": (m.bias.grad, "bwd")})


def gelu_case(seed, n, scale=3.0):
    g = Gen(seed)
    x = leaf(g.randn(n, scale=scale))
    y = nn.GELU()(x)
    dy = g.randn(n)
    y.backward(dy)
    return ("gelu", f"n {n} sd {scale:g}", "gelu", [n], None, {"x": x, "dy": dy},
            {"y": (y, "fwd"), "dx": (x.grad, "bwd")})


def attention_case(seed, B, T, D, H):
    g = Gen(seed)
    m = nn.MultiheadAttention(D, H, batch_first=True)
    with torch.no_grad():
        m.in_proj_weight.copy_(g.randn(3 * D, D, scale=D ** -0.5))
        m.in_proj_bias.copy_(g.randn(3 * D, scale=0.1))
        m.out_proj.weight.copy_(g.randn(D, D, scale=D ** -0.5))
        m.out_proj.bias.copy_(g.randn(D, scale=0.1))
    x = leaf(g.randn(B, T, D))
    y, _ = m(x, x, x, need_weights=False)
    dy = g.randn(*y.shape)
    y.backward(dy)
    arrays = {"x": x, "in_w": m.in_proj_weight, "in_b": m.in_proj_bias,
              "out_w": m.out_proj.weight, "out_b": m.out_proj.bias, "dy": dy}
    return ("attention", f"[{B},{T},{D}] {H} heads", "attention", [B, T, D, H], None, arrays,
            {"y": (y, "fwd"), "dx": (x.grad, "bwd"), "din_w": (m.in_proj_weight.grad, "bwd"),
             "din_b": (m.in_proj_bias.grad, "bwd"), "dout_w": (m.out_proj.weight.grad, "bwd"),
             "dout_b": (m.out_proj.bias.grad, "bwd")})


def tokens_case(seed, B, D, h, w):
    """torchvision's VisionTransformer input path: conv output -> tokens,
    class token first, + pos_embedding, then x[:, 0]"""
    g = Gen(seed)
    x = leaf(g.randn(B, D, h, w))
    cls = leaf(g.randn(1, 1, D))
    pos = leaf(g.randn(1, h * w + 1, D, scale=0.02))
    t = x.reshape(B, D, h * w).permute(0, 2, 1)
    t = torch.cat([cls.expand(B, -1, -1), t], dim=1) + pos
    y = t[:, 0]
    dy = g.randn(B, D)
    y.backward(dy)
    return ("tokens", f"[{B},{D},{h},{w}]", "tokens", [B, D, h, w], None,
            {"x": x, "cls": cls, "pos": pos, "dy": dy},
            {"t": (t, "fwd"), "y": (y, "fwd"), "dx": (x.grad, "bwd"),
             "dcls": (cls.grad, "bwd"), "dpos": (pos.grad, "bwd")})


def all_cases():
    c = []
    s = 100
    for args in [(2, 3, 8, 8, 4, 3, 1, 1, True, True),      # 3x3 same, bias
                 (3, 5, 9, 7, 6, 3, 2, 1, False, True),     # 3x3 stride 2, odd sizes
                 (4, 16, 16, 16, 32, 3, 1, 1, False, False),
                 (4, 32, 16, 16, 64, 3, 2, 1, False, False),  # ResNet transition
                 (1, 2, 5, 11, 3, 3, 1, 0, True, False),    # no padding, non-square
                 (2, 8, 6, 6, 16, 1, 1, 0, False, False),   # 1x1
                 (2, 6, 8, 8, 12, 1, 2, 0, False, True),    # 1x1 stride 2 (downsample)
                 (2, 3, 20, 20, 8, 7, 2, 3, False, True),   # 7x7/2 pad 3 (stem)
                 (1, 3, 13, 9, 4, 7, 2, 3, True, False)]:
        s += 1
        c.append(conv_case(s, *args[:9], acc=args[9]))
    for args, kw in [((4, 3, 5, 5, 2), {}),
                     ((8, 16, 4, 4, 4), {}),
                     ((6, 4, 7, 3, 3), {"eps": 1e-3, "momentum": 0.3}),
                     # per-channel n = B*H*W small, but not 2: with n = 2,
                     # dx = (dy1 - dy2) * eps/(var + eps) * ... is a
                     # cancellation of O(1) terms in float32 (relative error
                     # up to ~var/eps * 6e-8 in torch and cdp alike)
                     ((3, 5, 1, 1, 1), {}),
                     ((2, 5, 2, 1, 1), {}),
                     ((4, 8, 8, 8, 2), {"shift": 3.0, "scale": 0.5}),
                     ((2, 32, 16, 16, 2), {"shift": -1.0, "scale": 2.0})]:
        s += 1
        c.append(bn_case(s, *args, **kw))
    for n in (1, 37, 5000):
        s += 1
        c.append(relu_case(s, n))
    for args, kw in [((2, 3, 8, 8), {}),
                     ((1, 4, 7, 9), {}),
                     ((2, 2, 5, 5), {}),
                     ((2, 8, 16, 16), {}),
                     ((2, 3, 9, 8), {"kind": "ties"}),
                     ((2, 3, 6, 7), {"kind": "negative"}),
                     ((2, 3, 8, 6), {"k": 2, "stride": 2, "pad": 0})]:
        s += 1
        c.append(maxpool_case(s, *args, **kw))
    for args in [(2, 3, 4, 4), (3, 8, 7, 7), (1, 5, 1, 1), (2, 64, 8, 8)]:
        s += 1
        c.append(avgpool_case(s, *args))
    for k, args in enumerate([(2, 3, 1, 1, 7), (2, 3, 5, 5, 3), (1, 4, 7, 9, 7), (2, 2, 8, 8, 2)]):
        c.append(adaptive_avgpool_case(9000 + k, *args))
    for args, kw in [((4, 10, 6), {}),
                     ((3, 7, 1), {"acc": True}),
                     ((16, 784, 128), {"relu": True}),
                     ((16, 128, 64), {"relu": True, "relu_dx": True, "acc": True}),
                     ((5, 64, 10), {"relu_dx": True})]:
        s += 1
        c.append(linear_case(s, *args, **kw))
    for n in (1, 100, 4096):
        s += 1
        c.append(add_case(s, n))
    for args in [(8, 10, 1.0), (5, 3, 1.0), (16, 100, 30.0), (1, 2, 5.0)]:
        s += 1
        c.append(xent_case(s, *args))
    for args, kw in [((2, 5, 8), {}),
                     ((3, 17, 192), {}),
                     ((2, 4, 7), {"eps": 1e-5, "shift": 4.0, "scale": 0.1}),
                     ((1, 50, 64), {"shift": -2.0, "scale": 3.0})]:
        s += 1
        c.append(layernorm_case(s, *args, **kw))
    for n in (1, 1000):
        s += 1
        c.append(gelu_case(s, n))
    for args in [(2, 5, 8, 2), (1, 7, 12, 3), (3, 17, 32, 4), (2, 50, 64, 1)]:
        s += 1
        c.append(attention_case(s, *args))
    for args in [(2, 8, 2, 3), (3, 16, 7, 7)]:
        s += 1
        c.append(tokens_case(s, *args))
    for n in (1, 45, 3000):
        s += 1
        c.append(relu6_case(s, n))
    # grouped and depthwise (MobileNet's 3x3 depthwise, its stride 2, a
    # channel multiplier of 2, groups of several channels, 1x1 groups)
    for args in [(2, 16, 8, 8, 16, 3, 1, 1, False, True, 16),
                 (3, 6, 9, 7, 6, 3, 2, 1, True, False, 6),
                 (2, 8, 6, 6, 16, 3, 1, 1, False, True, 8),
                 (2, 12, 7, 7, 24, 3, 1, 1, True, True, 4),
                 (4, 32, 4, 4, 64, 1, 1, 0, False, False, 2),
                 (1, 9, 11, 5, 6, 5, 2, 2, True, False, 3)]:
        s += 1
        c.append(conv_case(s, *args[:10], groups=args[10]))
    for args in [(2, 50, 0.5, 0, 1, 0, 0), (3, 700, 0.2, 4, 7, 12, 9),
                 (1, 33, 0.29623987940996116, 2, 123456, 3, 5), (4, 64, 0.9, 9, 2, 1000, 40)]:
        s += 1
        c.append(dropout_case(s, *args))
    return c


# ------------------------------------------------------------- comparison

def rel_diff(a, b):
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    if a.shape != b.shape:
        return float("inf")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return float("inf")
    d = float(np.max(np.abs(a - b))) if a.size else 0.0
    m = float(np.max(np.abs(b))) if b.size else 0.0
    return d / m if m > 0 else d


TOL = {"fwd": FWD_TOL, "bwd": BWD_TOL, "dbl": DBL_TOL, "int": 0.0}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--probe", required=True, help="path of tests/lib/layer_probe")
    ap.add_argument("--keep", help="keep the request/output files in this directory")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)

    tmp = args.keep or tempfile.mkdtemp(prefix="cdp_torch_layers.")
    os.makedirs(tmp, exist_ok=True)
    try:
        return compare(args.probe, tmp)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


def compare(probe, tmp):
    cases = all_cases()
    argv = [probe]
    for i, (_, _, layer, dims, floats, arrays, _) in enumerate(cases):
        req, out = os.path.join(tmp, f"req{i}.bin"), os.path.join(tmp, f"out{i}.bin")
        write_request(req, layer, dims, arrays, floats)
        argv += [req, out]
    try:
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=100)
    except subprocess.TimeoutExpired:
        print("FAIL: layer_probe timed out")
        return 2
    except OSError as e:
        print(f"FAIL: cannot run {probe}: {e}")
        return 2
    if r.returncode != 0:
        print(r.stdout.decode(errors="replace"))
        print(f"FAIL: layer_probe exited with {r.returncode}")
        return 2

    bad = 0
    worst = {}   # (kind, class) -> (rel, where)
    outputs = []
    for i, (kind, label, _, _, _, _, exp) in enumerate(cases):
        got = read_output(os.path.join(tmp, f"out{i}.bin"))
        outputs.append(got)
        for name, (ref, cls) in exp.items():
            ref = ref.detach().cpu().numpy() if torch.is_tensor(ref) else np.asarray(ref)
            tol = TOL[cls]
            if name not in got:
                print(f"FAIL {kind:11s} {name:11s} missing from the probe's output  [{label}]")
                bad += 1
                continue
            rel = rel_diff(got[name], ref)
            ok = rel <= tol
            bad += not ok
            what = "equal" if cls == "int" else f"tol {tol:.0e}"
            print(f"{'ok  ' if ok else 'FAIL'} {kind:11s} {name:11s} rel {rel:9.3g} ({what})  [{label}]")
            key = (kind, cls)
            if key not in worst or rel > worst[key][0]:
                worst[key] = (rel, f"{name} [{label}]")

    # Negative controls: the comparison must see a small error.  cdp's
    # results against torch's on inputs perturbed by a relative 1e-2 (one
    # element of x for the forward, of dy for the backward).
    k0 = 0  # first conv2d case
    kind, label, _, dims, _, arrays, _ = cases[k0]
    B, Cin, H, W, Cout, k, _, stride, pad, bias, _ = dims
    m = nn.Conv2d(Cin, Cout, k, stride=stride, padding=pad, bias=bool(bias))
    with torch.no_grad():
        m.weight.copy_(arrays["w"])
        if bias:
            m.bias.copy_(arrays["b"])
    x = arrays["x"].detach().clone()
    x.view(-1)[5] *= 1.0 + 1e-2
    x.requires_grad_(True)
    y = m(x)
    dy = arrays["dy"].clone()
    dy.view(-1)[5] *= 1.0 + 1e-2
    y.backward(dy)
    for name, ref, tol in (("y", y, FWD_TOL), ("dw", m.weight.grad, BWD_TOL)):
        rel = rel_diff(outputs[k0][name], ref.detach().numpy())
        ok = rel > tol
        bad += not ok
        print(f"{'ok  ' if ok else 'FAIL'} control     {name:11s} rel {rel:9.3g} must exceed "
              f"{tol:.0e} (torch on a perturbed {'x' if name == 'y' else 'dy'})  [{label}]")

    print("worst relative difference per layer:")
    for (kind, cls), (rel, where) in sorted(worst.items()):
        print(f"  {kind:11s} {cls:3s} {rel:9.3g}  {where}")
    n = sum(len(c[6]) for c in cases) + 2
    if bad:
        print(f"FAIL: {bad} of {n} comparisons disagree")
        return 1
    print(f"PASS: {n} comparisons over {len(cases)} cases agree with PyTorch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
