# Shared by the MPI test scripts: paths, a timeout around every mpirun, a
# scratch directory, and the helpers that compare weight files.
set -u
: "${top_builddir:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${MPIRUN:=mpirun}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
CDP="$top_builddir/cdp_run"
COMPARE="$top_builddir/tests/st_compare"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0

# run NP ARGS...: cdp_run on NP ranks, 300 s at most
run() {
    local np=$1
    shift
    timeout 300 "$MPIRUN" --oversubscribe -np "$np" "$CDP" "$@"
}

fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

pass() {
    echo "ok: $*"
}

# same MODEL A B TOL WHAT: weights A and B agree within TOL (0: bitwise)
same() {
    local out
    if out=$("$COMPARE" "$1" "$2" "$3" "$4" 2>&1); then
        pass "$5 ($out)"
    else
        fail "$5 ($out)"
    fi
}

# differ MODEL A B WHAT: weights A and B are not bitwise equal (WHAT
# changes the run: else the checks that it is exact prove little)
differ() {
    if "$COMPARE" "$1" "$2" "$3" 0 >/dev/null; then
        fail "$4: the same weights"
    else
        pass "$4: the weights differ"
    fi
}

finish() {
    if [ "$failures" -gt 0 ]; then
        echo "$failures check(s) failed"
        exit 1
    fi
    exit 0
}
