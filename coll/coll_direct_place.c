/* Whether this process's core and its peer's share a cache, as the
 * two-rank allreduce on a busy machine needs to know (coll_direct_pair.c:
 * how to stage its input). The guest sees one topology, but the host moves
 * the vCPUs: minutes apart here, the two share a cache (bench/c2c.c 80-120
 * ns a round trip) or do not (350-410 ns), and a copy that the peer reads
 * from this core's cache is the fastest way where they share one and the
 * slowest where they do not.
 *
 * Each rank of such a call marks a word in its shm segment at the end of
 * its round 2 (the call's count and its CPU); the peer times its first
 * read of that word in its next call, before it stages. A read that finds
 * the word changed since its last one missed in this core's caches and
 * fetched the line from wherever the writer left it: 20-30 ns here from a
 * shared cache, 120-150 ns otherwise (beside six `yes`, 2 MiB allreduces;
 * bench/c2c.c said 85-95 and 370-390 ns a round trip). A read on
 * the CPU the peer marked from (the scheduler put both ranks there in
 * turn) says nothing and is not counted. The verdict is the median of the
 * last PLACE_KEEP reads counted; until there are that many, "not shared",
 * the choice that costs least when wrong. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "coll_direct.h"

#define PLACE_KEEP 5
/* Below this many ns a read came from a cache both cores share. */
#define PLACE_SHARED_NS 75

/* Builds run outside the engine lock, in any thread: a build that finds
 * the lock taken goes by the verdict of the last. */
static pthread_mutex_t place_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    uint64_t *seen;  /* by world rank: the word as last read, 0 never */
    int nseen;
    uint32_t ns[PLACE_KEEP];
    unsigned n;      /* reads counted, all time */
    uint32_t cost;   /* two clock reads back to back, ns, +1 (0: not measured) */
} place;
static _Atomic int verdict;
static _Atomic uint32_t marks; /* this process's */

static uint64_t ns_of(const struct timespec *t)
{
    return (uint64_t)t->tv_sec * 1000000000u + (uint64_t)t->tv_nsec;
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return ns_of(&t);
}

void cadre__direct_place_mark(int w)
{
    _Atomic uint64_t *word = cadre__direct_place_word(w);
    int cpu = sched_getcpu();
    if (!word || cpu < 0)
        return;
    uint64_t k = atomic_fetch_add_explicit(&marks, 1, memory_order_relaxed) + 1u;
    atomic_store_explicit(word, k << 32 | (uint32_t)(cpu + 1), memory_order_relaxed);
}

/* The read of rank w's word, timed: ns, or -1 when it says nothing. */
static long timed_read(int w, uint64_t *v)
{
    _Atomic uint64_t *word = cadre__direct_place_word(w);
    if (!word)
        return -1;
    if (!place.cost) {
        uint64_t least = UINT64_MAX;
        for (int i = 0; i < 16; i++) {
            uint64_t a = now_ns(), b = now_ns();
            if (b - a < least)
                least = b - a;
        }
        place.cost = (uint32_t)least + 1;
    }
    int cpu = sched_getcpu();
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* The address depends on the clock's reading (the shift is always 0),
     * so that the CPU cannot issue the load before it; the closing read
     * of the clock waits for the load (an lfence before its rdtsc). */
    _Atomic uint64_t *p =
        (_Atomic uint64_t *)((uintptr_t)word | ((uint64_t)t0.tv_nsec >> 40));
    *v = atomic_load_explicit(p, memory_order_relaxed);
    uint64_t t = now_ns() - ns_of(&t0);
    if (!*v || (int)(uint32_t)*v == cpu + 1 || sched_getcpu() != cpu)
        return -1;
    return t > place.cost - 1 ? (long)(t - (place.cost - 1)) : 0;
}

static int by_value(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static int place_shared_locked(int w)
{
    if (!place.seen) {
        int n = cadre__eng.nranks;
        place.seen = calloc((size_t)(n > 0 ? n : 1), sizeof *place.seen);
        if (!place.seen)
            return 0;
        place.nseen = n;
    }
    if (w >= 0 && w < place.nseen) {
        uint64_t v = place.seen[w];
        long t = timed_read(w, &v);
        if (v != place.seen[w] && t >= 0)
            place.ns[place.n++ % PLACE_KEEP] = t > UINT32_MAX ? UINT32_MAX : (uint32_t)t;
        place.seen[w] = v;
    }
    if (place.n < PLACE_KEEP)
        return 0;
    uint32_t s[PLACE_KEEP];
    for (int i = 0; i < PLACE_KEEP; i++)
        s[i] = place.ns[i];
    qsort(s, PLACE_KEEP, sizeof *s, by_value);
    return s[PLACE_KEEP / 2] < PLACE_SHARED_NS;
}

/* CADRE_PAIR_PLACE: -1 auto, else the verdict it forces. */
static int mode = -1;

void cadre__direct_place_init(void)
{
    const char *v = cadre__config_str(CADRE_CFG_PAIR_PLACE);
    if (!strcasecmp(v, "shared"))
        mode = 1;
    else if (!strcasecmp(v, "apart"))
        mode = 0;
    else {
        mode = -1;
        if (strcasecmp(v, "auto"))
            CADRE_WARN(COLL, "ignoring CADRE_PAIR_PLACE=\"%s\": not auto, shared or apart; using auto",
                       v);
    }
}

int cadre__direct_place_shared(int w)
{
    if (mode >= 0)
        return mode;
    if (pthread_mutex_trylock(&place_lock) == 0) {
        atomic_store_explicit(&verdict, place_shared_locked(w), memory_order_relaxed);
        pthread_mutex_unlock(&place_lock);
    }
    return atomic_load_explicit(&verdict, memory_order_relaxed);
}
