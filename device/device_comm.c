/* cadre_comm_set_stream / cadre_comm_get_stream: the communicator's stream,
 * on which blocking device-buffer calls are enqueued (see device_proxy.c),
 * and the communicator's device state (cadre__gpu_comm). May call: runtime/. */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>

#include "device/device_mem.h"

#if HAVE_CUDA
#include <cuda_runtime.h>
#endif

static pthread_mutex_t comm_lock = PTHREAD_MUTEX_INITIALIZER;

struct gpu_comm *cadre__gpu_comm(struct cadre_comm *c)
{
    struct gpu_comm *g = __atomic_load_n((struct gpu_comm **)&c->gpu, __ATOMIC_ACQUIRE);
    if (g)
        return g;
    pthread_mutex_lock(&comm_lock);
    g = c->gpu;
    if (!g) {
        g = calloc(1, sizeof *g);
        if (g)
            __atomic_store_n((struct gpu_comm **)&c->gpu, g, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&comm_lock);
    return g;
}

int cadre_comm_set_stream(cadre_comm_t comm, void *stream)
{
    const char *fn = "cadre_comm_set_stream";
    CADRE_CHECK(cadre__check_initialized(fn));
    int st;
    struct cadre_comm *c = cadre__comm_get(comm, fn, &st);
    if (!c)
        return st;
    if (stream) {
#if HAVE_CUDA
        if (cadre__proc.device < 0)
            return cadre__error(CADRE_ERR_UNSUPPORTED,
                                "%s: no CUDA device is bound to this process (see cadre_device)",
                                fn);
        int dev = -1;
        cudaError_t e = cudaStreamGetDevice((cudaStream_t)stream, &dev);
        if (e != cudaSuccess) {
            cudaGetLastError();
            return cadre__error(CADRE_ERR_ARG, "%s: stream %p is not a CUDA stream: %s", fn,
                                stream, cudaGetErrorString(e));
        }
        if (dev != cadre__proc.device)
            return cadre__error(CADRE_ERR_ARG,
                                "%s: stream %p belongs to device %d, but this rank is bound to "
                                "device %d",
                                fn, stream, dev, cadre__proc.device);
#else
        return cadre__error(CADRE_ERR_UNSUPPORTED,
                            "%s: this libcadre is built without CUDA; only a NULL stream is "
                            "accepted",
                            fn);
#endif
    }
    if (!stream && !c->gpu)
        return CADRE_SUCCESS;
    struct gpu_comm *g = cadre__gpu_comm(c);
    if (!g)
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", fn);
    g->stream = stream;
    return CADRE_SUCCESS;
}

int cadre_comm_get_stream(cadre_comm_t comm, void **stream)
{
    const char *fn = "cadre_comm_get_stream";
    if (!stream)
        return cadre__error(CADRE_ERR_ARG, "%s: stream is NULL", fn);
    CADRE_CHECK(cadre__check_initialized(fn));
    int st;
    struct cadre_comm *c = cadre__comm_get(comm, fn, &st);
    if (!c)
        return st;
    struct gpu_comm *g = c->gpu;
    *stream = g ? g->stream : NULL;
    return CADRE_SUCCESS;
}
