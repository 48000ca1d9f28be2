/* The decoding pool of io/prefetch.h: slots of one micro-batch each, filled
 * sample by sample by the threads, earliest step first. */
#include "io/prefetch.h"
#include "io/data.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERR_LEN 512

enum { FREE, WORK, DONE };

typedef struct slot {
    int64_t k, epoch;
    int i, state;
    int next_j;         /* WORK: the next sample to start */
    int pending;        /* WORK: samples not finished */
    int consumed;       /* DONE: taken at least once (may be reused) */
    int64_t *idx;       /* B sample indices */
    uint8_t *pixels;    /* B * dim */
    char *errs;         /* B * ERR_LEN, "" when sample j decoded */
} slot;

struct cdp_prefetch {
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    pthread_t *th;
    int nth, stop;
    slot *s;
    int ns;
    const cdp_image_folder *f;
    int64_t n, spe;
    int N, B, shuffle, ahead;
    uint64_t seed;
    size_t dim;
    unsigned char *want;        /* N: the workers this rank has asked for */
    int64_t *perm[2], perm_epoch[2];
};

static slot *find(cdp_prefetch *p, int64_t k, int i)
{
    for (int t = 0; t < p->ns; t++)
        if (p->s[t].state != FREE && p->s[t].k == k && p->s[t].i == i)
            return &p->s[t];
    return NULL;
}

/* A free slot, else the taken one of the earliest step; NULL if none. */
static slot *claim(cdp_prefetch *p)
{
    slot *best = NULL;
    for (int t = 0; t < p->ns; t++) {
        slot *s = &p->s[t];
        if (s->state == FREE)
            return s;
        if (s->state == DONE && s->consumed && (!best || s->k < best->k))
            best = s;
    }
    return best;
}

/* The permutation of epoch e (two are kept: a step ahead may be in the
 * next epoch). */
static const int64_t *perm_for(cdp_prefetch *p, int64_t e)
{
    for (int t = 0; t < 2; t++)
        if (p->perm_epoch[t] == e)
            return p->perm[t];
    const int t = p->perm_epoch[0] < p->perm_epoch[1] ? 0 : 1;
    cdp_epoch_permutation(p->n, p->seed, e, p->shuffle, p->perm[t]);
    p->perm_epoch[t] = e;
    return p->perm[t];
}

static void fill(cdp_prefetch *p, slot *s, int64_t k, int i)
{
    const int64_t e = k / p->spe;
    const int64_t pos = (k % p->spe) * p->N * p->B + (int64_t)i * p->B;
    memcpy(s->idx, perm_for(p, e) + pos, (size_t)p->B * sizeof *s->idx);
    s->k = k;
    s->i = i;
    s->epoch = e;
    s->state = WORK;
    s->next_j = 0;
    s->pending = p->B;
    s->consumed = 0;
}

/* The WORK slot with samples to start of the earliest (step, worker). */
static slot *pick(cdp_prefetch *p)
{
    slot *best = NULL;
    for (int t = 0; t < p->ns; t++) {
        slot *s = &p->s[t];
        if (s->state == WORK && s->next_j < p->B &&
            (!best || s->k < best->k || (s->k == best->k && s->i < best->i)))
            best = s;
    }
    return best;
}

/* Decodes sample j of s, the lock released meanwhile. */
static void run_one(cdp_prefetch *p, slot *s, int j)
{
    pthread_mutex_unlock(&p->mu);
    char *err = s->errs + (size_t)j * ERR_LEN;
    err[0] = '\0';
    cdp_image_folder_sample(p->f, p->seed, s->epoch, s->idx[j], s->pixels + (size_t)j * p->dim,
                            err, ERR_LEN);
    pthread_mutex_lock(&p->mu);
    if (--s->pending == 0) {
        s->state = DONE;
        pthread_cond_broadcast(&p->done);
    }
}

static void *thread_main(void *arg)
{
    cdp_prefetch *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        slot *s = pick(p);
        if (!s) {
            pthread_cond_wait(&p->work, &p->mu);
            continue;
        }
        run_one(p, s, s->next_j++);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

cdp_prefetch *cdp_prefetch_new(const cdp_image_folder *f, int64_t n, int N, int B,
                               int64_t steps_per_epoch, uint64_t seed, int shuffle,
                               int threads, int ahead)
{
    cdp_prefetch *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->f = f;
    p->n = n;
    p->N = N;
    p->B = B;
    p->spe = steps_per_epoch;
    p->seed = seed;
    p->shuffle = shuffle;
    p->ahead = ahead;
    p->dim = (size_t)3 * f->size * f->size;
    /* every worker's next `ahead` steps, the one asked for, and one more
     * so that a micro-batch asked for again (the backward's input) is
     * usually still there */
    p->ns = (ahead + 2) * N;
    p->s = calloc((size_t)p->ns, sizeof *p->s);
    p->want = calloc((size_t)N, 1);
    p->perm[0] = malloc((size_t)n * sizeof(int64_t));
    p->perm[1] = malloc((size_t)n * sizeof(int64_t));
    p->perm_epoch[0] = p->perm_epoch[1] = -1;
    p->th = calloc(threads > 0 ? (size_t)threads : 1, sizeof *p->th);
    int ok = p->s && p->want && p->perm[0] && p->perm[1] && p->th;
    for (int t = 0; ok && t < p->ns; t++) {
        slot *s = &p->s[t];
        s->idx = malloc((size_t)B * sizeof *s->idx);
        s->pixels = malloc((size_t)B * p->dim);
        s->errs = malloc((size_t)B * ERR_LEN);
        ok = s->idx && s->pixels && s->errs;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    for (int t = 0; ok && t < threads; t++) {
        ok = pthread_create(&p->th[t], NULL, thread_main, p) == 0;
        if (ok)
            p->nth++;
    }
    if (!ok) {
        cdp_prefetch_free(p);
        return NULL;
    }
    return p;
}

/* Decodes worker i's micro-batch of step k straight into pixels, on the
 * caller alone: when every slot holds a micro-batch not yet taken. */
static void decode_direct(cdp_prefetch *p, int64_t k, int i, uint8_t *pixels)
{
    const int64_t e = k / p->spe;
    const int64_t *idx = perm_for(p, e) + (k % p->spe) * p->N * p->B + (int64_t)i * p->B;
    int64_t *copy = malloc((size_t)p->B * sizeof *copy);
    if (!copy) {
        fprintf(stderr, "cdp_run: error: out of memory decoding a micro-batch\n");
        exit(1);
    }
    memcpy(copy, idx, (size_t)p->B * sizeof *copy);
    pthread_mutex_unlock(&p->mu);
    cdp_image_folder_gather(p->f, p->seed, e, copy, p->B, pixels);
    pthread_mutex_lock(&p->mu);
    free(copy);
}

void cdp_prefetch_get(cdp_prefetch *p, int64_t k, int i, uint8_t *pixels)
{
    pthread_mutex_lock(&p->mu);
    p->want[i] = 1;
    slot *s = find(p, k, i);
    if (!s && (s = claim(p)))
        fill(p, s, k, i);
    if (s)
        s->consumed = 0;    /* not to be reused while waited for */
    for (int64_t kk = k + 1; kk <= k + p->ahead; kk++)
        for (int ii = 0; ii < p->N; ii++) {
            if (!p->want[ii] || find(p, kk, ii))
                continue;
            slot *c = claim(p);
            if (!c)
                goto queued;
            fill(p, c, kk, ii);
        }
queued:
    pthread_cond_broadcast(&p->work);
    if (!s) {
        decode_direct(p, k, i, pixels);
        pthread_mutex_unlock(&p->mu);
        return;
    }
    /* the caller decodes its own micro-batch's samples too */
    while (s->state != DONE) {
        if (s->next_j < p->B)
            run_one(p, s, s->next_j++);
        else
            pthread_cond_wait(&p->done, &p->mu);
    }
    s->consumed = 1;
    for (int j = 0; j < p->B; j++)
        if (s->errs[(size_t)j * ERR_LEN])
            cdp_image_folder_fail(s->errs + (size_t)j * ERR_LEN);
    memcpy(pixels, s->pixels, (size_t)p->B * p->dim);
    pthread_mutex_unlock(&p->mu);
}

void cdp_prefetch_free(cdp_prefetch *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int t = 0; t < p->nth; t++)
        pthread_join(p->th[t], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    for (int t = 0; p->s && t < p->ns; t++) {
        free(p->s[t].idx);
        free(p->s[t].pixels);
        free(p->s[t].errs);
    }
    free(p->s);
    free(p->want);
    free(p->perm[0]);
    free(p->perm[1]);
    free(p->th);
    free(p);
}
