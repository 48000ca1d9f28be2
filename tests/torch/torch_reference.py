#!/usr/bin/python3
"""Independent PyTorch implementation of doc/reference.md section 3 for the MLP.

It shares no code with cdp: it reads the Fashion-MNIST IDX files and the
safetensors weights itself, evaluates

    P_l(0)   = --init-weights
    P_l(c+1) = SGD(P_l(c), G_l(c))        (torch.optim.SGD, float32)
    P_l(-1)  = P_l(0)
    G_l(c)   = (1/N) * sum_{i=0..N-1, in this order} dLoss_i/dtheta_l
               with worker i of step c at parameters P_l(c - lag(i, l))

for the rules dp, cdp-v1 and cdp-v2, and writes P(K) after K steps (the drain
applies every gradient).  Data: --no-shuffle semantics, step k takes samples
[k*N*B, (k+1)*N*B) of the training set in file order (wrapping at the end of
an epoch), worker i the slice [i*B, (i+1)*B) of those; pixels = byte / 255.

Usage (see --help):
    torch_reference.py --init-weights W.st --workers 4 --batch 16 --steps 20 \
        --lr 0.05 --momentum 0.9 --weight-decay 5e-4 --rule cdp-v2 \
        --stages-split 1,1,1 --out ref.st --compare cdp.st --tol 1e-4
    torch_reference.py --write-init W.st --model mlp:784-128-64-10 --seed 7

Exit status: 0 ok, 1 comparison above --tol, 2 usage or file error.
"""
import argparse
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

# the file formats: the installed examples' module, from the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
import cdp_files  # noqa: E402
from cdp_files import idx_path, idx_read, st_write  # noqa: E402

# ----------------------------------------------------------------- files


def st_read(path):
    """name -> float32 tensor (the MLP's parameters)"""
    return {k: v.float() for k, v in cdp_files.st_read(path).items()}


# ----------------------------------------------------------------- data


def load_train(data_dir):
    x = idx_read(idx_path(data_dir, "train-images-idx3-ubyte"))
    y = idx_read(idx_path(data_dir, "train-labels-idx1-ubyte"))
    x = x.reshape(x.shape[0], -1)
    return x, y.astype(np.int64)


# ----------------------------------------------------------------- model


def layer_count(params):
    j = 0
    while f"fc{j}.weight" in params:
        j += 1
    if j == 0:
        raise ValueError("no fc0.weight in the weights file")
    return j


def parse_split(text, nlayers):
    if text is None:
        return [1] * nlayers
    split = [int(s) for s in text.split(",") if s.strip()]
    if any(s < 1 for s in split) or sum(split) != nlayers:
        raise ValueError(f"stage split {text} does not partition {nlayers} layers")
    return split


def offsets(rule, n, nstages):
    if rule == "dp":
        return [0] * n
    return [(i * 2 * nstages) // n for i in range(n)]


def lag_table(rule, n, nstages):
    off = offsets(rule, n, nstages)
    lag = [[0] * nstages for _ in range(n)]
    for i in range(n):
        for s in range(nstages):
            if rule == "dp":
                lag[i][s] = 0
            elif rule == "cdp-v1":
                lag[i][s] = 1
            elif rule == "cdp-v2":
                lag[i][s] = 0 if off[n - 1] - off[i] <= 2 * s else 1
            else:
                raise ValueError(f"unknown rule {rule}")
    return lag


def forward_loss(x, y, layers):
    """layers: list of (W [out,in], b [out]); ReLU between, not after the last."""
    h = x
    for j, (w, b) in enumerate(layers):
        h = F.linear(h, w, b)
        if j + 1 < len(layers):
            h = torch.relu(h)
    return F.cross_entropy(h, y, reduction="mean")


# ----------------------------------------------------------------- bf16


def bf16(t):
    """R(t) of doc/reference.md 3.12: t rounded to bfloat16 (to nearest, ties
    to even: torch's float -> bfloat16 conversion), kept in float32."""
    return t.to(torch.bfloat16).to(torch.float32)


class LinearBF16(torch.autograd.Function):
    """A Linear layer of --precision bf16 as doc/reference.md 3.12 specifies
    it, written from the table, not from cdp's code: the product reads R(W)
    and the (already rounded) input, sums in float32, adds the float32 bias;
    the layer's output is R(that).  Backward: the products read R(dy), the
    gradient of the output as they read it; dW and dx are float32 sums of
    bf16 products; db the float32 column sum of that R(dy)."""

    @staticmethod
    def forward(ctx, x, w, b, round_out):
        wr = bf16(w)
        ctx.save_for_backward(x, wr)
        y = F.linear(x, wr, b)
        return bf16(y) if round_out else y

    @staticmethod
    def backward(ctx, dy):
        x, wr = ctx.saved_tensors
        dyr = bf16(dy)
        return dyr @ wr, dyr.t() @ x, dyr.sum(0), None


def forward_loss_bf16(x, y, layers, error=None):
    """forward_loss under --precision bf16 (3.12): the input R(x), each
    Linear through LinearBF16, ReLU of a rounded value (rounded already),
    the loss float32 from the rounded logits.  error "activation": the
    first layer's output left in float32 (a negative control)."""
    h = bf16(x)
    for j, (w, b) in enumerate(layers):
        h = LinearBF16.apply(h, w, b, not (error == "activation" and j == 0))
        if j + 1 < len(layers):
            h = torch.relu(h)
    return F.cross_entropy(h, y, reduction="mean")


def train(init, split, rule, n, batch, steps, lr, momentum, wd, xs, ys, threads=None,
          precision="fp32", error=None):
    if threads:
        torch.set_num_threads(threads)
    nl = len(split)
    stage_of = []
    for s, cnt in enumerate(split):
        stage_of += [s] * cnt
    names = []
    for j in range(len(stage_of)):
        names += [f"fc{j}.weight", f"fc{j}.bias"]
    # current parameters P(c) as leaf tensors owned by the optimiser
    cur = {k: init[k].clone().float() for k in names}
    for t in cur.values():
        t.requires_grad_(False)
    prev = {k: v.clone() for k, v in cur.items()}       # P(c-1), P(-1) = P(0)
    opt = torch.optim.SGD(list(cur.values()), lr=lr, momentum=momentum,
                          weight_decay=wd)
    lag = lag_table(rule, n, nl)
    ntrain = xs.shape[0]
    inv_n = torch.tensor(1.0 / n, dtype=torch.float32)
    for k in range(steps):
        base = k * n * batch
        gsum = {name: None for name in names}
        for i in range(n):
            idx = (base + i * batch + np.arange(batch)) % ntrain
            x = torch.from_numpy(xs[idx]).float() / 255.0
            y = torch.from_numpy(ys[idx])
            leaves = {}
            layers = []
            for j, s in enumerate(stage_of):
                src = prev if (lag[i][s] == 1 and k >= 1) else cur
                w = src[f"fc{j}.weight"].detach().clone().requires_grad_(True)
                b = src[f"fc{j}.bias"].detach().clone().requires_grad_(True)
                leaves[f"fc{j}.weight"] = w
                leaves[f"fc{j}.bias"] = b
                layers.append((w, b))
            if precision == "bf16":
                loss = forward_loss_bf16(x, y, layers, error)
            else:
                loss = forward_loss(x, y, layers)
            loss.backward()
            for name in names:
                g = leaves[name].grad
                gsum[name] = g.clone() if gsum[name] is None else gsum[name] + g
        # the update of step k: P(k+1) = SGD(P(k), G(k))
        prev = {name: cur[name].detach().clone() for name in names}
        for name in names:
            cur[name].grad = gsum[name] * inv_n
            if error == "grad-sum":             # the mean gradient in bfloat16
                cur[name].grad = bf16(cur[name].grad)
        with torch.no_grad():
            opt.step()
    return {name: cur[name].detach().clone() for name in names}


# ----------------------------------------------------------------- compare


def compare(mine, other_path, tol):
    other = st_read(other_path)
    worst = 0.0
    num = 0.0
    den = 0.0
    ok = True
    for name, ref in mine.items():
        if name not in other:
            print(f"  {name}: missing in {other_path}")
            ok = False
            continue
        got = other[name]
        if tuple(got.shape) != tuple(ref.shape):
            print(f"  {name}: shape {tuple(got.shape)} != {tuple(ref.shape)}")
            ok = False
            continue
        d = (got.double() - ref.double()).abs().max().item()
        m = ref.double().abs().max().item()
        rel = d / m if m > 0 else d
        num = max(num, d)
        den = max(den, m)
        worst = max(worst, rel)
        print(f"  {name:14s} max|a-b| {d:.3e}  max|b| {m:.3e}  rel {rel:.3e}")
    overall = num / den if den > 0 else num
    print(f"  overall rel {overall:.3e} (worst tensor {worst:.3e}), tol {tol:.1e}")
    return ok and overall <= tol and worst <= tol, overall, worst


# ----------------------------------------------------------------- main


def write_init(path, spec, seed):
    if spec.startswith("mlp:"):
        spec = spec[4:]
    dims = [int(s) for s in spec.split("-")]
    g = torch.Generator().manual_seed(seed)
    out = {}
    for j in range(len(dims) - 1):
        fan_in = dims[j]
        bound = 1.0 / fan_in ** 0.5
        out[f"fc{j}.weight"] = (torch.rand(dims[j + 1], dims[j], generator=g) * 2 - 1) * bound
        out[f"fc{j}.bias"] = (torch.rand(dims[j + 1], generator=g) * 2 - 1) * bound
    st_write(path, out, {"format": "pt", "producer": "torch_reference.py", "seed": seed})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--init-weights")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--rule", choices=["dp", "cdp-v1", "cdp-v2"], default="cdp-v2")
    ap.add_argument("--stages-split", "--stage-layers", dest="split",
                    help="layers per stage, e.g. 1,1,1 [one layer per stage]")
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--threads", type=int, default=0, help="torch threads [torch default]")
    ap.add_argument("--out", help="write P(K) here (safetensors)")
    ap.add_argument("--compare", help="cdp_run --save-weights file to compare with")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--write-init", metavar="FILE",
                    help="only write initial weights (torch.nn.Linear's init) and exit")
    ap.add_argument("--case", action="append", default=[], metavar="RULE:N:FILE",
                    help="repeatable: run rule RULE with N workers and compare with FILE "
                         "(overrides --rule, --workers, --compare; one process, one data load)")
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                    help="bf16: doc/reference.md 3.12's roundings [fp32]")
    ap.add_argument("--bf16-error", choices=("activation", "grad-sum"),
                    help="a deliberate misstep (negative controls): the first layer's output "
                         "kept in float32, or the mean gradient rounded to bfloat16")
    ap.add_argument("--model", default="mlp:784-128-64-10", help="for --write-init")
    ap.add_argument("--seed", type=int, default=1, help="for --write-init")
    a = ap.parse_args(argv)

    try:
        if a.write_init:
            write_init(a.write_init, a.model, a.seed)
            return 0
        if not a.init_weights:
            ap.error("--init-weights is required")
        if a.workers < 1 or a.batch < 1 or a.steps < 0:
            ap.error("--workers, --batch must be >= 1, --steps >= 0")
        init = st_read(a.init_weights)
        nlayers = layer_count(init)
        split = parse_split(a.split, nlayers)
        cases = []
        for c in a.case:
            parts = c.split(":", 2)
            if len(parts) != 3 or parts[0] not in ("dp", "cdp-v1", "cdp-v2"):
                ap.error(f"--case {c}: expected RULE:N:FILE")
            cases.append((parts[0], int(parts[1]), parts[2]))
        if not cases:
            cases = [(a.rule, a.workers, a.compare)]
        xs, ys = load_train(a.data_dir)
    except (OSError, ValueError, KeyError) as e:
        print(f"torch_reference: {e}", file=sys.stderr)
        return 2
    status = 0
    for rule, n, cmp_path in cases:
        final = train(init, split, rule, n, a.batch, a.steps, a.lr,
                      a.momentum, a.weight_decay, xs, ys, a.threads or None,
                      a.precision, a.bf16_error)
        if a.out and len(cases) == 1:
            st_write(a.out, final, {"format": "pt", "producer": "torch_reference.py",
                                    "rule": rule, "step": a.steps})
        if cmp_path:
            print(f"torch_reference: rule {rule} N={n} B={a.batch} K={a.steps} "
                  f"split {','.join(map(str, split))} vs {cmp_path}")
            try:
                ok, overall, worst = compare(final, cmp_path, a.tol)
            except (OSError, ValueError, KeyError) as e:
                print(f"torch_reference: {e}", file=sys.stderr)
                return 2
            print(f"RESULT rule={rule} N={n} rel={overall:.3e} "
                  f"{'ok' if ok else 'FAIL'}")
            if not ok:
                status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
