/* mobile-tiny: a small network of the layers of torchvision's mobile
 * networks (MobileNetV2's inverted residual blocks: 1x1 expansion, 3x3
 * depthwise convolution, 1x1 projection, ReLU6; a grouped 3x3 convolution;
 * dropout before the classifier), with MobileNetV2's module names.  Not a
 * torchvision model: a small one that trains in seconds, for tests and as
 * an example of these layers.  Blocks: the stem, each inverted residual
 * block, the grouped convolution, the head (pool, flatten, dropout,
 * Linear). */
#include <stdio.h>
#include <string.h>

#include "builder.h"

#define NAME "mobile-tiny"

/* conv (bias-free) + BatchNorm (+ ReLU6), named PREFIX.0, .1 as
 * torchvision's Conv2dNormActivation */
static int conv_bn(cdp_builder *b, const char *prefix, int in, int out, int k, int stride,
                   int groups, int relu6)
{
    char n0[80], n1[80];
    snprintf(n0, sizeof n0, "%s.0", prefix);
    snprintf(n1, sizeof n1, "%s.1", prefix);
    int x = cdp_builder_batchnorm2d(
        b, n1, cdp_builder_grouped_conv2d(b, n0, in, out, k, stride, k / 2, groups, 0));
    return relu6 ? cdp_builder_relu6(b, x) : x;
}

/* MobileNetV2's InvertedResidual, expansion t: features.i.conv.{0, 1} the
 * expansion and the depthwise convolution, .2 and .3 the projection and its
 * BatchNorm; the input added back when the shape is kept */
static int inverted_residual(cdp_builder *b, int i, int x, int cin, int cout, int stride, int t)
{
    char p[64];
    const int hidden = cin * t;
    snprintf(p, sizeof p, "features.%d.conv.0", i);
    int a = conv_bn(b, p, x, hidden, 1, 1, 1, 1);
    snprintf(p, sizeof p, "features.%d.conv.1", i);
    a = conv_bn(b, p, a, hidden, 3, stride, hidden, 1);
    snprintf(p, sizeof p, "features.%d.conv.2", i);
    a = cdp_builder_conv2d(b, p, a, cout, 1, 1, 0, 0);
    snprintf(p, sizeof p, "features.%d.conv.3", i);
    a = cdp_builder_batchnorm2d(b, p, a);
    return stride == 1 && cin == cout ? cdp_builder_add(b, a, x) : a;
}

static int build(cdp_builder *b, const char *spec, int *default_stages)
{
    if (strcmp(spec, NAME) != 0)
        return -1;
    cdp_builder_default_io(b, (cdp_shape){ 3, 32, 32 }, 10);
    cdp_builder_block(b);
    int x = conv_bn(b, "features.0", 0, 16, 3, 1, 1, 1);
    cdp_builder_block(b);
    x = inverted_residual(b, 1, x, 16, 16, 1, 2);
    cdp_builder_block(b);
    x = inverted_residual(b, 2, x, 16, 24, 2, 2);
    cdp_builder_block(b);
    x = conv_bn(b, "features.3", x, 48, 3, 1, 4, 1);   /* 4 groups of 6 -> 12 */
    cdp_builder_block(b);
    x = cdp_builder_flatten(b, cdp_builder_avgpool(b, x));
    x = cdp_builder_dropout(b, "classifier.0", x, 0.2f);
    x = cdp_builder_linear(b, "classifier.1", x, cdp_builder_classes(b));
    *default_stages = 4;
    return x < 0 ? -1 : 0;
}

static int preset(int k, cdp_model_entry *e)
{
    if (k != 0)
        return 0;
    e->name = NAME;
    snprintf(e->about, sizeof e->about,
             "MobileNetV2's layers in a small network (not torchvision's): 2 inverted residual "
             "blocks (depthwise 3x3, ReLU6), a 4-group 3x3 conv, dropout 0.2, Linear");
    e->input = (cdp_shape){ 3, 32, 32 };
    e->classes = 10;
    return 1;
}

const cdp_model_family cdp_family_mobile = {
    "mobile", NULL, NULL, NULL, preset, build, NULL,
};
