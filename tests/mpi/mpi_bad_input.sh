# Bad input: one clear error line, a non-zero exit on every rank, no hang;
# outputs that would overwrite each other are refused before any is written.
. "$(dirname "$0")/../lib/lib.sh"
printf 'not a weights file' > "$TMP/garbage.st"
run 1 --data synthetic --model mlp:784-16-10 --steps 1 --quiet --save-weights "$TMP/small.st" >/dev/null \
    || fail "could not write a weights file"
head -c 100 "$TMP/small.st" > "$TMP/truncated.st"
for np in 1 3; do
    one_error $np "--rule" --rule bogus
    one_error $np "--lr" --lr abc
    one_error $np "--steps" --steps -1
    one_error $np "unknown option" --frobnicate
    one_error $np "--model" --model mlp:784-x-10
    one_error $np "--stages" --model mlp:784-16-10 --stages 3
    one_error $np "dataset-fashion-mnist" --data-dir "$TMP/nowhere"
    one_error $np "garbage.st" --data synthetic --init-weights "$TMP/garbage.st"
    one_error $np "truncated.st" --data synthetic --model mlp:784-16-10 --init-weights "$TMP/truncated.st"
    one_error $np "shape" --data synthetic --model mlp:784-32-10 --init-weights "$TMP/small.st"
    one_error $np "missing.st" --data synthetic --init-weights "$TMP/missing.st"
    one_error $np "inputs" --model mlp:100-10
    one_error $np "--flush-denormals sets the CPU's" --data synthetic --backend cuda --flush-denormals
done
one_error 3 "fewer than the 3 ranks" --data synthetic --workers 2
# over the layer limit: the count and the limit, not the spec cut short
# mid-width; a spec past the option's length: its length and the limit
many="mlp:784$(for i in $(seq 70); do printf -- '-16'; done)-10"
one_error 1 "--model: mlp: with 71 layers (72 widths), at most 64 layers$" --model "$many" --data synthetic
one_error 1 "--model: value of 277 characters, at most 255$" --model "$many-10-10-10-10-10-10-10-10-10-10-10-10-10-10-10-10-10-10-10" --data synthetic
# a value missing at the end of the line names the option (no control byte)
mkdir -p "$TMP/fifo" "$TMP/root/fashion-mnist"
mkfifo "$TMP/fifo/train-images-idx3-ubyte.gz"
: > "$TMP/fifo/train-labels-idx1-ubyte.gz"
for np in 1 3; do
    one_error $np "--epochs: the value is missing" --data synthetic --epochs
    # each data set has its own directory: mnist never reads fashion-mnist
    CDP_DATA_DIR="$TMP/root" one_error $np "root/mnist/train-images-idx3-ubyte" --data mnist
    # a FIFO in place of an IDX file: refused at once, not waited on
    one_error $np "FIFO" --data-dir "$TMP/fifo"
done
one_error 1 "--lr: the value is missing" --data synthetic --lr
one_error 1 "--data: the value is missing" --data
one_error 1 "--balance: the value is missing" --data synthetic --balance
one_error 1 "--balance: expected flops or activations" --data synthetic --balance memory
one_error 1 "--data-dir: the value is missing" --data-dir --data synthetic
one_error 1 "ossci-datasets" --data mnist --data-dir "$TMP/nowhere"
one_error 1 "nowhere/data_batch_1.bin: cannot open" --data cifar10 --data-dir "$TMP/nowhere"
one_error 1 "cifar-10-binary.tar.gz" --data cifar10 --data-dir "$TMP/nowhere"
one_error 1 "CxHxW" --data synthetic:3x32
one_error 1 "n=0" --data synthetic:1x28x28:n=0
one_error 1 "more than the 10 training samples" --data synthetic:n=10 --batch 8
one_error 1 "--augment" --augment crop=x
one_error 1 "--normalize" --normalize 0.5/0
one_error 1 "1 channel" --data synthetic --normalize 0.5,0.5/0.2,0.2
# two outputs naming the same file (any spelling): refused before anything
# is written; an output equal to an input (--checkpoint F --resume F) is fine
mkdir -p "$TMP/out"
ln -s "$TMP/out" "$TMP/outlink"
: > "$TMP/out/real.json"
ln -s real.json "$TMP/out/alias.json"
ln -s target.json "$TMP/out/dangling.json"
short="--data synthetic --model mlp:784-16-10 --workers 4 --batch 8 --steps 2 --quiet"
for np in 1 3; do
    one_error $np "--checkpoint $TMP/out/w.st and --save-weights $TMP/out/w.st name the same file" \
        $short --checkpoint "$TMP/out/w.st" --save-weights "$TMP/out/w.st"
    one_error $np "--metrics $TMP/out/x.json and --trace $TMP/out/x.json name the same file" \
        $short --metrics "$TMP/out/x.json" --trace "$TMP/out/x.json"
    one_error $np "name the same file" $short --save-weights "$TMP/out/w.st" --trace "$TMP/out/./w.st"
    one_error $np "name the same file" $short --metrics "$TMP/out/m.json" --checkpoint "$TMP/outlink/m.json"
    one_error $np "name the same file" $short --metrics "$TMP/out/real.json" --trace "$TMP/out/alias.json"
    one_error $np "name the same file" $short --checkpoint "$TMP/out/dangling.json" --metrics "$TMP/out/target.json"
    one_error $np "name the same file" $short --save-weights "$TMP/out/../out/s.st" --metrics "$TMP/out/a.json" \
        --trace "$TMP/out/b.json" --checkpoint "$TMP/outlink/s.st"
    (failures=0; cd "$TMP/out" && one_error $np "--metrics rel.json and --trace $TMP/out/rel.json name the same file" \
        $short --metrics rel.json --trace "$TMP/out/rel.json"; [ $failures -eq 0 ]) || failures=$((failures + 1))
done
left=$(cd "$TMP/out" && ls | grep -v -x -e real.json -e alias.json -e dangling.json)
[ -z "$left" ] && [ ! -s "$TMP/out/real.json" ] && pass "refused outputs: nothing written" \
    || fail "refused outputs wrote: $left"
for np in 1 2; do
    run $np $short --checkpoint "$TMP/out/c$np.st" >/dev/null 2>&1 || fail "np=$np: checkpoint run"
    if out=$(run $np $short --steps 4 --checkpoint "$TMP/out/c$np.st" --resume "$TMP/out/c$np.st" \
             --metrics /dev/null --trace /dev/null 2>&1 >/dev/null); then
        pass "np=$np: --checkpoint F --resume F, and /dev/null named twice, are accepted"
    else
        fail "np=$np: --checkpoint F --resume F or /dev/null twice refused: $out"
    fi
done
# out of memory: one error line saying how many bytes, an exit status, no
# abort backtrace (the address space is capped so that the numbers are the
# same everywhere)
# (not under AddressSanitizer, .ci/sanitize: its shadow memory does not fit
# under ulimit -v)
set -- "--model mlp:784-16384-16384-10 --batch 2048|out of memory: 5.63 GB for 5 host copies" \
       "--model mlp:784-8192-8192-10 --batch 8192|out of cpu memory: "
if [ -n "${CDP_TEST_SANITIZED:-}" ]; then
    pass "out of memory: skipped under the sanitizers (ulimit -v)"
    set --
fi
for args in "$@"; do
    want=${args#*|}
    out=$( (ulimit -v 3000000; timeout 60 "$CDP" --data synthetic --steps 1 --eval-every 0 ${args%%|*}) 2>&1)
    rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && echo "$out" | grep -q "^cdp_run: error: $want" &&
       ! echo "$out" | grep -q "Aborted\|backtrace\|\[ 0\]"; then
        pass "out of memory (${args%%|*}): $(echo "$out" | grep '^cdp_run: error')"
    else
        fail "out of memory (${args%%|*}): rc=$rc $(echo "$out" | head -3)"
    fi
done
finish
