#!/bin/bash
# --flush-denormals: the default MLP fits synthetic data within a few
# hundred steps, and then IEEE arithmetic leaves denormal floats in its
# momentum buffers (the slow path of some CPUs: bench/kernels/denormal.sh); with
# the flag the run leaves none, cdp-v2 stays deterministic and gives the
# bits of 1 rank on 3, cdp-v1 matches the serial reference (--verify, which
# runs in the same mode), and a checkpoint resumes bit for bit only under
# the same flag.  tests/unit/test_fpmode checks the mode itself, thread by
# thread.
. "$(dirname "$0")/../lib/lib.sh"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
DENORMALS="$(dirname "$0")/../lib/st_denormals.py"

M=mlp:784-256-128-10
R="--model $M --data synthetic --workers 4 --batch 32 --eval-every 0 --quiet"
K=1024

# denormals FILE: how many the checkpoint's momentum holds
denormals() { python3 "$DENORMALS" "$1" momentum; }

run 1 $R --steps $K --checkpoint "$TMP/ieee.ck" >/dev/null || fail "IEEE run failed"
run 1 $R --steps $K --flush-denormals --checkpoint "$TMP/ftz.ck" --save-weights "$TMP/ftz1.st" \
    >/dev/null || fail "--flush-denormals on 1 rank failed"
d=$(denormals "$TMP/ieee.ck")
[ "${d:-0}" -gt 0 ] 2>/dev/null && pass "IEEE: $d denormal momentum values after $K steps" \
    || fail "IEEE: '$d' denormal momentum values after $K steps (want some: else this test shows nothing)"
d=$(denormals "$TMP/ftz.ck")
[ "$d" = 0 ] && pass "--flush-denormals: no denormal momentum value after $K steps" \
    || fail "--flush-denormals: '$d' denormal momentum values after $K steps"
run 1 $R --steps $K --flush-denormals --save-weights "$TMP/ftz1b.st" >/dev/null \
    || fail "--flush-denormals rerun failed"
same $M "$TMP/ftz1.st" "$TMP/ftz1b.st" 0 "--flush-denormals: the same bits twice"
run 3 $R --steps $K --flush-denormals --save-weights "$TMP/ftz3.st" --checkpoint "$TMP/ftz3.ck" \
    >/dev/null || fail "--flush-denormals on 3 ranks failed"
same $M "$TMP/ftz1.st" "$TMP/ftz3.st" 0 "cdp-v2 --flush-denormals: 3 ranks = 1 rank"
# every rank's stages come to rank 0's checkpoint: every rank flushed
d=$(denormals "$TMP/ftz3.ck")
[ "$d" = 0 ] && pass "--flush-denormals on 3 ranks: no denormal momentum value" \
    || fail "--flush-denormals on 3 ranks: '$d' denormal momentum values"

out=$(run 2 $R --steps $K --rule cdp-v1 --flush-denormals --verify 2>&1 | grep '^verify:')
case "$out" in
    *"max relative difference 0, 0 of"*) pass "cdp-v1 --flush-denormals --verify: $out" ;;
    *) fail "cdp-v1 --flush-denormals --verify: '$out'" ;;
esac

# a checkpoint of step 512 resumes under the same flag only
run 1 $R --steps 512 --flush-denormals --checkpoint "$TMP/ck.st" >/dev/null \
    || fail "checkpointed run failed"
err=$(run 2 $R --steps $K --resume "$TMP/ck.st" 2>&1 >/dev/null)
rc=$?
n=$(printf '%s\n' "$err" | grep -c '^cdp_run: error:.*--flush-denormals')
[ $rc -ne 0 ] && [ "$n" -eq 1 ] && pass "resume without the flag refused: $(printf '%s\n' "$err" | grep -m1 error)" \
    || fail "resume without --flush-denormals: status $rc, '$err'"
run 2 $R --steps $K --resume "$TMP/ck.st" --flush-denormals --save-weights "$TMP/res.st" >/dev/null \
    || fail "resume with --flush-denormals failed"
same $M "$TMP/ftz1.st" "$TMP/res.st" 0 "resumed at step 512 on 2 ranks = uninterrupted"
finish
