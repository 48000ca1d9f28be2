#!/usr/bin/python3
"""The bf16 bound of a ResNet training step on the CPU
(bench/throughput/bf16_conv_speed.sh): the step's convolution FLOPs (each
convolution's three im2col products over the whole batch: forward y = w
col, dW = dy col^T, dcol = w^T dy, the first layer's dcol left out, as no
step computes it) at the best rate a bf16 GEMM reaches here, on --threads
threads.  The rate is the best GFLOP/s of torch.matmul on bf16 operands
(PyTorch 1.13 runs it through oneDNN's bf16 GEMM, float32 accumulation,
AVX512_BF16 where the CPU has it) over the model's own product shapes and
three square ones, best of --rounds per shape.  No step can beat it: it
counts the convolutions' multiply-adds alone, at the machine's best bf16
GEMM speed (PyTorch's matmul is far slower than that on the thin shapes,
K = 64 or 128: the bound takes the rate, not those times).

The convolution shapes come from the PyTorch model itself
(tests/torch/torch_model_reference.py's builder, the same network cdp_run
trains), one forward hook per Conv2d.

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


def conv_gemms(model, shape, batch):
    """(M, N, K) of every product of a training step's convolutions"""
    seen = []

    def hook(mod, inp, out):
        cin = mod.in_channels // mod.groups
        k = mod.kernel_size[0] * mod.kernel_size[1] * cin
        seen.append((mod.out_channels, out.shape[0] * out.shape[2] * out.shape[3], k,
                     len(seen) == 0))

    hs = [m.register_forward_hook(hook) for m in model.modules()
          if isinstance(m, torch.nn.Conv2d)]
    with torch.no_grad():
        model(torch.zeros((batch,) + tuple(shape)))
    for h in hs:
        h.remove()
    gemms = []
    for cout, npix, k, first in seen:
        gemms.append((cout, npix, k))       # y[Cout, B*P] = w[Cout, K] col[K, B*P]
        gemms.append((cout, k, npix))       # dW[Cout, K] = dy[Cout, B*P] col^T
        if not first:
            gemms.append((k, npix, cout))   # dcol[K, B*P] = w^T dy
    return gemms


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
    ap.add_argument("--model", default="resnet18-cifar")
    ap.add_argument("--shape", default="3x32x32", help="CxHxW of one sample")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    shape = [int(v) for v in a.shape.lower().split("x")]
    torch.set_num_threads(a.threads)
    model = build_model(a.model, in_channels=shape[0], num_classes=a.classes,
                        image_size=shape[2])
    gemms = conv_gemms(model, shape, a.batch)
    flop = sum(2.0 * M * N * K for M, N, K in gemms)
    peak = 0.0
    for M, N, K in sorted(set(gemms)) + [(1024, 1024, 1024), (2048, 2048, 2048),
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
