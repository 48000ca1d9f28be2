#!/usr/bin/env python3
"""soak_gen.py SEED COUNT: COUNT random cdp_run option combinations, one a line.

Each line is four tab-separated fields:

    verify  NP  bitwise|1e-5|1e-3  ARGS   the run must match --verify's serial
                                           reference: bitwise; for dp with a
                                           collective on P > 1 within 1e-5, or
                                           1e-3 under AdamW or with BatchNorm
                                           (tests/mpi/soak.sh says why)
    refuse  NP  PATTERN            ARGS   the job must stop with one line
                                           "cdp_run: error: ..." that contains
                                           PATTERN (a fixed string)

NP is the rank count (1 to 4); ARGS are cdp_run's options, space-separated.
The models are tiny (a step in milliseconds on one core).  A refusal is a
valid combination with exactly one thing wrong, so its verdict, and the
option its line names, are known.  The same SEED gives the same lines."""

import random
import sys

MAX_NP = 4


def offset(n, l, rule, i):
    # reference section 2.1: dp starts every worker together, cdp spreads them
    return 0 if rule == "dp" else (i * 2 * l) // n


def mp_ranks(n, l, rule):
    """The ranks --framework model-parallel needs (reference section 4): dp
    N x L; cdp, per stage, workers placed greedily in worker order on the
    first rank whose ticks (mod 2L) their forward and backward do not hit."""
    if rule == "dp":
        return n * l
    total = 0
    for s in range(l):
        ranks = []
        for i in range(n):
            o = offset(n, l, rule, i)
            ticks = {(o + s) % (2 * l), (o + 2 * l - 1 - s) % (2 * l)}
            for busy in ranks:
                if not busy & ticks:
                    busy |= ticks
                    break
            else:
                ranks.append(set(ticks))
        total += len(ranks)
    return total


class Combo:
    def __init__(self, rng):
        self.rng = rng
        self.args = []

    def opt(self, *a):
        self.args += [str(x) for x in a]


def model(rng, c):
    """Sets c.model, c.blocks, c.shape (C, H, W) and the model's args."""
    kind = rng.choices(["mlp", "vit", "resnet"], [5, 3, 2])[0]
    c.kind = kind
    if kind == "mlp":
        ch, hw = rng.choice([1, 3]), rng.choice([2, 4])
        widths = [rng.choice([8, 12, 16, 24]) for _ in range(rng.randint(0, 3))]
        out = rng.choice([10, 10, 12])
        c.shape = (ch, hw, hw)
        c.layers = [ch * hw * hw] + widths + [out]
        c.blocks = len(c.layers) - 1
    elif kind == "vit":
        ch, hw = rng.choice([1, 3]), rng.choice([4, 8])
        patch = rng.choice([p for p in (2, 4) if hw % p == 0])
        heads = rng.choice([1, 2, 4])
        dim = heads * rng.choice([2, 4])
        c.shape = (ch, hw, hw)
        c.vit = dict(patch=patch, dim=dim, depth=rng.randint(1, 3), heads=heads,
                     mlp=rng.choice([8, 16]))
        c.blocks = c.vit["depth"] + 2
    else:
        # 8x8 keeps at least 2x2 pixels after the two stride-2 groups, so
        # the last BatchNorm always sees more than one value per channel
        c.shape = (rng.choice([1, 3]), 8, 8)
        c.blocks = 11


def model_spec(c):
    if c.kind == "mlp":
        return "mlp:" + "-".join(str(x) for x in c.layers)
    if c.kind == "vit":
        v = c.vit
        return "vit:patch=%d,dim=%d,depth=%d,heads=%d,mlp=%d" % (
            v["patch"], v["dim"], v["depth"], v["heads"], v["mlp"])
    return "resnet20"


def placement(rng, c, fw):
    """N, L and NP for a framework, valid (model-parallel: enough ranks)."""
    maxl = min(c.blocks, 6 if c.kind != "resnet" else 4)
    if fw == "model-parallel":
        fits = [(n, l) for n in range(1, 7) for l in range(1, maxl + 1)
                if mp_ranks(n, l, c.rule) <= MAX_NP]
        c.N, c.L = rng.choice(fits)
        c.np = rng.randint(mp_ranks(c.N, c.L, c.rule), MAX_NP)
    else:
        c.np = rng.randint(1, MAX_NP)
        c.N = rng.randint(c.np, 6 if c.kind != "resnet" else 4)
        c.L = rng.randint(1, maxl)


def optimizer(rng, c):
    if rng.random() < 0.4:
        c.opt("--optimizer", "adamw")
        if rng.random() < 0.5:
            c.opt("--lr", rng.choice(["0.001", "0.003", "0.0005"]))
        if rng.random() < 0.4:
            c.opt("--betas", rng.choice(["0.9,0.999", "0.8,0.99", "0,0.9", "0.5,0.5"]))
        if rng.random() < 0.3:
            c.opt("--eps", rng.choice(["1e-8", "1e-6", "1e-3"]))
        if rng.random() < 0.4:
            c.opt("--weight-decay", rng.choice(["0", "0.01", "0.1"]))
        c.adamw = True
    else:
        if rng.random() < 0.3:
            c.opt("--optimizer", "sgd")
        if rng.random() < 0.5:
            c.opt("--lr", rng.choice(["0.01", "0.03", "0.05"]))
        if rng.random() < 0.5:
            c.opt("--momentum", rng.choice(["0", "0.5", "0.9"]))
        if rng.random() < 0.4:
            c.opt("--weight-decay", rng.choice(["0", "0.0005", "0.01"]))
        c.adamw = False
    if rng.random() < 0.3:
        c.opt("--lr-schedule", "cosine")
        c.cosine = True
    else:
        c.cosine = False
        if rng.random() < 0.3:
            c.opt("--lr-decay-epochs", rng.choice([0, 1, 2]))
        if rng.random() < 0.3:
            c.opt("--lr-gamma", rng.choice(["0.5", "0.1"]))
    if rng.random() < 0.3:
        c.opt("--warmup-steps", rng.randint(1, 4))


def extras(rng, c):
    ch = c.shape[0]
    if rng.random() < 0.2:
        c.opt("--no-shuffle")
    if rng.random() < 0.25:
        c.opt("--augment", rng.choice(["flip", "crop=1", "crop=2,flip"]))
    if rng.random() < 0.2:
        if rng.random() < 0.5:
            c.opt("--normalize", "0.5/0.25")
        else:
            c.opt("--normalize", ",".join(["0.4"] * ch) + "/" + ",".join(["0.2"] * ch))
    if rng.random() < 0.2:
        c.opt("--balance", "activations")
    if rng.random() < 0.15:
        c.opt("--flush-denormals")
    if rng.random() < 0.5:
        c.opt("--seed", rng.randint(1, 10**6))


def valid(rng, fw=None):
    c = Combo(rng)
    model(rng, c)
    c.rule = rng.choice(["dp", "cdp-v1", "cdp-v2"])
    c.det = c.rule == "dp" and rng.random() < 0.5
    c.fw = fw or rng.choices(["replicated", "zero", "model-parallel"], [2, 1, 1])[0]
    placement(rng, c, c.fw)
    c.B = rng.randint(1, 4 if c.kind != "resnet" else 2)
    c.steps = rng.randint(2, 6 if c.kind != "resnet" else 4)
    # 1 to 4 steps an epoch (epochs end, the lr steps down), sometimes with
    # samples left over at an epoch's end
    c.ntrain = c.N * c.B * rng.randint(1, 4) + rng.choice([0, 0, 1, 3])
    optimizer(rng, c)
    c.want = "bitwise"
    if c.rule == "dp" and not c.det and c.np > 1:
        # MPI's sum order (reference section 3.8); AdamW's update divides by
        # the gradient's size and BatchNorm on small micro-batches divides
        # by their spread, so both carry its last bits past --verify's 1e-5
        # (the soak measured 1.4e-5 on a ViT, 3.7e-4 on resnet20)
        c.want = "1e-3" if c.adamw or c.kind == "resnet" else "1e-5"
    extras(rng, c)
    return c


def render(c):
    ch, h, w = c.shape
    head = ["--model", model_spec(c), "--data", "synthetic:%dx%dx%d:n=%d" % (ch, h, w, c.ntrain),
            "--rule", c.rule]
    if c.det:
        head.append("--deterministic")
    if c.fw != "replicated" or c.rng.random() < 0.3:
        head += ["--framework", c.fw]
    # the defaults: N = max(4, ranks); an mlp one stage per Linear layer
    if c.N != max(4, c.np) or c.rng.random() < 0.5:
        head += ["--workers", str(c.N)]
    if c.kind != "mlp" or c.L != c.blocks or c.rng.random() < 0.5:
        head += ["--stages", str(c.L)]
    head += ["--batch", str(c.B), "--steps", str(c.steps)]
    return " ".join(head + c.args)


def refusal(rng):
    """A valid combination with one thing wrong: (NP, PATTERN, ARGS)."""
    kinds = ["stages", "stages0", "workers", "mp_ranks", "adamw_momentum", "sgd_adamw_opt",
             "cosine_step_opt", "mlp_in", "mlp_out", "vit_patch", "vit_heads", "samples",
             "normalize", "betas_range", "augment"]
    while True:
        k = rng.choice(kinds)
        c = valid(rng, "model-parallel" if k == "mp_ranks" else rng.choice(["replicated", "zero"]))
        if k == "stages":
            c.L = c.blocks + rng.randint(1, 3)
            want = "--stages"
        elif k == "stages0":
            c.L = 0
            want = "--stages"
        elif k == "workers":
            if c.np < 2:
                continue
            c.N = rng.randint(1, c.np - 1)
            want = "--workers"
        elif k == "mp_ranks":
            fits = [(n, l) for n in range(1, 7) for l in range(1, min(c.blocks, 6) + 1)
                    if 2 <= mp_ranks(n, l, c.rule) <= 8]
            if not fits:
                continue
            c.N, c.L = rng.choice(fits)
            need = mp_ranks(c.N, c.L, c.rule)
            c.np = rng.randint(1, min(MAX_NP, need - 1))
            c.ntrain = max(c.ntrain, c.N * c.B)
            want = "needs %d ranks, got %d" % (need, c.np)
        elif k == "adamw_momentum":
            if not c.adamw:
                continue
            c.opt("--momentum", "0.9")
            want = "--momentum applies to --optimizer sgd only"
        elif k == "sgd_adamw_opt":
            if c.adamw:
                continue
            o = rng.choice(["--betas", "--eps"])
            c.opt(o, "0.9,0.99" if o == "--betas" else "1e-6")
            want = o + " applies to --optimizer adamw only"
        elif k == "cosine_step_opt":
            if not c.cosine:
                continue
            o = rng.choice(["--lr-gamma", "--lr-decay-epochs"])
            c.opt(o, "0.5" if o == "--lr-gamma" else "2")
            want = o + " applies to --lr-schedule step only"
        elif k == "mlp_in":
            if c.kind != "mlp":
                continue
            c.layers[0] += rng.choice([-1, 1, 5])
            want = "inputs"
        elif k == "mlp_out":
            if c.kind != "mlp":
                continue
            c.layers[-1] = rng.randint(2, 9)
            want = "outputs"
        elif k == "vit_patch":
            if c.kind != "vit":
                continue
            c.vit["patch"] = 3
            want = "patches"
        elif k == "vit_heads":
            if c.kind != "vit" or c.vit["heads"] == 1:
                continue
            c.vit["dim"] = c.vit["heads"] * rng.choice([2, 4]) + 1
            want = "heads"
        elif k == "samples":
            c.ntrain = c.N * c.B - rng.randint(1, c.N * c.B - 1) if c.N * c.B > 1 else 0
            if c.ntrain < 1:
                continue
            want = "training samples"
        elif k == "normalize":
            n = 2 if c.shape[0] != 2 else 3
            c.opt("--normalize", ",".join(["0.5"] * n) + "/" + ",".join(["0.25"] * n))
            want = "--normalize"
        elif k == "betas_range":
            if not c.adamw:
                continue
            c.opt("--betas", rng.choice(["1,0.999", "0.9,1", "-0.1,0.9"]))
            want = "--betas"
        elif k == "augment":
            c.opt("--augment", rng.choice(["crop=-1", "rotate", "flip,flip"]))
            want = "--augment"
        # a later --normalize, --betas or --augment overrides an earlier one
        # (getopt): drop the valid one so that only the wrong one is left
        for o in ("--normalize", "--betas", "--augment", "--momentum"):
            idx = [j for j, a in enumerate(c.args) if a == o]
            for j in reversed(idx[:-1]):
                del c.args[j:j + 2]
        return c.np, want, render(c)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: soak_gen.py SEED COUNT")
    seed, count = int(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(seed)
    for _ in range(count):
        if rng.random() < 0.25:
            np_, want, args = refusal(rng)
            print("refuse\t%d\t%s\t%s" % (np_, want, args))
        else:
            c = valid(rng)
            print("verify\t%d\t%s\t%s" % (c.np, c.want, render(c)))


if __name__ == "__main__":
    main()
