"""The networks tests/torch/torch_export_model.sh and
torch_export_parity.sh export with examples/export_model.py
(PACKAGE.MODULE:FUNCTION): torchvision's own classes at 3x32x32, narrowed
where the full widths would make `make check` slow, keeping every module
path and layer kind of the real model.  FUNCTION_nodrop: the same network
with every Dropout's p = 0 (the PyTorch comparison: torch's dropout masks
are not cdp's)."""
import torch
import torchvision
from torch import nn
from torchvision.models import resnet, vgg, vision_transformer


def seqcnn(p=0.1):
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8),
                         nn.ReLU(inplace=True), nn.MaxPool2d(2),
                         nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(p),
                         nn.Linear(16, 10))


def vgg11_bn(p=0.5):
    """torchvision's VGG with vgg11_bn's configuration "A" at 1/8 of its
    widths and a classifier of the same layers 64 wide (the real one's
    25088 x 4096 Linear alone is 100M parameters); the AdaptiveAvgPool2d
    ((7, 7)) stays: at 32x32 it spreads a 1x1 map to 7x7"""
    cfg = [8, "M", 16, "M", 32, 32, "M", 64, 64, "M", 64, 64, "M"]
    m = vgg.VGG(vgg.make_layers(cfg, batch_norm=True), num_classes=10, dropout=p)
    m.classifier = nn.Sequential(nn.Linear(64 * 7 * 7, 64), nn.ReLU(True), nn.Dropout(p),
                                 nn.Linear(64, 64), nn.ReLU(True), nn.Dropout(p),
                                 nn.Linear(64, 10))
    for lin in m.classifier:
        if isinstance(lin, nn.Linear):   # VGG's own initialisation of its classifier
            nn.init.normal_(lin.weight, 0, 0.01)
            nn.init.constant_(lin.bias, 0)
    return m


def narrow_resnet(block, layers, width_per_group, widths):
    """torchvision's ResNet (its class, names, forward and initialisation)
    with the stem and the 4 stages the given widths instead of 64 ... 512"""
    m = resnet.ResNet(block, layers, width_per_group=width_per_group, num_classes=10)
    m.inplanes = widths[0]
    # the small-image stem (3x3/1, no max pool): the last maps 4x4, not 1x1,
    # whose BatchNorm over a micro-batch of 2 makes the trajectory chaotic
    m.conv1 = nn.Conv2d(3, widths[0], 3, 1, 1, bias=False)
    m.maxpool = nn.Identity()
    m.bn1 = nn.BatchNorm2d(widths[0])
    for k in range(4):
        setattr(m, f"layer{k + 1}", m._make_layer(block, widths[k], layers[k],
                                                  stride=1 if k == 0 else 2))
    m.fc = nn.Linear(widths[3] * block.expansion, 10)
    for mod in m.modules():      # ResNet's own initialisation, again
        if isinstance(mod, nn.Conv2d):
            nn.init.kaiming_normal_(mod.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(mod, nn.BatchNorm2d):
            nn.init.constant_(mod.weight, 1)
            nn.init.constant_(mod.bias, 0)
    return m


def wide_resnet50_2():
    """wide_resnet50_2's Bottleneck (width_per_group 128: the middle conv
    twice as wide) at 1/4 of its widths, one block per stage instead of
    3-4-6-3 (the real one is 67M parameters)"""
    return narrow_resnet(resnet.Bottleneck, [1, 1, 1, 1], 128, [16, 32, 64, 128])


def mobilenet_v2(p=0.2):
    """torchvision's MobileNetV2 at width_mult 0.25 (its last 1280 channels
    stay) with 8 of its 17 inverted residual blocks, each kind of them
    (expansion 1 and 6, stride 1 and 2, with and without the shortcut), and
    its first conv of stride 1: the last maps 4x4 (see narrow_resnet).  All
    17 blocks (their last maps 2x2) train chaotically at 3x32x32: their
    float32 trajectory leaves the float64 one within 2-3 steps
    (tests/torch/torch_export_parity.sh)"""
    setting = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 2, 2], [6, 64, 2, 2], [6, 320, 1, 1]]
    m = torchvision.models.mobilenet_v2(num_classes=10, width_mult=0.25, dropout=p,
                                        inverted_residual_setting=setting)
    first = m.features[0][0]
    m.features[0][0] = nn.Conv2d(3, first.out_channels, 3, 1, 1, bias=False)
    nn.init.kaiming_normal_(m.features[0][0].weight, mode="fan_out")
    return m


def vit_b_16(p=0.1):
    """vit_b_16's class (VisionTransformer) at 32x32: patch 8, 2 layers,
    dim 32, 2 heads, mlp 64; dropout p after the position embedding, the
    attention and in the MLPs; the head initialised as nn.Linear (the zeros
    of torchvision's would give the other blocks no gradient in step 0)"""
    m = vision_transformer.VisionTransformer(image_size=32, patch_size=8, num_layers=2,
                                             num_heads=2, hidden_dim=32, mlp_dim=64,
                                             num_classes=10, dropout=p)
    m.heads.head.reset_parameters()
    return m


def resnet18():
    """resnet18's BasicBlocks 2-2-2-2 at 1/4 of its widths"""
    return narrow_resnet(resnet.BasicBlock, [2, 2, 2, 2], 64, [16, 32, 64, 128])


def seqcnn_nodrop():
    return seqcnn(0.0)


def vgg11_bn_nodrop():
    return vgg11_bn(0.0)


def mobilenet_v2_nodrop():
    return mobilenet_v2(0.0)


def vit_b_16_nodrop():
    return vit_b_16(0.0)


def bad():
    """a module cdp has no layer for"""
    return nn.Sequential(nn.Conv2d(3, 8, 3), nn.Sigmoid(), nn.Flatten(), nn.Linear(8 * 30 * 30, 10))


class Gated(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return torch.sigmoid(self.fc(x)) * x


def bad_op():
    """an op (torch.sigmoid inside gate's forward) cdp has no layer for"""
    m = nn.Sequential(nn.Conv2d(3, 8, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    m.add_module("gate", Gated())
    m.add_module("fc", nn.Linear(8, 10))
    return m
