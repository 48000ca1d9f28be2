# What a user reads: the summary counts ranks in good English, no line of a
# default run is wider than 100 columns, and the user's OMP_NUM_THREADS wins
# over cdp's default thread count (the banner says which was used and why),
# while --threads wins over both; progress lines and --log-every.
. "$(dirname "$0")/../lib/lib.sh"
base="--data synthetic --steps 2 --eval-every 1"
out=$(run 1 $base 2>&1) || fail "default run: $out"
echo "$out" | grep -q "^summary: .*, 1 rank, " && pass "summary: 1 rank" || fail "summary: $(echo "$out" | grep summary)"
wide=$(echo "$out" | awk 'length($0) > 100')
[ -z "$wide" ] && pass "no line wider than 100 columns" || fail "lines wider than 100 columns: $wide"
# the evaluation is announced, and an epoch the run ends inside says so
echo "$out" | grep -A1 "^evaluating on 2048 test samples$" | grep -q "^epoch 1/1 (2 of 64 steps) lr " \
    && pass "evaluation announced, part of an epoch said: $(echo "$out" | grep '^epoch')" \
    || fail "no evaluation line, or an epoch line without its part: $(echo "$out" | grep -v '^ ')"
out=$(run 2 $base 2>&1) || fail "2-rank run: $out"
echo "$out" | grep -q "^summary: .*, 2 ranks, " && pass "summary: 2 ranks" || fail "summary: $(echo "$out" | grep summary)"
# --deterministic says what it changes: the dp ring, nothing under a cdp rule
out=$(run 1 $base --rule cdp-v1 --deterministic 2>&1) || fail "cdp-v1 --deterministic: $out"
echo "$out" | grep -q "^  --deterministic: nothing to change" && pass "--deterministic under cdp-v1: said to change nothing" \
    || fail "--deterministic under cdp-v1: no banner line: $(echo "$out" | grep -- deterministic)"
out=$(run 1 $base --rule dp --deterministic 2>&1) || fail "dp --deterministic: $out"
echo "$out" | grep -q "^  --deterministic: gradients summed in worker order" && pass "--deterministic under dp: the ring named" \
    || fail "--deterministic under dp: $(echo "$out" | grep -- deterministic)"
# --quiet prints what README and --help say: one line, accuracy and step time
out=$(run 2 $base --quiet 2>/dev/null) || fail "--quiet run: $out"
[ "$(echo "$out" | grep -c .)" -eq 1 ] && echo "$out" | grep -qE '^test_accuracy [0-9.]+ step_time_s [0-9.]+$' \
    && pass "--quiet: one line: $out" || fail "--quiet printed: $out"
out=$(run 1 $base --quiet --eval-every 0 2>/dev/null)
[ "$out" != "${out#test_accuracy none step_time_s }" ] && pass "--quiet without evaluation: $out" \
    || fail "--quiet --eval-every 0 printed: $out"
"$CDP" --help | grep -A1 -- '^  --quiet' | grep -q 'test_accuracy A' && grep -q -- '--quiet .*"test_accuracy A step_time_s T"' \
    "${top_srcdir:-$top_builddir}/README" && pass "--help and README describe --quiet's line" \
    || fail "--quiet's line described in neither --help nor README: $("$CDP" --help | grep -A1 -- '^  --quiet')"
# an OMP_NUM_THREADS that libgomp rejects: its warning once (not again from
# the program re-executed at start), and cdp's line saying what it means
out=$(env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT OMP_NUM_THREADS=0 "$CDP" $base --quiet 2>&1 >/dev/null)
[ "$(echo "$out" | grep -c 'libgomp: Invalid value')" -le 1 ] &&
    [ "$(echo "$out" | grep -c '^cdp_run: warning: OMP_NUM_THREADS=0 is not a thread count (a positive integer): ignored, [0-9]* threads\? per rank')" -eq 1 ] \
    && pass "OMP_NUM_THREADS=0: one warning of libgomp's, one of cdp's" || fail "OMP_NUM_THREADS=0: $out"
out=$(OMP_NUM_THREADS=1 run 1 $base 2>&1)
echo "$out" | grep -q "1 rank x 1 thread (OMP_NUM_THREADS)" && pass "OMP_NUM_THREADS=1 is used and named" \
    || fail "OMP_NUM_THREADS=1: $(echo "$out" | sed -n 2p)"
out=$(OMP_NUM_THREADS=1 run 1 $base --threads 2 2>&1)
echo "$out" | grep -q "1 rank x 2 threads (--threads)" && pass "--threads wins over OMP_NUM_THREADS" \
    || fail "--threads 2 with OMP_NUM_THREADS=1: $(echo "$out" | sed -n 2p)"
out=$(env -u OMP_NUM_THREADS "$CDP" $base 2>&1)
echo "$out" | sed -n 2p | grep -q "thread.* (the " && pass "default threads say where they come from" \
    || fail "default: $(echo "$out" | sed -n 2p)"
# a BLAS kernel slower than the CPU allows is named in the banner (the
# user's OPENBLAS_CORETYPE is respected, not silently)
if grep -qw avx512f /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo; then
    out=$(OPENBLAS_CORETYPE=Haswell "$CDP" $base 2>&1)
    echo "$out" | grep -q "kernel Haswell (OPENBLAS_CORETYPE; SkylakeX is faster here)" \
        && pass "OPENBLAS_CORETYPE=Haswell on an AVX-512 CPU is named" \
        || fail "OPENBLAS_CORETYPE=Haswell: $(echo "$out" | grep kernel)"
    wide=$(echo "$out" | awk 'length($0) > 100')
    [ -z "$wide" ] && pass "the kernel note keeps lines within 100 columns" || fail "wide: $wide"
    out=$(OPENBLAS_CORETYPE=SkylakeX "$CDP" $base 2>&1)
    echo "$out" | grep -q "faster here" && fail "SkylakeX named as slower: $(echo "$out" | grep kernel)" \
        || pass "SkylakeX gets no note"
else
    echo "skip: no AVX-512 here, the kernel note is not checked"
fi
# --plan beyond the model's blocks: the timeline in stage units, never
# activation byte figures of 0
out=$("$CDP" --plan --stages 5 --workers 4 2>&1)
echo "$out" | grep -q "fewer blocks than 5 stages" && pass "--plan says the figures are in stage units" \
    || fail "--plan --stages 5: no note"
zeros=$(echo "$out" | awk '/^tick .*act bytes/ {t = 1; next} t && NF == 4 && $3 == "0"')
[ -z "$zeros" ] && pass "--plan prints no activation bytes of 0" || fail "--plan zeros: $zeros"
# progress inside an epoch: on a terminal one rewritten line per 64-step
# segment (run under script(1) for a terminal), none with --quiet, none in a
# short run's plain output
if command -v script >/dev/null 2>&1; then
    out=$(timeout 120 script -qc "$CDP --data synthetic --batch 8 --epochs 1 --eval-every 0" /dev/null 2>&1)
    echo "$out" | tr '\r' '\n' | grep -q "^  step 64/256 .*samples/s .*train loss .*ETA" \
        && pass "terminal: progress line during the epoch" || fail "terminal progress: $(echo "$out" | head -c 400)"
    out=$(timeout 120 script -qc "$CDP --data synthetic --batch 8 --epochs 1 --eval-every 0 --quiet" /dev/null 2>&1)
    echo "$out" | grep -q "step 64/" && fail "--quiet printed progress" || pass "--quiet: no progress"
fi
out=$(run 1 --data synthetic --batch 8 --epochs 1 --eval-every 0 2>&1)
echo "$out" | grep -q "step 64/" && fail "a short non-terminal run printed progress" \
    || pass "not a terminal, short run: no progress lines"
# --log-every K: a --metrics line after steps K, 2K, ... whose windows
# average to the epoch's training loss, without changing a bit of the run
for np in 1 2; do
    lb="--data synthetic --steps 20 --quiet --eval-every 0"
    run $np $lb --save-weights "$TMP/w0.st" >/dev/null 2>&1 || fail "np=$np: plain run"
    run $np $lb --save-weights "$TMP/w1.st" --log-every 5 --metrics "$TMP/m.json" >/dev/null 2>&1 \
        || fail "np=$np: --log-every run"
    steps=$(grep '"log": "steps"' "$TMP/m.json" | sed 's/.*"step": \([0-9]*\),.*/\1/' | tr '\n' ' ')
    [ "$steps" = "5 10 15 20 " ] && pass "np=$np: --log-every 5 lines at steps $steps" \
        || fail "np=$np: --log-every 5 lines at steps '$steps'"
    mean=$(grep '"log": "steps"' "$TMP/m.json" | sed 's/.*"train_loss": \([0-9.e+-]*\),.*/\1/' |
           awk '{ s += $1; n++ } END { printf "%.9g", s / n }')
    epoch=$(grep '^{"epoch"' "$TMP/m.json" | sed 's/.*"train_loss": \([0-9.e+-]*\),.*/\1/')
    awk -v a="$mean" -v b="$epoch" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 1e-6 * b) }' \
        && pass "np=$np: the windows average to the epoch's loss ($mean, $epoch)" \
        || fail "np=$np: windows $mean against the epoch's $epoch"
    cmp -s "$TMP/w0.st" "$TMP/w1.st" && pass "np=$np: --log-every changes no bit" \
        || fail "np=$np: --log-every changed the weights"
done
out=$("$CDP" --data synthetic --steps 2 --log-every 5 2>&1)
[ $? -eq 1 ] && echo "$out" | grep -q "^cdp_run: error: --log-every needs --metrics" \
    && pass "--log-every without --metrics refused" || fail "--log-every without --metrics: $out"
finish
