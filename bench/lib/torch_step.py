"""One PyTorch training step as the benchmarks time it, on the CPU
(torch_resnet.py) and the GPU (gpu/torch_gpu.py): with micro > 1, gradient
accumulation over micro equal slices of the batch, each loss divided by
micro, then one optimizer step."""
import torch.nn.functional as F


def train_step(model, opt, x, y, micro):
    opt.zero_grad(set_to_none=True)
    if micro == 1:
        F.cross_entropy(model(x), y).backward()
    else:
        mb = x.shape[0] // micro
        for i in range(micro):
            sl = slice(i * mb, (i + 1) * mb)
            (F.cross_entropy(model(x[sl]), y[sl]) / micro).backward()
    opt.step()
