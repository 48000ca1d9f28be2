#!/bin/sh
# More stages than an mlp has layers: the executor's per-stage arrays were
# sized by the mlp's layer limit (64), so 65 stages overflowed them
# (SIGSEGV) and 200 corrupted them ("stage 0 needs version 0, slot holds
# -2"), while a model may have 256 stages.  Every stage count a model can
# have runs, bitwise equal to the serial reference and on 1 and 2 ranks;
# one more is refused with the true limit.
. "$(dirname "$0")/../lib/lib.sh"

vit() {   # vit DEPTH: a tiny ViT of DEPTH + 2 blocks
    echo "vit:patch=7,dim=8,depth=$1,heads=2,mlp=16"
}
common="--steps 2 --batch 2 --data synthetic:1x28x28 --eval-every 0 --quiet"

for L in 65 200 256; do
    M=$(vit $((L - 2)))
    out=$(run 1 --model "$M" --stages $L $common --verify --save-weights "$TMP/w$L-1.st" 2>&1)
    if [ $? -eq 0 ] && echo "$out" | grep -q " 0 of .* differ bitwise"; then
        pass "$L stages: equal to the serial reference bitwise"
    else
        fail "$L stages --verify: $(echo "$out" | tail -n 3)"
    fi
    [ $L -eq 256 ] && continue   # the largest on one rank is enough
    if run 2 --model "$M" --stages $L $common --save-weights "$TMP/w$L-2.st" >/dev/null 2>&1 &&
        cmp -s "$TMP/w$L-1.st" "$TMP/w$L-2.st"; then
        pass "$L stages: 2 ranks byte-identical to 1 rank"
    else
        fail "$L stages: 2 ranks did not run, or differ from 1 rank"
    fi
done

# the limits, each the one that binds
one_error 1 "300 stages, at most 256 .* 302 blocks" --model "$(vit 300)" --stages 300 $common
one_error 1 "300 stages for a model of 5 blocks (at most one stage per block)" \
    --model "$(vit 3)" --stages 300 $common

finish
