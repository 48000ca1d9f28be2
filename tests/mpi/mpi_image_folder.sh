# --data folder:DIR on a folder of JPEG and PNG files written by
# examples/make_image_folder.py: cdp-v1 and cdp-v2 bitwise identical on 1, 2
# and 3 ranks, with 1 and 2 threads, decoded ahead on 1 to 3 threads or
# when taken, and equal to the serial reference
# (every sample's RandomResizedCrop and flip come from (seed, epoch, index),
# whoever decodes it); damaged files, a FIFO and a wrong layout are one error
# line naming the file; bad=skip leaves them out and says how many.
# Skips (77) without /usr/bin/python3 and Pillow (CDP_TORCH_PYTHON overrides).
. "$(dirname "$0")/../lib/lib.sh"
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
PY=${CDP_TORCH_PYTHON:-/usr/bin/python3}
"$PY" -c "import PIL" >/dev/null 2>&1 || { echo "SKIP: $PY cannot import PIL"; exit 77; }
"$CDP" --help 2>/dev/null | grep -q "folder:DIR" || { echo "FAIL: cdp_run --help lacks folder:DIR"; exit 1; }
IMG=$TMP/imgs
"$PY" "$top_srcdir/examples/make_image_folder.py" --out "$IMG" --classes 4 --train 24 --val 6 \
    --format mixed --min-side 12 --max-side 40 >/dev/null || { echo "FAIL: make_image_folder.py"; exit 1; }

M=mlp:768-32-16-4
common="--data folder:$IMG:size=16:resize=18 --model $M --stages 3 --workers 3 --batch 4 --steps 10 --quiet --eval-every 0 --lr 0.05 --momentum 0.9"
for rule in cdp-v1 cdp-v2; do
    out=$(run 1 $common --rule $rule --verify --save-weights "$TMP/$rule-1.st" 2>&1)
    if [ $? -eq 0 ] && echo "$out" | grep -q " 0 of .* differ bitwise"; then
        pass "folder $rule: 1 rank equals the serial reference bitwise"
    else
        fail "folder $rule --verify: $out"
    fi
    for np in 2 3; do
        run $np $common --rule $rule --save-weights "$TMP/$rule-$np.st" >/dev/null \
            || fail "folder $rule on $np ranks did not run"
        same $M "$TMP/$rule-$np.st" "$TMP/$rule-1.st" 0 "folder $rule: $np ranks bitwise equal to 1 rank"
    done
    run 1 $common --rule $rule --threads 2 --save-weights "$TMP/$rule-t2.st" >/dev/null \
        || fail "folder $rule with 2 threads did not run"
    same $M "$TMP/$rule-t2.st" "$TMP/$rule-1.st" 0 "folder $rule: 2 decoding threads bitwise equal to 1"
done
# decoding when taken (on the OpenMP threads) or on more threads further
# ahead: the same bits, on 1 and 3 ranks
for pf in prefetch=0 decoders=3:prefetch=5; do
    for np in 1 3; do
        run $np ${common/size=16/size=16:$pf} --rule cdp-v2 --threads 2 --save-weights "$TMP/$pf-$np.st" \
            >/dev/null || fail "folder $pf on $np ranks did not run"
        same $M "$TMP/$pf-$np.st" "$TMP/cdp-v2-1.st" 0 "folder $pf, $np ranks x 2 threads: bitwise equal to the default"
    done
done
out=$(run_summary 2 $common --rule cdp-v2)
w=$(echo "$out" | sed -n 's/.*"data_wait_s": \([0-9.e-]*\).*/\1/p')
if [ -n "$w" ]; then
    pass "--metrics summary: data_wait_s $w"
else
    fail "--metrics summary lacks data_wait_s: $out"
fi
# a checkpoint of the default resumes with other decoding settings (they
# change no bit, so they are not in the options a resume checks)
run 1 ${common/--steps 10/--steps 6} --rule cdp-v2 --checkpoint "$TMP/ck.st" >/dev/null || fail "folder: --checkpoint"
run 1 ${common/size=16/size=16:prefetch=0} --rule cdp-v2 --checkpoint "$TMP/ck.st" --resume "$TMP/ck.st" \
    --save-weights "$TMP/resumed.st" >/dev/null || fail "folder: --resume with prefetch=0 refused"
same $M "$TMP/resumed.st" "$TMP/cdp-v2-1.st" 0 "folder: 6 steps, resumed with prefetch=0 to 10: bitwise the 10-step run"
# the draws must matter: another seed gives other crops (and weights)
run 1 $common --rule cdp-v2 --seed 7 --save-weights "$TMP/seed7.st" >/dev/null || fail "--seed 7"
differ $M "$TMP/seed7.st" "$TMP/cdp-v2-1.st" "folder: another --seed"
out=$(run 1 ${common/--quiet/} --rule cdp-v2 --steps 1 2>&1)
if echo "$out" | grep -q "data folder: 96 train, 24 test" && echo "$out" | grep -q "4 classes" &&
   echo "$out" | grep -q "decoding on 1 thread, 2 steps ahead"; then
    pass "banner: $(echo "$out" | grep "folder:" | tr '\n' ' ')"
else
    fail "banner lacks the folder's counts, classes or decoding threads: $out"
fi

# damaged files: one line naming the file, exit 1
bad() {   # bad NAME: a copy of the folder as $TMP/NAME
    rm -rf "$TMP/$1"
    cp -r "$IMG" "$TMP/$1"
}
short="--model $M --stages 3 --workers 3 --batch 4 --steps 3 --quiet --eval-every 0"
bad garbage; printf 'not an image at all' > "$TMP/garbage/train/class01/zz.jpg"
one_error 1 "garbage/train/class01/zz.jpg: not an image" --data "folder:$TMP/garbage:size=16" $short
bad empty; : > "$TMP/empty/val/class02/empty.PNG"
one_error 2 "empty/val/class02/empty.PNG: empty file" --data "folder:$TMP/empty:size=16" $short
bad header; head -c 100 "$IMG/train/class00/00000.jpg" > "$TMP/header/train/class00/00000.jpg"
one_error 1 "header/train/class00/00000.jpg: corrupt JPEG" --data "folder:$TMP/header:size=16" $short
bad fifo; mkfifo "$TMP/fifo/train/class03/pipe.jpg"
one_error 1 "fifo/train/class03/pipe.jpg: not a regular file" --data "folder:$TMP/fifo:size=16" $short
# header intact, scan cut: found when the sample is first decoded
bad cut; f=$TMP/cut/train/class00/00000.jpg
"$PY" -c "import sys, random
from PIL import Image
r = random.Random(3)
Image.frombytes('RGB', (120, 90), bytes(r.getrandbits(8) for _ in range(120 * 90 * 3))).save(sys.argv[1], quality=95)" "$TMP/big.jpg"
head -c $(($(stat -c %s "$TMP/big.jpg") / 2)) "$TMP/big.jpg" > "$f"
one_error 1 "cut/train/class00/00000.jpg: corrupt or truncated JPEG" --data "folder:$TMP/cut:size=16" $short --steps 30 --no-shuffle
# bad=skip: every file decoded when opening, the damaged ones left out and counted
out=$(run 1 --data "folder:$TMP/cut:size=16:bad=skip" ${short/--quiet/} 2>&1)
if [ $? -eq 0 ] && echo "$out" | grep -q "data folder: 95 train" &&
   echo "$out" | grep -q "1 damaged file left out"; then
    pass "bad=skip: $(echo "$out" | grep "left out")"
else
    fail "bad=skip did not leave the cut file out: $out"
fi
# a header past the first 16 KiB read when opening (a 40 kB ICC profile):
# the whole file is read then, and it trains
bad icc; "$PY" -c "import os, sys
from PIL import Image
Image.new('RGB', (30, 20), (9, 99, 199)).save(sys.argv[1], icc_profile=os.urandom(40000))" \
    "$TMP/icc/train/class00/00000.jpg"
if out=$(run 1 --data "folder:$TMP/icc:size=16" $short --no-shuffle 2>&1); then
    pass "a JPEG whose header ends past 16 KiB opens and trains"
else
    fail "a JPEG with a 40 kB ICC profile: $out"
fi
bad noval; rm -r "$TMP/noval/val"
one_error 1 "noval/val: No such file" --data "folder:$TMP/noval:size=16" $short
bad classes; mv "$TMP/classes/val/class03" "$TMP/classes/val/other"
one_error 1 "classes/val: 4 class folders" --data "folder:$TMP/classes:size=16" $short
bad emptyclass; rm "$TMP/emptyclass/train/class02/"*; touch "$TMP/emptyclass/train/class02/notes.txt"
one_error 1 "emptyclass/train/class02: no image files" --data "folder:$TMP/emptyclass:size=16" $short
one_error 1 "size=0" --data "folder:$IMG:size=0" $short
one_error 1 "resize=8 is smaller than size=16" --data "folder:$IMG:size=16:resize=8" $short
one_error 1 "drop --augment" --data "folder:$IMG:size=16" --augment flip $short
one_error 1 "drop --data-dir" --data "folder:$IMG:size=16" --data-dir "$IMG" $short
out=$("$CDP" --plan --data "folder:$IMG:size=40" --model resnet18 --workers 2 --stages 2 2>&1)
if echo "$out" | grep -q "input 3x40x40"; then
    pass "--plan takes the folder's image shape: $(echo "$out" | grep "input")"
else
    fail "--plan on a folder: $out"
fi
finish
