#!/usr/bin/env python3
"""Adds up ncu's per-launch kernel times (``ncu --csv --page raw --metrics
gpu__time_duration.sum``, on stdin) per kernel, for bench/gpu/profile.sh.

Kernels are named as ncu names them, shortened to the function's name
(template arguments and parameter lists dropped), so every launch of
k_im2col or of one cuBLAS kernel counts together.  The first step (cuBLAS's
heuristics, first-touch allocations) is left out when the run has more than
one: launches are split into steps by their order, assuming every step
launches the same number of kernels (true of a fixed schedule; checked by
the count being divisible by STEPS, else all launches are used).  Ends with
the figures as result lines (bench/README): kernel time and wall time per
step, and every listed kernel's.
"""
import argparse
import csv
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from bench_result import bench_result  # noqa: E402

UNITS = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3,
         "msecond": 1e-3, "s": 1.0, "second": 1.0}


def short(name):
    name = raw = name.strip()
    # "void k_im2col(cdp_conv_shape, ...)" -> "k_im2col"; templates dropped
    depth, out = 0, []
    for ch in name:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    name = "".join(out).split("(")[0].strip()
    name = re.sub(r"^(void|static|__global__)\s+", "", name).split("::")[-1] or "?"
    if name.lower() in ("kernel", "kernel2", "device_kernel"):
        # cutlass-style wrappers: what runs is named by the template argument
        inner = re.search(r"<\s*(?:[A-Za-z_][A-Za-z0-9_]*::)*([A-Za-z_][A-Za-z0-9_]*)", raw)
        if inner:
            name = "%s<%s>" % (name, inner.group(1))
    return name


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", default="?")
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--wall", type=float, default=0.0, help="mean step wall time without ncu, s")
    a = ap.parse_args()
    rows = [r for r in csv.reader(line for line in sys.stdin if line.startswith('"'))]
    if not rows:
        print("RESULT profile FAIL: %s: no CSV from ncu" % a.case)
        return 1
    head = rows[0]
    try:
        kn = next(i for i, h in enumerate(head) if h.strip() == "Kernel Name")
        tm = next(i for i, h in enumerate(head) if "gpu__time_duration" in h)
    except StopIteration:
        print("RESULT profile FAIL: %s: no 'Kernel Name' / gpu__time_duration column in %s"
              % (a.case, head[:12]))
        return 1
    scale, data = 1e-9, rows[1:]
    if data and data[0][tm].strip() not in ("",) and not re.match(r"^[0-9.,]+$", data[0][tm].strip()):
        scale = UNITS.get(data[0][tm].strip(), 1e-9)   # the units row
        data = data[1:]
    launches = []
    for r in data:
        if len(r) <= max(kn, tm):
            continue
        try:
            launches.append((short(r[kn]), float(r[tm].replace(",", "")) * scale))
        except ValueError:
            continue
    if not launches:
        print("RESULT profile FAIL: %s: no timed launch" % a.case)
        return 1
    n, steps = len(launches), a.steps
    if steps > 1 and n % steps == 0:
        per = n // steps
        launches, counted = launches[per:], steps - 1
        note = "steps 2..%d (%d launches a step)" % (steps, per)
    else:
        counted, note = 1, "all %d launches (not divisible into %d equal steps)" % (n, steps)
    tot = {}
    cnt = {}
    for name, t in launches:
        tot[name] = tot.get(name, 0.0) + t
        cnt[name] = cnt.get(name, 0) + 1
    gpu = sum(tot.values()) / counted
    print("  %s: %s; kernel time %.2f ms a step%s" % (
        a.case, note, 1e3 * gpu,
        ", wall %.2f ms a step without ncu: %.0f%% in kernels" % (1e3 * a.wall, 100 * gpu / a.wall)
        if a.wall > 0 else ""))
    print("  %-64s %8s %10s %6s" % ("kernel", "launches", "ms/step", "%"))
    order = sorted(tot, key=lambda k: -tot[k])
    for k in order[:a.top]:
        print("  %-64s %8d %10.3f %6.1f" % (k[:64], cnt[k] // counted, 1e3 * tot[k] / counted,
                                            100 * tot[k] / counted / gpu))
    print("RESULT profile %s: kernels %.2f ms/step%s; top: %s" % (
        a.case, 1e3 * gpu,
        " of %.2f wall" % (1e3 * a.wall) if a.wall > 0 else "",
        ", ".join("%s %.0f%%" % (k[:32], 100 * tot[k] / counted / gpu) for k in order[:5])))
    bench_result("gpu-profile", a.case, "kernel_time", 1e3 * gpu, "ms/step")
    if a.wall > 0:
        bench_result("gpu-profile", a.case, "wall_time", 1e3 * a.wall, "ms/step")
    for k in order[:a.top]:
        bench_result("gpu-profile", "%s %s" % (a.case, k), "kernel_time", 1e3 * tot[k] / counted,
                     "ms/step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
