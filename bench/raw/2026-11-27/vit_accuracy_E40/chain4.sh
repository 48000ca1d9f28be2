#!/bin/bash
# next session: the three rules at E=40 (each resumes from its checkpoint, done ones skipped)
for r in cdp-v1 dp cdp-v2; do /work/runs/vit/go3.sh $r 40 0.9,0.999 5e-4; done
