/* gpu_internal.h - state shared by the files of gpu/ (not by other layers). */
#ifndef CADRE_GPU_INTERNAL_H
#define CADRE_GPU_INTERNAL_H

#include <stdatomic.h>

#include "gpu/gpu.h"
#include "runtime/runtime.h"

/* What a communicator holds for the device path (comm->gpu), made on first
 * use: its stream and the internal stream of its nonblocking calls. */
struct gpu_comm {
    void *stream;   /* cudaStream_t set by cadre_comm_set_stream; NULL = legacy default */
    void *internal; /* cudaStream_t, created on the first nonblocking device call */
    _Atomic int pending; /* device operations not finished on the device */
    /* The first failure of a device operation that had no request to report
     * it (a blocking call returns before the work is done): the next device
     * call on the communicator returns it (NCCL's ncclCommGetAsyncError). */
    _Atomic int async_error;
    char async_msg[256];
};

/* comm->gpu, made on first use; NULL on ENOMEM. */
struct gpu_comm *cadre__gpu_comm(struct cadre_comm *c);

#endif
