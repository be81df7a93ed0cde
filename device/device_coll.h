/*
 * device_coll.h - the collectives' device-buffer path: the entry points the
 * collectives of coll/ call first, through runtime/runtime_device.h's table
 * (device_coll.c: a schedule run by the device executor, staged through
 * host memory; device_direct_call.c: the direct one-node kernels). An entry
 * returns CADRE__GPU_NOT_MINE when the buffers are host memory.
 */
#ifndef CADRE_DEVICE_COLL_H
#define CADRE_DEVICE_COLL_H

#include "coll/coll.h"
#include "device/device.h"

struct gpu_comm;

/* Collectives: a schedule built on the user's buffers (its tag taken in
 * program order). Takes s over unless it returns CADRE__GPU_NOT_MINE. */
int cadre__gpu_sched(struct coll_sched *s, cadre_request_t *req);

/* The direct one-node collectives (device_direct_call.c): NOT_MINE when the buffers
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

/* Releases g's direct workspace once the peers are done with it
 * (gpu_comm.direct_free). */
void cadre__gpu_direct_free(struct gpu_comm *g);

#endif
