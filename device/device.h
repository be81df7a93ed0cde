/*
 * gpu.h - the device-buffer path: the hooks the public entry points call,
 * and the kernels of device/device_kernels.cu. See p2p/p2p_gpu_proxy.c for the design.
 *
 * A hook returns CADRE__GPU_NOT_MINE when every buffer of the call is host
 * memory (the caller then goes on with the host path), otherwise the call's
 * status: the device path has taken the call over.
 */
#ifndef CADRE_GPU_H
#define CADRE_GPU_H

#include "config.h"

#include <stddef.h>

#include "cadre.h"

#define CADRE__GPU_NOT_MINE (-1)

struct coll_sched;
struct cadre_comm;
struct cadre_request;
struct cadre_p2p_hdr;

/* Set by cadre_init when a CUDA device is bound and CADRE_GPU_BUFFERS is on;
 * while it is 0 no buffer is ever looked at, so host calls cost one branch. */
extern int cadre__gpu_on;

#if HAVE_CUDA
static inline int cadre__gpu_enabled(void)
{
    return __builtin_expect(cadre__gpu_on, 0);
}
#else
#define cadre__gpu_enabled() 0
#endif

/* Collectives: a schedule built on the user's buffers (its tag taken in
 * program order). Takes s over unless it returns CADRE__GPU_NOT_MINE. */
int cadre__gpu_sched(struct coll_sched *s, cadre_request_t *req);

/* Point-to-point on comm (validated), peer in comm ranks; req NULL for the
 * blocking calls. */
int cadre__gpu_send(const void *buf, size_t count, cadre_datatype_t dt, int dst, int tag,
                    struct cadre_comm *comm, cadre_request_t *req);
int cadre__gpu_recv(void *buf, size_t count, cadre_datatype_t dt, int src, int tag,
                    struct cadre_comm *comm, cadre_request_t *req, cadre_status_t *status);
int cadre__gpu_sendrecv(const void *sendbuf, size_t sendcount, int dst, int sendtag,
                        void *recvbuf, size_t recvcount, int src, int recvtag, cadre_datatype_t dt,
                        struct cadre_comm *comm, cadre_status_t *status);

/* The direct one-node collectives (coll/coll_gpu_direct.c): NOT_MINE when the buffers
 * are host memory or the call is not for them (the caller goes on, and the
 * staged path takes device buffers). Arguments validated, IN_PLACE resolved
 * (sendbuf == recvbuf). */
int cadre__gpu_allreduce(const char *fn, const void *sendbuf, void *recvbuf, size_t count,
                         cadre_datatype_t dt, cadre_op_t op, struct cadre_comm *comm,
                         cadre_request_t *req);
int cadre__gpu_reduce_scatter(const char *fn, const void *sendbuf, void *recvbuf,
                              size_t recvcount, cadre_datatype_t dt, cadre_op_t op,
                              struct cadre_comm *comm, cadre_request_t *req);
/* sendbuf may still be CADRE_IN_PLACE here. */
int cadre__gpu_allgather(const char *fn, const void *sendbuf, void *recvbuf, size_t count,
                         cadre_datatype_t dt, struct cadre_comm *comm, cadre_request_t *req);

/* A message flagged CADRE_P2P_DEVICE (a CUDA IPC descriptor, p2p/p2p_gpu.c)
 * matched receive r; engine lock held. Completes r now or later. */
void cadre__gpu_deliver(struct cadre_request *r, const struct cadre_p2p_hdr *h, int peer,
                        const void *data);

/* cadre_wait on a device request: NOT_MINE for host requests. */
int cadre__gpu_wait(struct cadre_request *r, cadre_status_t *status);
/* Called by cadre_comm_free before the communicator goes away. */
void cadre__gpu_comm_free(struct cadre_comm *c);

/* ---- kernels (device/device_kernels.cu); stream is a cudaStream_t ------------------ */
#ifdef __cplusplus
extern "C" {
#endif
/* dst[i] = dst[i] op src[i] for n elements; AVG is not an op here (SUM, then
 * cadre__gpu_scale). Returns a cudaError_t (0 = success). */
int cadre__gpu_reduce(void *dst, const void *src, size_t n, int dt, int op, void *stream);
/* buf[i] /= divisor, floating types only. */
int cadre__gpu_scale(void *buf, size_t n, int dt, int divisor, void *stream);
/* One thread that spins until *flag >= value: the stream wait used where
 * stream memory operations (cuStreamWaitValue32) are unavailable. */
int cadre__gpu_spin_wait(volatile unsigned int *flag, unsigned int value, void *stream);
/* Copies slot->n bytes (at most cap) from slot->src to dst; slot is a struct
 * gpu_copy_slot in pinned memory, read when the kernel runs. */
int cadre__gpu_copy_slot(void *dst, const void *slot, size_t cap, void *stream);
/* The direct allreduce kernels (device/device_direct.cu); p is a struct
 * gpu_direct_args. */
int cadre__gpu_direct_launch(const void *p, void *stream);
/* A kernel that spins for about `ns` nanoseconds, or until *release != 0
 * when release is given: the long kernel of the stream-semantics tests. */
int cadre__gpu_busy_kernel(unsigned long long ns, volatile unsigned int *release, void *stream);
#ifdef __cplusplus
}
#endif

#endif /* CADRE_GPU_H */
