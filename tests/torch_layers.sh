#!/bin/bash
# Per-layer parity of the CPU backend's kernels with PyTorch: forward and
# backward of conv2d, batchnorm2d (training, evaluation, running
# statistics), relu, maxpool2d, global average pooling, linear (fused relu,
# relu-masked dx, accumulate), the residual add and softmax cross-entropy,
# on random inputs (tests/torch_layers.py drives tests/layer_probe).
#
# Skips (77) without /usr/bin/python3 + torch (CDP_TORCH_PYTHON overrides the
# interpreter).  Environment (from the automake harness): top_builddir,
# top_srcdir.

set -u

PY=${CDP_TORCH_PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
srcdir=${top_srcdir:-$(cd "$here/.." && pwd)}
builddir=${top_builddir:-$(pwd)}
SCRIPT=$srcdir/tests/torch_layers.py
PROBE=$builddir/tests/layer_probe

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

[ -x "$PY" ] || skip "$PY not found"
"$PY" -c 'import torch, numpy' >/dev/null 2>&1 || skip "$PY cannot import torch and numpy"
[ -f "$SCRIPT" ] || fail "$SCRIPT missing"
[ -x "$PROBE" ] || fail "$PROBE missing (make check builds it; or make tests/layer_probe)"

TO=
command -v timeout >/dev/null 2>&1 && TO="timeout 120"
$TO "$PY" "$SCRIPT" --probe "$PROBE"
rc=$?
case $rc in
    0|1|77) exit $rc ;;
    124) fail "torch_layers.py timed out" ;;
    *) fail "torch_layers.py exited with $rc" ;;
esac
