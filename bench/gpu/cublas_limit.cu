/* cublas_limit: the GEMM-only bound of an MLP training step on one GPU, the
 * GPU counterpart of sgemm_limit.c.
 *
 * Times cublasSgemm for the three GEMMs of every Linear layer (forward
 * y = x W^T, weight gradient dW = dy^T x, input gradient dx = dy W; no dx
 * for the first layer), with the operand layouts src/gpu/kernels.cu uses,
 * and prints the time per shape, the time-weighted total and the samples/s
 * that the GEMMs alone allow.  Each shape: best of 7 rounds of 20 calls,
 * timed with CUDA events.  FP32, default math mode (no TF32), like cdp.
 *
 *     nvcc -O2 bench/gpu/cublas_limit.cu -o cublas_limit -lcublas
 *     ./cublas_limit [DIMS [BATCH]]        e.g. ./cublas_limit 784-4096-4096-4096-10 1024
 *
 * Result lines (bench/README) last: GFLOP/s per shape, then the totals.
 * Exit status 77 when no CUDA device is usable (as the test suite's skip). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>

#include "../lib/bench_util.h"

#define CK(call)                                                                    \
    do {                                                                            \
        cudaError_t e_ = (call);                                                    \
        if (e_ != cudaSuccess) {                                                    \
            fprintf(stderr, "cublas_limit: %s: %s\n", #call, cudaGetErrorString(e_)); \
            exit(1);                                                                \
        }                                                                           \
    } while (0)
#define CB(call)                                                                    \
    do {                                                                            \
        cublasStatus_t s_ = (call);                                                 \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                          \
            fprintf(stderr, "cublas_limit: %s failed (%d)\n", #call, (int)s_);      \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

enum { NT, TN, NN };
static const char *const op_name[] = {"fwd  NT", "dW   TN", "dx   NN"};
static const char *const op_label[] = {"fwd_NT", "dW_TN", "dx_NN"};   /* in result lines */

/* The call of src/gpu/kernels.cu for layer in -> out at batch B. */
static void gemm(cublasHandle_t h, int op, int B, int in, int out, const float *x,
                 const float *W, const float *dy, float *y, float *dW, float *dx)
{
    const float one = 1.0f, zero = 0.0f;
    if (op == NT)
        CB(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, out, B, in, &one, W, in, x, in, &zero, y, out));
    else if (op == TN)
        CB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, in, out, B, &one, x, in, dy, out, &zero, dW, in));
    else
        CB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, in, B, out, &one, W, in, dy, out, &zero, dx, in));
}

int main(int argc, char **argv)
{
    const char *dims_s = argc > 1 ? argv[1] : "784-4096-4096-4096-10";
    int B = argc > 2 ? atoi(argv[2]) : 1024;
    int dims[64], n = 0;
    char *copy = strdup(dims_s);
    for (char *t = strtok(copy, "-"); t && n < 64; t = strtok(NULL, "-"))
        dims[n++] = atoi(t);
    free(copy);
    if (n < 2 || B < 1) {
        fprintf(stderr, "usage: cublas_limit [DIMS [BATCH]]   e.g. 784-4096-4096-4096-10 1024\n");
        return 2;
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        printf("cublas_limit: no CUDA device\n");
        return 77;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    int wmax = 0;
    for (int j = 0; j < n; j++)
        if (dims[j] > wmax) wmax = dims[j];
    float *x, *W, *dy, *y, *dW, *dx;
    size_t act = (size_t)B * wmax, par = (size_t)wmax * wmax;
    CK(cudaMalloc(&x, act * 4)); CK(cudaMalloc(&dy, act * 4)); CK(cudaMalloc(&y, act * 4));
    CK(cudaMalloc(&dx, act * 4)); CK(cudaMalloc(&W, par * 4)); CK(cudaMalloc(&dW, par * 4));
    CK(cudaMemset(x, 0, act * 4)); CK(cudaMemset(dy, 0, act * 4)); CK(cudaMemset(W, 0, par * 4));
    cublasHandle_t h;
    CB(cublasCreate(&h));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    printf("device %s; MLP %s, batch %d, cuBLAS SGEMM (FP32)\n", prop.name, dims_s, B);
    char cfg[200], shape_cfg[260];
    snprintf(cfg, sizeof cfg, "mlp:%s B=%d", dims_s, B);
    double total_s = 0.0, flops = 0.0;
    for (int j = 0; j + 1 < n; j++) {
        int in = dims[j], out = dims[j + 1];
        for (int op = NT; op <= NN; op++) {
            if (op == NN && j == 0)
                continue;   /* no input gradient for the network's input */
            const int calls = 20;
            float best = 1e30f;
            gemm(h, op, B, in, out, x, W, dy, y, dW, dx);   /* warm-up */
            for (int round = 0; round < 7; round++) {
                CK(cudaEventRecord(e0));
                for (int c = 0; c < calls; c++)
                    gemm(h, op, B, in, out, x, W, dy, y, dW, dx);
                CK(cudaEventRecord(e1));
                CK(cudaEventSynchronize(e1));
                float ms;
                CK(cudaEventElapsedTime(&ms, e0, e1));
                if (ms < best) best = ms;
            }
            double s = best / 1e3 / calls, f = 2.0 * B * in * out;
            printf("  layer %d %5d -> %-5d %s %10.1f us %8.1f TFLOP/s\n", j, in, out, op_name[op],
                   s * 1e6, f / s / 1e12);
            snprintf(shape_cfg, sizeof shape_cfg, "%s layer%d %d->%d %s", cfg, j, in, out,
                     op_label[op]);
            bench_result("cublas-limit", shape_cfg, "gflops", f / s / 1e9, "GFLOP/s");
            total_s += s;
            flops += f;
        }
    }
    printf("total: %.3f ms per step of %d samples, %.1f TFLOP/s, GEMM bound %.0f samples/s\n",
           total_s * 1e3, B, flops / total_s / 1e12, B / total_s);
    bench_result_gemm_bound("cublas-limit", cfg, total_s, flops, B);
    bench_results_end();
    cublasDestroy(h);
    return 0;
}
