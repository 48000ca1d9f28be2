#!/usr/bin/python3
"""The same epoch through torchvision: ImageFolder(DIR/train) with
RandomResizedCrop(S), RandomHorizontalFlip, PILToTensor (bytes, as cdp
hands them over) in a DataLoader of T worker processes (T = 0: in the main
process), batch B, each worker on one torch thread.  Prints images/s and a
result line.
    torch_folder.py DIR S T [B]"""
import sys
import time

import torch
import torchvision.datasets as D
import torchvision.transforms as T


def main():
    d, S, nw = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    B = int(sys.argv[4]) if len(sys.argv) > 4 else 32
    torch.set_num_threads(1)
    tf = T.Compose([T.RandomResizedCrop(S), T.RandomHorizontalFlip(), T.PILToTensor()])
    ds = D.ImageFolder(d + "/train", transform=tf)
    dl = torch.utils.data.DataLoader(ds, batch_size=B, shuffle=True, num_workers=nw,
                                     drop_last=True, worker_init_fn=lambda _: torch.set_num_threads(1))
    t0 = time.perf_counter()
    n = 0
    for x, _ in dl:
        n += x.shape[0]
    dt = time.perf_counter() - t0
    print("torchvision: %d images, S=%d, %d DataLoader workers, B=%d: %.3f s, %.1f images/s "
          "(worker start-up included)" % (n, S, nw, B, dt, n / dt))
    print("result\tfolder-decode\ttorchvision S=%d T=%d B=%d\timages_per_s\t%.1f\timages/s" % (S, nw, B, n / dt))


if __name__ == "__main__":
    main()
