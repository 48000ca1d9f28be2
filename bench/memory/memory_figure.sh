#!/bin/bash
# The paper's memory figure, measured: peak activation memory of cdp-v2
# against dp, as a ratio, over the number of workers N, for resnet50 and
# vit-b16 on 3x224x224 synthetic images, one process (1 rank).  One command:
#
#     nice bench/memory/memory_figure.sh [BUILD_DIR]
#
# For every model, N in NS and L in LS ("N" there means L = N) and stage cut
# in BALANCES it runs cdp_run --rule dp and --rule cdp-v2 for STEPS steps of
# N micro-batches of B samples (--eval-every 0, a data set of exactly
# STEPS*N*B samples) and reads peak_activation_bytes from --metrics: the
# bytes the executor's activation allocator held at its peak (stage outputs,
# received inputs, gradients between stages, labels; not the parameters,
# not the backward's workspace).  Next to each measured ratio it puts
#   - the timeline's prediction, N*(L+1)/2 over N*L stage-activations
#     = (L+1)/(2L) (DESIGN.md section 3; every stage the same size);
#   - cdp_run --plan's count for this N and L (its "peak ratio cdp-v2/dp:
#     activations X" line: the same timeline, counted tick by tick, in stage
#     units; it equals (L+1)/(2L) whenever the formula is exact);
#   - cdp_run --plan's bytes for this exact cut ("peak activations: ...
#     (X bytes ...); dp: ... (Y bytes)"): the timeline with every stage's
#     real size, each kept from its forward to its backward.  The executor
#     frees a stage's output once the next stage's backward has read it, so
#     the measured cdp-v2 peak is lower than this.
# The stage cut: --balance flops (the paper's: stages of equal compute) is
# the default and the figure's main curve; --balance activations (stages of
# equal kept bytes) is shown beside it.  On resnet50 the FLOP cut puts the
# stem and layer1 (57% of the kept bytes) in stage 0, which every worker
# holds almost all the time; on vit-b16 every block keeps the same bytes and
# the two cuts differ by at most the patch embedding and the head.
#
# Writes (RAW defaults to bench/raw/<UTC date>/):
#   $RAW/memory_figure.txt   the table (one row per model, N, L, cut; rows
#                            that were skipped say why), then the log
#   $FIG                     the figure (gnuplot; SVG, or PNG when the name
#                            ends in .png)                  [bench/figures/memory_figure.svg]
# and prints the table as Markdown, then its rows' figures as result lines
# (bench/README).  Redraw from a table without running anything:
#     PLOT_ONLY=bench/raw/DATE/memory_figure.txt bench/memory/memory_figure.sh
#
# environment (defaults):
#   MODELS ["resnet50 vit-b16@1"]: NAME or NAME@B (B samples per worker for
#   that model; vit-b16 takes ~3.4 s per sample's forward and backward here,
#   so B=1 keeps its runs to ~10 minutes; the ratio hardly depends on B)
#   NS ["2 4 8 16"]  LS ["4 N"]  BALANCES ["flops activations"]: a cut that
#   comes out the same as an earlier balance's (vit-b16 at L=2 and 4) is not
#   run again: its row says so and repeats the figures
#   SHAPE [3x224x224]  B [2, for models without @B]  STEPS [2]
#   THREADS [2]  MEM_MB [70% of MemAvailable: a configuration whose dp
#   estimate (--plan's dp activation bytes x 1.1 + 24 bytes per parameter:
#   two parameter slots, momentum, gradient sums; measured RSS has been
#   within ~20% of it) is larger is skipped and marked]
#   RAW, FIG, OUT (per-run files, kept when given; else a temporary directory)
# L larger than the model's blocks cannot be cut (resnet50 has 18 blocks,
# vit-b16 14: L = N = 16 fits neither): such rows say "skip".
# gnuplot: installed with apt-get (gnuplot-nox) when missing and this runs
# as root (or sudo -n works); else the script says how, still measures and
# writes the table, and PLOT_ONLY redraws it later.
# Two steps are enough: cdp_run --plan finds the same peak with --plan-steps
# 1, 2 and 3 for every configuration here (the second step starts while the
# first one's last workers still run, which is the steady state).

set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/common.sh"
MODELS=${MODELS:-"resnet50 vit-b16@1"}
NS=${NS:-"2 4 8 16"}
LS=${LS:-"4 N"}
BALANCES=${BALANCES:-"flops activations"}
SHAPE=${SHAPE:-3x224x224}
B=${B:-2}
STEPS=${STEPS:-2}
THREADS=${THREADS:-2}
RAW=${RAW:-$bench_dir/raw/$(date -u +%Y-%m-%d)}
FIG=${FIG:-$bench_dir/figures/memory_figure.svg}
if [ -z "${MEM_MB:-}" ]; then
    MEM_MB=$(awk '/^MemAvailable:/ {printf "%d", $2 / 1024 * 0.7}' /proc/meminfo)
fi

# ------------------------------------------------------------ gnuplot
# draw TABLE [nofig]: the Markdown table on stdout, the SVG in $FIG (not
# with nofig), then the result lines
draw() {
    local table=$1 nofig=${2:-} gp
    gp=$(mktemp /tmp/memory_figure.XXXXXX.gp)
    python3 - "$table" "$FIG" "$gp" "$gp.results" <<'EOF'
import sys
from bench_result import bench_result
table, fig, gp, results = sys.argv[1:5]
rows, meta = [], {}
cols = None
for line in open(table):
    if line.startswith("#cols "):
        cols = line.split()[1:]
    elif line.startswith("#meta "):
        k, _, v = line[6:].strip().partition("=")
        meta[k] = v
    elif line.startswith("#") or not line.strip():
        if line.startswith("# log"):
            break
    elif cols:
        f = line.split()
        rows.append(dict(zip(cols, f)))

def num(r, k):
    try:
        return float(r[k])
    except (ValueError, KeyError):
        return None

# Markdown
print("| model | B | N | L | cut (blocks) | dp peak act. MB | cdp-v2 peak act. MB | measured cdp-v2/dp "
      "| timeline (L+1)/(2L) | --plan stages | --plan bytes | peak RSS cdp-v2/dp |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for r in rows:
    if not r["status"].startswith("ok"):
        print(f"| {r['model']} | {r['B']} | {r['N']} | {r['L']} | {r['balance']} | - | - | {r['status'].replace('_', ' ')} "
              f"| {r['timeline']} | {r['plan_units']} | {r['plan_bytes']} | - |")
        continue
    rss = num(r, "cdp_rss") / num(r, "dp_rss")
    same = " (the same cut: not rerun)" if r["status"] == "ok:same_cut" else ""
    print(f"| {r['model']} | {r['B']} | {r['N']} | {r['L']} | {r['balance']} ({r['stages']}){same} "
          f"| {num(r, 'dp_act') / 1e6:.1f} | {num(r, 'cdp_act') / 1e6:.1f} | **{r['ratio']}** "
          f"| {r['timeline']} | {r['plan_units']} | {r['plan_bytes']} | {rss:.3f} |")

# the rows' figures as result lines, printed after the figure is drawn
with open(results, "w") as out:
    for r in rows:
        if not r["status"].startswith("ok"):
            continue
        cfg = (f"{r['model']} {meta.get('shape', '')} B={r['B']} N={r['N']} L={r['L']} "
               f"balance={r['balance']} stages={r['stages']}")
        for key, run, metric, unit in (
                ("dp_act", "dp", "peak_activation_bytes", "bytes"),
                ("cdp_act", "cdp-v2", "peak_activation_bytes", "bytes"),
                ("ratio", "cdp-v2/dp", "peak_activation_bytes", "ratio"),
                ("timeline", "cdp-v2/dp", "timeline_prediction", "ratio"),
                ("plan_units", "cdp-v2/dp", "plan_stage_activations", "ratio"),
                ("plan_bytes", "cdp-v2/dp", "plan_activation_bytes", "ratio"),
                ("dp_rss", "dp", "peak_rss_bytes", "bytes"),
                ("cdp_rss", "cdp-v2", "peak_rss_bytes", "bytes"),
                ("dp_step", "dp", "step_time", "s"), ("cdp_step", "cdp-v2", "step_time", "s")):
            bench_result("memory-figure", f"{cfg} {run}", metric, r[key], unit, file=out)

# gnuplot: one panel per model; colour = (L, cut); solid = measured,
# dashed = --plan bytes for that cut; black/grey dotted = the timeline
models = []
for r in rows:
    if r["model"] not in models:
        models.append(r["model"])
series = []   # (Lspec, balance)
for r in rows:
    s = (r["Lspec"], r["balance"])
    if s not in series:
        series.append(s)
colours = ["#1f77b4", "#2ca02c", "#d62728", "#ff7f0e", "#9467bd", "#8c564b"]
Ns = sorted({int(r["N"]) for r in rows})
out = []
w = 640 * max(1, len(models))
if fig.endswith(".png"):
    out.append(f"set terminal pngcairo size {w},700 font 'Helvetica,11' background '#ffffff'")
else:
    out.append(f"set terminal svg size {w},700 dynamic font 'Helvetica,13' background '#ffffff'")
out.append(f"set output '{fig}'")
out.append("set datafile missing '-'")
out.append("set logscale x 2")
out.append(f"set xrange [{min(Ns) / 1.25}:{max(Ns) * 1.25}]")
out.append("set xtics (" + ", ".join(f'"{n}" {n}' for n in Ns) + ")")
out.append("set yrange [0.3:1.0]")
out.append("set ytics 0.1")
out.append("set grid ytics lc rgb '#dddddd'")
out.append("set xlabel 'workers N (micro-batches per step)'")
out.append("set ylabel 'peak activation memory, cdp-v2 / dp'")
out.append("set key below Left reverse maxcols 2 width -6 height 1.5 font ',9' spacing 1.1 samplen 3")
shape = meta.get("shape", "")
out.append(f"set multiplot layout 1,{len(models)} title \"Peak activation memory of cdp-v2 against dp\\n"
           f"measured: one process, {shape} synthetic, {meta.get('steps', '')} steps "
           f"({meta.get('date', '')})\" font ',12'")
for mi, m in enumerate(models):
    blocks = next((r["blocks"] for r in rows if r["model"] == m), "?")
    bs = "/".join(sorted({r["B"] for r in rows if r["model"] == m}))
    out.append(f"set title '{m} ({blocks} blocks), B={bs} samples per worker'")
    plots = []
    for si, (ls, bal) in enumerate(series):
        pts = sorted((int(r["N"]), r) for r in rows
                     if r["model"] == m and r["Lspec"] == ls and r["balance"] == bal)
        if not pts:
            continue
        name = f"$d{mi}_{si}"
        # a cut measured under another balance already is drawn once
        ys = [(n, r["ratio"] if r["status"] == "ok" else "-",
               r["plan_bytes"] if r["status"] != "ok:same_cut" else "-") for n, r in pts]
        have_y = any(y != "-" for _, y, _ in ys)
        have_p = any(p != "-" for _, _, p in ys)
        if not (have_y or have_p):
            continue
        out.append(f"{name} << EOD")
        out += [f"{n} {y} {p}" for n, y, p in ys]
        out.append("EOD")
        c = colours[si % len(colours)]
        lab = ("L=4" if ls == "4" else f"L={ls}") + f", {bal} cut"
        if ls == "N":
            lab = f"L=N, {bal} cut"
        pt = 7 if bal == "flops" else 9
        if have_y:
            plots.append(f"{name} using 1:2 with linespoints lw 2 pt {pt} ps 1.1 lc rgb '{c}' "
                         f"title 'measured, {lab}'")
        if have_p:
            plots.append(f"{name} using 1:3 with linespoints dt 2 lw 1.5 pt {pt - 1} ps 0.9 lc rgb '{c}' "
                         f"title '--plan bytes, {lab}'")
    lsp = sorted({ls for ls, _ in series}, key=lambda s: (s == "N", s))
    for ls in lsp:
        if ls == "N":
            plots.append("(x + 1) / (2 * x) with lines dt 3 lw 2 lc rgb '#777777' "
                         "title 'timeline N(L+1)/2 / NL, L=N'")
        else:
            L = int(ls)
            plots.append(f"{(L + 1) / (2 * L)} with lines dt 3 lw 2 lc rgb '#000000' "
                         f"title 'timeline N(L+1)/2 / NL, L={L}'")
    out.append("plot " + ", \\\n     ".join(plots))
out.append("unset multiplot")
open(gp, "w").write("\n".join(out) + "\n")
EOF
    local rc=$?
    if [ $rc = 0 ] && [ -z "$nofig" ]; then
        gnuplot "$gp" && echo "# figure: $FIG" || rc=$?
    fi
    cat "$gp.results" 2>/dev/null
    rm -f "$gp" "$gp.results"
    return $rc
}

if [ -n "${PLOT_ONLY:-}" ]; then
    bench_have_gnuplot memory/memory_figure.sh || exit 1
    draw "$PLOT_ONLY"
    exit
fi

BUILD=${1:-${top_builddir:-$bench_top}}
CDP=$BUILD/cdp_run
bench_start memory_figure.sh rows.txt
plot_ok=1
bench_have_gnuplot memory/memory_figure.sh || plot_ok=0
mkdir -p "$RAW"
table=$RAW/memory_figure.txt
log=$tmp/log.txt
: >"$log"
say() { echo "$@" | tee -a "$log"; }

# key FILE NAME: a number from the metrics' summary line
key() { tail -1 "$1" | grep -o "\"$2\": [0-9.e+-]*" | awk '{print $2}'; }

cols="model B N L Lspec balance blocks stages ratio timeline plan_units plan_bytes dp_act cdp_act \
dp_rss cdp_rss dp_step cdp_step plan_dp_bytes status"
{
    echo "# bench/memory/memory_figure.sh: peak activation memory, cdp-v2 against dp (one rank)"
    bench_header
    echo "# cdp: $("$CDP" --version 2>&1 | head -1); $CDP; commit $(git -C "$here" rev-parse --short HEAD 2>/dev/null)"
    echo "# $SHAPE synthetic, MODELS=\"$MODELS\" (NAME@B), B=$B otherwise, $STEPS steps, 1 rank x $THREADS threads, --eval-every 0; MEM_MB=$MEM_MB"
    echo "# ratio = measured peak_activation_bytes cdp-v2 / dp; timeline = (L+1)/(2L);"
    echo "# plan_units = cdp_run --plan 'peak ratio' (stage units); plan_bytes = --plan's bytes for this cut"
    echo "# (cdp-v2 / dp); *_act, *_rss bytes; *_step s per step"
    echo "#meta date=$(date -u +%Y-%m-%d)"
    echo "#meta shape=$SHAPE"
    echo "#meta steps=$STEPS"
    echo "#cols $cols"
} >"$res"
head -7 "$res" | tee -a "$log"

row() { echo "$*" | tee -a "$res"; }

declare -A done_cut   # model B N L stages -> the figures of a row already measured
for spec in $MODELS; do
    model=${spec%@*}
    mb=$B
    [ "$spec" != "$model" ] && mb=${spec#*@}
    # the model's blocks and parameters, from a plan that surely fits
    "$CDP" --model "$model" --data "synthetic:$SHAPE:n=4:test=1" --workers 2 --stages 1 --batch 1 \
        --plan >"$tmp/probe-$model.txt" 2>&1
    blocks=$(sed -n "s/^model .* in \([0-9]*\) blocks.*/\1/p" "$tmp/probe-$model.txt")
    nparams=$(sed -n "s/^model .*: \([0-9]*\) parameters.*/\1/p" "$tmp/probe-$model.txt")
    if [ -z "$blocks" ]; then
        say "# $model: cdp_run --plan failed: $(tail -1 "$tmp/probe-$model.txt")"
        continue
    fi
    say "# $model: $blocks blocks, $nparams parameters and buffers"
    for ls in $LS; do
        for N in $NS; do
            L=$ls; [ "$ls" = N ] && L=$N
            # L = N = 4 is the L = 4 row already
            if [ "$ls" = N ] && [[ " $LS " == *" $N "* ]]; then continue; fi
            timeline=$(awk -v L="$L" 'BEGIN {printf "%.3f", (L + 1) / (2 * L)}')
            for bal in $BALANCES; do
                tag="$model-B$mb-N$N-L$L-$bal"
                if [ "$L" -gt "$blocks" ]; then
                    row "$model $mb $N $L $ls $bal $blocks - - $timeline - - - - - - - - - skip:_L=$L>${blocks}_blocks"
                    continue
                fi
                data="synthetic:$SHAPE:n=$((N * mb * STEPS)):test=$mb"
                common=(--model "$model" --data "$data" --workers "$N" --stages "$L" --batch "$mb"
                        --threads "$THREADS" --balance "$bal" --lr 0.01 --momentum 0.9)
                p=$tmp/plan-$tag.txt
                if ! "$CDP" "${common[@]}" --rule cdp-v2 --plan >"$p" 2>&1; then
                    say "# $tag: --plan failed: $(tail -1 "$p")"
                    row "$model $mb $N $L $ls $bal $blocks - - $timeline - - - - - - - - - plan_failed"
                    continue
                fi
                stages=$(sed -n 's/^stages: \([0-9,]*\) blocks.*/\1/p' "$p")
                units=$(sed -n 's/^peak ratio cdp-v2\/dp: activations \([0-9.]*\).*/\1/p' "$p")
                read -r pc pd < <(sed -n 's/^peak activations: .*(\([0-9]*\) bytes at.*dp: .*(\([0-9]*\) bytes).*/\1 \2/p' "$p")
                pbytes=$(awk -v a="$pc" -v b="$pd" 'BEGIN {printf "%.3f", a / b}')
                est=$(awk -v a="$pd" -v n="$nparams" 'BEGIN {printf "%d", (a * 1.1 + 24 * n) / 1048576}')
                say "# $tag: stages $stages; --plan cdp-v2/dp: stages $units, bytes $pc / $pd = $pbytes; dp estimate $est MiB"
                if [ "$est" -gt "$MEM_MB" ]; then
                    row "$model $mb $N $L $ls $bal $blocks $stages - $timeline $units $pbytes - - - - - - $pd skip:_~${est}_MiB>${MEM_MB}"
                    continue
                fi
                cut="$model $mb $N $L $stages"
                if [ -n "${done_cut[$cut]:-}" ]; then
                    read -r ratio rest <<<"${done_cut[$cut]}"
                    say "# $tag: the same cut as an earlier balance's: not run again"
                    row "$model $mb $N $L $ls $bal $blocks $stages $ratio $timeline $units $pbytes $rest ok:same_cut"
                    continue
                fi
                ok=1
                for rule in dp cdp-v2; do
                    m=$tmp/m-$tag-$rule.json
                    t0=$(date +%s.%N)
                    if ! "$CDP" "${common[@]}" --rule "$rule" --steps "$STEPS" --eval-every 0 \
                            --quiet --metrics "$m" >"$tmp/log-$tag-$rule.txt" 2>&1; then
                        say "# $tag $rule: cdp_run failed: $(tail -2 "$tmp/log-$tag-$rule.txt" | tr '\n' ' ')"
                        ok=0
                        break
                    fi
                    say "# $tag $rule: peak act $(key "$m" peak_activation_bytes), RSS $(key "$m" peak_rss_bytes)," \
                        "step $(key "$m" step_time_s) s, run $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s"
                done
                if [ $ok = 0 ]; then
                    row "$model $mb $N $L $ls $bal $blocks $stages - $timeline $units $pbytes - - - - - - $pd run_failed"
                    continue
                fi
                d=$tmp/m-$tag-dp.json c=$tmp/m-$tag-cdp-v2.json
                da=$(key "$d" peak_activation_bytes) ca=$(key "$c" peak_activation_bytes)
                ratio=$(awk -v a="$ca" -v b="$da" 'BEGIN {printf "%.3f", a / b}')
                rest="$da $ca $(key "$d" peak_rss_bytes) $(key "$c" peak_rss_bytes)"
                rest="$rest $(key "$d" step_time_s) $(key "$c" step_time_s) $pd"
                done_cut[$cut]="$ratio $rest"
                row "$model $mb $N $L $ls $bal $blocks $stages $ratio $timeline $units $pbytes $rest ok"
            done
        done
    done
done

{ cat "$res"; echo; echo "# log"; cat "$log"; } >"$table"
echo
echo "# table: $table"
if [ $plot_ok = 1 ]; then
    draw "$table"
else
    draw "$table" nofig
    echo "# no figure: gnuplot is missing (see above)"
    exit 1
fi
