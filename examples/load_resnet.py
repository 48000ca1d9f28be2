#!/usr/bin/env python3
"""Loads a cdp ResNet weight file (safetensors) into torchvision's module with
load_state_dict(strict=True) and evaluates it on the Fashion-MNIST test set.
Needs torch, torchvision and numpy (no safetensors package):
    python3 examples/load_resnet.py weights.safetensors resnet18-cifar [DATA_DIR]
resnet18/34/50 and their -cifar variants come from torchvision; for
resnet20/32/56 see tests/torch_model_reference.py --evaluate."""
import gzip, json, struct, sys
import numpy as np
import torch
import torchvision

def read_safetensors(path):
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
    with gzip.open(path, "rb") as f:
        magic, n = struct.unpack(">II", f.read(8))
        if magic == 0x803:
            rows, cols = struct.unpack(">II", f.read(8))
            return np.frombuffer(f.read(), np.uint8).reshape(n, 1, rows, cols)
        return np.frombuffer(f.read(), np.uint8)

sd = read_safetensors(sys.argv[1])
name = sys.argv[2]
base = name[:-len("-cifar")] if name.endswith("-cifar") else name
net = getattr(torchvision.models, base)(num_classes=sd["fc.weight"].shape[0])
cin = sd["conv1.weight"].shape[1]
if name.endswith("-cifar"):          # the paper's small-image stem
    net.conv1 = torch.nn.Conv2d(cin, 64, 3, 1, 1, bias=False)
    net.maxpool = torch.nn.Identity()
else:
    net.conv1 = torch.nn.Conv2d(cin, 64, 7, 2, 3, bias=False)
net.load_state_dict(sd, strict=True)
net.eval()
d = sys.argv[3] if len(sys.argv) > 3 else "/usr/share/datasets/fashion-mnist"
x = torch.from_numpy(read_idx(f"{d}/t10k-images-idx3-ubyte.gz").astype(np.float32) / 255.0)
y = torch.from_numpy(read_idx(f"{d}/t10k-labels-idx1-ubyte.gz").astype(np.int64))
right = 0
with torch.no_grad():
    for a in range(0, len(y), 500):
        right += int((net(x[a:a + 500]).argmax(1) == y[a:a + 500]).sum())
print(f"{name}: loads into torchvision (strict), test accuracy {right / len(y):.4f}")
