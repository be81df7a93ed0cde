/*
 * runtime_device.h - the one interface of the device path (device/, the
 * CUDA device-buffer code, the layer above coll/): whether it is on, and
 * the table of its entry points that p2p/ and coll/ call. device/ fills the
 * table (device_path.c) when cadre_init binds the device, before any layer
 * can call it; the layers below never name device/ (tests/layers.sh).
 *
 * An entry returns CADRE__GPU_NOT_MINE when every buffer of the call is
 * host memory (the caller then goes on with the host path), otherwise the
 * call's status: the device path has taken the call over. While
 * cadre__gpu_enabled() is 0 no buffer is ever looked at, so host calls cost
 * one branch; deliver and comm_free are called whatever it says (they are
 * set also without CUDA).
 */
#ifndef CADRE_RUNTIME_DEVICE_H
#define CADRE_RUNTIME_DEVICE_H

#include "config.h"

#include <stddef.h>
#include <stdint.h>

#include "cadre.h"

#define CADRE__GPU_NOT_MINE (-1)

/* Set by cadre_init when a CUDA device is bound and CADRE_GPU_BUFFERS is on
 * (device/device_bind.c). */
extern int cadre__gpu_on;

#if HAVE_CUDA
static inline int cadre__gpu_enabled(void)
{
    return __builtin_expect(cadre__gpu_on, 0);
}
#else
#define cadre__gpu_enabled() 0
#endif

struct cadre_comm;
struct cadre_request;
struct cadre_p2p_hdr;
struct coll_sched;

struct cadre_gpu_path {
    /* ---- p2p/ ---- */
    /* Point-to-point on comm (validated), peer in comm ranks; req NULL for
     * the blocking calls (p2p_api.c). */
    int (*send)(const void *buf, size_t count, cadre_datatype_t dt, int dst, int tag,
                struct cadre_comm *comm, cadre_request_t *req);
    int (*recv)(void *buf, size_t count, cadre_datatype_t dt, int src, int tag,
                struct cadre_comm *comm, cadre_request_t *req, cadre_status_t *status);
    int (*sendrecv)(const void *sendbuf, size_t sendcount, int dst, int sendtag, void *recvbuf,
                    size_t recvcount, int src, int recvtag, cadre_datatype_t dt,
                    struct cadre_comm *comm, cadre_status_t *status);
    /* A message flagged CADRE_P2P_DEVICE (a CUDA IPC descriptor) matched
     * receive r; engine lock held. Completes r now or later (p2p_match.c). */
    void (*deliver)(struct cadre_request *r, const struct cadre_p2p_hdr *h, int peer,
                    const void *data);
    /* cadre_wait on a device request: NOT_MINE for host requests (p2p_api.c). */
    int (*wait)(struct cadre_request *r, cadre_status_t *status);
    /* Whether r is the request of a nonblocking device call (p2p_wait.c). */
    int (*is_device_req)(const struct cadre_request *r);

    /* ---- coll/ ---- */
    /* A schedule built on the user's buffers (its tag taken in program
     * order): takes s over unless it returns NOT_MINE (coll_call.h). */
    int (*sched)(struct coll_sched *s, cadre_request_t *req);
    /* The direct one-node collectives: NOT_MINE when the buffers are host
     * memory or the call is not for them (the staged path then takes device
     * buffers). Arguments validated, IN_PLACE resolved (sendbuf == recvbuf),
     * except allgather's sendbuf, which may still be CADRE_IN_PLACE. */
    int (*allreduce)(const char *fn, const void *sendbuf, void *recvbuf, size_t count,
                     cadre_datatype_t dt, cadre_op_t op, struct cadre_comm *comm,
                     cadre_request_t *req);
    int (*reduce_scatter)(const char *fn, const void *sendbuf, void *recvbuf, size_t recvcount,
                          cadre_datatype_t dt, cadre_op_t op, struct cadre_comm *comm,
                          cadre_request_t *req);
    int (*allgather)(const char *fn, const void *sendbuf, void *recvbuf, size_t count,
                     cadre_datatype_t dt, struct cadre_comm *comm, cadre_request_t *req);
    /* Called by cadre_comm_free before the communicator goes away (coll_comm.c). */
    void (*comm_free)(struct cadre_comm *c);
};

/* The table (storage in runtime/runtime_proc.c). */
extern struct cadre_gpu_path cadre__gpu;

#if HAVE_CUDA
#include <cuda_runtime.h>

/* The payload of a CUDA IPC descriptor (an EAGER message flagged
 * CADRE_P2P_DEVICE on the user's context and tag): where the sender's data
 * lies. p2p/ carries it, and cadre_probe reads its size. The receiver
 * answers on CADRE_GPU_CTX, tag `id`, with a 32-bit status once its copy has
 * finished on its device (device/device_p2p.c). */
#define CADRE_GPU_IPC_MAGIC 0x43495043u
struct gpu_ipc_desc {
    uint32_t magic;
    uint32_t id;      /* the tag of the answer */
    uint64_t base;    /* the sender's allocation: start address ... */
    uint64_t bufid;   /* ... and CU_POINTER_ATTRIBUTE_BUFFER_ID, the cache key */
    uint64_t offset;  /* of the data in the allocation */
    uint64_t bytes;
    cudaIpcMemHandle_t mem; /* of the allocation */
};
#endif /* HAVE_CUDA */

#endif /* CADRE_RUNTIME_DEVICE_H */
