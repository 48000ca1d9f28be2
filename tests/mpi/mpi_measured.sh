# The measured memory and traffic figures of the summary, against values
# counted by hand from doc/reference.md section 2 (the figures are measured by the
# accounting allocator and the comm layer's counters, so a change in what
# the executor holds or sends shows here).
. "$(dirname "$0")/../lib/lib.sh"
summary() {  # np rule extra... -> the summary line of --metrics (lib.sh's run_summary)
    local np=$1 rule=$2
    shift 2
    run_summary "$np" --data synthetic --quiet --eval-every 0 --steps 3 --rule "$rule" "$@"
}

# Activations, one process: mlp:784-512-512-512-10, one layer per stage,
# N = 8 = 2L, B = 64.  A stage keeps its output (512 x B floats; the last
# one its 10 logits and the B labels) until the next stage's backward.
#  dp: at the end of the forward every worker holds every output, and the
#      first backward adds the gradient it passes down:
#      8 x (3 x 512 + 10) x B x 4 + 8 x B x 4 + 512 x B x 4.
#  cdp-v2: worker i is offset by i ticks; at a tick boundary the workers at
#      phases 0..7 of their 8-tick cycle hold 1,2,3,3,3,2,1,0 buffers of
#      512 x B floats (outputs or the gradient on its way down), one of them
#      also its logits and labels.  Backward chains run lowest stage first,
#      so no tick goes above its boundary: 15 x 512 x B x 4 + (10 + 1) x B x 4.
M="--model mlp:784-512-512-512-10 --stages 4 --workers 8 --batch 64"
B=64
dp=$(summary 1 dp $M) || fail "dp did not run"
cdp=$(summary 1 cdp-v2 $M) || fail "cdp-v2 did not run"
a_dp=$(field "$dp" peak_activation_bytes)
a_cdp=$(field "$cdp" peak_activation_bytes)
want_dp=$(( (8 * (3 * 512 + 10) + 8 + 512) * B * 4 ))
want_cdp=$(( (15 * 512 + 11) * B * 4 ))
[ "$a_dp" = "$want_dp" ] && pass "dp peak activations $a_dp bytes (by hand $want_dp)" \
    || fail "dp peak activations $a_dp bytes, by hand $want_dp"
[ "$a_cdp" = "$want_cdp" ] && pass "cdp-v2 peak activations $a_cdp bytes (by hand $want_cdp)" \
    || fail "cdp-v2 peak activations $a_cdp bytes, by hand $want_cdp"
[ -n "$a_cdp" ] && [ -n "$a_dp" ] && [ $((a_cdp * 10)) -le $((a_dp * 6)) ] \
    && pass "cdp-v2 / dp activation peak <= 0.6" || fail "cdp-v2 / dp activation peak > 0.6 ($a_cdp / $a_dp)"

# Traffic, 4 ranks, N = 4, L = 4: dp all-reduces the whole gradient in one
# tick, which counts 2(P-1)/P of it per rank, 6x the gradient over 4 ranks.
# cdp sends one stage's partial or full sum at a time.
M="--model mlp:784-64-64-64-10 --stages 4 --workers 4 --batch 8"
nparams=$(( 784 * 64 + 64 + 2 * (64 * 64 + 64) + 64 * 10 + 10 ))
dp=$(summary 4 dp $M) || fail "dp on 4 ranks did not run"
cdp=$(summary 4 cdp-v2 $M) || fail "cdp-v2 on 4 ranks did not run"
t_dp=$(field "$dp" bytes_sent_peak_tick)
t_cdp=$(field "$cdp" bytes_sent_peak_tick)
[ "$t_dp" = $((6 * nparams * 4)) ] && pass "dp peak tick traffic $t_dp bytes (by hand $((6 * nparams * 4)))" \
    || fail "dp peak tick traffic $t_dp bytes, by hand $((6 * nparams * 4))"
[ -n "$t_cdp" ] && [ "$t_cdp" -gt 0 ] && [ $((t_cdp * 2)) -le "$t_dp" ] \
    && pass "cdp-v2 peak tick traffic $t_cdp <= half of dp's $t_dp" \
    || fail "cdp-v2 peak tick traffic $t_cdp, dp $t_dp"
# and the counters are the timeline's, as --plan counts them
traffic_vs_plan "dp on 4 ranks" "$dp" 4 --data synthetic --steps 3 --rule dp $M
traffic_vs_plan "cdp-v2 on 4 ranks" "$cdp" 4 --data synthetic --steps 3 --rule cdp-v2 $M
finish
