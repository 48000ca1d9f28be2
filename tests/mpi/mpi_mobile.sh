# mobile-tiny, the layers of torchvision's mobile networks (ReLU6,
# depthwise and grouped convolutions, dropout), under every rule and
# framework (lib.sh's frameworks_bitwise): cdp-v1, cdp-v2 and dp
# --deterministic bitwise identical on 1, 2, 3 and 4 ranks and to the
# serial reference (--verify), zero and model-parallel equal to replicated;
# and cdp-v1 on 1 rank with 2 threads bitwise equal to 1 thread.  Dropout's
# masks depend on the seed, the step, the sample's place in the step and
# the layer only, so a worker on another rank draws the same.  dp with
# MPI_Allreduce: BatchNorm over micro-batches of 4 amplifies the sum
# order's last bits as in tests/mpi/mpi_resnet.sh, hence its bound.
. "$(dirname "$0")/../lib/lib.sh"
AR_TOL=norm:5e-4
M=mobile-tiny
common="--data synthetic:3x16x16:n=256:test=64 --model $M --stages 4 --workers 4 --batch 4 --steps 6 --quiet --eval-every 0 --lr 0.05 --momentum 0.9 --threads 1"
frameworks_bitwise $M "$common"
run 1 $common --rule cdp-v1 --save-weights "$TMP/t1.st" >/dev/null || fail "cdp-v1 did not run"
run 1 $common --rule cdp-v1 --threads 2 --save-weights "$TMP/t2.st" >/dev/null \
    || fail "cdp-v1 with 2 threads did not run"
same $M "$TMP/t2.st" "$TMP/t1.st" 0 "cdp-v1: 2 threads bitwise equal to 1 thread"
finish
