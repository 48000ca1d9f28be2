# cdp_netmeasure: it measures the shared-memory link of 2 ranks and writes
# the machine file that --layer-times-out wrote with that link filled in
# (the placeholder replaced, the compute rows kept), which --plan --machine
# reads back; on 2 emulated hosts (tests/lib/hosts.sh, a 100 Mbit/s link)
# it fills in the host link, near the shaped rate, and the namespaces are
# gone afterwards (that part is skipped, saying why, where namespaces cannot
# be made); bad input is refused with one line and status 1.
. "$(dirname "$0")/../lib/lib.sh"
NM="$top_builddir/cdp_netmeasure"
m=$TMP/machine.json
out=$(run 1 --data synthetic --steps 2 --workers 2 --quiet --layer-times-out "$m" 2>&1) \
    || fail "--layer-times-out run: $out"
# measure NP OUT [ARGS...]: cdp_netmeasure on NP ranks of this machine
measure() {
    local np=$1 o=$2
    shift 2
    timeout 120 "$MPIRUN" --oversubscribe -np "$np" "$NM" --machine "$m" --machine-out "$o" "$@"
}
# link FILE KIND KEY: a number of the machine file's network part
link() {
    python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['network'][sys.argv[2]][sys.argv[3]])" "$@"
}
out=$(measure 2 "$TMP/shm.json" --reps 4 --max-bytes 1M 2>&1) || fail "cdp_netmeasure on 2 ranks: $out"
# the placeholder is 5e9 B/s; a measured figure is not that round number
bw=$(link "$TMP/shm.json" intra_host bandwidth_Bps)
pm=$(link "$TMP/shm.json" intra_host per_message_s)
echo "$out" | grep -q "^wrote $TMP/shm.json: intra_host measured" \
    && [ "$bw" != 5000000000.0 ] && [ "$bw" != "$(link "$m" intra_host bandwidth_Bps)" ] \
    && [ "$(link "$TMP/shm.json" inter_host bandwidth_Bps)" = "$(link "$m" inter_host bandwidth_Bps)" ] \
    && python3 -c "import sys; b, p = map(float, sys.argv[1:]); sys.exit(not (1e7 < b < 1e13 and 0 <= p < 1))" "$bw" "$pm" \
    && pass "2 ranks: shared-memory link measured ($bw B/s, $pm s a message), the host link kept" \
    || fail "2 ranks: bandwidth $bw, per message $pm: $out"
cmp -s <(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['compute'])" "$m") \
       <(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['compute'])" "$TMP/shm.json") \
    && pass "the compute part is the --layer-times-out file's" || fail "compute part changed"
out=$("$CDP" --plan --workers 2 --data synthetic --machine "$TMP/shm.json" 2>&1)
echo "$out" | grep -q "compute from the measured layer times" \
    && echo "$out" | grep -q "^predict: rule=dp .*step_s=[0-9]" \
    && pass "--plan --machine reads the measured file back" || fail "--plan on the measured file: $out"

# 2 emulated hosts, a 100 Mbit/s link: 12.5 MB/s one way
hs="${top_srcdir:-$(dirname "$0")/../..}/tests/lib/hosts.sh"
bash "$hs" --hosts 2 --slots 1 --rate 100mbit -- timeout 120 "$MPIRUN" -np 2 "$NM" --machine "$m" \
    --machine-out "$TMP/hosts.json" --reps 4 --max-bytes 1M >"$TMP/hosts.out" 2>&1 &
hpid=$!
wait "$hpid"
rc=$?
if [ $rc -eq 77 ]; then
    echo "skip: emulated hosts: $(tail -n 1 "$TMP/hosts.out")"
else
    bw=$(link "$TMP/hosts.json" inter_host bandwidth_Bps 2>/dev/null)
    [ $rc -eq 0 ] && grep -q "inter_host measured" "$TMP/hosts.out" \
        && python3 -c "import sys; sys.exit(not (5e6 < float(sys.argv[1]) < 2e7))" "$bw" \
        && pass "2 hosts at 100 Mbit/s: host link measured at $bw B/s (12.5e6 nominal)" \
        || fail "2 hosts: status $rc, bandwidth '$bw': $(tail -n 5 "$TMP/hosts.out")"
    left=$(ip netns list | grep -c "^cdp$hpid-")
    [ "$left" -eq 0 ] && pass "no namespace of the harness left" || fail "$left namespaces cdp$hpid-* left"
fi

# bad input: one line "cdp_netmeasure: error: ...", status 1, within 60 s
refused() {   # WHAT NP WANT ARGS...
    local what=$1 np=$2 want=$3
    shift 3
    out=$(timeout 60 "$MPIRUN" --oversubscribe -np "$np" "$NM" "$@" 2>&1 >/dev/null)
    local rc=$?
    [ $rc -eq 1 ] && [ "$(echo "$out" | grep -c '^cdp_netmeasure: error:')" -eq 1 ] \
        && echo "$out" | grep '^cdp_netmeasure: error:' | grep -q -- "$want" \
        && pass "$what refused: $(echo "$out" | grep '^cdp_netmeasure: error:')" || fail "$what: rc $rc: $out"
}
printf '{"format": "cdp-machine-1",' >"$TMP/bad.json"
refused "no --machine" 2 "--machine FILE is needed" --machine-out "$TMP/o.json"
refused "no --machine-out" 2 "--machine-out FILE is needed" --machine "$m"
refused "a truncated machine file" 2 "machine file $TMP/bad.json: not JSON" \
    --machine "$TMP/bad.json" --machine-out "$TMP/o.json"
refused "a missing machine file" 2 "machine file $TMP/none.json: cannot open" \
    --machine "$TMP/none.json" --machine-out "$TMP/o.json"
refused "one rank" 1 "needs two ranks" --machine "$m" --machine-out "$TMP/o.json"
refused "--reps 0" 2 "--reps: expected an integer" --machine "$m" --machine-out "$TMP/o.json" --reps 0
refused "--max-bytes 1X" 2 "--max-bytes: expected a size" --machine "$m" --machine-out "$TMP/o.json" \
    --max-bytes 1X
refused "an unknown option" 2 "unknown option '--size'" --size 3
refused "an unwritable output" 2 "--machine-out $TMP/no/o.json: cannot write" --machine "$m" \
    --machine-out "$TMP/no/o.json" --reps 2 --max-bytes 4K
[ ! -e "$TMP/o.json" ] && pass "nothing written on refusal" || fail "$TMP/o.json written"
finish
