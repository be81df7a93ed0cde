/* Helpers for the multi-rank test programs: checks that report the rank and
 * location, deterministic data patterns, timing and memory readings. */
#ifndef CADRE_RANK_UTIL_H
#define CADRE_RANK_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cadre.h"

/* Per file; a program of several files defines RU_SHARED_STATE before
 * including this in each, and one of them defines the two (p2p_test.c). */
#ifdef RU_SHARED_STATE
extern int ru_rank, ru_failures;
#else
static int ru_rank = -1, ru_failures;
#endif

#define EXPECT(cond, ...)                                                         \
    do {                                                                          \
        if (!(cond)) {                                                            \
            fprintf(stderr, "[rank %d] %s:%d: check failed: %s: ", ru_rank, __FILE__, \
                    __LINE__, #cond);                                             \
            fprintf(stderr, __VA_ARGS__);                                         \
            fprintf(stderr, "\n");                                                \
            ru_failures++;                                                        \
        }                                                                         \
    } while (0)

/* A call that must succeed; on failure prints cadre_last_error(). */
#define OK(call)                                                                  \
    do {                                                                          \
        int ru_rc_ = (call);                                                      \
        EXPECT(ru_rc_ == CADRE_SUCCESS, "%s -> %s: %s", #call,                    \
               cadre_error_string(ru_rc_), cadre_last_error());                   \
    } while (0)

/* A call that must fail with `want` and a message containing `text`. */
#define FAILS(call, want, text)                                                   \
    do {                                                                          \
        int ru_rc_ = (call);                                                      \
        EXPECT(ru_rc_ == (want), "%s -> %s, expected %s", #call,                  \
               cadre_error_string(ru_rc_), cadre_error_string(want));             \
        EXPECT(strstr(cadre_last_error(), (text)) != NULL,                        \
               "%s: message \"%s\" lacks \"%s\"", #call, cadre_last_error(), (text)); \
    } while (0)

static inline double ru_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Byte i of the message (from, to, seq): differs between messages so a
 * misrouted or stale buffer shows. */
static inline unsigned char ru_byte(int from, int to, uint64_t seq, size_t i)
{
    uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ull + seq * 0xBF58476D1CE4E5B9ull +
                 (uint64_t)from * 131 + (uint64_t)to * 7919;
    return (unsigned char)(x >> 56 ^ x >> 24 ^ i);
}

static inline void ru_fill(unsigned char *b, size_t n, int from, int to, uint64_t seq)
{
    for (size_t i = 0; i < n; i++)
        b[i] = ru_byte(from, to, seq, i);
}

/* Index of the first wrong byte, or n when all are right. */
static inline size_t ru_check(const unsigned char *b, size_t n, int from, int to, uint64_t seq)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != ru_byte(from, to, seq, i))
            return i;
    return n;
}

/* cadre_init for a program of exactly `want` ranks: sets *me and ru_rank
 * and returns 1; with another count, says so (rank 0), finalizes and
 * returns 0, and the caller exits with 2. */
static inline int ru_init_np(int *argc, char ***argv, const char *prog, int want, int *me)
{
    int np = 0;
    OK(cadre_init(argc, argv));
    OK(cadre_comm_rank(CADRE_COMM_WORLD, me));
    OK(cadre_comm_size(CADRE_COMM_WORLD, &np));
    ru_rank = *me;
    if (np == want)
        return 1;
    if (*me == 0)
        fprintf(stderr, "%s: needs %d ranks, has %d\n", prog, want, np);
    cadre_finalize();
    return 0;
}

/* Resident set size of this process in KiB (/proc/self/status VmRSS). */
static inline long ru_rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            kib = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kib;
}

#endif
