#!/bin/bash
# proxy: small ViT, 1 rank, 1 thread, 10 epochs; dp vs cdp-v1 gap under settings
export OPENBLAS_CORETYPE=SkylakeX
B=/work/main/cdp_run
M=vit:patch=7,dim=64,depth=4,heads=4,mlp=128
run() { tag=$1; shift; $B --model $M --optimizer adamw --lr-schedule cosine --augment crop=4,flip --epochs ${E:-10} --threads 1 "$@" > $tag.txt 2>&1; echo "$tag $(grep -o 'test accuracy [0-9.]*%' $tag.txt | tail -1)"; }
for s in "lr1e-3_W500:--lr 1e-3 --warmup-steps 500" "lr5e-4_W800:--lr 5e-4 --warmup-steps 800" "lr2.5e-4_W800:--lr 2.5e-4 --warmup-steps 800" "lr5e-4_W800_b1_.8:--lr 5e-4 --warmup-steps 800 --betas 0.8,0.999"; do
  tag=${s%%:*}; args=${s#*:}
  run ${tag}_dp --rule dp $args & run ${tag}_v1 --rule cdp-v1 $args & wait
done
