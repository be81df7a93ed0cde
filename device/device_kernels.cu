/*
 * device_kernels.cu - reduction kernels for every datatype and op of cadre.h
 * (half and bfloat16 computed in float32, rounded once per element), with
 * 16-byte vector loads when both buffers are 16-byte aligned; the AVG
 * division; the copy of a CUDA IPC receive; the stream-wait spin kernel and
 * the tests' busy kernel.
 * The semantics match the host kernels of coll/coll_reduce.c bit for bit:
 * integer SUM/PROD wrap, MAX/MIN of floats propagate NaN.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "device/device.h"

namespace {

#include "device/device_acc.cuh"

template <typename A> __device__ __forceinline__ bool is_nan(A v) { return v != v; }

template <typename T, int OP> __device__ __forceinline__ T apply(T x, T y)
{
    typedef typename Acc<T>::type A;
    A a = to_acc(x), b = to_acc(y);
    if (OP == SUM || OP == PROD) {
        typedef typename Wrap<A>::type W;
        W r = OP == SUM ? (W)((W)a + (W)b) : (W)((W)a * (W)b);
        return from_acc<T>((A)r);
    }
    if (is_nan(a))
        return from_acc<T>(a);
    if (is_nan(b))
        return from_acc<T>(b);
    return from_acc<T>(OP == MAX ? (a > b ? a : b) : (a < b ? a : b));
}

template <typename T, int OP>
__global__ void __launch_bounds__(512) k_reduce(T *__restrict__ dst, const T *__restrict__ src,
                                                size_t n, bool vec)
{
    constexpr int V = 16 / sizeof(T);
    size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t nv = vec ? n / V : 0;
    uint4 *d4 = reinterpret_cast<uint4 *>(dst);
    const uint4 *s4 = reinterpret_cast<const uint4 *>(src);
    for (size_t i = tid; i < nv; i += stride) {
        uint4 a = d4[i], b = s4[i];
        T *pa = reinterpret_cast<T *>(&a);
        const T *pb = reinterpret_cast<const T *>(&b);
#pragma unroll
        for (int k = 0; k < V; k++)
            pa[k] = apply<T, OP>(pa[k], pb[k]);
        d4[i] = a;
    }
    for (size_t i = nv * V + tid; i < n; i += stride)
        dst[i] = apply<T, OP>(dst[i], src[i]);
}

template <typename T>
__global__ void __launch_bounds__(512) k_scale(T *buf, size_t n, int divisor)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride) {
        typedef typename Acc<T>::type A;
        buf[i] = from_acc<T>(to_acc(buf[i]) / (A)divisor);
    }
}

/* slot: {const void *src; unsigned long long n;} in pinned memory, written
 * by the proxy before it released the stream this kernel is on. */
__global__ void __launch_bounds__(512)
    k_copy_slot(char *dst, const volatile unsigned long long *slot, size_t cap)
{
    __shared__ const char *src;
    __shared__ size_t n;
    if (threadIdx.x == 0) {
        src = (const char *)(uintptr_t)slot[0];
        size_t m = (size_t)slot[1];
        n = m < cap ? m : cap;
    }
    __syncthreads();
    size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t nv = (((uintptr_t)src | (uintptr_t)dst) & 15) == 0 ? n / 16 : 0;
    const uint4 *s4 = reinterpret_cast<const uint4 *>(src);
    uint4 *d4 = reinterpret_cast<uint4 *>(dst);
    for (size_t i = tid; i < nv; i += stride)
        d4[i] = s4[i];
    for (size_t i = nv * 16 + tid; i < n; i += stride)
        dst[i] = src[i];
}

__global__ void k_spin_wait(volatile unsigned int *flag, unsigned int value)
{
    while (*flag < value)
        __nanosleep(500);
}

__device__ __forceinline__ unsigned long long globaltimer()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void k_busy(unsigned long long ns, volatile unsigned int *release)
{
    unsigned long long t0 = globaltimer();
    for (;;) {
        if (release ? *release != 0 : globaltimer() - t0 >= ns)
            break;
        __nanosleep(1000);
    }
}

void grid_for(size_t work, unsigned *blocks)
{
    size_t b = (work + 511) / 512;
    *blocks = b < 1 ? 1 : b > 2048 ? 2048 : (unsigned)b;
}

template <typename T, int OP>
cudaError_t launch_reduce(void *dst, const void *src, size_t n, cudaStream_t st)
{
    bool vec = (((uintptr_t)dst | (uintptr_t)src) & 15) == 0;
    unsigned blocks;
    grid_for(vec ? n / (16 / sizeof(T)) + 1 : n, &blocks);
    k_reduce<T, OP><<<blocks, 512, 0, st>>>((T *)dst, (const T *)src, n, vec);
    return cudaGetLastError();
}

template <typename T>
cudaError_t reduce_t(void *dst, const void *src, size_t n, int op, cudaStream_t st)
{
    switch (op) {
    case SUM: return launch_reduce<T, SUM>(dst, src, n, st);
    case PROD: return launch_reduce<T, PROD>(dst, src, n, st);
    case MAX: return launch_reduce<T, MAX>(dst, src, n, st);
    case MIN: return launch_reduce<T, MIN>(dst, src, n, st);
    }
    return cudaErrorInvalidValue;
}

/* k_reduce<T, op> loaded for every op (see cadre__gpu_kernels_load). */
template <typename T> cudaError_t load_reduce()
{
    cudaError_t e = cudaSuccess;
    CADRE_LOAD_OPS(e, k_reduce, T);
    return e;
}

} // namespace

/* With lazy loading (CUDA_MODULE_LOADING=LAZY, the default since CUDA
 * 12.2) the first launch of a kernel loads it, and the load waits for the
 * context's streams. A launch enqueued behind a stream wait that only a
 * later step releases (a receive's copy behind its flag, which the proxy
 * sets once the op is handed over) then never returns: seen on an H200,
 * cudaLaunchKernel of k_copy_slot. cadre loads its kernels when it binds
 * the device, before any stream waits. */
extern "C" int cadre__gpu_kernels_load(void)
{
    cudaFuncAttributes at;
    cudaError_t e = cudaFuncGetAttributes(&at, k_copy_slot);
    if (e == cudaSuccess)
        e = cudaFuncGetAttributes(&at, k_spin_wait);
    if (e == cudaSuccess)
        e = cudaFuncGetAttributes(&at, k_busy);
    if (e == cudaSuccess)
        e = cudaFuncGetAttributes(&at, k_scale<__half>);
    if (e == cudaSuccess)
        e = cudaFuncGetAttributes(&at, k_scale<__nv_bfloat16>);
    if (e == cudaSuccess)
        e = cudaFuncGetAttributes(&at, k_scale<float>);
    if (e == cudaSuccess)
        e = cudaFuncGetAttributes(&at, k_scale<double>);
    cudaError_t (*const each[])() = {load_reduce<int8_t>,  load_reduce<uint8_t>,
                                     load_reduce<int32_t>, load_reduce<uint32_t>,
                                     load_reduce<int64_t>, load_reduce<uint64_t>,
                                     load_reduce<__half>,  load_reduce<__nv_bfloat16>,
                                     load_reduce<float>,   load_reduce<double>};
    for (unsigned i = 0; e == cudaSuccess && i < sizeof each / sizeof *each; i++)
        e = each[i]();
    return e;
}

extern "C" int cadre__gpu_reduce(void *dst, const void *src, size_t n, int dt, int op,
                                 void *stream)
{
    if (!n)
        return cudaSuccess;
    cudaStream_t st = (cudaStream_t)stream;
    switch (dt) {
    case CADRE_INT8: return reduce_t<int8_t>(dst, src, n, op, st);
    case CADRE_UINT8: return reduce_t<uint8_t>(dst, src, n, op, st);
    case CADRE_INT32: return reduce_t<int32_t>(dst, src, n, op, st);
    case CADRE_UINT32: return reduce_t<uint32_t>(dst, src, n, op, st);
    case CADRE_INT64: return reduce_t<int64_t>(dst, src, n, op, st);
    case CADRE_UINT64: return reduce_t<uint64_t>(dst, src, n, op, st);
    case CADRE_FLOAT16: return reduce_t<__half>(dst, src, n, op, st);
    case CADRE_BFLOAT16: return reduce_t<__nv_bfloat16>(dst, src, n, op, st);
    case CADRE_FLOAT32: return reduce_t<float>(dst, src, n, op, st);
    case CADRE_FLOAT64: return reduce_t<double>(dst, src, n, op, st);
    }
    return cudaErrorInvalidValue;
}

extern "C" int cadre__gpu_scale(void *buf, size_t n, int dt, int divisor, void *stream)
{
    if (!n)
        return cudaSuccess;
    cudaStream_t st = (cudaStream_t)stream;
    unsigned blocks;
    grid_for(n, &blocks);
    switch (dt) {
    case CADRE_FLOAT16: k_scale<__half><<<blocks, 512, 0, st>>>((__half *)buf, n, divisor); break;
    case CADRE_BFLOAT16:
        k_scale<__nv_bfloat16><<<blocks, 512, 0, st>>>((__nv_bfloat16 *)buf, n, divisor);
        break;
    case CADRE_FLOAT32: k_scale<float><<<blocks, 512, 0, st>>>((float *)buf, n, divisor); break;
    case CADRE_FLOAT64: k_scale<double><<<blocks, 512, 0, st>>>((double *)buf, n, divisor); break;
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

extern "C" int cadre__gpu_copy_slot(void *dst, const void *slot, size_t cap, void *stream)
{
    unsigned blocks;
    grid_for(cap / 16 + 1, &blocks);
    k_copy_slot<<<blocks, 512, 0, (cudaStream_t)stream>>>(
        (char *)dst, (const volatile unsigned long long *)slot, cap);
    return cudaGetLastError();
}

extern "C" int cadre__gpu_spin_wait(volatile unsigned int *flag, unsigned int value, void *stream)
{
    k_spin_wait<<<1, 1, 0, (cudaStream_t)stream>>>(flag, value);
    return cudaGetLastError();
}

extern "C" int cadre__gpu_busy_kernel(unsigned long long ns, volatile unsigned int *release,
                                      void *stream)
{
    k_busy<<<1, 1, 0, (cudaStream_t)stream>>>(ns, release);
    return cudaGetLastError();
}
