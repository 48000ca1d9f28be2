# The start the bench scripts share; sourced, not run.

# the script's arguments, for the header (sourced: $@ is the script's)
bench_args="$*"
# where things are: bench_lib this folder (the shared code), bench_dir
# bench/, bench_top the source tree
bench_lib=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bench_dir=$(cd "$bench_lib/.." && pwd)
bench_top=$(cd "$bench_dir/.." && pwd)
# the shared Python modules (trace_steps, bench_result, ...) import from
# every script's python, heredocs included
export PYTHONPATH="$bench_lib${PYTHONPATH:+:$PYTHONPATH}"
#
# bench_start NAME RESULTS: stops unless $CDP is a built cdp_run, lets
# mpirun run as root, and sets tmp (OUT when given, kept; else a temporary
# directory removed at exit) and res=$tmp/RESULTS, emptied.
bench_start() {
    [ -x "$CDP" ] || { echo "$1: $CDP not found (build first)" >&2; exit 2; }
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    if [ -n "${OUT:-}" ]; then
        mkdir -p "$OUT"
        tmp=$OUT
    else
        tmp=$(mktemp -d "/tmp/${1%.sh}.XXXXXX")
        trap 'rm -rf "$tmp"' EXIT
    fi
    res=$tmp/$2
    : >"$res"
}

# bench_header: the lines every result opens with, "# key: value": what
# ran (the benchmark, the command with the environment knobs it read),
# from which source (commit; "dirty" when the tree has local changes, so
# the figure cannot be tied to a commit alone), when, where (the CPU model:
# kernel choice and so timings depend on it) and how busy (on a shared
# machine the load says how far to trust a timing).  The knobs are the
# variables the script reads as ${NAME:-...} that are set, plus the
# OpenBLAS, OpenMP and CDP_ ones, which change kernels and threads.
bench_header() {
    local top=$bench_top script cmd knobs v commit cpu mem
    script=${BENCH_SCRIPT:-$0}
    cmd=${BENCH_COMMAND:-$0${bench_args:+ $bench_args}}
    knobs=
    for v in $( { grep -oE '\$\{[A-Z][A-Z0-9_]*:[-?=]' "$script" 2>/dev/null |
                  sed 's/^..//; s/:.$//'
                  compgen -e | grep -E '^(OPENBLAS_|OMP_|GOMP_|CDP_|DNNL_|ONEDNN_)'; } | sort -u); do
        [ -n "${!v+x}" ] && knobs="$knobs$v=${!v} "
    done
    # BENCH_COMMIT: for a tree without git (an unpacked tarball)
    if [ -n "${BENCH_COMMIT:-}" ]; then
        commit=$BENCH_COMMIT
    elif commit=$(git -C "$top" rev-parse --short HEAD 2>/dev/null); then
        [ -z "$(git -C "$top" status --porcelain --untracked-files=no 2>/dev/null)" ] ||
            commit="$commit (dirty)"
    else
        commit="unknown (not a git tree; set BENCH_COMMIT)"
    fi
    cpu=$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
    mem=$(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo 2>/dev/null)
    echo "# bench: ${BENCH_NAME:-$(basename "$script")}"
    echo "# command: $knobs${cmd#"$top"/}"
    echo "# commit: $commit"
    echo "# date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "# machine: $(uname -n); $(nproc) CPUs (${cpu:-unknown CPU}); ${mem:-unknown} memory"
    echo "# load: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null) (1, 5, 15 min)"
    if command -v nvidia-smi >/dev/null 2>&1; then
        echo "# gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null |
                       head -1)"
    fi
}

# bench_result BENCH CONFIG METRIC VALUE UNIT: one figure as a result
# line, the format every benchmark prints beside its own output (bench/README,
# "Result lines"; bench_result.py and bench_util.h print the same):
#     result<TAB>BENCH<TAB>CONFIG<TAB>METRIC<TAB>VALUE<TAB>UNIT
# A tab or newline inside a field becomes a space (a field never splits),
# an empty field "-", an empty VALUE (a run that gave no figure) "nan".
bench_result() {
    [ $# = 5 ] ||
        { echo "bench_result: needs BENCH CONFIG METRIC VALUE UNIT, got $# argument(s)" >&2; return 2; }
    local f line=result value=$4
    set -- "$1" "$2" "$3" "${value:-nan}" "$5"
    for f in "$@"; do
        f=${f//$'\t'/ }
        f=${f//$'\n'/ }
        line="$line"$'\t'"${f:--}"
    done
    printf '%s\n' "$line"
}

# bench_have_gnuplot SCRIPT: gnuplot is there, installed when missing
# (apt-get, as root or with sudo -n); else 1 with what to do, and how to
# draw SCRIPT's figure later from its table
bench_have_gnuplot() {
    command -v gnuplot >/dev/null 2>&1 && return 0
    local sudo=
    if [ "$(id -u)" != 0 ]; then
        sudo -n true 2>/dev/null && sudo="sudo -n" || sudo=NO
    fi
    if [ "$sudo" != NO ] && command -v apt-get >/dev/null 2>&1; then
        echo "# gnuplot missing: apt-get install gnuplot-nox" >&2
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            gnuplot-nox >&2 || { $sudo apt-get update >&2 &&
            $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
                gnuplot-nox >&2; }
    fi
    command -v gnuplot >/dev/null 2>&1 && return 0
    echo "$1: gnuplot is missing and could not be installed here: install it" >&2
    echo "  (Debian: apt-get install gnuplot-nox, as root) and draw the figure with" >&2
    echo "  PLOT_ONLY=<the table this run writes> bench/$1" >&2
    return 1
}
