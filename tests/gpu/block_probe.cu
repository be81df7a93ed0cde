/*
 * block_probe.cu - which CUDA runtime calls wait for a stream of their own
 * process that is parked on a flag in host memory (cuStreamWaitValue32).
 * The device path may only call, in a thread that releases such a flag
 * (the proxy), functions that return while the flag is unset; otherwise the
 * stream waits for the thread and the thread for the stream. No libcadre.
 *
 *   block_probe
 *
 * Two processes forked before CUDA starts: A exports two allocations
 * (cudaIpcGetMemHandle) through a pipe; B parks a non-blocking stream on a
 * host flag, then runs each call below in a second thread. A call that has
 * not returned after 2 s BLOCKS; B then sets the flag and reports whether
 * it returned after. Each call gets a freshly parked stream. One line per
 * call; exit status 0 when every line was printed (whatever the verdicts).
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CK(x)                                                                                     \
    do {                                                                                          \
        cudaError_t e_ = (x);                                                                     \
        if (e_ != cudaSuccess) {                                                                  \
            fprintf(stderr, "block_probe: %s:%d %s: %s\n", __FILE__, __LINE__, #x,                \
                    cudaGetErrorString(e_));                                                      \
            _exit(2);                                                                             \
        }                                                                                         \
    } while (0)

typedef CUresult (*pfn_wait32)(CUstream, CUdeviceptr, cuuint32_t, unsigned);

static cudaIpcMemHandle_t h[2];
static void *mapped[2];
static void *scratch_dev, *scratch_host;
static char reg_host[1 << 16] __attribute__((aligned(4096)));
static volatile int finished;
static cudaError_t result;
static int which;

static const char *names[] = {
    "cudaIpcOpenMemHandle (first)", "cudaIpcOpenMemHandle (second)", "cudaIpcCloseMemHandle",
    "cudaMalloc",                   "cudaFree",                      "cudaHostAlloc",
    "cudaFreeHost",                 "cudaHostRegister",              "cudaHostUnregister",
    "cudaStreamCreate",             "cudaEventCreate",               "cudaEventQuery",
    "cudaMemcpy (D2H, other stream)",
};
#define NCALLS (int)(sizeof names / sizeof *names)

static cudaEvent_t ev;

static void *call(void *arg)
{
    (void)arg;
    cudaError_t e = cudaSuccess;
    cudaStream_t s;
    char b[16];
    switch (which) {
    case 0: e = cudaIpcOpenMemHandle(&mapped[0], h[0], cudaIpcMemLazyEnablePeerAccess); break;
    case 1: e = cudaIpcOpenMemHandle(&mapped[1], h[1], cudaIpcMemLazyEnablePeerAccess); break;
    case 2: e = cudaIpcCloseMemHandle(mapped[0]); break;
    case 3: e = cudaMalloc(&scratch_dev, 1 << 20); break;
    case 4: e = cudaFree(scratch_dev); break;
    case 5: e = cudaHostAlloc(&scratch_host, 1 << 20, cudaHostAllocMapped); break;
    case 6: e = cudaFreeHost(scratch_host); break;
    case 7: e = cudaHostRegister(reg_host, sizeof reg_host, cudaHostRegisterMapped); break;
    case 8: e = cudaHostUnregister(reg_host); break;
    case 9: e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); break;
    case 10: e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming); break;
    case 11: e = cudaEventQuery(ev); break;
    case 12:
        e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(b, mapped[1], sizeof b, cudaMemcpyDeviceToHost, s);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(s);
        break;
    }
    result = e;
    finished = 1;
    return NULL;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int child(int rd)
{
    if (read(rd, h, sizeof h) != (ssize_t)sizeof h) {
        fprintf(stderr, "block_probe: no handles from the parent\n");
        return 2;
    }
    CK(cudaSetDevice(0));
    enum cudaDriverEntryPointQueryResult q;
    void *f = NULL;
    CK(cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &f, 12000, cudaEnableDefault, &q));
    if (!f) {
        fprintf(stderr, "block_probe: no cuStreamWaitValue32\n");
        return 2;
    }
    pfn_wait32 wait32 = (pfn_wait32)f;
    unsigned *flag;
    CK(cudaHostAlloc((void **)&flag, 4096, cudaHostAllocMapped | cudaHostAllocPortable));
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    int printed = 0;
    for (which = 0; which < NCALLS; which++) {
        *(volatile unsigned *)flag = 0;
        if (wait32((CUstream)st, (CUdeviceptr)(uintptr_t)flag, 1, CU_STREAM_WAIT_VALUE_GEQ) !=
            CUDA_SUCCESS) {
            fprintf(stderr, "block_probe: cuStreamWaitValue32 failed\n");
            return 2;
        }
        usleep(20000); /* the wait reaches the device */
        finished = 0;
        pthread_t t;
        double t0 = now();
        pthread_create(&t, NULL, call, NULL);
        while (!finished && now() - t0 < 2.0)
            usleep(1000);
        int blocked = !finished;
        double held = now() - t0;
        *(volatile unsigned *)flag = 1;
        while (!finished && now() - t0 < 10.0)
            usleep(1000);
        printf("block_probe: %-32s %s (%s)\n", names[which],
               !blocked ? "returns while the stream waits"
               : finished ? "BLOCKS until the stream's flag is set"
                          : "BLOCKS, still after the flag was set",
               finished ? cudaGetErrorString(result) : "no return");
        fflush(stdout);
        if (!finished)
            break; /* the thread holds the runtime: stop here */
        (void)held;
        pthread_join(t, NULL);
        CK(cudaStreamSynchronize(st));
        printed++;
    }
    return printed == NCALLS ? 0 : 1;
}

int main(void)
{
    int p[2], done[2];
    if (pipe(p) || pipe(done))
        return 2;
    pid_t pid = fork();
    if (pid == 0) {
        close(p[1]);
        int rc = child(p[0]);
        char c = 1;
        if (write(done[1], &c, 1) != 1)
            rc = 2;
        _exit(rc);
    }
    close(p[0]);
    CK(cudaSetDevice(0));
    void *a, *b;
    CK(cudaMalloc(&a, 1 << 20));
    CK(cudaMalloc(&b, 1 << 20));
    CK(cudaMemset(a, 1, 1 << 20));
    CK(cudaMemset(b, 2, 1 << 20));
    CK(cudaDeviceSynchronize());
    CK(cudaIpcGetMemHandle(&h[0], a));
    CK(cudaIpcGetMemHandle(&h[1], b));
    if (write(p[1], h, sizeof h) != (ssize_t)sizeof h)
        return 2;
    char c;
    int st = 0;
    if (read(done[0], &c, 1) != 1) /* the allocations live until the child is done */
        fprintf(stderr, "block_probe: the child ended without a word\n");
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 2;
}
