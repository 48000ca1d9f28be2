#!/bin/bash
# The paper's communication claim, measured on emulated links: throughput
# of dp and cdp across K hosts whose links are shaped to a given rate, in
# one command:
#
#     nice bench/communication/hosts_comm.sh [BUILD_DIR]
#
# For every model in MODELS, K in HOSTS and link rate in RATES it makes K
# emulated hosts with tests/lib/hosts.sh (network, UTS and mount namespaces on a
# bridge; each host's link shaped to RATE both ways with tc tbf), one rank
# per host (--threads 1, N = K workers of B samples: one worker per rank),
# and runs the configurations of CONFIGS round-robin, REPS times (the
# starting configuration rotates by one each repetition):
#   dp            --rule dp (gradients summed with MPI_Allreduce)
#   dp-ring       --rule dp --deterministic (the ring, in worker order)
#   cdp-v1        --rule cdp-v1
#   cdp-v2        --rule cdp-v2
#   zero-dp       --framework zero --rule dp (ZeRO-3: MPI_Bcast / MPI_Reduce)
#   zero-cdp-v2   --framework zero --rule cdp-v2 (point to point)
#   mp-cdp-v2     --framework model-parallel --rule cdp-v2, N = K, with the
#                 largest L <= min(K, blocks) that cdp_run --plan says fits
#                 in K ranks (the others use cdp_run's default L)
#   mp-dp         --framework model-parallel --rule dp: needs N x L ranks
#                 (every worker its own rank per stage), so with N = K and
#                 L >= 2 never fits K ranks: its row says so (not in the
#                 default list)
# Every mpirun runs under `timeout TIMEOUT` and with --bind-to none: each
# emulated host sees the machine's cores, and Open MPI's default binding
# (to core 0 when np <= 2) would put all ranks on the same core.
#
# Figures per run, from --metrics' summary and --trace:
#   step_s    the summary's step time (training time / steps; every step of
#             the run's one segment, the pipeline's fill and drain included:
#             a run has ticks - 2L*steps extra ticks, shown as "drain" in the
#             raw rows: the segment's drain tick, where the last updates
#             are applied (every rule), and under a cdp rule the last
#             worker's offset; with few steps that weighs on cdp)
#   trace_s   the median step period on rank 0 after SKIP steps
#             (bench/lib/trace_steps.py: the starts of worker 0's first forward);
#             a communication-bound cdp run that queues nonblocking sends
#             faster than the link drains them shows a short period here and
#             pays in the drain: step_s is the figure the table uses
#   bytes     bytes_sent_total, bytes_sent_peak_tick (all ranks, the busiest
#             tick) and bytes_sent_mean_tick, as measured by cdp_run, next to
#             cdp_run --plan's "bytes sent: peak tick, mean per tick" for the
#             same configuration (computed from the timeline, run with mpirun
#             -np K on this machine, no emulated hosts needed; --plan's
#             default number of steps, so its mean, which spreads the drain
#             tick's bytes over the segment, is not the run's).  cdp_run
#             reports no per-rank (per-link) peak: the busiest tick is summed
#             over ranks.
# The table: per (model, K, rate), the median samples/s of each configuration
# (N*B / step_s), and the medians of the per-repetition ratios cdp-v1/dp and
# cdp-v2/dp (each pair measured back to back in the same repetition); then
# per (model, K) the traffic, measured against --plan.
#
# This machine: 2 cores for all ranks.  K = 8 hosts x 1 rank oversubscribe
# them 4x (K = 4: 2x), so compute is 4x (2x) slower than on 8 real hosts,
# and the TCP stacks of the emulated hosts share the same cores.  tc netem
# is missing from this kernel (only tbf and htb): links are shaped by rate
# only, no delay or loss.
#
# Writes (RAW defaults to bench/raw/<UTC date>/hosts_comm):
#   $RAW/hosts_comm.txt   the rows (one per run), --plan's figures, the log
#                         (every run's summary), the Markdown table
#   $RAW/trace-*.json     the two traces of the trace picture
#   $FIG                  throughput and cdp/dp ratio against link rate
#                         (gnuplot SVG; PNG when the name ends in .png)
#                                                        [bench/figures/hosts_comm.svg]
#   $TRACE_FIG            dp and cdp-v2 timelines at TRACE_AT (bench/lib/trace_svg.py)
#                                                        [bench/figures/hosts_trace.svg]
# Redraw from a table without running anything:
#   PLOT_ONLY=bench/raw/DATE/hosts_comm/hosts_comm.txt bench/communication/hosts_comm.sh
#
# environment (defaults):
#   MODELS ["mlp:784-1024-1024-1024-10"]: NAME or NAME@B (B samples per worker)
#   HOSTS ["2 4 8"]  RATES ["10gbit 1gbit 100mbit"] (tc rates)
#   CONFIGS ["dp dp-ring cdp-v1 cdp-v2 zero-dp zero-cdp-v2 mp-cdp-v2"]
#   REPS [3]  B [32]
#   STEPS [adaptive]: steps per run, the same for every configuration and
#   repetition of a setting.  Adaptive: a calibration run of dp (3 steps, not
#   recorded) at each (model, K, rate) gives a step time t, and the runs take
#   clamp(TARGET_S / t, STEPS_MIN, STEPS_MAX) steps  [TARGET_S 5,
#   STEPS_MIN 3, STEPS_MAX 40].  STEPS="RATE:S ..." (a rate not listed: the
#   last S) or STEPS=S fixes them instead.  SKIP [1]
#   With 3 or 4 steps (slow links, many hosts) the trace gives 1 or 2
#   periods, taken while rank 0 runs ahead of queued sends: unreliable
#   (K = 8 at 100 Mbit/s: cdp-v2/dp 0.98 by 1 period, 1.26 by 7); rerun such
#   a setting with STEPS=10 when it matters.
#   STAGES [cdp_run's default: one per Linear layer for an MLP]
#   DATA [synthetic]  TIMEOUT [600] seconds per mpirun
#   TRACE_AT ["4:1gbit"]: K:RATE whose first repetition's dp and cdp-v2
#   traces are drawn (empty: no picture)
#   RAW, FIG, TRACE_FIG, OUT (per-run files, kept when given)
# gnuplot: installed with apt-get (gnuplot-nox) when missing, as in
# memory_figure.sh.  Needs root (network namespaces); exits 77 otherwise.
# Smoke (~1 min): HOSTS=2 RATES=1gbit REPS=1 STEPS=3 RAW=/tmp/hc \
#   FIG=/tmp/hc/f.svg TRACE_AT=2:1gbit TRACE_FIG=/tmp/hc/t.svg bench/communication/hosts_comm.sh

set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/common.sh"
MODELS=${MODELS:-"mlp:784-1024-1024-1024-10"}
HOSTS=${HOSTS:-"2 4 8"}
RATES=${RATES:-"10gbit 1gbit 100mbit"}
CONFIGS=${CONFIGS:-"dp dp-ring cdp-v1 cdp-v2 zero-dp zero-cdp-v2 mp-cdp-v2"}
REPS=${REPS:-3}
B=${B:-32}
STEPS=${STEPS:-}
TARGET_S=${TARGET_S:-5}
STEPS_MIN=${STEPS_MIN:-3}
STEPS_MAX=${STEPS_MAX:-40}
SKIP=${SKIP:-1}
STAGES=${STAGES:-}
DATA=${DATA:-synthetic}
TIMEOUT=${TIMEOUT:-600}
TRACE_AT=${TRACE_AT-"4:1gbit"}
RAW=${RAW:-$bench_dir/raw/$(date -u +%Y-%m-%d)/hosts_comm}
FIG=${FIG:-$bench_dir/figures/hosts_comm.svg}
TRACE_FIG=${TRACE_FIG:-$bench_dir/figures/hosts_trace.svg}

# ------------------------------------------------------------ gnuplot
# draw TABLE RESULTS [nofig]: the Markdown tables on stdout, the SVG in
# $FIG, the result lines in the file RESULTS
draw() {
    local table=$1 results=$2 nofig=${3:-} gp
    gp=$(mktemp /tmp/hosts_comm.XXXXXX.gp)
    python3 - "$table" "$FIG" "$gp" "$results" <<'EOF'
import statistics
import sys

from bench_result import bench_result

table, fig, gp, results = sys.argv[1:5]
out_results = open(results, "w")
rows, plans, meta, cols, pcols = [], [], {}, None, None
for line in open(table):
    if line.startswith("#cols "):
        cols = line.split()[1:]
    elif line.startswith("#pcols "):
        pcols = line.split()[1:]
    elif line.startswith("#meta "):
        k, _, v = line[6:].strip().partition("=")
        meta[k] = v
    elif line.startswith("#plan "):
        plans.append(dict(zip(pcols, line.split()[1:])))
    elif line.startswith("# log") or line.startswith("# table"):
        break
    elif line.startswith("#") or not line.strip():
        continue
    elif cols:
        rows.append(dict(zip(cols, line.split())))


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def rate_bits(r):
    r = r.lower()
    for suf, m in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)):
        if r.endswith(suf):
            return float(r[:-len(suf)]) * m
    return float(r)


def med(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None


def f0(x):
    return "-" if x is None else f"{x:.0f}"


def f2(x):
    return "-" if x is None else f"{x:.2f}"


def mb(x):
    return "-" if x is None else f"{x / 1e6:.1f}"


configs = []
for r in rows:
    if r["config"] not in configs:
        configs.append(r["config"])
settings = []
for r in rows:
    s = (r["model"], int(r["K"]), r["rate"])
    if s not in settings:
        settings.append(s)
settings.sort(key=lambda s: (s[0], s[1], -rate_bits(s[2])))


def sel(s, c=None, rep=None):
    return [r for r in rows if (r["model"], int(r["K"]), r["rate"]) == s
            and (c is None or r["config"] == c) and (rep is None or r["rep"] == rep)
            and r["status"] == "ok"]


def meta_b(model):
    """the samples per worker of a model's rows"""
    return next((r["B"] for r in rows if r["model"] == model), "?")


def sps(r):
    return int(r["N"]) * int(r["B"]) / float(r["step_s"])


def ratio(s, a, b, key="step_s"):
    """median over repetitions of samples/s a / b (by step_s, or by the
    trace's rank-0 period trace_s), same repetition"""
    out = []
    for rep in sorted({r["rep"] for r in sel(s)}):
        x, y = sel(s, a, rep), sel(s, b, rep)
        if x and y and num(x[0][key]) and num(y[0][key]):
            out.append(float(y[0][key]) / float(x[0][key]))
    return med(out), out


stat = {}
print(f"Samples/s (median of {meta.get('reps', '?')} runs, N = K workers x B, "
      "training time / steps from the summary); ratios: median of the per-repetition "
      "ratios (each pair back to back) [min-max]; 'by trace periods': the same ratio from "
      "rank 0's step periods after SKIP steps (fill and drain left out; from few periods "
      "when the run has few steps).\n")
hdr = ["model", "K", "link"] + configs + ["cdp-v1/dp", "cdp-v2/dp", "cdp-v2/dp by trace periods",
                                          "dp step s", "cdp-v2 step s"]
print("| " + " | ".join(hdr) + " |")
print("|" + " --- |" * len(hdr))
for s in settings:
    cells = [s[0], str(s[1]), s[2]]
    for c in configs:
        rs = [r for r in rows if (r["model"], int(r["K"]), r["rate"]) == s and r["config"] == c]
        ok = [sps(r) for r in rs if r["status"] == "ok"]
        if ok:
            m = med(ok)
            stat[(s, c)] = m
            extra = ""
            if c.startswith("mp-"):
                extra = f" (L={rs[0]['L']})"
            cells.append(f"{m:.0f}{extra}")
        elif rs:
            cells.append(rs[0]["status"].replace("_", " "))
        else:
            cells.append("-")
    r1, l1 = ratio(s, "cdp-v1", "dp")
    r2, l2 = ratio(s, "cdp-v2", "dp")
    cells.append(f2(r1) + (f" [{min(l1):.2f}-{max(l1):.2f}]" if len(l1) > 1 else ""))
    cells.append(f"**{f2(r2)}**" + (f" [{min(l2):.2f}-{max(l2):.2f}]" if len(l2) > 1 else ""))
    stat[(s, "r1")], stat[(s, "r2")] = r1, r2
    r3, l3 = ratio(s, "cdp-v2", "dp", "trace_s")
    cells.append(f2(r3) + (f" [{min(l3):.2f}-{max(l3):.2f}]" if len(l3) > 1 else ""))
    cells.append(f2(med([float(r["step_s"]) for r in sel(s, "dp")])))
    cells.append(f2(med([float(r["step_s"]) for r in sel(s, "cdp-v2")])))
    print("| " + " | ".join(cells) + " |")
    cfg = f"{s[0]} B={meta_b(s[0])} K={s[1]} link={s[2]}"
    for c in configs:
        if (s, c) in stat:
            bench_result("hosts-comm", f"{cfg} {c}", "throughput_median", stat[(s, c)], "samples/s",
                         file=out_results)
    for name, v in (("cdp-v1/dp", r1), ("cdp-v2/dp", r2)):
        bench_result("hosts-comm", f"{cfg} {name}", "throughput_median", v, "ratio",
                     file=out_results)
    bench_result("hosts-comm", f"{cfg} cdp-v2/dp", "throughput_trace_periods", r3, "ratio",
                 file=out_results)

# traffic: per (model, K, config), rate-independent; measured vs --plan
print("\nTraffic per step position (MB = 1e6 bytes; bytes handed to MPI, all ranks; "
      "an all-reduce counts 2(P-1)/P x its size per rank): measured (median over "
      "rates and repetitions; min-max of the peak in brackets when they differ) "
      "against cdp_run --plan for the same configuration.\n")
hdr = ["model", "K", "config", "L", "peak tick MB", "mean tick MB", "--plan peak MB",
       "--plan mean MB", "peak / dp's peak", "collectives / step", "drain ticks"]
print("| " + " | ".join(hdr) + " |")
print("|" + " --- |" * len(hdr))
mk = []
for s in settings:
    if (s[0], s[1]) not in mk:
        mk.append((s[0], s[1]))
for m, K in mk:
    dpk = None
    for c in configs:
        rs = [r for r in rows if r["model"] == m and int(r["K"]) == K and r["config"] == c
              and r["status"] == "ok"]
        p = next((p for p in plans if p["model"] == m and int(p["K"]) == K and p["config"] == c),
                 None)
        if not rs:
            continue
        pk = [num(r["peak_tick"]) for r in rs]
        pkm = med(pk)
        if c == "dp":
            dpk = pkm
        rng = f" [{min(pk) / 1e6:.1f}-{max(pk) / 1e6:.1f}]" if max(pk) != min(pk) else ""
        ppk = num(p["plan_peak"]) if p else None
        pmn = num(p["plan_mean"]) if p else None
        rel = f2(pkm / dpk) if dpk else "-"
        print(f"| {m} | {K} | {c} | {rs[0]['L']} | {mb(pkm)}{rng} | "
              f"{mb(med([num(r['mean_tick']) for r in rs]))} | {mb(ppk)} | {mb(pmn)} | {rel} | "
              f"{f2(med([num(r['coll_step']) for r in rs]))} | {rs[0]['drain']} |")
        cfg = f"{m} B={meta_b(m)} K={K} {c} L={rs[0]['L']}"
        mean_tick = med([num(r['mean_tick']) for r in rs])
        coll = med([num(r['coll_step']) for r in rs])
        for metric, v, unit in (("bytes_sent_peak_tick", pkm, "bytes"),
                                ("bytes_sent_mean_tick", mean_tick, "bytes"),
                                ("plan_bytes_sent_peak_tick", ppk, "bytes"),
                                ("plan_bytes_sent_mean_tick", pmn, "bytes"),
                                ("collective_calls_per_step", coll, "count")):
            bench_result("hosts-comm", cfg, metric, v, unit, file=out_results)
out_results.close()

# ------------------------------------------------------------ figure
models = []
for s in settings:
    if s[0] not in models:
        models.append(s[0])
Ks = sorted({s[1] for s in settings})
rates = sorted({s[2] for s in settings}, key=rate_bits)
colours = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]
out = []
if fig.endswith(".png"):
    out.append(f"set terminal pngcairo size 1200,{520 * len(models)} font 'Helvetica,10' "
               "background '#ffffff'")
else:
    out.append(f"set terminal svg size 1200,{520 * len(models)} dynamic font 'Helvetica,13' "
               "background '#ffffff'")
out.append(f"set output '{fig}'")
out.append("set datafile missing '-'")
out.append("set logscale x 10")
xs = [rate_bits(r) / 1e9 for r in rates]
out.append(f"set xrange [{min(xs) / 1.6}:{max(xs) * 1.6}]")
out.append("set xtics (" + ", ".join(f'"{r}" {rate_bits(r) / 1e9}' for r in rates) + ")")
out.append("set grid xtics ytics lc rgb '#dddddd'")
out.append("set key top left font ',10' spacing 1.1")
out.append(f"set multiplot layout {len(models)},2 title \"dp against cdp across emulated hosts "
           f"(1 rank per host, links shaped with tc tbf, no delay or loss; 2 shared cores; "
           f"{meta.get('date', '')})\" font ',13'")
for m in models:
    B = next(r["B"] for r in rows if r["model"] == m)
    out.append(f"set title '{m}, N = K workers x B={B}: throughput'")
    out.append("set xlabel 'link rate per host (both ways)'")
    out.append("set ylabel 'samples/s'")
    out.append("set logscale y 10")
    plots = []
    for ki, K in enumerate(Ks):
        c = colours[ki % len(colours)]
        name = f"$t{models.index(m)}_{K}"
        out.append(f"{name} << EOD")
        for r in rates:
            s = (m, K, r)
            v = [stat.get((s, "dp")), stat.get((s, "cdp-v2")), stat.get((s, "cdp-v1"))]
            out.append(f"{rate_bits(r) / 1e9} " + " ".join("-" if x is None else f"{x:.2f}" for x in v))
        out.append("EOD")
        plots.append(f"{name} using 1:2 with linespoints lw 2 pt 7 lc rgb '{c}' title 'dp, K={K}'")
        plots.append(f"{name} using 1:3 with linespoints lw 2 dt 2 pt 5 lc rgb '{c}' "
                     f"title 'cdp-v2, K={K}'")
    out.append("plot " + ", \\\n     ".join(plots))
    out.append("unset logscale y")
    out.append("set offsets 0, 0, graph 0.05, graph 0.05")
    out.append(f"set title '{m}: cdp / dp samples/s (same repetition, median)'")
    out.append("set ylabel 'cdp / dp'")
    plots = []
    for ki, K in enumerate(Ks):
        c = colours[ki % len(colours)]
        name = f"$r{models.index(m)}_{K}"
        out.append(f"{name} << EOD")
        for r in rates:
            s = (m, K, r)
            v = [stat.get((s, "r2")), stat.get((s, "r1"))]
            out.append(f"{rate_bits(r) / 1e9} " + " ".join("-" if x is None else f"{x:.3f}" for x in v))
        out.append("EOD")
        plots.append(f"{name} using 1:2 with linespoints lw 2 pt 5 lc rgb '{c}' "
                     f"title 'cdp-v2/dp, K={K}'")
        plots.append(f"{name} using 1:3 with linespoints lw 1 dt 3 pt 4 lc rgb '{c}' "
                     f"title 'cdp-v1/dp, K={K}'")
    plots.append("1 with lines lw 1 lc rgb '#000000' notitle")
    out.append("plot " + ", \\\n     ".join(plots))
out.append("unset multiplot")
open(gp, "w").write("\n".join(out) + "\n")
EOF
    local rc=$?
    if [ $rc = 0 ] && [ -z "$nofig" ]; then
        gnuplot "$gp" && echo "# figure: $FIG" || rc=$?
    fi
    rm -f "$gp"
    return $rc
}

if [ -n "${PLOT_ONLY:-}" ]; then
    bench_have_gnuplot communication/hosts_comm.sh || exit 1
    results=$(mktemp /tmp/hosts_comm.XXXXXX.results)
    draw "$PLOT_ONLY" "$results"
    rc=$?
    cat "$results"
    rm -f "$results"
    exit $rc
fi

BUILD=${1:-${top_builddir:-$bench_top}}
CDP=$BUILD/cdp_run
bench_start hosts_comm.sh rows.txt
[ "$(id -u)" = 0 ] || { echo "hosts_comm.sh: needs root (network namespaces): skip" >&2; exit 77; }
plot_ok=1
bench_have_gnuplot communication/hosts_comm.sh || plot_ok=0
mkdir -p "$RAW"
table=$RAW/hosts_comm.txt
log=$tmp/log.txt
: >"$log"
say() { echo "$@" | tee -a "$log"; }
t_start=$(date +%s)

# key FILE NAME: a number from the metrics' summary line
key() { tail -1 "$1" | grep -o "\"$2\": [0-9.e+-]*" | awk '{print $2}'; }

steps_for() {   # steps_for RATE
    local s last=
    for s in $STEPS; do
        case $s in
            "$1":*) echo "${s#*:}"; return ;;
            *:*) last=${s#*:} ;;
            *) last=$s ;;
        esac
    done
    echo "${last:-3}"
}

# calibrate MODEL K: steps from a 3-step dp run on the hosts that are up
calibrate() {
    local m=$tmp/calib.json t
    rm -f "$m"
    hosts_exec 1 timeout "$TIMEOUT" mpirun --bind-to none -np "$2" "$CDP" --model "$1" \
        --data "$DATA:n=$(($2 * mb * 3)):test=$mb" --workers "$2" --batch "$mb" --threads 1 \
        --steps 3 --eval-every 0 --quiet --rule dp --metrics "$m" >>"$log" 2>&1 &
    wait $!
    t=$(key "$m" step_time_s)
    [ -n "$t" ] || { echo "$STEPS_MIN"; return; }
    awk -v t="$t" -v T="$TARGET_S" -v lo="$STEPS_MIN" -v hi="$STEPS_MAX" \
        'BEGIN {s = int(T / t + 0.5); if (s < lo) s = lo; if (s > hi) s = hi; print s}'
}

opts_for() {    # opts_for CONFIG: the cdp_run options of a configuration
    case $1 in
        dp) echo "--rule dp" ;;
        dp-ring) echo "--rule dp --deterministic" ;;
        cdp-v1|cdp-v2) echo "--rule $1" ;;
        zero-dp) echo "--framework zero --rule dp" ;;
        zero-cdp-v1|zero-cdp-v2) echo "--framework zero --rule ${1#zero-}" ;;
        mp-dp) echo "--framework model-parallel --rule dp" ;;
        mp-cdp-v1|mp-cdp-v2) echo "--framework model-parallel --rule ${1#mp-}" ;;
        *) return 1 ;;
    esac
}

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cols="model B K rate config rep N L steps step_s trace_s trace_p10 sps_summary bytes_total \
peak_tick mean_tick ticks drain coll_step load1 status"
pcols="model K config L ranks_used plan_peak plan_mean"
{
    echo "# bench/communication/hosts_comm.sh: dp and cdp across emulated hosts (tests/lib/hosts.sh, tc tbf links)"
    bench_header
    echo "# cdp: $("$CDP" --version 2>&1 | head -1); $CDP; commit $(git -C "$here" rev-parse --short HEAD 2>/dev/null)"
    echo "# $(mpirun --version 2>&1 | head -1); $(uname -r); tc qdiscs: tbf (netem missing: no delay, no loss)"
    echo "# MODELS=\"$MODELS\" HOSTS=\"$HOSTS\" RATES=\"$RATES\" B=$B REPS=$REPS STEPS=\"${STEPS:-adaptive: TARGET_S=$TARGET_S, $STEPS_MIN..$STEPS_MAX}\" SKIP=$SKIP"
    echo "# CONFIGS=\"$CONFIGS\" STAGES=${STAGES:-default} DATA=$DATA; 1 rank per host, --threads 1, N = K"
    echo "# step_s: summary step_time_s (fill and drain included); trace_s, trace_p10: rank 0's step"
    echo "# periods after $SKIP steps (median, 10th percentile); bytes: bytes_sent_* (all ranks);"
    echo "# drain = ticks - 2L*steps; load1: 1-min load average before the run"
    echo "#meta date=$(date -u +%Y-%m-%d)"
    echo "#meta reps=$REPS"
    echo "#cols $cols"
    echo "#pcols $pcols"
} >"$res"
cat "$res"

row() { echo "$*" >>"$res"; echo "$*"; }

# plan MODEL K N L OPTS...: cdp_run --plan on K ranks (this machine, no
# emulated hosts) into $tmp/plan.txt
plan() {
    local m=$1 k=$2 n=$3 l=$4; shift 4
    local lopt=()
    [ -n "$l" ] && lopt=(--stages "$l")
    # on this machine, not on emulated hosts (hosts.sh gives its Open MPI
    # settings to hosts_exec's commands only)
    timeout 120 mpirun --oversubscribe --bind-to none -np "$k" "$CDP" --model "$m" --data "$DATA" \
        --workers "$n" --batch "$mb" "${lopt[@]}" "$@" --plan >"$tmp/plan.txt" 2>&1
}

. "$bench_top/tests/lib/hosts.sh"
HOSTS_SLOTS=1
mine_left() { ip netns list 2>/dev/null | grep -c "^cdp$$-"; }

trace_a= trace_b=
for spec in $MODELS; do
    model=${spec%@*}
    mb=$B
    [ "$spec" != "$model" ] && mb=${spec#*@}
    "$CDP" --model "$model" --data "$DATA" --workers 2 --stages 1 --batch 1 --plan \
        >"$tmp/probe.txt" 2>&1
    blocks=$(sed -n "s/^model .* in \([0-9]*\) blocks.*/\1/p" "$tmp/probe.txt")
    nparams=$(sed -n "s/^model .*: \([0-9]*\) parameters.*/\1/p" "$tmp/probe.txt")
    [ -n "$blocks" ] || { say "# $model: cdp_run --plan failed: $(tail -1 "$tmp/probe.txt")"; continue; }
    say "# $model: $nparams parameters and buffers ($((nparams * 4 / 1000000)) MB of gradient), $blocks blocks, B=$mb"
    for K in $HOSTS; do
        # per configuration: its stages and --plan's traffic
        declare -A Lof=() skipof=()
        for c in $CONFIGS; do
            o=$(opts_for "$c") || { skipof[$c]=unknown_config; continue; }
            L=$STAGES
            if [[ $c == mp-* ]]; then
                L=
                for l in $(seq "$(( K < blocks ? K : blocks ))" -1 2); do
                    # shellcheck disable=SC2086
                    plan "$model" "$K" "$K" "$l" $o
                    u=$(sed -n 's/^ranks used: \([0-9]*\).*/\1/p' "$tmp/plan.txt")
                    if [ -n "$u" ] && [ "$u" -le "$K" ]; then L=$l; break; fi
                done
                if [ -z "$L" ]; then
                    skipof[$c]="needs_more_than_${K}_ranks"
                    [ "$c" = mp-dp ] && skipof[$c]="needs_N_x_L_>=_$((2 * K))_ranks"
                    say "# K=$K $c: no L in 2..$(( K < blocks ? K : blocks )) fits $K ranks (--plan)"
                    continue
                fi
            fi
            # shellcheck disable=SC2086
            plan "$model" "$K" "$K" "$L" $o
            Lused=$(sed -n 's/^stages: \([0-9,]*\) blocks.*/\1/p' "$tmp/plan.txt" | tr ',' '\n' | wc -l)
            Lof[$c]=$Lused
            pp=$(sed -n 's/^bytes sent: peak tick \([0-9]*\), mean per tick \([0-9]*\).*/\1 \2/p' "$tmp/plan.txt")
            u=$(sed -n 's/^ranks used: \([0-9]*\).*/\1/p' "$tmp/plan.txt")
            [ -n "$pp" ] || pp="- -"
            echo "#plan $model $K $c $Lused ${u:--} $pp" >>"$res"
            say "# --plan K=$K $c: L=$Lused, ranks used ${u:-?}, bytes sent peak tick / mean: $pp"
        done
        for rate in $RATES; do
            HOSTS_RATE=$rate
            hosts_up "$K" || { rc=$?; say "# hosts_up $K failed ($rc)"; hosts_down; [ $rc = 77 ] && exit 77; continue; }
            if [ -n "$STEPS" ]; then
                steps=$(steps_for "$rate")
            else
                steps=$(calibrate "$model" "$K")
            fi
            say "== $model K=$K rate=$rate: $steps steps, N=$K x B=$mb ($(date -u +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg))"
            set -- $CONFIGS
            n=$#
            for rep in $(seq "$REPS"); do
                # rotate: repetition r starts with configuration r
                order=()
                for i in $(seq 0 $((n - 1))); do
                    j=$(( (i + rep - 1) % n + 1 ))
                    order+=("${!j}")
                done
                for c in "${order[@]}"; do
                    if [ -n "${skipof[$c]:-}" ]; then
                        [ "$rep" = 1 ] && row "$model $mb $K $rate $c $rep $K - $steps - - - - - - - - - - - ${skipof[$c]}"
                        continue
                    fi
                    tag="$(echo "$model" | tr ':/' '__')-K$K-$rate-$c-r$rep"
                    m=$tmp/m-$tag.json t=$tmp/t-$tag.json
                    lopt=
                    [[ $c == mp-* ]] || [ -n "$STAGES" ] && lopt="--stages ${Lof[$c]}"
                    load1=$(cut -d' ' -f1 /proc/loadavg)
                    t0=$(date +%s.%N)
                    # shellcheck disable=SC2046,SC2086
                    hosts_exec 1 timeout "$TIMEOUT" mpirun --bind-to none -np "$K" "$CDP" \
                        --model "$model" --data "$DATA:n=$((K * mb * steps)):test=$mb" \
                        --workers "$K" --batch "$mb" --threads 1 --steps "$steps" \
                        --eval-every 0 --quiet $lopt $(opts_for "$c") \
                        --metrics "$m" --trace "$t" >"$tmp/run.log" 2>&1 &
                    wait $!
                    rc=$?
                    wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
                    { echo "--- $tag: rc $rc, wall $wall s"; cat "$tmp/run.log"; } >>"$log"
                    if [ $rc != 0 ] || ! grep -q '"summary": true' "$m" 2>/dev/null; then
                        st=failed_rc_$rc
                        [ $rc = 124 ] && st=timeout_${TIMEOUT}s
                        row "$model $mb $K $rate $c $rep $K ${Lof[$c]} $steps - - - - - - - - - - $load1 $st"
                        tail -3 "$tmp/run.log"
                        continue
                    fi
                    L=$(key "$m" stages)
                    ticks=$(key "$m" ticks)
                    tr=$(python3 "$bench_lib/trace_steps.py" "$t" --skip "$SKIP" 2>/dev/null)
                    read -r _ _ trmed trp10 <<<"${tr:-- - - -}"
                    row "$model $mb $K $rate $c $rep $K $L $steps $(key "$m" step_time_s)" \
                        "${trmed:--} ${trp10:--} $(key "$m" samples_per_s) $(key "$m" bytes_sent_total)" \
                        "$(key "$m" bytes_sent_peak_tick) $(key "$m" bytes_sent_mean_tick) $ticks" \
                        "$((ticks - 2 * L * steps)) $(key "$m" collective_calls_per_step) $load1 ok"
                    # the trace picture's runs: the first repetition at TRACE_AT
                    if [ "$rep" = 1 ] && [ "$TRACE_AT" = "$K:$rate" ] && [ "$spec" = "${MODELS%% *}" ]; then
                        case $c in
                            dp) cp "$t" "$RAW/trace-K$K-$rate-dp.json"; trace_a=$RAW/trace-K$K-$rate-dp.json ;;
                            cdp-v2) cp "$t" "$RAW/trace-K$K-$rate-cdp-v2.json"; trace_b=$RAW/trace-K$K-$rate-cdp-v2.json ;;
                        esac
                    fi
                    [ -n "${OUT:-}" ] || rm -f "$t"
                done
            done
            hosts_down
            say "# hosts down: $(mine_left) namespaces of this run left"
        done
        unset Lof skipof
    done
done
elapsed=$(( $(date +%s) - t_start ))
say "# total: $((elapsed / 60)) min $((elapsed % 60)) s; load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"

{ cat "$res"; echo; echo "# log"; cat "$log"; } >"$table"
echo
echo "# table: $table"
if [ $plot_ok = 1 ]; then
    draw "$table" "$tmp/result_lines.txt" >"$tmp/md.txt"
else
    draw "$table" "$tmp/result_lines.txt" nofig >"$tmp/md.txt"
fi
cat "$tmp/md.txt"
{ echo; echo "# table (Markdown)"; cat "$tmp/md.txt"; } >>"$table"
if [ -n "$TRACE_AT" ] && [ -n "$trace_a" ] && [ -n "$trace_b" ]; then
    first=$SKIP
    python3 "$bench_lib/trace_svg.py" "$TRACE_FIG" --first "$first" --count 2 \
        --title "cdp_run --trace, $(echo "$MODELS" | cut -d' ' -f1), ${TRACE_AT%%:*} hosts x 1 rank, links ${TRACE_AT#*:} (tc tbf), N=${TRACE_AT%%:*} x B=$B" \
        "dp (MPI_Allreduce at the end of the step)=$trace_a" \
        "cdp-v2 (partial sums around the ring, point to point)=$trace_b" \
        && echo "# trace picture: $TRACE_FIG"
fi
cat "$tmp/result_lines.txt" 2>/dev/null
[ $plot_ok = 1 ] || { echo "# no figure: gnuplot is missing (see above)"; exit 1; }
