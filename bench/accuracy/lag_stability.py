#!/usr/bin/python3
"""The stability bounds of doc/reference.md section 3.10, found numerically:
the largest lr*h for which the update of section 3.3, applied to a quadratic
of curvature h, still converges, with a fresh gradient (dp) and with one a
step old (the lag of cdp-v1).  Prints one line per optimizer and momentum,
beside the closed form, then the same as result lines (bench/README).
Plain Python, no dependencies.

    bench/accuracy/lag_stability.py
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from bench_result import bench_result  # noqa: E402


def converges(a, beta, lag, adam, steps=6000):
    """x' = x - a * buf; buf from gradients x of `lag` steps before;
    adam: buf = beta*buf + (1-beta)*g (Adam's first moment, fixed
    denominator); else buf = beta*buf + g (torch.optim.SGD's momentum)"""
    xs = [1.0] * (lag + 1)
    buf = None
    for _ in range(steps):
        g = xs[-1 - lag]
        if adam:
            buf = (1 - beta) * g if buf is None else beta * buf + (1 - beta) * g
        else:
            buf = g if buf is None else beta * buf + g
        xs.append(xs[-1] - a * buf)
        if abs(xs[-1]) > 1e6:
            return False
    return abs(xs[-1]) < 1.0


def bound(beta, lag, adam):
    lo, hi = 1e-4, 1e3
    for _ in range(60):
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if converges(mid, beta, lag, adam) else (lo, mid)
    return lo


def closed(beta, lag, adam):
    if lag == 0:
        return 2 * (1 + beta) / (1 - beta) if adam else 2 * (1 + beta)
    return 1.0 if adam else 1 - beta


def main():
    print(f"{'optimizer':<8} {'momentum':>8} {'lag':>3} {'lr*h bound':>11} {'closed form':>11}")
    results = []
    for adam in (False, True):
        for beta in (0.0, 0.5, 0.8, 0.9):
            for lag in (0, 1):
                opt = "adamw" if adam else "sgd"
                found, exact = bound(beta, lag, adam), closed(beta, lag, adam)
                print(f"{opt:<8} {beta:>8} {lag:>3} {found:>11.3f} {exact:>11.3f}")
                cfg = f"{opt} momentum={beta} lag={lag}"
                results += [(cfg, "lr_h_bound", found), (cfg, "lr_h_closed_form", exact)]
    for cfg, metric, value in results:
        bench_result("lag-stability", cfg, metric, value, "lr*h")


if __name__ == "__main__":
    main()
