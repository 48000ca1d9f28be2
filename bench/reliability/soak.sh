#!/usr/bin/env bash
# bench/soak.sh [SEED] [COUNT] [BUILD]: the long soak, tests/soak.sh with
# COUNT generated combinations (default 300) from SEED (default the date,
# YYYYMMDD, so that each day's run covers others than the last), on the
# cdp_run of BUILD (default this tree).  Prints every combination's verdict
# and ends with the summary line (combinations, verified, refused, failed,
# seconds) that RESULTS.md quotes; each failure is printed with the command
# that replays it.  A few hundred combinations take 10 to 30 minutes on 2
# cores; run it niced on a shared machine:
#     nice -n 10 bench/soak.sh 7 300 > soak.txt
here=$(cd "$(dirname "$0")" && pwd)
SOAK_SEED=${1:-$(date -u +%Y%m%d)}
SOAK_COUNT=${2:-300}
top_builddir=$(cd "${3:-$here/..}" && pwd)
top_srcdir=$(cd "$here/.." && pwd)
export SOAK_SEED SOAK_COUNT top_builddir top_srcdir
[ -x "$top_builddir/cdp_run" ] || { echo "soak.sh: $top_builddir/cdp_run not found (build first)" >&2; exit 2; }
. "$here/common.sh"
bench_args="$SOAK_SEED $SOAK_COUNT"
bench_header
exec sh "$top_srcdir/tests/soak.sh"
