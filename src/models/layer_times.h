/* --layer-times: where a training step's compute goes, layer by layer.
 * Each layer's forward and backward (training only), the loss and the
 * optimizer update run between two backend syncs and their wall time is
 * added to the layer's row, so on the GPU a row holds the time of that
 * layer's kernels (plus one launch and sync), not of their queueing.  The
 * syncs cost the overlap of host and device work, so a run with
 * --layer-times is a little slower than one without; its numerics are the
 * same bits (the syncs only wait). */
#ifndef CDP_LAYER_TIMES_H
#define CDP_LAYER_TIMES_H

#include "backend/backend.h"

struct cdp_model;

/* rows: the model's layers, then the loss, then the optimizer update */
typedef struct cdp_layer_times {
    int rows;
    double *s;   /* [rows][2] seconds: forward, backward (the update: forward) */
    double *n;   /* [rows][2] calls */
} cdp_layer_times;

#define CDP_LT_LOSS(m) ((m)->nlayers)
#define CDP_LT_OPTIMIZER(m) ((m)->nlayers + 1)

/* 0, or -1 when out of memory */
int cdp_layer_times_init(cdp_layer_times *t, const struct cdp_model *m);
void cdp_layer_times_free(cdp_layer_times *t);
/* t NULL: off (returns 0, adds nothing) */
double cdp_layer_times_begin(const cdp_layer_times *t, const cdp_backend *be);
void cdp_layer_times_end(cdp_layer_times *t, const cdp_backend *be, int row, int bwd,
                         double t0);

#endif
