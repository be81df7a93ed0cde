/*
 * Direct algorithms for communicators whose ranks share one node.
 *
 * Instead of moving data through the point-to-point rings (a copy into
 * shared memory by the sender, a copy out by the receiver), a rank reads the
 * peers' user buffers and writes into them with process_vm_readv/writev
 * (one copy, done by the kernel). The same permission that lets the shm
 * transport take the peers' segments with pidfd_getfd allows it, so these
 * algorithms are offered exactly when every member is reached through shm.
 *
 * Each schedule has three rounds:
 *   1. every rank sends every other its buffer addresses;
 *   2. a CS_CALL step does the copies and reductions of this rank's share;
 *   3. every rank sends every other an empty message, so that no rank
 *      returns (and lets its caller reuse the buffers) while a peer still
 *      reads or writes them.
 *
 * allreduce: rank r reduces slice r of the vector (reading slice r of every
 * peer's input in chunks that stay in cache) and writes the result into its
 * own output and into every peer's. Each input byte is read once and each
 * output byte written once, which is what this machine's memory allows; and
 * since one rank computes each slice, every rank gets the same bits.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sched.h>

#include "coll_algos.h"
#include "coll_fast.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Bytes reduced at a time: two such buffers stay in a core's 1 MiB L2. */
#define DIRECT_CHUNK ((size_t)256 << 10)
/* Chunks in the ring of allreduce_pair_stream (DIRECT_RING_BYTES in all). */
#define RING_K 4
/* From this size the two-rank allreduce streams its halves (below). */
#define DIRECT_STREAM_MIN ((size_t)64 << 10)
/* ... and writes its output with streaming stores from this size. */
#define DIRECT_NT_MIN ((size_t)8 << 20)

/* What each rank tells the others in round 1. */
struct direct_addr {
    uint64_t s, r;  /* its send and receive buffer addresses */
    uint64_t busy;  /* 1: other processes want its node's cores (cadre__cores_busy) */
};

struct direct {
    struct direct_addr mine;
    struct direct_addr *peer; /* every rank's, this one's included */
    const void *sbuf;
    void *rbuf;
    size_t count;       /* allreduce: the vector; reduce_scatter: the block; bcast: buf */
    int root;           /* bcast */
    const size_t *counts, *displs; /* allgatherv: copies owned by the schedule */
};

static int world_of(const struct cadre_comm *c, int rank)
{
    return c->world_ranks ? c->world_ranks[rank] : rank;
}

int cadre__direct_usable(const struct cadre_comm *c)
{
    if (c->size < 2 || !cadre__eng.peers)
        return 0;
    for (int i = 0; i < c->size; i++) {
        if (i == c->rank)
            continue;
        const struct cadre_peer *p = &cadre__eng.peers[world_of(c, i)];
        if (p->tp != &cadre__p2p_shm || p->pid <= 0)
            return 0;
    }
    return 1;
}

int cadre__cma_failed(struct cadre_comm *c, const char *fn, int rank, int err, size_t n, int write)
{
    int w = world_of(c, rank);
    if (err == ESRCH) {
        cadre__coll_poison_peer_locked(c, rank);
        return cadre__error(CADRE_ERR_PEER, "%s: rank %d (world rank %d, pid %d) is gone", fn, rank,
                            w, (int)cadre__eng.peers[w].pid);
    }
    return cadre__error(CADRE_ERR_INTERNAL, "%s: process_vm_%s of %zu bytes at rank %d: %s", fn,
                        write ? "writev" : "readv", n, rank,
                        err == EIO ? "no progress" : strerror(err));
}

/* Copies n bytes between local memory and rank `rank`'s address space. */
static int cma(struct coll_sched *s, int rank, void *local, uint64_t remote, size_t n, int write)
{
    int err = cadre__cma(world_of(s->comm, rank), local, remote, n, write);
    return err ? cadre__cma_failed(s->comm, s->op_name, rank, err, n, write) : CADRE_SUCCESS;
}

/* Two chunk buffers. Local steps run under the engine lock, one at a time,
 * so one pair serves every schedule of the process. */
static unsigned char *scratch;

static int get_scratch(struct coll_sched *s, unsigned char **acc, unsigned char **tmp)
{
    if (!scratch && posix_memalign((void **)&scratch, 4096, 2 * DIRECT_CHUNK))
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", s->op_name), scratch = NULL,
               CADRE_ERR_NOMEM;
    *acc = scratch;
    *tmp = scratch + DIRECT_CHUNK;
    return CADRE_SUCCESS;
}

/* Reduces elements [off, off+m) over all ranks into acc: rank q's part of
 * its send buffer sits at base[q] + off*es (base of this rank is local). */
static int reduce_chunk(struct coll_sched *s, struct direct *d, const char *mine, size_t sboff,
                        size_t m, unsigned char *acc, unsigned char *tmp)
{
    int n = s->comm->size, me = s->comm->rank;
    size_t bytes = m * s->elsize;
    int first = 1;
    for (int q = 0; q < n; q++) {
        if (q == me)
            continue;
        unsigned char *dst = first ? acc : tmp;
        CADRE_CHECK(cma(s, q, dst, d->peer[q].s + sboff, bytes, 0));
        if (!first)
            cadre__coll_reduce(acc, tmp, m, s->dt, s->op);
        first = 0;
    }
    cadre__coll_reduce(acc, mine + sboff, m, s->dt, s->op);
    return CADRE_SUCCESS;
}

static int allreduce_pair(struct coll_sched *s, struct direct *d);
static int allreduce_pair_stream(struct coll_sched *s, struct direct *d);
static int allreduce_pair_loose(struct coll_sched *s, struct direct *d);

static int allreduce_call(struct coll_sched *s, const struct coll_step *st)
{
    struct direct *d = st->arg;
    int n = s->comm->size, me = s->comm->rank;
    /* The pair algorithm reads the peer's input while the peer writes its
     * output: only where no rank works in place. Every rank decides from
     * the same addresses. */
    if (n == 2 && d->peer[0].s != d->peer[0].r && d->peer[1].s != d->peer[1].r) {
        if (d->count * s->elsize >= DIRECT_STREAM_MIN && (d->peer[0].busy || d->peer[1].busy))
            return allreduce_pair_loose(s, d);
        return d->count * s->elsize >= DIRECT_STREAM_MIN &&
                       cadre__direct_ring(world_of(s->comm, 0)) &&
                       cadre__direct_ring(world_of(s->comm, 1))
                   ? allreduce_pair_stream(s, d)
                   : allreduce_pair(s, d);
    }
    size_t es = s->elsize, lo, hi;
    cadre__share(d->count, es, n, me, &lo, &hi);
    unsigned char *acc, *tmp;
    CADRE_CHECK(get_scratch(s, &acc, &tmp));
    size_t step = DIRECT_CHUNK / es;
    for (size_t off = lo; off < hi; off += step) {
        size_t m = hi - off < step ? hi - off : step, bytes = m * es;
        CADRE_CHECK(reduce_chunk(s, d, d->sbuf, off * es, m, acc, tmp));
        cadre__copy_nt((char *)d->rbuf + off * es, acc, bytes);
        for (int q = 0; q < n; q++)
            if (q != me)
                CADRE_CHECK(cma(s, q, acc, d->peer[q].r + off * es, bytes, 1));
    }
    return CADRE_SUCCESS;
}

/* Two ranks: each reads the other's whole input and computes the whole
 * result itself, so that nobody writes into another process's memory: a
 * write there costs the kernel a read of the line first, while the reads
 * land in this core's cache. a+b and b+a are the same bits, so both ranks
 * still get the same result. */
static int allreduce_pair(struct coll_sched *s, struct direct *d)
{
    int peer = !s->comm->rank;
    size_t es = s->elsize;
    unsigned char *acc, *tmp;
    CADRE_CHECK(get_scratch(s, &acc, &tmp));
    size_t step = DIRECT_CHUNK / es;
    for (size_t off = 0; off < d->count; off += step) {
        size_t m = d->count - off < step ? d->count - off : step, bytes = m * es;
        CADRE_CHECK(cma(s, peer, acc, d->peer[peer].s + off * es, bytes, 0));
        cadre__coll_reduce(acc, (const char *)d->sbuf + off * es, m, s->dt, s->op);
        cadre__copy_nt((char *)d->rbuf + off * es, acc, bytes);
    }
    return CADRE_SUCCESS;
}

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
static int wait_flag(struct coll_sched *s, int q, int which, uint64_t key, uint32_t want)
{
    struct cadre_engine *e = &cadre__eng;
    struct direct_flags *f = cadre__direct_flags(world_of(s->comm, q));
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
            doze(w, key, want, nap);
            if (nap < 10e-3)
                nap *= 2;
        } else if ((spins & 0xffff) != 0xffff) {
            continue;
        }
        cadre__p2p_check_peers();
        if (e->peers[world_of(s->comm, q)].state == PEER_DEAD) {
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

/* The chunk key of allreduce_pair_stream and allreduce_pair_loose's flags. */
static uint64_t pair_key(const struct coll_sched *s)
{
    uint64_t key = ((uint64_t)(uint32_t)s->tag << 32) ^ ((uint64_t)s->ctx << 62);
    return key & ~0xffffffffull;
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
    CADRE_CHECK(cma(s, peer, acc, d->peer[peer].s + off * es, m * es, 0));
    if (!nt || !reduce_out(out, acc, own, m, s->dt, s->op)) {
        cadre__coll_reduce(acc, own, m, s->dt, s->op);
        (nt ? cadre__copy_nt : copy_plain)(out, acc, m * es);
    }
    return CADRE_SUCCESS;
}

/* Two ranks, large vectors: each rank reduces its half in chunks into a
 * ring of chunk buffers in its shm segment and streams each chunk into its
 * output; the other rank, right behind, streams the chunk from that ring
 * (still in the cache) into its own output. Counters in the segments pace
 * the two. Memory sees each input read once and each output written once,
 * the least an allreduce can do, and only the peer's input crosses with a
 * system call. */
static int allreduce_pair_stream(struct coll_sched *s, struct direct *d)
{
    int me = s->comm->rank, peer = !me;
    int wme = world_of(s->comm, me), wpeer = world_of(s->comm, peer);
    size_t es = s->elsize, lo, hi, plo, phi;
    cadre__share(d->count, es, 2, me, &lo, &hi);
    cadre__share(d->count, es, 2, peer, &plo, &phi);
    unsigned char *ring = cadre__direct_ring(wme), *pring = cadre__direct_ring(wpeer);
    struct direct_flags *mine = cadre__direct_flags(wme);
    uint64_t key = pair_key(s);
    size_t chunk = DIRECT_RING_BYTES / RING_K, step = chunk / es;
    /* Streaming stores only where the output would not stay in the cache. */
    int nt = d->count * es >= DIRECT_NT_MIN;
    void (*out_copy)(void *, const void *, size_t) = nt ? cadre__copy_nt : copy_plain;
    uint32_t nme = (uint32_t)((hi - lo + step - 1) / step);
    uint32_t npeer = (uint32_t)((phi - plo + step - 1) / step);
    for (uint32_t i = 0; i < nme || i < npeer; i++) {
        if (i < nme) {
            size_t off = lo + (size_t)i * step, m = hi - off < step ? hi - off : step;
            if (i >= RING_K)
                CADRE_CHECK(wait_flag(s, peer, 1, key, i - RING_K + 1));
            CADRE_CHECK(pair_reduce_out(s, d, ring + (size_t)(i % RING_K) * chunk, off, m, nt));
            atomic_store_explicit(&mine->prod, key | (i + 1), memory_order_release);
            cadre__shm_wake(wpeer);
        }
        if (i < npeer) {
            size_t off = plo + (size_t)i * step, m = phi - off < step ? phi - off : step;
            CADRE_CHECK(wait_flag(s, peer, 0, key, i + 1));
            out_copy((char *)d->rbuf + off * es, pring + (size_t)(i % RING_K) * chunk, m * es);
            atomic_store_explicit(&mine->cons, key | (i + 1), memory_order_release);
            cadre__shm_wake(wpeer);
        }
    }
    /* The ring is reused by the next call: the peer must be done with it. */
    return wait_flag(s, peer, 1, key, nme);
}

/* Reads into this rank's output the chunks of the peer's half that the
 * peer's counter says it has written into its own output, from chunk *got
 * on, in one system call. */
static int take_written(struct coll_sched *s, struct direct *d, uint64_t key, size_t plo,
                        size_t phi, size_t step, uint32_t *got)
{
    int peer = !s->comm->rank;
    uint64_t v = atomic_load_explicit(&cadre__direct_flags(world_of(s->comm, peer))->prod,
                                      memory_order_acquire);
    if ((v & ~0xffffffffull) != key || (uint32_t)v <= *got)
        return CADRE_SUCCESS;
    size_t es = s->elsize, off = plo + (size_t)*got * step, end = plo + (size_t)(uint32_t)v * step;
    if (end > phi)
        end = phi;
    CADRE_CHECK(cma(s, peer, (char *)d->rbuf + off * es, d->peer[peer].r + off * es,
                    (end - off) * es, 0));
    *got = (uint32_t)v;
    return CADRE_SUCCESS;
}

/* Two ranks, large vectors, on a busy machine (either rank's
 * cadre__cores_busy in round 1): the unpaced variant. As in allreduce_pair_stream each rank
 * reduces its half into its own output, but the peer then reads that half
 * straight from there, as far as the counter says it is written, not
 * through the ring: nothing makes a rank wait for its peer to read. With
 * other processes on the cores each rank runs in slices the scheduler gives
 * it; the ring's pacing made the two meet every RING_K chunks, each meeting
 * a wait for a rank the scheduler had set aside (2-rank allreduce beside six
 * `yes`, 32 MiB: 150-190 ms paced, 34-41 ms here). Here they meet once,
 * when one has nothing left but reading. */
static int allreduce_pair_loose(struct coll_sched *s, struct direct *d)
{
    int me = s->comm->rank, peer = !me;
    int wme = world_of(s->comm, me), wpeer = world_of(s->comm, peer);
    size_t es = s->elsize, lo, hi, plo, phi;
    cadre__share(d->count, es, 2, me, &lo, &hi);
    cadre__share(d->count, es, 2, peer, &plo, &phi);
    struct direct_flags *mine = cadre__direct_flags(wme);
    uint64_t key = pair_key(s);
    unsigned char *acc, *tmp;
    CADRE_CHECK(get_scratch(s, &acc, &tmp));
    size_t step = DIRECT_CHUNK / es;
    int nt = d->count * es >= DIRECT_NT_MIN;
    uint32_t nme = (uint32_t)((hi - lo + step - 1) / step);
    uint32_t npeer = (uint32_t)((phi - plo + step - 1) / step), got = 0;
    for (uint32_t i = 0; i < nme; i++) {
        size_t off = lo + (size_t)i * step, m = hi - off < step ? hi - off : step;
        CADRE_CHECK(pair_reduce_out(s, d, acc, off, m, nt));
        atomic_store_explicit(&mine->prod, key | (i + 1), memory_order_release);
        cadre__shm_wake(wpeer);
        CADRE_CHECK(take_written(s, d, key, plo, phi, step, &got));
    }
    while (got < npeer) {
        CADRE_CHECK(wait_flag(s, peer, 0, key, got + 1));
        CADRE_CHECK(take_written(s, d, key, plo, phi, step, &got));
    }
    /* Round 3 keeps the peer from returning while this rank reads its output. */
    return CADRE_SUCCESS;
}

static int reduce_scatter_call(struct coll_sched *s, const struct coll_step *st)
{
    struct direct *d = st->arg;
    size_t es = s->elsize, base = (size_t)s->comm->rank * d->count * es;
    unsigned char *acc, *tmp;
    CADRE_CHECK(get_scratch(s, &acc, &tmp));
    size_t step = DIRECT_CHUNK / es;
    for (size_t off = 0; off < d->count; off += step) {
        size_t m = d->count - off < step ? d->count - off : step;
        CADRE_CHECK(reduce_chunk(s, d, d->sbuf, base + off * es, m, acc, tmp));
        cadre__copy_nt((char *)d->rbuf + off * es, acc, m * es);
    }
    return CADRE_SUCCESS;
}

static int allgatherv_call(struct coll_sched *s, const struct coll_step *st)
{
    struct direct *d = st->arg;
    int n = s->comm->size, me = s->comm->rank;
    size_t es = s->elsize;
    char *rb = d->rbuf;
    if (d->counts[me] && (const char *)d->sbuf != rb + d->displs[me] * es)
        cadre__copy_out(rb + d->displs[me] * es, d->sbuf, d->counts[me] * es,
                        s->out_bytes);
    /* Start with the next rank so the ranks do not all read rank 0 at once.
     * Each block is one process_vm_readv straight into the output: reading
     * through a cache-sized chunk and streaming it out was slower at every
     * size measured, 16 to 64 MiB, here and in bcast (bench/RESULTS.md,
     * 2026-11-24): the kernel's cost is per page pinned, and the chunk adds a
     * second copy. */
    for (int i = 1; i < n; i++) {
        int q = (me + i) % n;
        if (d->counts[q])
            CADRE_CHECK(cma(s, q, rb + d->displs[q] * es, d->peer[q].s, d->counts[q] * es, 0));
    }
    return CADRE_SUCCESS;
}

static int bcast_call(struct coll_sched *s, const struct coll_step *st)
{
    struct direct *d = st->arg;
    int n = s->comm->size, me = s->comm->rank, root = d->root;
    size_t bytes = d->count * s->elsize;
    char *buf = d->rbuf;
    if (n == 2) {
        /* Both cores copy: the root writes the first 60%, the other rank
         * reads the rest. The root's process_vm_writev costs less per byte
         * than the reader's readv here: at 16 MiB, 60% against 50% took
         * 564 against 657 us (medians of 5, c2c ~470 ns), and 65-75% did
         * better still where c2c read ~110 ns (bench/RESULTS.md). */
        size_t half = bytes / 5 * 3 / 64 * 64;
        if (me == root)
            return cma(s, !me, buf, d->peer[!me].r, half, 1);
        return cma(s, root, buf + half, d->peer[root].r + half, bytes - half, 0);
    }
    if (me == root)
        return CADRE_SUCCESS;
    return cma(s, root, buf, d->peer[root].r, bytes, 0);
}

/* Rounds 1 and 3 around the CS_CALL of round 2. */
static int build(struct coll_sched *s, struct direct *d, coll_call_fn fn)
{
    int n = s->comm->size, me = s->comm->rank;
    d->mine.s = (uint64_t)(uintptr_t)d->sbuf;
    d->mine.r = (uint64_t)(uintptr_t)d->rbuf;
    d->mine.busy = (uint64_t)cadre__cores_busy();
    d->peer = cadre__sched_alloc(s, (size_t)n * sizeof *d->peer);
    if (!d->peer)
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", s->op_name);
    d->peer[me] = d->mine;
    for (int i = 1; i < n; i++) {
        int q = (me + i) % n;
        CADRE_CHECK(cadre__sched_send(s, q, &d->mine, sizeof d->mine));
        CADRE_CHECK(cadre__sched_recv(s, q, &d->peer[q], sizeof d->mine));
    }
    CADRE_CHECK(cadre__sched_barrier(s));
    CADRE_CHECK(cadre__sched_call(s, fn, d));
    CADRE_CHECK(cadre__sched_barrier(s));
    for (int i = 1; i < n; i++) {
        int q = (me + i) % n;
        CADRE_CHECK(cadre__sched_send(s, q, NULL, 0));
        CADRE_CHECK(cadre__sched_recv(s, q, NULL, 0));
    }
    return cadre__sched_barrier(s);
}

static struct direct *new_direct(struct coll_sched *s)
{
    struct direct *d = cadre__sched_alloc(s, sizeof *d);
    if (!d)
        cadre__error(CADRE_ERR_NOMEM, "%s: no memory", s->op_name);
    else
        memset(d, 0, sizeof *d);
    return d;
}

int cadre__algo_allreduce_direct(struct coll_sched *s, const void *sbuf, void *rbuf, size_t count)
{
    struct direct *d = new_direct(s);
    if (!d)
        return CADRE_ERR_NOMEM;
    d->sbuf = sbuf;
    d->rbuf = rbuf;
    d->count = count;
    return build(s, d, allreduce_call);
}

int cadre__algo_reduce_scatter_direct(struct coll_sched *s, const void *sbuf, void *rbuf,
                                      size_t recvcount)
{
    struct direct *d = new_direct(s);
    if (!d)
        return CADRE_ERR_NOMEM;
    d->sbuf = sbuf;
    d->rbuf = rbuf;
    d->count = recvcount;
    if (sbuf == rbuf) {
        /* In place the result lands on block 0 of the input, which rank 0
         * may still be reading: reduce into scratch, copy after round 3. */
        void *out = cadre__sched_alloc(s, recvcount * s->elsize);
        if (!out)
            return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", s->op_name);
        d->rbuf = out;
        CADRE_CHECK(build(s, d, reduce_scatter_call));
        CADRE_CHECK(cadre__sched_copy(s, rbuf, out, recvcount * s->elsize));
        return cadre__sched_barrier(s);
    }
    return build(s, d, reduce_scatter_call);
}

int cadre__algo_allgatherv_direct(struct coll_sched *s, const void *sbuf, void *rbuf,
                                  const size_t *counts, const size_t *displs)
{
    struct direct *d = new_direct(s);
    if (!d)
        return CADRE_ERR_NOMEM;
    size_t n = (size_t)s->comm->size;
    size_t *v = cadre__sched_alloc(s, 2 * n * sizeof *v);
    if (!v)
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", s->op_name);
    memcpy(v, counts, n * sizeof *v);
    memcpy(v + n, displs, n * sizeof *v);
    d->counts = v;
    d->displs = v + n;
    d->sbuf = sbuf;
    d->rbuf = rbuf;
    return build(s, d, allgatherv_call);
}

int cadre__algo_bcast_direct(struct coll_sched *s, void *buf, size_t count, int root)
{
    struct direct *d = new_direct(s);
    if (!d)
        return CADRE_ERR_NOMEM;
    d->sbuf = buf;
    d->rbuf = buf;
    d->count = count;
    d->root = root;
    return build(s, d, bcast_call);
}
