/* The machine file of `cdp_run --plan --machine FILE` (doc/reference.md
 * section 2.7): what one micro-batch costs on a device, layer by layer (as
 * `--layer-times-out` writes it) or as a FLOP rate, and the network between
 * ranks, as latency and bandwidth of the links inside a host and between
 * hosts.  Read with the strict JSON reader (io/json.h): an unknown key, a
 * missing one, a wrong type or a value out of range is refused with one
 * line naming the file and the key. */
#ifndef CDP_MACHINE_FILE_H
#define CDP_MACHINE_FILE_H

#include <stddef.h>
#include <stdio.h>

typedef struct cdp_link_cost {
    double latency_s;        /* alpha: seconds a message is in flight */
    double bandwidth_Bps;    /* 1/beta: bytes per second */
    double per_message_s;    /* o: seconds a message holds its link (and MPI) besides its bytes */
    double half_duplex;      /* 0..1: how much of a transfer's time the link's other direction
                              * is held (0: full duplex; 1: the directions take turns; measured:
                              * an exchange takes 1 + half_duplex times one way) */
} cdp_link_cost;

typedef struct cdp_network {
    int ranks_per_host;      /* ranks r and q share a host when r / h == q / h */
    cdp_link_cost intra;     /* between ranks of one host (shared memory) */
    cdp_link_cost inter;     /* a host's link to the others, each way */
} cdp_network;

typedef struct cdp_machine {
    /* measured rows (nlayers > 0): the model and micro-batch they are for */
    char model[64];
    int input[3];            /* c, h, w */
    int batch;
    int nlayers;             /* rows in fwd_s/bwd_s, by layer index; 0: none */
    double *fwd_s, *bwd_s;   /* seconds per call, one micro-batch */
    double loss_s;           /* the loss, forward and backward, per call */
    double flops_per_s;      /* 0: none; else the fallback for other models */
    double update_s_per_param; /* the optimizer update, seconds per parameter */
    double start_s;          /* the job's first segment beyond a later one: first calls,
                              * first touches, MPI's connections (0: not measured) */
    cdp_network net;
} cdp_machine;

/* 0, or -1 with one line in err ("machine file F: ..."). */
int cdp_machine_read(const char *path, cdp_machine *m, char *err, size_t errlen);
void cdp_machine_free(cdp_machine *m);
/* Writes m as a machine file (the format cdp_machine_read reads). */
void cdp_machine_write(FILE *f, const cdp_machine *m);

#endif
