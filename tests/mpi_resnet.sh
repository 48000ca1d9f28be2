# ResNets with BatchNorm under every rule and framework: cdp-v1 and cdp-v2
# bitwise identical on 1, 2, 3 and 4 ranks (byte-identical saved weights)
# and to the serial reference (running statistics included); dp
# --deterministic likewise; dp with MPI_Allreduce within 1e-5;
# model-parallel and zero bitwise equal to replicated; the rules really differ.
. "$(dirname "$0")/lib.sh"
frameworks_bitwise resnet20 "--data synthetic --model resnet20 --stages 4 --workers 4 --batch 2 --steps 3 --quiet --eval-every 0 --lr 0.05 --momentum 0.9 --weight-decay 5e-4 --threads 1"
finish
