#!/bin/bash
# after the running cdp-v1 job: cdp-v1, 40 epochs, lr 5e-4 (the binding rule, longer)
while pgrep -f "go2.sh cdp-v1" >/dev/null; do sleep 20; done
/work/runs/vit/go2.sh cdp-v1 40 0.9,0.999 5e-4
