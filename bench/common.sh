# The start the bench scripts share; sourced, not run.
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

# bench_header: the line a result file opens with: when, where (the CPU
# model: kernel choice and so timings depend on it) and how busy (the
# machines are shared; the load says how far to trust a timing)
bench_header() {
    echo "# $(date -u '+%Y-%m-%d %H:%M UTC') $(uname -n); $(nproc) CPUs" \
         "($(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)); load: $(cut -d' ' -f1-3 /proc/loadavg)"
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
