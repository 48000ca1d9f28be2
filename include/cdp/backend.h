/* The backend interface: memory and kernels, nothing else.
 *
 * Everything above this interface (model, executor, reference) works on
 * opaque "device" pointers and never touches their contents directly, so the
 * same scheduler and executor drive the CPU backend (src/cpu, OpenBLAS +
 * OpenMP) and the GPU backend (src/gpu, cuBLAS + CUDA kernels).
 *
 * Shapes are row-major, like PyTorch: activations [B, features], Linear
 * weights [out, in].  Every kernel must be deterministic: the same inputs give
 * the same bits on every call (the cdp rules are specified bit for bit).
 */
#ifndef CDP_BACKEND_H
#define CDP_BACKEND_H

#include <stddef.h>
#include <stdint.h>

/* Shape of one convolution over a micro-batch (see conv2d_fwd). */
typedef struct cdp_conv_shape {
    int B, Cin, H, W, Cout, KH, KW, stride, pad, OH, OW;
} cdp_conv_shape;

/* the number of weights, Cout*Cin*KH*KW (what dw holds) */
static inline size_t cdp_conv_weight_count(const cdp_conv_shape *s)
{
    return (size_t)s->Cout * (size_t)s->Cin * (size_t)s->KH * (size_t)s->KW;
}

/* The scalars of one AdamW update (backend adamw), each computed on the
 * host in double from the float lr and rounded to float once:
 * decay = 1 - lr*wd, beta1, 1 - beta1, beta2, 1 - beta2,
 * bc2_sqrt = sqrt(1 - beta2^(c+1)), step_size = lr / (1 - beta1^(c+1)), eps. */
typedef struct cdp_adamw_coef {
    float decay, beta1, one_minus_beta1, beta2, one_minus_beta2, bc2_sqrt, step_size, eps;
} cdp_adamw_coef;

typedef struct cdp_backend {
    const char *name;   /* "cpu", "cuda" */
    int host_memory;    /* 1 if pointers from alloc() are host-addressable */

    /* ---- memory (device memory on a GPU; never managed memory) ---- */
    void *(*alloc)(size_t bytes);                 /* NULL on failure; 64-byte aligned */
    void (*free)(void *p);
    void (*to_device)(void *dst, const void *host_src, size_t bytes);
    void (*to_host)(void *host_dst, const void *src, size_t bytes);
    void (*copy)(void *dst, const void *src, size_t bytes);
    void (*zero)(void *dst, size_t bytes);
    void (*sync)(void);   /* wait until all queued work is done (before MPI reads a buffer) */

    /* ---- kernels ---- */
    /* y[B,out] = x[B,in] * W[out,in]^T + b[out], then y = max(y, 0) when
     * relu (the same bits as relu_fwd afterwards; fused to save a pass) */
    void (*linear_fwd)(int B, int in, int out, const float *x, const float *W,
                       const float *b, float *y, int relu);
    /* y = max(y, 0), in place */
    void (*relu_fwd)(size_t n, float *y);
    /* dy = y > 0 ? dy : 0, in place on dy (y is the ReLU output) */
    void (*relu_bwd)(size_t n, const float *y, float *dy);
    /* dW[out,in] = dy^T x ; db[out] = sum over rows of dy ; dx[B,in] = dy W
     * (dx skipped when NULL), then dx = x > 0 ? dx : 0 when relu_dx (x is
     * then a ReLU output: the same bits as relu_bwd(x, dx) afterwards).
     * dW and db are overwritten, or with accumulate, added to: dW += dy^T x,
     * db += column sums (see accumulate_exact). */
    void (*linear_bwd)(int B, int in, int out, const float *x, const float *W,
                       const float *dy, float *dx, float *dW, float *db, int relu_dx,
                       int accumulate);
    /* 1 if linear_bwd(accumulate) gives, for this shape, the bits of
     * linear_bwd into a scratch buffer followed by add(): then the executor
     * sums a stage gradient in place, without the scratch buffer and the
     * extra pass.  NULL: never (the executor keeps the scratch path). */
    int (*accumulate_exact)(int B, int in, int out);
    /* Mean softmax cross-entropy over the B rows of logits[B,C], numerically
     * stable.  Overwrites logits with dLoss/dlogits = (softmax - onehot) / B.
     * stats (backend memory, 2 doubles): stats[0] += sum of per-row losses,
     * stats[1] += number of rows whose argmax equals the label. */
    void (*xent)(int B, int C, float *logits, const int32_t *labels, double *stats);
    /* acc[i] += x[i] */
    void (*add)(size_t n, float *acc, const float *x);
    /* x[i] *= a */
    void (*scale)(size_t n, float *x, float a);
    /* torch.optim.SGD on the gradient g * gscale (the executor passes the
     * summed gradient and 1/N, the same bits as scaling it first):
     * d = g*gscale + wd*theta; buf = first ? d : mu*buf + d; theta -= lr*buf.
     * theta_out may equal theta_in or g.  zero_g (theta_out != g): g is set
     * to +0 once read, so that the next step's first backward can add to it
     * (beta = 1) instead of having the GEMM clear it in a pass of its own. */
    void (*sgd)(size_t n, const float *theta_in, float *theta_out, float *g, float gscale,
                float *buf, float lr, float mu, float wd, int first, int zero_g);
    /* torch.optim.AdamW (no amsgrad) on gs = g * gscale, in float, each
     * operation rounded, in this order (c: coefficients of the update,
     * cdp_optim_step_at):
     *   theta = theta_in * c->decay
     *   m = c->beta1 * (first ? 0 : m) + c->one_minus_beta1 * gs
     *   v = c->beta2 * (first ? 0 : v) + (c->one_minus_beta2 * gs) * gs
     *   theta_out = theta - c->step_size * (m / (sqrt(v) / c->bc2_sqrt + c->eps))
     * theta_out may equal theta_in or g; zero_g as sgd's. */
    void (*adamw)(size_t n, const float *theta_in, float *theta_out, float *g, float gscale,
                  float *m, float *v, const struct cdp_adamw_coef *c, int first, int zero_g);
    /* x[B,C,HW] from the bytes host_pixels[B,C,HW] (on the host), as
     * torchvision's ToTensor then Normalize, in float: v = (float)p / 255.0f;
     * x = norm ? (v - norm[c]) / norm[C + c] : v.  norm: NULL or a host
     * array of 2*C floats, the C means then the C stds. */
    void (*pixels_to_input)(int B, int C, int HW, const uint8_t *host_pixels,
                            const float *norm, float *x);

    /* ---- image kernels (NCHW float32, PyTorch's layouts).  A backend may
     * leave these NULL: models that need them then refuse to run on it with
     * a message (cdp_model_check_backend).  Every one is deterministic and
     * gives the same bits for every thread count. ---- */

    /* Convolution, y[B,Cout,OH,OW] = conv(x[B,Cin,H,W], w[Cout,Cin,KH,KW]) + b
     * (b NULL: no bias), OH = (H + 2*pad - KH)/stride + 1, likewise OW; zero
     * padding.  ws: conv2d_ws_floats(s) floats of scratch. */
    void (*conv2d_fwd)(const struct cdp_conv_shape *s, const float *x, const float *w,
                       const float *b, float *y, float *ws);
    /* dw[Cout,Cin,KH,KW] = dL/dw, db[Cout] = dL/db (db NULL: no bias),
     * dx[B,Cin,H,W] = dL/dx (skipped when dx is NULL), from dy[B,Cout,OH,OW].
     * accumulate: dw += dL/dw and db += dL/db, with the bits of computing
     * them into a buffer of their own and adding that with add() after. */
    void (*conv2d_bwd)(const struct cdp_conv_shape *s, const float *x, const float *w,
                       const float *dy, float *dx, float *dw, float *db, int accumulate,
                       float *ws);
    size_t (*conv2d_ws_floats)(const struct cdp_conv_shape *s);

    /* BatchNorm in training mode over one micro-batch, x[B,C,HW]: per
     * channel c, over the n = B*HW values in the order b = 0..B-1, p =
     * 0..HW-1, in double: mean = sum/n, M2 = sum of (x - mean)^2; then
     * invstd = (float)(1 / sqrt(M2/n + eps)) and
     * y = (x - (float)mean) * invstd * gamma + beta in float, in that order.
     * Keeps save[2C] = {(float)mean[C], invstd[C]} for the backward and
     * writes stats[2C] = {mean[C], M2[C]} in double (the step's running
     * statistics are combined from these, doc/reference.md section 3.5). */
    void (*bn_fwd_train)(int B, int C, int HW, const float *x, const float *gamma,
                         const float *beta, float eps, float *y, float *save, double *stats);
    /* Evaluation: y = (x - rmean) / sqrt(rvar + eps) * gamma + beta. */
    void (*bn_fwd_eval)(int B, int C, int HW, const float *x, const float *gamma,
                        const float *beta, const float *rmean, const float *rvar, float eps,
                        float *y);
    /* Backward of bn_fwd_train: with xhat = (x - mean) * invstd,
     * dbeta = sum dy, dgamma = sum dy*xhat (per channel, double, fixed
     * order), dx = gamma*invstd/n * (n*dy - dbeta - xhat*dgamma).  dx may
     * equal dy.  accumulate: dgamma, dbeta added to (as conv2d_bwd). */
    void (*bn_bwd)(int B, int C, int HW, const float *x, const float *gamma,
                   const float *save, const float *dy, float *dx, float *dgamma,
                   float *dbeta, int accumulate);
    /* The step's running statistics (doc/reference.md section 3.5): combines N
     * per-micro-batch (mean[C], M2[C]) pairs, pair w at stats + w*stride
     * (doubles), each over n values, in worker order w = 0..N-1 with Chan et
     * al.'s pairwise formula in double; then, with s_mean and the unbiased
     * s_var = M2/(N*n - 1) of the whole step, rmean_out = (1-m)*rmean_in +
     * m*(float)s_mean and rvar_out likewise, in float.  The outputs may
     * alias the inputs but not the stats. */
    void (*bn_running_update)(int C, int N, double n, const double *stats, size_t stride,
                              const float *rmean_in, const float *rvar_in, float m,
                              float *rmean_out, float *rvar_out);

    /* A double as three floats holding 22, 22 and 20 of its bits as
     * integers (0 <= v < 2^22), and back.  Sums that add +0 to them (the
     * gradient's reductions) leave them bitwise intact, as they would not
     * leave the two halves of a double read as floats (-0 and NaN
     * patterns).  dst has 3n floats / n doubles. */
    void (*f64_pack)(size_t n, const double *src, float *dst);
    void (*f64_unpack)(size_t n, const float *src, double *dst);

    /* Max pooling, k x k window, stride, padding that never wins (as
     * nn.MaxPool2d), y[B,C,OH,OW]; idx[B,C,OH,OW] keeps the argmax (the
     * first maximum in window order) as an offset in its input plane. */
    void (*maxpool_fwd)(int B, int C, int H, int W, int k, int stride, int pad, int OH,
                        int OW, const float *x, float *y, int32_t *idx);
    /* dx = 0, then dx[argmax] += dy, in output order. */
    void (*maxpool_bwd)(int B, int C, int H, int W, int OH, int OW, const int32_t *idx,
                        const float *dy, float *dx);
    /* Global average pooling, y[B,C] = mean over HW of x[B,C,HW] (sum in
     * float in order p = 0..HW-1, then times 1/HW); backward
     * dx[b,c,p] = dy[b,c] * (1/HW). */
    void (*avgpool_fwd)(int B, int C, int HW, const float *x, float *y);
    void (*avgpool_bwd)(int B, int C, int HW, const float *dy, float *dx);
    /* y = a + b (y may alias a or b). */
    void (*add3)(size_t n, const float *a, const float *b, float *y);

    /* ---- transformer kernels (tokens [B, T, D] row-major, PyTorch's
     * layout).  A backend may leave these NULL, as the image kernels.  Each
     * is deterministic and gives the same bits for every thread count. ---- */

    /* For b < batch: C_b = alpha * op(A_b) op(B_b) + beta * C_b, row-major
     * (C_b is M x N, op(A_b) M x K, op(B_b) K x N), op = transpose when tA
     * (tB) is 1; X_b = X + b * sX; lda, ldb, ldc: row strides in floats.
     * beta 0: C is written without being read (NaN in C does not leak). */
    void (*gemm_batched)(int tA, int tB, int M, int N, int K, float alpha, const float *A,
                         int lda, size_t sA, const float *Bm, int ldb, size_t sB, float beta,
                         float *C, int ldc, size_t sC, int batch);
    /* Row softmax in place over x[R, N], numerically stable: per row, with
     * mx = max, e_j = expf(x_j - mx), s = sum of e_j in float in order
     * j = 0..N-1 (as one thread would), x_j = e_j / s. */
    void (*softmax_fwd)(int R, int N, float *x);
    /* Backward of softmax_fwd, in place on dp: per row, with P its output,
     * dot = sum of dp_j * P_j (float, order j = 0..N-1),
     * dp_j = scale * (P_j * (dp_j - dot)). */
    void (*softmax_bwd)(int R, int N, float scale, const float *P, float *dp);
    /* LayerNorm over the last dim of x[R, D] (nn.LayerNorm): per row, in
     * double over d = 0..D-1: mean = sum/D, var = sum of (x - mean)^2 / D;
     * rstd = (float)(1 / sqrt(var + eps)); y = (x - (float)mean) * rstd *
     * gamma + beta in float, in that order.  save[2R] = {(float)mean[R],
     * rstd[R]} for the backward.  y may not alias x. */
    void (*ln_fwd)(int R, int D, const float *x, const float *gamma, const float *beta,
                   float eps, float *y, float *save);
    /* Backward of ln_fwd: with xhat = (x - mean) * rstd and g = dy * gamma,
     * per row (double): a = sum g, b = sum g * xhat; dx = rstd * (g - a/D -
     * xhat * b/D); dgamma = sum over rows of dy * xhat, dbeta = sum over rows
     * of dy (double, rows in order 0..R-1, whatever the threads).  dx may
     * equal dy, or be NULL (not computed: a stage's first layer).  accumulate: dgamma, dbeta added to (as conv2d_bwd). */
    void (*ln_bwd)(int R, int D, const float *x, const float *gamma, const float *save,
                   const float *dy, float *dx, float *dgamma, float *dbeta, int accumulate);
    /* Exact GELU (nn.GELU(), the erf form): y = x * Phi(x), backward
     * dx = dy * (Phi(x) + x * phi(x)), Phi the standard normal CDF and phi
     * its density, to float accuracy (relative error below 1e-6 + 1e-7 x^2:
     * the CPU computes them in float, src/cpu/kernels_gelu.c; other
     * backends may differ by rounding).  y may equal x; dx may equal dy. */
    void (*gelu_fwd)(size_t n, const float *x, float *y);
    void (*gelu_bwd)(size_t n, const float *x, const float *dy, float *dx);
    /* Patch tokens and class token (torchvision's _process_input and
     * torch.cat of class_token): x[B, D, n] (a conv output, n = h*w) ->
     * y[B, n+1, D] with y[b,0,:] = cls and y[b,1+i,d] = x[b,d,i].
     * Backward: dx[b,d,i] = dy[b,1+i,d]; dcls = sum over b (float, order
     * b = 0..B-1) of dy[b,0,:], written, or added to with accumulate. */
    void (*tokens_fwd)(int B, int D, int n, const float *x, const float *cls, float *y);
    void (*tokens_bwd)(int B, int D, int n, const float *dy, float *dx, float *dcls,
                       int accumulate);
    /* y[b, :] = x[b, :] + p for b < R, rows of N (a position embedding
     * broadcast over the batch); y may equal x. */
    void (*add_rows)(int R, int N, const float *x, const float *p, float *y);
    /* out[N] = sum over r = 0..R-1 of x[r, :] (float, in row order, whatever
     * the threads), written, or added to out with accumulate (the bits of
     * adding the sum afterwards). */
    void (*sum_rows)(int R, int N, const float *x, float *out, int accumulate);
    /* dst[r * dld + j] = src[r * sld + j] for r < R, j < N (a strided copy:
     * selecting the class token, scattering its gradient). */
    void (*copy_rows)(int R, int N, const float *src, size_t sld, float *dst, size_t dld);

    /* Human-readable description for the banner (BLAS kernel, threads, device). */
    const char *(*describe)(void);
    /* What decides this backend's bits, as "field: value" lines, the first
     * "backend: NAME": the BLAS kernel, the GEMM split and the convolution
     * paths; the device and its libraries.  Ranks whose lines differ would
     * not compute the weights of any single run (threads are not in it:
     * the bits do not depend on them). */
    const char *(*numerics)(void);

    /* Optional: host memory for staging MPI messages when MPI cannot read
     * the backend's memory (pinned memory on GPUs).  NULL: malloc/free. */
    void *(*alloc_host)(size_t bytes);
    void (*free_host)(void *p);
} cdp_backend;

/* CPU backend (always built).  threads <= 0 picks a default. */
const cdp_backend *cdp_backend_cpu(int threads);

/* --flush-denormals: denormal floats are read and written as zero by the
 * calling thread and every thread of the OpenMP pool (and so by every thread
 * that computes in the CPU backend), as torch.set_flush_denormal(True).
 * 0, or -1 with a message in err on a CPU this build has no mode for. */
int cdp_cpu_flush_denormals(char *err, size_t errlen);

/* Called first thing in main(), before MPI_Init: makes sure the BLAS library
 * runs the kernel this CPU supports (re-executing the program with
 * OPENBLAS_CORETYPE set when the library misdetected it) and that the
 * OpenMP and BLAS thread pools do not fight.  May not return (execv). */
void cdp_backend_cpu_preinit(int argc, char **argv);
/* The user's OMP_NUM_THREADS when OpenMP rejects it (0, a word: libgomp
 * then warns and ignores it), else NULL.  cdp_backend_cpu_preinit takes it
 * out of the environment it re-executes with, so that libgomp warns once. */
const char *cdp_cpu_rejected_omp_threads(void);

/* Name of the kernel the BLAS library runs (openblas_get_corename(), e.g.
 * "SkylakeX", "Haswell", "Prescott"), for the banner. */
const char *cdp_cpu_blas_kernel(void);

/* The GEMM split (kernels_cpu.c) this machine would pick: CDP_GEMM_SPLIT,
 * else its CPUs online rounded down to a power of two, at most 8; and the
 * one the next cdp_backend_cpu uses instead (0: its own), so that ranks on
 * hosts of different CPU counts can use rank 0's and agree bit for bit. */
int cdp_cpu_gemm_split_default(void);
void cdp_cpu_use_gemm_split(int split);

/* GPU backend; NULL with a message in err when this build has no CUDA or no
 * usable device. */
const cdp_backend *cdp_backend_cuda(int local_rank, char *err, size_t errlen);

/* Whether MPI may be given device pointers from this backend directly. */
int cdp_backend_mpi_device_ok(const cdp_backend *be);

#endif
