#!/bin/bash
# usage: go.sh RULE EPOCHS
cd /work/main
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_CORETYPE=SkylakeX
r=$1; e=$2; o=/work/runs/vit/$r-E$e
mkdir -p $o
{ date -u; echo "commit $(git rev-parse HEAD)"; echo "OPENBLAS_CORETYPE=SkylakeX mpirun --oversubscribe -np 4 ./cdp_run --model vit-tiny --optimizer adamw --lr 5e-4 --lr-schedule cosine --warmup-steps 2000 --augment crop=4,flip --epochs $e --rule $r"; } > $o/log.txt
/usr/bin/time -f "wall %e s" mpirun --oversubscribe -x OPENBLAS_CORETYPE -np 4 ./cdp_run --model vit-tiny --optimizer adamw --lr 5e-4 --lr-schedule cosine --warmup-steps 2000 --augment crop=4,flip --epochs $e --rule $r --checkpoint $o/ckpt --checkpoint-every 1 --keep-checkpoints 2 >> $o/log.txt 2>&1
echo "rc $?" >> $o/log.txt; date -u >> $o/log.txt
