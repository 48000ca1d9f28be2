/* Decoding throughput of --data folder's training path: every training
 * image of DIR decoded, RandomResizedCrop(S) and flipped, once (one epoch
 * of one worker's micro-batches of B), through the pool of io/prefetch.h on
 * T threads, K steps ahead, as cdp_run's batcher takes them.  Prints
 * images/s and a result line (bench/README).
 *   folder_decode DIR S T [B] [K] */
#include <stdio.h>
#include <stdlib.h>
#include "io/data.h"
#include "io/prefetch.h"
#include "util/clock.h"

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: folder_decode DIR S T [B] [K]\n");
        return 2;
    }
    const int S = atoi(argv[2]), T = atoi(argv[3]);
    const int B = argc > 4 ? atoi(argv[4]) : 32, K = argc > 5 ? atoi(argv[5]) : 2;
    char spec[1200], err[1024];
    snprintf(spec, sizeof spec, "folder:%s:size=%d", argv[1], S);
    cdp_data d;
    const double t0 = cdp_now_s();
    if (cdp_data_open(spec, NULL, 1, B, 0, &d, err, sizeof err)) {
        fprintf(stderr, "folder_decode: %s\n", err);
        return 1;
    }
    const double t_open = cdp_now_s() - t0;
    const int64_t steps = d.train.n / B;
    cdp_prefetch *p = cdp_prefetch_new(d.train.folder, d.train.n, 1, B, steps, 1, 1, T, K);
    uint8_t *px = malloc((size_t)B * d.train.dim);
    if (!p || !px) {
        fprintf(stderr, "folder_decode: out of memory\n");
        return 1;
    }
    const double t1 = cdp_now_s();
    for (int64_t k = 0; k < steps; k++)
        cdp_prefetch_get(p, k, 0, px);
    const double dt = cdp_now_s() - t1;
    const double ips = (double)(steps * B) / dt;
    printf("cdp: %lld images of %s, S=%d, %d decoding thread%s (and the asking one), B=%d, "
           "%d ahead: %.3f s, %.1f images/s (opening: %.3f s, validation decoded, training "
           "headers read)\n", (long long)(steps * B), argv[1], S, T, T == 1 ? "" : "s", B, K, dt,
           ips, t_open);
    printf("result\tfolder-decode\tcdp S=%d T=%d B=%d\timages_per_s\t%.1f\timages/s\n", S, T, B, ips);
    cdp_prefetch_free(p);
    free(px);
    cdp_data_free(&d);
    return 0;
}
