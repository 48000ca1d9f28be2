/* cdp's public API: the shape of one sample, which every other header
 * speaks of (the layers below the API too). */
#ifndef CDP_PUBLIC_SHAPE_H
#define CDP_PUBLIC_SHAPE_H

/* One sample: channels x height x width, its values in that order (NCHW
 * per batch, as in PyTorch).  Features are c x 1 x 1; a sequence of T
 * tokens of D features is T x 1 x D. */
typedef struct cdp_shape {
    int c, h, w;
} cdp_shape;

#endif
