/* The share of a vector each rank owns in the direct and split allreduce:
 * used by the algorithms (coll_fast.c, coll_direct.c) and by the selection
 * (coll_select.c: a share must fit a slot), so both cut alike. Pure. */
#ifndef CADRE_COLL_SHARE_H
#define CADRE_COLL_SHARE_H

#include <stddef.h>

/* The share [lo, hi) of a vector of `count` elements that rank r of n owns,
 * cut at cache-line multiples (the direct and the split allreduce). */
static inline void cadre__share(size_t count, size_t es, int n, int r, size_t *lo, size_t *hi)
{
    size_t align = es >= 64 ? 1 : 64 / es;
    size_t per = (count + (size_t)n - 1) / (size_t)n;
    per = (per + align - 1) / align * align;
    *lo = (size_t)r * per < count ? (size_t)r * per : count;
    *hi = *lo + per < count ? *lo + per : count;
}

#endif
