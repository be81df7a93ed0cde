/*
 * copy_floor: what two processes on this machine need, at least, to move the
 * data of a two-rank bcast or allgather of SIZE bytes, with no library in the
 * way. Both processes are pinned to a core each and start every iteration
 * together (a barrier on a shared counter); each figure is the median (and
 * best) over ITERS iterations of the slower process.
 *
 *   write SIZE (both)    each process copies SIZE bytes between two buffers of
 *                        its own with streaming stores: what every rank of an
 *                        allgather of SIZE must write, without crossing
 *                        processes. Nothing that gathers can beat it.
 *   write SIZE (one)     one process alone: what a bcast's receiver must write.
 *   allgather by CMA     each copies its own SIZE/2 locally (streaming stores)
 *                        and reads the other's SIZE/2 with one
 *                        process_vm_readv: one copy per byte.
 *   bcast by CMA, split  the root writes SIZE/2 into the other with
 *                        process_vm_writev while the other reads SIZE/2 with
 *                        process_vm_readv.
 *
 *   copy_floor [SIZE_MIB [ITERS]]      (default 16 MiB, 30 iterations)
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

struct shared {
    _Atomic int arrived[2];
    _Atomic int ready[2];
    pid_t pid[2];
    uint64_t src[2], dst[2]; /* each process's buffers, in its address space */
    double t[2][1024];
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void pin(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (sched_setaffinity(0, sizeof s, &s) != 0)
        perror("copy_floor: sched_setaffinity");
}

/* Streaming stores (the destination is not read first); 64-byte aligned. */
static void copy_nt(void *dst, const void *src, size_t n)
{
#if defined(__SSE2__)
    __m128i *d = dst;
    const __m128i *s = src;
    for (size_t i = 0; i < n / 16; i += 4) {
        __m128i a = _mm_load_si128(s + i), b = _mm_load_si128(s + i + 1);
        __m128i c = _mm_load_si128(s + i + 2), e = _mm_load_si128(s + i + 3);
        _mm_stream_si128(d + i, a);
        _mm_stream_si128(d + i + 1, b);
        _mm_stream_si128(d + i + 2, c);
        _mm_stream_si128(d + i + 3, e);
    }
    _mm_sfence();
#else
    memcpy(dst, src, n);
#endif
}

static void barrier(struct shared *sh, int me, int round)
{
    atomic_store(&sh->arrived[me], round);
    while (atomic_load(&sh->arrived[!me]) < round)
        ;
}

static void cma(pid_t pid, void *local, uint64_t remote, size_t n, int write)
{
    while (n) {
        struct iovec l = {local, n}, r = {(void *)(uintptr_t)remote, n};
        ssize_t got = write ? process_vm_writev(pid, &l, 1, &r, 1, 0)
                            : process_vm_readv(pid, &l, 1, &r, 1, 0);
        if (got <= 0) {
            perror("copy_floor: process_vm_readv/writev");
            exit(1);
        }
        local = (char *)local + got;
        remote += (uint64_t)got;
        n -= (size_t)got;
    }
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    size_t size = (argc > 1 ? strtoul(argv[1], NULL, 10) : 16) << 20;
    int iters = argc > 2 ? atoi(argv[2]) : 30;
    if (size < (1 << 20) || iters < 1 || iters > 1024) {
        fprintf(stderr, "usage: copy_floor [SIZE_MIB (>= 1)] [ITERS (1-1024)]\n");
        return 2;
    }
    struct shared *sh =
        mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return perror("copy_floor: mmap"), 1;
    memset(sh, 0, sizeof *sh);
    pid_t kid = fork();
    if (kid < 0)
        return perror("copy_floor: fork"), 1;
    int me = kid == 0;
    pin(me);
    /* Allocated after fork: no page is shared copy-on-write. */
    char *src = aligned_alloc(4096, size), *dst = aligned_alloc(4096, size);
    if (!src || !dst)
        return fprintf(stderr, "copy_floor: no memory\n"), 1;
    memset(src, me + 1, size);
    memset(dst, 0, size);
    sh->pid[me] = getpid();
    sh->src[me] = (uint64_t)(uintptr_t)src;
    sh->dst[me] = (uint64_t)(uintptr_t)dst;
    atomic_store(&sh->ready[me], 1);
    while (!atomic_load(&sh->ready[!me]))
        ;
    pid_t peer = sh->pid[!me];
    size_t half = size / 2;
    static const char *names[] = {"write SIZE (both)", "write SIZE (one)", "allgather by CMA",
                                  "bcast by CMA, split"};
    int round = 0;
    if (!me)
        printf("# copy_floor: %zu MiB, %d iterations, median (best) of the slower process, us\n",
               size >> 20, iters);
    for (int test = 0; test < 4; test++) {
        for (int i = -2; i < iters; i++) { /* two warm-ups */
            barrier(sh, me, ++round);
            double t0 = now();
            switch (test) {
            case 0: copy_nt(dst, src, size); break;
            case 1:
                if (me)
                    copy_nt(dst, src, size);
                break;
            case 2:
                copy_nt(dst + (size_t)me * half, src, half);
                cma(peer, dst + (size_t)!me * half, sh->src[!me], half, 0);
                break;
            case 3:
                if (me)
                    cma(peer, dst + half, sh->src[0] + half, size - half, 0);
                else
                    cma(peer, src, sh->dst[1], half, 1);
                break;
            }
            if (i >= 0)
                sh->t[me][i] = now() - t0;
        }
        barrier(sh, me, ++round);
        if (!me) {
            double t[1024];
            for (int i = 0; i < iters; i++)
                t[i] = sh->t[0][i] > sh->t[1][i] ? sh->t[0][i] : sh->t[1][i];
            qsort(t, (size_t)iters, sizeof *t, cmp);
            printf("%-22s %10.1f (%.1f)\n", names[test], t[iters / 2] * 1e6, t[0] * 1e6);
            fflush(stdout);
        }
        barrier(sh, me, ++round);
    }
    free(src);
    free(dst);
    if (!me)
        waitpid(kid, NULL, 0);
    return 0;
}
