#!/usr/bin/env python3
"""Per-step wall times of a cdp_run --trace file (Chrome trace JSON).

A step's duration is the time between the starts of worker 0's forward of
stage 0 ("FWD w0 l0") in consecutive steps on rank 0 (the timeline is
periodic, so this is the step period under every rule).  The first --skip
steps are left out (warm-up).  Prints: steps mean_s median_s p10_s, where
p10 is the 10th percentile (the fast steps: on a machine shared with other
jobs, it approximates the uncontended step time better than the mean).

usage: trace_steps.py TRACE.json [--skip 5] [--pid 0]
"""
import argparse
import json
import statistics


def quantile(v, q):
    v = sorted(v)
    if not v:
        return float("nan")
    pos = q * (len(v) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def step_times(path, skip=5, pid=0):
    with open(path) as f:
        ev = json.load(f)["traceEvents"]
    starts = {}
    for e in ev:
        if e.get("ph") == "X" and e.get("pid") == pid and e.get("name") == "FWD w0 l0":
            k = e["args"]["step"]
            starts[k] = min(starts.get(k, float("inf")), e["ts"])
    ks = sorted(starts)
    d = [(starts[b] - starts[a]) * 1e-6 / (b - a) for a, b in zip(ks, ks[1:]) if a >= skip]
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--skip", type=int, default=5)
    ap.add_argument("--pid", type=int, default=0)
    a = ap.parse_args()
    d = step_times(a.trace, a.skip, a.pid)
    if not d:
        print("0 nan nan nan")
        return
    print(f"{len(d)} {statistics.mean(d):.6g} {statistics.median(d):.6g} {quantile(d, 0.1):.6g}")


if __name__ == "__main__":
    main()
