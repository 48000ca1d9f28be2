#!/bin/bash
# What denormal floats cost this CPU: the synthetic classes are easy, the
# network fits them within a few hundred steps, and gradients and momentum
# then decay into denormal floats, which many CPUs handle slowly.
# Runs `cdp_run --data synthetic --steps STEPS` (the default model, one
# rank) with IEEE arithmetic and with --flush-denormals, alternating, REPS
# times, and prints the time per step of an early epoch and of the last
# one, and their ratio; then the result lines (bench/README): every run's
# two figures, the medians of the last epoch's and their ratio.
#
# usage: bench/kernels/denormal.sh [BUILD_DIR]
# environment: STEPS [3072]  EARLY [3] (the early epoch)  REPS [3]
#   EXTRA (more cdp_run options)  OUT
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/common.sh"
BUILD=${1:-${top_builddir:-$bench_top}}
CDP=$BUILD/cdp_run
STEPS=${STEPS:-3072}
EXTRA=${EXTRA:-}
EARLY=${EARLY:-3}
REPS=${REPS:-3}
bench_start denormal.sh results.txt

# ms per step of epoch E of a --metrics file
ms_per_step() {
    # the epoch's steps from the metrics' own step counts, not assumed
    awk -v e="$2" -F'[:,]' '$1 == "{\"epoch\"" {
        for (i = 1; i < NF; i++) if ($i ~ /"step"/) s = $(i + 1)
        if ($2 + 0 == e - 1) s0 = s
        if ($2 + 0 == e) { n = s - s0
            for (i = 1; i < NF; i++) if ($i ~ /"time_s"/) t = $(i + 1) } }
        END { printf "%.3f", 1000 * t / n }' "$1"
}

bench_header
echo "# cdp: $("$CDP" --version 2>&1 | head -1); $CDP --data synthetic --steps $STEPS $EXTRA"
printf "%-4s %-5s %14s %14s %7s\n" rep mode "early ms/step" "last ms/step" ratio
for r in $(seq 1 "$REPS"); do
    for mode in ieee ftz; do
        m=$tmp/$mode.$r.jsonl
        flag=
        [ $mode = ftz ] && flag=--flush-denormals
        # shellcheck disable=SC2086
        "$CDP" --data synthetic --steps "$STEPS" $EXTRA $flag --quiet \
            --metrics "$m" >"$tmp/$mode.$r.log" 2>&1 || { cat "$tmp/$mode.$r.log"; exit 1; }
        a=$(ms_per_step "$m" "$EARLY")
        b=$(ms_per_step "$m" "$(grep -c '^{"epoch"' "$m")")
        printf "%-4s %-5s %14s %14s %7.2f\n" "$r" $mode "$a" "$b" \
            "$(echo "$b / $a" | bc -l)" | tee -a "$res"
    done
done
# medians: one slow epoch (another process) must not decide the ratio
med() { awk -v m="$1" '$2 == m { print $4 }' "$res" | sort -g |
        awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
i=$(med ieee); f=$(med ftz)
ratio=$(echo "$i / $f" | bc -l)
printf "RESULT last epoch, median ms/step: ieee %s, ftz %s, ieee/ftz %.2f\n" "$i" "$f" "$ratio"
cfg="synthetic steps=$STEPS${EXTRA:+ $EXTRA}"
while read -r r mode a b _; do
    bench_result denormal "$cfg $mode rep=$r epoch=$EARLY" step_time "$a" ms
    bench_result denormal "$cfg $mode rep=$r epoch=last" step_time "$b" ms
done <"$res"
bench_result denormal "$cfg ieee epoch=last" step_time_median "$i" ms
bench_result denormal "$cfg ftz epoch=last" step_time_median "$f" ms
bench_result denormal "$cfg ieee/ftz epoch=last" step_time_median "$(printf '%.4f' "$ratio")" ratio
