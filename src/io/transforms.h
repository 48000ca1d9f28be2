/* torchvision's ImageNet transforms on 8-bit RGB images, in PIL's
 * arithmetic (torchvision applies them to PIL images):
 *   training:   RandomResizedCrop(S, scale=(0.08, 1), ratio=(3/4, 4/3))
 *               then RandomHorizontalFlip(0.5)
 *   evaluation: Resize(R) then CenterCrop(S)
 * The resampling is PIL's Image.resize(..., BILINEAR): a separable
 * triangle filter widened by the scale when shrinking (antialias), weights
 * rounded to 22-bit fixed point, horizontal pass then vertical, as Pillow's
 * Resample.c does, so the bytes are PIL's. */
#ifndef CDP_TRANSFORMS_H
#define CDP_TRANSFORMS_H

#include <stdint.h>

/* Random streams of the RandomResizedCrop draws (fixed forever). */
#define CDP_STREAM_RRC_SCALE 0x6364702d72726373ULL /* "cdp-rrcs" */
#define CDP_STREAM_RRC_RATIO 0x6364702d72726372ULL /* "cdp-rrcr" */
#define CDP_STREAM_RRC_TOP   0x6364702d72726374ULL /* "cdp-rrct" */
#define CDP_STREAM_RRC_LEFT  0x6364702d7272636cULL /* "cdp-rrcl" */
/* torchvision's number of attempts before the centre-crop fallback. */
#define CDP_RRC_ATTEMPTS 10

/* A crop box: rows [top, top+h), columns [left, left+w). */
typedef struct cdp_box {
    int top, left, h, w;
} cdp_box;

/* The draws of one attempt, as torchvision makes them: the area fraction
 * (float32 in [0.08, 1)), the log aspect ratio (float32 in
 * [log(3/4), log(4/3))), and two uniform 64-bit values for the offsets
 * (taken mod the number of positions, as torch.randint's range). */
typedef struct cdp_rrc_draw {
    float scale, log_ratio;
    uint64_t top, left;
} cdp_rrc_draw;

/* The draws of attempt t of sample `index` in epoch `epoch`. */
cdp_rrc_draw cdp_rrc_draws(uint64_t seed, int64_t epoch, int64_t index, int t);

/* torchvision's RandomResizedCrop.get_params on a W x H image with the
 * attempts' draws d[0..CDP_RRC_ATTEMPTS): the first attempt whose box fits,
 * else the centre crop of the ratio range. */
cdp_box cdp_rrc_box(int W, int H, const cdp_rrc_draw *d);

/* torchvision's Resize(R) size: the shorter side becomes R, the longer
 * floor(R * long / short). */
void cdp_resize_shape(int W, int H, int R, int *out_w, int *out_h);

/* torchvision's CenterCrop(S) box on a W x H image (W, H >= S): top =
 * round((H - S) / 2) with Python's round half to even, left likewise. */
cdp_box cdp_center_box(int W, int H, int S);

/* PIL's img.crop(box).resize((ow, oh), BILINEAR) of an HWC RGB image of
 * W x H into out (CHW, 3 planes of oh x ow), flipped left-right when flip.
 * 0, or -1 when out of memory. */
int cdp_crop_resize(const uint8_t *rgb, int W, int H, cdp_box box, int ow, int oh, int flip,
                    uint8_t *out);

/* Resize(R) then CenterCrop(S) (R >= S) of an HWC RGB image of W x H into
 * out (CHW, 3 planes of S x S).  0, or -1 when out of memory. */
int cdp_resize_center_crop(const uint8_t *rgb, int W, int H, int R, int S, uint8_t *out);

#endif
