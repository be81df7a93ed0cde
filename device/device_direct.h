/*
 * device_direct.h - what device_direct_call.c hands the direct kernels of
 * device/device_direct.cu (C and CUDA).
 *
 * A launch runs in one process (the leader of a GPU) and works on every
 * rank's buffers at once, mapped into that process through CUDA IPC: it
 * waits for nothing and nobody waits inside it. The processes synchronise
 * outside kernels, with stream memory operations on flags in host memory
 * (device_direct_call.c), so a waiting context yields the GPU.
 */
#ifndef CADRE_GPU_DIRECT_H
#define CADRE_GPU_DIRECT_H

#define GPU_DIRECT_MAXR 16 /* ranks of a communicator */
#define GPU_DIRECT_THREADS 512
#define GPU_DIRECT_GATES 1024 /* communicators with direct calls at once, per process */

/* The index space of a call and what index j of it means (n elements per
 * rank's block, K ranks):
 *   ALLREDUCE       j < n:   every out[q][j] = op over p of in[p][j]
 *   REDUCE_SCATTER  j < n:   for every block b < K, out[b][j] = op over p
 *                            of in[p][b*n + j]
 *   ALLGATHER       j < K*n: every out[q][j] = in[j/n][j%n]
 * A launch covers [lo, hi) of it. Every element is reduced in rank order,
 * so every rank gets the same bits; half and bfloat16 accumulate in float32
 * and are rounded once; AVG divides the sum once. */
enum { GPU_DIRECT_ALLREDUCE, GPU_DIRECT_REDUCE_SCATTER, GPU_DIRECT_ALLGATHER };

struct gpu_direct_args {
    const void *in[GPU_DIRECT_MAXR];
    void *out[GPU_DIRECT_MAXR];
    unsigned long long n, lo, hi;
    int nranks, dt, op; /* op: SUM, PROD, MAX or MIN */
    int mode;
    int divisor;        /* AVG: the sum is divided by it; 0 = no division */
    int vec;            /* every pointer 16-byte aligned, and n a whole number of
                           16-byte units unless ALLREDUCE: 16-byte accesses */
    int blocks;
    /* The leader's `failed` word: its host page through the device mapping
     * (a launch of a few blocks), or a device copy made on the stream just
     * before the launch; and this call: a block that finds a failure at or
     * before the call returns at once (a dead rank's buffers may be gone;
     * the call fails anyway). */
    const volatile unsigned int *failed;
    unsigned int seq;
};

#endif
