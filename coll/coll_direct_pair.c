/* The two-rank allreduce of the direct algorithms (coll_direct.c), out of
 * place: the pair reads the peer's input with process_vm_readv and reduces
 * in chunks that stay in cache. On an idle machine each rank computes the
 * whole result (small vectors) or its half, streamed to the peer through a
 * small ring in its shm segment that paces the two. On a busy machine
 * (either rank's cadre__cores_busy in round 1), or where the call overlaps
 * another (DIRECT_OVERLAP), nothing paces them: each computes the whole
 * result. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "coll_direct.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Sleeps on this process's doorbell for at most `nap` seconds unless *w is
 * already key|want or more; the peer rings it after each store to its flags
 * (cadre__shm_wake). Counted a sleeper before the last look, so that a store
 * between that look and the sleep finds someone to wake. */
static void doze(_Atomic uint64_t *w, uint64_t key, uint32_t want, double nap)
{
    struct cadre_p2p_doorbell *b = cadre__eng.bell;
    uint32_t seq = cadre__bell_sleep_begin(b);
    uint64_t v = atomic_load_explicit(w, memory_order_acquire);
    if ((v & ~0xffffffffull) != key || (uint32_t)v < want)
        cadre__futex_wait(&b->seq, seq, nap);
    cadre__bell_sleep_end(b);
}

/* Waits until rank q's flag (`which`: 0 produced, 1 consumed) reaches
 * key|want. Lock held: the engine's checks run from here. Spins, yielding
 * when ranks outnumber the cores; sleeps on the doorbell instead when a
 * yield shows another process holding the core (cadre__yield_brief), or
 * soon with CADRE_WAIT=sleep (cadre__wait_doze). */
static int wait_flag_naps(struct coll_sched *s, int q, int which, uint64_t key, uint32_t want,
                          int *napping)
{
    struct cadre_engine *e = &cadre__eng;
    struct direct_flags *f = cadre__direct_flags(cadre__world_rank(s->comm, q));
    _Atomic uint64_t *w = which ? &f->cons : &f->prod;
    double since = 0, nap = 50e-6;
    int sleep = 0;
    for (unsigned spins = 0;; spins++) {
        uint64_t v = atomic_load_explicit(w, memory_order_acquire);
        if ((v & ~0xffffffffull) == key && (uint32_t)v >= want)
            return CADRE_SUCCESS;
        if (!sleep) {
            if (e->oversubscribed)
                sleep = !cadre__yield_brief();
            else if (spins == CADRE_BUSY_ASK)
                sleep = cadre__wait_doze();
        }
        if (sleep) {
            /* One membarrier for the wait's naps, not one per nap. */
            cadre__bell_series_nap(napping);
            doze(w, key, want, nap);
            if (nap < 10e-3)
                nap *= 2;
        } else if ((spins & 0xffff) != 0xffff) {
            continue;
        }
        cadre__p2p_check_peers();
        if (e->peers[cadre__world_rank(s->comm, q)].state == PEER_DEAD) {
            /* Its news before its leaving (coll_poison.c). */
            if (cadre__coll_any_poisoned())
                CADRE_CHECK(cadre__coll_poisoned(s->ctx, s->op_name));
            cadre__coll_poison_peer_locked(s->comm, q);
            return cadre__error(CADRE_ERR_PEER, "%s: rank %d failed", s->op_name, q);
        }
        double now = cadre__now();
        if (!since)
            since = now;
        else if (now - since > e->timeout)
            return cadre__error(CADRE_ERR_TIMEOUT, "%s: rank %d made no progress for %g s",
                                s->op_name, q, e->timeout);
    }
}

/* wait_flag_naps, whose naps make one series (cadre__bell_naps_begin). */
static int wait_flag(struct coll_sched *s, int q, int which, uint64_t key, uint32_t want)
{
    int napping = 0, rc = wait_flag_naps(s, q, which, key, want, &napping);
    cadre__bell_series_end(&napping);
    return rc;
}

static void copy_plain(void *dst, const void *src, size_t n)
{
    cadre__copy(dst, src, n);
}

/* acc[i] += src[i] and out[i] = acc[i] in one pass, out with streaming
 * stores; 1 when done, 0 when this type and op have no fused loop. */
static int reduce_out(void *out, void *acc, const void *src, size_t n, cadre_datatype_t dt,
                      cadre_op_t op)
{
#if defined(__SSE2__)
    if (dt == CADRE_FLOAT32 && (op == CADRE_SUM || op == CADRE_AVG) && !((uintptr_t)out & 15) &&
        !((uintptr_t)acc & 15)) {
        float *o = out, *a = acc;
        const float *b = src;
        size_t i = 0;
        for (; i + 8 <= n; i += 8) {
            __m128 x = _mm_add_ps(_mm_load_ps(a + i), _mm_loadu_ps(b + i));
            __m128 y = _mm_add_ps(_mm_load_ps(a + i + 4), _mm_loadu_ps(b + i + 4));
            _mm_store_ps(a + i, x);
            _mm_store_ps(a + i + 4, y);
            _mm_stream_ps(o + i, x);
            _mm_stream_ps(o + i + 4, y);
        }
        for (; i < n; i++)
            o[i] = a[i] = a[i] + b[i];
        _mm_sfence();
        return 1;
    }
#endif
    (void)out, (void)acc, (void)src, (void)n, (void)dt, (void)op;
    return 0;
}

/* Two ranks: elements [off, off+m) of the result into this rank's output,
 * through acc (which keeps them): the peer's input read into acc, this
 * rank's added; with streaming stores where nt. */
static int pair_reduce_out(struct coll_sched *s, struct direct *d, unsigned char *acc, size_t off,
                           size_t m, int nt)
{
    int peer = !s->comm->rank;
    size_t es = s->elsize;
    char *out = (char *)d->rbuf + off * es;
    const char *own = (const char *)d->sbuf + off * es;
    CADRE_CHECK(cadre__direct_cma(s, d, peer, acc, d->peer[peer].s + off * es, m * es, 0));
    if (!nt || !reduce_out(out, acc, own, m, s->dt, s->op)) {
        cadre__coll_reduce(acc, own, m, s->dt, s->op);
        (nt ? cadre__copy_nt : copy_plain)(out, acc, m * es);
    }
    return CADRE_SUCCESS;
}

/* Two ranks: each reads the other's whole input and computes the whole
 * result itself, so that nobody writes into another process's memory: a
 * write there costs the kernel a read of the line first, while the reads
 * land in this core's cache. a+b and b+a are the same bits, so both ranks
 * still get the same result. Calls of odd sequence number go from the
 * last chunk to the first: a call made again on the same vectors then
 * starts with the chunks the call before read last, which the cache still
 * holds when the vectors as a whole do not fit in it (least recently used
 * goes first: front to back every time, each call finds nothing of the
 * call before). Beside six `yes`, 2 ranks, 12 alternated turns: 4 MiB
 * 3.14 ms against 3.39, 8 MiB 8.9 against 9.4 (bench/HISTORY.md). */
static int allreduce_pair(struct coll_sched *s, struct direct *d)
{
    unsigned char *acc, *tmp;
    CADRE_CHECK(cadre__direct_scratch(s, &acc, &tmp));
    size_t step = DIRECT_CHUNK / s->elsize, n = (d->count + step - 1) / step;
    int back = s->tag & 1;
    for (size_t i = 0; i < n; i++) {
        size_t off = (back ? n - 1 - i : i) * step;
        size_t m = d->count - off < step ? d->count - off : step;
        CADRE_CHECK(pair_reduce_out(s, d, acc, off, m, 1));
    }
    return CADRE_SUCCESS;
}

/* Streaming stores only where the output would not stay in the cache. */
static int pair_nt(const struct coll_sched *s, const struct direct *d)
{
    return d->count * s->elsize >= DIRECT_NT_MIN;
}

/* What a rank needs to take the peer's half from the peer's ring: the half
 * ([lo, hi) in elements, chunks of `step` elements, `chunk` bytes apart in
 * the ring), the call's key, this rank's flags and the output's copy. */
struct take {
    int peer, wpeer;
    size_t lo, hi, step, chunk;
    const unsigned char *ring;
    struct direct_flags *mine;
    uint64_t key;
    void (*copy)(void *, const void *, size_t);
};

/* Chunk i of the peer's half, which the peer reduced into its ring: waits
 * until the peer has published it (its produced flag), copies it from the
 * ring into this rank's output, and tells the peer that its slot is free
 * (this rank's consumed flag). */
static int take_chunk(struct coll_sched *s, struct direct *d, const struct take *t, uint32_t i)
{
    size_t es = s->elsize;
    size_t off = t->lo + (size_t)i * t->step, m = t->hi - off < t->step ? t->hi - off : t->step;
    CADRE_CHECK(wait_flag(s, t->peer, 0, t->key, i + 1));
    t->copy((char *)d->rbuf + off * es, t->ring + (size_t)(i % RING_K) * t->chunk, m * es);
    atomic_store_explicit(&t->mine->cons, t->key | (i + 1), memory_order_release);
    cadre__shm_wake(t->wpeer);
    return CADRE_SUCCESS;
}

/* Two ranks, large vectors: each rank reduces its half in chunks into a
 * ring of chunk buffers in its shm segment and streams each chunk into its
 * output; the other rank, right behind, streams the chunk from that ring
 * (still in the cache) into its own output (take_chunk). Counters in the
 * segments pace the two. Memory sees each input read once and each output
 * written once, the least an allreduce can do, and only the peer's input
 * crosses with a system call. */
static int allreduce_pair_stream(struct coll_sched *s, struct direct *d)
{
    int me = s->comm->rank, peer = !me, wpeer = cadre__world_rank(s->comm, peer);
    size_t es = s->elsize, lo, hi, plo, phi;
    cadre__share(d->count, es, 2, me, &lo, &hi);
    cadre__share(d->count, es, 2, peer, &plo, &phi);
    unsigned char *ring = cadre__direct_ring(cadre__world_rank(s->comm, me));
    struct direct_flags *mine = cadre__direct_flags(cadre__world_rank(s->comm, me));
    uint64_t key = cadre__direct_key(s);
    size_t chunk = DIRECT_RING_BYTES / RING_K, step = chunk / es;
    int nt = pair_nt(s, d);
    struct take t = {.peer = peer, .wpeer = wpeer, .lo = plo, .hi = phi, .step = step,
                     .chunk = chunk, .ring = cadre__direct_ring(wpeer), .mine = mine,
                     .key = key, .copy = nt ? cadre__copy_nt : copy_plain};
    uint32_t nme = (uint32_t)((hi - lo + step - 1) / step);
    uint32_t npeer = (uint32_t)((phi - plo + step - 1) / step);
    for (uint32_t i = 0; i < nme || i < npeer; i++) {
        if (i < nme) {
            size_t off = lo + (size_t)i * step, m = hi - off < step ? hi - off : step;
            if (i >= RING_K)
                CADRE_CHECK(wait_flag(s, peer, 1, key, i - RING_K + 1));
            CADRE_CHECK(
                pair_reduce_out(s, d, ring + (size_t)(i % RING_K) * chunk, off, m, nt));
            atomic_store_explicit(&mine->prod, key | (i + 1), memory_order_release);
            cadre__shm_wake(wpeer);
        }
        if (i < npeer)
            CADRE_CHECK(take_chunk(s, d, &t, i));
    }
    /* The ring is reused by the next call: the peer must be done with it. */
    return wait_flag(s, peer, 1, key, nme);
}

int cadre__direct_pair_allreduce(struct coll_sched *s, struct direct *d)
{
    /* Every rank decides from the same addresses and flags. Overlapping
     * another call (build, coll_direct.c), or on a busy machine: the one
     * variant that never waits for the peer. */
    uint64_t any = d->peer[0].busy | d->peer[1].busy;
    if (any & (DIRECT_OVERLAP | DIRECT_BUSY))
        return allreduce_pair(s, d);
    return d->count * s->elsize >= DIRECT_STREAM_MIN &&
                   cadre__direct_ring(cadre__world_rank(s->comm, 0)) &&
                   cadre__direct_ring(cadre__world_rank(s->comm, 1))
               ? allreduce_pair_stream(s, d)
               : allreduce_pair(s, d);
}

/* The two-rank reduce, large vectors on an idle machine: each rank reduces
 * its half (the peer's input read into a chunk, its own added). The root's
 * half goes straight into its output; the other rank's goes into its ring,
 * from which the root, right behind, copies it into its output, paced as
 * the allreduce's stream (take_chunk). Both cores reduce, nobody writes into
 * a peer, the other rank's receive buffer is never touched. In place at the
 * root, the other rank reads a chunk of the root's input before it publishes
 * that chunk, and the root writes that part of its buffer only after. */
int cadre__direct_pair_reduce(struct coll_sched *s, struct direct *d)
{
    int me = s->comm->rank, peer = !me, root = d->root, wpeer = cadre__world_rank(s->comm, peer);
    size_t es = s->elsize, lo, hi, plo, phi;
    cadre__share(d->count, es, 2, me, &lo, &hi);
    cadre__share(d->count, es, 2, peer, &plo, &phi);
    struct direct_flags *mine = cadre__direct_flags(cadre__world_rank(s->comm, me));
    uint64_t key = cadre__direct_key(s);
    size_t chunk = DIRECT_RING_BYTES / RING_K, step = chunk / es;
    uint32_t nme = (uint32_t)((hi - lo + step - 1) / step);
    if (me != root) {
        unsigned char *ring = cadre__direct_ring(cadre__world_rank(s->comm, me));
        const char *own = d->sbuf;
        for (uint32_t i = 0; i < nme; i++) {
            size_t off = lo + (size_t)i * step, m = hi - off < step ? hi - off : step;
            unsigned char *acc = ring + (size_t)(i % RING_K) * chunk;
            if (i >= RING_K)
                CADRE_CHECK(wait_flag(s, root, 1, key, i - RING_K + 1));
            CADRE_CHECK(cadre__direct_cma(s, d, root, acc, d->peer[root].s + off * es, m * es, 0));
            cadre__coll_reduce(acc, own + off * es, m, s->dt, s->op);
            atomic_store_explicit(&mine->prod, key | (i + 1), memory_order_release);
            cadre__shm_wake(wpeer);
        }
        /* The ring is reused by the next call: the root must be done with it. */
        return wait_flag(s, root, 1, key, nme);
    }
    unsigned char *acc, *tmp;
    CADRE_CHECK(cadre__direct_scratch(s, &acc, &tmp));
    int nt = pair_nt(s, d);
    struct take t = {.peer = peer, .wpeer = wpeer, .lo = plo, .hi = phi, .step = step,
                     .chunk = chunk, .ring = cadre__direct_ring(wpeer), .mine = mine,
                     .key = key, .copy = nt ? cadre__copy_nt : copy_plain};
    uint32_t npeer = (uint32_t)((phi - plo + step - 1) / step);
    for (uint32_t i = 0; i < nme || i < npeer; i++) {
        if (i < nme) {
            size_t off = lo + (size_t)i * step, m = hi - off < step ? hi - off : step;
            CADRE_CHECK(pair_reduce_out(s, d, acc, off, m, nt));
        }
        if (i < npeer)
            CADRE_CHECK(take_chunk(s, d, &t, i));
    }
    return CADRE_SUCCESS;
}

int cadre__direct_pair_reduce_streams(const struct coll_sched *s, const struct direct *d)
{
    /* As the allreduce: not (the caller's whole result at the root) where
     * the peers are not both idle and alone in their direct calls, or for
     * small vectors. Every rank decides from the same addresses and flags. */
    uint64_t any = d->peer[0].busy | d->peer[1].busy;
    if (any & (DIRECT_OVERLAP | DIRECT_BUSY) || d->count * s->elsize < DIRECT_STREAM_MIN ||
        !cadre__direct_ring(cadre__world_rank(s->comm, 0)) ||
        !cadre__direct_ring(cadre__world_rank(s->comm, 1)))
        return 0;
    return 1;
}
