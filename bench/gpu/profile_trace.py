#!/usr/bin/env python3
"""Adds up bench/gpu/kernel_trace.c's trace: GPU time per step by kernel.

    profile_trace.py --case NAME --steps S [--top K] < trace.tsv

S is the number of training steps the traced process ran.  The steps are
found in the trace itself: among the kernels launched exactly S times, the
one whose launches are the most evenly spaced marks one point of every step
(in a training loop, the loss or the first layer), and the interval between
two of its launches holds one step.  The first interval (warm-up: cuBLAS and
cuDNN heuristics, allocations) and the last (records of the last 100 ms can
be missing) are left out; the figures are per step over the others:

  span     the interval's length on the GPU clock (a step's wall time, as
           far as the GPU sees it)
  busy     the union of the kernels', copies' and memsets' intervals in it
           (span - busy: the GPU waited for the host, i.e. launch and host
           overhead, synchronisation)
  by kind  the kernels' summed time by kind (the name's family: GEMM,
           convolution, BatchNorm, ...)
  top K    the kernels with the largest summed time, with their launches

Prints a table and result lines (bench/README, "Result lines"):
  RESULT trace CASE: span MS ms, busy MS ms (P%), kernels N a step
"""
import argparse
import collections
import re
import shutil
import statistics
import subprocess
import sys

KINDS = [  # (kind, pattern on the demangled name, lower case), first match wins
    ("copy", r"^copy kind"),
    ("memset", r"^memset"),
    ("conv (cuDNN)", r"cudnn|conv2d|implicit_convolve|implicit_gemm|winograd|fft|dgrad|wgrad|fprop"),
    ("GEMM (cuBLAS)", r"gemm|cutlass|sm\d+_xmma|ampere_|hopper_|magma|splitk|cublas"),
    ("im2col/col2im", r"im2col|col2im"),
    ("batchnorm", r"batch_?norm|\bbn_|_bn\b|k_bn"),
    ("layernorm", r"layer_?norm|k_ln"),
    ("softmax", r"softmax"),
    ("attention", r"attention|attn|flash|fmha"),
    ("loss", r"nll|cross_?entropy|loss"),
    ("optimizer", r"sgd|adam|momentum|optim|foreach|multi_tensor"),
    ("reduce", r"reduce|sum|colsum|col_sum"),
    ("pool", r"pool"),
    ("elementwise", r"elementwise|relu|gelu|add|scale|copy|fill|cast|bias|unroll|vectorized"),
]


def demangle(names):
    if not names or not shutil.which("c++filt"):
        return {n: n for n in names}
    out = subprocess.run(["c++filt"], input="\n".join(names) + "\n", capture_output=True,
                         text=True).stdout.splitlines()
    return dict(zip(names, out)) if len(out) == len(names) else {n: n for n in names}


def short(name, width=90):
    name = re.sub(r"\s+", " ", name)
    return name if len(name) <= width else name[:width - 3] + "..."


def kind_of(name):
    low = name.lower()
    for kind, pat in KINDS:
        if re.search(pat, low):
            return kind
    return "other"


def busy_time(intervals, lo, hi):
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted((max(s, lo), min(e, hi)) for s, e in intervals if e > lo and s < hi):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    recs = []
    for line in sys.stdin:
        f = line.rstrip("\n").split("\t", 3)
        if len(f) == 4 and f[0] in "KCM":
            recs.append((f[0], int(f[1]), int(f[2]), f[3]))
    if not recs:
        print(f"RESULT trace FAIL: {a.case}: no records (CUPTI did not trace)")
        return 1
    starts = collections.defaultdict(list)
    for k, s, e, n in recs:
        if k == "K":
            starts[n].append(s)
    best = None
    for n, st in starts.items():
        if len(st) != a.steps or a.steps < 4:
            continue
        st.sort()
        gaps = [y - x for x, y in zip(st, st[1:])]
        cv = statistics.pstdev(gaps[1:]) / max(statistics.mean(gaps[1:]), 1)
        if best is None or cv < best[0]:
            best = (cv, n, st)
    if best is None:
        print(f"RESULT trace FAIL: {a.case}: no kernel launched exactly {a.steps} times "
              f"(at least 4 steps are needed) to mark the steps")
        return 1
    _, marker, st = best
    windows = list(zip(st[1:-2], st[2:-1]))  # leave the first and the last out
    if not windows:
        windows = [(st[1], st[-1])]
    names = demangle(sorted({n for k, s, e, n in recs if k == "K"}))
    per_name = collections.defaultdict(lambda: [0, 0])
    spans, busies, launches = [], [], 0
    intervals = [(s, e) for k, s, e, n in recs]
    for lo, hi in windows:
        spans.append(hi - lo)
        busies.append(busy_time(intervals, lo, hi))
        for k, s, e, n in recs:
            if lo <= s < hi:
                key = names.get(n, n) if k == "K" else n.split(",")[0]
                per_name[key][0] += e - s
                per_name[key][1] += 1
                launches += k == "K"
    w = len(windows)
    span = sum(spans) / w / 1e6
    busy = sum(busies) / w / 1e6
    by_kind = collections.defaultdict(float)
    for n, (t, c) in per_name.items():
        by_kind[kind_of(n)] += t / w / 1e6
    print(f"== {a.case}: {w} steps measured (marker {short(names.get(marker, marker), 60)}); "
          f"a step: span {span:.3f} ms, busy {busy:.3f} ms ({100 * busy / span:.1f}%), "
          f"{launches / w:.0f} kernels")
    print("  by kind (ms a step, share of busy):")
    for kd, t in sorted(by_kind.items(), key=lambda x: -x[1]):
        print(f"    {kd:16s} {t:9.3f}  {100 * t / busy:5.1f}%")
    print(f"  top {a.top} (ms a step, launches a step, name):")
    for n, (t, c) in sorted(per_name.items(), key=lambda x: -x[1][0])[:a.top]:
        print(f"    {t / w / 1e6:9.3f} {c / w:6.1f}  {short(n)}")
    print(f"RESULT trace {a.case}: span {span:.3f} ms, busy {busy:.3f} ms "
          f"({100 * busy / span:.1f}%), kernels {launches / w:.0f} a step; "
          + ", ".join(f"{kd} {t:.2f}" for kd, t in sorted(by_kind.items(), key=lambda x: -x[1])[:6]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
