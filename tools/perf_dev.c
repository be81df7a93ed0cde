/* cadre-perf -G: the buffers the calls see in device memory (cudaMalloc).
 *
 * The modes keep filling and checking host buffers; with -G each call gets a
 * device twin of each buffer, the inputs go up before the call and the
 * results come down before the check (-c 1). Calls on device buffers only
 * enqueue work on the communicator's stream (cadre-device(7), the semantics of
 * torch.distributed over NCCL): cadre-perf gives WORLD a stream of its own
 * and waits for it (perf_dev_sync) wherever a host clock reads the end of
 * device work. Without -G every function here is a no-op or plain memory.
 * A build without CUDA refuses -G at the command line (perf_dev_built). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "perf.h"

#if HAVE_CUDA
#include <cuda_runtime.h>
#endif

int perf_dev;

int perf_dev_built(void)
{
    return HAVE_CUDA;
}

#if HAVE_CUDA
static cudaStream_t stream;

/* A CUDA failure is fatal: the job cannot go on with a device in that state. */
static void cu_check(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "cadre-perf: rank %d: -G: %s failed: %s\n", perf_me, what,
                cudaGetErrorString(e));
        cadre_abort(CADRE_COMM_WORLD, 1);
    }
}
#define CU(call) cu_check((call), #call)

const char *perf_dev_setup(void)
{
    if (!perf_dev)
        return NULL;
    static char why[160];
    int dev = -1;
    if (cadre_device(&dev) != CADRE_SUCCESS || dev < 0) {
        int n = 0;
        cudaError_t e = cudaGetDeviceCount(&n);
        snprintf(why, sizeof why, "no CUDA device bound to rank %d (%s)", perf_me,
                 e != cudaSuccess ? cudaGetErrorString(e) : n == 0 ? "no GPU visible" : "cadre_device: -1");
        return why;
    }
    cudaError_t e = cudaSetDevice(dev);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        snprintf(why, sizeof why, "rank %d: device %d: %s", perf_me, dev, cudaGetErrorString(e));
        return why;
    }
    if (cadre_comm_set_stream(CADRE_COMM_WORLD, stream) != CADRE_SUCCESS) {
        snprintf(why, sizeof why, "rank %d: cadre_comm_set_stream: %s", perf_me, cadre_last_error());
        return why;
    }
    return NULL;
}

void *perf_dev_alloc(size_t n)
{
    void *p = NULL;
    if (cudaMalloc(&p, n ? n : 1) != cudaSuccess)
        return NULL;
    /* On the legacy stream, which the calls' non-blocking stream does not
     * wait for: done before the first upload. */
    if (cudaMemset(p, 0, n ? n : 1) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
        cudaFree(p);
        return NULL;
    }
    return p;
}

void perf_dev_free(void *p)
{
    if (p)
        CU(cudaFree(p));
}

void perf_dev_put(void *dev, const void *host, size_t n)
{
    if (perf_dev && n)
        CU(cudaMemcpyAsync(dev, host, n, cudaMemcpyHostToDevice, stream));
}

void perf_dev_get(void *host, const void *dev, size_t n)
{
    if (!perf_dev || !n)
        return;
    CU(cudaMemcpyAsync(host, dev, n, cudaMemcpyDeviceToHost, stream));
    CU(cudaStreamSynchronize(stream));
}

void perf_dev_sync(void)
{
    if (perf_dev)
        CU(cudaStreamSynchronize(stream));
}

void perf_dev_finish(void)
{
    if (!perf_dev)
        return;
    CU(cudaStreamSynchronize(stream));
    cadre_comm_set_stream(CADRE_COMM_WORLD, NULL);
    CU(cudaStreamDestroy(stream));
}

#else /* !HAVE_CUDA: -G is refused before any of these runs */

const char *perf_dev_setup(void)
{
    return perf_dev ? "this cadre was built without CUDA" : NULL;
}

void *perf_dev_alloc(size_t n)
{
    (void)n;
    return NULL;
}

void perf_dev_free(void *p)
{
    (void)p;
}

void perf_dev_put(void *dev, const void *host, size_t n)
{
    (void)dev, (void)host, (void)n;
}

void perf_dev_get(void *host, const void *dev, size_t n)
{
    (void)host, (void)dev, (void)n;
}

void perf_dev_sync(void)
{
}

void perf_dev_finish(void)
{
}

#endif
