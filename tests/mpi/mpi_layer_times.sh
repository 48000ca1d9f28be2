#!/bin/bash
# --layer-times: every layer's forward and backward is counted once per
# micro-batch (summed over the ranks), the loss once per micro-batch, the
# optimizer once per stage and step; the table's timed share stays within
# the ranks' wall time; and the option changes no bit of the training.
. "$(dirname "$0")/../lib/lib.sh"

# calls FILE FIELD [relu]: the distinct values of FIELD over FILE's layer
# rows, of the ReLUs with "relu", else of the other layers
calls() {
    local sel=-v
    [ "${3:-}" = relu ] && sel=
    grep '"log": "layer_times"' "$1" | grep '"index"' | grep $sel '"kind": "relu"' |
        sed -n "s/.*\"$2\": \([0-9]*\).*/\1/p" | sort -u | tr '\n' ' '
}
extra() {  # FILE loss|optimizer: its calls
    grep "\"kind\": \"$2\", \"s\"" "$1" | sed -n 's/.*"calls": \([0-9]*\).*/\1/p'
}
kinds() {
    grep '"log": "layer_times"' "$1" | grep '"index"' |
        sed -n 's/.*"kind": "\([a-z_0-9]*\)".*/\1/p' | sort -u | tr '\n' ' '
}

# check FILE N STEPS UPDATES WHAT: the counts of one run of N micro-batches
# a step; UPDATES: stage updates in all (every rank that holds a stage's
# replica updates it)
check() {
    local f=$1 mb=$(($2 * $3)) upd=$4 what=$5 c r
    c=$(calls "$f" fwd_calls)
    r=$(calls "$f" fwd_calls relu)
    [ "$c" = "$mb " ] && { [ "$r" = "$mb " ] || [ -z "$r" ]; } &&
        pass "$what: every layer's forward $mb times" \
        || fail "$what: forward calls per layer '$c' (ReLUs '$r'), want $mb"
    c=$(calls "$f" bwd_calls)
    [ "$c" = "$mb " ] && pass "$what: every layer's backward $mb times" \
        || fail "$what: backward calls per layer '$c', want $mb"
    # a stage's last ReLU leaves its backward to the next stage's first layer
    r=$(calls "$f" bwd_calls relu)
    case "$r" in "" | "$mb " | "0 $mb ") pass "$what: ReLUs' backward calls: ${r:-no ReLU}" ;;
        *) fail "$what: ReLUs' backward calls '$r', want $mb (0 for a stage's last)" ;; esac
    c=$(extra "$f" loss)
    [ "$c" = "$mb" ] && pass "$what: the loss $mb times" || fail "$what: loss calls '$c', want $mb"
    c=$(extra "$f" optimizer)
    [ "$c" = "$upd" ] && pass "$what: the optimizer $upd times" \
        || fail "$what: optimizer calls '$c', want $upd"
}

# ResNet: 1 rank dp, 2 ranks cdp-v2 (N = 2 workers, L = 3 stages, 3 steps)
R="--model resnet20 --stages 3 --data synthetic:1x28x28:n=64:test=16 --workers 2 --batch 4
   --steps 3 --eval-every 0"
run 1 $R --rule dp --save-weights "$TMP/dp0.st" --quiet >/dev/null || fail "resnet20 dp did not run"
run 1 $R --rule dp --save-weights "$TMP/dp1.st" --layer-times --metrics "$TMP/dp.json" \
    >"$TMP/dp.txt" || fail "resnet20 dp --layer-times did not run"
check "$TMP/dp.json" 2 3 9 "resnet20 dp, 1 rank"
k=$(kinds "$TMP/dp.json")
[ "$k" = "add avgpool batchnorm2d conv2d linear relu " ] && pass "resnet20's kinds: $k" \
    || fail "resnet20's kinds: '$k'"
n=$(grep -c '"index"' "$TMP/dp.json")
[ "$n" = 72 ] && pass "resnet20: 72 rows (73 layers, the flatten does nothing)" \
    || fail "resnet20: $n layer rows, want 72"
same resnet20 "$TMP/dp0.st" "$TMP/dp1.st" 0 "resnet20 dp: --layer-times changes no bit"
grep -q "^  by kind: conv2d" "$TMP/dp.txt" && pass "the table names its kinds" \
    || fail "no 'by kind' line led by conv2d: $(grep 'by kind' "$TMP/dp.txt")"
share=$(sed -n 's/^  timed: .*: \([0-9.]*\)%;.*/\1/p' "$TMP/dp.txt")
awk -v s="${share:-x}" 'BEGIN { exit !(s + 0 > 50 && s + 0 <= 101) }' \
    && pass "1 rank: the rows cover $share% of the step (over half, at most all)" \
    || fail "1 rank: timed share '$share'% (want (50, 101])"

run 1 $R --rule cdp-v2 --save-weights "$TMP/v2a.st" --quiet >/dev/null || fail "cdp-v2 did not run"
run 2 $R --rule cdp-v2 --save-weights "$TMP/v2b.st" --layer-times --metrics "$TMP/v2.json" \
    >"$TMP/v2.txt" || fail "cdp-v2 on 2 ranks --layer-times did not run"
check "$TMP/v2.json" 2 3 18 "resnet20 cdp-v2, 2 ranks (added over the ranks; each updates its replica)"
same resnet20 "$TMP/v2a.st" "$TMP/v2b.st" 0 "cdp-v2: 2 ranks with --layer-times = 1 rank without"
share=$(sed -n 's/^  timed: .*: \([0-9.]*\)%;.*/\1/p' "$TMP/v2.txt")
awk -v s="${share:-x}" 'BEGIN { exit !(s + 0 > 0 && s + 0 <= 101) }' \
    && pass "2 ranks: the rows cover $share% of the ranks' time" \
    || fail "2 ranks: timed share '$share'% (want (0, 101])"

# ViT: its kinds; MLP: a ReLU fused into its Linear has no row of its own
run 1 --model vit:patch=7,dim=32,depth=1,heads=2,mlp=64 --data synthetic:1x28x28:n=32:test=8 \
    --workers 2 --batch 4 --steps 2 --eval-every 0 --layer-times --metrics "$TMP/vit.json" \
    --quiet >/dev/null || fail "vit --layer-times did not run"
L=$(grep -o '"stages": [0-9]*' "$TMP/vit.json" | head -1 | grep -o '[0-9]*$')
check "$TMP/vit.json" 2 2 $((2 * ${L:-0})) "vit, 1 rank"
k=$(kinds "$TMP/vit.json")
[ "$k" = "add attention class_token conv2d gelu layernorm linear pos_embedding token_select " ] \
    && pass "the ViT's kinds: $k" || fail "the ViT's kinds: '$k'"
run 1 --model mlp:784-32-10 --data synthetic --workers 2 --batch 4 --steps 2 --eval-every 0 \
    --layer-times --metrics "$TMP/mlp.json" --quiet >/dev/null || fail "mlp --layer-times did not run"
k=$(kinds "$TMP/mlp.json")
[ "$k" = "linear " ] && pass "mlp: only its Linears have rows (the ReLU runs inside fc0)" \
    || fail "mlp kinds: '$k'"
run 1 --model mlp:784-32-10 --data synthetic --steps 1 --layer-times=1 >/dev/null 2>"$TMP/e.txt" \
    && fail "--layer-times=1 accepted" || pass "--layer-times=1: $(head -1 "$TMP/e.txt")"
finish
