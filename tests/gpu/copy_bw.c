/* copy_bw: the device-to-device copy bandwidth of one GPU (cudaMemcpyAsync
 * within one device), the floor the device goals are stated against
 * (issue 19: a 4-rank float32 allreduce of 256 MiB on one GPU moves at least
 * 2 * 4 * 256 MiB through its memory). No cadre: the CUDA runtime alone.
 *
 *   copy_bw [MIB [ITERS]]     (default 256 MiB, 20 timed copies)
 *
 * Prints the driver's and the runtime's CUDA versions and the device, then
 * for 8 KiB, 1 MiB, 16 MiB and MIB: the median and best time of one copy,
 * the bytes copied per second, and the memory traffic per second (read +
 * write: twice that), which is the figure to divide traffic by. Exit 77
 * without a GPU (the automake SKIP code), 1 on a CUDA error. */
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>

#define CU(call)                                                                              \
    do {                                                                                      \
        cudaError_t e_ = (call);                                                              \
        if (e_ != cudaSuccess) {                                                              \
            fprintf(stderr, "copy_bw: %s: %s\n", #call, cudaGetErrorString(e_));              \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

static int cmp(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* Median and best milliseconds of one copy of n bytes. */
static void time_copy(void *dst, const void *src, size_t n, int iters, cudaStream_t s,
                      float *median, float *best)
{
    cudaEvent_t a, b;
    CU(cudaEventCreate(&a));
    CU(cudaEventCreate(&b));
    float *ms = malloc((size_t)iters * sizeof *ms);
    if (!ms) {
        fprintf(stderr, "copy_bw: out of memory\n");
        exit(1);
    }
    for (int k = 0; k < 3; k++)
        CU(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, s));
    for (int k = 0; k < iters; k++) {
        CU(cudaEventRecord(a, s));
        CU(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, s));
        CU(cudaEventRecord(b, s));
        CU(cudaEventSynchronize(b));
        CU(cudaEventElapsedTime(&ms[k], a, b));
    }
    qsort(ms, (size_t)iters, sizeof *ms, cmp);
    *median = ms[iters / 2];
    *best = ms[0];
    free(ms);
    CU(cudaEventDestroy(a));
    CU(cudaEventDestroy(b));
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 256;
    int iters = argc > 2 ? atoi(argv[2]) : 20;
    if (mib == 0 || iters < 1) {
        fprintf(stderr, "usage: copy_bw [MIB [ITERS]]\n");
        return 2;
    }
    int ndev = 0, drv = 0, rt = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    printf("copy_bw: CUDA driver API %d.%d, runtime %d.%d\n", drv / 1000, drv % 1000 / 10,
           rt / 1000, rt % 1000 / 10);
    if (e != cudaSuccess || ndev == 0) {
        printf("skipped: no GPU (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "no device");
        if (drv > 0 && drv < rt)
            printf("copy_bw: the driver supports CUDA %d.%d only; this program needs %d.%d\n",
                   drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
        return 77;
    }
    int dev = 0, clock_khz = 0, bus_bits = 0;
    CU(cudaGetDevice(&dev));
    struct cudaDeviceProp prop;
    CU(cudaGetDeviceProperties(&prop, dev));
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, dev);
    cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev);
    printf("copy_bw: device %d: %s, sm_%d%d, %.1f GiB, %d SMs", dev, prop.name, prop.major,
           prop.minor, (double)prop.totalGlobalMem / (1 << 30), prop.multiProcessorCount);
    if (clock_khz > 0 && bus_bits > 0)
        printf(", memory peak %.0f GB/s (2 * %d MHz * %d bits)",
               2.0 * clock_khz * 1e3 * bus_bits / 8 / 1e9, clock_khz / 1000, bus_bits);
    printf("\n");
    size_t big = mib << 20;
    void *src, *dst;
    CU(cudaMalloc(&src, big));
    CU(cudaMalloc(&dst, big));
    CU(cudaMemset(src, 1, big));
    CU(cudaMemset(dst, 0, big));
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const size_t sizes[] = {8 << 10, 1 << 20, 16 << 20, big};
    printf("%12s %10s %10s %12s %14s\n", "bytes", "median_us", "best_us", "copy_GB/s",
           "traffic_GB/s");
    double traffic = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        if (n > big || (i + 1 < sizeof sizes / sizeof sizes[0] && n == big))
            continue;
        float med, best;
        time_copy(dst, src, n, n >= big ? iters : iters * 5, s, &med, &best);
        double gbs = (double)n / (med * 1e-3) / 1e9;
        printf("%12zu %10.1f %10.1f %12.1f %14.1f\n", n, med * 1e3, best * 1e3, gbs, 2 * gbs);
        traffic = 2 * gbs;
    }
    /* The floor of issue 19's goal: a 4-rank allreduce of 256 MiB on this
     * GPU moves 2 * 4 * 256 MiB (each rank reads n and writes n). */
    double floor_ms = 2.0 * 4 * (256 << 20) / (traffic * 1e9) * 1e3;
    printf("copy_bw: memory traffic at %zu MiB: %.1f GB/s (read + write); floor of a 4-rank "
           "256 MiB allreduce: %.3f ms (goal: within 1/0.7 of it, %.3f ms)\n",
           mib, traffic, floor_ms, floor_ms / 0.7);
    CU(cudaFree(src));
    CU(cudaFree(dst));
    CU(cudaStreamDestroy(s));
    return 0;
}
