#!/bin/bash
# Where CDP pays off at cluster scale, and where it does not: cdp_run --plan
# --machine's predicted samples/s of dp, cdp-v1 and cdp-v2 under each
# framework against the number of ranks P, for a cluster described by a
# machine file (default examples/cluster.json: 200 TFLOP/s devices, 8 a
# host on 150 GB/s links) with the link between hosts at each rate of RATES.
# No run, no MPI: the simulator of doc/reference.md section 2.7, seconds a
# configuration.
#
#     bench/planning/cluster_sweep.sh [BUILD_DIR]
#
# Configurations, each on P ranks with B samples a worker:
#   dp, cdp-v1, cdp-v2      replicated, N = P workers
#   zero-dp, zero-cdp-v2    --framework zero, N = P
#   mp-cdp-v2               --framework model-parallel, N = P, L = MP_L
#                           stages (cdp's workers share a stage's ranks:
#                           P ranks); --plan says how many it uses
#   mp-dp                   --framework model-parallel --rule dp, N = P/MP_L
#                           (every worker its own rank per stage: N x L = P)
# Prints a Markdown table per rate (samples/s, the fastest in bold) and
# result lines (bench/README):
#     result cluster-sweep "<model> P=<P> link=<rate> <config>" predicted_samples_per_s <x> samples/s
#
# environment (defaults): MACHINE [examples/cluster.json]  MODEL [resnet50]
#   SHAPE [3x224x224]  B [16]  PS ["64 128 256 512 1024"]
#   RATES ["10gbit 25gbit 100gbit"] (inter_host bandwidth; intra and the
#   rest from MACHINE)  MP_L [4]
#   CONFIGS ["dp cdp-v1 cdp-v2 zero-dp zero-cdp-v2 mp-cdp-v2 mp-dp"]
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/common.sh"
BUILD=${1:-${top_builddir:-$bench_top}}
CDP=$BUILD/cdp_run
MACHINE=${MACHINE:-$bench_top/examples/cluster.json}
MODEL=${MODEL:-resnet50}
SHAPE=${SHAPE:-3x224x224}
B=${B:-16}
PS=${PS:-"64 128 256 512 1024"}
RATES=${RATES:-"10gbit 25gbit 100gbit"}
MP_L=${MP_L:-4}
CONFIGS=${CONFIGS:-"dp cdp-v1 cdp-v2 zero-dp zero-cdp-v2 mp-cdp-v2 mp-dp"}
[ -x "$CDP" ] || { echo "cluster_sweep.sh: $CDP not found (build first)" >&2; exit 2; }
[ -f "$MACHINE" ] || { echo "cluster_sweep.sh: no machine file $MACHINE" >&2; exit 2; }
tmp=$(mktemp -d /tmp/cdp_sweep.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
bench_header

bytes_per_s() {   # RATE (10gbit, 25gbit, 100mbit) -> bytes/s
    case $1 in
        *gbit) echo "${1%gbit} * 125000000" | bc ;;
        *mbit) echo "${1%mbit} * 125000" | bc ;;
        *) echo "cluster_sweep.sh: rate '$1' is not NNgbit or NNmbit" >&2; return 1 ;;
    esac
}

# predicted samples/s of one configuration, or "-" with the reason on stderr
predict() {   # CONFIG P MACHINE_FILE
    local cfg=$1 P=$2 m=$3 rule fw N stages=() out line
    case $cfg in
        dp|cdp-v1|cdp-v2) rule=$cfg fw=replicated N=$P ;;
        zero-dp|zero-cdp-v2) rule=${cfg#zero-} fw=zero N=$P ;;
        mp-cdp-v2) rule=cdp-v2 fw=model-parallel N=$P stages=(--stages "$MP_L") ;;
        mp-dp) rule=dp fw=model-parallel N=$((P / MP_L)) stages=(--stages "$MP_L") ;;
        *) echo "cluster_sweep.sh: unknown configuration $cfg" >&2; return 1 ;;
    esac
    out=$("$CDP" --plan --plan-ranks "$P" --workers "$N" "${stages[@]}" --rule "$rule" --framework "$fw" \
              --model "$MODEL" --data "synthetic:$SHAPE" --batch "$B" --machine "$m" 2>&1)
    line=$(printf '%s\n' "$out" | grep -m1 "^predict: rule=$rule framework=$fw ")
    if [ -z "$line" ]; then
        echo "# $cfg P=$P: $(printf '%s\n' "$out" | grep -m1 -i 'error\|needs' | cut -c1-160)" >&2
        echo -
        return 0
    fi
    printf '%s\n' "$line" | sed 's/.* samples_per_s=\([^ ]*\) .*/\1/'
}

echo "# machine: $MACHINE; $MODEL at $SHAPE, B=$B a worker; model-parallel L=$MP_L"
for rate in $RATES; do
    bw=$(bytes_per_s "$rate") || exit 2
    m=$tmp/machine-$rate.json
    python3 - "$MACHINE" "$m" "$bw" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["network"]["inter_host"]["bandwidth_Bps"] = float(sys.argv[3])
json.dump(m, open(sys.argv[2], "w"))
PY
    echo
    echo "### links between hosts at $rate ($bw B/s): predicted samples/s"
    echo
    printf '| P |'; for c in $CONFIGS; do printf ' %s |' "$c"; done; echo
    printf '| --- |'; for c in $CONFIGS; do printf ' --- |'; done; echo
    for P in $PS; do
        vals=()
        for c in $CONFIGS; do
            v=$(predict "$c" "$P" "$m")
            vals+=("$v")
            [ "$v" = - ] || bench_result cluster-sweep "$MODEL P=$P link=$rate $c" predicted_samples_per_s "$v" samples/s >>"$tmp/results"
        done
        best=$(printf '%s\n' "${vals[@]}" | grep -v '^-$' | sort -g | tail -1)
        printf '| %s |' "$P"
        for v in "${vals[@]}"; do
            if [ "$v" != - ] && [ "$v" = "$best" ]; then printf ' **%.0f** |' "$v"
            elif [ "$v" != - ]; then printf ' %.0f |' "$v"
            else printf ' - |'; fi
        done
        echo
    done
done
echo
cat "$tmp/results" 2>/dev/null
