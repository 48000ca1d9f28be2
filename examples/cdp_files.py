"""cdp's files and model names as PyTorch sees them, with numpy and torch
only (no safetensors package): weight files and checkpoints (safetensors),
Fashion-MNIST's IDX files, and the ViT names of --model.  Installed beside
the examples, which import it; the PyTorch references of the tests
(tests/torch/torch_reference.py, tests/torch/torch_model_reference.py) and bench/'s
PyTorch contestants import it from the source tree's examples/, so that
every Python reader of a cdp file is this one, strict one: a file that
does not hold together is a ValueError naming the file."""
import gzip
import json
import os
import struct

import numpy as np
import torch

_DT = {"F64": np.float64, "F32": np.float32, "F16": np.float16,
       "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
       "U8": np.uint8}
_DT_NAME = {torch.float64: "F64", torch.float32: "F32", torch.int64: "I64",
            torch.int32: "I32"}


def st_read(path):
    """name -> tensor in the file's own dtype, in file order."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: too short for safetensors")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError(f"{path}: header length {n} beyond the end of the file")
    try:
        header = json.loads(raw[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: bad safetensors header: {e}") from e
    if not isinstance(header, dict):
        raise ValueError(f"{path}: bad safetensors header: not an object")
    base = 8 + n
    out = {}
    items = []
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        try:
            dt = _DT.get(meta.get("dtype"))
            a, b = (int(v) for v in meta["data_offsets"])
            shape = [int(d) for d in meta["shape"]]
        except (AttributeError, KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{path}: {name}: bad header entry {meta!r:.80}") from e
        if dt is None:
            raise ValueError(f"{path}: {name}: unsupported dtype {meta.get('dtype')}")
        items.append((a, b, name, np.dtype(dt).newbyteorder("<"), shape))
    for a, b, name, dt, shape in sorted(items):
        count = int(np.prod(shape)) if shape else 1
        if min(shape, default=0) < 0 or a < 0 or b - a != count * dt.itemsize or base + b > len(raw):
            raise ValueError(f"{path}: {name}: data_offsets {a},{b} do not fit shape {shape}")
        arr = np.frombuffer(raw, dtype=dt, count=count, offset=base + a).reshape(shape)
        out[name] = torch.from_numpy(arr.astype(dt.newbyteorder("="), copy=True))
    return out


def st_write(path, tensors, metadata=None):
    """tensors in their own dtype (float64, float32, int64, int32), written
    to path + '.tmp' and renamed, so a reader never sees half a file."""
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs, off = [], 0
    for name, t in tensors.items():
        t = t.detach().cpu().contiguous()
        if t.dtype not in _DT_NAME:
            raise ValueError(f"{name}: cannot write dtype {t.dtype}")
        a = t.numpy()
        a = a.astype(a.dtype.newbyteorder("<"), copy=False)
        b = a.tobytes()
        header[name] = {"dtype": _DT_NAME[t.dtype], "shape": list(t.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def idx_read(path):
    """an unsigned-byte IDX file (gzipped or not) as a uint8 array"""
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4:
        raise ValueError(f"{path}: too short for an IDX file")
    zero, dtype, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype != 0x08 or len(raw) < 4 + 4 * ndim:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    if len(raw) - 4 - 4 * ndim != int(np.prod(dims)):
        raise ValueError(f"{path}: {len(raw) - 4 - 4 * ndim} bytes of data for shape {list(dims)}")
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def idx_path(data_dir, stem):
    """data_dir/stem.gz, else data_dir/stem (Debian ships the .gz)"""
    for name in (stem + ".gz", stem):
        p = os.path.join(data_dir, name)
        if os.path.exists(p):
            return p
    raise FileNotFoundError(os.path.join(data_dir, stem + ".gz"))


VIT_PRESETS = {"vit-tiny": (4, 192, 6, 3, 768), "vit-b16": (16, 768, 12, 12, 3072),
               "vit-b32": (32, 768, 12, 12, 3072), "vit-l16": (16, 1024, 24, 16, 4096)}
VIT_KEYS = ("patch", "dim", "depth", "heads", "mlp")
VIT_FORMAT = "vit:patch=P,dim=D,depth=K,heads=H,mlp=M"


def vit_spec(name):
    """(patch, dim, depth, heads, mlp) of a ViT name as cdp_run's --model
    takes it, None for a model that is no ViT; ValueError for a malformed
    vit:... (the heads are not in a weight file's shapes, so they come from
    the name)."""
    if name in VIT_PRESETS:
        return VIT_PRESETS[name]
    if not name.startswith("vit:"):
        return None
    vals = {}
    for item in name[4:].split(","):
        key, eq, val = item.partition("=")
        if key not in VIT_KEYS or key in vals or not eq or not val.isdigit() or int(val) < 1:
            raise ValueError(f"{name}: expected {VIT_FORMAT}")
        vals[key] = int(val)
    if len(vals) != len(VIT_KEYS):
        raise ValueError(f"{name}: expected {VIT_FORMAT}")
    return tuple(vals[k] for k in VIT_KEYS)
