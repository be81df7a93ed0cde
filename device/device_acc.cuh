/*
 * device_acc.cuh - the element arithmetic of the reduction kernels, shared by
 * device/device_kernels.cu and device/device_direct.cu (included inside their anonymous
 * namespace): the type an op is computed in, and the conversions to it.
 */
#ifndef CADRE_GPU_ACC_CUH
#define CADRE_GPU_ACC_CUH

enum { SUM = CADRE_SUM, PROD = CADRE_PROD, MAX = CADRE_MAX, MIN = CADRE_MIN };

/* The type arithmetic is done in: wrapping unsigned for integer SUM/PROD,
 * float for the 16-bit floats. */
template <typename T> struct Acc { typedef T type; };
template <> struct Acc<__half> { typedef float type; };
template <> struct Acc<__nv_bfloat16> { typedef float type; };

__device__ __forceinline__ float to_acc(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_acc(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T to_acc(T v) { return v; }
template <typename T> __device__ __forceinline__ T from_acc(typename Acc<T>::type v) { return (T)v; }
template <> __device__ __forceinline__ __half from_acc<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16>(float v)
{
    return __float2bfloat16_rn(v);
}

template <typename T> struct Wrap { typedef T type; };
template <> struct Wrap<int8_t> { typedef uint8_t type; };
template <> struct Wrap<int32_t> { typedef uint32_t type; };
template <> struct Wrap<int64_t> { typedef uint64_t type; };

/* e = the load of kernel template K for element type T and every op, unless
 * e already holds a failure (cudaFuncGetAttributes loads a lazily loaded
 * kernel: cadre__gpu_kernels_load). */
#define CADRE_LOAD_OPS(e, K, T)                                                                    \
    do {                                                                                           \
        cudaFuncAttributes at_;                                                                    \
        if (e == cudaSuccess)                                                                      \
            e = cudaFuncGetAttributes(&at_, K<T, SUM>);                                            \
        if (e == cudaSuccess)                                                                      \
            e = cudaFuncGetAttributes(&at_, K<T, PROD>);                                           \
        if (e == cudaSuccess)                                                                      \
            e = cudaFuncGetAttributes(&at_, K<T, MAX>);                                            \
        if (e == cudaSuccess)                                                                      \
            e = cudaFuncGetAttributes(&at_, K<T, MIN>);                                            \
    } while (0)

#endif /* CADRE_GPU_ACC_CUH */
