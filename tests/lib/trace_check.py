"""Checks a cdp_run --trace file against the timeline of doc/reference.md
section 2 (hand formulas, not the schedule's code) and section 6.4.

usage: trace_check.py FILE P N L STEPS RULE FRAMEWORK WALL_S STEP_S
WALL_S: the run's wall time measured outside it; STEP_S: the summary's
"step time".  Prints one "ok:" or "FAIL:" line per check; exits 1 on a FAIL.
"""
import collections
import json
import re
import sys

path, P, N, L, K, rule, fw, wall_s, step_s = sys.argv[1:10]
P, N, L, K = int(P), int(N), int(L), int(K)
wall_us, step_us = float(wall_s) * 1e6, float(step_s) * 1e6
fails = 0


def check(cond, what):
    global fails
    print(("ok: " if cond else "FAIL: ") + what)
    fails += 0 if cond else 1


def offset(i):
    return 0 if rule == "dp" else (i * 2 * L) // N


COMPUTE = {"FWD", "BWD", "ACC", "APPLY", "FINALIZE"}
COMM = {"SEND_GRAD", "RECV_GRAD", "SEND_FULL", "RECV_FULL", "ALLREDUCE", "SEND_ACT",
        "RECV_ACT", "SEND_DACT", "RECV_DACT", "SEND_PARAMS", "RECV_PARAMS",
        "BCAST_PARAMS", "REDUCE_GRAD", "DROP_PARAMS"}
NAME = re.compile(r"^([A-Z_]+)(?: w(\d+))?(?: l(\d+))?$")

with open(path) as f:
    doc = json.load(f)
check(doc.get("displayTimeUnit") == "ms" and isinstance(doc.get("traceEvents"), list),
      "a JSON object with displayTimeUnit ms and a traceEvents list")
events = doc["traceEvents"]
meta = sorted((e["pid"], e["args"]["name"]) for e in events if e.get("ph") == "M")
check(meta == [(r, "rank %d" % r) for r in range(P)], "one process_name per rank: %s" % meta)

xs = [e for e in events if e.get("ph") == "X"]
bad = []
for e in xs:
    m = NAME.match(e.get("name", ""))
    op = m.group(1) if m else None
    cat = "compute" if op in COMPUTE else "comm" if op in COMM else None
    if (not m or cat != e.get("cat") or e.get("tid") != 0 or not 0 <= e.get("pid", -1) < P
            or e["ts"] < 0 or e["dur"] < 0 or not isinstance(e["args"].get("tick"), int)
            or not 0 <= e["args"].get("step", -1) < K):
        bad.append(e)
    else:
        e["op"] = op
        e["w"] = int(m.group(2)) if m.group(2) else None
        e["l"] = int(m.group(3)) if m.group(3) else None
check(xs and not bad, "%d complete events, each with a known instruction, its category, "
      "a rank, ts/dur >= 0 and tick/step (bad: %s)" % (len(xs), bad[:2]))
if bad:
    sys.exit(1)
ops = collections.Counter(e["op"] for e in xs)

# FWD, BWD and ACC: once per (worker, stage, step) over all ranks, at the
# timeline's tick: start = 2L*step + offset(worker); FWD at start + l, BWD and
# its ACC at start + 2L-1-l
for op in ("FWD", "BWD", "ACC"):
    seen = collections.Counter((e["w"], e["l"], e["args"]["step"]) for e in xs if e["op"] == op)
    want = {(i, l, s) for i in range(N) for l in range(L) for s in range(K)}
    check(set(seen) == want and max(seen.values()) == 1,
          "%s: once per (worker, stage, step), %d in all (want %d)" % (op, sum(seen.values()), len(want)))
    wrong = []
    for e in xs:
        if e["op"] != op:
            continue
        start = 2 * L * e["args"]["step"] + offset(e["w"])
        tick = start + (e["l"] if op == "FWD" else 2 * L - 1 - e["l"])
        if e["args"]["tick"] != tick:
            wrong.append((e["name"], e["args"]))
    check(not wrong, "%s: at tick 2L*step + offset(worker) + %s (wrong: %s)"
          % (op, "l" if op == "FWD" else "2L-1-l", wrong[:3]))
where = {}
for e in xs:
    if e["op"] in ("BWD", "ACC"):
        where.setdefault((e["w"], e["l"], e["args"]["step"]), set()).add(e["pid"])
check(all(len(r) == 1 for r in where.values()), "each ACC on the rank of its BWD")

# every stage is updated once per step on the ranks that hold it
applies = collections.Counter((e["l"], e["args"]["step"]) for e in xs if e["op"] == "APPLY")
want = {(l, s) for l in range(L) for s in range(K)}
check(set(applies) == want and (fw != "replicated" or set(applies.values()) == {P}),
      "APPLY: every (stage, step), on %s (counts %s)"
      % ("every rank" if fw == "replicated" else "its holders", sorted(set(applies.values()))))

# dp reduces with collectives; cdp-v1/v2 only point to point (the paper's claim)
coll = ops["ALLREDUCE"] + ops["BCAST_PARAMS"] + ops["REDUCE_GRAD"]
if rule == "dp" and fw == "replicated":
    per = collections.Counter((e["pid"], e["args"]["step"]) for e in xs if e["op"] == "ALLREDUCE")
    check(set(per.values()) == {1} and len(per) == P * K, "dp: one ALLREDUCE per rank and step")
elif rule == "dp":
    check(coll > 0, "dp %s: collectives (%d)" % (fw, coll))
else:
    check(coll == 0, "%s: no collective, point to point only (%d)" % (rule, coll))
for a, b in (("SEND_GRAD", "RECV_GRAD"), ("SEND_FULL", "RECV_FULL"), ("SEND_ACT", "RECV_ACT"),
             ("SEND_DACT", "RECV_DACT"), ("SEND_PARAMS", "RECV_PARAMS")):
    check(ops[a] == ops[b], "%s %d = %s %d" % (a, ops[a], b, ops[b]))
if P > 1 and fw == "model-parallel":
    check(ops["SEND_ACT"] > 0, "model-parallel: activations sent (%d)" % ops["SEND_ACT"])
if P > 1 and rule != "dp" and fw == "replicated":
    check(ops["SEND_GRAD"] > 0, "%s on %d ranks: gradients sent (%d)" % (rule, P, ops["SEND_GRAD"]))

# each rank's events: one at a time, in tick order, in microseconds
for r in range(P):
    mine = sorted((e for e in xs if e["pid"] == r), key=lambda e: e["ts"])
    overlap = [(a["name"], b["name"]) for a, b in zip(mine, mine[1:])
               if a["ts"] + a["dur"] > b["ts"] + 0.002]
    order = [(a["name"], b["name"]) for a, b in zip(mine, mine[1:])
             if a["args"]["tick"] > b["args"]["tick"]]
    check(mine and not overlap and not order,
          "rank %d: %d events, one at a time (overlaps %s), ticks in time order (%s)"
          % (r, len(mine), overlap[:2], order[:2]))
    span = mine[-1]["ts"] + mine[-1]["dur"] - mine[0]["ts"]
    check(mine[-1]["ts"] + mine[-1]["dur"] <= wall_us and 0.25 * K * step_us <= span <= 4 * K * step_us,
          "rank %d: events end at %.0f us, within the run's %.0f us; they span %.0f us, "
          "%d steps of %.0f us" % (r, mine[-1]["ts"] + mine[-1]["dur"], wall_us, span, K, step_us))
sys.exit(1 if fails else 0)
