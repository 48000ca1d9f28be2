#!/bin/sh
# What an output path names decides how it is written (src/io/output.h),
# and every write is checked.
#  - A character device or a FIFO is written in place: --save-weights and
#    --checkpoint wrote PATH.tmp.PID and renamed it onto PATH, so a device
#    node (as root: /dev/null itself) became a regular file.  Device nodes
#    here are mknod'ed in $TMP, never the system's.
#  - A directory or a block device is refused before training.
#  - A full disk is an error naming the file: --metrics exited 0 with an
#    empty file.  A copy of /dev/full (c 1 7) fails every write with
#    ENOSPC; a 1 MiB tmpfs, filled up, is a real full file system.
. "$(dirname "$0")/../lib/lib.sh"
common="--data synthetic --steps 70 --eval-every 0 --quiet"

# node PATH: "TYPE MAJOR MINOR" of PATH
node() {
    stat -c '%F %t %T' "$1" 2>/dev/null
}

mknod "$TMP/null" c 1 3 && mknod "$TMP/full" c 1 7 && mkfifo "$TMP/fifo" ||
    { echo "SKIP: mknod/mkfifo failed (not root?)"; exit 77; }
want_null=$(node "$TMP/null")
want_full=$(node "$TMP/full")

# --- devices, written in place
run 1 $common --save-weights "$TMP/w.st" >/dev/null || fail "a plain --save-weights run failed"
if run 2 $common --save-weights "$TMP/null" --checkpoint "$TMP/null" --metrics "$TMP/null" \
    --trace "$TMP/null" >/dev/null; then
    pass "every output on a character device (a copy of /dev/null): the run succeeds"
else
    fail "outputs on a copy of /dev/null: the run failed"
fi
[ "$(node "$TMP/null")" = "$want_null" ] && pass "the device is still $want_null" ||
    fail "the device became: $(node "$TMP/null") (was $want_null)"
left=$(ls "$TMP" | grep '\.tmp\.' | tr '\n' ' ')
[ -z "$left" ] && pass "no temporary files left" || fail "temporary files left: $left"

# --- a FIFO: a reader gets the very bytes of a regular --save-weights
timeout 120 cat "$TMP/fifo" > "$TMP/from_fifo" &
reader=$!
run 1 $common --save-weights "$TMP/fifo" >/dev/null || fail "--save-weights on a FIFO failed"
for _ in $(seq 100); do
    kill -0 $reader 2>/dev/null || break
    sleep 0.1
done
if kill -0 $reader 2>/dev/null; then
    kill $reader
    fail "the FIFO's reader got no end of file (the FIFO was replaced?)"
fi
wait $reader 2>/dev/null
[ "$(node "$TMP/fifo")" = "fifo 0 0" ] && pass "the FIFO is still a FIFO" ||
    fail "the FIFO became: $(node "$TMP/fifo")"
cmp -s "$TMP/from_fifo" "$TMP/w.st" && pass "the FIFO's reader got the bytes of --save-weights FILE" ||
    fail "the FIFO's bytes differ from --save-weights FILE ($(wc -c < "$TMP/from_fifo") bytes)"

# --- refused before training: what cannot be written in place or replaced
mkdir "$TMP/dir"
one_error 1 "save-weights $TMP/dir: it is a directory" $common --save-weights "$TMP/dir"
one_error 1 "trace $TMP/dir: it is a directory" $common --trace "$TMP/dir"
if mknod "$TMP/blk" b 7 200 2>/dev/null; then
    one_error 1 "checkpoint $TMP/blk: it is a block device" $common --checkpoint "$TMP/blk"
    [ "$(stat -c %F "$TMP/blk")" = "block special file" ] && pass "the block device is left alone" ||
        fail "the block device became: $(stat -c %F "$TMP/blk")"
fi

# a directory that does not exist: refused at start, not after the training
# whose result it was to hold (100000 steps would outlast one_error's 60 s)
for o in --save-weights --checkpoint; do
    one_error 2 "$o $TMP/absent/w.st: the directory $TMP/absent cannot take it" \
        --data synthetic --steps 100000 --eval-every 0 $o "$TMP/absent/w.st"
    grep -q "^epoch" "$TMP/one_error.out" && fail "$o into a missing directory: refused only after training" \
        || pass "$o into a missing directory: refused before any step"
done

# --- writes that fail: a copy of /dev/full
for o in --save-weights --checkpoint --metrics --trace; do
    one_error 2 "$TMP/full.*No space left on device" $common $o "$TMP/full"
done
[ "$(node "$TMP/full")" = "$want_full" ] && pass "the copy of /dev/full is still $want_full" ||
    fail "the copy of /dev/full became: $(node "$TMP/full")"

# --- a real full file system: a 1 MiB tmpfs in a mount namespace of its
# own (nothing leaks), filled up; a checkpoint written before is kept
mkdir "$TMP/fs"
cat > "$TMP/full_fs.sh" <<'INNER'
mount -t tmpfs -o size=1m tmpfs "$FS" || exit 77
ck="--model mlp:784-16-10 --data synthetic --eval-every 0 --quiet"
timeout 300 "$MPIRUN" --oversubscribe -np 1 "$CDP" $ck --steps 10 --checkpoint "$FS/c.st" >/dev/null || exit 78
cp "$FS/c.st" "$OUT/c.before"
dd if=/dev/zero of="$FS/fill" bs=4k 2>/dev/null
for o in checkpoint save-weights metrics trace; do
    timeout 300 "$MPIRUN" --oversubscribe -np 2 "$CDP" $ck --steps 20 --$o "$FS/$o.out" \
        >/dev/null 2>"$OUT/$o.err"
    echo $? > "$OUT/$o.rc"
done
timeout 300 "$MPIRUN" --oversubscribe -np 2 "$CDP" $ck --steps 20 --checkpoint "$FS/c.st" \
    >/dev/null 2>"$OUT/again.err"
echo $? > "$OUT/again.rc"
cp "$FS/c.st" "$OUT/c.after"
ls "$FS" > "$OUT/ls"
INNER
mkdir "$TMP/out"
FS="$TMP/fs" OUT="$TMP/out" CDP="$CDP" MPIRUN="$MPIRUN" \
    unshare --mount --propagation private sh "$TMP/full_fs.sh"
st=$?
if [ $st -eq 77 ]; then
    echo "skip: a full file system (mount -t tmpfs in unshare --mount failed)"
elif [ $st -eq 78 ]; then
    fail "full file system: the first checkpoint could not be written"
else
    for o in checkpoint save-weights metrics trace; do
        n=$(grep -c '^cdp_run: error:' "$TMP/out/$o.err")
        if [ "$(cat "$TMP/out/$o.rc")" != 0 ] && [ "$n" -eq 1 ] &&
            grep -q "$o.out.*No space left on device" "$TMP/out/$o.err"; then
            pass "full file system, --$o: $(grep '^cdp_run: error:' "$TMP/out/$o.err")"
        else
            fail "full file system, --$o: status $(cat "$TMP/out/$o.rc"): $(cat "$TMP/out/$o.err")"
        fi
    done
    if [ "$(cat "$TMP/out/again.rc")" != 0 ] && cmp -s "$TMP/out/c.before" "$TMP/out/c.after"; then
        pass "full file system: the previous checkpoint is intact"
    else
        fail "full file system: the previous checkpoint changed (status $(cat "$TMP/out/again.rc"))"
    fi
    left=$(grep '\.tmp\.' "$TMP/out/ls" | tr '\n' ' ')
    [ -z "$left" ] && pass "full file system: no temporary files left" ||
        fail "full file system: temporary files left: $left"
fi

finish
