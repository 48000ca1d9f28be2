#!/usr/bin/env python3
"""cdp's optimizers and learning-rate schedules against torch.optim.

For each case, random float32 parameters and ~50 random gradients go
through tests/lib/optim_probe (cdp_optim_step_at + the CPU backend's sgd/adamw)
and through torch.optim.SGD / torch.optim.AdamW driven by a
torch.optim.lr_scheduler.LambdaLR whose factor is the schedule of
doc/reference.md section 3.5:

    step:    gamma ** ((c // steps_per_epoch) // decay_epochs)
    cosine:  0.5 * (1 + cos(pi * min(c, T-1) / (T-1)))      (1 for T = 1)
    warm-up: times (c + 1) / W for c < W

The lr of every update must agree to float precision (relative 1e-6) and the
parameters after every update within float tolerance.  Exit 0 pass, 1 fail.
"""
import argparse
import math
import subprocess
import sys

import numpy as np
import torch

CASES = [
    # kind, schedule, lr, momentum, wd, betas, eps, decay_epochs, gamma, spe, warmup, T, gscale
    ("sgd", "step", 0.05, 0.9, 5e-4, (0.9, 0.999), 1e-8, 2, 0.5, 10, 0, 50, 1.0),
    ("sgd", "step", 0.05, 0.9, 5e-4, (0.9, 0.999), 1e-8, 1, 0.5, 10, 7, 50, 0.25),
    ("sgd", "cosine", 0.1, 0.9, 1e-4, (0.9, 0.999), 1e-8, 0, 0.5, 10, 5, 50, 0.5),
    ("adamw", "cosine", 1e-2, 0.0, 0.01, (0.9, 0.999), 1e-8, 0, 0.5, 10, 5, 50, 0.25),
    ("adamw", "step", 3e-3, 0.0, 0.05, (0.8, 0.99), 1e-6, 2, 0.3, 10, 3, 50, 1.0),
    ("adamw", "step", 1e-3, 0.0, 0.0, (0.9, 0.999), 1e-8, 0, 0.5, 10, 0, 50, 1.0 / 3.0),
    ("adamw", "cosine", 2e-2, 0.0, 0.1, (0.5, 0.9), 1e-4, 0, 0.5, 10, 0, 40, 1.0),
]


def factor(c, schedule, decay_epochs, gamma, spe, warmup, T):
    if schedule == "cosine":
        f = 1.0 if T <= 1 else 0.5 * (1.0 + math.cos(math.pi * min(c, T - 1) / (T - 1)))
    else:
        f = gamma ** ((c // spe) // decay_epochs) if decay_epochs > 0 else 1.0
    if c < warmup:
        f *= (c + 1) / warmup
    return f


def run_case(probe, case, n, steps, rng):
    kind, sched, lr, mom, wd, betas, eps, dec, gamma, spe, warm, T, gscale = case
    theta0 = rng.standard_normal(n).astype(np.float32)
    grads = (rng.standard_normal((steps, n)) * 2.0).astype(np.float32)
    grads[3, :4] = 0.0   # zero gradients too
    text = " ".join("%.9g" % v for v in theta0) + "\n"
    text += "\n".join(" ".join("%.9g" % v for v in g) for g in grads) + "\n"
    gs = np.float32(gscale)
    args = [probe, kind, sched, repr(lr), repr(mom), repr(wd), repr(betas[0]), repr(betas[1]),
            repr(eps), str(dec), repr(gamma), str(spe), str(warm), str(T), "%.9g" % gs,
            str(n), str(steps)]
    out = subprocess.run(args, input=text, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        return "optim_probe failed (%d): %s" % (out.returncode, out.stderr.strip())
    rows = [np.array(line.split(), dtype=np.float64) for line in out.stdout.splitlines()]
    if len(rows) != steps:
        return "optim_probe printed %d rows, not %d" % (len(rows), steps)

    p = torch.nn.Parameter(torch.from_numpy(theta0.copy()))
    if kind == "adamw":
        opt = torch.optim.AdamW([p], lr=lr, betas=betas, eps=eps, weight_decay=wd, foreach=False)
    else:
        opt = torch.optim.SGD([p], lr=lr, momentum=mom, weight_decay=wd, foreach=False)
    sch = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda c: factor(c, sched, dec, gamma, spe, warm, T))
    worst_lr = worst_p = 0.0
    for c in range(steps):
        torch_lr = opt.param_groups[0]["lr"]
        # the gradient as the executor hands it: the sum times 1/N, in float
        p.grad = torch.from_numpy(grads[c]) * torch.tensor(gs, dtype=torch.float32)
        opt.step()
        sch.step()
        c_lr, c_p = rows[c][0], rows[c][1:]
        d_lr = abs(c_lr - torch_lr)
        if d_lr > 1e-6 * abs(torch_lr) + 1e-30:
            return "update %d: lr %.9g, torch %.9g" % (c, c_lr, torch_lr)
        worst_lr = max(worst_lr, d_lr / max(abs(torch_lr), 1e-30))
        tp = p.detach().numpy().astype(np.float64)
        d = np.abs(c_p - tp)
        tol = 2e-6 * np.maximum(np.abs(tp), 1.0)
        if np.any(d > tol):
            i = int(np.argmax(d - tol))
            return "update %d: theta[%d] %.9g, torch %.9g" % (c, i, c_p[i], tp[i])
        worst_p = max(worst_p, float(np.max(d / np.maximum(np.abs(tp), 1.0))))
    return (worst_lr, worst_p)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--probe", required=True)
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--steps", type=int, default=50)
    a = ap.parse_args()
    torch.set_num_threads(1)
    rng = np.random.default_rng(20240601)
    failed = 0
    for case in CASES:
        steps = min(a.steps, case[11])
        r = run_case(a.probe, case, a.n, steps, rng)
        name = "%s %s lr=%g wd=%g warmup=%d T=%d gscale=%.3g" % (
            case[0], case[1], case[2], case[4], case[10], case[11], case[12])
        if isinstance(r, str):
            print("FAIL: %s: %s" % (name, r))
            failed += 1
        else:
            print("ok: %s: %d updates, lr rel diff %.2g, params diff %.2g" % (name, steps, r[0], r[1]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
