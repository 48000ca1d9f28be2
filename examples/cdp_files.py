"""Readers for the files the examples need, with numpy only (no safetensors
package): a cdp weight file and the Fashion-MNIST IDX files.  The examples
beside this file import it."""
import gzip, json, struct
import numpy as np
import torch


def read_safetensors(path):
    """{name: tensor} of a safetensors file (F32 and I64 tensors)."""
    dt = {"F32": "<f4", "I64": "<i8"}
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        a = np.frombuffer(data[b:e], dtype=dt[t["dtype"]]).reshape(t["shape"]).copy()
        out[name] = torch.from_numpy(a)
    return out


def read_idx(path):
    """uint8 images [n, 1, rows, cols] or labels [n] of a gzipped IDX file."""
    with gzip.open(path, "rb") as f:
        magic, n = struct.unpack(">II", f.read(8))
        if magic == 0x803:
            rows, cols = struct.unpack(">II", f.read(8))
            return np.frombuffer(f.read(), np.uint8).reshape(n, 1, rows, cols)
        return np.frombuffer(f.read(), np.uint8)
