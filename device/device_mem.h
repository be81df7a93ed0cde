/*
 * device_mem.h - the device layer's C interface (device_comm.c, device_mem.c):
 * what cadre_init calls, what a communicator holds for the device path, and
 * with CUDA the memory kinds, the pools of pinned staging buffers, flags and
 * events, and the stream wait on a flag. Used by the rest of this folder.
 */
#ifndef CADRE_DEVICE_MEM_H
#define CADRE_DEVICE_MEM_H

#include <stdatomic.h>

#include "device/device.h"
#include "runtime/runtime.h"

struct gpu_direct;

/* ---- what cadre_init calls (device_path.c, device_bind.c) -------------------------- */
/* Fills runtime/runtime_device.h's table of the device path's entry points. */
void cadre__gpu_path_init(void);
/* Binds the CUDA device for this process (CADRE_GPU or local_rank % count);
 * sets cadre__proc.device, -1 when CUDA is not built in or no GPU is visible. */
int cadre__device_bind(void);
int cadre__device_count(void); /* visible GPUs, 0 without CUDA */
/* What cadre_init publishes of its GPU for the same-node peers (CUDA IPC). */
#define CADRE_DEVICE_PUB_KEY "gpu.dev"
struct cadre_device_pub {
    int32_t gpu_on;  /* device buffers are looked for (CADRE_GPU_BUFFERS) */
    char busid[32]; /* cudaDeviceGetPCIBusId */
};

/* What a communicator holds for the device path (comm->gpu), made on first
 * use: its stream and the internal streams of its nonblocking calls. */
struct gpu_comm {
    void *stream;   /* cudaStream_t set by cadre_comm_set_stream; NULL = legacy default */
    void *internal; /* cudaStream_t, created on the first nonblocking device call */
    /* cudaStream_t of the nonblocking receives: an isend that waits for the
     * peer's copy (CUDA IPC) must not hold back the irecv after it. */
    void *internal_recv;
    _Atomic int pending; /* device operations not finished on the device */
    /* The first failure of a device operation that had no request to report
     * it (a blocking call returns before the work is done): the next device
     * call on the communicator returns it (NCCL's ncclCommGetAsyncError). */
    _Atomic int async_error;
    char async_msg[256];
    struct gpu_direct *direct; /* device_direct_comm.c: the IPC workspace, made on first use */
    /* Set with `direct` by whoever made it: releases it once the
     * peers are done with it (the communicator's free, cadre_finalize). */
    void (*direct_free)(struct gpu_comm *g);
    /* Set by a cadre_comm_free that gave up waiting for the pending
     * operations (device_op.c): the communicator is gone, this struct stays
     * theirs, and the proxy starts none of them. */
    _Atomic int orphaned;
};

/* comm->gpu, made on first use; NULL on ENOMEM. */
struct gpu_comm *cadre__gpu_comm(struct cadre_comm *c);

#if HAVE_CUDA
#include <cuda_runtime.h>

/* ---- pools (device_mem.c) ----------------------------------------------------------- */
struct stage {
    char *p;
    size_t cap;
    struct stage *next;
};

struct flag {
    volatile unsigned int *host; /* host-mapped word; under UVA also its device address */
    struct flag *next;
};

/* 1 for device or managed memory, with the allocation's range; 0 for host
 * memory (pageable or pinned). */
int cadre__gpu_classify(const void *p, char **base, size_t *size);
/* Records "fn: what failed: <CUDA's text>" and returns CADRE_ERR_DEVICE. */
int cadre__gpu_cuda_fail(cudaError_t e, const char *fn, const char *what);
struct stage *cadre__gpu_stage_get(size_t bytes, const char *fn, int *rc);
void cadre__gpu_stage_put(struct stage *s);
struct flag *cadre__gpu_flag_get(const char *fn, int *rc);
void cadre__gpu_flag_put(struct flag *f);
int cadre__gpu_ev_get(cudaEvent_t *ev, const char *fn);
void cadre__gpu_ev_put(cudaEvent_t ev);
/* Frees the staging buffers and the events (cadre_finalize, nothing in use). */
void cadre__gpu_pools_free(void);
/* Enqueues on st a wait until *flag >= 1. */
int cadre__gpu_stream_wait(volatile unsigned int *flag, cudaStream_t st, const char *fn);
/* Whether the driver has the stream memory operations below. */
int cadre__gpu_stream_memops(void);
/* Enqueue on st, with no fallback (cadre__gpu_stream_memops() first): a
 * wait until the 32-bit word at device address addr is >= v (modulo 2^32),
 * and a write of v there (after a fence over the stream's earlier work).
 * addr: device memory, or host memory registered with the device. */
cudaError_t cadre__gpu_stream_wait_geq(const void *addr, uint32_t v, cudaStream_t st);
cudaError_t cadre__gpu_stream_write(void *addr, uint32_t v, cudaStream_t st);
#endif /* HAVE_CUDA */

#endif
