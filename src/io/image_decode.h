/* Decoding one image file's bytes into 8-bit RGB, as PIL's
 * Image.open(f).convert("RGB") gives it (torchvision's ImageFolder loader):
 * JPEG through libjpeg-turbo (ISLOW DCT, fancy upsampling: libjpeg's
 * defaults, which PIL uses), PNG through libpng (alpha dropped, not
 * composited, as convert("RGB") does).  The format is told by the first
 * bytes, not by the file name.  A JPEG that libjpeg only warns about (a
 * truncated scan, corrupt data that it would paint grey) is an error here:
 * a damaged file is never trained on silently. */
#ifndef CDP_IMAGE_DECODE_H
#define CDP_IMAGE_DECODE_H

#include <stddef.h>
#include <stdint.h>

/* Largest accepted width or height, and pixel count: a header claiming
 * more is refused before anything is allocated. */
#define CDP_IMAGE_MAX_SIDE 32768
#define CDP_IMAGE_MAX_PIXELS ((int64_t)1 << 28)

typedef struct cdp_image {
    int width, height;
    uint8_t *rgb;   /* height rows of width RGB triples (HWC), malloc'd */
} cdp_image;

/* Which decoders this build has: "JPEG, PNG", "JPEG", "PNG" or "". */
const char *cdp_image_formats(void);

/* The size of the image in buf[0..len) from its header alone.  0, or -1 with
 * one clause in why (no path: the caller names the file). */
int cdp_image_probe(const uint8_t *buf, size_t len, int *width, int *height,
                    char *why, size_t whylen);

/* Decodes buf[0..len) into out (out->rgb to be freed by the caller).  0, or
 * -1 with one clause in why and out zeroed. */
int cdp_image_decode(const uint8_t *buf, size_t len, cdp_image *out, char *why, size_t whylen);

void cdp_image_free(cdp_image *im);

#endif
