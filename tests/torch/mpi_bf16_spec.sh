#!/bin/bash
# --precision bf16 against an independent PyTorch implementation of
# doc/reference.md 3.12's table (tests/torch/torch_reference.py --precision
# bf16: the input, R(W) and every layer's output rounded to bfloat16 with
# torch's own conversion, the backward's products reading R(dy), float32
# sums and master weights), written from the table, not from cdp's code.
#
# mlp:784-128-64-10, 3 stages, B = 16, K = 3 SGD steps: dp, cdp-v1, cdp-v2
# with N = 2 on one rank and dp, cdp-v2 with N = 4 on two ranks.  Bound:
# max|cdp - ref| / max|ref| <= 1e-5.  Why: the two sum each product's
# float32 terms in different orders (oneDNN's against torch's), which moves
# a float32 result by an ulp or so and, where it sits at a bfloat16
# rounding's midpoint, one rounded value by one bfloat16 ulp.  Calibration
# (2026-11-29, these settings): after one step 6e-8 (float32's ulp), after 3
# steps at most 6.4e-7; over more steps the rare flipped roundings grow (20
# steps of dp: 3.6e-3), hence 3 steps.  Negative controls, which must FAIL
# the bound, or the comparison would prove nothing: the float32 reference
# (1.0e-3 and up), the first layer's output left in float32 (8.1e-4 and
# up), and the mean gradient rounded to bfloat16 (1.3e-4 and up).
#
# Skips (77) without /usr/bin/python3 + torch + numpy or the data files.
set -u
. "$(dirname "$0")/torch_lib.sh"
torch_parity_setup torch_reference.py "torch numpy" cdp_bf16_spec train
TOL=1e-5
TO=
command -v timeout >/dev/null 2>&1 && TO="timeout 120"
MODEL=mlp:784-128-64-10
OPTS="--batch 16 --steps 3 --lr 0.05 --momentum 0.9 --weight-decay 5e-4"
$TO "$PY" "$REF" --write-init "$tmp/init.st" --model $MODEL --seed 7 \
    || fail "could not write the initial weights"
cases=()
ncases=0
for cfg in dp:2:1 cdp-v1:2:1 cdp-v2:2:1 dp:4:2 cdp-v2:4:2; do
    IFS=: read -r rule n np <<<"$cfg"
    [ "$np" = 2 ] && [ "$have_mpi" = 0 ] && continue
    out=$tmp/$rule-$n.st
    # shellcheck disable=SC2086
    $TO "$MPIRUN" --allow-run-as-root --oversubscribe -np "$np" "$CDP" --model $MODEL \
        --no-shuffle --rule "$rule" --workers "$n" --stages 3 $OPTS --precision bf16 \
        --init-weights "$tmp/init.st" --save-weights "$out" --eval-every 0 --quiet \
        >"$tmp/log" 2>&1 || { cat "$tmp/log"; fail "cdp_run --rule $rule --workers $n on $np rank(s)"; }
    cases+=(--case "$rule:$n:$out")
    ncases=$((ncases + 1))
done
bad=0
# ref EXPECT [options]: every RESULT line of the reference says EXPECT
ref() {
    local expect=$1 n
    shift
    # shellcheck disable=SC2086
    $TO "$PY" "$REF" --init-weights "$tmp/init.st" $OPTS --stages-split 1,1,1 \
        --data-dir "$DATA" --tol $TOL --threads 1 "$@" "${cases[@]}" >"$tmp/ref.log" 2>&1
    local rc=$?
    grep '^RESULT ' "$tmp/ref.log"
    [ $rc = 0 ] || [ $rc = 1 ] || { cat "$tmp/ref.log"; fail "torch_reference.py exited with $rc"; }
    n=$(grep -c "^RESULT .* $expect\$" "$tmp/ref.log")
    [ "$n" = $ncases ] || { echo "FAIL: reference $*: $n of $ncases $expect"; bad=1; }
}
echo "== cdp --precision bf16 against the reference of 3.12 (each ok)"
ref ok --precision bf16
echo "== negative control: the float32 reference (each FAIL)"
ref FAIL --precision fp32
echo "== negative control: the first layer's output kept in float32 (each FAIL)"
ref FAIL --precision bf16 --bf16-error activation
echo "== negative control: the mean gradient rounded to bfloat16 (each FAIL)"
ref FAIL --precision bf16 --bf16-error grad-sum
[ $bad = 0 ] || exit 1
echo "PASS: cdp's bf16 MLP equals the PyTorch implementation of 3.12 within $TOL; the controls fail"
