/*
 * device_direct.cu - the direct kernels of one node (device/device_direct.h):
 * one launch, in the leader process of a GPU, reads every rank's input and
 * writes every rank's output through CUDA IPC mappings. Nothing in a kernel
 * waits for another process: device_direct_call.c orders the launch after
 * every rank's stream has reached the call, with stream memory operations.
 *
 * In place is safe: an allreduce element is read and written by one thread;
 * a reduce-scatter thread takes element i of every block b in block order
 * (block 0's results read the locations the later blocks' results are
 * written to, and only block 0's do); an in-place allgather writes every
 * rank's own block with the value already there.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "device/device.h"
#include "device/device_direct.h"

namespace {

#include "device/device_acc.cuh"

/* a op b in the accumulation type: integers wrap, MAX/MIN propagate NaN. */
template <typename A, int OP> __device__ __forceinline__ A combine(A a, A b)
{
    if (OP == SUM || OP == PROD) {
        typedef typename Wrap<A>::type W;
        return (A)(W)(OP == SUM ? (W)a + (W)b : (W)a * (W)b);
    }
    if (a != a)
        return a;
    if (b != b)
        return b;
    return OP == MAX ? (a > b ? a : b) : (a < b ? a : b);
}

/* The V elements at element offset e of every rank's input, reduced in rank
 * order. The loads go out four ranks at a time, before any of them is
 * used, so that a thread has several reads in flight (streaming: each input
 * is read once). */
template <typename T, int OP>
__device__ __forceinline__ uint4 reduce_unit(const gpu_direct_args &a, unsigned long long e)
{
    constexpr int V = 16 / sizeof(T);
    typedef typename Acc<T>::type A;
    A acc[V];
    for (int q0 = 0; q0 < a.nranks; q0 += 4) {
        uint4 v[4];
#pragma unroll
        for (int k = 0; k < 4; k++)
            if (q0 + k < a.nranks)
                v[k] = __ldcs(reinterpret_cast<const uint4 *>(static_cast<const T *>(a.in[q0 + k]) + e));
#pragma unroll
        for (int k = 0; k < 4; k++) {
            if (q0 + k >= a.nranks)
                break;
            const T *t = reinterpret_cast<const T *>(&v[k]);
#pragma unroll
            for (int j = 0; j < V; j++)
                acc[j] = q0 + k == 0 ? (A)to_acc(t[j]) : combine<A, OP>(acc[j], (A)to_acc(t[j]));
        }
    }
    if (a.divisor) {
#pragma unroll
        for (int k = 0; k < V; k++)
            acc[k] = acc[k] / (A)a.divisor;
    }
    uint4 r;
    T *rt = reinterpret_cast<T *>(&r);
#pragma unroll
    for (int k = 0; k < V; k++)
        rt[k] = from_acc<T>(acc[k]);
    return r;
}

template <typename T, int OP>
__device__ __forceinline__ T reduce_one(const gpu_direct_args &a, unsigned long long e)
{
    typedef typename Acc<T>::type A;
    A acc = to_acc(static_cast<const T *>(a.in[0])[e]);
    for (int q = 1; q < a.nranks; q++)
        acc = combine<A, OP>(acc, (A)to_acc(static_cast<const T *>(a.in[q])[e]));
    if (a.divisor)
        acc = acc / (A)a.divisor;
    return from_acc<T>(acc);
}

/* Whether the call failed somewhere (one read of host memory per block). */
__device__ __forceinline__ bool stopped(const gpu_direct_args &a)
{
    __shared__ int stop;
    if (threadIdx.x == 0) {
        unsigned f = a.failed ? *a.failed : 0u;
        stop = f && (int)(a.seq - f) >= 0;
    }
    __syncthreads();
    return stop != 0;
}

/* Outputs are written once and not read again here: 16-byte units as
 * streaming stores. */
__device__ __forceinline__ void store(uint4 *p, uint4 v)
{
    __stcs(p, v);
}
template <typename U> __device__ __forceinline__ void store(U *p, U v)
{
    *p = v;
}

/* v (a 16-byte unit or one element) at element i of output q, or of every
 * output when q < 0. */
template <typename T, typename U>
__device__ __forceinline__ void put(const gpu_direct_args &a, int q, unsigned long long i, U v)
{
    if (q >= 0) {
        store(reinterpret_cast<U *>(static_cast<T *>(a.out[q]) + i), v);
        return;
    }
    for (int k = 0; k < a.nranks; k++)
        store(reinterpret_cast<U *>(static_cast<T *>(a.out[k]) + i), v);
}

/* A thread's part of [lo, hi): 16-byte units u0, u0 + stride, ... below uhi
 * (none unless vec), then elements e0, e0 + stride, ... below hi. */
struct span {
    unsigned long long stride, u0, uhi, e0;
};

template <typename T> __device__ __forceinline__ span span_of(const gpu_direct_args &a)
{
    constexpr int V = 16 / sizeof(T);
    span p;
    unsigned long long t = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    unsigned long long ulo = a.lo / V;
    p.stride = (unsigned long long)gridDim.x * blockDim.x;
    p.u0 = ulo + t;
    p.uhi = a.vec ? a.hi / V : ulo;
    p.e0 = (a.vec ? p.uhi * V : a.lo) + t;
    return p;
}

/* ALLREDUCE: index j is the element; REDUCE_SCATTER: index i is the element
 * of every block (blocks in order). */
template <typename T, int OP>
__global__ void __launch_bounds__(GPU_DIRECT_THREADS) k_reduce(const gpu_direct_args a)
{
    if (stopped(a))
        return;
    constexpr int V = 16 / sizeof(T);
    const int rs = a.mode == GPU_DIRECT_REDUCE_SCATTER;
    const int blocks = rs ? a.nranks : 1;
    const span p = span_of<T>(a);
    for (unsigned long long u = p.u0; u < p.uhi; u += p.stride) {
        unsigned long long i = u * V;
        for (int b = 0; b < blocks; b++)
            put<T>(a, rs ? b : -1, i, reduce_unit<T, OP>(a, b * a.n + i));
    }
    for (unsigned long long i = p.e0; i < a.hi; i += p.stride)
        for (int b = 0; b < blocks; b++)
            put<T>(a, rs ? b : -1, i, reduce_one<T, OP>(a, b * a.n + i));
}

/* ALLGATHER: index j = p * n + i is element i of rank p's input. */
template <typename T>
__global__ void __launch_bounds__(GPU_DIRECT_THREADS) k_gather(const gpu_direct_args a)
{
    if (stopped(a))
        return;
    constexpr int V = 16 / sizeof(T);
    const span sp = span_of<T>(a);
    for (unsigned long long u = sp.u0; u < sp.uhi; u += sp.stride) {
        unsigned long long j = u * V, p = j / a.n, i = j - p * a.n;
        put<T>(a, -1, j, *reinterpret_cast<const uint4 *>(static_cast<const T *>(a.in[p]) + i));
    }
    for (unsigned long long j = sp.e0; j < a.hi; j += sp.stride) {
        unsigned long long p = j / a.n;
        put<T>(a, -1, j, static_cast<const T *>(a.in[p])[j - p * a.n]);
    }
}

template <typename T> cudaError_t launch_ag(const gpu_direct_args &a, cudaStream_t st)
{
    k_gather<T><<<(unsigned)a.blocks, GPU_DIRECT_THREADS, 0, st>>>(a);
    return cudaGetLastError();
}

template <typename T> cudaError_t launch_t(const gpu_direct_args &a, cudaStream_t st)
{
    dim3 g((unsigned)a.blocks), t(GPU_DIRECT_THREADS);
    switch (a.op) {
    case SUM: k_reduce<T, SUM><<<g, t, 0, st>>>(a); break;
    case PROD: k_reduce<T, PROD><<<g, t, 0, st>>>(a); break;
    case MAX: k_reduce<T, MAX><<<g, t, 0, st>>>(a); break;
    case MIN: k_reduce<T, MIN><<<g, t, 0, st>>>(a); break;
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

template <typename T> cudaError_t load_t()
{
    cudaError_t e = cudaSuccess;
    CADRE_LOAD_OPS(e, k_reduce, T);
    return e;
}

} // namespace

/* The gates of the direct calls (gpu_direct_args.failed): a word of device
 * memory per communicator, in the module's own memory (no cudaMalloc). */
__device__ unsigned int cadre_direct_gates[GPU_DIRECT_GATES];

extern "C" unsigned int *cadre__gpu_direct_gate(int i)
{
    void *p = NULL;
    if (i < 0 || i >= GPU_DIRECT_GATES ||
        cudaGetSymbolAddress(&p, cadre_direct_gates) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return static_cast<unsigned int *>(p) + i;
}

/* Every kernel of this file loaded now (cadre__gpu_kernels_load says why). */
extern "C" int cadre__gpu_direct_load(void)
{
    cudaFuncAttributes at;
    cudaError_t e = cudaFuncGetAttributes(&at, k_gather<uint8_t>);
    if (e == cudaSuccess)
        e = cudaFuncGetAttributes(&at, k_gather<uint16_t>);
    if (e == cudaSuccess)
        e = cudaFuncGetAttributes(&at, k_gather<uint32_t>);
    if (e == cudaSuccess)
        e = cudaFuncGetAttributes(&at, k_gather<uint64_t>);
    cudaError_t (*const each[])() = {load_t<int8_t>,  load_t<uint8_t>, load_t<int32_t>,
                                     load_t<uint32_t>, load_t<int64_t>, load_t<uint64_t>,
                                     load_t<__half>,  load_t<__nv_bfloat16>, load_t<float>,
                                     load_t<double>};
    for (unsigned i = 0; e == cudaSuccess && i < sizeof each / sizeof *each; i++)
        e = each[i]();
    return e;
}

extern "C" int cadre__gpu_direct_launch(const void *p, void *stream)
{
    const gpu_direct_args &a = *static_cast<const gpu_direct_args *>(p);
    cudaStream_t st = (cudaStream_t)stream;
    if (a.blocks < 1 || a.nranks < 1 || a.nranks > GPU_DIRECT_MAXR || !a.n || a.hi < a.lo)
        return cudaErrorInvalidValue;
    if (a.mode == GPU_DIRECT_ALLGATHER) { /* bytes are bytes: one kernel per size */
        switch (a.dt) {
        case CADRE_INT8: case CADRE_UINT8: return launch_ag<uint8_t>(a, st);
        case CADRE_FLOAT16: case CADRE_BFLOAT16: return launch_ag<uint16_t>(a, st);
        case CADRE_INT32: case CADRE_UINT32: case CADRE_FLOAT32: return launch_ag<uint32_t>(a, st);
        case CADRE_INT64: case CADRE_UINT64: case CADRE_FLOAT64: return launch_ag<uint64_t>(a, st);
        }
        return cudaErrorInvalidValue;
    }
    switch (a.dt) {
    case CADRE_INT8: return launch_t<int8_t>(a, st);
    case CADRE_UINT8: return launch_t<uint8_t>(a, st);
    case CADRE_INT32: return launch_t<int32_t>(a, st);
    case CADRE_UINT32: return launch_t<uint32_t>(a, st);
    case CADRE_INT64: return launch_t<int64_t>(a, st);
    case CADRE_UINT64: return launch_t<uint64_t>(a, st);
    case CADRE_FLOAT16: return launch_t<__half>(a, st);
    case CADRE_BFLOAT16: return launch_t<__nv_bfloat16>(a, st);
    case CADRE_FLOAT32: return launch_t<float>(a, st);
    case CADRE_FLOAT64: return launch_t<double>(a, st);
    }
    return cudaErrorInvalidValue;
}
