# examples/export_model.py: a hand-written nn.Sequential CNN and
# torchvision's resnet18 at 3x32x32, exported with their weights, train 3
# steps in cdp to bitwise the same weights on 1 and 2 ranks under cdp-v1
# and cdp-v2, and the final weights load into the torch module with
# load_state_dict(strict=True), changed by the training; torchvision's real
# vgg11_bn, wide_resnet50_2, mobilenet_v2 and vit_b_16 (image_size 32)
# export and build in cdp (cdp_run --plan) with as many parameters and
# buffers as torch's state_dict; a module or an op cdp has no layer for is
# refused with one line naming its module path and the op.
# (tests/torch/torch_export_parity.sh trains the exported networks against
# PyTorch.)
. "$(dirname "$0")/torch_lib.sh"
torch_need "torch torchvision numpy"
. "$(dirname "$0")/../lib/lib.sh"
EXPORT="$srcdir/examples/export_model.py"
ARGS="--data synthetic:3x32x32 --steps 3 --batch 4 --eval-every 0 --quiet --threads 1"
failures=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; failures=$((failures + 1)); }

cat > "$TMP/seqcnn.py" <<'PY'
from torch import nn
def make():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8),
                         nn.ReLU(inplace=True), nn.MaxPool2d(2),
                         nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.1),
                         nn.Linear(16, 10))
def bad():
    return nn.Sequential(nn.Conv2d(3, 8, 3), nn.Sigmoid(), nn.Flatten(), nn.Linear(8 * 30 * 30, 10))
PY
export PYTHONPATH="$TMP:$srcdir/tests/torch${PYTHONPATH:+:$PYTHONPATH}"

for m in seqcnn:make resnet18; do
    if ! "$PY" "$EXPORT" "$m" "$TMP/m.json" "$TMP/init.st" 2> "$TMP/err"; then
        bad "$m: export: $(cat "$TMP/err")"
        continue
    fi
    for rule in cdp-v1 cdp-v2; do
        for np in 1 2; do
            rm -f "$TMP/w$np.st"
            run "$np" --model "$TMP/m.json" --init-weights "$TMP/init.st" --rule "$rule" $ARGS \
                --save-weights "$TMP/w$np.st" > "$TMP/out" 2>&1 || bad "$m $rule $np ranks: $(cat "$TMP/out")"
        done
        if [ -s "$TMP/w1.st" ] && cmp -s "$TMP/w1.st" "$TMP/w2.st"; then
            ok "$m, $rule: 1 and 2 ranks give bitwise the same weights ($(sha256sum < "$TMP/w1.st" | cut -c1-16))"
        else
            bad "$m, $rule: the weights of 1 and 2 ranks differ"
        fi
    done
    # the last run's weights (cdp-v2) into the module
    out=$("$PY" - "$m" "$TMP/init.st" "$TMP/w2.st" "$srcdir/examples" <<'PY' 2>&1
import importlib, sys
sys.path.insert(0, sys.argv[4])
import torch, torchvision
from cdp_files import st_read
spec, init, final = sys.argv[1:4]
if ":" in spec:
    mod, fn = spec.split(":")
    m = getattr(importlib.import_module(mod), fn)()
else:
    m = getattr(torchvision.models, spec)(num_classes=10)
a, b = st_read(init), st_read(final)
m.load_state_dict(b, strict=True)
changed = sum(1 for k in a if a[k].dtype.is_floating_point and not torch.equal(a[k], b[k]))
m.eval()
y = m(torch.zeros(2, 3, 32, 32))
print(f"loaded {len(b)} tensors strictly, {changed} changed by training, logits {tuple(y.shape)}")
sys.exit(0 if changed > 0 and tuple(y.shape) == (2, 10) else 1)
PY
)
    [ $? -eq 0 ] && ok "$m: $out" || bad "$m: into torch: $out"
done

# the real torchvision models: the descriptions only (vgg11_bn's weights
# are 0.5 GB), one python for the four; torch's count leaves out
# num_batches_tracked, which cdp keeps as the step count
counts=$("$PY" - "$EXPORT" "$TMP" <<'PY'
import os, sys
exp, tmp = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.dirname(exp))
import export_model
for n in ("vgg11_bn", "wide_resnet50_2", "mobilenet_v2", "vit_b_16"):
    m = export_model.load(n, 10, [3, 32, 32])
    count = sum(v.numel() for k, v in m.state_dict().items()
                if not k.endswith("num_batches_tracked"))
    export_model.write_description(f"{tmp}/{n}.json", export_model.describe(m, [3, 32, 32], 10))
    print(n, count)
PY
) || bad "export of the real torchvision models: $counts"
while read -r m want; do
    got=$("$CDP" --plan --model "$TMP/$m.json" --data synthetic:3x32x32 2>&1 |
          sed -n 's/^model .*: \([0-9]*\) parameters and buffers in \([0-9]*\) blocks.*/\1 (\2 blocks)/p')
    [ "${got%% *}" = "$want" ] && ok "$m (torchvision's, 3x32x32): cdp builds it, $got parameters" ||
        bad "$m: cdp's parameters '$got', torch's $want"
done <<< "$counts"

out=$("$PY" "$EXPORT" seqcnn:bad "$TMP/bad.json" 2>&1)
rc=$?
[ $rc -eq 1 ] && [ "$out" = "export_model.py: error: 1: Sigmoid is not a layer cdp has" ] &&
    ok "an unsupported module: status 1, one line naming it" || bad "an unsupported module: status $rc: $out"
out=$("$PY" "$EXPORT" export_nets:bad_op "$TMP/bad.json" 2>&1)
rc=$?
[ $rc -eq 1 ] && [ "$out" = "export_model.py: error: gate: sigmoid: call_function sigmoid is not a layer cdp has" ] &&
    ok "an unsupported op: status 1, one line naming its module and the op" || bad "an unsupported op: status $rc: $out"
[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
exit 0
