/*
 * cache_life: how much of a working set a process finds again in the cache
 * when it reads the set over and over. For each size it reads SIZE bytes
 * (float32 sums, 16-byte loads) pass after pass for at least MINTIME seconds
 * and prints the CPU time per pass (CLOCK_THREAD_CPUTIME_ID) and the rate:
 * sets the cache keeps read at its speed, the others at memory's.
 * bench/contention.sh's question: beside other processes each pass takes
 * longer in wall time, and a set the cache kept on a quiet machine may be
 * gone when the pass comes back to it. Run it alone and beside `yes`:
 *
 *   cache_life [SIZE_MIB ...]      (default 8 16 24 32 48 64 128)
 *   MINTIME=0.6 (seconds per size)
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static double clock_s(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* One pass over n floats: their sum, so that the loads are not dropped. */
static float pass(const float *b, size_t n)
{
#if defined(__SSE2__)
    __m128 s0 = _mm_setzero_ps(), s1 = _mm_setzero_ps();
    for (size_t i = 0; i + 8 <= n; i += 8) {
        s0 = _mm_add_ps(s0, _mm_load_ps(b + i));
        s1 = _mm_add_ps(s1, _mm_load_ps(b + i + 4));
    }
    float o[4];
    _mm_storeu_ps(o, _mm_add_ps(s0, s1));
    return o[0] + o[1] + o[2] + o[3];
#else
    float s = 0;
    for (size_t i = 0; i < n; i++)
        s += b[i];
    return s;
#endif
}

int main(int argc, char **argv)
{
    static const char *defaults[] = {"8", "16", "24", "32", "48", "64", "128"};
    const char *const *sizes = (const char *const *)argv + 1;
    int nsizes = argc - 1;
    if (nsizes == 0)
        sizes = defaults, nsizes = (int)(sizeof defaults / sizeof *defaults);
    const char *mt = getenv("MINTIME");
    double mintime = mt ? atof(mt) : 0.6;
    volatile float sink = 0;
    printf("# %8s  %14s  %8s\n", "MiB", "CPU ms/pass", "GB/s");
    for (int k = 0; k < nsizes; k++) {
        long mib = atol(sizes[k]);
        if (mib <= 0) {
            fprintf(stderr, "cache_life: '%s' is not a size in MiB\n", sizes[k]);
            return 2;
        }
        size_t bytes = (size_t)mib << 20;
        float *b = aligned_alloc(4096, bytes);
        if (!b) {
            fprintf(stderr, "cache_life: no memory for %ld MiB\n", mib);
            return 1;
        }
        memset(b, 0, bytes);
        sink += pass(b, bytes / sizeof *b); /* the first pass brings the set in */
        double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID), w0 = clock_s(CLOCK_MONOTONIC);
        long passes = 0;
        while (clock_s(CLOCK_MONOTONIC) - w0 < mintime || passes < 3) {
            sink += pass(b, bytes / sizeof *b);
            passes++;
        }
        double per = (clock_s(CLOCK_THREAD_CPUTIME_ID) - c0) / (double)passes;
        printf("  %8ld  %14.3f  %8.1f\n", mib, per * 1e3, (double)bytes / per / 1e9);
        fflush(stdout);
        free(b);
    }
    return sink != sink; /* NaN never: the loads stay */
}
