/* ResNets with torchvision's module names: resnet18/34/50 (ImageNet stem:
 * 7x7/2 conv, 3x3/2 max pool), their -cifar variants (the small-image stem
 * of the paper's code: 3x3/1 conv, no max pool), and He et al. 2016's
 * CIFAR ResNets resnet20/32/56 (3 groups of BasicBlocks, widths 16/32/64,
 * 1x1 conv + BatchNorm shortcut where the shape changes).  Blocks: the stem,
 * each residual block, the head (pool, flatten, fc). */
#include <stdio.h>
#include <string.h>

#include "builder.h"

typedef struct resnet_spec {
    const char *name;
    int bottleneck;
    int groups;
    int blocks[4];
    int width[4];
    int stem;        /* 0: CIFAR (3x3/1 conv, no pool), 1: ImageNet */
    const char *paper;   /* what it is: the torchvision model or the paper's */
} resnet_spec;

static const resnet_spec specs[] = {
    { "resnet20", 0, 3, { 3, 3, 3 }, { 16, 32, 64 }, 0, "He et al. 2016's CIFAR ResNet-20" },
    { "resnet32", 0, 3, { 5, 5, 5 }, { 16, 32, 64 }, 0, "He et al. 2016's CIFAR ResNet-32" },
    { "resnet56", 0, 3, { 9, 9, 9 }, { 16, 32, 64 }, 0, "He et al. 2016's CIFAR ResNet-56" },
    { "resnet18", 0, 4, { 2, 2, 2, 2 }, { 64, 128, 256, 512 }, 1, "torchvision.models.resnet18" },
    { "resnet34", 0, 4, { 3, 4, 6, 3 }, { 64, 128, 256, 512 }, 1, "torchvision.models.resnet34" },
    { "resnet50", 1, 4, { 3, 4, 6, 3 }, { 64, 128, 256, 512 }, 1, "torchvision.models.resnet50" },
    { "resnet18-cifar", 0, 4, { 2, 2, 2, 2 }, { 64, 128, 256, 512 }, 0,
      "torchvision's resnet18 with the small-image stem" },
    { "resnet34-cifar", 0, 4, { 3, 4, 6, 3 }, { 64, 128, 256, 512 }, 0,
      "torchvision's resnet34 with the small-image stem" },
    { "resnet50-cifar", 1, 4, { 3, 4, 6, 3 }, { 64, 128, 256, 512 }, 0,
      "torchvision's resnet50 with the small-image stem" },
};

static int conv_bn(cdp_builder *b, const char *block, const char *conv, const char *bn, int in,
                   int out, int k, int stride, int pad)
{
    char n1[64], n2[64];
    snprintf(n1, sizeof n1, "%s%s", block, conv);
    snprintf(n2, sizeof n2, "%s%s", block, bn);
    return cdp_builder_batchnorm2d(b, n2, cdp_builder_conv2d(b, n1, in, out, k, stride, pad, 0));
}

/* BasicBlock (expansion 1) or Bottleneck (expansion 4, stride on the 3x3
 * conv as torchvision's v1.5); returns the output and its channels */
static int residual(cdp_builder *b, const char *name, int x, int cin, int planes, int stride,
                    int bottleneck, int *cout)
{
    int a, out = bottleneck ? planes * 4 : planes;
    if (bottleneck) {
        a = cdp_builder_relu(b, conv_bn(b, name, ".conv1", ".bn1", x, planes, 1, 1, 0));
        a = cdp_builder_relu(b, conv_bn(b, name, ".conv2", ".bn2", a, planes, 3, stride, 1));
        a = conv_bn(b, name, ".conv3", ".bn3", a, out, 1, 1, 0);
    } else {
        a = cdp_builder_relu(b, conv_bn(b, name, ".conv1", ".bn1", x, planes, 3, stride, 1));
        a = conv_bn(b, name, ".conv2", ".bn2", a, planes, 3, 1, 1);
    }
    int s = x;
    if (stride != 1 || cin != out)
        s = conv_bn(b, name, ".downsample.0", ".downsample.1", x, out, 1, stride, 0);
    *cout = out;
    return cdp_builder_relu(b, cdp_builder_add(b, a, s));
}

static int build(cdp_builder *b, const char *spec, int *default_stages)
{
    const resnet_spec *r = NULL;
    for (size_t k = 0; k < sizeof specs / sizeof *specs; k++)
        if (strcmp(spec, specs[k].name) == 0)
            r = &specs[k];
    if (!r)
        return -1;
    cdp_builder_default_io(b, (cdp_shape){ 1, 28, 28 }, 10);   /* Fashion-MNIST's */
    cdp_model *m = b->m;

    cdp_builder_block(b);
    int c = r->width[0];
    int x = conv_bn(b, "", "conv1", "bn1", 0, c, r->stem ? 7 : 3, r->stem ? 2 : 1,
                    r->stem ? 3 : 1);
    x = cdp_builder_relu(b, x);
    if (r->stem)
        x = cdp_builder_maxpool2d(b, x, 3, 2, 1);
    for (int g = 0; g < r->groups; g++)
        for (int i = 0; i < r->blocks[g]; i++) {
            char name[32];
            snprintf(name, sizeof name, "layer%d.%d", g + 1, i);
            cdp_builder_block(b);
            x = residual(b, name, x, c, r->width[g], i == 0 && g > 0 ? 2 : 1, r->bottleneck, &c);
        }
    cdp_builder_block(b);
    x = cdp_builder_flatten(b, cdp_builder_avgpool(b, x));
    x = cdp_builder_linear(b, "fc", x, m->classes);
    *default_stages = 4;
    return x < 0 ? -1 : 0;
}

static int preset(int k, cdp_model_entry *e)
{
    if (k < 0 || (size_t)k >= sizeof specs / sizeof *specs)
        return 0;
    const resnet_spec *r = &specs[k];
    char depth[32] = "", width[32] = "";
    for (int g = 0; g < r->groups; g++) {
        size_t nd = strlen(depth), nw = strlen(width);
        snprintf(depth + nd, sizeof depth - nd, "%s%d", g ? "-" : "", r->blocks[g]);
        snprintf(width + nw, sizeof width - nw, "%s%d", g ? "-" : "", r->width[g]);
    }
    e->name = r->name;
    snprintf(e->about, sizeof e->about, "%s: %s blocks %s, widths %s, %s", r->paper,
             r->bottleneck ? "Bottleneck" : "BasicBlock", depth, width,
             r->stem ? "7x7/2 stem and max pool" : "3x3/1 stem");
    /* ImageNet's images for torchvision's; the CIFAR ones for the others */
    e->input = r->stem ? (cdp_shape){ 3, 224, 224 } : (cdp_shape){ 3, 32, 32 };
    e->classes = r->stem ? 1000 : 10;
    return 1;
}

const cdp_model_family cdp_family_resnet = {
    "resnet", NULL, NULL, NULL, preset, build, NULL,
};
