#!/bin/bash
# usage: go2.sh RULE EPOCHS BETAS [LR]   (issue 11's ViT accuracy runs)
cd /work/main
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_CORETYPE=SkylakeX
r=$1; e=$2; b=$3; lr=${4:-5e-4}; o=/work/runs/vit/$r-E$e-b$b-lr$lr
mkdir -p $o
args="--model vit-tiny --optimizer adamw --lr $lr --betas $b --lr-schedule cosine --warmup-steps 2000 --augment crop=4,flip --epochs $e --rule $r"
{ date -u; echo "cdp_run built 2026-11-26 14:04 from be34618 (CPU numerics of 24c1677); tree now $(git rev-parse --short HEAD)"; echo "OPENBLAS_CORETYPE=SkylakeX mpirun --oversubscribe -np 4 ./cdp_run $args"; } >> $o/log.txt
resume=; ls $o/ckpt* >/dev/null 2>&1 && resume="--resume latest"
/usr/bin/time -f "wall %e s" mpirun --oversubscribe -x OPENBLAS_CORETYPE -np 4 ./cdp_run $args --checkpoint $o/ckpt --checkpoint-every 1 --keep-checkpoints 2 $resume >> $o/log.txt 2>&1
echo "rc $?" >> $o/log.txt; date -u >> $o/log.txt
