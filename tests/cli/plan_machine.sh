# --plan --machine as a user meets it: --layer-times-out writes a machine
# file that --plan --machine reads back (its measured rows used, not the
# FLOP rate), the prediction's lines for the rule and dp, --device-memory's
# verdict both ways, and bad machine files and misplaced options refused
# with one line and status 1.
. "$(dirname "$0")/../lib/lib.sh"
tmp=$TMP
m=$tmp/machine.json
out=$(run 1 --data synthetic --steps 4 --workers 2 --quiet --layer-times-out "$m" 2>&1) \
    || fail "--layer-times-out run: $out"
grep -q '"format": "cdp-machine-1"' "$m" && grep -q '"layers"' "$m" \
    && pass "--layer-times-out wrote a machine file with layer rows" || fail "machine file: $(cat "$m")"
out=$("$CDP" --plan --workers 2 --data synthetic --machine "$m" 2>&1) || fail "--plan --machine: $out"
echo "$out" | grep -q "compute from the measured layer times" \
    && [ "$(echo "$out" | grep -c '^predict: rule=')" -eq 2 ] \
    && echo "$out" | grep -q '^predict: rule=cdp-v2 framework=replicated ranks=1 step_s=[0-9]' \
    && echo "$out" | grep -q '^predict: rule=dp ' \
    && pass "--plan --machine: measured rows, cdp-v2 and dp lines" || fail "--plan --machine printed: $out"
# README's cluster-scale example (examples/cluster.json, 512 ranks): both
# rules predicted, dp's all-reduce cdp's ring
cluster=$(dirname "$0")/../../examples/cluster.json
out=$("$CDP" --plan --plan-ranks 512 --workers 512 --model resnet50 --data synthetic:3x224x224 \
          --batch 16 --machine "$cluster" --device-memory 80G 2>&1) || fail "README's cluster example: $out"
echo "$out" | grep -q '^predict: rule=cdp-v2 framework=replicated ranks=512 step_s=[0-9].* fits=yes' \
    && echo "$out" | grep -q "ring (reduce-scatter + all-gather)" \
    && pass "README's cluster example: $(echo "$out" | grep '^predicted cdp-v2/dp')" \
    || fail "README's cluster example printed: $out"
# the start cost: 0 from a run of one segment; from a run of three
# segments (--log-every) a measured figure (a time: only its presence and
# sign are checked); --plan --machine adds it once to the K steps' segment
# (step_s up by start_s / K, whatever the schedule)
grep -q '"start_s": 0,' "$m" && pass "one segment: start_s 0" || fail "one segment: $(grep start_s "$m")"
out=$(run 1 --data synthetic --steps 6 --log-every 2 --metrics "$tmp/metrics.jsonl" --workers 2 --quiet \
          --layer-times-out "$tmp/m3.json" 2>&1) || fail "three segments: $out"
grep -Eq '"start_s": [0-9][0-9.e+-]*,' "$tmp/m3.json" && pass "three segments: $(grep -o '"start_s": [^,]*' "$tmp/m3.json")" \
    || fail "three segments: $(grep start_s "$tmp/m3.json")"
sed 's/"start_s": [^,]*,/"start_s": 1,/' "$m" > "$tmp/start1.json"
s0=$("$CDP" --plan --workers 2 --plan-steps 4 --data synthetic --machine "$m" | sed -n 's/^predict: rule=dp .* step_s=\([^ ]*\) .*/\1/p')
s1=$("$CDP" --plan --workers 2 --plan-steps 4 --data synthetic --machine "$tmp/start1.json" | sed -n 's/^predict: rule=dp .* step_s=\([^ ]*\) .*/\1/p')
awk -v a="$s0" -v b="$s1" 'BEGIN { d = b - a - 0.25; exit !(a > 0 && d < 1e-5 && d > -1e-5) }' \
    && pass "start_s 1 on 4 steps: step_s $s0 -> $s1 (+0.25)" || fail "start_s 1: step_s $s0 -> $s1"
# the same file for another batch: the rows do not apply, the FLOP rate does
out=$("$CDP" --plan --workers 2 --batch 64 --data synthetic --machine "$m" 2>&1)
echo "$out" | grep -q "compute from flops_per_s" && pass "another batch: flops_per_s used" \
    || fail "another batch: $out"
out=$("$CDP" --plan --plan-ranks 4 --workers 4 --data synthetic --machine "$m" --device-memory 1K 2>&1)
echo "$out" | grep -q "fits=no" && pass "--device-memory 1K: fits=no" || fail "1K: $out"
out=$("$CDP" --plan --plan-ranks 4 --workers 4 --data synthetic --machine "$m" --device-memory 80G 2>&1)
echo "$out" | grep -q "fits=yes" && echo "$out" | grep -q "ranks=4 " \
    && pass "--device-memory 80G on --plan-ranks 4: fits=yes" || fail "80G: $out"
# refusals: one line, status 1
refused() {   # WHAT EXPECTED-PREFIX ARGS...
    local what=$1 want=$2
    shift 2
    out=$("$CDP" "$@" 2>&1)
    local rc=$?
    [ $rc -eq 1 ] && [ "$(echo "$out" | grep -c '^cdp_run: error:')" -eq 1 ] \
        && echo "$out" | grep -q "^cdp_run: error: $want" \
        && pass "$what refused: $(echo "$out" | grep '^cdp_run: error:')" || fail "$what: rc $rc: $out"
}
echo '{"format": "cdp-machine-1", "compute": {"flops_per_s": 1e10}}' > "$tmp/bad1.json"
refused "a machine file without update_s_per_param" "machine file $tmp/bad1.json: compute: missing" \
    --plan --data synthetic --machine "$tmp/bad1.json"
printf '{"format": "cdp-machine-1",' > "$tmp/bad2.json"
refused "a truncated machine file" "machine file $tmp/bad2.json: not JSON" \
    --plan --data synthetic --machine "$tmp/bad2.json"
refused "a missing machine file" "machine file $tmp/none.json: cannot open" \
    --plan --data synthetic --machine "$tmp/none.json"
refused "--machine without --plan" "--machine needs --plan" --data synthetic --machine "$m"
refused "--device-memory without --machine" "--device-memory needs --machine" --plan --device-memory 8G
refused "--device-memory 8X" "--device-memory: expected a size" --plan --machine "$m" --device-memory 8X
finish
