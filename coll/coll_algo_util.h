/* Helpers of the schedule builders (coll_algos.c, coll_hier_algos.c): return
 * on a failed step, scratch memory that lives as long as the schedule, and
 * the split of a vector into nearly equal blocks. Included by those two
 * files only. */
#ifndef CADRE_COLL_ALGO_UTIL_H
#define CADRE_COLL_ALGO_UTIL_H

#include "coll_algos.h"

#define TRY(call)                                                                 \
    do {                                                                          \
        int try_rc_ = (call);                                                     \
        if (try_rc_ != CADRE_SUCCESS)                                             \
            return try_rc_;                                                       \
    } while (0)

static inline void *scratch(struct coll_sched *s, size_t bytes)
{
    void *p = cadre__sched_alloc(s, bytes);
    if (!p)
        cadre__error(CADRE_ERR_NOMEM, "%s: no memory for %zu bytes of scratch", s->op_name, bytes);
    return p;
}
#define SCRATCH(var, bytes)                                                       \
    do {                                                                          \
        (var) = scratch(s, (bytes));                                              \
        if (!(var))                                                               \
            return CADRE_ERR_NOMEM;                                               \
    } while (0)

static inline int mod(int a, int n)
{
    return ((a % n) + n) % n;
}

/* Block b of `count` elements split into n nearly equal blocks. */
static inline void block(size_t count, int n, int b, size_t *off, size_t *len)
{
    size_t q = count / (size_t)n, r = count % (size_t)n;
    *off = (size_t)b * q + ((size_t)b < r ? (size_t)b : r);
    *len = q + ((size_t)b < r);
}

#endif
