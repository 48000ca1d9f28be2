# Bad input: one clear error line, a non-zero exit on every rank, no hang.
. "$(dirname "$0")/lib.sh"
check() {  # np expected-substring args...
    local np=$1 want=$2
    shift 2
    local out rc n
    out=$(timeout 60 "$MPIRUN" --oversubscribe -np "$np" "$CDP" "$@" 2>&1 >/dev/null)
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
printf 'not a weights file' > "$TMP/garbage.st"
run 1 --data synthetic --model mlp:784-16-10 --steps 1 --quiet --save-weights "$TMP/small.st" >/dev/null \
    || fail "could not write a weights file"
head -c 100 "$TMP/small.st" > "$TMP/truncated.st"
for np in 1 3; do
    check $np "--rule" --rule bogus
    check $np "--lr" --lr abc
    check $np "--steps" --steps -1
    check $np "unknown option" --frobnicate
    check $np "--model" --model mlp:784-x-10
    check $np "--stages" --model mlp:784-16-10 --stages 3
    check $np "dataset-fashion-mnist" --data-dir "$TMP/nowhere"
    check $np "garbage.st" --data synthetic --init-weights "$TMP/garbage.st"
    check $np "truncated.st" --data synthetic --model mlp:784-16-10 --init-weights "$TMP/truncated.st"
    check $np "shape" --data synthetic --model mlp:784-32-10 --init-weights "$TMP/small.st"
    check $np "missing.st" --data synthetic --init-weights "$TMP/missing.st"
    check $np "inputs" --model mlp:100-10
done
check 3 "fewer than the 3 ranks" --data synthetic --workers 2
# a value missing at the end of the line names the option (no control byte)
mkdir -p "$TMP/fifo" "$TMP/root/fashion-mnist"
mkfifo "$TMP/fifo/train-images-idx3-ubyte.gz"
: > "$TMP/fifo/train-labels-idx1-ubyte.gz"
for np in 1 3; do
    check $np "--epochs: the value is missing" --data synthetic --epochs
    # each data set has its own directory: mnist never reads fashion-mnist
    CDP_DATA_DIR="$TMP/root" check $np "root/mnist/train-images-idx3-ubyte" --data mnist
    # a FIFO in place of an IDX file: refused at once, not waited on
    check $np "FIFO" --data-dir "$TMP/fifo"
done
check 1 "--lr: the value is missing" --data synthetic --lr
check 1 "--data: the value is missing" --data
check 1 "--data-dir: the value is missing" --data-dir --data synthetic
check 1 "ossci-datasets" --data mnist --data-dir "$TMP/nowhere"
check 1 "nowhere/data_batch_1.bin: cannot open" --data cifar10 --data-dir "$TMP/nowhere"
check 1 "cifar-10-binary.tar.gz" --data cifar10 --data-dir "$TMP/nowhere"
check 1 "CxHxW" --data synthetic:3x32
check 1 "n=0" --data synthetic:1x28x28:n=0
check 1 "more than the 10 training samples" --data synthetic:n=10 --batch 8
check 1 "--augment" --augment crop=x
check 1 "--normalize" --normalize 0.5/0
check 1 "1 channel" --data synthetic --normalize 0.5,0.5/0.2,0.2
finish
