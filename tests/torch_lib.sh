# Shared by the torch parity tests (tests/torch_layers.sh,
# tests/torch_optim.sh): torch_run SCRIPT PROBE runs tests/SCRIPT with
# /usr/bin/python3 (CDP_TORCH_PYTHON overrides it) on the probe program
# tests/PROBE, 120 s at most, and exits with its status; it skips (77)
# without python3 + torch + numpy.  Environment (from the automake
# harness): top_builddir, top_srcdir.
set -u

torch_run() {
    local PY=${CDP_TORCH_PYTHON:-/usr/bin/python3}
    local here srcdir builddir script probe
    here=$(cd "$(dirname "$0")" && pwd)
    srcdir=${top_srcdir:-$(cd "$here/.." && pwd)}
    builddir=${top_builddir:-$(pwd)}
    script=$srcdir/tests/$1
    probe=$builddir/tests/$2
    skip() { echo "SKIP: $*"; exit 77; }
    fail() { echo "FAIL: $*"; exit 1; }
    [ -x "$PY" ] || skip "$PY not found"
    "$PY" -c 'import torch, numpy' >/dev/null 2>&1 || skip "$PY cannot import torch and numpy"
    [ -f "$script" ] || fail "$script missing"
    [ -x "$probe" ] || fail "$probe missing (make check builds it; or make tests/$2)"
    local TO=
    command -v timeout >/dev/null 2>&1 && TO="timeout 120"
    $TO "$PY" "$script" --probe "$probe"
    local rc=$?
    case $rc in
        0|1|77) exit $rc ;;
        124) fail "$1 timed out" ;;
        *) fail "$1 exited with $rc" ;;
    esac
}
