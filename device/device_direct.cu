/*
 * device_direct.cu - the direct allreduce kernels of one node: every rank reads
 * its peers' scratch through CUDA IPC mappings (device/device_direct.h).
 *
 * One-shot: block b copies its piece of the input into its scratch, tells
 * every peer (flag 0), waits for every peer's flag 0 of block b, then
 * reduces piece b of every rank's scratch into the output. Two-shot: the
 * vector is cut in nranks slices, each in `blocks` pieces; block b copies
 * piece b of every slice, and after flag 0 reduces piece b of its own slice
 * into its scratch and the output (reduce-scatter), tells the peers (flag 1),
 * and after their flag 1 copies piece b of each peer's slice out of that
 * peer's scratch (all-gather). reduce_scatter and allgather are the two
 * halves alone, on slices laid out as the call's buffers are. Every rank
 * reduces in rank order, so all get
 * the same bits; half and bfloat16 accumulate in float32 and are rounded
 * once; AVG divides the sum once.
 *
 * Why no barrier at the end: a call writes scratch half seq & 1, and rank r
 * reaches call s + 2 only after call s + 1 saw flag 0 from every peer, which
 * a peer sets only once its call s kernel has ended (coll/coll_gpu_direct.c orders a
 * communicator's direct calls on the device). Flags only grow, so a peer one
 * call ahead is fine: a wait is for flag >= seq (modulo 2^32).
 *
 * Memory order: the data stores of a block, __syncthreads, then one thread's
 * __threadfence_system and st.release.sys of the flag; the waiting thread's
 * ld.acquire.sys, then __syncthreads before any thread reads. Peer data is
 * read with ld.global.cg (L2, never a stale L1 line).
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

__device__ __forceinline__ unsigned ld_acquire(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void st_release(unsigned *p, unsigned v)
{
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

/* This block has reached `phase`: every peer learns it. */
__device__ __forceinline__ void signal(const gpu_direct_args &a, int phase)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence_system();
        for (int q = 0; q < a.nranks; q++)
            st_release(a.flags[q] + GPU_DIRECT_FLAG(phase, blockIdx.x, a.me), a.seq);
    }
}

/* Until block b of every peer has reached `phase` of this call. */
__device__ __forceinline__ void wait_peers(const gpu_direct_args &a, int phase)
{
    if (threadIdx.x == 0) {
        for (int q = 0; q < a.nranks; q++) {
            if (q == a.me)
                continue;
            const unsigned *f = a.flags[a.me] + GPU_DIRECT_FLAG(phase, blockIdx.x, q);
            while ((int)(ld_acquire(f) - a.seq) < 0)
                __nanosleep(32);
        }
    }
    __syncthreads();
}

/* Units (16 bytes) [*ulo, *uhi) of piece k of P over nunits. */
__device__ __forceinline__ void piece(unsigned long long nunits, int P, int k,
                                      unsigned long long *ulo, unsigned long long *uhi)
{
    unsigned long long U = (nunits + P - 1) / P;
    unsigned long long lo = (unsigned long long)k * U;
    *ulo = lo < nunits ? lo : nunits;
    *uhi = lo + U < nunits ? lo + U : nunits;
}

/* The input's units [ulo, uhi) into this rank's scratch (16-byte aligned);
 * the input may be unaligned, and its last unit partial. */
template <typename T>
__device__ __forceinline__ void copy_in(T *scratch, const T *in, unsigned long long n,
                                        unsigned long long ulo, unsigned long long uhi)
{
    constexpr int V = 16 / sizeof(T);
    unsigned long long full = n / V; /* units wholly inside the input */
    unsigned long long vhi = uhi < full ? uhi : full;
    if (((uintptr_t)in & 15) == 0) {
        const uint4 *s4 = reinterpret_cast<const uint4 *>(in);
        uint4 *d4 = reinterpret_cast<uint4 *>(scratch);
        for (unsigned long long u = ulo + threadIdx.x; u < vhi; u += blockDim.x)
            d4[u] = s4[u];
    } else {
        for (unsigned long long i = ulo * V + threadIdx.x; i < vhi * V; i += blockDim.x)
            scratch[i] = in[i];
    }
    unsigned long long lo = (vhi > ulo ? vhi : ulo) * V, hi = uhi * V < n ? uhi * V : n;
    for (unsigned long long i = lo + threadIdx.x; i < hi; i += blockDim.x)
        scratch[i] = in[i];
}

/* Unit u of the output (only its elements below n). */
template <typename T>
__device__ __forceinline__ void store_unit(T *out, unsigned long long u, uint4 v,
                                           unsigned long long n)
{
    constexpr int V = 16 / sizeof(T);
    unsigned long long e0 = u * V;
    if (e0 + V <= n && ((uintptr_t)(out + e0) & 15) == 0) {
        *reinterpret_cast<uint4 *>(out + e0) = v;
        return;
    }
    const T *t = reinterpret_cast<const T *>(&v);
#pragma unroll
    for (int k = 0; k < V; k++)
        if (e0 + k < n)
            out[e0 + k] = t[k];
}

/* Unit u reduced over every rank's scratch, in rank order. */
template <typename T, int OP>
__device__ __forceinline__ uint4 reduce_unit(const gpu_direct_args &a, unsigned long long u)
{
    constexpr int V = 16 / sizeof(T);
    typedef typename Acc<T>::type A;
    A acc[V];
    uint4 v = __ldcg(reinterpret_cast<const uint4 *>(a.scratch[0]) + u);
    /* u counts from each scratch's start: a reduce-scatter slice adds its
     * offset to u. */
    const T *t = reinterpret_cast<const T *>(&v);
#pragma unroll
    for (int k = 0; k < V; k++)
        acc[k] = to_acc(t[k]);
    for (int q = 1; q < a.nranks; q++) {
        v = __ldcg(reinterpret_cast<const uint4 *>(a.scratch[q]) + u);
#pragma unroll
        for (int k = 0; k < V; k++)
            acc[k] = combine<A, OP>(acc[k], (A)to_acc(t[k]));
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

/* Reduce-scatter: block b takes piece b of every slice of the input, then
 * reduces piece b of this rank's slice over every rank's scratch. */
template <typename T, int OP>
__device__ __forceinline__ void reduce_scatter(const gpu_direct_args &a)
{
    constexpr int V = 16 / sizeof(T);
    unsigned long long n = a.n, nunits = (n + V - 1) / V, ulo, uhi;
    unsigned long long sst = a.sstride / sizeof(T); /* a whole number of units */
    T *mine = static_cast<T *>(a.scratch[a.me]);
    piece(nunits, a.blocks, blockIdx.x, &ulo, &uhi);
    for (int s = 0; s < a.nranks; s++)
        copy_in(mine + s * sst, reinterpret_cast<const T *>(static_cast<const char *>(a.in) +
                                                            s * a.in_stride),
                n, ulo, uhi);
    signal(a, 0);
    wait_peers(a, 0);
    unsigned long long base = a.me * sst / V;
    for (unsigned long long u = ulo + threadIdx.x; u < uhi; u += blockDim.x)
        store_unit(static_cast<T *>(a.out), u, reduce_unit<T, OP>(a, base + u), n);
    signal(a, 2);
}

/* Allgather: block b puts piece b of the input in scratch, then copies piece
 * b of every rank's scratch to its place in the output. */
template <typename T> __device__ __forceinline__ void allgather(const gpu_direct_args &a)
{
    constexpr int V = 16 / sizeof(T);
    unsigned long long n = a.n, nunits = (n + V - 1) / V, ulo, uhi;
    piece(nunits, a.blocks, blockIdx.x, &ulo, &uhi);
    copy_in(static_cast<T *>(a.scratch[a.me]), static_cast<const T *>(a.in), n, ulo, uhi);
    signal(a, 0);
    wait_peers(a, 0);
    for (int q = 0; q < a.nranks; q++) {
        const uint4 *src = reinterpret_cast<const uint4 *>(a.scratch[q]);
        T *out = reinterpret_cast<T *>(static_cast<char *>(a.out) + q * a.out_stride);
        for (unsigned long long u = ulo + threadIdx.x; u < uhi; u += blockDim.x)
            store_unit(out, u, __ldcg(src + u), n);
    }
    signal(a, 2);
}

template <typename T, int OP>
__global__ void __launch_bounds__(GPU_DIRECT_THREADS) k_direct(const gpu_direct_args a)
{
    if (a.mode == GPU_DIRECT_REDUCE_SCATTER) {
        reduce_scatter<T, OP>(a);
        return;
    }
    constexpr int V = 16 / sizeof(T);
    unsigned long long n = a.n, nunits = (n + V - 1) / V, ulo, uhi;
    int B = a.blocks, b = blockIdx.x, slices = a.two_shot ? a.nranks : 1;
    const T *in = static_cast<const T *>(a.in);
    T *out = static_cast<T *>(a.out);
    T *mine = static_cast<T *>(a.scratch[a.me]);

    for (int s = 0; s < slices; s++) {
        piece(nunits, slices * B, s * B + b, &ulo, &uhi);
        copy_in(mine, in, n, ulo, uhi);
    }
    signal(a, 0);
    wait_peers(a, 0);

    piece(nunits, slices * B, (a.two_shot ? a.me : 0) * B + b, &ulo, &uhi);
    for (unsigned long long u = ulo + threadIdx.x; u < uhi; u += blockDim.x) {
        uint4 r = reduce_unit<T, OP>(a, u);
        if (a.two_shot)
            reinterpret_cast<uint4 *>(mine)[u] = r;
        store_unit(out, u, r, n);
    }
    if (a.two_shot) {
        signal(a, 1);
        wait_peers(a, 1);
        for (int q = 0; q < a.nranks; q++) {
            if (q == a.me)
                continue;
            piece(nunits, slices * B, q * B + b, &ulo, &uhi);
            const uint4 *src = reinterpret_cast<const uint4 *>(a.scratch[q]);
            for (unsigned long long u = ulo + threadIdx.x; u < uhi; u += blockDim.x)
                store_unit(out, u, __ldcg(src + u), n);
        }
    }
    signal(a, 2);
}

template <typename T> __global__ void __launch_bounds__(GPU_DIRECT_THREADS)
    k_allgather(const gpu_direct_args a)
{
    allgather<T>(a);
}

template <typename T> cudaError_t launch_ag(const gpu_direct_args &a, cudaStream_t st)
{
    k_allgather<T><<<(unsigned)a.blocks, GPU_DIRECT_THREADS, 0, st>>>(a);
    return cudaGetLastError();
}

template <typename T> cudaError_t launch_t(const gpu_direct_args &a, cudaStream_t st)
{
    dim3 g((unsigned)a.blocks), t(GPU_DIRECT_THREADS);
    switch (a.op) {
    case SUM: k_direct<T, SUM><<<g, t, 0, st>>>(a); break;
    case PROD: k_direct<T, PROD><<<g, t, 0, st>>>(a); break;
    case MAX: k_direct<T, MAX><<<g, t, 0, st>>>(a); break;
    case MIN: k_direct<T, MIN><<<g, t, 0, st>>>(a); break;
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

} // namespace

extern "C" int cadre__gpu_direct_launch(const void *p, void *stream)
{
    const gpu_direct_args &a = *static_cast<const gpu_direct_args *>(p);
    cudaStream_t st = (cudaStream_t)stream;
    if (a.blocks < 1 || a.blocks > GPU_DIRECT_MAXB || a.nranks < 1 || a.nranks > GPU_DIRECT_MAXR)
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
