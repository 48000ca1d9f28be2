# --model FILE.json: each built-in family printed with --print-model and
# read back trains to the same bits as the built-in model on 2 ranks (the
# weight files' sha256, whose headers list every tensor's name and
# shape), and prints back as the same description.  Two ranks that read
# different contents under the same path (started in different
# directories) are refused with one line; the same contents train.
. "$(dirname "$0")/../lib/lib.sh"
ARGS="--steps 3 --batch 4 --eval-every 0 --quiet --threads 1"

for m in mlp:784-64-10 resnet20 vit-tiny mobile-tiny; do
    f="$TMP/$(echo "$m" | tr ':' '_').json"
    case $m in mlp:*) data=synthetic ;; *) data=synthetic:3x32x32 ;; esac
    if ! run 1 --model "$m" --data "$data" --print-model > "$f" 2> "$TMP/err"; then
        fail "$m: --print-model: $(cat "$TMP/err")"
        continue
    fi
    run 1 --model "$f" --data "$data" --print-model > "$f.again" 2> "$TMP/err"
    # the same description but for its line 4, the name (the --model given)
    if [ "$(grep -c '"kind"' "$f")" -gt 0 ] && cmp -s <(sed 4d "$f") <(sed 4d "$f.again"); then
        pass "$m: the file prints back as the same description ($(grep -c '"kind"' "$f") layers)"
    else
        fail "$m: printed back differently: $(diff "$f" "$f.again" | head -5)"
    fi
    run 2 --model "$m" --data "$data" $ARGS --save-weights "$TMP/builtin.st" > /dev/null 2>&1
    run 2 --model "$f" --data "$data" $ARGS --save-weights "$TMP/file.st" > /dev/null 2>&1
    a=$(sha256sum < "$TMP/builtin.st" 2>/dev/null | cut -c1-16)
    b=$(sha256sum < "$TMP/file.st" 2>/dev/null | cut -c1-16)
    if [ -s "$TMP/builtin.st" ] && [ "$a" = "$b" ]; then
        pass "$m: 2 ranks, the built-in and the file's weights are identical (sha256 $a)"
    else
        fail "$m: the built-in's weights ($a) and the file's ($b) differ"
    fi
    rm -f "$TMP/builtin.st" "$TMP/file.st"
done

# the ranks agree on the file's contents, not only on its path: rank 0 in
# a/ and rank 1 in b/ both read "m.json"
mkdir -p "$TMP/a" "$TMP/b"
run 1 --model mlp:784-64-10 --data synthetic --print-model > "$TMP/a/m.json"
run 1 --model mlp:784-32-10 --data synthetic --print-model > "$TMP/b/m.json"
two_dirs() {
    timeout 60 "$MPIRUN" --oversubscribe -np 1 --wdir "$TMP/a" "$CDP" --model m.json \
        --data synthetic $ARGS : -np 1 --wdir "$TMP/b" "$CDP" --model m.json --data synthetic $ARGS
}
out=$(two_dirs 2>&1 >/dev/null)
rc=$?
n=$(printf '%s\n' "$out" | grep -c '^cdp_run: error:')
want="cdp_run: error: --model m.json: rank 1 reads another file under this path than rank 0 (their contents differ); every rank needs the same model file"
line=$(printf '%s\n' "$out" | grep '^cdp_run: error:')
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$n" -eq 1 ] && [ "$line" = "$want" ]; then
    pass "two files under one path: status $rc, $line"
else
    fail "two files under one path: status $rc, $n error lines: $out"
fi
cp "$TMP/a/m.json" "$TMP/b/m.json"
if out=$(two_dirs 2>&1); then
    pass "the same contents in both directories: trained"
else
    fail "the same contents in both directories: $out"
fi
finish
