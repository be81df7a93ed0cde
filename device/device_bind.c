/* CUDA device binding, and what this process publishes of its GPU for the
 * same-node peers. Without CUDA built in, there is no device.
 * May call: bootstrap/, runtime/. */
#include "config.h"

#include "bootstrap/bootstrap.h"
#include "device/device_mem.h"
#include "runtime/runtime.h"

#if HAVE_CUDA
#include <cuda_runtime.h>

#include "device/device.h"

int cadre__device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* no driver or no GPU: clear the sticky error */
        return 0;
    }
    return n;
}

int cadre__device_bind(void)
{
    cadre__proc.device = -1;
    int n = cadre__device_count();
    if (n <= 0) {
        CADRE_INFO(DEVICE, "no CUDA device visible; host buffers only");
        return CADRE_SUCCESS;
    }
    long want = cadre__config_int(CADRE_CFG_GPU);
    int dev = want >= 0 ? (int)(want % n) : cadre__proc.local_rank % n;
    cudaError_t err = cudaSetDevice(dev);
    if (err != cudaSuccess)
        return cadre__error(CADRE_ERR_DEVICE, "cadre_init: cudaSetDevice(%d) failed: %s", dev,
                            cudaGetErrorString(err));
    cadre__proc.device = dev;
    cadre__gpu_on = cadre__config_bool(CADRE_CFG_GPU_BUFFERS);
    CADRE_INFO(DEVICE, "bound CUDA device %d of %d", dev, n);
    if (cadre__gpu_on) {
        /* before any stream waits on a flag: see cadre__gpu_kernels_load */
        int ke = cadre__gpu_kernels_load();
        if (!ke)
            ke = cadre__gpu_direct_load();
        if (ke) {
            CADRE_WARN(DEVICE, "cadre_init: the device kernels do not load on CUDA device %d (%s): "
                               "device-buffer calls will fail", dev,
                       cudaGetErrorString((cudaError_t)ke));
            cudaGetLastError();
        }
    }
    struct cadre_device_pub pub = {.gpu_on = cadre__gpu_on};
    if (cudaDeviceGetPCIBusId(pub.busid, (int)sizeof pub.busid, dev) == cudaSuccess)
        cadre__bootstrap_put(CADRE_DEVICE_PUB_KEY, &pub, sizeof pub);
    cudaGetLastError();
    return CADRE_SUCCESS;
}
#else
int cadre__device_count(void)
{
    return 0;
}

int cadre__device_bind(void)
{
    cadre__proc.device = -1;
    return CADRE_SUCCESS;
}
#endif
