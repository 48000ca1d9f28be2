#!/bin/bash
# issue 11's three rules at E=40, one at a time; each resumes from its checkpoint
/work/runs/vit/go2.sh cdp-v1 40 0.9,0.999 5e-4
/work/runs/vit/go2.sh dp 40 0.9,0.999 5e-4
/work/runs/vit/go2.sh cdp-v2 40 0.9,0.999 5e-4
