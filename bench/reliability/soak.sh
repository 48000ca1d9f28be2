#!/usr/bin/env bash
# bench/reliability/soak.sh [SEED] [COUNT] [BUILD]: the long soak, tests/mpi/soak.sh with
# COUNT generated combinations (default 300) from SEED (default the date,
# YYYYMMDD, so that each day's run covers others than the last), on the
# cdp_run of BUILD (default this tree).  Prints every combination's verdict
# and ends with the summary line (combinations, verified, refused, failed,
# seconds) that RESULTS.md quotes; each failure is printed with the command
# that replays it.  A few hundred combinations take 10 to 30 minutes on 2
# cores; run it niced on a shared machine:
#     nice -n 10 bench/reliability/soak.sh 7 300 > soak.txt
# The summary's figures end the output again as result lines (bench/README).
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/common.sh"
SOAK_SEED=${1:-$(date -u +%Y%m%d)}
SOAK_COUNT=${2:-300}
top_builddir=$(cd "${3:-$bench_top}" && pwd)
top_srcdir=$bench_top
export SOAK_SEED SOAK_COUNT top_builddir top_srcdir
[ -x "$top_builddir/cdp_run" ] || { echo "soak.sh: $top_builddir/cdp_run not found (build first)" >&2; exit 2; }
bench_args="$SOAK_SEED $SOAK_COUNT"
bench_header
out=$(mktemp /tmp/soak.XXXXXX)
trap 'rm -f "$out"' EXIT
sh "$top_srcdir/tests/mpi/soak.sh" | tee "$out"
rc=${PIPESTATUS[0]}
# the summary line: "soak: seed S, N combinations (F fixed): V verified, R refused, B failed, T s"
re='([0-9]+) combinations .*: ([0-9]+) verified, ([0-9]+) refused, ([0-9]+) failed, ([0-9]+) s$'
if [[ $(grep '^soak: seed ' "$out" | tail -1) =~ $re ]]; then
    cfg="seed=$SOAK_SEED count=$SOAK_COUNT"
    bench_result soak "$cfg" combinations "${BASH_REMATCH[1]}" count
    bench_result soak "$cfg" verified "${BASH_REMATCH[2]}" count
    bench_result soak "$cfg" refused "${BASH_REMATCH[3]}" count
    bench_result soak "$cfg" failed "${BASH_REMATCH[4]}" count
    bench_result soak "$cfg" run_time "${BASH_REMATCH[5]}" s
fi
exit "$rc"
