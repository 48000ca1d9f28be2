#!/bin/bash
# usage: go3.sh RULE EPOCHS BETAS [LR]   (issue 11's ViT accuracy runs)
# as go2.sh, but a run whose log ends with "rc 0" is done and is skipped,
# and so is a run that is going on now (started beside the chain)
o=/work/runs/vit/$1-E$2-b$3-lr${4:-5e-4}
if [ -f $o/log.txt ] && grep -q "^rc 0$" $o/log.txt; then echo "done: $o"; exit 0; fi
if pgrep -f -- "--rule $1 --checkpoint $o/ckpt" >/dev/null; then echo "running already: $o"; exit 0; fi
exec /work/runs/vit/go2.sh "$@"
