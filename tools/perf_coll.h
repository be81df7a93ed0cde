/* cadre-perf's collective modes: what the timing and the sweep (perf_coll.c),
 * the calls and their checks (perf_call.c) and the inputs and references
 * (perf_data.c) share. */
#ifndef CADRE_PERF_COLL_H
#define CADRE_PERF_COLL_H

#include <stdint.h>

#include "perf.h"

enum perf_kind {
    ALLREDUCE, REDUCE, BCAST, ALLGATHER, REDUCE_SCATTER, ALLTOALL, GATHER, SCATTER, BARRIER,
    GATHERV, SCATTERV, ALLGATHERV, ALLTOALLV
};

struct perf_mode {
    const char *name;
    enum perf_kind kind;
    int reduces; /* takes -o */
    int rooted;  /* takes -r */
    int whole;   /* the size is the whole buffer: count per rank * ranks * typesize */
    int v;       /* a v-variant: counts per rank, displacements (perf_data_layout) */
};

struct perf_run {
    const struct perf_mode *m;
    cadre_datatype_t dt;
    size_t ts; /* bytes per element */
    cadre_op_t op;
    int root, inpl, check, me, n;
    size_t c;                     /* count per rank (v-variants: their mean, rounded down) */
    size_t *vc, *vd;              /* v-variants: this rank's counts and displacements, n each */
    size_t vspan;                 /* v-variants: elements of the buffer those describe */
    unsigned char *sbuf, *rbuf;   /* host: prepared and checked here */
    unsigned char *dsbuf, *drbuf; /* what the calls get: sbuf and rbuf, or their device twins */
    int64_t range;                /* inputs of max, min and the data-moving modes: range values */
    int sgn;                      /* signed or floating: inputs may be negative */
    double mintime;               /* -T */
    int each;                     /* -t barrier: time_each, the mean over the ranks */
};

static inline unsigned char *perf_el(const struct perf_run *R, unsigned char *buf, size_t i)
{
    return buf + i * R->ts;
}

/* perf_data.c: n elements at buf, rank's inputs from index `first` on; the
 * wrong ones among n at buf (rank < 0: the reduction over the ranks); the
 * elements among n at buf that are not the poison (all bytes 0xff). */
void perf_data_fill(const struct perf_run *R, unsigned char *buf, int rank, size_t first, size_t n,
                    uint32_t it);
long perf_data_wrong(const struct perf_run *R, unsigned char *buf, int rank, size_t first, size_t n,
                     uint32_t it);
long perf_data_unpoisoned(const struct perf_run *R, const unsigned char *buf, size_t n);

/* The v-variants' layout, for count per rank c on n ranks. Rank k's block
 * holds vcount(k) = 2c(k+1)/(n+1) elements (rounded down: from about 2c/n at
 * rank 0 to about 2c at the last, zero where 2c(k+1) < n+1; the sum is at most
 * c*n), and the blocks lie in rank order with one element free before each
 * and after the last. alltoallv: rank r's block for peer k holds
 * vcount((r+k) mod n) elements (what k sends r equals what r sends k), laid
 * out the same way. perf_data_layout fills R->vc, R->vd (this rank's, or
 * with `rank` >= 0 that rank's alltoallv layout) and returns the span;
 * perf_data_vbytes the size of a line: the counts' sum times the type size
 * (what the root of gatherv receives, what each rank of alltoallv sends). */
size_t perf_data_layout(const struct perf_run *R, int rank, size_t *counts, size_t *displs);
size_t perf_data_vbytes(const struct perf_run *R);

/* perf_call.c: before iteration it, the inputs (and with checking on the
 * outputs poisoned); the call; this rank's wrong elements after it; bytes of
 * either buffer the calls use; -G's copies up and down. */
void perf_call_prepare(const struct perf_run *R, uint32_t it);
void perf_call(const struct perf_run *R);
long perf_call_check(const struct perf_run *R, uint32_t it);
size_t perf_call_used(const struct perf_run *R);
void perf_call_upload(const struct perf_run *R);
void perf_call_download(const struct perf_run *R);

#endif
