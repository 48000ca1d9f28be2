#!/bin/bash
# issue 11, plan B (2026-11-27): at E=40 dp (91.4% at epoch 35) ends more
# than 1 point above cdp-v1 (90.16%); cdp-v1 needs about 1.6x dp's epochs
# for the same accuracy, so the three rules run at E=60, the uncertain
# one (cdp-v1) first.  Waits for dp E=40 to finish; each run resumes from
# its newest checkpoint or is skipped when done (go3.sh).
while pgrep -f -- "--rule dp --checkpoint /work/runs/vit/dp-E40-" >/dev/null; do sleep 30; done
for r in cdp-v1 dp cdp-v2; do /work/runs/vit/go3.sh $r 60 0.9,0.999 5e-4; done
