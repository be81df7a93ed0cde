/* Request objects, their wire ids, completion and waiting. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "p2p_engine.h"

/* Wire ids name a slot of this table plus a generation, so a stale or forged
 * id from the wire never reaches a freed request. */
static struct cadre_request **id_table;
static uint32_t *id_gen;
static uint32_t id_cap, *id_free, id_nfree;

/* Freed requests are kept per thread, up to REQ_CACHE: a window of
 * nonblocking calls takes one per message, and malloc and free cost more
 * than the rest of a small message's path. A thread's cache is freed when
 * the thread ends (a key destructor) or calls cadre__req_drop_spare. */
#define REQ_CACHE 64
/* initial-exec: no __tls_get_addr call on every request of the shared library */
static __thread struct cadre_request *cache __attribute__((tls_model("initial-exec")));
static __thread int cache_n __attribute__((tls_model("initial-exec")));
static __thread int cache_keyed __attribute__((tls_model("initial-exec")));
/* The handle slots of requests freed past REQ_CACHE stay with the thread, up
 * to SLOT_CACHE, for the next requests it allocates, linked through their
 * next_free: a window larger than the cache then costs malloc and free, as
 * before, but not the handle table's lock. */
#define SLOT_CACHE 1024
static __thread uint32_t spare_slots __attribute__((tls_model("initial-exec"))); /* index + 1 */
static __thread int spare_n __attribute__((tls_model("initial-exec")));
static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

static void cache_end(void *unused)
{
    (void)unused;
    cadre__req_drop_spare();
}

static void cache_key_make(void)
{
    (void)pthread_key_create(&cache_key, cache_end);
}

struct cadre_request *cadre__req_new(int kind, const char *op)
{
    struct cadre_request *r = cache;
    if (r) {
        cache = r->next;
        cache_n--;
    } else if ((r = malloc(sizeof *r))) {
        r->hslot = NULL; /* a slot is bound when it is first handed out */
    } else {
        return NULL;
    }
    /* The fields before errmsg, zeroed with 16-byte stores: memset, or the
     * rep stos the compiler makes of it at this size, cost as much as the
     * rest of the function. */
    typedef uint64_t zero16 __attribute__((vector_size(16), may_alias));
    _Static_assert(offsetof(struct cadre_request, errmsg) % 16 == 0, "errmsg: 16-byte aligned");
    _Static_assert(_Alignof(struct cadre_request) >= 8, "request alignment");
    /* The empty asm keeps the loop from becoming a memset again. */
#pragma GCC unroll 16
    for (size_t i = 0; i < offsetof(struct cadre_request, errmsg) / 16; i++) {
        __builtin_memcpy((char *)r + 16 * i, &(zero16){0}, 16);
        __asm__ volatile("" ::: "memory");
    }
    r->errmsg[0] = '\0';
    r->magic = CADRE_REQ_MAGIC;
    r->kind = (uint8_t)kind;
    r->op = op;
    r->peer_world = -1;
    /* last_activity stays 0 until something moves or a wait first turns
     * slow (cadre__req_wait): no clock read on the path of a small message. */
    return r;
}

/* The object goes back to the allocator; its slot (closed) to the
 * thread's spares, or to the table. */
static void req_release_memory(struct cadre_request *r, int keep_slot)
{
    if (r->hslot) {
        if (keep_slot && spare_n < SLOT_CACHE) {
            r->hslot->obj = NULL;
            r->hslot->next_free = spare_slots;
            spare_slots = r->hidx + 1;
            spare_n++;
        } else {
            cadre__h_unbind(&cadre__req_handles, r->hidx);
        }
    }
    free(r);
}

void cadre__req_drop_spare(void)
{
    while (cache) {
        struct cadre_request *n = cache->next;
        req_release_memory(cache, 0);
        cache = n;
    }
    cache_n = 0;
    while (spare_slots) {
        uint32_t idx = spare_slots - 1;
        spare_slots = cadre__h_slot(&cadre__req_handles, idx)->next_free;
        cadre__h_unbind(&cadre__req_handles, idx);
    }
    spare_n = 0;
}

struct cadre_htab cadre__req_handles = CADRE_HTAB_INIT;

int cadre__req_handle_slow(struct cadre_request *r, cadre_request_t *out)
{
    if (spare_slots) {
        /* Closed and owned by this thread alone: no lookup returns its
         * object before the open below publishes it. */
        r->hidx = spare_slots - 1;
        r->hslot = cadre__h_slot(&cadre__req_handles, r->hidx);
        spare_slots = r->hslot->next_free;
        spare_n--;
        r->hslot->next_free = 0;
        r->hslot->obj = r;
    } else if (cadre__h_bind(&cadre__req_handles, r, &r->hidx, &r->hslot) != CADRE_SUCCESS) {
        r->hslot = NULL;
        return CADRE_ERR_NOMEM;
    }
    return cadre__req_handle(r, out);
}

struct cadre_request *cadre__req_get(cadre_request_t h, const char *fn, const char *arg,
                                     int *status)
{
    struct cadre_request *r = cadre__req_find(h);
    if (r)
        return r;
    if (!h)
        *status = cadre__error(CADRE_ERR_STATE, "%s: %s is CADRE_REQUEST_NULL", fn, arg);
    else if (cadre__h_stale(&cadre__req_handles, (uintptr_t)h, CADRE_HKIND_REQ))
        *status = cadre__error(CADRE_ERR_STATE,
                               "%s: %s is a stale handle (request already completed and freed)",
                               fn, arg);
    else
        *status = cadre__error(CADRE_ERR_ARG, "%s: %s %p is not a request handle", fn, arg,
                               (void *)h);
    return NULL;
}

static void req_unregister(struct cadre_request *r)
{
    if (!r->id)
        return;
    uint32_t idx = (uint32_t)r->id;
    if (idx < id_cap && id_table[idx] == r) {
        id_table[idx] = NULL;
        id_free[id_nfree++] = idx;
    }
    r->id = 0;
}

/* A receive that a transport may be reading into (RS_WAIT_DATA) is done or
 * freed: RS_DONE first (the peer's failure, which release_dest may report,
 * then passes it by), and the transport lets go of its buffer. */
static void end_dest(struct cadre_request *r)
{
    if (r->kind == REQ_RECV && r->state == RS_WAIT_DATA) {
        r->state = RS_DONE;
        cadre__p2p_dest_gone(r);
    }
}

void cadre__req_free(struct cadre_request *r)
{
    if (!r)
        return;
    if (r->magic != CADRE_REQ_MAGIC) {
        /* Freed twice: kept in the cache, it would serve two later calls at
         * once, and their data would cross without an error. */
        cadre__log(CADRE_LOG_WARN, CADRE_SUBSYS_P2P,
                   "internal error: request %p (%s) freed twice; aborting", (void *)r,
                   r->op ? r->op : "?");
        abort();
    }
    cadre__req_handle_end(r);
    end_dest(r);
    req_unregister(r);
    if (r->release)
        r->release(r);
    r->magic = 0;
    if (cache_n >= REQ_CACHE) {
        req_release_memory(r, 1);
        return;
    }
    if (!cache_keyed) {
        /* The key's value only makes the destructor run at the thread's end. */
        cache_keyed = 1;
        if (pthread_once(&cache_once, cache_key_make) == 0)
            (void)pthread_setspecific(cache_key, &cache_keyed);
    }
    r->next = cache;
    cache = r;
    cache_n++;
}

int cadre__req_register(struct cadre_request *r)
{
    if (!id_nfree) {
        uint32_t ncap = id_cap ? id_cap * 2 : 256;
        struct cadre_request **t = realloc(id_table, ncap * sizeof *t);
        if (!t)
            return CADRE_ERR_NOMEM;
        id_table = t;
        uint32_t *g = realloc(id_gen, ncap * sizeof *g);
        if (!g)
            return CADRE_ERR_NOMEM;
        id_gen = g;
        uint32_t *f = realloc(id_free, ncap * sizeof *f);
        if (!f)
            return CADRE_ERR_NOMEM;
        id_free = f;
        for (uint32_t i = ncap; i > id_cap; i--) {
            id_table[i - 1] = NULL;
            id_gen[i - 1] = 0;
            id_free[id_nfree++] = i - 1;
        }
        id_cap = ncap;
    }
    uint32_t idx = id_free[--id_nfree];
    id_table[idx] = r;
    /* Generation 0 is never used, so id 0 means "none". */
    if (++id_gen[idx] == 0)
        id_gen[idx] = 1;
    r->id = ((uint64_t)id_gen[idx] << 32) | idx;
    return CADRE_SUCCESS;
}

struct cadre_request *cadre__req_lookup(uint64_t id)
{
    uint32_t idx = (uint32_t)id;
    if (idx >= id_cap || !id_table[idx] || id_table[idx]->id != id)
        return NULL;
    return id_table[idx];
}

/* What every completion does after the status is set. */
static inline void complete_tail(struct cadre_request *r)
{
    end_dest(r);
    r->state = RS_DONE;
    req_unregister(r);
    if (r->user && !r->abandoned)
        eng_outstanding_add(-1);
    if (r->pt_wants) {
        r->pt_wants = 0;
        atomic_fetch_sub(&cadre__eng.pt_wanted, 1);
    }
    if (r->abandoned) {
        cadre__req_free(r);
        return;
    }
    atomic_store_explicit(&r->done, 1, memory_order_release);
}

void cadre__req_complete(struct cadre_request *r, int error, const char *fmt, ...)
{
    if (atomic_load_explicit(&r->done, memory_order_relaxed))
        return;
    r->error = error;
    r->status.error = error;
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->errmsg, sizeof r->errmsg, fmt, ap);
        va_end(ap);
    }
    complete_tail(r);
}

void cadre__req_complete_ok(struct cadre_request *r)
{
    if (atomic_load_explicit(&r->done, memory_order_relaxed))
        return;
    r->error = CADRE_SUCCESS;
    r->status.error = CADRE_SUCCESS;
    complete_tail(r);
}

/* Spinning is bounded: after this many idle polls the waiter sleeps on its
 * doorbell, where peers' sends wake it. Oversubscribed ranks yield the core
 * on each idle poll and sleep much sooner, at once when a yield shows that
 * another process holds the core (cadre__yield_brief); with CADRE_WAIT=sleep
 * the others sleep after a few idle polls (cadre__wait_doze). */
#define SPIN_POLLS 20000
#define SPIN_POLLS_OVERSUB 2048

/* The wait of cadre__req_wait (w NULL: for request r) and of
 * cadre__p2p_wait_until (r NULL: for w's condition), one body inlined into
 * each: the wait of every request keeps its plain load of `done`. */
#define WAIT_OVER() (r ? atomic_load_explicit(&r->done, memory_order_acquire) : w->ready(w->arg))
static inline __attribute__((always_inline)) int
wait_core(struct cadre_request *r, const struct cadre_p2p_wait *w, double deadline,
          int no_progress_timeout)
{
    struct cadre_engine *e = &cadre__eng;
    int idle = 0;
    int spin = e->oversubscribed ? SPIN_POLLS_OVERSUB : SPIN_POLLS;
    double nap = 50e-6;
    cadre__app_active();
    if (WAIT_OVER())
        return CADRE_SUCCESS;
    /* Most waits end within a few polls: only a longer one tells the
     * progress thread to stand aside (an atomic add and sub on every wait
     * would cost a ping-pong more than they save). */
    int registered = 0;
    /* Oversubscribed: a few polls before yielding, none where the peer
     * waited on this very core last (it cannot run before we yield). */
    int quick = !e->oversubscribed                                       ? 256
                : cadre__shm_same_cpu(r ? r->peer_world : w->peer_world) ? 0
                                                                         : 16;
    for (int i = 0; i < quick; i++) {
        cadre__p2p_progress();
        if (WAIT_OVER())
            return CADRE_SUCCESS;
        /* This thread drives the work itself: the progress thread, which
         * looks at app_seq every PT_DEFER, stands aside. Without it, a wait
         * in these polls longer than PT_DEFER (a TCP round trip under load)
         * looked like an application gone computing, and the progress
         * thread took the engine lock from this one mid-wait; preempted
         * holding it, it left the waiter napping on the lock (2 hosts x 1
         * rank on 2 cores, load ~19: 8-byte ping-pong median 533 us against
         * 160 with this and longer looks, branch t45-hostsp2p). Every
         * 16th poll: threads waiting at once share the counter's line. */
        if ((i & 15) == 15)
            cadre__app_active();
        /* A progress call may take a while (a socket send waits up to
         * TCP_SEND_WAIT): the deadline is looked at between busy calls too. */
        if (deadline > 0 && cadre__now() >= deadline)
            return CADRE_ERR_TIMEOUT;
    }
    if (r && r->last_activity == 0)
        r->last_activity = cadre__now();
    atomic_fetch_add(&e->app_waiting, 1);
    registered = 1;
    int rc = CADRE_SUCCESS, napping = 0, cond_said = 0;
    for (;;) {
        if (cadre__p2p_progress() > 0) {
            idle = 0;
            nap = 50e-6;
        }
        if (WAIT_OVER())
            break;
        if (deadline > 0 && cadre__now() >= deadline) {
            rc = CADRE_ERR_TIMEOUT;
            break;
        }
        if (++idle < spin) {
            if (e->oversubscribed ? !cadre__yield_brief()
                                  : idle == CADRE_BUSY_ASK / 8 && cadre__wait_doze())
                idle = spin; /* another process has the core: nap now */
            continue;
        }
        /* Idle for a while: time to check the clocks and nap. */
        double now = cadre__now();
        cadre__state_stamp(now);
        if (deadline > 0 && now >= deadline) {
            rc = CADRE_ERR_TIMEOUT;
            break;
        }
        if (no_progress_timeout &&
            now - (r ? r->last_activity : w->activity(w->arg)) > e->timeout) {
            rc = CADRE_ERR_TIMEOUT;
            break;
        }
        /* Here, where the wait already naps, so the fast path pays nothing.
         * A wait on a condition (probe, waitany: r NULL) warns through its
         * own hook, which names what it waits for. */
        if (no_progress_timeout && e->stuck_warn > 0 && (r ? !r->stuck_said : w->stuck && !cond_said)) {
            double secs = now - (r ? r->last_activity : w->activity(w->arg));
            if (secs > e->stuck_warn) {
                if (r) {
                    r->stuck_said = 1;
                    cadre__p2p_stuck(r, secs);
                } else {
                    cond_said = 1;
                    w->stuck(w->arg, secs);
                }
                continue;
            }
        }
        eng_lock();
        cadre__p2p_check_peers();
        eng_unlock();
        if (WAIT_OVER())
            break;
        double t = nap;
        if (deadline > 0 && deadline - now < t)
            t = deadline - now;
        /* One membarrier for the wait's naps, not one per nap. */
        cadre__bell_series_nap(&napping);
        cadre__p2p_sleep(t);
        if (nap < 10e-3)
            nap *= 2;
        idle = spin - 8; /* a few polls between naps */
    }
    cadre__bell_series_end(&napping);
    if (registered)
        atomic_fetch_sub(&e->app_waiting, 1);
    /* The progress thread stood aside while we waited: work that moves only
     * when some thread answers is its business again. Not for other work
     * (a window of small receives, whose messages wait whole in the
     * transport): waking it after every wait of a waitall cost each window
     * a wake-up and, with ranks sharing cores, a turn on the core. */
    if (registered && atomic_load(&e->pt_wanted) > 0)
        cadre__p2p_kick();
    return rc;
}
#undef WAIT_OVER

int cadre__req_wait(struct cadre_request *r, double deadline, int no_progress_timeout)
{
    return wait_core(r, NULL, deadline, no_progress_timeout);
}

int cadre__p2p_wait_until(const struct cadre_p2p_wait *w, double deadline,
                          int no_progress_timeout)
{
    return wait_core(NULL, w, deadline, no_progress_timeout);
}

void cadre__req_foreach(void (*fn)(struct cadre_request *, void *), void *arg)
{
    for (uint32_t i = 0; i < id_cap; i++)
        if (id_table[i])
            fn(id_table[i], arg);
}

void cadre__req_unlink_generic(struct cadre_request *r)
{
    struct cadre_engine *e = &cadre__eng;
    if (r->prev)
        r->prev->next = r->next;
    else if (e->generic == r)
        e->generic = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->next = r->prev = NULL;
}
