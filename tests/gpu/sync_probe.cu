/*
 * sync_probe.cu - the primitives of the device collectives across processes
 * sharing one GPU, measured alone (no libcadre, no PMIx): k processes forked
 * before CUDA starts, each with its own context.
 *
 *   sync_probe K [MiB]
 *
 * 1. barrier: each rank's stream writes its flag (cuStreamWriteValue32) and
 *    waits for every peer's (cuStreamWaitValue32, GEQ); flags in host shared
 *    memory registered with the device (H) or in device memory mapped through
 *    CUDA IPC (D). Time per barrier, with and without a small kernel.
 * 2. direct allreduce of float32 sums: every rank's input and output mapped by
 *    every peer (CUDA IPC, once); a call is barrier, one kernel (rank r sums
 *    slice r of every input and stores it in every output), barrier. Checked
 *    element by element, then timed at 8 KiB and at MiB (default 256).
 * 3. device-to-device copy bandwidth of one process (bytes read + written).
 *
 * Prints one line per figure; exit status 0 only if every check passed.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXK 8
#define CK(x)                                                                                     \
    do {                                                                                          \
        cudaError_t e_ = (x);                                                                     \
        if (e_ != cudaSuccess) {                                                                  \
            fprintf(stderr, "rank %d: %s:%d %s: %s\n", me, __FILE__, __LINE__, #x,                \
                    cudaGetErrorString(e_));                                                      \
            _exit(2);                                                                             \
        }                                                                                         \
    } while (0)
#define CD(x)                                                                                     \
    do {                                                                                          \
        CUresult e_ = (x);                                                                        \
        if (e_ != CUDA_SUCCESS) {                                                                 \
            fprintf(stderr, "rank %d: %s:%d %s: CUresult %d\n", me, __FILE__, __LINE__, #x,       \
                    (int)e_);                                                                     \
            _exit(2);                                                                             \
        }                                                                                         \
    } while (0)

struct shared {
    volatile unsigned hflags[64][MAXK] __attribute__((aligned(4096))); /* host flags */
    unsigned bar_count, bar_gen;
    cudaIpcMemHandle_t dflag[MAXK], in[MAXK], out[MAXK];
    double fig[MAXK][16];
    int fail[MAXK];
};

static struct shared *S;
static int me, K;

typedef CUresult (*wait_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
typedef CUresult (*write_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
static wait_fn p_wait;
static write_fn p_write;

static void host_barrier(void)
{
    unsigned g = __atomic_load_n(&S->bar_gen, __ATOMIC_ACQUIRE);
    if (__atomic_add_fetch(&S->bar_count, 1, __ATOMIC_ACQ_REL) == (unsigned)K) {
        __atomic_store_n(&S->bar_count, 0, __ATOMIC_RELAXED);
        __atomic_add_fetch(&S->bar_gen, 1, __ATOMIC_RELEASE);
    } else {
        while (__atomic_load_n(&S->bar_gen, __ATOMIC_ACQUIRE) == g)
            usleep(50);
    }
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

__global__ void tiny(float *p)
{
    p[threadIdx.x] += 1.0f;
}

/* slice `me` of every input, summed in rank order, into every output */
__global__ void ar_direct(const float4 *const *in, float4 *const *out, int k, size_t lo, size_t hi)
{
    for (size_t i = lo + blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < hi;
         i += (size_t)gridDim.x * blockDim.x) {
        float4 s = __ldcg(in[0] + i);
        for (int q = 1; q < k; q++) {
            float4 v = __ldcg(in[q] + i);
            s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
        }
        for (int q = 0; q < k; q++)
            __stcg(out[q] + i, s);
    }
}

struct ptrs {
    const float4 *in[MAXK];
    float4 *out[MAXK];
};

static CUdeviceptr hf_dev; /* device address of S->hflags */
static unsigned *df_mine, *df_peer[MAXK]; /* device flags: mine, and each rank's mapped */

/* one barrier on stream s; mode 0 host flags, 1 device flags */
static void enqueue_barrier(cudaStream_t s, int mode, unsigned row, unsigned v)
{
    if (mode == 0) {
        CD(p_write((CUstream)s, hf_dev + (row * MAXK + me) * 4, v, 0));
        for (int q = 0; q < K; q++)
            if (q != me)
                CD(p_wait((CUstream)s, hf_dev + (row * MAXK + q) * 4, v, CU_STREAM_WAIT_VALUE_GEQ));
    } else {
        for (int q = 0; q < K; q++)
            if (q != me)
                CD(p_write((CUstream)s, (CUdeviceptr)(df_peer[q] + row * MAXK + me), v, 0));
        for (int q = 0; q < K; q++)
            if (q != me)
                CD(p_wait((CUstream)s, (CUdeviceptr)(df_mine + row * MAXK + q), v,
                          CU_STREAM_WAIT_VALUE_GEQ));
    }
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int child(size_t mib)
{
    int dev = 0;
    CK(cudaSetDevice(dev));
    CK(cudaFree(0));
    cudaDriverEntryPointQueryResult q;
    CK(cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", (void **)&p_wait, 12000,
                                        cudaEnableDefault, &q));
    CK(cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", (void **)&p_write, 12000,
                                        cudaEnableDefault, &q));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    if (me == 0) {
        int v = 0;
        cudaDeviceProp pr;
        CK(cudaGetDeviceProperties(&pr, dev));
        cudaDeviceGetAttribute(&v, cudaDevAttrComputeMode, dev);
        int drv = 0;
        cudaDriverGetVersion(&drv);
        printf("probe: %s, %d SMs, L2 %d MiB, compute mode %d, driver CUDA %d\n", pr.name,
               pr.multiProcessorCount, pr.l2CacheSize >> 20, v, drv);
        fflush(stdout);
    }
    /* host flags: the shared page, registered */
    CK(cudaHostRegister((void *)S->hflags, sizeof S->hflags,
                        cudaHostRegisterMapped | cudaHostRegisterPortable));
    void *dp;
    CK(cudaHostGetDevicePointer(&dp, (void *)S->hflags, 0));
    hf_dev = (CUdeviceptr)dp;
    /* device flags */
    CK(cudaMalloc((void **)&df_mine, 64 * MAXK * 4));
    CK(cudaMemset(df_mine, 0, 64 * MAXK * 4));
    CK(cudaIpcGetMemHandle(&S->dflag[me], df_mine));
    /* data */
    size_t n = mib << 20;
    float *in, *out;
    CK(cudaMalloc((void **)&in, n));
    CK(cudaMalloc((void **)&out, n));
    CK(cudaIpcGetMemHandle(&S->in[me], in));
    CK(cudaIpcGetMemHandle(&S->out[me], out));
    CK(cudaDeviceSynchronize());
    host_barrier();
    struct ptrs P;
    for (int r = 0; r < K; r++) {
        if (r == me) {
            df_peer[r] = df_mine, P.in[r] = (const float4 *)in, P.out[r] = (float4 *)out;
            continue;
        }
        void *a;
        CK(cudaIpcOpenMemHandle(&a, S->dflag[r], cudaIpcMemLazyEnablePeerAccess));
        df_peer[r] = (unsigned *)a;
        CK(cudaIpcOpenMemHandle(&a, S->in[r], cudaIpcMemLazyEnablePeerAccess));
        P.in[r] = (const float4 *)a;
        CK(cudaIpcOpenMemHandle(&a, S->out[r], cudaIpcMemLazyEnablePeerAccess));
        P.out[r] = (float4 *)a;
    }
    struct ptrs *Pd;
    CK(cudaMalloc((void **)&Pd, sizeof P));
    CK(cudaMemcpy(Pd, &P, sizeof P, cudaMemcpyHostToDevice));
    float *tp;
    CK(cudaMalloc((void **)&tp, 4096));
    CK(cudaMemset(tp, 0, 4096));
    host_barrier();

    unsigned seq[64] = {0};
    /* 1. barriers */
    int iters = 500;
    for (int mode = 0; mode < 2; mode++)
        for (int kern = 0; kern < 2; kern++) {
            int row = mode * 2 + kern;
            for (int w = 0; w < 50; w++)
                enqueue_barrier(s, mode, row, ++seq[row]);
            CK(cudaStreamSynchronize(s));
            host_barrier();
            double t0 = now();
            for (int i = 0; i < iters; i++) {
                if (kern)
                    tiny<<<1, 32, 0, s>>>(tp);
                enqueue_barrier(s, mode, row, ++seq[row]);
            }
            CK(cudaGetLastError());
            CK(cudaStreamSynchronize(s));
            S->fig[me][row] = (now() - t0) / iters * 1e6;
            host_barrier();
        }

    /* 2. direct allreduce: check, then time at 8 KiB and at n */
    size_t sizes[2] = {8192, n};
    for (int si = 0; si < 2; si++) {
        size_t bytes = sizes[si], n4 = bytes / 16, per = (n4 + K - 1) / K;
        size_t lo = per * me < n4 ? per * me : n4, hi = lo + per < n4 ? lo + per : n4;
        int blocks = bytes <= 65536 ? 8 : 264, row = 8 + si;
        /* inputs: rank r element i = (i % 1021) + r * 0.5, exact in float */
        float *h = (float *)malloc(bytes);
        for (size_t i = 0; i < bytes / 4; i++)
            h[i] = (float)(i % 1021) + me * 0.5f;
        CK(cudaMemcpy(in, h, bytes, cudaMemcpyHostToDevice));
        CK(cudaMemset(out, 0xff, bytes)); /* NaN poison */
        CK(cudaDeviceSynchronize());
        host_barrier();
        int reps = si == 0 ? 500 : 20;
        double *t = (double *)malloc(sizeof(double) * reps);
        for (int it = -2; it < reps; it++) {
            double t0 = now();
            enqueue_barrier(s, 0, row, ++seq[row]);
            ar_direct<<<blocks, 512, 0, s>>>(Pd->in, Pd->out, K, lo, hi);
            enqueue_barrier(s, 0, row + 8, ++seq[row + 8]);
            if (si == 1 || it < 0 || it == reps - 1) {
                CK(cudaStreamSynchronize(s));
                if (it >= 0)
                    t[it] = now() - t0;
            }
            if (it == -2) {
                CK(cudaGetLastError());
                CK(cudaMemcpy(h, out, bytes, cudaMemcpyDeviceToHost));
                long bad = 0;
                for (size_t i = 0; i < bytes / 4; i++) {
                    float want = (float)K * (float)(i % 1021) + 0.5f * (float)(K * (K - 1) / 2);
                    if (h[i] != want && bad++ < 3)
                        fprintf(stderr, "rank %d: %zu B: [%zu] %g want %g\n", me, bytes, i,
                                h[i], want);
                }
                if (bad)
                    S->fail[me] = 1;
                host_barrier();
            }
        }
        if (si == 0) {
            /* pipelined: enqueue reps calls, one sync */
            host_barrier();
            double t0 = now();
            for (int it = 0; it < reps; it++) {
                enqueue_barrier(s, 0, row, ++seq[row]);
                ar_direct<<<blocks, 512, 0, s>>>(Pd->in, Pd->out, K, lo, hi);
                enqueue_barrier(s, 0, row + 8, ++seq[row + 8]);
            }
            CK(cudaStreamSynchronize(s));
            S->fig[me][4] = (now() - t0) / reps * 1e6;
        } else {
            qsort(t, reps, sizeof *t, cmp);
            S->fig[me][5] = t[reps / 2] * 1e3;
            S->fig[me][6] = t[0] * 1e3;
        }
        free(t);
        free(h);
        host_barrier();
    }
    /* 3. copy bandwidth, rank 0 alone */
    if (me == 0) {
        float *a = in, *b = out;
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, s));
        CK(cudaEventRecord(e0, s));
        for (int i = 0; i < 10; i++)
            CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, s));
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        S->fig[0][7] = 2.0 * n * 10 / (ms * 1e-3) / 1e9;
    }
    host_barrier();
    return 0;
}

int main(int argc, char **argv)
{
    K = argc > 1 ? atoi(argv[1]) : 2;
    size_t mib = argc > 2 ? (size_t)atol(argv[2]) : 256;
    if (K < 1 || K > MAXK)
        return 2;
    S = (struct shared *)mmap(NULL, sizeof *S, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                              -1, 0);
    if (S == MAP_FAILED)
        return 2;
    pid_t pid[MAXK];
    for (int r = 0; r < K; r++) {
        pid[r] = fork();
        if (pid[r] == 0) {
            me = r;
            _exit(child(mib));
        }
    }
    int bad = 0;
    for (int r = 0; r < K; r++) {
        int st;
        waitpid(pid[r], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st))
            bad = 1, fprintf(stderr, "rank %d: status 0x%x\n", r, st);
        bad |= S->fail[r];
    }
    double mx[8] = {0};
    for (int r = 0; r < K; r++)
        for (int i = 0; i < 7; i++)
            mx[i] = S->fig[r][i] > mx[i] ? S->fig[r][i] : mx[i];
    printf("probe K=%d: barrier us: host flags %.2f (+kernel %.2f), device flags %.2f (+kernel "
           "%.2f)\n",
           K, mx[0], mx[1], mx[2], mx[3]);
    double floor_ms = S->fig[0][7] > 0 ? 2.0 * K * (mib << 20) / (S->fig[0][7] * 1e9) * 1e3 : 0;
    printf("probe K=%d: allreduce 8 KiB %.2f us/call pipelined; %zu MiB median %.3f ms (min "
           "%.3f); copy %.0f GB/s, floor %.3f ms, ratio %.2f; %s\n",
           K, mx[4], mib, mx[5], mx[6], S->fig[0][7], floor_ms, floor_ms > 0 ? mx[5] / floor_ms : 0,
           bad ? "FAILED" : "checked");
    return bad;
}
