# Shared by the tests against PyTorch.
#   torch_run SCRIPT PROBE (tests/torch/torch_layers.sh, torch_optim.sh)
#     runs tests/torch/SCRIPT with /usr/bin/python3 (CDP_TORCH_PYTHON
#     overrides it) on the probe program tests/lib/PROBE, 120 s at most, and
#     exits with its status; it skips (77) without python3 + torch + numpy.
#   torch_parity_setup SCRIPT "MODULES" TAG SPLIT...
#     (tests/torch/mpi_torch_parity.sh, parity_lib.sh) sets PY, DATA, srcdir,
#     builddir, REF (tests/torch/SCRIPT), CDP, MPIRUN, have_mpi and a scratch
#     directory tmp (removed at exit); it skips (77) unless python3 imports
#     MODULES and Fashion-MNIST's SPLIT files (train, t10k) are there.  CDP_FMNIST_DIR overrides the data directory.
# Both use torch_need and the skip (77) and fail (1) of this file.
# Environment (from the automake harness): top_builddir, top_srcdir, MPIRUN.
set -u

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

# torch_need "MODULES": PY, srcdir and builddir set, or a skip unless PY
# imports MODULES
torch_need() {
    PY=${CDP_TORCH_PYTHON:-/usr/bin/python3}
    srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
    builddir=${top_builddir:-$(pwd)}
    [ -x "$PY" ] || skip "$PY not found"
    "$PY" -c "import ${1// /, }" >/dev/null 2>&1 || skip "$PY cannot import $1"
}

torch_parity_setup() {
    local script=$1 modules=$2 tag=$3 split f
    shift 3
    torch_need "$modules"
    DATA=${CDP_FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
    REF=$srcdir/tests/torch/$script
    CDP=$builddir/cdp_run
    MPIRUN=${MPIRUN:-mpirun}
    for split in "$@"; do
        for f in $split-images-idx3-ubyte $split-labels-idx1-ubyte; do
            [ -f "$DATA/$f.gz" ] || [ -f "$DATA/$f" ] \
                || skip "Fashion-MNIST file $DATA/$f(.gz) missing"
        done
    done
    [ -f "$REF" ] || fail "$REF missing"
    [ -x "$CDP" ] || fail "$CDP missing (build first)"
    have_mpi=1
    if [ "$MPIRUN" = none ] || ! command -v "${MPIRUN%% *}" >/dev/null 2>&1; then
        have_mpi=0
        echo "note: no MPI launcher ($MPIRUN); the 2-rank cases run on one rank"
    fi
    export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
    export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
    export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/$tag.XXXXXX") || fail "mktemp"
    trap 'rm -rf "$tmp"' EXIT
}

torch_run() {
    local script probe
    torch_need "torch numpy"
    script=$srcdir/tests/torch/$1
    probe=$builddir/tests/lib/$2
    [ -f "$script" ] || fail "$script missing"
    [ -x "$probe" ] || fail "$probe missing (make check builds it; or make tests/lib/$2)"
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
