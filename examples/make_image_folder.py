#!/usr/bin/env python3
"""Writes a folder of image files in torchvision's ImageFolder layout,
DIR/train/CLASS/NNNNN.jpg and DIR/val/CLASS/NNNNN.jpg, for cdp_run
--data folder:DIR (and for torchvision.datasets.ImageFolder).

Two sources:
  synthetic       class-dependent coloured shapes on noise, of random sizes
                  and aspect ratios (learnable; exercises the resizing)
  fashion-mnist   the Fashion-MNIST IDX files of --idx-dir, as greyscale
                  images of 28 x 28 (the class folders are 0_t-shirt ...)

Needs Pillow (Debian: python3-pil).  Deterministic for a given --seed.

  make_image_folder.py --out /tmp/imgs --classes 4 --train 64 --val 16
"""
import argparse
import gzip
import os
import random
import struct
import sys

FASHION = ["t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt",
           "sneaker", "bag", "ankle-boot"]


def synthetic_image(rng, label, classes, min_side, max_side):
    from PIL import Image, ImageDraw
    w = rng.randint(min_side, max_side)
    h = rng.randint(min_side, max_side)
    noise = bytes(rng.getrandbits(8) // 4 for _ in range(w * h * 3))
    im = Image.frombytes("RGB", (w, h), noise)
    d = ImageDraw.Draw(im)
    hue = int(255 * label / max(classes, 1))
    colour = (hue, 255 - hue, (hue * 7) % 256)
    # the class is the colour and the number of stripes; the place varies
    stripes = 1 + label % 4
    x0, y0 = rng.randint(0, w // 4), rng.randint(0, h // 4)
    x1, y1 = w - 1 - rng.randint(0, w // 4), h - 1 - rng.randint(0, h // 4)
    for s in range(stripes):
        ya = y0 + (y1 - y0) * (2 * s) // (2 * stripes)
        yb = y0 + (y1 - y0) * (2 * s + 1) // (2 * stripes)
        d.rectangle([x0, ya, x1, yb], fill=colour)
    return im


def read_idx(path, magic):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rb") as f:
        data = f.read()
    m, n = struct.unpack(">II", data[:8])
    if m != magic:
        sys.exit("%s: not an IDX file" % path)
    if magic == 0x803:
        rows, cols = struct.unpack(">II", data[8:16])
        return n, rows, cols, data[16:]
    return n, data[8:]


def idx_file(d, name):
    for p in (os.path.join(d, name + ".gz"), os.path.join(d, name)):
        if os.path.exists(p):
            return p
    sys.exit("%s: no %s(.gz)" % (d, name))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="the folder to write (made if missing)")
    ap.add_argument("--source", choices=["synthetic", "fashion-mnist"], default="synthetic")
    ap.add_argument("--idx-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--classes", type=int, default=4, help="synthetic: class count")
    ap.add_argument("--train", type=int, default=64, help="training images per class")
    ap.add_argument("--val", type=int, default=16, help="validation images per class")
    ap.add_argument("--min-side", type=int, default=24)
    ap.add_argument("--max-side", type=int, default=80)
    ap.add_argument("--format", choices=["jpg", "png", "mixed"], default="jpg",
                    help="mixed: every third image a PNG")
    ap.add_argument("--quality", type=int, default=90)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    try:
        import PIL  # noqa: F401
    except ImportError:
        sys.exit("make_image_folder.py: needs Pillow (Debian: python3-pil)")
    from PIL import Image
    rng = random.Random(a.seed)

    def save(im, split, cls, k):
        d = os.path.join(a.out, split, cls)
        os.makedirs(d, exist_ok=True)
        png = a.format == "png" or (a.format == "mixed" and k % 3 == 2)
        path = os.path.join(d, "%05d.%s" % (k, "png" if png else "jpg"))
        if png:
            im.save(path, "PNG")
        else:
            im.save(path, "JPEG", quality=a.quality)

    if a.source == "synthetic":
        names = ["class%02d" % c for c in range(a.classes)]
        for split, per in (("train", a.train), ("val", a.val)):
            for c, name in enumerate(names):
                for k in range(per):
                    save(synthetic_image(rng, c, a.classes, a.min_side, a.max_side), split, name, k)
        return
    for split, stem, per in (("train", "train", a.train), ("val", "t10k", a.val)):
        n, rows, cols, px = read_idx(idx_file(a.idx_dir, stem + "-images-idx3-ubyte"), 0x803)
        _, labels = read_idx(idx_file(a.idx_dir, stem + "-labels-idx1-ubyte"), 0x801)
        count = [0] * 10
        for i in range(n):
            c = labels[i]
            if count[c] >= per:
                continue
            im = Image.frombytes("L", (cols, rows), px[i * rows * cols:(i + 1) * rows * cols])
            save(im, split, "%d_%s" % (c, FASHION[c]), count[c])
            count[c] += 1
            if min(count) >= per:
                break


if __name__ == "__main__":
    main()
