/* The selection tables (coll/coll_select.c) choose what the inline code of
 * coll_api.c chose before them (a92c487), for every input of a grid around
 * every threshold: old_choice below is that code's logic, written from it
 * with its constants, and the signature numbers it gave. Then CADRE_ALGO's
 * parsing, the names, the slots' capacity and the device and two-level
 * stages. This file registers the select suite; test_select_jobs.c holds
 * its cases that run programs (the COLL INFO line of a real job, one line
 * per collective, algorithm and size class; a mismatched CADRE_ALGO;
 * cadre-info --algorithms). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll_fast.h"
#include "coll/coll_select.h"
#include "test_select.h"
#include "testutil.h"

struct old_in {
    enum coll_kind kind;
    int n, nb, gpu, slots, local, equal;
    size_t bytes, block, count, es;
    int forced; /* a92c487's forced[k]: index+1 into its algos[k], 0 none */
};

/* a92c487's algos[k] lists, in order: the index+1 is the signature number. */
static const enum coll_algo old_algos[COLL_NKINDS][4] = {
    [COLL_BARRIER] = {COLL_ALGO_DISSEMINATION},
    [COLL_BCAST] = {COLL_ALGO_BINOMIAL, COLL_ALGO_PIPELINE, COLL_ALGO_DIRECT},
    [COLL_REDUCE] = {COLL_ALGO_BINOMIAL, COLL_ALGO_DIRECT, COLL_ALGO_SPLIT}, /* 2, 3: issue 45 */
    [COLL_ALLREDUCE] = {COLL_ALGO_RD, COLL_ALGO_RING, COLL_ALGO_DIRECT, COLL_ALGO_SPLIT},
    [COLL_GATHER] = {COLL_ALGO_LINEAR},
    [COLL_ALLGATHER] = {COLL_ALGO_RING, COLL_ALGO_RD, COLL_ALGO_DIRECT},
    [COLL_SCATTER] = {COLL_ALGO_LINEAR, COLL_ALGO_DIRECT}, /* direct: issue 45 */
    [COLL_REDUCE_SCATTER] = {COLL_ALGO_RING, COLL_ALGO_DIRECT},
    [COLL_ALLTOALL] = {COLL_ALGO_PAIRWISE},
    /* added with scan and exscan (after a92c487) */
    [COLL_SCAN] = {COLL_ALGO_RD, COLL_ALGO_LINEAR},
    [COLL_EXSCAN] = {COLL_ALGO_RD, COLL_ALGO_LINEAR},
};

static size_t old_fast_limit(int n)
{
    return n == 2 ? (size_t)4 << 10 : (size_t)1 << 20;
}

/* A rank's share of the vector fits a slot. */
static int old_share_fits(int n, size_t count, size_t es)
{
    size_t lo, hi;
    if (n < 1)
        return 0;
    cadre__share(count, es, n, 0, &lo, &hi);
    return (hi - lo) * es <= ((size_t)1 << 20);
}

static int old_split_fits(int n, size_t count, size_t es)
{
    size_t lo, hi;
    cadre__share(count, es, n, 0, &lo, &hi);
    return n > 2 && (hi - lo) * es <= ((size_t)1 << 20);
}

/* What a92c487 ran (*algo) and put in the signature (return). */
static int old_choice(const struct old_in *o, enum coll_algo *algo)
{
    int shm = !o->gpu && o->slots, direct = !o->gpu && o->local, a = o->forced, n = o->n;
    size_t bytes = o->bytes;
    int pow2 = (n & (n - 1)) == 0;
    switch (o->kind) {
    case COLL_BARRIER:
        if (!o->nb && shm)
            return *algo = COLL_ALGO_SLOTS, 7;
        return *algo = COLL_ALGO_DISSEMINATION, 1;
    case COLL_BCAST:
        if (!o->nb && !a && bytes <= old_fast_limit(n) && shm)
            return *algo = COLL_ALGO_SLOTS, 7;
        if (a == 3 && !direct)
            a = 0;
        if (!a)
            a = direct && bytes >= ((size_t)8 << 20)          ? 3
                : bytes <= ((size_t)256 << 10) || n <= 2 ? 1
                                                         : 2;
        return *algo = old_algos[o->kind][a - 1], a;
    case COLL_REDUCE:
        if (!o->nb && !a && bytes <= old_fast_limit(n) && shm)
            return *algo = COLL_ALGO_SLOTS, 7;
        /* Added later (issue 45, 2026-12-02): the slots up to 1 MiB on two
         * ranks too (their inputs published in pieces). */
        if (!o->nb && !a && n == 2 && bytes <= ((size_t)1 << 20) && shm)
            return *algo = COLL_ALGO_SLOTS, 7;
        /* Added later (issue 45): direct, forced, where every rank is
         * local; split, forced, in blocking calls with slots while a
         * rank's share fits a slot; elsewhere the rules without the slots. */
        if (a == 2 && direct)
            return *algo = COLL_ALGO_DIRECT, 2;
        if (a == 3 && !o->nb && shm && old_share_fits(n, o->count, o->es))
            return *algo = COLL_ALGO_SPLIT, 3;
        /* ... direct by default on two ranks from 4 MiB (also where a
         * forced split does not apply: it falls back to the default rules) */
        if ((!a || a == 3) && direct && n == 2 && bytes >= ((size_t)4 << 20))
            return *algo = COLL_ALGO_DIRECT, 2;
        /* ... and split by default past the slots on more than two ranks */
        if (!a && !o->nb && shm && n > 2 && bytes > ((size_t)1 << 20) &&
            old_share_fits(n, o->count, o->es))
            return *algo = COLL_ALGO_SPLIT, 3;
        return *algo = COLL_ALGO_BINOMIAL, 1;
    case COLL_ALLREDUCE:
        if (!o->nb && (!a || a == 4) && shm) {
            if ((a == 4 || bytes >= ((size_t)64 << 10)) && old_split_fits(n, o->count, o->es))
                return *algo = COLL_ALGO_SPLIT, 4;
            if (!a && bytes <= old_fast_limit(n))
                return *algo = COLL_ALGO_SLOTS, 7;
        }
        if ((a == 3 && !direct) || a == 4)
            a = 0;
        if (!a)
            a = direct && bytes >= (n == 2 ? (size_t)64 << 10 : (size_t)1 << 20) ? 3
                : bytes <= (n > 2 ? (size_t)1 << 20 : (size_t)64 << 10) || o->count < (size_t)n ? 1
                                                                                              : 2;
        return *algo = old_algos[o->kind][a - 1], a;
    case COLL_ALLGATHER:
        if (!o->nb && !a && o->block <= old_fast_limit(n) && shm)
            return *algo = COLL_ALGO_SLOTS, 7;
        if (a == 3 && !direct)
            a = 0;
        if (!a)
            a = direct && n == 2 && bytes >= ((size_t)2 << 20)                     ? 3
                : o->equal && pow2 && bytes <= ((size_t)64 << 10) ? 2
                                                                  : 1;
        *algo = a == 3                         ? COLL_ALGO_DIRECT
                : a == 2 && o->equal && pow2 ? COLL_ALGO_RD
                                             : COLL_ALGO_RING;
        /* The one change: recursive doubling forced where it cannot run
         * ran the ring under number 2, so that a rank with the setting and
         * one without, both running the ring, failed with a mismatch; the
         * signature now carries the ring's number. */
        return *algo == COLL_ALGO_RING ? 1 : a;
    case COLL_REDUCE_SCATTER:
        if (!o->nb && !a && bytes <= old_fast_limit(n) && shm)
            return *algo = COLL_ALGO_SLOTS, 7;
        if (a == 2 && !direct)
            a = 0;
        if (!a)
            a = direct && bytes >= ((size_t)64 << 10) ? 2 : 1;
        return *algo = old_algos[o->kind][a - 1], a;
    case COLL_ALLTOALL:
        if (o->equal && !o->nb && !a && bytes <= old_fast_limit(n) && shm)
            return *algo = COLL_ALGO_SLOTS, 7;
        if (!o->equal && !o->nb && !a && shm) /* alltoallv: see gather */
            return *algo = COLL_ALGO_SLOTS, 7;
        return *algo = COLL_ALGO_PAIRWISE, 1;
    case COLL_SCAN:
    case COLL_EXSCAN: /* not in a92c487: recursive doubling on more than 8
                       * ranks up to 64 KiB, else the chain */
        if (!a)
            a = n > 8 && bytes <= ((size_t)64 << 10) ? 1 : 2;
        return *algo = old_algos[o->kind][a - 1], a;
    /* Added after a92c487 (issue 45): gather and scatter (equal counts,
     * blocking) through the slots; scatter's bytes are the root's buffer. */
    /* Added later (issue 45): their v-variants and alltoallv, blocking,
     * through the slots whatever the size (a rank knows its own counts
     * only; each moves what is over the equal call's bound by message
     * within the call, coll_fast_v.c). */
    case COLL_GATHER:
        if (o->equal && !o->nb && !a && bytes <= old_fast_limit(n) && shm)
            return *algo = COLL_ALGO_SLOTS, 7;
        if (!o->equal && !o->nb && !a && shm)
            return *algo = COLL_ALGO_SLOTS, 7;
        return *algo = COLL_ALGO_LINEAR, 1;
    case COLL_SCATTER:
        if (o->equal && !o->nb && !a && bytes <= (n == 2 ? (size_t)8 << 10 : (size_t)1 << 20) && shm)
            return *algo = COLL_ALGO_SLOTS, 7;
        if (!o->equal && !o->nb && !a && shm)
            return *algo = COLL_ALGO_SLOTS, 7;
        /* Added later (issue 45): direct as reduce's; by default on two
         * ranks from 16 KiB (blocking, equal counts). */
        if (a == 2 && direct)
            return *algo = COLL_ALGO_DIRECT, 2;
        if (!a && o->equal && !o->nb && direct && n == 2 && bytes >= ((size_t)16 << 10))
            return *algo = COLL_ALGO_DIRECT, 2;
        return *algo = COLL_ALGO_LINEAR, 1;
    default:
        return *algo = COLL_ALGO_LINEAR, 1;
    }
}

static int asked;
static int ask_counter(const struct coll_in *in, enum coll_fact f)
{
    (void)in, (void)f;
    asked++;
    return 1;
}

static const size_t sizes[] = {0, 1, 8, 4095, 4096, 4097, 65535, 65536, 65537, 262143, 262144,
                               262145, 1048575, 1048576, 1048577, 2097151, 2097152, 2097153,
                               3145728, 3145729, 4194304, 8388607, 8388608, 8388609,
                               (size_t)100 << 20};
static const int ranks[] = {1, 2, 3, 4, 5, 6, 8, 16};
static const size_t elsizes[] = {1, 2, 4, 8};

static long checked, differ;

static void compare(struct old_in *o)
{
    enum coll_algo want;
    int want_code = old_choice(o, &want);
    struct coll_in in = {.kind = o->kind, .n = o->n, .hosts = 1, .nb = o->nb, .device = o->gpu,
                         .equal = o->equal, .bytes = o->bytes, .block = o->block,
                         .count = o->count, .elsize = o->es, .slots = o->slots, .local = o->local};
    enum coll_algo forced = o->forced ? old_algos[o->kind][o->forced - 1] : COLL_ALGO_NONE;
    struct coll_choice ch;
    cadre__coll_select(&in, forced, &ch);
    int code = cadre__coll_algo_code(o->kind, ch.algo);
    checked++;
    if (ch.algo != want || code != want_code) {
        if (differ++ < 20)
            CHECK_MSG(0,
                      "%s n=%d nb=%d gpu=%d slots=%d local=%d equal=%d bytes=%zu block=%zu "
                      "count=%zu es=%zu forced=%d: table %s (%d), a92c487 %s (%d)",
                      cadre__coll_kind_name(o->kind), o->n, o->nb, o->gpu, o->slots, o->local,
                      o->equal, o->bytes, o->block, o->count, o->es, o->forced,
                      cadre__coll_algo_name(ch.algo), code, cadre__coll_algo_name(want), want_code);
    }
}

/* Every collective, forced or not, over ranks, sizes, blocking or not,
 * memory kind, slots and locality. */
static void test_same_as_before(void)
{
    checked = differ = 0;
    for (int k = 0; k < COLL_NKINDS; k++)
        for (int f = 0; f <= 4 && (!f || old_algos[k][f - 1]); f++)
            for (size_t ri = 0; ri < sizeof ranks / sizeof *ranks; ri++)
                for (int bits = 0; bits < 32; bits++)
                    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
                        for (size_t ei = 0; ei < sizeof elsizes / sizeof *elsizes; ei++) {
                            struct old_in o = {.kind = k, .n = ranks[ri], .nb = bits & 1,
                                               .gpu = bits >> 1 & 1, .slots = bits >> 2 & 1,
                                               .local = bits >> 3 & 1, .equal = bits >> 4 & 1,
                                               .forced = f, .es = elsizes[ei]};
                            size_t s = sizes[si] / elsizes[ei] * elsizes[ei];
                            o.count = s / o.es;
                            o.bytes = s;
                            o.block = s;
                            if (k == COLL_ALLGATHER) {
                                /* equal: s is each rank's block; v: the
                                 * largest block is s, the others empty or
                                 * s as well. */
                                o.bytes = o.equal || ei & 1 ? s * (size_t)o.n : s;
                            }
                            compare(&o);
                        }
    CHECK_MSG(differ == 0, "%ld of %ld inputs differ", differ, checked);
    CU_ASSERT(checked > 100000);
}

/* Examples read off the old code, one by one. */
static void test_examples(void)
{
    struct {
        enum coll_kind k;
        int n, nb, slots, local;
        size_t bytes, count, es;
        enum coll_algo want;
    } ex[] = {
        {COLL_ALLREDUCE, 4, 0, 1, 1, 8, 2, 4, COLL_ALGO_SLOTS},
        {COLL_ALLREDUCE, 4, 0, 1, 1, 64 << 10, 16 << 10, 4, COLL_ALGO_SPLIT},
        {COLL_ALLREDUCE, 4, 1, 1, 1, 64 << 10, 16 << 10, 4, COLL_ALGO_RD},
        {COLL_ALLREDUCE, 4, 1, 1, 1, 1 << 20, 1 << 18, 4, COLL_ALGO_DIRECT},
        {COLL_ALLREDUCE, 4, 0, 0, 0, 2 << 20, 1 << 19, 4, COLL_ALGO_RING},
        {COLL_ALLREDUCE, 2, 0, 1, 1, 4096, 1024, 4, COLL_ALGO_SLOTS},
        {COLL_ALLREDUCE, 2, 0, 1, 1, 4100, 1025, 4, COLL_ALGO_RD},
        {COLL_ALLREDUCE, 2, 0, 1, 1, 64 << 10, 16 << 10, 4, COLL_ALGO_DIRECT},
        {COLL_ALLREDUCE, 2, 0, 0, 0, 64 << 10, 16 << 10, 4, COLL_ALGO_RD},
        {COLL_ALLREDUCE, 2, 0, 0, 0, (64 << 10) + 4, (16 << 10) + 1, 4, COLL_ALGO_RING},
        {COLL_ALLREDUCE, 8, 0, 0, 0, 2 << 20, 4, 1 << 19, COLL_ALGO_RD}, /* count < ranks */
        {COLL_BCAST, 3, 0, 0, 0, 256 << 10, 0, 1, COLL_ALGO_BINOMIAL},
        {COLL_BCAST, 3, 0, 0, 0, (256 << 10) + 1, 0, 1, COLL_ALGO_PIPELINE},
        {COLL_BCAST, 2, 0, 0, 0, 64 << 20, 0, 1, COLL_ALGO_BINOMIAL},
        {COLL_BCAST, 3, 0, 1, 1, 8 << 20, 0, 1, COLL_ALGO_DIRECT},
        {COLL_REDUCE_SCATTER, 3, 1, 1, 1, 64 << 10, 0, 1, COLL_ALGO_DIRECT},
        {COLL_REDUCE_SCATTER, 3, 0, 1, 1, 64 << 10, 0, 1, COLL_ALGO_SLOTS},
        {COLL_ALLTOALL, 3, 0, 1, 1, 1 << 20, 0, 1, COLL_ALGO_SLOTS},
        {COLL_ALLTOALL, 3, 0, 1, 1, (1 << 20) + 3, 0, 1, COLL_ALGO_PAIRWISE},
        {COLL_BARRIER, 3, 1, 1, 1, 0, 0, 1, COLL_ALGO_DISSEMINATION},
        {COLL_GATHER, 3, 0, 1, 1, 8, 0, 1, COLL_ALGO_SLOTS},
        {COLL_GATHER, 3, 1, 1, 1, 8, 0, 1, COLL_ALGO_LINEAR},
        {COLL_GATHER, 3, 0, 0, 0, 8, 0, 1, COLL_ALGO_LINEAR},
        {COLL_GATHER, 2, 0, 1, 1, 4096, 0, 1, COLL_ALGO_SLOTS},
        {COLL_GATHER, 2, 0, 1, 1, 4097, 0, 1, COLL_ALGO_LINEAR},
        {COLL_SCATTER, 2, 0, 1, 1, 8192, 0, 1, COLL_ALGO_SLOTS},
        {COLL_SCATTER, 2, 0, 1, 1, 8193, 0, 1, COLL_ALGO_LINEAR},
        {COLL_SCATTER, 4, 0, 1, 1, 1 << 20, 0, 1, COLL_ALGO_SLOTS},
        {COLL_SCATTER, 4, 0, 1, 1, (1 << 20) + 4, 0, 1, COLL_ALGO_LINEAR},
        /* issue 45 */
        {COLL_SCATTER, 2, 0, 1, 1, 16 << 10, 0, 1, COLL_ALGO_DIRECT},
        {COLL_SCATTER, 2, 0, 1, 1, (16 << 10) - 2, 0, 1, COLL_ALGO_LINEAR},
        {COLL_SCATTER, 2, 0, 0, 1, 1 << 20, 0, 1, COLL_ALGO_DIRECT},
        {COLL_SCATTER, 2, 1, 1, 1, 16 << 10, 0, 1, COLL_ALGO_LINEAR},
        {COLL_SCATTER, 4, 0, 1, 1, 16 << 20, 0, 1, COLL_ALGO_LINEAR},
        {COLL_REDUCE, 4, 0, 1, 1, 2 << 20, 1 << 19, 4, COLL_ALGO_SPLIT},
        {COLL_REDUCE, 4, 0, 1, 1, 4 << 20, 1 << 20, 4, COLL_ALGO_SPLIT},
        {COLL_REDUCE, 4, 0, 1, 1, (4 << 20) + 4, (1 << 20) + 1, 4, COLL_ALGO_BINOMIAL},
        {COLL_REDUCE, 4, 1, 1, 1, 2 << 20, 1 << 19, 4, COLL_ALGO_BINOMIAL},
        {COLL_REDUCE, 2, 0, 1, 1, 2 << 20, 1 << 19, 4, COLL_ALGO_BINOMIAL},
        {COLL_REDUCE, 2, 0, 1, 1, 1 << 20, 1 << 18, 4, COLL_ALGO_SLOTS},
        {COLL_REDUCE, 2, 0, 1, 1, (1 << 20) + 4, (1 << 18) + 1, 4, COLL_ALGO_BINOMIAL},
        {COLL_REDUCE, 2, 1, 1, 1, 64 << 10, 16 << 10, 4, COLL_ALGO_BINOMIAL},
        {COLL_REDUCE, 2, 0, 1, 1, 4 << 20, 1 << 20, 4, COLL_ALGO_DIRECT},
        {COLL_REDUCE, 2, 1, 1, 1, 8 << 20, 1 << 21, 4, COLL_ALGO_DIRECT},
        {COLL_REDUCE, 2, 0, 0, 0, 8 << 20, 1 << 21, 4, COLL_ALGO_BINOMIAL},
    };
    for (size_t i = 0; i < sizeof ex / sizeof *ex; i++) {
        struct coll_in in = {.kind = ex[i].k, .n = ex[i].n, .hosts = 1, .nb = ex[i].nb,
                             .equal = 1, .bytes = ex[i].bytes, .block = ex[i].bytes,
                             .count = ex[i].count, .elsize = ex[i].es, .slots = ex[i].slots,
                             .local = ex[i].local};
        struct coll_choice ch;
        cadre__coll_select(&in, COLL_ALGO_NONE, &ch);
        CHECK_MSG(ch.algo == ex[i].want, "example %zu (%s, %zu bytes, %d ranks): %s, want %s", i,
                  cadre__coll_kind_name(ex[i].k), ex[i].bytes, ex[i].n,
                  cadre__coll_algo_name(ch.algo), cadre__coll_algo_name(ex[i].want));
    }
}

/* The slots hold FAST_BYTES per rank: no input above it takes them, and no
 * split share above it (the barrier moves no data). The v-variants' rule
 * asks no size: each writer keeps at most cadre__coll_slots_max there
 * (test_vector_slots). */
static void test_slots_capacity(void)
{
    for (int k = COLL_BARRIER + 1; k < COLL_NKINDS; k++)
        for (size_t ri = 0; ri < sizeof ranks / sizeof *ranks; ri++) {
            int n = ranks[ri];
            struct coll_in in = {.kind = k, .n = n, .hosts = 1, .equal = 1, .slots = 1,
                                 .local = 1, .bytes = FAST_BYTES + 1, .block = FAST_BYTES + 1,
                                 .count = (FAST_BYTES + 1) * (size_t)n, .elsize = 1};
            struct coll_choice ch;
            cadre__coll_select(&in, COLL_ALGO_NONE, &ch);
            CHECK_MSG(ch.algo != COLL_ALGO_SLOTS && ch.algo != COLL_ALGO_SPLIT,
                      "%s on %d ranks: %s for more than a slot holds",
                      cadre__coll_kind_name(k), n, cadre__coll_algo_name(ch.algo));
            cadre__coll_select(&in, COLL_ALGO_SPLIT, &ch);
            CU_ASSERT(ch.algo != COLL_ALGO_SPLIT);
        }
}

/* gatherv, scatterv, alltoallv: the slots for every blocking call on a
 * communicator with slots whatever the size (no rank knows the others'
 * counts, so no size may decide), never for a nonblocking one; what one
 * writer keeps in its slot is the equal call's bound, at most a slot. */
static void test_vector_slots(void)
{
    const enum coll_kind ks[] = {COLL_GATHER, COLL_SCATTER, COLL_ALLTOALL};
    const size_t big[] = {0, 1, 4097, (size_t)1 << 20, ((size_t)1 << 20) + 1, (size_t)1 << 34};
    for (size_t k = 0; k < 3; k++)
        for (int n = 1; n <= 9; n++)
            for (size_t b = 0; b < sizeof big / sizeof *big; b++)
                for (int nb = 0; nb < 2; nb++) {
                    struct coll_in in = {.kind = ks[k], .n = n, .hosts = 1, .nb = nb,
                                         .bytes = big[b], .block = big[b], .slots = 1,
                                         .local = 1, .elsize = 1};
                    struct coll_choice ch;
                    cadre__coll_select(&in, COLL_ALGO_NONE, &ch);
                    CHECK_MSG((ch.algo == COLL_ALGO_SLOTS) == !nb,
                              "%sv n=%d bytes=%zu nb=%d: %s", cadre__coll_kind_name(ks[k]), n,
                              big[b], nb, cadre__coll_algo_name(ch.algo));
                    in.slots = 0;
                    cadre__coll_select(&in, COLL_ALGO_NONE, &ch);
                    CU_ASSERT(ch.algo != COLL_ALGO_SLOTS);
                }
    CU_ASSERT_EQUAL(cadre__coll_slots_max(COLL_GATHER, 2), 4096);
    CU_ASSERT_EQUAL(cadre__coll_slots_max(COLL_GATHER, 3), (size_t)1 << 20);
    CU_ASSERT_EQUAL(cadre__coll_slots_max(COLL_SCATTER, 2), 8192);
    CU_ASSERT_EQUAL(cadre__coll_slots_max(COLL_SCATTER, 5), (size_t)1 << 20);
    CU_ASSERT_EQUAL(cadre__coll_slots_max(COLL_ALLTOALL, 2), 4096);
    CU_ASSERT_EQUAL(cadre__coll_slots_max(COLL_ALLTOALL, 4), (size_t)1 << 20);
    for (int k = 0; k < COLL_NKINDS; k++)
        for (int n = 1; n <= 9; n++)
            CU_ASSERT(cadre__coll_slots_max(k, n) <= FAST_BYTES);
}

/* The facts are asked only by a rule that needs them: a nonblocking call
 * on a device-bound process never asks about the slots. */
static void test_facts_asked_late(void)
{
    struct coll_in in = {.kind = COLL_ALLREDUCE, .n = 4, .hosts = 1, .nb = 1, .device = 1,
                         .bytes = 8, .count = 2, .elsize = 4, .slots = -1, .local = -1,
                         .ask = ask_counter};
    struct coll_choice ch;
    asked = 0;
    cadre__coll_select(&in, COLL_ALGO_NONE, &ch);
    CU_ASSERT_EQUAL(ch.algo, COLL_ALGO_RD);
    CU_ASSERT_EQUAL(asked, 0);
    in.nb = in.device = 0;
    in.slots = in.local = -1;
    cadre__coll_select(&in, COLL_ALGO_NONE, &ch);
    CU_ASSERT_EQUAL(ch.algo, COLL_ALGO_SLOTS);
    CU_ASSERT_EQUAL(asked, 1);
}

static char bad_seen[512];
static void bad(const char *entry)
{
    size_t n = strlen(bad_seen);
    snprintf(bad_seen + n, sizeof bad_seen - n, "[%s]", entry);
}

static void test_parse(void)
{
    enum coll_algo f[COLL_NKINDS] = {0};
    bad_seen[0] = '\0';
    cadre__coll_algo_parse("allreduce=rd,bcast=pipeline,allgather=recursive_doubling,"
                           "reduce_scatter=direct,bogus=ring,allreduce=slots,barrier,"
                           "alltoall=auto,reduce=nonsense",
                           f, bad);
    CU_ASSERT_EQUAL(f[COLL_ALLREDUCE], COLL_ALGO_RD);
    CU_ASSERT_EQUAL(f[COLL_BCAST], COLL_ALGO_PIPELINE);
    CU_ASSERT_EQUAL(f[COLL_ALLGATHER], COLL_ALGO_RD);
    CU_ASSERT_EQUAL(f[COLL_REDUCE_SCATTER], COLL_ALGO_DIRECT);
    CU_ASSERT_EQUAL(f[COLL_ALLTOALL], COLL_ALGO_NONE);
    CU_ASSERT_EQUAL(f[COLL_REDUCE], COLL_ALGO_NONE);
    CHECK_MSG(!strcmp(bad_seen, "[bogus=ring][allreduce=slots][barrier][reduce=nonsense]"),
              "ignored: %s", bad_seen);
    /* alltoall=linear (issue 45, after a92c487): number 2, pairwise keeps 1;
     * forced, it runs at every size, the slots' sizes and alltoallv too. */
    enum coll_algo h[COLL_NKINDS] = {0};
    cadre__coll_algo_parse("alltoall=linear", h, bad);
    CU_ASSERT_EQUAL(h[COLL_ALLTOALL], COLL_ALGO_LINEAR);
    CU_ASSERT_EQUAL(cadre__coll_algo_code(COLL_ALLTOALL, COLL_ALGO_LINEAR), 2);
    for (int eq = 0; eq < 2; eq++) {
        struct coll_in in = {.kind = COLL_ALLTOALL, .n = 4, .hosts = 1, .equal = eq, .bytes = 64,
                             .block = 16, .count = 16, .elsize = 1, .slots = 1, .local = 1};
        struct coll_choice ch;
        cadre__coll_select(&in, COLL_ALGO_LINEAR, &ch);
        CU_ASSERT_EQUAL(ch.algo, COLL_ALGO_LINEAR);
    }
    /* Every name a92c487 took, and its signature number. */
    for (int k = 0; k < COLL_NKINDS; k++)
        for (int a = 0; a < 4 && old_algos[k][a]; a++) {
            char v[128];
            enum coll_algo g[COLL_NKINDS] = {0};
            snprintf(v, sizeof v, "%s=%s", cadre__coll_kind_name(k),
                     cadre__coll_algo_name(old_algos[k][a]));
            cadre__coll_algo_parse(v, g, bad);
            CHECK_MSG(g[k] == old_algos[k][a], "%s not taken", v);
            CU_ASSERT_EQUAL(cadre__coll_algo_code(k, old_algos[k][a]), a + 1);
        }
}

/* The device stage and the two-level stage, against their rules written
 * out here (device/device_direct_call.c: the kernel for allreduce, reduce_scatter and
 * allgather at every size; staged never takes it), and the names CADRE_ALGO
 * and the log use. */
static void test_stages(void)
{
    const char *why;
    for (size_t b = 1; b <= ((size_t)1 << 30); b *= 2)
        for (size_t d = b - 1; d <= b + 1; d++)
            for (int staged = 0; staged <= 1; staged++) {
                enum coll_algo want = staged ? COLL_ALGO_NONE : COLL_ALGO_GPU_KERNEL;
                why = NULL;
                CU_ASSERT_EQUAL(cadre__coll_select_device(COLL_ALLREDUCE, d, staged, &why), want);
                CU_ASSERT_PTR_NOT_NULL(why);
                CU_ASSERT_EQUAL(cadre__coll_select_device(COLL_REDUCE_SCATTER, d, staged, &why),
                                want);
                CU_ASSERT_EQUAL(cadre__coll_select_device(COLL_ALLGATHER, d, staged, &why), want);
                CU_ASSERT_EQUAL(cadre__coll_select_device(COLL_BCAST, d, staged, &why),
                                COLL_ALGO_NONE);
            }
    CU_ASSERT_STRING_EQUAL(cadre__coll_algo_name(COLL_ALGO_GPU_KERNEL), "gpu_kernel");
    CU_ASSERT_STRING_EQUAL(cadre__coll_algo_name(COLL_ALGO_HIER_SPLIT), "hier_split");
    /* Two-level: nothing on one host or one rank per host; leader, split or ring by size. */
    CU_ASSERT_EQUAL(cadre__coll_select_hosts(COLL_ALLREDUCE, 8, 1, 4, 4, &why), COLL_ALGO_NONE);
    CU_ASSERT_EQUAL(cadre__coll_select_hosts(COLL_ALLREDUCE, 8, 3, 1, 1, &why), COLL_ALGO_NONE);
    /* one rank per host: the allreduce in chunks from 256 KiB */
    CU_ASSERT_EQUAL(cadre__coll_select_hosts(COLL_ALLREDUCE, (256 << 10) - 1, 2, 1, 1, &why),
                    COLL_ALGO_NONE);
    CU_ASSERT_EQUAL(cadre__coll_select_hosts(COLL_ALLREDUCE, 256 << 10, 2, 1, 1, &why),
                    COLL_ALGO_HIER_RING);
    CU_ASSERT_EQUAL(cadre__coll_select_hosts(COLL_BCAST, 2 << 20, 2, 1, 1, &why), COLL_ALGO_NONE);
    CU_ASSERT_EQUAL(cadre__coll_select_hosts(COLL_ALLREDUCE, 2 << 20, 1, 4, 4, &why),
                    COLL_ALGO_NONE);
    CU_ASSERT_EQUAL(cadre__coll_select_hosts(COLL_ALLREDUCE, 65536, 2, 2, 2, &why),
                    COLL_ALGO_HIER_LEADER);
    CU_ASSERT_EQUAL(cadre__coll_select_hosts(COLL_ALLREDUCE, 65537, 2, 2, 2, &why),
                    COLL_ALGO_HIER_SPLIT);
    CU_ASSERT_EQUAL(cadre__coll_select_hosts(COLL_ALLREDUCE, 65537, 2, 2, 3, &why),
                    COLL_ALGO_HIER_RING);
    CU_ASSERT_EQUAL(cadre__coll_select_hosts(COLL_BCAST, 262145, 2, 1, 2, &why),
                    COLL_ALGO_HIER_RING);
    CU_ASSERT_EQUAL(cadre__coll_select_hosts(COLL_ALLTOALL, 1 << 20, 2, 2, 2, &why),
                    COLL_ALGO_NONE);
}

void suite_select(void)
{
    CU_pSuite s = CU_add_suite("select", NULL, NULL);
    CU_add_test(s, "the tables choose as a92c487 did", test_same_as_before);
    CU_add_test(s, "examples", test_examples);
    CU_add_test(s, "no slot rule passes a slot's size", test_slots_capacity);
    CU_add_test(s, "the v-variants: the slots at every size", test_vector_slots);
    CU_add_test(s, "facts asked only when a rule needs them", test_facts_asked_late);
    CU_add_test(s, "CADRE_ALGO parsing and signature numbers", test_parse);
    CU_add_test(s, "COLL INFO line: once per class, CADRE_ALGO", test_log_lines);
    CU_add_test(s, "CADRE_ALGO on one rank: a mismatch naming the algorithms",
                test_mismatched_choice);
    CU_add_test(s, "cadre-info --algorithms", test_info_algorithms);
    CU_add_test(s, "the device and two-level stages", test_stages);
}
