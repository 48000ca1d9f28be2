#!/bin/bash
# --trace: the Chrome trace holds every instruction each rank ran, at the tick
# the timeline gives it (tests/lib/trace_check.py checks against the hand
# formulas of doc/reference.md sections 2 and 6.4), one at a time per rank,
# in microseconds; dp reduces with collectives and cdp-v1/v2 point to point;
# and the option changes no bit of the training.
. "$(dirname "$0")/../lib/lib.sh"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
CHECK="$(cd "$(dirname "$0")/../lib" && pwd)/trace_check.py"
K=3

# case NP N RULE FRAMEWORK: K steps of the default MLP (L = 3 stages)
case_() {
    local np=$1 n=$2 rule=$3 fw=$4 t0 t1 what="$3 $4, $1 rank(s), N=$2"
    t0=$(date +%s.%N)
    if ! run "$np" --steps $K --eval-every 0 --workers "$n" --rule "$rule" --framework "$fw" \
        --trace "$TMP/t.json" --save-weights "$TMP/$rule-$fw-$np.st" >"$TMP/t.txt" 2>&1; then
        fail "$what: did not run ($(head -1 "$TMP/t.txt"))"
        return
    fi
    t1=$(date +%s.%N)
    local step_s
    step_s=$(awk '/^ *step time/ {print $3}' "$TMP/t.txt")
    if python3 "$CHECK" "$TMP/t.json" "$np" "$n" 3 $K "$rule" "$fw" \
        "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" "$step_s" >"$TMP/c.txt"; then
        pass "$what: $(grep -c '^ok' "$TMP/c.txt") trace checks"
    else
        grep '^FAIL' "$TMP/c.txt" | while read -r l; do echo "$what: $l"; done
        fail "$what: trace checks"
    fi
}

case_ 1 4 dp replicated
case_ 2 4 cdp-v2 replicated
case_ 3 4 cdp-v1 replicated
case_ 3 4 cdp-v1 zero
case_ 2 4 dp zero
case_ 4 2 cdp-v2 model-parallel

# without --trace: the weights of the traced run
run 2 --steps $K --eval-every 0 --workers 4 --rule cdp-v2 --save-weights "$TMP/plain.st" \
    >/dev/null 2>&1 || fail "cdp-v2 without --trace did not run"
same mlp:784-256-128-10 "$TMP/plain.st" "$TMP/cdp-v2-replicated-2.st" 0 "--trace changes no bit"
finish
