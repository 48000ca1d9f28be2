#!/usr/bin/python3
"""The bf16 bound of a training step on the CPU (bench/throughput/bf16_speed.sh):
the step's product FLOPs at the best rate a bf16 GEMM reaches here, on
--threads threads.  The products: each convolution's three im2col products
over the whole batch (forward y = w col, dW = dy col^T, dcol = w^T dy, the
first layer's dcol left out, as no step computes it); each Linear layer's
three (y = x W^T, dW = dy^T x, dx = dy W); each multi-head attention's
projections (QKV and out, three products each) and its six batched
products per sample and head (Q K^T, P V; dP = dO V^T, dV = P^T dO,
dQ = dS K, dK = dS^T Q).  The rate is the best GFLOP/s of torch.matmul on
bf16 operands (PyTorch 1.13 runs it through oneDNN's bf16 GEMM, float32
accumulation, AVX512_BF16 where the CPU has it) over the model's own 2-D
product shapes and three square ones, best of --rounds per shape.  No step
can beat it: it counts the products' multiply-adds alone, at the machine's
best bf16 GEMM speed (PyTorch's matmul is far slower than that on the thin
shapes, K = 64 or 128: the bound takes the rate, not those times).

The shapes come from the PyTorch model itself
(tests/torch/torch_model_reference.py's builder, the same network cdp_run
trains), one forward hook per Conv2d, Linear and MultiheadAttention.

Output: one line per shape (M N K, best ms, GFLOP/s), then
  BOUND model=M batch=B threads=T step_s=S gflop=G peak_gflops=R
(S = G / R)
"""
import argparse
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "torch"))
from torch_model_reference import build_model  # noqa: E402


def step_gemms(model, shape, batch):
    """(M, N, K, count) of every product of a training step"""
    seen = []

    def conv(mod, inp, out):
        cin = mod.in_channels // mod.groups
        k = mod.kernel_size[0] * mod.kernel_size[1] * cin
        npix = out.shape[0] * out.shape[2] * out.shape[3]
        first = len(seen) == 0
        seen.append((mod.out_channels, npix, k, 1))       # y[Cout, B*P] = w col
        seen.append((mod.out_channels, k, npix, 1))       # dW = dy col^T
        if not first:
            seen.append((k, npix, mod.out_channels, 1))   # dcol = w^T dy

    def linear(mod, inp, out):
        r = inp[0].numel() // mod.in_features
        i, o = mod.in_features, mod.out_features
        seen.extend([(r, o, i, 1), (o, i, r, 1), (r, i, o, 1)])

    def attention(mod, inp, out):
        b, t, d = out[0].shape                      # [B, T, D] (batch_first)
        h = mod.num_heads
        r, hd = b * t, d // h
        for o in (3 * d, d):                        # in_proj, out_proj
            seen.extend([(r, o, d, 1), (o, d, r, 1), (r, d, o, 1)])
        seen.extend([(t, t, hd, 2 * b * h),         # Q K^T, dP = dO V^T
                     (t, hd, t, 4 * b * h)])        # P V, dV, dQ, dK

    hs = []
    for m in model.modules():
        if isinstance(m, torch.nn.Conv2d):
            hs.append(m.register_forward_hook(conv))
        elif isinstance(m, torch.nn.MultiheadAttention):
            hs.append(m.register_forward_hook(attention))
        elif isinstance(m, torch.nn.Linear) and not isinstance(
                m, torch.nn.modules.linear.NonDynamicallyQuantizableLinear):
            hs.append(m.register_forward_hook(linear))   # (MHA's out_proj: above)
    with torch.no_grad():
        model(torch.zeros((batch,) + tuple(shape)))
    for hk in hs:
        hk.remove()
    return seen


def best_ms(M, N, K, rounds):
    a = torch.randn(M, K).bfloat16()
    b = torch.randn(K, N).bfloat16()
    torch.matmul(a, b)
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        torch.matmul(a, b)
        best = min(best, time.perf_counter() - t)
    return best * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="vit-tiny")
    ap.add_argument("--shape", default="1x28x28", help="CxHxW of one sample")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    shape = [int(v) for v in a.shape.lower().split("x")]
    torch.set_num_threads(a.threads)
    model = build_model(a.model, in_channels=shape[0], num_classes=a.classes,
                        image_size=shape[2])
    gemms = step_gemms(model, shape, a.batch)
    flop = sum(2.0 * M * N * K * n for M, N, K, n in gemms)
    peak = 0.0
    for M, N, K in sorted(set((M, N, K) for M, N, K, n in gemms if n == 1)) + [(1024, 1024, 1024), (2048, 2048, 2048),
                                         (512, 4096, 2048)]:
        ms = best_ms(M, N, K, a.rounds)
        rate = 2.0 * M * N * K / ms / 1e6
        peak = max(peak, rate)
        print(f"  gemm M={M} N={N} K={K}: {ms:.3f} ms ({rate:.1f} GFLOP/s)", flush=True)
    print(f"BOUND model={a.model} batch={a.batch} threads={a.threads} "
          f"step_s={flop / peak / 1e9:.4f} gflop={flop / 1e9:.2f} peak_gflops={peak:.1f}",
          flush=True)

if __name__ == "__main__":
    main()
