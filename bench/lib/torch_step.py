"""One PyTorch training step as the benchmarks time it, on the CPU
(torch_resnet.py, torch_autocast.py) and the GPU (gpu/torch_gpu.py): with
micro > 1, gradient accumulation over micro equal slices of the batch, each
loss divided by micro, then one optimizer step; and the options the CPU
round-robin scripts share."""
import statistics
import time

import torch
import torch.nn.functional as F


def train_step(model, opt, x, y, micro):
    opt.zero_grad(set_to_none=True)
    if micro == 1:
        F.cross_entropy(model(x), y).backward()
    else:
        mb = x.shape[0] // micro
        for i in range(micro):
            sl = slice(i * mb, (i + 1) * mb)
            (F.cross_entropy(model(x[sl]), y[sl]) / micro).backward()
    opt.step()


def add_round_robin_args(ap, steps, reps):
    """The options of the round-robin PyTorch benchmarks (torch_resnet.py,
    torch_autocast.py) after their own: rounds, steps, SGD, seed."""
    ap.add_argument("--steps", type=int, default=steps, help="timed steps per round")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps before each round")
    ap.add_argument("--reps", type=int, default=reps, help="rounds over all configurations")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--seed", type=int, default=1)


def parse_round_robin_args(ap, prog):
    """ap's arguments, with --shape CxHxW as a list of 3 ints"""
    a = ap.parse_args()
    try:
        shape = [int(v) for v in a.shape.lower().split("x")]
        assert len(shape) == 3
    except (ValueError, AssertionError):
        raise SystemExit(f"{prog}: bad --shape {a.shape} (CxHxW)")
    a.shape = shape
    return a


def time_round_robin(tags, model, batch, configs, steps_of, reps, warmup, steps):
    """reps rounds over the configurations in turn; each: torch threads set
    to its "threads", warmup untimed steps, then steps timed one by one
    (steps_of[i]: configuration i's one step).  Prints each round's median
    as a TAG line (tags: (the rounds' tag, the summary's tag)) and then the
    summary lines of print_medians."""
    res = {c["name"]: [] for c in configs}
    for rep in range(reps):
        for c, step in zip(configs, steps_of):
            torch.set_num_threads(c["threads"])
            for _ in range(warmup):
                step()
            times = []
            for _ in range(steps):
                t = time.perf_counter()
                step()
                times.append(time.perf_counter() - t)
            s = statistics.median(times)
            res[c["name"]].append(s)
            print(f"{tags[0]} model={model} batch={batch} config={c['name']} rep={rep + 1} "
                  f"step_s={s:.4f}", flush=True)
    print_medians(tags[1], model, batch, configs, res)


def print_medians(tag, model, batch, configs, res):
    """One line per configuration: the median of its rounds' step times and
    their range (res: configuration name -> the rounds' step times)."""
    for c in configs:
        v = res[c["name"]]
        print(f"{tag} model={model} batch={batch} config={c['name']} "
              f"step_s={statistics.median(v):.4f} min={min(v):.4f} max={max(v):.4f}", flush=True)
