#!/usr/bin/env python3
"""Draw cdp_run --trace files (Chrome trace JSON) as one SVG timeline.

One panel per trace, stacked, all on the same time scale: one lane per rank,
compute instructions (FWD, BWD, ACC, FINALIZE, APPLY) as blue/green boxes,
communication instructions (ALLREDUCE, SEND_*, RECV_*, BCAST_PARAMS,
REDUCE_GRAD, ...) as orange/red boxes, nothing where the rank waits between
instructions.  What the boxes mean (doc/reference.md section 6.4): a blocking
collective (dp's ALLREDUCE, zero's BCAST/REDUCE) lasts as long as the
collective; a nonblocking send or receive (cdp's SEND_GRAD, SEND_FULL, ...)
lasts only as long as posting it, its transfer then overlaps whatever the rank
computes next, and waiting for its data shows inside the instruction that
reads it or as a gap.  Rank clocks are each rank's own (not aligned exactly).

The window: steps FIRST..FIRST+COUNT-1 of each trace, starting at rank 0's
first instruction of step FIRST; every panel shows as many seconds as the
longest window, so the panels compare directly.

usage: trace_svg.py OUT.svg LABEL=TRACE.json [LABEL=TRACE.json ...]
                    [--first 2] [--count 2] [--title TEXT]
Standard library only.
"""
import argparse
import json
from xml.sax.saxutils import escape

COMPUTE = {"FWD": "#4c78a8", "BWD": "#54a24b", "ACC": "#72b7b2", "FINALIZE": "#9d755d",
           "APPLY": "#b279a2"}
COMM_COLL = "#e45756"   # collectives: blocking
COMM_P2P = "#f58518"    # point to point: posted (nonblocking)
COLLECTIVES = {"ALLREDUCE", "BCAST_PARAMS", "REDUCE_GRAD"}


def load(path):
    with open(path) as f:
        ev = json.load(f)["traceEvents"]
    return [e for e in ev if e.get("ph") == "X"]


def window(ev, first, count):
    """Events of steps first..first+count-1, times relative to rank 0's start."""
    sel = [e for e in ev if first <= e["args"].get("step", -1) < first + count]
    if not sel:
        return [], 0.0, 0
    # each rank's own clock: align every rank's window on its own first event
    # of step `first` would hide the skew; keep rank clocks, start at rank 0's
    t0 = min(e["ts"] for e in sel if e["pid"] == 0) if any(e["pid"] == 0 for e in sel) \
        else min(e["ts"] for e in sel)
    t1 = max(e["ts"] + e["dur"] for e in sel)
    ranks = max(e["pid"] for e in ev) + 1
    return [(e["pid"], (e["ts"] - t0) * 1e-6, e["dur"] * 1e-6, e["name"], e.get("cat", ""))
            for e in sel], (t1 - t0) * 1e-6, ranks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--first", type=int, default=2)
    ap.add_argument("--count", type=int, default=2)
    ap.add_argument("--title", default="cdp_run --trace timelines")
    a = ap.parse_args()
    panels = []
    for spec in a.traces:
        label, _, path = spec.partition("=")
        ev, span, ranks = window(load(path), a.first, a.count)
        # busy fractions over the window
        comp = sum(d for p, t, d, n, c in ev if c == "compute")
        coll = sum(d for p, t, d, n, c in ev if n.split()[0] in COLLECTIVES)
        per = {}
        for p, t, d, n, c in ev:
            per[n.split()[0]] = per.get(n.split()[0], 0.0) + d
        panels.append((label, ev, span, ranks, comp, coll, per))
    span = max(p[2] for p in panels) or 1.0
    W, left, right = 1100, 70, 20
    lane, gap_top = 18, 46
    scale = (W - left - right) / span
    y = 40
    body = []
    for label, ev, sp, ranks, comp, coll, per in panels:
        h = gap_top + ranks * lane + 44
        frac = comp / (ranks * sp) if sp else 0
        cfrac = coll / (ranks * sp) if sp else 0
        body.append(f'<text x="{left}" y="{y + 18}" font-size="14" font-weight="bold">'
                    f'{escape(label)}</text>')
        body.append(f'<text x="{left}" y="{y + 34}" font-size="11" fill="#444">'
                    f'steps {a.first}..{a.first + a.count - 1}: {sp:.3f} s on rank 0\'s clock; '
                    f'compute instructions {100 * frac:.0f}% of rank-time (their waits for '
                    f'inputs included), blocking collectives {100 * cfrac:.0f}%, the rest idle'
                    f'</text>')
        top = sorted(((v, k) for k, v in per.items() if v >= 0.001), reverse=True)
        body.append(f'<text x="{left}" y="{y + h - 6}" font-size="11" fill="#444">'
                    f'seconds, all ranks: '
                    + escape(", ".join(f"{k} {v:.2f}" for v, k in top)) + '</text>')
        for r in range(ranks):
            ly = y + gap_top + r * lane
            body.append(f'<text x="{left - 6}" y="{ly + 12}" font-size="11" '
                        f'text-anchor="end">rank {r}</text>')
            body.append(f'<rect x="{left}" y="{ly}" width="{W - left - right}" height="{lane - 4}" '
                        f'fill="#f2f2f2"/>')
        for p, t, d, name, cat in ev:
            op = name.split()[0]
            if cat == "compute":
                col = COMPUTE.get(op, "#4c78a8")
            else:
                col = COMM_COLL if op in COLLECTIVES else COMM_P2P
            x = left + t * scale
            w = max(d * scale, 0.6)
            ly = y + gap_top + p * lane
            hh = lane - 4 if cat == "compute" or op in COLLECTIVES else (lane - 4) / 2
            oy = ly if hh == lane - 4 else ly + (lane - 4) / 4
            body.append(f'<rect x="{x:.2f}" y="{oy:.1f}" width="{w:.2f}" height="{hh:.1f}" '
                        f'fill="{col}"><title>{escape(name)} rank {p} {t:.4f}s +{d * 1e3:.2f}ms'
                        f'</title></rect>')
        # time axis
        ay = y + gap_top + ranks * lane + 4
        nt = 10
        for i in range(nt + 1):
            tt = span * i / nt
            x = left + tt * scale
            body.append(f'<line x1="{x:.1f}" y1="{ay}" x2="{x:.1f}" y2="{ay + 4}" stroke="#000"/>')
            body.append(f'<text x="{x:.1f}" y="{ay + 16}" font-size="10" text-anchor="middle">'
                        f'{tt:.2f}</text>')
        y += h
    legend = [("FWD", COMPUTE["FWD"]), ("BWD", COMPUTE["BWD"]), ("APPLY", COMPUTE["APPLY"]),
              ("ACC/FINALIZE", COMPUTE["ACC"]),
              ("collective (blocking: ALLREDUCE, BCAST, REDUCE)", COMM_COLL),
              ("send/recv posted (nonblocking; the transfer overlaps what follows)", COMM_P2P)]
    lx = left
    for name, col in legend:
        body.append(f'<rect x="{lx}" y="{y + 4}" width="12" height="12" fill="{col}"/>')
        body.append(f'<text x="{lx + 16}" y="{y + 14}" font-size="11">{escape(name)}</text>')
        lx += 24 + 6.2 * len(name)
    y += 24
    body.append(f'<text x="{left}" y="{y + 10}" font-size="11" fill="#444">time (s); '
                f'grey: the rank runs no instruction (waits for a message, a collective\'s '
                f'partner or its turn); each rank on its own clock</text>')
    body.append(f'<text x="{left}" y="{y + 26}" font-size="11" fill="#444">A compute box '
                f'lasts until its inputs have arrived: an APPLY waiting for its full gradient, '
                f'a BWD for the partial sum it adds to, are long boxes, not long computations.'
                f'</text>')
    H = y + 40
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           f'font-family="Helvetica, Arial, sans-serif">',
           f'<rect width="{W}" height="{H}" fill="#ffffff"/>',
           f'<text x="{W / 2}" y="22" font-size="15" text-anchor="middle">{escape(a.title)}</text>']
    svg += body
    svg.append("</svg>")
    with open(a.out, "w") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()
