/* RandomResizedCrop, Resize, CenterCrop and the flip, as torchvision 0.14
 * computes them on PIL images; see io/transforms.h. */
#include "io/transforms.h"
#include "util/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ the boxes */

cdp_rrc_draw cdp_rrc_draws(uint64_t seed, int64_t epoch, int64_t index, int t)
{
    const uint64_t es = cdp_mix64((uint64_t)epoch);
    const uint64_t j = (uint64_t)index * CDP_RRC_ATTEMPTS + (uint64_t)t;
    /* float32 like torch.empty(1).uniform_(lo, hi) and torch.log of a
     * float32 tensor of the ratio bounds */
    const float lr0 = logf(3.0f / 4.0f), lr1 = logf(4.0f / 3.0f);
    cdp_rrc_draw d;
    d.scale = 0.08f + (1.0f - 0.08f) * cdp_rand_unit(seed, CDP_STREAM_RRC_SCALE ^ es, j);
    d.log_ratio = lr0 + (lr1 - lr0) * cdp_rand_unit(seed, CDP_STREAM_RRC_RATIO ^ es, j);
    d.top = cdp_rand_u64(seed, CDP_STREAM_RRC_TOP ^ es, j);
    d.left = cdp_rand_u64(seed, CDP_STREAM_RRC_LEFT ^ es, j);
    return d;
}

/* Python's round() of a non-negative double: half to even (the default
 * rounding mode's nearbyint). */
static int py_round(double x) { return (int)nearbyint(x); }

cdp_box cdp_rrc_box(int W, int H, const cdp_rrc_draw *d)
{
    const double area = (double)H * (double)W;
    for (int t = 0; t < CDP_RRC_ATTEMPTS; t++) {
        const double target = area * (double)d[t].scale;
        const double ratio = (double)expf(d[t].log_ratio);   /* float32 torch.exp */
        const int w = py_round(sqrt(target * ratio));
        const int h = py_round(sqrt(target / ratio));
        if (w > 0 && w <= W && h > 0 && h <= H) {
            cdp_box b = {(int)(d[t].top % (uint64_t)(H - h + 1)),
                         (int)(d[t].left % (uint64_t)(W - w + 1)), h, w};
            return b;
        }
    }
    /* the fallback: the centre crop, within the ratio range */
    const double in_ratio = (double)W / (double)H, rmin = 3.0 / 4.0, rmax = 4.0 / 3.0;
    int w = W, h = H;
    if (in_ratio < rmin)
        h = py_round(w / rmin);
    else if (in_ratio > rmax)
        w = py_round(h * rmax);
    cdp_box b = {(H - h) / 2, (W - w) / 2, h, w};
    return b;
}

void cdp_resize_shape(int W, int H, int R, int *out_w, int *out_h)
{
    if (W <= H) {
        *out_w = R;
        *out_h = (int)((double)R * H / W);
    } else {
        *out_h = R;
        *out_w = (int)((double)R * W / H);
    }
}

cdp_box cdp_center_box(int W, int H, int S)
{
    cdp_box b = {py_round((H - S) / 2.0), py_round((W - S) / 2.0), S, S};
    return b;
}

/* --------------------------------------------------- PIL's resampling */

/* Pillow's fixed point: weights carry 22 fraction bits (32 - 8 - 2). */
#define PREC_BITS 22

static double bilinear(double x)
{
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* Pillow's precompute_coeffs + normalize_coeffs_8bpc for in_size samples
 * resampled to out_size: per output sample its first input (bounds[2o]),
 * its count (bounds[2o+1]) and ksize fixed-point weights.  The ksize, or -1
 * when out of memory (*kk, *bounds then NULL). */
static int coeffs(int in_size, int out_size, int **bounds, int32_t **kk)
{
    const double scale = (double)in_size / out_size;
    const double fscale = scale < 1.0 ? 1.0 : scale;
    const double support = 1.0 * fscale;
    const int ksize = (int)ceil(support) * 2 + 1;
    *bounds = malloc(2 * (size_t)out_size * sizeof **bounds);
    *kk = malloc((size_t)out_size * ksize * sizeof **kk);
    double *w = malloc((size_t)ksize * sizeof *w);
    if (!*bounds || !*kk || !w) {
        free(*bounds);
        free(*kk);
        free(w);
        *bounds = NULL;
        *kk = NULL;
        return -1;
    }
    for (int o = 0; o < out_size; o++) {
        const double center = (o + 0.5) * scale, ss = 1.0 / fscale;
        int xmin = (int)(center - support + 0.5), xmax = (int)(center + support + 0.5);
        if (xmin < 0)
            xmin = 0;
        if (xmax > in_size)
            xmax = in_size;
        xmax -= xmin;
        double ww = 0.0;
        for (int x = 0; x < xmax; x++) {
            w[x] = bilinear((x + xmin - center + 0.5) * ss);
            ww += w[x];
        }
        int32_t *k = *kk + (size_t)o * ksize;
        for (int x = 0; x < ksize; x++) {
            double v = x < xmax && ww != 0.0 ? w[x] / ww : 0.0;
            k[x] = (int32_t)(v < 0 ? -0.5 + v * (1 << PREC_BITS) : 0.5 + v * (1 << PREC_BITS));
        }
        (*bounds)[2 * o] = xmin;
        (*bounds)[2 * o + 1] = xmax;
    }
    free(w);
    return ksize;
}

static uint8_t clip8(int32_t v)
{
    v >>= PREC_BITS;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* PIL's resize((ow, oh), BILINEAR) of the w x h RGB image at in (rows
 * `stride` bytes apart) into out (HWC, ow x oh).  0, or -1 out of memory. */
static int pil_resize(const uint8_t *in, int w, int h, size_t stride, int ow, int oh,
                      uint8_t *out)
{
    int *bh = NULL, *bv = NULL;
    int32_t *kh = NULL, *kv = NULL;
    uint8_t *tmp = NULL;
    int rc = -1;
    const int need_h = ow != w, need_v = oh != h;
    const int ksh = coeffs(w, ow, &bh, &kh), ksv = coeffs(h, oh, &bv, &kv);
    if (ksh < 0 || ksv < 0)
        goto done;
    /* the rows the vertical pass reads, and only those, are resampled
     * horizontally (Pillow's ybox_first / ybox_last) */
    const int yfirst = need_v ? bv[0] : 0;
    const int ylast = need_v ? bv[2 * (oh - 1)] + bv[2 * (oh - 1) + 1] : h;
    const uint8_t *src = in;
    size_t sstride = stride;
    if (need_h) {
        const int rows = ylast - yfirst;
        tmp = malloc((size_t)rows * ow * 3);
        if (!tmp)
            goto done;
        for (int y = 0; y < rows; y++) {
            const uint8_t *row = in + (size_t)(y + yfirst) * stride;
            uint8_t *dst = tmp + (size_t)y * ow * 3;
            for (int x = 0; x < ow; x++) {
                const int xmin = bh[2 * x], xn = bh[2 * x + 1];
                const int32_t *k = kh + (size_t)x * ksh;
                int32_t s0 = 1 << (PREC_BITS - 1), s1 = s0, s2 = s0;
                for (int i = 0; i < xn; i++) {
                    const uint8_t *p = row + (size_t)(xmin + i) * 3;
                    s0 += p[0] * k[i];
                    s1 += p[1] * k[i];
                    s2 += p[2] * k[i];
                }
                dst[3 * x] = clip8(s0);
                dst[3 * x + 1] = clip8(s1);
                dst[3 * x + 2] = clip8(s2);
            }
        }
        src = tmp;
        sstride = (size_t)ow * 3;
    } else {
        src = in + (size_t)yfirst * stride;
    }
    if (need_v) {
        for (int y = 0; y < oh; y++) {
            const int ymin = bv[2 * y] - yfirst, yn = bv[2 * y + 1];
            const int32_t *k = kv + (size_t)y * ksv;
            uint8_t *dst = out + (size_t)y * ow * 3;
            for (int x = 0; x < ow * 3; x++) {
                int32_t s = 1 << (PREC_BITS - 1);
                for (int i = 0; i < yn; i++)
                    s += src[(size_t)(ymin + i) * sstride + x] * k[i];
                dst[x] = clip8(s);
            }
        }
    } else {
        for (int y = 0; y < oh; y++)
            memcpy(out + (size_t)y * ow * 3, src + (size_t)y * sstride, (size_t)ow * 3);
    }
    rc = 0;
done:
    free(bh);
    free(bv);
    free(kh);
    free(kv);
    free(tmp);
    return rc;
}

/* The S x S box at (top, left) of an HWC image w wide, into CHW planes,
 * mirrored when flip. */
static void to_chw(const uint8_t *hwc, int w, cdp_box b, int flip, uint8_t *out)
{
    const size_t plane = (size_t)b.h * b.w;
    for (int y = 0; y < b.h; y++) {
        const uint8_t *row = hwc + ((size_t)(b.top + y) * w + b.left) * 3;
        for (int x = 0; x < b.w; x++) {
            const uint8_t *p = row + (size_t)(flip ? b.w - 1 - x : x) * 3;
            for (int c = 0; c < 3; c++)
                out[c * plane + (size_t)y * b.w + x] = p[c];
        }
    }
}

int cdp_crop_resize(const uint8_t *rgb, int W, int H, cdp_box box, int ow, int oh, int flip,
                    uint8_t *out)
{
    (void)H;
    uint8_t *tmp = malloc((size_t)ow * oh * 3);
    if (!tmp)
        return -1;
    const uint8_t *in = rgb + ((size_t)box.top * W + box.left) * 3;
    int rc = pil_resize(in, box.w, box.h, (size_t)W * 3, ow, oh, tmp);
    if (rc == 0)
        to_chw(tmp, ow, (cdp_box){0, 0, oh, ow}, flip, out);
    free(tmp);
    return rc;
}

int cdp_resize_center_crop(const uint8_t *rgb, int W, int H, int R, int S, uint8_t *out)
{
    int rw, rh;
    cdp_resize_shape(W, H, R, &rw, &rh);
    uint8_t *tmp = malloc((size_t)rw * rh * 3);
    if (!tmp)
        return -1;
    int rc = pil_resize(rgb, W, H, (size_t)W * 3, rw, rh, tmp);
    if (rc == 0)
        to_chw(tmp, rw, cdp_center_box(rw, rh, S), 0, out);
    free(tmp);
    return rc;
}
