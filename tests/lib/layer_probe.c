/* layer_probe REQ OUT [REQ OUT ...]: runs one layer of the CPU backend
 * (cdp_backend_cpu(1)) forward and backward on the arrays of a request file
 * and writes what the kernels computed to an output file.  A helper of
 * tests/torch/torch_layers.py, which compares the results with PyTorch; not a
 * test by itself.
 *
 * File format (both directions, native little-endian): an 8-byte magic,
 * "CDPLPRQ1" for a request and "CDPLPOT1" for an output, then records up to
 * the end of the file, each
 *     uint32 name length, the name (no terminator),
 *     uint32 dtype (0 float32, 1 int32, 2 float64, 3 bytes),
 *     uint64 element count, the elements.
 * A request holds "layer" (bytes: conv2d, batchnorm2d, relu, maxpool2d,
 * avgpool, linear, add, xent), "dims" (int32, per layer below) and the
 * layer's arrays, named as in PyTorch's layouts (NCHW, weights [out, in]):
 *
 *   conv2d      dims B Cin H W Cout KH KW stride pad bias groups; x w [b] dy
 *               [dw0 [db0]] -> y dx dw [db] [dw_acc [db_acc]]
 *               (dw_acc: conv2d_bwd with accumulate onto dw0, db0)
 *   batchnorm2d dims B C H W N; eps momentum (float32, 1 each); x gamma
 *               beta dy rmean rvar -> y save_mean save_invstd stat_mean
 *               stat_m2 (float64) dx dx_inplace dgamma dbeta y_eval
 *               rmean_out rvar_out.  y_eval: bn_fwd_eval with rmean, rvar.
 *               rmean_out, rvar_out: bn_fwd_train on N equal micro-batches
 *               of the B samples, then bn_running_update over the N.
 *   relu        dims n; x dy -> y dx
 *   maxpool2d   dims B C H W k stride pad; x dy -> y idx (int32) dx
 *   avgpool     dims B C H W; x dy -> y ([B, C]) dx
 *   adaptive_avgpool dims B C H W OH OW; x dy -> y ([B, C, OH, OW]) dx
 *   linear      dims B in out relu relu_dx; x w b dy [dw0 db0] -> y dx dw
 *               db [dw_acc db_acc].  relu: y = relu(x w^T + b) (the fused
 *               kernel) and dy is the gradient of that, masked by y > 0
 *               with relu_bwd first; relu_dx: dx masked by x > 0.
 *   add         dims n; a b dy -> y da db (add3; the add layer's backward)
 *   xent        dims B C; logits labels (int32) -> loss (float64, mean of
 *               the row losses) correct (float64) dlogits
 *   layernorm, gelu, attention, tokens, relu6, dropout: through the layer
 *               kinds of src/nn
 *               (run_ops and the comments above each)
 *
 * Exit status 0; 1 when a result is not finite (every request holds finite
 * inputs); 2 with a message on a malformed request. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "nn/nn.h"

enum { DT_F32, DT_I32, DT_F64, DT_BYTES };
static const size_t dt_size[] = {4, 4, 8, 1};

typedef struct rec {
    char name[64];
    uint32_t dtype;
    uint64_t n;
    void *data;
} rec;

#define MAXREC 64
static rec recs[MAXREC];
static int nrec;
static const char *req_path;
static const cdp_backend *be;

static void die(const char *fmt, const char *a)
{
    fprintf(stderr, "layer_probe: %s: ", req_path);
    fprintf(stderr, fmt, a);
    fputc('\n', stderr);
    exit(2);
}

static void *xalloc(size_t bytes)
{
    void *p = be->alloc(bytes ? bytes : 64);
    if (!p)
        die("out of memory%s", "");
    memset(p, 0, bytes ? bytes : 64);
    return p;
}

static void read_request(const char *path)
{
    req_path = path;
    FILE *f = fopen(path, "rb");
    if (!f)
        die("cannot open%s", "");
    char magic[8];
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "CDPLPRQ1", 8))
        die("not a request file (magic)%s", "");
    for (int i = 0; i < nrec; i++)
        be->free(recs[i].data);
    nrec = 0;
    uint32_t len;
    while (fread(&len, 4, 1, f) == 1) {
        if (nrec == MAXREC)
            die("more than 64 records%s", "");
        rec *r = &recs[nrec];
        if (len == 0 || len >= sizeof r->name || fread(r->name, 1, len, f) != len)
            die("bad record name%s", "");
        r->name[len] = 0;
        if (fread(&r->dtype, 4, 1, f) != 1 || r->dtype > DT_BYTES || fread(&r->n, 8, 1, f) != 1 ||
            r->n > ((uint64_t)1 << 32))
            die("bad record header of %s", r->name);
        size_t bytes = (size_t)r->n * dt_size[r->dtype];
        r->data = xalloc(bytes + 1);
        if (fread(r->data, 1, bytes, f) != bytes)
            die("record %s truncated", r->name);
        nrec++;
    }
    fclose(f);
}

static rec *find(const char *name)
{
    for (int i = 0; i < nrec; i++)
        if (!strcmp(recs[i].name, name))
            return &recs[i];
    return NULL;
}

/* the record name of dtype with n elements (n = 0: any), or exit */
static void *get(const char *name, uint32_t dtype, size_t n)
{
    rec *r = find(name);
    if (!r)
        die("record %s missing", name);
    if (r->dtype != dtype || (n && r->n != n))
        die("record %s: wrong dtype or element count", name);
    return r->data;
}

static void *opt(const char *name, uint32_t dtype, size_t n)
{
    return find(name) ? get(name, dtype, n) : NULL;
}

static const int *dims(int count)
{
    const int *d = get("dims", DT_I32, (size_t)count);
    for (int i = 0; i < count; i++)
        if (d[i] < 0 || d[i] > (1 << 24))
            die("dims out of range%s", "");
    return d;
}

/* ------------------------------------------------------------ output */

static FILE *out;

static void put(const char *name, uint32_t dtype, size_t n, const void *data)
{
    /* the probe's own check (exit 1): from finite inputs every result is
     * finite */
    for (size_t i = 0; i < n && (dtype == DT_F32 || dtype == DT_F64); i++) {
        double v = dtype == DT_F32 ? (double)((const float *)data)[i] : ((const double *)data)[i];
        if (!isfinite(v)) {
            fprintf(stderr, "layer_probe: %s: %s[%zu] is not finite\n", req_path, name, i);
            exit(1);
        }
    }
    uint32_t len = (uint32_t)strlen(name);
    uint64_t n64 = n;
    if (fwrite(&len, 4, 1, out) != 1 || fwrite(name, 1, len, out) != len ||
        fwrite(&dtype, 4, 1, out) != 1 || fwrite(&n64, 8, 1, out) != 1 ||
        fwrite(data, dt_size[dtype], n, out) != n)
        die("write error%s", "");
}

static void putf(const char *name, size_t n, const float *p)
{
    put(name, DT_F32, n, p);
}

static float *dup_f(const float *p, size_t n)
{
    float *q = xalloc(n * sizeof *q);
    memcpy(q, p, n * sizeof *q);
    return q;
}

/* ------------------------------------------------------------ layers */

static void run_conv2d(void)
{
    const int *d = dims(11);
    cdp_conv_shape s = {.B = d[0], .Cin = d[1], .H = d[2], .W = d[3], .Cout = d[4],
                        .KH = d[5], .KW = d[6], .stride = d[7], .pad = d[8], .groups = d[10]};
    int bias = d[9];
    if (s.stride < 1 || s.H + 2 * s.pad < s.KH || s.W + 2 * s.pad < s.KW || s.groups < 1 ||
        s.Cin % s.groups || s.Cout % s.groups)
        die("bad conv2d shape%s", "");
    s.OH = (s.H + 2 * s.pad - s.KH) / s.stride + 1;
    s.OW = (s.W + 2 * s.pad - s.KW) / s.stride + 1;
    size_t nx = (size_t)s.B * s.Cin * s.H * s.W, ny = (size_t)s.B * s.Cout * s.OH * s.OW;
    size_t nw = cdp_conv_weight_count(&s);
    const float *x = get("x", DT_F32, nx), *w = get("w", DT_F32, nw);
    const float *b = bias ? get("b", DT_F32, (size_t)s.Cout) : NULL;
    const float *dy = get("dy", DT_F32, ny);
    float *ws = xalloc(be->conv2d_ws_floats(&s) * sizeof(float));
    float *y = xalloc(ny * sizeof *y), *dx = xalloc(nx * sizeof *dx);
    float *dw = xalloc(nw * sizeof *dw), *db = bias ? xalloc((size_t)s.Cout * sizeof *db) : NULL;
    be->conv2d_fwd(&s, x, w, b, y, ws);
    be->conv2d_bwd(&s, x, w, dy, dx, dw, db, 0, ws);
    putf("y", ny, y);
    putf("dx", nx, dx);
    putf("dw", nw, dw);
    if (bias)
        putf("db", (size_t)s.Cout, db);
    const float *dw0 = opt("dw0", DT_F32, nw);
    if (dw0) {
        float *acc = dup_f(dw0, nw), *bacc = NULL;
        if (bias)
            bacc = dup_f(get("db0", DT_F32, (size_t)s.Cout), (size_t)s.Cout);
        be->conv2d_bwd(&s, x, w, dy, NULL, acc, bacc, 1, ws);
        putf("dw_acc", nw, acc);
        if (bias)
            putf("db_acc", (size_t)s.Cout, bacc);
    }
}

static void run_batchnorm2d(void)
{
    const int *d = dims(5);
    int B = d[0], C = d[1], HW = d[2] * d[3], N = d[4];
    if (N < 1 || B % N)
        die("batchnorm2d: N must divide B%s", "");
    float eps = *(const float *)get("eps", DT_F32, 1);
    float mom = *(const float *)get("momentum", DT_F32, 1);
    size_t nx = (size_t)B * C * HW;
    const float *x = get("x", DT_F32, nx), *gamma = get("gamma", DT_F32, (size_t)C),
                *beta = get("beta", DT_F32, (size_t)C), *dy = get("dy", DT_F32, nx),
                *rmean = get("rmean", DT_F32, (size_t)C), *rvar = get("rvar", DT_F32, (size_t)C);
    float *y = xalloc(nx * sizeof *y), *save = xalloc(2 * (size_t)C * sizeof *save);
    double *stats = xalloc(2 * (size_t)C * sizeof *stats);
    be->bn_fwd_train(B, C, HW, x, gamma, beta, eps, y, save, stats);
    putf("y", nx, y);
    putf("save_mean", (size_t)C, save);
    putf("save_invstd", (size_t)C, save + C);
    put("stat_mean", DT_F64, (size_t)C, stats);
    put("stat_m2", DT_F64, (size_t)C, stats + C);

    float *dx = xalloc(nx * sizeof *dx), *dg = xalloc((size_t)C * sizeof *dg),
          *dbt = xalloc((size_t)C * sizeof *dbt);
    be->bn_bwd(B, C, HW, x, gamma, save, dy, dx, dg, dbt, 0);
    putf("dx", nx, dx);
    putf("dgamma", (size_t)C, dg);
    putf("dbeta", (size_t)C, dbt);
    float *inpl = dup_f(dy, nx);   /* dx may equal dy */
    be->bn_bwd(B, C, HW, x, gamma, save, inpl, inpl, dg, dbt, 0);
    putf("dx_inplace", nx, inpl);

    float *ye = xalloc(nx * sizeof *ye);
    be->bn_fwd_eval(B, C, HW, x, gamma, beta, rmean, rvar, eps, ye);
    putf("y_eval", nx, ye);

    /* running statistics from N micro-batches of B/N samples */
    int Bm = B / N;
    size_t nm = (size_t)Bm * C * HW;
    double *st = xalloc((size_t)N * 2 * C * sizeof *st);
    for (int w = 0; w < N; w++)
        be->bn_fwd_train(Bm, C, HW, x + (size_t)w * nm, gamma, beta, eps, y, save,
                         st + (size_t)w * 2 * C);
    float *rm = xalloc((size_t)C * sizeof *rm), *rv = xalloc((size_t)C * sizeof *rv);
    be->bn_running_update(C, N, (double)Bm * HW, st, 2 * (size_t)C, rmean, rvar, mom, rm, rv);
    putf("rmean_out", (size_t)C, rm);
    putf("rvar_out", (size_t)C, rv);
}

static void run_relu(void)
{
    size_t n = (size_t)dims(1)[0];
    float *y = dup_f(get("x", DT_F32, n), n), *dx = dup_f(get("dy", DT_F32, n), n);
    be->relu_fwd(n, y);
    be->relu_bwd(n, y, dx);
    putf("y", n, y);
    putf("dx", n, dx);
}

static void run_maxpool2d(void)
{
    const int *d = dims(7);
    int B = d[0], C = d[1], H = d[2], W = d[3], k = d[4], st = d[5], pad = d[6];
    if (k < 1 || st < 1 || 2 * pad > k || H + 2 * pad < k || W + 2 * pad < k)
        die("bad maxpool2d shape%s", "");
    int OH = (H + 2 * pad - k) / st + 1, OW = (W + 2 * pad - k) / st + 1;
    size_t nx = (size_t)B * C * H * W, ny = (size_t)B * C * OH * OW;
    const float *x = get("x", DT_F32, nx), *dy = get("dy", DT_F32, ny);
    float *y = xalloc(ny * sizeof *y), *dx = xalloc(nx * sizeof *dx);
    int32_t *idx = xalloc(ny * sizeof *idx);
    be->maxpool_fwd(B, C, H, W, k, st, pad, OH, OW, x, y, idx);
    be->maxpool_bwd(B, C, H, W, OH, OW, idx, dy, dx);
    putf("y", ny, y);
    put("idx", DT_I32, ny, idx);
    putf("dx", nx, dx);
}

static void run_avgpool(void)
{
    const int *d = dims(4);
    int B = d[0], C = d[1], HW = d[2] * d[3];
    size_t nx = (size_t)B * C * HW, ny = (size_t)B * C;
    const float *x = get("x", DT_F32, nx), *dy = get("dy", DT_F32, ny);
    float *y = xalloc(ny * sizeof *y), *dx = xalloc(nx * sizeof *dx);
    be->avgpool_fwd(B, C, HW, x, y);
    be->avgpool_bwd(B, C, HW, dy, dx);
    putf("y", ny, y);
    putf("dx", nx, dx);
}

static void run_adaptive_avgpool(void)
{
    const int *d = dims(6);
    int B = d[0], C = d[1], H = d[2], W = d[3], OH = d[4], OW = d[5];
    size_t nx = (size_t)B * C * H * W, ny = (size_t)B * C * OH * OW;
    const float *x = get("x", DT_F32, nx), *dy = get("dy", DT_F32, ny);
    float *y = xalloc(ny * sizeof *y), *dx = xalloc(nx * sizeof *dx);
    be->adaptive_avgpool_fwd(B, C, H, W, OH, OW, x, y);
    be->adaptive_avgpool_bwd(B, C, H, W, OH, OW, dy, dx);
    putf("y", ny, y);
    putf("dx", nx, dx);
}

static void run_linear(void)
{
    const int *d = dims(5);
    int B = d[0], in = d[1], o = d[2], relu = d[3], relu_dx = d[4];
    size_t nx = (size_t)B * in, ny = (size_t)B * o, nw = (size_t)o * in;
    const float *x = get("x", DT_F32, nx), *w = get("w", DT_F32, nw),
                *b = get("b", DT_F32, (size_t)o);
    float *y = xalloc(ny * sizeof *y), *dy = dup_f(get("dy", DT_F32, ny), ny);
    float *dx = xalloc(nx * sizeof *dx), *dw = xalloc(nw * sizeof *dw),
          *db = xalloc((size_t)o * sizeof *db);
    be->linear_fwd(B, in, o, x, w, b, y, relu);
    if (relu)
        be->relu_bwd(ny, y, dy);
    be->linear_bwd(B, in, o, x, w, dy, dx, dw, db, relu_dx, 0);
    putf("y", ny, y);
    putf("dx", nx, dx);
    putf("dw", nw, dw);
    putf("db", (size_t)o, db);
    const float *dw0 = opt("dw0", DT_F32, nw);
    if (dw0) {
        float *acc = dup_f(dw0, nw), *bacc = dup_f(get("db0", DT_F32, (size_t)o), (size_t)o);
        be->linear_bwd(B, in, o, x, w, dy, NULL, acc, bacc, 0, 1);
        putf("dw_acc", nw, acc);
        putf("db_acc", (size_t)o, bacc);
    }
}

static void run_add(void)
{
    size_t n = (size_t)dims(1)[0];
    const float *a = get("a", DT_F32, n), *b = get("b", DT_F32, n), *dy = get("dy", DT_F32, n);
    float *y = xalloc(n * sizeof *y), *da = xalloc(n * sizeof *da), *db = xalloc(n * sizeof *db);
    be->add3(n, a, b, y);
    /* the add layer's backward (src/nn/add.c), on one "sample" of n values */
    cdp_layer ly = {.kind = CDP_LAYER_ADD, .xs = {(int)n, 1, 1}, .ys = {(int)n, 1, 1}};
    cdp_layer_io io = {.be = be, .B = 1, .x = a, .x2 = b, .y = y, .dy = dy, .dx = da, .dx2 = db};
    cdp_layer_ops_of(CDP_LAYER_ADD)->bwd(&ly, &io);
    putf("y", n, y);
    putf("da", n, da);
    putf("db", n, db);
}

static void run_xent(void)
{
    const int *d = dims(2);
    int B = d[0], C = d[1];
    size_t n = (size_t)B * C;
    float *z = dup_f(get("logits", DT_F32, n), n);
    const int32_t *labels = get("labels", DT_I32, (size_t)B);
    double *stats = xalloc(2 * sizeof *stats);
    be->xent(B, C, z, labels, stats);
    double loss = stats[0] / B;
    put("loss", DT_F64, 1, &loss);
    put("correct", DT_F64, 1, &stats[1]);
    putf("dlogits", n, z);
}

/* the context and layer index run_ops gives the layer (dropout's draws) */
static cdp_layer_ctx probe_ctx;
static int probe_layer_index;

/* A layer through its cdp_layer_ops (src/nn), as a stage runs it: forward
 * in training mode, then backward with accumulate 0.  params: the names of
 * the parameter records in layout order; the outputs are y, dx and "d" +
 * each parameter's name. */
static void run_ops(cdp_layer *ly, int B, const char *const *params, int np)
{
    const cdp_layer_ops *ops = cdp_layer_ops_of(ly->kind);
    char err[256];
    if (ops->shape(ly, err, sizeof err))
        die("%s", err);
    cdp_param_desc d[8];
    int nd = ops->params ? ops->params(ly, d) : 0;
    if (nd != np)
        die("the layer has a different number of parameters than the request%s", "");
    size_t pn[8], ptot = 0;
    for (int k = 0; k < np; k++) {
        pn[k] = 1;
        for (int q = 0; q < d[k].ndim; q++)
            pn[k] *= (size_t)d[k].shape[q];
        ptot += pn[k];
    }
    const size_t nx = (size_t)B * cdp_shape_n(ly->xs), ny = (size_t)B * cdp_shape_n(ly->ys);
    float *P = xalloc(ptot * sizeof(float) + 4), *G = xalloc(ptot * sizeof(float) + 4);
    for (int k = 0, o = 0; k < np; o += (int)pn[k], k++)
        memcpy(P + o, get(params[k], DT_F32, pn[k]), pn[k] * sizeof(float));
    size_t save = (ops->save_per_sample ? ops->save_per_sample(ly) * (size_t)B : 0) +
                  (ops->save_fixed ? ops->save_fixed(ly) : 0);
    size_t wsn = ops->ws_floats ? ops->ws_floats(ly, be, B) : 0;
    const float *x = get("x", DT_F32, nx), *dy = get("dy", DT_F32, ny);
    float *y = xalloc(ny * sizeof(float)), *dx = xalloc(nx * sizeof(float));
    cdp_layer_io io = {.be = be, .B = B, .p = P, .g = G, .x = x, .y = y, .dy = dy, .dx = dx,
                       .ctx = &probe_ctx, .layer_index = probe_layer_index};
    io.save = xalloc(save * sizeof(float) + 4);
    io.ws = xalloc(wsn * sizeof(float) + 4);
    /* in place: the output starts as the input, the input's gradient as
     * the output's (as the model aliases them) */
    if (ops->storage == CDP_STORAGE_IN_PLACE)
        memcpy(y, x, nx * sizeof(float));
    ops->fwd(ly, &io, 1);
    if (ops->storage == CDP_STORAGE_IN_PLACE)
        memcpy(dx, dy, nx * sizeof(float));
    ops->bwd(ly, &io);
    putf("y", ny, y);
    putf("dx", nx, dx);
    for (int k = 0, o = 0; k < np; o += (int)pn[k], k++) {
        char name[80];
        snprintf(name, sizeof name, "d%s", params[k]);
        putf(name, pn[k], G + o);
    }
}

/* layernorm   dims B T D; eps (float32); x w b dy -> y dx dw db */
static void run_layernorm(void)
{
    const int *d = dims(3);
    cdp_layer ly = {.kind = CDP_LAYER_LAYERNORM, .xs = {d[1], 1, d[2]}};
    ly.eps = *(const float *)get("eps", DT_F32, 1);
    static const char *const p[] = {"w", "b"};
    run_ops(&ly, d[0], p, 2);
}

/* gelu        dims n; x dy -> y dx */
static void run_gelu(void)
{
    cdp_layer ly = {.kind = CDP_LAYER_GELU, .xs = {dims(1)[0], 1, 1}};
    run_ops(&ly, 1, NULL, 0);
}

/* relu6       dims n; x dy -> y dx (in place, as the model runs it) */
static void run_relu6(void)
{
    cdp_layer ly = {.kind = CDP_LAYER_RELU6, .xs = {dims(1)[0], 1, 1}};
    run_ops(&ly, 1, NULL, 0);
}

/* dropout     dims B n layer seed step sample0; p (float64); x dy -> y dx
 *             (training, with the draws of that context and layer index) */
static void run_dropout(void)
{
    const int *d = dims(6);
    cdp_layer ly = {.kind = CDP_LAYER_DROPOUT, .xs = {d[1], 1, 1}};
    ly.drop_p = *(const double *)get("p", DT_F64, 1);
    probe_ctx = (cdp_layer_ctx){ (uint64_t)d[3], d[4], d[5] };
    probe_layer_index = d[2];
    run_ops(&ly, d[0], NULL, 0);
}

/* attention   dims B T D H; x in_w in_b out_w out_b dy -> y dx din_w din_b
 *             dout_w dout_b */
static void run_attention(void)
{
    const int *d = dims(4);
    cdp_layer ly = {.kind = CDP_LAYER_ATTENTION, .xs = {d[1], 1, d[2]}, .heads = d[3]};
    static const char *const p[] = {"in_w", "in_b", "out_w", "out_b"};
    run_ops(&ly, d[0], p, 4);
}

/* tokens      dims B D h w; x ([B, D, h, w]) cls pos dy ([B, D]): the ViT's
 *             input path, class_token, pos_embed and token_select in turn
 *             -> t (tokens), y, dx dcls dpos */
static void run_tokens(void)
{
    const int *d = dims(4);
    const int B = d[0], D = d[1], n = d[2] * d[3], T = n + 1;
    const size_t nx = (size_t)B * D * n, nt = (size_t)B * T * D, ny = (size_t)B * D;
    const float *x = get("x", DT_F32, nx), *cls = get("cls", DT_F32, (size_t)D),
                *pos = get("pos", DT_F32, (size_t)T * D), *dy = get("dy", DT_F32, ny);
    cdp_layer lc = {.kind = CDP_LAYER_CLASS_TOKEN, .xs = {D, d[2], d[3]}};
    cdp_layer lp = {.kind = CDP_LAYER_POS_EMBED, .xs = {T, 1, D}, .ys = {T, 1, D}};
    cdp_layer ls = {.kind = CDP_LAYER_TOKEN_SELECT, .xs = {T, 1, D}};
    char err[256];
    if (cdp_layer_ops_of(lc.kind)->shape(&lc, err, sizeof err) ||
        cdp_layer_ops_of(ls.kind)->shape(&ls, err, sizeof err))
        die("%s", err);
    float *t0 = xalloc(nt * sizeof(float)), *t1 = xalloc(nt * sizeof(float)),
          *y = xalloc(ny * sizeof(float)), *dt1 = xalloc(nt * sizeof(float)),
          *dt0 = xalloc(nt * sizeof(float)), *dx = xalloc(nx * sizeof(float)),
          *dcls = xalloc((size_t)D * sizeof(float)), *dpos = xalloc(nt / B * sizeof(float));
    cdp_layer_io a = {.be = be, .B = B, .p = cls, .g = dcls, .x = x, .y = t0, .dy = dt0, .dx = dx};
    cdp_layer_io b = {.be = be, .B = B, .p = pos, .g = dpos, .x = t0, .y = t1, .dy = dt1, .dx = dt0};
    cdp_layer_io c = {.be = be, .B = B, .x = t1, .y = y, .dy = dy, .dx = dt1};
    cdp_layer_ops_of(lc.kind)->fwd(&lc, &a, 1);
    cdp_layer_ops_of(lp.kind)->fwd(&lp, &b, 1);
    cdp_layer_ops_of(ls.kind)->fwd(&ls, &c, 1);
    cdp_layer_ops_of(ls.kind)->bwd(&ls, &c);
    cdp_layer_ops_of(lp.kind)->bwd(&lp, &b);
    cdp_layer_ops_of(lc.kind)->bwd(&lc, &a);
    putf("t", nt, t1);
    putf("y", ny, y);
    putf("dx", nx, dx);
    putf("dcls", (size_t)D, dcls);
    putf("dpos", nt / B, dpos);
}

static const struct {
    const char *name;
    void (*run)(void);
} layers[] = {
    {"layernorm", run_layernorm}, {"gelu", run_gelu}, {"attention", run_attention},
    {"tokens", run_tokens},   {"relu6", run_relu6},  {"dropout", run_dropout},
    {"conv2d", run_conv2d},   {"batchnorm2d", run_batchnorm2d}, {"relu", run_relu},
    {"maxpool2d", run_maxpool2d}, {"avgpool", run_avgpool}, {"adaptive_avgpool", run_adaptive_avgpool},     {"linear", run_linear},
    {"add", run_add},         {"xent", run_xent},
};

int main(int argc, char **argv)
{
    cdp_backend_cpu_preinit(argc, argv);
    if (argc < 3 || argc % 2 == 0) {
        fprintf(stderr, "usage: layer_probe REQUEST OUTPUT [REQUEST OUTPUT ...]\n");
        return 2;
    }
    be = cdp_backend_cpu(1);
    for (int a = 1; a < argc; a += 2) {
        read_request(argv[a]);
        rec *lr = find("layer");
        if (!lr || lr->dtype != DT_BYTES)
            die("record layer (bytes) missing%s", "");
        char kind[64];
        size_t kl = lr->n < sizeof kind - 1 ? (size_t)lr->n : sizeof kind - 1;
        memcpy(kind, lr->data, kl);
        kind[kl] = 0;
        out = fopen(argv[a + 1], "wb");
        if (!out)
            die("cannot write %s", argv[a + 1]);
        fwrite("CDPLPOT1", 1, 8, out);
        size_t i;
        for (i = 0; i < sizeof layers / sizeof layers[0]; i++)
            if (!strcmp(kind, layers[i].name)) {
                layers[i].run();
                break;
            }
        if (i == sizeof layers / sizeof layers[0])
            die("unknown layer %s", kind);
        if (fclose(out))
            die("write error on %s", argv[a + 1]);
    }
    return 0;
}
