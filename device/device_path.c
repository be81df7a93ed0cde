/* The device path's entry points into runtime/runtime_device.h's table,
 * which p2p/ and coll/ call (they never name this folder). cadre_init fills
 * it before it binds the device, ahead of every layer that calls it.
 * Without CUDA only the two that run whatever cadre__gpu_enabled() says: a
 * CUDA peer's descriptor is refused, and cadre_comm_free frees what
 * cadre_comm_set_stream made.
 * May call: this folder. */
#include "config.h"

#include "device/device_coll.h"
#include "device/device_mem.h"
#include "device/device_op.h"
#include "runtime/runtime_device.h"

void cadre__gpu_path_init(void)
{
    cadre__gpu = (struct cadre_gpu_path){
        .deliver = cadre__gpu_deliver,
        .comm_free = cadre__gpu_comm_free,
#if HAVE_CUDA
        .send = cadre__gpu_send,
        .recv = cadre__gpu_recv,
        .sendrecv = cadre__gpu_sendrecv,
        .wait = cadre__gpu_wait,
        .is_device_req = cadre__gpu_is_device_req,
        .sched = cadre__gpu_sched,
        .allreduce = cadre__gpu_allreduce,
        .reduce_scatter = cadre__gpu_reduce_scatter,
        .allgather = cadre__gpu_allgather,
#endif
    };
    /* Runs last of cadre_finalize's hooks (they run in reverse), after the
     * proxy's drain: the world communicator's device state and streams. */
    cadre__at_finalize(cadre__gpu_world_free);
}
