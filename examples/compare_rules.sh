#!/usr/bin/env bash
# Trains the same network under dp, cdp-v1 and cdp-v2 on NP ranks and prints
# the test accuracy, peak activation memory and traffic of each, from the
# --metrics summaries.   examples/compare_rules.sh [NP] [extra cdp_run options]
set -euo pipefail
np=${1:-4}
shift || true
cdp=$(cd "$(dirname "$0")/.." && pwd)/cdp_run
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%-7s %9s %14s %14s %12s\n' rule test_acc peak_act_bytes peak_tick_bytes step_time_s
for rule in dp cdp-v1 cdp-v2; do
    mpirun --allow-run-as-root --oversubscribe -np "$np" "$cdp" --rule "$rule" --quiet \
        --metrics "$tmp/$rule.json" "$@" >/dev/null
    tail -n 1 "$tmp/$rule.json" | python3 -c '
import json, sys
s = json.load(sys.stdin)
print("%-7s %9.4f %14d %14d %12.6f" % (s["rule"], s["test_accuracy"], s["peak_activation_bytes"],
      s["bytes_sent_peak_tick"], s["step_time_s"]))'
done
