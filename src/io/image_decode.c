/* JPEG (libjpeg-turbo's TurboJPEG API) and PNG (libpng's simplified API)
 * into RGB bytes; see io/image_decode.h. */
/* HAVE_TURBOJPEG, HAVE_LIBPNG: from configure, or -D (fuzz/run.sh) */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#include "io/image_decode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_TURBOJPEG
#include <turbojpeg.h>
#endif
#ifdef HAVE_LIBPNG
#include <png.h>
#endif

const char *cdp_image_formats(void)
{
#if defined(HAVE_TURBOJPEG) && defined(HAVE_LIBPNG)
    return "JPEG, PNG";
#elif defined(HAVE_TURBOJPEG)
    return "JPEG";
#elif defined(HAVE_LIBPNG)
    return "PNG";
#else
    return "";
#endif
}

void cdp_image_free(cdp_image *im)
{
    if (!im)
        return;
    free(im->rgb);
    memset(im, 0, sizeof *im);
}

static int is_jpeg(const uint8_t *b, size_t n) { return n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF; }
static int is_png(const uint8_t *b, size_t n)
{
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    return n >= 8 && memcmp(b, sig, 8) == 0;
}

/* What a file that is neither is, when its first bytes say it. */
static void unsupported(const uint8_t *b, size_t n, char *why, size_t whylen)
{
    const char *what = NULL;
    if (n >= 2 && b[0] == 'B' && b[1] == 'M') what = "a BMP image";
    else if (n >= 2 && b[0] == 'P' && b[1] >= '1' && b[1] <= '6') what = "a PNM (PPM/PGM) image";
    else if (n >= 4 && (!memcmp(b, "II*\0", 4) || !memcmp(b, "MM\0*", 4))) what = "a TIFF image";
    else if (n >= 12 && !memcmp(b, "RIFF", 4) && !memcmp(b + 8, "WEBP", 4)) what = "a WebP image";
    else if (n >= 6 && (!memcmp(b, "GIF87a", 6) || !memcmp(b, "GIF89a", 6))) what = "a GIF image";
    if (n == 0)
        snprintf(why, whylen, "empty file, not an image");
    else if (what && *cdp_image_formats())
        snprintf(why, whylen, "%s: only %s files are decoded", what, cdp_image_formats());
    else if (what)
        snprintf(why, whylen, "%s: this build decodes no image format (configure found "
                 "neither libturbojpeg nor libpng)", what);
    else
        snprintf(why, whylen, "not an image (neither a JPEG nor a PNG signature)");
}

/* (unused in a build with no decoder) */
static __attribute__((unused)) int check_size(int w, int h, char *why, size_t whylen)
{
    if (w < 1 || h < 1 || w > CDP_IMAGE_MAX_SIDE || h > CDP_IMAGE_MAX_SIDE ||
        (int64_t)w * h > CDP_IMAGE_MAX_PIXELS) {
        snprintf(why, whylen, "image of %d x %d pixels: outside 1 to %d per side and %lld "
                 "pixels", w, h, CDP_IMAGE_MAX_SIDE, (long long)CDP_IMAGE_MAX_PIXELS);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ JPEG */

#ifdef HAVE_TURBOJPEG
static const char *tj_colorspace(int cs)
{
    switch (cs) {
    case TJCS_RGB: return "RGB";
    case TJCS_YCbCr: return "YCbCr";
    case TJCS_GRAY: return "greyscale";
    case TJCS_CMYK: return "CMYK";
    case TJCS_YCCK: return "YCCK";
    default: return "unknown";
    }
}

static int jpeg_header(tjhandle tj, const uint8_t *buf, size_t len, int *w, int *h,
                       char *why, size_t whylen)
{
    int sub = 0, cs = 0;
    if (tjDecompressHeader3(tj, buf, (unsigned long)len, w, h, &sub, &cs) != 0) {
        snprintf(why, whylen, "corrupt JPEG header: %s", tjGetErrorStr2(tj));
        return -1;
    }
    if (*w < 1 || *h < 1) {
        snprintf(why, whylen, "corrupt JPEG header: no image size in it (a truncated file?)");
        return -1;
    }
    /* PIL converts CMYK with its own formula; libjpeg-turbo cannot give
     * RGB for it: refused rather than decoded differently */
    if (cs == TJCS_CMYK || cs == TJCS_YCCK) {
        snprintf(why, whylen, "JPEG in the %s colour space: only greyscale, RGB and YCbCr "
                 "JPEGs are decoded", tj_colorspace(cs));
        return -1;
    }
    return check_size(*w, *h, why, whylen);
}

static int jpeg_decode(const uint8_t *buf, size_t len, cdp_image *out, int probe_only,
                       char *why, size_t whylen)
{
    tjhandle tj = tjInitDecompress();
    if (!tj) {
        snprintf(why, whylen, "cannot start the JPEG decoder: %s", tjGetErrorStr2(NULL));
        return -1;
    }
    int w = 0, h = 0, rc = -1;
    if (jpeg_header(tj, buf, len, &w, &h, why, whylen) != 0)
        goto done;
    out->width = w;
    out->height = h;
    if (probe_only) {
        rc = 0;
        goto done;
    }
    out->rgb = malloc((size_t)w * (size_t)h * 3);
    if (!out->rgb) {
        snprintf(why, whylen, "out of memory for a %d x %d image", w, h);
        goto done;
    }
    /* STOPONWARNING: a truncated or corrupt scan is an error, not grey */
    if (tjDecompress2(tj, buf, (unsigned long)len, out->rgb, w, 0, h, TJPF_RGB,
                      TJFLAG_STOPONWARNING) != 0) {
        snprintf(why, whylen, "corrupt or truncated JPEG data: %s", tjGetErrorStr2(tj));
        goto done;
    }
    rc = 0;
done:
    tjDestroy(tj);
    return rc;
}
#endif

/* ------------------------------------------------------------------- PNG */

#ifdef HAVE_LIBPNG
/* libpng's classic API: its simplified one converts a file's gAMA to sRGB
 * (up to 72 levels off PIL, which keeps the stored values, on a file of
 * gamma 1.0), this one changes the values only as asked below. */
typedef struct png_src {
    const uint8_t *buf;
    size_t len, at;
    char *why;
    size_t whylen;
} png_src;

static void png_read_mem(png_structp png, png_bytep out, size_t n)
{
    png_src *s = png_get_io_ptr(png);
    if (n > s->len - s->at)
        png_error(png, "truncated: the file ends inside the image data");
    memcpy(out, s->buf + s->at, n);
    s->at += n;
}

static void png_fail(png_structp png, png_const_charp msg)
{
    png_src *s = png_get_error_ptr(png);
    snprintf(s->why, s->whylen, "corrupt or truncated PNG: %s", msg);
    png_longjmp(png, 1);
}

static void png_quiet(png_structp png, png_const_charp msg) { (void)png; (void)msg; }

static int png_decode(const uint8_t *buf, size_t len, cdp_image *out, int probe_only,
                      char *why, size_t whylen)
{
    png_src src = {buf, len, 0, why, whylen};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_fail, png_quiet);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    png_bytep *volatile rows = NULL;
    uint8_t *volatile px = NULL;
    int rc = -1;
    if (!info) {
        snprintf(why, whylen, "out of memory starting the PNG decoder");
        goto done;
    }
    if (setjmp(png_jmpbuf(png))) {
        free(px);
        px = NULL;
        goto done;
    }
    png_set_read_fn(png, &src, png_read_mem);
    png_read_info(png, info);
    const int w = (int)png_get_image_width(png, info), h = (int)png_get_image_height(png, info);
    /* PIL reads 16-bit samples its own way: refused, not approximated */
    if (png_get_bit_depth(png, info) == 16) {
        snprintf(why, whylen, "16-bit PNG: only PNGs of 8 bits or fewer per sample are decoded");
        goto done;
    }
    if (check_size(w, h, why, whylen) != 0)
        goto done;
    out->width = w;
    out->height = h;
    if (probe_only) {
        rc = 0;
        goto done;
    }
    /* convert("RGB"): palette and low-depth grey expanded, grey repeated,
     * alpha (and tRNS) dropped without compositing */
    png_set_expand(png);
    png_set_gray_to_rgb(png);
    png_set_strip_alpha(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_rowbytes(png, info) != (size_t)w * 3)
        png_error(png, "unexpected row size after conversion to RGB");
    px = malloc((size_t)w * h * 3);
    rows = malloc((size_t)h * sizeof *rows);
    if (!px || !rows) {
        snprintf(why, whylen, "out of memory for a %d x %d image", w, h);
        free(px);
        px = NULL;
        goto done;
    }
    for (int y = 0; y < h; y++)
        rows[y] = px + (size_t)y * w * 3;
    png_read_image(png, rows);
    out->rgb = px;
    rc = 0;
done:
    free(rows);
    png_destroy_read_struct(png ? &png : NULL, info ? &info : NULL, NULL);
    return rc;
}
#endif

static int decode(const uint8_t *buf, size_t len, cdp_image *out, int probe_only,
                  char *why, size_t whylen)
{
    memset(out, 0, sizeof *out);
    (void)probe_only;
    int rc = -2;
#ifdef HAVE_TURBOJPEG
    if (is_jpeg(buf, len))
        rc = jpeg_decode(buf, len, out, probe_only, why, whylen);
#endif
#ifdef HAVE_LIBPNG
    if (is_png(buf, len))
        rc = png_decode(buf, len, out, probe_only, why, whylen);
#endif
    if (rc == -2) {
        if (is_jpeg(buf, len) || is_png(buf, len))
            snprintf(why, whylen, "a %s image, but this build has no %s decoder (configure "
                     "found no %s)", is_jpeg(buf, len) ? "JPEG" : "PNG",
                     is_jpeg(buf, len) ? "JPEG" : "PNG",
                     is_jpeg(buf, len) ? "libturbojpeg" : "libpng");
        else
            unsupported(buf, len, why, whylen);
        rc = -1;
    }
    if (rc != 0) {
        cdp_image_free(out);
        /* one line: the libraries' messages are quoted as they come */
        for (char *p = why; *p; p++)
            if (*p == '\n' || *p == '\r')
                *p = ' ';
    }
    return rc;
}

int cdp_image_probe(const uint8_t *buf, size_t len, int *width, int *height,
                    char *why, size_t whylen)
{
    cdp_image im;
    int rc = decode(buf, len, &im, 1, why, whylen);
    *width = im.width;
    *height = im.height;
    return rc;
}

int cdp_image_decode(const uint8_t *buf, size_t len, cdp_image *out, char *why, size_t whylen)
{
    return decode(buf, len, out, 0, why, whylen);
}
