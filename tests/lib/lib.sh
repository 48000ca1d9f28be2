# Shared by the MPI test scripts: paths, a timeout around every mpirun, a
# scratch directory, and the helpers that compare weight files.
set -u
: "${top_builddir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${MPIRUN:=mpirun}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
CDP="$top_builddir/cdp_run"
COMPARE="$top_builddir/tests/lib/st_compare"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0
started_at=$(date +%s)

# run NP ARGS...: cdp_run on NP ranks, 300 s at most
run() {
    local np=$1
    shift
    timeout 300 "$MPIRUN" --oversubscribe -np "$np" "$CDP" "$@"
}

fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

pass() {
    echo "ok: $*"
}

# same MODEL A B TOL WHAT: weights A and B agree within TOL (0: bitwise)
same() {
    local out
    if out=$("$COMPARE" "$1" "$2" "$3" "$4" 2>&1); then
        pass "$5 ($out)"
    else
        fail "$5 ($out)"
    fi
}

# differ MODEL A B WHAT: weights A and B are not bitwise equal (WHAT
# changes the run: else the checks that it is exact prove little)
differ() {
    local out rc
    out=$("$COMPARE" "$1" "$2" "$3" 0 2>&1)
    rc=$?
    # st_compare: 0 the same, 1 different, else a file it could not read
    # (or no st_compare at all): only 1 is a pass
    case $rc in
        0) fail "$4: the same weights" ;;
        1) pass "$4: the weights differ ($out)" ;;
        *) fail "$4: not compared (status $rc: $out)" ;;
    esac
}

# until_nonempty FILE SECONDS: waits until FILE has content (a run's first
# metrics line), SECONDS at most; 1 when it never does
until_nonempty() {
    local _
    for _ in $(seq $(($2 * 10))); do
        [ -s "$1" ] && return 0
        sleep 0.1
    done
    return 1
}

# signal_run NP WHOM SIG ARGS...: cdp_run ARGS on NP ranks (--metrics
# $TMP/sig.json added); once its first epoch line is out, SIG goes to WHOM:
# rank (the second rank; every rank stops with it) or mpirun (mpirun
# itself).  Leaves mpirun's status in rc and the run's stderr in
# $TMP/sig.err.
signal_run() {
    local np=$1 whom=$2 sig=$3 tpid mp ranks
    shift 3
    rm -f "$TMP/sig.json"
    timeout 300 "$MPIRUN" --oversubscribe -np "$np" "$CDP" "$@" --metrics "$TMP/sig.json" \
        >/dev/null 2>"$TMP/sig.err" &
    tpid=$!
    until_nonempty "$TMP/sig.json" 60
    mp=$(pgrep -P $tpid)
    ranks=$(pgrep -P "$mp" | tr '\n' ' ')
    case $whom in
        rank) set -- $ranks; kill -"$sig" "$2" ;;
        mpirun) kill -"$sig" "$mp" ;;
    esac
    wait $tpid
    rc=$?
}

# one_error NP WANT ARGS...: cdp_run ARGS on NP ranks stops within 60 s
# with a non-zero status and exactly one line "cdp_run: error: ..." on
# stderr, which matches WANT (a grep pattern); its stdout is left in
# $TMP/one_error.out
one_error() {
    local np=$1 want=$2
    shift 2
    local out rc n
    out=$(timeout 60 "$MPIRUN" --oversubscribe -np "$np" "$CDP" "$@" 2>&1 >"$TMP/one_error.out")
    rc=$?
    n=$(printf '%s\n' "$out" | grep -c '^cdp_run: error:')
    if [ $rc -eq 124 ]; then
        fail "np=$np $*: hung"
    elif [ $rc -eq 0 ]; then
        fail "np=$np $*: exit 0"
    elif [ "$n" -ne 1 ]; then
        fail "np=$np $*: $n error lines: $out"
    elif ! printf '%s\n' "$out" | grep '^cdp_run: error:' | grep -q -- "$want"; then
        fail "np=$np $*: error does not mention '$want': $out"
    else
        pass "np=$np $*: $(printf '%s\n' "$out" | grep '^cdp_run: error:')"
    fi
}

# field JSON KEY: the integer value of KEY in the JSON line (empty if none)
field() {
    echo "$1" | sed -n "s/.*\"$2\": \([0-9]*\).*/\1/p"
}

# run_summary NP ARGS...: cdp_run ARGS on NP ranks; prints the summary line
# of its --metrics (status 1 when the run failed)
run_summary() {
    local np=$1
    shift
    rm -f "$TMP/summary.json"
    run "$np" "$@" --metrics "$TMP/summary.json" >/dev/null || return 1
    tail -n 1 "$TMP/summary.json"
}

# plan_traffic NP ARGS...: "TOTAL PEAK MEAN", the bytes sent that cdp_run
# --plan ARGS counts on NP ranks over the --steps K of ARGS (--plan-steps
# K): the sum of its ticks (listed up to 64 ticks: a short run), its busiest
# tick and its mean per tick
plan_traffic() {
    local np=$1 k= a prev=
    shift
    for a in "$@"; do
        [ "$prev" = --steps ] && k=$a
        prev=$a
    done
    [ -n "$k" ] || return 1
    timeout 300 "$MPIRUN" --oversubscribe -np "$np" "$CDP" "$@" --plan --plan-steps "$k" 2>/dev/null |
        awk '/^tick / { on = 1; next }
             on && NF == 0 { on = 0 }
             on { s += $4; n++ }
             /^bytes sent: peak tick / { p = $5; sub(",", "", p); m = $9 }
             END { if (!n || p == "" || m == "") exit 1; printf "%.0f %s %s\n", s, p, m }'
}

# traffic_vs_plan WHAT SUMMARY NP ARGS...: the traffic counters of a run
# (SUMMARY, its --metrics summary line: bytes sent in total and in the
# busiest tick, all ranks) are what --plan counts from the timeline for
# ARGS on NP ranks
traffic_vs_plan() {
    local what=$1 sum=$2 np=$3 plan total peak mean
    shift 3
    plan=$(plan_traffic "$np" "$@") || { fail "$what: --plan on $np ranks gave no traffic figures"; return; }
    total=$(field "$sum" bytes_sent_total)
    peak=$(field "$sum" bytes_sent_peak_tick)
    # the run's mean is printed to 6 digits (%g), --plan's rounded to the byte
    mean=$(echo "$sum" | sed -n 's/.*"bytes_sent_mean_tick": \([0-9.e+-]*\).*/\1/p')
    if [ "${total:-0}" -gt 0 ] && [ "$total $peak" = "${plan% *}" ] &&
       awk -v a="${mean:-0}" -v b="${plan##* }" 'BEGIN { d = a - b; exit !(b > 0 && (d < 0 ? -d : d) <= 0.5 + 1e-5 * b) }'; then
        pass "$what: bytes sent $total, busiest tick $peak, mean tick $mean, as --plan counts them"
    else
        fail "$what: bytes sent ${total:-?}, busiest tick ${peak:-?}, mean tick ${mean:-?}; --plan: $plan"
    fi
}

finish() {
    echo "# $(($(date +%s) - started_at)) s"   # for keeping make check within its time
    if [ "$failures" -gt 0 ]; then
        echo "$failures check(s) failed"
        exit 1
    fi
    exit 0
}

# frameworks_bitwise MODEL COMMON: under cdp_run COMMON (which must give
# N = L = 4 workers and stages), cdp-v1, cdp-v2 and dp --deterministic
# bitwise identical on 1, 2, 3 and 4 ranks (byte-identical files) and to the
# serial reference (--verify); zero on 2 ranks and model-parallel on 4
# bitwise equal to replicated; dp with its all-reduce within AR_TOL (an
# st_compare tolerance; default 1e-5, the largest difference over the
# largest value); the rules differ, so none of this is vacuous.
frameworks_bitwise() {
    : "${AR_TOL:=1e-5}"
    local M=$1 common=$2 rule tag out np pair d
    d=$(mktemp -d "$TMP/frameworks.XXXXXX")
    for rule in cdp-v1 cdp-v2 "dp --deterministic"; do
        tag=${rule%% *}
        out=$(run 1 $common --rule $rule --verify --save-weights "$d/$tag-1.st" 2>&1)
        if [ $? -eq 0 ] && echo "$out" | grep -q " 0 of .* differ bitwise"; then
            pass "$M $rule: 1 rank equals the serial reference bitwise (buffers included)"
        else
            fail "$M $rule --verify: $out"
        fi
        for np in 2 3 4; do
            run $np $common --rule $rule --save-weights "$d/$tag-$np.st" >/dev/null \
                || fail "$M $rule on $np ranks did not run"
            same $M "$d/$tag-$np.st" "$d/$tag-1.st" 0 "$M $rule: $np ranks bitwise equal to 1 rank"
            if cmp -s "$d/$tag-$np.st" "$d/$tag-1.st"; then
                pass "$M $rule: $np ranks: the saved file is byte-identical to 1 rank's"
            else
                fail "$M $rule: $np ranks: the saved file differs from 1 rank's (cmp)"
            fi
        done
        run 2 $common --rule $rule --framework zero --save-weights "$d/$tag-zero.st" >/dev/null \
            && same $M "$d/$tag-zero.st" "$d/$tag-1.st" 0 "$M $rule: zero on 2 ranks = replicated" \
            || fail "$M $rule: zero on 2 ranks did not run"
    done
    # model-parallel: cdp-v2 with N = L = 4 shares 4 ranks
    run 4 $common --rule cdp-v2 --framework model-parallel --save-weights "$d/mp.st" >/dev/null \
        && same $M "$d/mp.st" "$d/cdp-v2-1.st" 0 "$M cdp-v2: model-parallel on 4 ranks = replicated" \
        || fail "$M cdp-v2: model-parallel on 4 ranks did not run"
    # dp with its ring all-reduce: the sum in another order than the reference, 1e-5
    run 2 $common --rule dp --save-weights "$d/dp-ar.st" >/dev/null || fail "$M dp on 2 ranks did not run"
    same $M "$d/dp-ar.st" "$d/dp-1.st" "$AR_TOL" "$M dp with its all-reduce on 2 ranks within $AR_TOL"
    # the rules differ, so the checks above are not vacuous
    for pair in "cdp-v1 dp" "cdp-v2 dp" "cdp-v1 cdp-v2"; do
        set -- $pair
        if "$COMPARE" $M "$d/$1-1.st" "$d/$2-1.st" 0 >/dev/null; then
            fail "$M: $1 and $2 give the same weights"
        else
            pass "$M: $1 differs from $2"
        fi
    done
}
