# The ViT under every rule and framework, as tests/mpi/mpi_resnet.sh checks the
# ResNets: cdp-v1 and cdp-v2 bitwise identical on 1, 2, 3 and 4 ranks (same
# N; byte-identical saved weights) and to the serial reference; dp
# --deterministic likewise; dp with its all-reduce within 1e-5; model-parallel
# and zero bitwise equal to replicated; the rules really differ.  With SGD,
# and with AdamW when cdp_run has --optimizer.
. "$(dirname "$0")/../lib/lib.sh"
M=vit:patch=7,dim=16,depth=2,heads=2,mlp=32
common="--data synthetic --model $M --stages 4 --workers 4 --batch 2 --steps 3 --quiet --eval-every 0 --threads 1"
frameworks_bitwise $M "$common --lr 0.05 --momentum 0.9 --weight-decay 5e-4"
if "$CDP" --help 2>&1 | grep -q -- '--optimizer'; then
    frameworks_bitwise $M "$common --optimizer adamw --lr 1e-3 --weight-decay 0.01"
else
    echo "note: cdp_run has no --optimizer yet: the AdamW runs are skipped"
fi
finish
