"""The file formats the PyTorch references read and write on their own
(they share no code with cdp): safetensors weights and Fashion-MNIST's IDX
files.  One module, so that the MLP reference (torch_reference.py), the
networks' reference (torch_model_reference.py) and bench/'s PyTorch
contestants read a file the same way."""
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
    base = 8 + n
    out = {}
    items = [(k, v) for k, v in header.items() if k != "__metadata__"]
    items.sort(key=lambda kv: kv[1]["data_offsets"][0])
    for name, meta in items:
        dt = _DT.get(meta.get("dtype"))
        if dt is None:
            raise ValueError(f"{path}: {name}: unsupported dtype {meta.get('dtype')}")
        dt = np.dtype(dt).newbyteorder("<")
        a, b = meta["data_offsets"]
        shape = list(meta["shape"])
        count = int(np.prod(shape)) if shape else 1
        if b - a != count * dt.itemsize or base + b > len(raw):
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
    zero, dtype, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def idx_path(data_dir, stem):
    """data_dir/stem.gz, else data_dir/stem (Debian ships the .gz)"""
    for name in (stem + ".gz", stem):
        p = os.path.join(data_dir, name)
        if os.path.exists(p):
            return p
    raise FileNotFoundError(os.path.join(data_dir, stem + ".gz"))
