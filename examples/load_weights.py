#!/usr/bin/env python3
"""Loads a cdp weight file (safetensors) into a PyTorch MLP and evaluates it
on the Fashion-MNIST test set.  Needs only torch and numpy (no safetensors
package):   python3 examples/load_weights.py weights.safetensors [DATA_DIR]"""
import struct, sys
import numpy as np
import torch
from cdp_files import idx_read, st_read

if len(sys.argv) not in (2, 3):
    sys.exit("load_weights.py: error: usage: load_weights.py WEIGHTS.safetensors [DATA_DIR]")
d = sys.argv[2] if len(sys.argv) > 2 else "/usr/share/datasets/fashion-mnist"
try:
    w = st_read(sys.argv[1])
    x = idx_read(f"{d}/t10k-images-idx3-ubyte.gz")
    y = torch.from_numpy(idx_read(f"{d}/t10k-labels-idx1-ubyte.gz").astype(np.int64))
except (OSError, ValueError, struct.error) as e:
    sys.exit(f"load_weights.py: error: {e}")
if "fc0.weight" not in w:
    sys.exit(f"load_weights.py: error: {sys.argv[1]} has no tensor 'fc0.weight': not an MLP's weight file")
layers = []
j = 0
try:
    while f"fc{j}.weight" in w:
        W = w[f"fc{j}.weight"]
        lin = torch.nn.Linear(W.shape[1], W.shape[0])
        lin.weight.data.copy_(W)
        lin.bias.data.copy_(w[f"fc{j}.bias"])
        layers += [lin, torch.nn.ReLU()]
        j += 1
    model = torch.nn.Sequential(*layers[:-1])
    x = torch.from_numpy(x.reshape(len(x), -1).astype(np.float32) / 255.0)
    with torch.no_grad():
        acc = (model(x).argmax(1) == y).float().mean().item()
except (KeyError, RuntimeError) as e:
    sys.exit(f"load_weights.py: error: {sys.argv[1]} is no MLP for these images: "
             f"{' '.join(str(e).split())[:300]}")
print(f"{j} Linear layers, test accuracy {acc:.4f}")
