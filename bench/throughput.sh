#!/bin/bash
# Training throughput (samples/s) of cdp_run against PyTorch on the same MLP,
# the same samples per step (128 = 4 workers x 32, and 1 x 128), the same
# 2 cores, Fashion-MNIST; plus the SGEMM-bound limit.  All configurations are
# measured round-robin within each repetition, so machine noise hits them
# alike; figures are medians over the repetitions, ratios are computed per
# repetition (same moment) and their median is reported.
#
# usage: bench/throughput.sh [BUILD_DIR]       (BUILD_DIR holds cdp_run)
# environment:
#   MODELS      models to measure       ["mlp:784-1024-1024-10 mlp:784-256-128-10"]
#   REPS        repetitions             [3]
#   PY          python with torch       [/usr/bin/python3]
#   OUT         keep raw results here   [a temporary directory, removed]
#   SKIP_TORCH_SLOW=1  skip the torch configurations known to be slow
#                      (torch threads 2 with the default OpenMP spin policy)
#   SKIP_DDP=1  skip DistributedDataParallel
#   NO_SGEMM_LIMIT=1  use the torch.mm estimate instead of bench/sgemm_limit.c
# The SGEMM-bound limit: bench/sgemm_limit.c (built here with
#   gcc -O2 -fopenmp bench/sgemm_limit.c -lopenblas), 2 threads, batch 128 for
#   N=1 x B=128 and batch 32 for N=4 x B=32, both with OpenBLAS's own threading
#   (t2: the machine's SGEMM limit) and with --split 2 (cdp's decomposition);
#   without sgemm_limit.c, torch_mlp.py --sgemm-bound (torch.mm, same OpenBLAS).
#
# PyTorch configurations (all on 2 cores; see bench/torch_mlp.py):
#   torch threads t in {1,2} x OpenBLAS threads b in {1,2}, batch 128 in one
#   piece (mode b) or accumulated over 4 micro-batches of 32 (mode acc4);
#   the same with OMP_WAIT_POLICY=PASSIVE; the same with
#   OPENBLAS_CORETYPE=SkylakeX (PERFORMANCE.md trap 1); DDP gloo 2 x 1 thread.
# cdp configurations: 1 rank x 2 threads, N=4 x B=32 (cdp-v2 and dp) and
#   N=1 x B=128; 2 ranks x 1 thread, N=4 x B=32 (cdp-v2).

set -u
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${1:-${top_builddir:-/work/build-bench}}
CDP=$BUILD/cdp_run
PY=${PY:-/usr/bin/python3}
MODELS=${MODELS:-"mlp:784-1024-1024-10 mlp:784-256-128-10"}
REPS=${REPS:-3}
MPIRUN=${MPIRUN:-mpirun}
[ -x "$CDP" ] || { echo "throughput.sh: $CDP not found (build first)" >&2; exit 2; }
"$PY" -c 'import torch' 2>/dev/null || { echo "throughput.sh: $PY cannot import torch" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT"; tmp=$OUT
else
    tmp=$(mktemp -d /tmp/cdp_throughput.XXXXXX); trap 'rm -rf "$tmp"' EXIT
fi
res=$tmp/results.txt
: >"$res"

# steps per run: enough for >= ~1 s of work on an idle machine
cdp_steps() { case $1 in *1024-1024*) echo 300 ;; *) echo 600 ;; esac; }
torch_steps() { case $1 in *1024-1024*) echo 50 ;; *) echo 300 ;; esac; }

# run_cdp REP MODEL LABEL RANKS THREADS RULE N B
run_cdp() {
    local rep=$1 model=$2 label=$3 ranks=$4 thr=$5 rule=$6 n=$7 b=$8 m=$tmp/m.json launch=
    [ "$ranks" -gt 1 ] && launch="$MPIRUN --allow-run-as-root --oversubscribe -np $ranks"
    rm -f "$m"
    # shellcheck disable=SC2086
    if ! timeout 300 $launch "$CDP" --model "$model" --rule "$rule" --workers "$n" --batch "$b" \
            --threads "$thr" --steps "$(cdp_steps "$model")" --eval-every 0 --quiet \
            --metrics "$m" >"$tmp/cdp.log" 2>&1; then
        echo "cdp_run failed ($label):"; cat "$tmp/cdp.log"; return
    fi
    local sps
    sps=$(grep -o '"samples_per_s": [0-9.e+]*' "$m" | tail -1 | awk '{print $2}')
    echo "$rep $model cdp:$label $sps" | tee -a "$res"
}

# run_torch REP MODEL PREFIX ENV... -- ARGS...
run_torch() {
    local rep=$1 model=$2 prefix=$3; shift 3
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    env "${envs[@]}" timeout 600 "$PY" "$here/torch_mlp.py" --model "$model" --batch 128 \
        --steps "$(torch_steps "$model")" --reps 1 "$@" >"$tmp/torch.log" 2>&1 \
        || { echo "torch_mlp.py failed ($prefix):"; tail -5 "$tmp/torch.log"; return; }
    # TORCH model=M batch=128 mode=X threads=T blas=B core=C samples_per_s=V (reps ...)
    sed -n 's/^TORCH .* mode=\([^ ]*\) threads=\([^ ]*\) blas=\([^ ]*\) core=\([^ ]*\) samples_per_s=\([^ ]*\).*/\1 \2 \3 \4 \5/p' \
        "$tmp/torch.log" | while read -r mode t b core v; do
        echo "$rep $model torch:$prefix,$mode,t$t,b$b,$core $v" | tee -a "$res"
    done
}

sgemm_bin=
if [ -f "$here/sgemm_limit.c" ] && [ "${NO_SGEMM_LIMIT:-0}" != 1 ]; then
    # -fopenmp enables --split (cdp's own GEMM decomposition); without it, plain OpenBLAS only
    if gcc -O2 -fopenmp "$here/sgemm_limit.c" -lopenblas -o "$tmp/sgemm_limit" 2>"$tmp/sgemm_build.log" ||
       gcc -O2 "$here/sgemm_limit.c" -lopenblas -o "$tmp/sgemm_limit" 2>"$tmp/sgemm_build.log"; then
        sgemm_bin=$tmp/sgemm_limit
    else
        echo "note: bench/sgemm_limit.c does not build:"; cat "$tmp/sgemm_build.log"
    fi
fi

echo "# $(date -u '+%Y-%m-%d %H:%M UTC') $(uname -n); $(nproc) CPUs; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# cdp: $("$CDP" --version 2>&1 | head -1); $CDP"
echo "# OpenBLAS core in torch: default $("$PY" -c 'import sys; sys.path.insert(0, "'"$here"'"); import torch_mlp; print(torch_mlp.corename())'), " \
     "with OPENBLAS_CORETYPE=SkylakeX $(OPENBLAS_CORETYPE=SkylakeX "$PY" -c 'import sys; sys.path.insert(0, "'"$here"'"); import torch_mlp; print(torch_mlp.corename())')"
echo "# cdp banner: $("$CDP" --steps 1 --eval-every 0 2>&1 | sed -n 2p | sed 's/.*backend/backend/')"

for model in $MODELS; do
    echo "== $model"
    for rep in $(seq 1 "$REPS"); do
        echo "-- repetition $rep, load $(cut -d' ' -f1 /proc/loadavg)"
        run_cdp "$rep" "$model" "1x2thr,N4xB32,cdp-v2" 1 2 cdp-v2 4 32
        run_torch "$rep" "$model" default -- --modes b,acc4 --threads 1 --blas-threads 1,2
        run_cdp "$rep" "$model" "1x2thr,N4xB32,dp" 1 2 dp 4 32
        run_torch "$rep" "$model" SkylakeX OPENBLAS_CORETYPE=SkylakeX -- --modes b,acc4 --threads 1 --blas-threads 1,2
        run_cdp "$rep" "$model" "1x2thr,N1xB128" 1 2 cdp-v2 1 128
        run_torch "$rep" "$model" passive OMP_WAIT_POLICY=PASSIVE -- --modes b --threads 2 --blas-threads 1,2
        run_cdp "$rep" "$model" "2x1thr,N4xB32,cdp-v2" 2 1 cdp-v2 4 32
        [ "${SKIP_TORCH_SLOW:-0}" = 1 ] || \
            run_torch "$rep" "$model" default -- --modes b --threads 2 --blas-threads 1,2
        [ "${SKIP_DDP:-0}" = 1 ] || run_torch "$rep" "$model" ddp -- --ddp
        if [ -n "$sgemm_bin" ]; then
            # bench/sgemm_limit DIMS BATCH THREADS: best of 7 rounds per GEMM shape
            # and with --split 2: the same GEMMs cut as cdp's CPU backend cuts them
            # (OpenBLAS 1 thread per column block, 2 OpenMP threads)
            for mb in 128:1 32:4; do
                IFS=: read -r bb mi <<<"$mb"
                for how in t2 split2; do
                    extra=
                    [ $how = split2 ] && extra="--split 2"
                    # shellcheck disable=SC2086
                    timeout 300 "$sgemm_bin" "${model#mlp:}" "$bb" 2 $extra >"$tmp/sgemm.log" 2>&1
                    [ "$rep" = 1 ] && sed 's/^/    /' "$tmp/sgemm.log"
                    v=$(sed -n 's/.*GEMM bound \([0-9.]*\) samples\/s.*/\1/p' "$tmp/sgemm.log")
                    [ -n "$v" ] && echo "$rep $model bound:sgemm_limit,B$bb,micro$mi,$how $v" | tee -a "$res"
                done
            done
        else
            for mi in 1 4; do
                "$PY" "$here/torch_mlp.py" --sgemm-bound --model "$model" --batch 128 --micro $mi \
                    --steps "$(torch_steps "$model")" --reps 1 2>&1 | \
                    sed -n 's/.*step_s=\([^ ]*\).*samples_per_s=\([^ ]*\).*/\1 \2/p' | \
                    while read -r _ sps; do
                        echo "$rep $model bound:torch.mm,micro$mi,b2 $sps" | tee -a "$res"
                    done
            done
        fi
    done
done

echo
echo "== summary (medians over $REPS repetitions, and the best repetition; ratios: median of per-repetition ratios)"
"$PY" - "$res" <<'EOF'
import sys, statistics, collections
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
by = collections.defaultdict(dict)      # (model, label) -> {rep: value}
for rep, model, label, v in rows:
    by[(model, label)][rep] = float(v)
models = list(dict.fromkeys(m for m, _ in by))
def med(d): return statistics.median(d.values())
for model in models:
    print(f"\n{model}")
    labels = [l for (m, l) in by if m == model]
    for l in labels:
        d = by[(model, l)]
        print(f"  {l:48s} {med(d):10.0f} samples/s  best {max(d.values()):8.0f}  (reps: {' '.join(f'{v:.0f}' for v in d.values())})")
    cdp = [l for l in labels if l.startswith("cdp:")]
    torch = [l for l in labels if l.startswith("torch:")]
    bound = [l for l in labels if l.startswith("bound:")]
    if not cdp or not torch:
        continue
    bc = max(cdp, key=lambda l: med(by[(model, l)]))
    bt = max(torch, key=lambda l: med(by[(model, l)]))
    def ratio(a, b):
        rs = [by[(model, a)][r] / by[(model, b)][r] for r in by[(model, a)] if r in by[(model, b)]]
        return statistics.median(rs) if rs else float("nan")
    print(f"  best cdp   : {bc} {med(by[(model, bc)]):.0f} samples/s")
    print(f"  best torch : {bt} {med(by[(model, bt)]):.0f} samples/s")
    print(f"  RATIO best cdp / best torch = {ratio(bc, bt):.2f}  (target >= 1.3); "
          f"ratio of the best repetitions {max(by[(model, bc)].values()) / max(by[(model, bt)].values()):.2f}")
    for c in cdp:
        print(f"  ratio {c} / best torch = {ratio(c, bt):.2f}")
    for b in bound:
        for c in cdp:
            same = ("micro4" in b) == ("N4" in c)
            if same:
                print(f"  FRACTION {c} / {b} = {ratio(c, b):.2f}  (target >= 0.80)")
EOF
