#!/usr/bin/python3
"""cdp's image decoding and transforms against PIL and torchvision.

On images written here with PIL (RGB JPEGs at 4:2:0 and 4:4:4, progressive,
greyscale; PNGs RGB, RGBA, palette, greyscale, 1-bit, gamma 1.0; sizes from
5 x 7 to 300 x 30,
so that RandomResizedCrop also takes its centre-crop fallback and upsamples),
tests/lib/image_probe gives cdp's results and this script compares them:

  decode   cdp's RGB bytes with Image.open(f).convert("RGB"):
           max |cdp - PIL| <= JPEG_TOL for JPEG, 0 for PNG
  val      Resize(R) + CenterCrop(S) with torchvision's on the PIL image:
           max |cdp - torchvision| <= VAL_TOL
  train    the RandomResizedCrop box: torchvision's get_params, fed cdp's
           own draws (torch.empty().uniform_ and torch.randint replaced by
           them), must give cdp's box; then the pixels: torchvision's
           resized_crop of that box, flipped when cdp flips, must equal
           cdp's sample within VAL_TOL

  layout   the training samples and labels of a folder with nested
           sub-folders, names that sort differently by bytes and by case,
           upper-case extensions, and files that are not images by name:
           cdp's order must be ImageFolder's

A negative control checks that the comparison can fail: torchvision's
Resize(R + 1) must differ from cdp's Resize(R) on some image.

Exits 0 when everything agrees, 1 otherwise, 77 without torch, torchvision
or PIL, 2 when the probe fails.

Usage: torch_image_folder.py --probe BUILDDIR/tests/lib/image_probe
"""
import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

try:
    import numpy as np
    import torch
    import torchvision.transforms as T
    import torchvision.transforms.functional as F
    from PIL import Image, ImageDraw
except ImportError as e:
    print("SKIP: %s" % e)
    sys.exit(77)

# libjpeg-turbo here and in PIL: the same library gives the same bytes; a
# PIL built on another libjpeg may round its IDCT differently by one
JPEG_TOL = 1
# the resampling is Pillow's fixed-point arithmetic, done the same way
VAL_TOL = 0
S, R = 32, 37      # (37 - 32) / 2 = 2.5: CenterCrop's half-to-even rounding


def make_images(d):
    rng = np.random.default_rng(7)
    out = []

    def base(w, h):
        a = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
        im = Image.fromarray(a, "RGB").resize((w, h))
        dr = ImageDraw.Draw(im)
        dr.ellipse([w // 5, h // 6, 4 * w // 5, 5 * h // 6], fill=(200, 40, 90))
        dr.line([0, 0, w - 1, h - 1], fill=(10, 250, 30), width=2)
        return im

    cases = [("rgb420.jpg", (64, 48), dict(quality=90)),
             ("rgb444.jpg", (50, 71), dict(quality=95, subsampling=0)),
             ("progressive.jpg", (81, 40), dict(quality=85, progressive=True)),
             ("wide.jpg", (300, 30), dict(quality=90)),
             ("tall.jpg", (30, 300), dict(quality=90)),
             ("tiny.jpg", (5, 7), dict(quality=90)),
             ("rgb.png", (45, 45), {}),
             ("odd.png", (33, 97), {})]
    for name, (w, h), kw in cases:
        p = os.path.join(d, name)
        base(w, h).save(p, **kw)
        out.append(p)
    p = os.path.join(d, "grey.jpg")
    base(40, 52).convert("L").save(p, quality=90)
    out.append(p)
    p = os.path.join(d, "rgba.png")
    im = base(39, 28).convert("RGBA")
    im.putalpha(Image.fromarray(rng.integers(0, 256, size=(28, 39), dtype=np.uint8), "L"))
    im.save(p)
    out.append(p)
    p = os.path.join(d, "palette.png")
    base(44, 30).convert("P", palette=Image.ADAPTIVE, colors=17).save(p)
    out.append(p)
    p = os.path.join(d, "grey.png")
    base(26, 31).convert("L").save(p)
    out.append(p)
    p = os.path.join(d, "bits1.png")
    base(29, 23).convert("1").save(p)
    out.append(p)
    # gAMA 1.0: PIL keeps the stored values (libpng's simplified reader would
    # convert them to sRGB)
    w, h = 34, 27
    a = np.asarray(base(w, h))
    raw = b"".join(b"\0" + a[y].tobytes() for y in range(h))

    def chunk(t, data):
        return (struct.pack(">I", len(data)) + t + data +
                struct.pack(">I", zlib.crc32(t + data) & 0xffffffff))
    p = os.path.join(d, "gamma.png")
    with open(p, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                chunk(b"gAMA", struct.pack(">I", 100000)) + chunk(b"IDAT", zlib.compress(raw)) +
                chunk(b"IEND", b""))
    out.append(p)
    return out


def probe(args):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL: %s: %s" % (" ".join(args), r.stderr.strip()))
        sys.exit(2)
    return r.stdout


def chw(pil):
    return np.asarray(pil.convert("RGB"), dtype=np.int16).transpose(2, 0, 1)


def read_bytes(path, shape):
    return np.fromfile(path, dtype=np.uint8).astype(np.int16).reshape(shape)


def torchvision_box(pil, draws):
    """torchvision's own get_params, its random draws replaced by cdp's."""
    calls = {"uniform": 0, "randint": 0}

    class Fake:
        def uniform_(self, lo, hi):
            t, k = divmod(calls["uniform"], 2)
            calls["uniform"] += 1
            v = draws[t][0] if k == 0 else draws[t][1]
            return torch.tensor([v], dtype=torch.float32)

    def fake_randint(low, high, size):
        t = calls["uniform"] // 2 - 1          # the attempt that fitted
        k = calls["randint"]
        calls["randint"] += 1
        return torch.tensor([int(draws[t][2 + k] % high)])

    saved = torch.empty, torch.randint
    torch.empty = lambda *a, **kw: Fake()
    torch.randint = fake_randint
    try:
        return T.RandomResizedCrop.get_params(pil, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0))
    finally:
        torch.empty, torch.randint = saved


def layout_check(probe_bin, tmp):
    """cdp's sample list against torchvision.datasets.ImageFolder's."""
    import torchvision.datasets as D
    root = os.path.join(tmp, "layout")
    files = ["train/B/x.jpg", "train/a/z.JPG", "train/a/a.b/y.jpg", "train/a/a/k.jpeg",
             "train/a/a-b.png", "train/a/a.png", "train/a/a/b/q.Png", "train/a/notes.txt",
             "train/a.b/m.jpg", "train/a_b/n.jpg", "train/a_b/sub/o.webp.jpg",
             "train/a_b/README", "val/B/v.jpg", "val/a/v.jpg", "val/a.b/v.jpg",
             "val/a_b/v.jpg"]
    im = Image.new("RGB", (6, 5), (10, 20, 30))
    for f in files:
        p = os.path.join(root, f)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        if f.endswith(("txt", "README")):
            open(p, "w").write("not an image\n")
        else:
            im.save(p, "PNG" if f.lower().endswith("png") else "JPEG")
    ref = [(lab, os.path.relpath(p, os.path.join(root, "train")))
           for p, lab in D.ImageFolder(os.path.join(root, "train")).samples]
    got = []
    for line in probe([probe_bin, "list", root]).splitlines():
        lab, path = line.split(" ", 1)
        got.append((int(lab), path))
    print("layout: %d samples, %d classes; ImageFolder's order: %s"
          % (len(ref), len({lab for lab, _ in ref}), " ".join(p for _, p in ref)))
    if got != ref:
        print("FAIL: cdp's samples %s differ from ImageFolder's" % got)
        return 1
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--probe", required=True)
    ap.add_argument("--keep")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="cdp_imgs.")
    bad = 0
    worst = {"decode-jpeg": 0, "decode-png": 0, "val": 0, "train": 0}
    control = 0
    boxes = fallback = flips = 0
    try:
        for path in make_images(tmp):
            name = os.path.basename(path)
            pil = Image.open(path)
            ref = np.asarray(pil.convert("RGB"), dtype=np.int16)
            out = os.path.join(tmp, "out.bin")
            w, h = map(int, probe([a.probe, "decode", path, out]).split()[1:3])
            got = read_bytes(out, (h, w, 3))
            kind = "decode-jpeg" if name.endswith(".jpg") else "decode-png"
            tol = JPEG_TOL if kind == "decode-jpeg" else 0
            d = int(np.abs(got - ref).max()) if got.shape == ref.shape else 999
            worst[kind] = max(worst[kind], d)
            print("%-16s decode   %dx%d  max|cdp-PIL| %d" % (name, w, h, d))
            if d > tol:
                print("FAIL: %s decode differs from PIL by %d (> %d)" % (name, d, tol))
                bad += 1

            rgb = pil.convert("RGB")
            probe([a.probe, "val", path, str(S), str(R), out])
            got = read_bytes(out, (3, S, S))
            ref = chw(T.CenterCrop(S)(T.Resize(R)(rgb)))
            d = int(np.abs(got - ref).max())
            worst["val"] = max(worst["val"], d)
            print("%-16s val      Resize(%d)+CenterCrop(%d)  max|cdp-torchvision| %d" % (name, R, S, d))
            if d > VAL_TOL:
                print("FAIL: %s val differs from torchvision by %d" % (name, d))
                bad += 1
            off = chw(T.CenterCrop(S)(T.Resize(R + 1)(rgb)))
            control = max(control, int(np.abs(got - off).max()))

            for epoch, index in ((0, 0), (0, 5), (1, 5), (3, 17)):
                txt = probe([a.probe, "train", path, str(S), "42", str(epoch), str(index), out])
                draws, box, flip = [], None, None
                for line in txt.splitlines():
                    f = line.split()
                    if f[0] == "draw":
                        draws.append((float(f[2]), float(f[3]), int(f[4]), int(f[5])))
                    elif f[0] == "box":
                        box = tuple(map(int, f[1:5]))
                    elif f[0] == "flip":
                        flip = int(f[1])
                tv = tuple(int(v) for v in torchvision_box(rgb, draws))
                boxes += 1
                fallback += all(not (0 < round((w * h * s * np.exp(np.float32(lr))) ** 0.5) <= w and
                                     0 < round((w * h * s / np.exp(np.float32(lr))) ** 0.5) <= h)
                                for s, lr, _, _ in draws)
                flips += flip
                if tv != box:
                    print("FAIL: %s epoch %d index %d: cdp box %s, torchvision %s"
                          % (name, epoch, index, box, tv))
                    bad += 1
                    continue
                ref_im = F.resized_crop(rgb, box[0], box[1], box[2], box[3], [S, S],
                                        T.InterpolationMode.BILINEAR)
                if flip:
                    ref_im = F.hflip(ref_im)
                got = read_bytes(out, (3, S, S))
                d = int(np.abs(got - chw(ref_im)).max())
                worst["train"] = max(worst["train"], d)
                if d > VAL_TOL:
                    print("FAIL: %s epoch %d index %d box %s flip %d: pixels differ from "
                          "torchvision by %d" % (name, epoch, index, box, flip, d))
                    bad += 1
        bad += layout_check(a.probe, tmp)
        print("train: %d boxes equal to torchvision's (%d by the centre-crop fallback), "
              "%d flipped" % (boxes - bad, fallback, flips))
        print("worst: " + ", ".join("%s %d" % kv for kv in worst.items()))
        if control == 0:
            print("FAIL: negative control: Resize(%d) matched cdp's Resize(%d) everywhere"
                  % (R + 1, R))
            bad += 1
        else:
            print("negative control: Resize(%d) differs from cdp's Resize(%d) by up to %d: ok"
                  % (R + 1, R, control))
        if fallback == 0:
            print("FAIL: no case took the centre-crop fallback")
            bad += 1
    finally:
        if a.keep:
            shutil.copytree(tmp, a.keep, dirs_exist_ok=True)
        shutil.rmtree(tmp)
    print("PASS" if bad == 0 else "FAIL: %d differences" % bad)
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
