/*
 * device_direct.h - what coll/coll_gpu_direct.c hands the direct allreduce kernels of
 * device/device_direct.cu (C and CUDA).
 *
 * Each rank of the communicator has a workspace in device memory, mapped by
 * every other rank through CUDA IPC: a flag array, then two halves of
 * scratch (a call uses half seq & 1). Flag (phase, block b, rank q) in rank
 * r's array holds the sequence number of the latest call in which block b
 * of rank q reached that phase: 0 its input is in its scratch, 1 (two-shot)
 * its slice of the result is, 2 it is done reading the peers' scratch.
 */
#ifndef CADRE_GPU_DIRECT_H
#define CADRE_GPU_DIRECT_H

#define GPU_DIRECT_MAXR 8   /* ranks */
#define GPU_DIRECT_MAXB 64  /* blocks of a kernel */
#define GPU_DIRECT_THREADS 512
#define GPU_DIRECT_FLAG(phase, b, q) (((phase) * GPU_DIRECT_MAXB + (b)) * GPU_DIRECT_MAXR + (q))
#define GPU_DIRECT_FLAG_BYTES 8192 /* 3 phases: 6 KiB, rounded up; scratch follows */

/* What a kernel computes. REDUCE_SCATTER: `in` holds nranks slices of n
 * elements, in_stride bytes apart; each goes to scratch sstride bytes apart,
 * and the rank's own slice, reduced, to `out`. ALLGATHER: `in` (n elements)
 * goes to scratch, and every rank's to out + q * out_stride bytes. */
enum { GPU_DIRECT_ALLREDUCE, GPU_DIRECT_REDUCE_SCATTER, GPU_DIRECT_ALLGATHER };

struct gpu_direct_args {
    void *scratch[GPU_DIRECT_MAXR];       /* each rank's scratch half for this call */
    unsigned int *flags[GPU_DIRECT_MAXR]; /* each rank's flag array */
    const void *in;
    void *out;
    unsigned long long n; /* elements in this call */
    int nranks, me;
    int dt, op;     /* op: SUM, PROD, MAX or MIN */
    int mode;
    int two_shot;   /* ALLREDUCE */
    int blocks;
    unsigned long long in_stride, sstride, out_stride;
    int divisor;    /* AVG: the sum is divided by it; 0 = no division */
    unsigned int seq;
};

#endif
