#!/bin/bash
# Networks exported from PyTorch modules (examples/export_model.py) train in
# cdp as in PyTorch: torchvision's vgg11_bn, wide_resnet50_2, mobilenet_v2,
# vit_b_16 and resnet18 classes and a hand-written nn.Sequential CNN
# (tests/torch/export_nets.py: 3x32x32, narrowed where the real widths
# would be slow), exported with their weights.  For each network:
#   1. PyTorch comparison: cdp_run trains 3 steps under dp, cdp-v1 and
#      cdp-v2 (N = 2 workers, B = 2, 2 stages) on 2 ranks, and dp with N = 4
#      (whose bits depend on the ranks) on 1 and 2 ranks, from the exported
#      weights, on CIFAR-10-format files of random bytes in file order, and
#      tests/torch/torch_model_reference.py runs the same steps on the same
#      torch module (its stages the file's blocks as cdp cuts them); every
#      run must meet the global-norm bounds of the ResNet parity tests
#      (parity_lib.sh: rel <= 1e-4, rel_change <= 1e-3), and a negative
#      control, the cdp-v1 reference against the 2-rank dp run, must fail.
#      Dropout runs with p = 0 here (FUNCTION_nodrop, and the description
#      with every "p" set to 0): cdp's mask is counter-based (doc/reference.md
#      section 3.11) and PyTorch's comes from its generator, so the two never
#      draw the same one; p = 0 is the identity in both, so the rest of the
#      network is compared (tests/torch/torch_layers.sh checks cdp's dropout
#      against its formula).
#   2. Rank invariance: cdp-v1 and cdp-v2 on 1 rank give bitwise the
#      weights of 2 ranks, with the real dropout (p > 0) where the network
#      has one (for the others: the runs of 1., which compare both with
#      PyTorch).
#   3. The final weights load into the torch module with
#      load_state_dict(strict=True).
# Skips (77) without /usr/bin/python3 + torch + torchvision.
PARITY_SPLITS=
. "$(dirname "$0")/parity_lib.sh"
EXPORT="$srcdir/examples/export_model.py"
export PYTHONPATH="$srcdir/tests/torch${PYTHONPATH:+:$PYTHONPATH}"

# CIFAR-10's binary format: 64 records (a label byte, 3x32x32 bytes) a file
cifar=$tmp/cifar
mkdir -p "$cifar"
"$PY" - "$cifar" <<'PY' || fail "could not write the data files"
import sys, numpy as np
g = np.random.default_rng(5)
for name in [f"data_batch_{k}.bin" for k in range(1, 6)] + ["test_batch.bin"]:
    rec = g.integers(0, 256, size=(64, 3073), dtype=np.uint8)
    rec[:, 0] = g.integers(0, 10, size=64)
    rec.tofile(f"{sys.argv[1]}/{name}")
PY
PARITY_DATA="--data cifar10 --data-dir $cifar --threads 1"
# SGD, lr 0.01; vgg11_bn's 0.1: its classifier starts at normal(0, 0.01)
# weights, so that at 0.01 the negative control (cdp-v1 against dp) is
# within the bound (rel_change 1.3e-4), at 0.1 4.7e-3; the networks whose
# last maps are 1x1 (BatchNorm over the 2 values of a micro-batch) diverge
# at 0.1
sgd_of() {
    echo "--lr $([ "$1" = vgg11_bn ] && echo 0.1 || echo 0.01) --momentum 0.9 --weight-decay 5e-4"
}

NETS=${EXPORT_NETS:-seqcnn vgg11_bn wide_resnet50_2 mobilenet_v2 vit_b_16 resnet18}

# every network's description and weights into $tmp/NET.json, NET-init.st
# (one python: torch's import is seconds)
$TOPY "$PY" - "$EXPORT" "$tmp" $NETS <<'PY' || fail "export failed"
import os, sys
exp, tmp, nets = sys.argv[1], sys.argv[2], sys.argv[3:]
sys.path.insert(0, os.path.dirname(exp))
import export_model
for n in nets:
    sys.argv = [exp, f"export_nets:{n}", f"{tmp}/{n}.json", f"{tmp}/{n}-init.st",
                "--input", "3,32,32", "--classes", "10", "--seed", "3"]
    export_model.main()
PY

# same_bits A B WHAT
same_bits() {
    if [ -s "$1" ] && cmp -s "$1" "$2"; then
        echo "ranks: $3: 1 and 2 ranks give bitwise the same weights"
    else
        echo "ranks: $3: the weights of 1 and 2 ranks differ"
        bad=1
    fi
}

# cdp_on NP RULE JSON OUT: 3 steps of RULE on NP ranks
cdp_on() {
    local launch=
    [ "$1" -gt 1 ] && [ $have_mpi = 1 ] && launch="$MPIRUN --allow-run-as-root --oversubscribe -np $1"
    # shellcheck disable=SC2086
    $TO $launch "$CDP" --model "$3" --init-weights "$tmp/$net-init.st" $PARITY_DATA \
        --no-shuffle --rule "$2" --workers 2 --batch 2 --steps 3 --stages 2 $sgd \
        --eval-every 0 --quiet --save-weights "$4" > "$tmp/log" 2>&1 ||
        { cat "$tmp/log"; fail "$net: $2 on $1 rank(s) failed"; }
}

loads=
for net in $NETS; do
    sgd=$(sgd_of "$net")
    nodrop=$net
    grep -q "^def ${net}_nodrop" "$srcdir/tests/torch/export_nets.py" && nodrop=${net}_nodrop
    # the PyTorch comparison: the same description with every dropout's p = 0
    # (the same weights: dropout has none), against the module with p = 0
    sed -E 's/"p": [0-9.e+-]+/"p": 0/' "$tmp/$net.json" > "$tmp/$net-p0.json"
    PARITY_REF_OPTS="--data-dir $cifar --module export_nets:$nodrop --threads 1"
    # mobilenet_v2: 8 of its 17 blocks (tests/torch/export_nets.py), at the
    # other networks' settings.  With all 17 (last maps 2x2) the training is
    # chaotic: the reference's own float32 run after 3 steps is rel_change
    # 0.14 from its float64 run (dp; the negative control: 0.25), and a
    # change of 1e-7 of the initial weights moves the float64 run as far;
    # 1e-3..0.25 at every lr (1e-3..1e-2) and B (2..16) tried, also at
    # width_mult 0.5 and 1 and with last maps 4x4 or 8x8; 2 steps came
    # under 1e-4 for single export seeds only.  At 8 blocks (last maps 4x4)
    # that distance is 3.5e-7 for dp (N = 4: 2.8e-7), 3.0e-7 for cdp-v1,
    # 3.3e-7 for cdp-v2, the negative control 2.3e-2 (export seeds 2, 4,
    # 5: 3e-7..3e-5; seed 1: 2.5e-3, so another export seed needs this
    # measured again)
    PARITY_NOISE=
    # dp's bits depend on the number of ranks (MPI_Allreduce's sum), at
    # N = 4 (at N = 2 one addition, a + b = b + a, gives 1 and 2 ranks the
    # same bits): dp with N = 4 on 1 and on 2 ranks against PyTorch; cdp-v1
    # and cdp-v2 on 1 rank give the bits of 2 ranks (below)
    configs="4:1:dp 4:2:dp 2:2"
    [ "$nodrop" = "$net" ] && configs="4:1:dp 4:2:dp 2:1:cdp-v1,cdp-v2 2:2"
    parity "$net" "$tmp/$net-p0.json" "$tmp/$net-init.st" 2 3 2 "$configs" "$sgd"
    cmp -s "$tmp/$net-dp-n4-r1.st" "$tmp/$net-dp-n4-r2.st" &&
        echo "note: $net: dp with N = 4 gives the same bits on 1 and 2 ranks"
    if [ "$nodrop" = "$net" ]; then
        for rule in cdp-v1 cdp-v2; do   # parity's runs on 1 and 2 ranks
            same_bits "$tmp/$net-$rule-n2-r1.st" "$tmp/$net-$rule-n2-r2.st" "$net $rule"
        done
        loads="$loads $net:$tmp/$net-cdp-v2-n2-r2.st"
        continue
    fi
    # the real dropout: its mask must not depend on the ranks
    grep -q '"kind": "dropout"' "$tmp/$net.json" || { echo "$net: no dropout exported"; bad=1; }
    for rule in cdp-v1 cdp-v2; do
        for np in 1 2; do
            cdp_on $np $rule "$tmp/$net.json" "$tmp/$net-drop-$rule-r$np.st"
        done
        same_bits "$tmp/$net-drop-$rule-r1.st" "$tmp/$net-drop-$rule-r2.st" "$net $rule, dropout on"
    done
    cmp -s "$tmp/$net-drop-cdp-v2-r2.st" "$tmp/$net-cdp-v2-n2-r2.st" &&
        { echo "$net: dropout changed nothing"; bad=1; }
    loads="$loads $nodrop:$tmp/$net-cdp-v2-n2-r2.st $net:$tmp/$net-drop-cdp-v2-r2.st"
done

# the final weights into the torch modules, strictly
# shellcheck disable=SC2086
$TOPY "$PY" - "$srcdir/examples" $loads <<'PY' || bad=1
import sys
sys.path.insert(0, sys.argv[1])
import torch, export_nets
from cdp_files import st_read
status = 0
for case in sys.argv[2:]:
    fn, path = case.split(":", 1)
    m = getattr(export_nets, fn)()
    try:
        m.load_state_dict(st_read(path), strict=True)
    except RuntimeError as e:
        print(f"load: {fn}: {str(e).splitlines()[0]}")
        status = 1
        continue
    m.eval()
    y = m(torch.zeros(2, 3, 32, 32))
    print(f"load: {fn}: {len(m.state_dict())} tensors loaded strictly, logits {tuple(y.shape)}")
    status |= tuple(y.shape) != (2, 10)
sys.exit(status)
PY

finish "exported networks train in cdp as in PyTorch, the same bits on 1 and 2 ranks"
