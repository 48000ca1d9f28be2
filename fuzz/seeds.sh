#!/usr/bin/env bash
# Regenerates the committed seed corpus, fuzz/corpus/HARNESS/: small valid
# files (a checkpoint and weights of mlp:16-8-10 written by cdp_run on
# synthetic 1x4x4 data, IDX images and labels of a few samples, plain and
# gzip, a few CIFAR-10 records, JSON documents) and some malformed ones.
# Usage: fuzz/seeds.sh [BUILDDIR] (where cdp_run is built; default: the
# source tree).  The reproducers of past findings (fuzz/corpus/*/crash-*,
# fuzz/corpus/*/regress-*) are kept.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src}
C="$src/fuzz/corpus"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$C"/{json,safetensors,checkpoint,idx,cifar,modelfile}
find "$C" -type f ! -name 'crash-*' ! -name 'regress-*' -delete
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

common="--data synthetic:1x4x4:n=64:test=16 --model mlp:16-8-10 --steps 3 --batch 8 --quiet"
"$build/cdp_run" $common --checkpoint "$C/checkpoint/sgd.st" --save-weights "$C/safetensors/weights.st" \
    >/dev/null 2>&1
"$build/cdp_run" $common --optimizer adamw --checkpoint "$C/checkpoint/adamw.st" >/dev/null 2>&1
cp "$C/checkpoint/sgd.st" "$C/safetensors/checkpoint.st"

python3 - "$C" <<'PY'
import gzip, json, struct, sys, os
C = sys.argv[1]
def put(d, name, b):
    with open(os.path.join(C, d, name), "wb") as f:
        f.write(b)

# checkpoints and weights: a few malformed variants of the valid files
ck = open(os.path.join(C, "checkpoint", "sgd.st"), "rb").read()
n = struct.unpack("<Q", ck[:8])[0]
hdr = ck[8:8 + n]
put("checkpoint", "truncated.st", ck[:len(ck) // 2])
def rehdr(old, new):
    h = hdr.replace(old, new)
    return struct.pack("<Q", len(h)) + h + ck[8 + n:]
put("checkpoint", "version1.st", rehdr(b'"cdp_checkpoint":"2"', b'"cdp_checkpoint":"1"'))
put("checkpoint", "step-neg.st", rehdr(b'"step":"3"', b'"step":"-3"'))
put("checkpoint", "step-text.st", rehdr(b'"step":"3"', b'"step":"03"'))
flip = bytearray(ck); flip[-20] ^= 1
put("checkpoint", "bitflip.st", bytes(flip))
w = open(os.path.join(C, "safetensors", "weights.st"), "rb").read()
put("safetensors", "huge-hlen.st", struct.pack("<Q", 1 << 62) + w[8:])
put("safetensors", "short.st", w[:7])
n = struct.unpack("<Q", w[:8])[0]
h = json.loads(w[8:8 + n])
h["fc0.weight"]["data_offsets"] = [0, 1 << 40]
hb = json.dumps(h).encode()
put("safetensors", "offsets.st", struct.pack("<Q", len(hb)) + hb + w[8 + n:])
hb = b'{"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},"__metadata__":{"step":"1"}}'
put("safetensors", "generic.st", struct.pack("<Q", len(hb)) + hb + b"\1" + b"\0" * 7)
hb = b'{"a":{"dtype":"F32","shape":[0, 1, 2, 3, 4, 5, 6, 7],"data_offsets":[0,0]}}'
put("safetensors", "ndim8.st", struct.pack("<Q", len(hb)) + hb)

# JSON: the valid headers and some edge cases
put("json", "header.json", hdr)
for i, s in enumerate([b'{"a":[1,-2.5e3,true,false,null,"\\u00e9\\ud83d\\ude00"],"b":{}}',
                       b'[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]', b'"\\u0000"', b'01', b'1e999',
                       b'-9223372036854775808', b'9223372036854775808', b'{"a":1,}',
                       b'"\xc3\x28"', b'  {"k" : "v"}  ']):
    put("json", "doc%02d.json" % i, s)

# IDX: a 4-byte little-endian length of the images file, the images file,
# the labels file (fuzz/fuzz_idx.c)
def idx_pair(n, rows, cols, labels=None, gz=False):
    img = struct.pack(">IIII", 0x803, n, rows, cols) + bytes((i * 7) % 256 for i in range(n * rows * cols))
    lab = struct.pack(">II", 0x801, n) + bytes(labels if labels is not None else [i % 10 for i in range(n)])
    if gz:
        img = gzip.compress(img, mtime=0)
        lab = gzip.compress(lab, mtime=0)
    return struct.pack("<I", len(img)) + img + lab
put("idx", "plain.bin", idx_pair(3, 4, 5))
put("idx", "gzip.bin", idx_pair(4, 3, 3, gz=True))
put("idx", "one.bin", idx_pair(1, 1, 1))
put("idx", "label-range.bin", idx_pair(2, 2, 2, labels=[3, 10]))
good = idx_pair(3, 4, 5)
put("idx", "truncated.bin", good[:-3])
put("idx", "absurd.bin", struct.pack("<I", 16) + struct.pack(">IIII", 0x803, 0xffffffff, 0xffff, 0xffff)
    + struct.pack(">II", 0x801, 0xffffffff))

# CIFAR-10: a byte s (odd: two files, fuzz/fuzz_cifar.c), then the records
def rec(label, k):
    return bytes([label]) + bytes((k * 31 + i) % 256 for i in range(3072))
put("cifar", "one.bin", b"\0" + rec(3, 0))
put("cifar", "two-files.bin", b"\x81" + rec(1, 1) + rec(9, 2))
put("cifar", "bad-label.bin", b"\0" + rec(10, 3))
put("cifar", "partial.bin", b"\0" + rec(2, 4)[:1000])
PY

# model descriptions: each family as --print-model writes it, and some
# malformed ones (tests/cli/model_file_errors.sh has more)
M="$C/modelfile"
"$build/cdp_run" --model mlp:16-8-10 --print-model > "$M/mlp.json"
"$build/cdp_run" --model resnet20 --data synthetic:3x8x8 --print-model > "$M/resnet20.json"
"$build/cdp_run" --model mobile-tiny --data synthetic:3x8x8 --print-model > "$M/mobile.json"
"$build/cdp_run" --model vit:patch=4,dim=8,depth=1,heads=2,mlp=16 --data synthetic:3x8x8 \
    --print-model > "$M/vit.json"
sed 's/"in2": "t3"/"in2": "t9"/' "$M/resnet20.json" > "$M/cycle.json"
sed 's/"kernel_size": 3/"kernel_size": 30/' "$M/mobile.json" > "$M/kernel.json"
sed 's/"kind": "relu"}/"kind": "relu", "in": "input"}/' "$M/resnet20.json" > "$M/inplace.json"
head -c 700 "$M/resnet20.json" > "$M/truncated.json"
# images: a byte s (sizes and seed, fuzz/fuzz_image.c), then a JPEG or PNG
# file written by Pillow (/usr/bin/python3 has it with python3-pil), valid and
# cut short
mkdir -p "$C/image"
/usr/bin/python3 - "$C" <<'PY'
import io, os, sys
from PIL import Image
C = sys.argv[1]
def put(name, s, b):
    with open(os.path.join(C, "image", name), "wb") as f:
        f.write(bytes([s]) + b)
def enc(im, fmt, **kw):
    f = io.BytesIO()
    im.save(f, fmt, **kw)
    return f.getvalue()
rgb = Image.frombytes("RGB", (13, 9), bytes((i * 37) % 256 for i in range(13 * 9 * 3)))
files = {
    "rgb.jpg": enc(rgb, "JPEG", quality=80),
    "444.jpg": enc(rgb, "JPEG", quality=90, subsampling=0),
    "progressive.jpg": enc(rgb, "JPEG", progressive=True),
    "grey.jpg": enc(rgb.convert("L"), "JPEG"),
    "rgb.png": enc(rgb, "PNG"),
    "rgba.png": enc(rgb.convert("RGBA"), "PNG"),
    "palette.png": enc(rgb.convert("P", palette=Image.ADAPTIVE, colors=5), "PNG"),
    "bits1.png": enc(rgb.convert("1"), "PNG"),
}
for k, (name, b) in enumerate(sorted(files.items())):
    put(name + ".bin", 17 * k + 3, b)
    put(name + "-cut.bin", 5 * k, b[:len(b) * 3 // 4])
PY
ls -l "$C"/*
