"""One figure as a result line, the format every benchmark prints beside
its own output (bench/README, "Result lines"; common.sh's bench_result and
bench_util.h's print the same):

    result<TAB>BENCH<TAB>CONFIG<TAB>METRIC<TAB>VALUE<TAB>UNIT

A tab or newline inside a field becomes a space, an empty field "-"; a
VALUE that is None, empty or not a number is written "nan" (a run that gave
no figure).  Whole numbers are written with all their digits, others with
6 significant digits."""
import math
import sys


def _field(v):
    s = " ".join(str(v).replace("\t", " ").splitlines())
    return s if s else "-"


def _value(v):
    if isinstance(v, int):              # counts and bytes: every digit
        return str(int(v))
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return v.strip()
    try:
        x = float(v)
    except (TypeError, ValueError):
        return "nan"
    if math.isnan(x):
        return "nan"
    if x.is_integer() and abs(x) < 2 ** 53:     # a whole number (bytes), exactly
        return str(int(x))
    return "%.6g" % x


def bench_result(bench, config, metric, value, unit, file=None):
    """prints the line to file (default: stdout), flushed"""
    out = file or sys.stdout
    print("\t".join(["result", _field(bench), _field(config), _field(metric), _value(value),
                     _field(unit)]), file=out, flush=True)
