# cdp across hosts: emulated hosts (tests/lib/hosts.sh: a network, UTS and
# mount namespace each, TCP over a bridge, a node-local directory each),
# one set-up of 3 hosts x 2 slots for every run, mpirun on node1.
# 1. Open MPI sees separate hosts: one rank per host where asked, and its
#    shared-memory transport joins ranks on one host but not across hosts.
# 2. On 2 hosts x 2 ranks, 3 x 1 and 2 x 1: cdp-v1, cdp-v2 and dp
#    --deterministic save byte-identical weights to 1 rank's; zero (and
#    model-parallel on 2 x 2) equal replicated; --verify finds 0 differing;
#    the traffic counters are those --plan counts.
# 3. Data on node-local disks: the same weights as 1 rank reading the
#    shared copy; node2's copy stale (same size, other pixels) or gone: one
#    error line (naming the path and the host when gone), a non-zero exit,
#    no hang.
# 4. A checkpoint in a node-local directory: written on node1 only (rank
#    0's host), resumed on other host and rank counts bit for bit; a
#    checkpoint directory that exists on node2 only: a clear error.
# 5. The banner says which ranks run on which host.
# 6. A harness killed by SIGKILL (no trap runs) leaves its namespaces; the
#    next harness removes them, saying so, and leaves a live one's alone.
# Exit 77 (skip) where namespaces cannot be made (not root, no
# CAP_NET_ADMIN); the namespaces are removed on any exit.
. "$(dirname "$0")/../lib/lib.sh"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib/hosts.sh"
HOSTS_SLOTS=2
hosts_up 3 || { rc=$?; hosts_down; rm -rf "$TMP"; exit $rc; }
trap 'hosts_down; rm -rf "$TMP"' EXIT
trap 'exit 141' PIPE
# every mpirun starts on node1, placing its ranks with -H $ON
cat >"$TMP/mpirun" <<EOF
#!/bin/sh
exec env $(printf '%q ' "${HOSTS_ENV_VARS[@]}") "$HOSTS_DIR/on_host" 1 "$(command -v "$MPIRUN")" -H "\$ON" "\$@"
EOF
chmod +x "$TMP/mpirun"
MPIRUN=$TMP/mpirun
export ON=node1
local_dir() {  # I: host I's node-local directory, as seen from outside
    echo "$HOSTS_DIR/node/node$1"
}

# 1. separate hosts
got=$(ON=node1,node2,node3 timeout 60 "$MPIRUN" -np 3 hostname 2>&1 | sort | paste -s -d ' ')
[ "$got" = "node1 node2 node3" ] && pass "3 hosts x 1 rank: the ranks run on $got" \
    || fail "3 hosts x 1 rank: hostname gave '$got'"
tiny="--data synthetic --model mlp:784-16-10 --steps 2 --quiet --eval-every 0"
out=$(ON=node1,node2 OMPI_MCA_btl=vader,self run 2 $tiny 2>&1)
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && echo "$out" | grep -q "unable to reach each other" \
    && pass "shared memory (btl vader,self) cannot join ranks on node1 and node2 (exit $rc)" \
    || fail "btl vader,self across node1 and node2: exit $rc, $(echo "$out" | head -3)"
ON=node2:2 OMPI_MCA_btl=vader,self run 2 $tiny >/dev/null 2>&1 \
    && pass "shared memory (btl vader,self) joins 2 ranks on node2" \
    || fail "btl vader,self with 2 ranks on node2 did not run"

# 2. the rules and frameworks across hosts, N = L = 4
M=mlp:784-24-16-16-10
common="--data synthetic --model $M --stages 4 --workers 4 --batch 8 --steps 6 --eval-every 0 --lr 0.05 --momentum 0.9 --weight-decay 5e-4"
for rule in cdp-v1 cdp-v2 "dp --deterministic"; do
    run 1 $common --quiet --rule $rule --save-weights "$TMP/${rule%% *}-1.st" >/dev/null \
        || fail "$rule on 1 rank did not run"
done
# one run on layout $ON (NP ranks): its weights byte-identical to REF's,
# its traffic that of --plan; the output in $TMP/last.out
across() {  # NP REF WHAT ARGS...
    local np=$1 ref=$2 what=$3
    shift 3
    rm -f "$TMP/x.st" "$TMP/x.json"
    if ! run "$np" "$@" --save-weights "$TMP/x.st" --metrics "$TMP/x.json" >"$TMP/last.out" 2>&1; then
        fail "$what did not run: $(grep -m 3 . "$TMP/last.out")"
        return 1
    fi
    if cmp -s "$TMP/x.st" "$ref"; then
        pass "$what: the weights file is byte-identical to ${ref##*/}"
    else
        fail "$what: the weights differ from ${ref##*/} ($("$COMPARE" $M "$TMP/x.st" "$ref" 0 2>&1))"
    fi
    traffic_vs_plan "$what" "$(tail -n 1 "$TMP/x.json")" "$np" "$@"
}
for layout in "node1:2,node2:2 4 2x2 cdp-v1" "node1,node2,node3 3 3x1 cdp-v2" "node1,node2 2 2x1 dp"; do
    set -- $layout
    export ON=$1
    np=$2 where="$3 ($1)" zrule=$4
    for rule in cdp-v1 cdp-v2 "dp --deterministic"; do
        tag=${rule%% *}
        if [ "$tag" = cdp-v2 ]; then   # with --verify, and the banner
            across $np "$TMP/$tag-1.st" "$rule on $where" $common --rule $rule --verify
            grep -q " 0 of .* differ bitwise" "$TMP/last.out" \
                && pass "cdp-v2 on $where --verify: $(grep -o '[0-9]* of .* differ bitwise' "$TMP/last.out")" \
                || fail "cdp-v2 on $where --verify: $(grep -i verif "$TMP/last.out")"
            cp "$TMP/last.out" "$TMP/banner-$3.out"
        else
            across $np "$TMP/$tag-1.st" "$rule on $where" $common --quiet --rule $rule
        fi
    done
    det=
    [ $zrule = dp ] && det=" --deterministic"
    across $np "$TMP/$zrule-1.st" "zero $zrule$det on $where = replicated" \
        $common --quiet --rule $zrule$det --framework zero
done
# model-parallel: cdp-v2 with N = L = 4 takes 4 ranks
export ON=node1:2,node2:2
across 4 "$TMP/cdp-v2-1.st" "model-parallel cdp-v2 on 2x2 = replicated" \
    $common --quiet --rule cdp-v2 --framework model-parallel
# the rules differ, so none of this is vacuous
for pair in "cdp-v1 dp" "cdp-v2 dp" "cdp-v1 cdp-v2"; do
    set -- $pair
    cmp -s "$TMP/$1-1.st" "$TMP/$2-1.st" && fail "$1 and $2 give the same weights" \
        || pass "$1 differs from $2"
done

# 3. a real data set (the first 512 + 128 images of Fashion-MNIST) on each
# host's node-local disk
FM=/usr/share/datasets/fashion-mnist
be32() {  # N: 4 bytes, big-endian
    printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $(($1 >> 24 & 255)) $(($1 >> 16 & 255)) $(($1 >> 8 & 255)) $(($1 & 255)))"
}
idx_head() {  # NAME HEADER ITEM N: the first N items of $FM/NAME.gz in $TMP/fm/NAME
    { zcat "$FM/$1.gz" | head -c 4; be32 "$4"; zcat "$FM/$1.gz" | tail -c +9 | head -c $(($2 - 8 + $3 * $4)); } \
        >"$TMP/fm/$1"
}
mkdir -p "$TMP/fm"
if [ -r "$FM/train-images-idx3-ubyte.gz" ]; then
    idx_head train-images-idx3-ubyte 16 784 512 && idx_head train-labels-idx1-ubyte 8 1 512 &&
    idx_head t10k-images-idx3-ubyte 16 784 128 && idx_head t10k-labels-idx1-ubyte 8 1 128 \
        || fail "could not write a Fashion-MNIST subset"
    fmargs="--data fashion-mnist --model mlp:784-24-16-16-10 --workers 4 --batch 8 --steps 6 --quiet --eval-every 0"
    ON=node1 run 1 $fmargs --data-dir "$TMP/fm" --save-weights "$TMP/fm-1.st" >/dev/null \
        || fail "Fashion-MNIST subset on 1 rank did not run"
    for i in 1 2 3; do hosts_exec $i cp -r "$TMP/fm" "$CDP_NODE_LOCAL/fm"; done
    export ON=node1:2,node2:2
    run 4 $fmargs --data-dir "$CDP_NODE_LOCAL/fm" --save-weights "$TMP/fm-4.st" >/dev/null \
        && cmp -s "$TMP/fm-4.st" "$TMP/fm-1.st" \
        && pass "Fashion-MNIST from each host's node-local disk on 2x2: the weights of 1 rank reading the shared copy" \
        || fail "Fashion-MNIST from node-local disks on 2x2: not the weights of 1 rank"
    # node2's copy stale (every pixel changed, the sizes the same): its
    # ranks would train on other samples than node1's; refused
    f=train-images-idx3-ubyte
    { head -c 16 "$TMP/fm/$f"; tail -c +17 "$TMP/fm/$f" | tr '\000-\377' '\001-\377\000'; } >"$TMP/$f"
    hosts_exec 2 cp "$TMP/$f" "$CDP_NODE_LOCAL/fm/$f"
    echo "node2's node-local copy stale (the same sizes, other pixels):"
    one_error 4 "data" $fmargs --data-dir "$CDP_NODE_LOCAL/fm"
    # node2's copy gone: rank 2 (node2's first) cannot open it; the line
    # names the path and the host
    hosts_exec 2 rm -r "$CDP_NODE_LOCAL/fm"
    echo "node2's node-local copy gone:"
    one_error 4 "node2.*$CDP_NODE_LOCAL/fm\|$CDP_NODE_LOCAL/fm.*node2" $fmargs --data-dir "$CDP_NODE_LOCAL/fm"
else
    fail "no Fashion-MNIST in $FM (the Debian package dataset-fashion-mnist)"
fi

# 4. checkpoints in a node-local directory: written on 2x2 after step 3,
# only on node1; resumed to step 6 on 3x1 and on 1 rank: the uninterrupted
# run's weights, training steps 4 to 6 only
for i in 1 2 3; do hosts_exec $i mkdir -p "$CDP_NODE_LOCAL/ck"; done
ck=$CDP_NODE_LOCAL/ck/c.st
ckargs="$common --rule cdp-v2 --quiet"
ON=node1:2,node2:2 run 4 ${ckargs/--steps 6/--steps 3} --checkpoint "$ck" >/dev/null || fail "checkpoint run on 2x2"
others=$(find "$(local_dir 2)/ck" "$(local_dir 3)/ck" -mindepth 1)
[ -s "$(local_dir 1)/ck/c.st" ] && [ -z "$others" ] \
    && pass "--checkpoint in the node-local directory: written on node1 (rank 0's host) only" \
    || fail "--checkpoint: node1 has $(ls -A "$(local_dir 1)/ck"), node2 and node3 $others"
for layout in "node1,node2,node3 3" "node1 1"; do
    set -- $layout
    rm -f "$TMP/x.json" "$TMP/r.st"
    ON=$1 run $2 $ckargs --resume "$ck" --save-weights "$TMP/r.st" --metrics "$TMP/x.json" >/dev/null \
        || fail "resume on $1"
    steps=$(field "$(tail -n 1 "$TMP/x.json" 2>/dev/null)" steps)
    cmp -s "$TMP/r.st" "$TMP/cdp-v2-1.st" && [ "$steps" = 3 ] \
        && pass "checkpoint of 2x2 resumed on $2 rank(s) ($1), steps 4-6: the uninterrupted run's weights" \
        || fail "checkpoint of 2x2 resumed on $1: $steps steps, $("$COMPARE" $M "$TMP/r.st" "$TMP/cdp-v2-1.st" 0 2>&1)"
done
# the checkpoint directory exists on node2 only: rank 0 (node1) cannot
# write there; one error naming the file, no file anywhere, and (as for
# --metrics and --trace, opened at the start) refused before training
hosts_exec 2 mkdir -p "$CDP_NODE_LOCAL/only2"
export ON=node1:2,node2:2
echo "checkpoint directory on node2 only:"
one_error 4 "$CDP_NODE_LOCAL/only2/c.st" ${ckargs/--quiet/} --checkpoint "$CDP_NODE_LOCAL/only2/c.st"
left=$(find "$(local_dir 2)/only2" -mindepth 1; ls -d "$(local_dir 1)/only2" "$(local_dir 3)/only2" 2>/dev/null)
[ -z "$left" ] && pass "checkpoint directory on node2 only: no file written anywhere" \
    || fail "checkpoint directory on node2 only: left $left"
grep -q "^epoch" "$TMP/one_error.out" \
    && fail "checkpoint directory on node2 only: refused only after training ($(grep '^epoch' "$TMP/one_error.out" | tail -n 1))" \
    || pass "checkpoint directory on node2 only: refused before training"

# 5. the banner: one line per host with its ranks
b="$TMP/banner-2x2.out"
n1=$(grep -c "^  host node1: ranks 0-1" "$b")
n2=$(grep -c "^  host node2: ranks 2-3" "$b")
nall=$(grep -c "^  host " "$b")
[ "$n1 $n2 $nall" = "1 1 2" ] \
    && pass "banner on 2x2: $(grep "^  host " "$b" | tr -s ' ' | tr '\n' ';')" \
    || fail "banner on 2x2: no single lines '  host node1: ranks 0-1' and '  host node2: ranks 2-3' ($n1, $n2, $nall host lines): $(grep -m 3 '^  ' "$b" | tr -s ' ')"

# 6. what a killed harness leaves
hs="${top_srcdir:-$(dirname "$0")/../..}/tests/lib/hosts.sh"
bash "$hs" --hosts 2 -- sleep 120 >"$TMP/killed.out" 2>&1 &
kpid=$!
for _ in $(seq 100); do
    [ "$(ip netns list | grep -c "^cdp$kpid-")" -ge 3 ] && break
    sleep 0.1
done
kill -KILL "$kpid"
wait "$kpid" 2>/dev/null
pkill -KILL -f "^sleep 120$" 2>/dev/null
left=$(ip netns list | grep -c "^cdp$kpid-")
[ "$left" -eq 3 ] && pass "a harness killed by SIGKILL leaves its 3 namespaces (cdp$kpid-*)" \
    || fail "the killed harness left $left namespaces cdp$kpid-*, not 3 (the check below means nothing)"
bash "$hs" --hosts 1 -- true >"$TMP/reap.out" 2>&1
rc=$?
after=$(ip netns list | grep -c "^cdp$kpid-")
mine=$(ip netns list | grep -c "^cdp$$-")
[ "$rc" -eq 0 ] && [ "$after" -eq 0 ] && [ "$mine" -ge 4 ] \
    && grep -q "removed 3 namespaces left by a run that was killed" "$TMP/reap.out" \
    && pass "the next harness removes them, saying so ($(grep removed "$TMP/reap.out")), and leaves this live run's $mine" \
    || fail "after the next harness (status $rc): $after of the killed run's namespaces left, $mine of this run's; it said: $(head -c 300 "$TMP/reap.out")"
finish
