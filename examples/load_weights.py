#!/usr/bin/env python3
"""Loads a cdp weight file (safetensors) into a PyTorch MLP and evaluates it
on the Fashion-MNIST test set.  Needs only torch and numpy (no safetensors
package):   python3 examples/load_weights.py weights.safetensors [DATA_DIR]"""
import sys
import numpy as np
import torch
from cdp_files import read_idx, read_safetensors

w = read_safetensors(sys.argv[1])
layers = []
j = 0
while f"fc{j}.weight" in w:
    W = w[f"fc{j}.weight"]
    lin = torch.nn.Linear(W.shape[1], W.shape[0])
    lin.weight.data.copy_(W)
    lin.bias.data.copy_(w[f"fc{j}.bias"])
    layers += [lin, torch.nn.ReLU()]
    j += 1
model = torch.nn.Sequential(*layers[:-1])
d = sys.argv[2] if len(sys.argv) > 2 else "/usr/share/datasets/fashion-mnist"
x = torch.from_numpy(read_idx(f"{d}/t10k-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255.0)
y = torch.from_numpy(read_idx(f"{d}/t10k-labels-idx1-ubyte.gz").astype(np.int64))
with torch.no_grad():
    acc = (model(x).argmax(1) == y).float().mean().item()
print(f"{j} Linear layers, test accuracy {acc:.4f}")
