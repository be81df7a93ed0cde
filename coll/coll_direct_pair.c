/* The two-rank allreduce of the direct algorithms (coll_direct.c): the
 * pair reads the peer's input with process_vm_readv and reduces in chunks
 * that stay in cache. On an idle machine, out of place, each rank computes
 * the whole result (small vectors) or its half, streamed to the peer
 * through a small ring in its shm segment that paces the two. On a busy
 * machine (either rank's cadre__cores_busy in round 1) nothing paces them:
 * up to CADRE_PAIR_STAGE (where both ranks staged) each rank computes the
 * whole result from its input and the copy the peer made of its own in its
 * shm segment; else each computes the whole result up to
 * PAIR_FULL_BUSY_MAX, and above it, in place or not, the two claim chunks
 * from either end and write each into both outputs, reading the chunks
 * the peer staged for them (out of place) from its stage area. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "coll_direct.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Up to this size a busy machine's pair computes the whole result each
 * (allreduce_pair), above it the two claim chunks (allreduce_pair_claim). */
#define PAIR_FULL_BUSY_MAX DIRECT_CHUNK

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
                           size_t m, int nt, const unsigned char *staged)
{
    int peer = !s->comm->rank;
    size_t es = s->elsize;
    char *out = (char *)d->rbuf + off * es;
    const char *own = (const char *)d->sbuf + off * es;
    if (staged)
        memcpy(acc, staged, m * es);
    else
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
        CADRE_CHECK(pair_reduce_out(s, d, acc, off, m, 1, NULL));
    }
    return CADRE_SUCCESS;
}

/* Streaming stores only where the output would not stay in the cache. */
static int pair_nt(const struct coll_sched *s, const struct direct *d)
{
    return d->count * s->elsize >= DIRECT_NT_MIN;
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
    int me = s->comm->rank, peer = !me, wpeer = cadre__world_rank(s->comm, peer);
    size_t es = s->elsize, lo, hi, plo, phi;
    cadre__share(d->count, es, 2, me, &lo, &hi);
    cadre__share(d->count, es, 2, peer, &plo, &phi);
    unsigned char *ring = cadre__direct_ring(cadre__world_rank(s->comm, me));
    unsigned char *pring = cadre__direct_ring(wpeer);
    struct direct_flags *mine = cadre__direct_flags(cadre__world_rank(s->comm, me));
    uint64_t key = cadre__direct_key(s);
    size_t chunk = DIRECT_RING_BYTES / RING_K, step = chunk / es;
    int nt = pair_nt(s, d);
    void (*out_copy)(void *, const void *, size_t) = nt ? cadre__copy_nt : copy_plain;
    uint32_t nme = (uint32_t)((hi - lo + step - 1) / step);
    uint32_t npeer = (uint32_t)((phi - plo + step - 1) / step);
    for (uint32_t i = 0; i < nme || i < npeer; i++) {
        if (i < nme) {
            size_t off = lo + (size_t)i * step, m = hi - off < step ? hi - off : step;
            if (i >= RING_K)
                CADRE_CHECK(wait_flag(s, peer, 1, key, i - RING_K + 1));
            CADRE_CHECK(
                pair_reduce_out(s, d, ring + (size_t)(i % RING_K) * chunk, off, m, nt, NULL));
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

/* The claim word of allreduce_pair_claim: a call's key in the top 32 bits
 * (cadre__direct_key), then the chunks rank 0 has claimed from the front
 * and those rank 1 has claimed from the back, 16 bits each. */
#define CLAIM_BITS 16
#define CLAIM_MAX (((uint64_t)1 << CLAIM_BITS) - 1)

/* The next of n chunks for rank `me` (rank 0 from the front, rank 1 from the
 * back), -1 when all are claimed, -2 while the word is not open for this
 * call. Only rank 0 opens the word (sets it to the call's key,
 * cadre__direct_pair_open); rank 1 claims only under that key, so that a
 * word another call still uses is never taken over. */
static long claim_next(_Atomic uint64_t *w, uint64_t key, int me, uint64_t n)
{
    uint64_t v = atomic_load_explicit(w, memory_order_relaxed);
    for (;;) {
        if ((v & ~(((uint64_t)1 << (2 * CLAIM_BITS)) - 1)) != key)
            return -2;
        uint64_t f = (v >> CLAIM_BITS) & CLAIM_MAX, b = v & CLAIM_MAX;
        if (f + b >= n)
            return -1;
        uint64_t nv = v + (me == 0 ? (uint64_t)1 << CLAIM_BITS : 1);
        if (atomic_compare_exchange_weak_explicit(w, &v, nv, memory_order_relaxed,
                                                  memory_order_relaxed))
            return me == 0 ? (long)f : (long)(n - 1 - b);
    }
}

/* The claims' chunks: n of `step` elements each (DIRECT_CHUNK bytes, larger
 * only past CLAIM_MAX of them). */
static void claim_chunks(size_t count, size_t es, size_t *step, uint64_t *n)
{
    *step = DIRECT_CHUNK / es;
    *n = (count + *step - 1) / *step;
    if (*n > CLAIM_MAX)
        *step = (count + CLAIM_MAX - 1) / CLAIM_MAX, *n = (count + *step - 1) / *step;
}

/* The elements [lo, hi) of rank r's input that it stages for the claims
 * (DIRECT_STAGED_PART): the chunks its peer claims first (rank 0's from the
 * back, rank 1's from the front), half of them or as many as its stage area
 * holds. */
static void part_range(int r, size_t count, size_t es, size_t *lo, size_t *hi)
{
    size_t step;
    uint64_t n;
    claim_chunks(count, es, &step, &n);
    uint64_t k = (n + 1) / 2, fit = DIRECT_STAGE_BYTES / (step * es);
    if (k > fit)
        k = fit;
    if (r == 1)
        *lo = 0, *hi = k * step < count ? k * step : count;
    else
        *lo = (n - k) * step, *hi = count;
}

/* Where rank r's results of its claims begin in its stage area
 * (DIRECT_RESULTS): past its staged part. Its i-th claimed chunk goes to
 * slot i, at base + i * step * es, where it fits (result_fits); the rest go
 * into the peer's output by process_vm_writev. */
static size_t result_base(int r, size_t count, size_t es)
{
    size_t lo, hi;
    part_range(r, count, es, &lo, &hi);
    return ((hi - lo) * es + 63) & ~(size_t)63;
}

static int result_fits(size_t base, uint64_t i, size_t step, size_t es)
{
    return base + (i + 1) * step * es <= DIRECT_STAGE_BYTES;
}

/* The pair's claim word, in rank 0's segment, by rank 1's world rank; NULL
 * when rank 1 has none (cadre__direct_pair_allreduce then never claims). */
static _Atomic uint64_t *claim_word(const struct coll_sched *s)
{
    int w1 = cadre__world_rank(s->comm, 1);
    struct direct_flags *f = cadre__direct_flags(cadre__world_rank(s->comm, 0));
    return f && w1 < DIRECT_CLAIM_SLOTS ? &f->claim[w1] : NULL;
}

void cadre__direct_pair_open(struct coll_sched *s)
{
    /* The claim word's last user, the call before on this pair, is done
     * with it: this schedule overlaps no other in this process (its window
     * is open), so that call finished here, after the peer's round 3. */
    _Atomic uint64_t *w = claim_word(s);
    if (w)
        atomic_store_explicit(w, s->direct_window, memory_order_release);
}

/* Where both ranks left results in their stage areas (DIRECT_RESULTS):
 * after the claims, waits until the peer has reduced every chunk it claimed
 * (its `prod` counter), then copies those whose results it left there into
 * this rank's output. The peer overwrites its stage area only in its next
 * call, after this rank's round 3; one that left the call early (a failed
 * wait) closed its window first, and cadre__direct_peers_stayed then fails
 * this call. */
static int copy_results(struct coll_sched *s, struct direct *d, uint64_t key, uint64_t n,
                        size_t step, int nt)
{
    int me = s->comm->rank;
    size_t es = s->elsize;
    uint64_t v = atomic_load_explicit(claim_word(s), memory_order_acquire);
    uint64_t theirs = me == 0 ? (v & CLAIM_MAX) : (v >> CLAIM_BITS) & CLAIM_MAX;
    if (!theirs)
        return CADRE_SUCCESS;
    CADRE_CHECK(wait_flag(s, !me, 0, key, (uint32_t)theirs));
    const unsigned char *pst = cadre__direct_stage(cadre__world_rank(s->comm, !me));
    size_t base = result_base(!me, d->count, es);
    for (uint64_t i = 0; i < theirs && result_fits(base, i, step, es); i++) {
        uint64_t j = me == 0 ? n - 1 - i : i;
        size_t off = (size_t)j * step, m = d->count - off < step ? d->count - off : step;
        (nt ? cadre__copy_nt : copy_plain)((char *)d->rbuf + off * es,
                                           pst + base + i * step * es, m * es);
    }
    return CADRE_SUCCESS;
}

/* Two ranks, large vectors, on a busy machine (either rank's
 * cadre__cores_busy in round 1): the unpaced variant. With other processes
 * on the cores each rank runs in the slices the scheduler gives it, and a
 * rank that waits for its peer waits for a process the scheduler set
 * aside. Here the chunks go to whichever rank runs: rank 0 claims them
 * from the front, rank 1 from the back (the claim word in rank 0's
 * segment), and each reduces what it claims into its own output and
 * writes it, from the cache, into the peer's: neither rank waits for the
 * other before round 3, and the result crosses once, from the cache,
 * instead of being read back from the owner's output in memory.
 * Beside six `yes`, 16 MiB out of place, alternated turns, medians: 15.1
 * ms against 20.5 for the variant before, in which each rank read the
 * peer's chunks back from the owner's output, where its streaming stores
 * had sent them to memory; in place 13.2 against 14.1 for the fixed halves
 * (bench/HISTORY.md). In place too, since a chunk is read and written only
 * by the rank that claimed it. A write goes only into a peer still in the
 * call (cadre__direct_write). Each chunk is computed once, so both ranks
 * get the same bits. */
static int allreduce_pair_claim(struct coll_sched *s, struct direct *d)
{
    int me = s->comm->rank;
    _Atomic uint64_t *w = claim_word(s);
    uint64_t key = s->direct_window; /* also the claim word's and `prod`'s top 32 bits */
    unsigned char *acc, *tmp;
    CADRE_CHECK(cadre__direct_scratch(s, &acc, &tmp));
    /* Chunks reduced in pieces that fit the scratch. */
    size_t step, piece = DIRECT_CHUNK / s->elsize, es = s->elsize;
    uint64_t n;
    claim_chunks(d->count, es, &step, &n);
    /* The part of the peer's input it staged, if it did; mapped, since it
     * staged with its window open, which needs every rank's segment. */
    size_t plo = 0, phi = 0;
    const unsigned char *pst = NULL;
    if (d->peer[!me].busy & DIRECT_STAGED_PART) {
        part_range(!me, d->count, es, &plo, &phi);
        pst = cadre__direct_stage(cadre__world_rank(s->comm, !me));
    } else if (d->peer[!me].busy & DIRECT_STAGED) {
        /* It staged the whole input, this rank did not (they judged the
         * placement differently): read it there all the same. */
        phi = d->count;
        pst = cadre__direct_stage(cadre__world_rank(s->comm, !me));
    }
    int nt = pair_nt(s, d);
    int res = (d->peer[0].busy & d->peer[1].busy & DIRECT_RESULTS) != 0;
    unsigned char *mst = res ? cadre__direct_stage(cadre__world_rank(s->comm, me)) : NULL;
    size_t mbase = res ? result_base(me, d->count, es) : 0;
    struct direct_flags *mine = cadre__direct_flags(cadre__world_rank(s->comm, me));
    uint32_t done = 0;
    long j;
    while ((j = claim_next(w, key, me, n)) != -1) {
        if (j == -2)
            /* Rank 0 opened the word before it sent its addresses; it holds
             * another call's key only once rank 0 left this call (a failed
             * wait) and started another on the pair. */
            return cadre__error(CADRE_ERR_PEER, "%s: rank 0 left the call (the pair's claim "
                                "word holds another call's)", s->op_name);
        size_t off = (size_t)j * step, m = d->count - off < step ? d->count - off : step;
        for (size_t p = 0; p < m; p += piece) {
            size_t k = m - p < piece ? m - p : piece;
            size_t at = off + p;
            const unsigned char *staged =
                pst && at >= plo && at + k <= phi ? pst + (at - plo) * es : NULL;
            CADRE_CHECK(pair_reduce_out(s, d, acc, at, k, nt, staged));
            uint64_t slot = me == 0 ? (uint64_t)j : n - 1 - (uint64_t)j;
            if (res && result_fits(mbase, slot, step, es))
                memcpy(mst + mbase + (slot * step + p) * es, acc, k * es);
            else
                CADRE_CHECK(cadre__direct_write(s, !me, acc, d->peer[!me].r + at * es, k * es));
        }
        if (res) {
            atomic_store_explicit(&mine->prod, key | ++done, memory_order_release);
            cadre__shm_wake(cadre__world_rank(s->comm, !me));
        }
    }
    /* Round 3 keeps the peer from returning while this rank writes into its
     * output or it copies from this rank's stage area. */
    return res ? copy_results(s, d, key, n, step, nt) : CADRE_SUCCESS;
}

/* ---- the staged inputs ------------------------------------------------------------- */
/* A busy machine's two ranks, up to CADRE_PAIR_STAGE: each copies its input
 * into its stage area before round 1 (cadre__direct_pair_stage) and, in round
 * 2, computes the whole result from its own input and the peer's copy
 * (allreduce_pair_staged). A copy costs about a third of what a
 * process_vm_readv or writev of the same bytes costs (the kernel pins the
 * pages one by one: 33 against 10-11 GB/s of CPU time here, with or without
 * six `yes`), and the claims variant moves each half twice that way; here
 * nothing crosses by a system call and neither rank writes into the other.
 * Round 2 waits for nobody: the peer's copy was made before its round 1.
 *
 * The peer reads the copy only during its round 2, which ends before its
 * round 3 lets this rank return. A rank stages only with its window open
 * (build, coll_direct.c), and a rank that left the call early (a failed
 * wait) closed that window before its next call copies over the one being
 * read: the reader's check after round 2 (cadre__direct_peers_stayed) then
 * fails its call rather than return a result of mixed calls.
 *
 * Above CADRE_PAIR_STAGE, out of place, each rank stages the part of its
 * input the peer's claims read first (part_range: half, at most the stage
 * area). The peer reads those chunks with a plain copy instead of
 * process_vm_readv; the chunks it claims past them, and the result written
 * into this rank's output, still cross by system call. A part of more than
 * PART_PLAIN_MAX is copied with streaming stores, so that it waits in
 * memory rather than in this core's cache, which the peer's core may not
 * share: the vCPUs here switch, minutes apart, between sharing a cache
 * (bench/c2c.c 80-110 ns) and not (350-410 ns). Plain stores are much the
 * faster where they share one and much the slower where they do not (they
 * take the lines back from the peer's cache, where the call before left
 * them); up to PART_PLAIN_MAX plain stores did no worse either way.
 *
 * Where the two cores share a cache (cadre__direct_place_shared, or
 * CADRE_PAIR_PLACE), each rank stages its whole input up to
 * SHARED_WHOLE_MAX, in place or not, and both compute the whole result
 * (allreduce_pair_staged): the peer's copy comes from the shared cache.
 * Beside six `yes`, 2 ranks, medians of 8 alternated turns where they share
 * one, against the staged half: out of place 1 MiB 0.81 of the time, 2 MiB
 * 0.55, 4 MiB 0.72; in place 0.66, 0.66, 0.63; at 8 MiB the whole copy
 * lost (1.23), and so did the half with plain stores there (1.03-1.15 in
 * two runs). Where they share none, the same turns with the whole copy: 1
 * MiB 1.85, 2 MiB 1.94, 4 MiB 1.77. Above SHARED_WHOLE_MAX the part goes
 * with plain stores where they share one: with the results in the stage
 * area (below), 8 MiB 0.91 of the time with streaming stores (10 turns).
 * Ranks that judge differently stage differently; the claims then read
 * whatever the peer staged.
 *
 * Up to DIRECT_STAGE_BYTES, the claimer of a chunk also leaves its result
 * in its own stage area, past the part, instead of writing it into the
 * peer's output with process_vm_writev (DIRECT_RESULTS, copy_results): a
 * plain copy into the segment, and one by the peer out of it after its
 * claims. Beside six `yes`, 2 ranks, alternated turns (8 and 6 where the
 * cores share a cache, 4 and 2 where they do not): 8 MiB 0.85 and 0.94 of
 * the time, and 0.82 and 0.90; 1-2 MiB where they share none 0.87-0.92.
 *
 * Not in place: there the claimer of a chunk wrote the buffer's last
 * contents into the peer, from its own cache, and a copy of them made by
 * the peer, which reads them back across, costs more than the system call
 * saves (beside six `yes`, 1 MiB 0.88 against 0.42 ms).
 *
 * Beside six `yes`, 2 ranks, out of place,
 * medians of alternated turns against no staging, in five runs with
 * streaming stores: where the two vCPUs do not share a cache 1 MiB
 * 0.87-0.89 of the time, 2 MiB 0.81-0.84, 4 MiB 0.84-0.86, 8 MiB
 * 0.69-0.79, 16 MiB 0.77; where they do 1 MiB 0.97-1.08, 2 MiB 0.96-1.03,
 * 4 MiB 0.84-1.00, 8 MiB 0.84-0.93, 16 MiB 0.84-0.96. Plain stores in 16
 * turns, 8 of each placement: 1 MiB 0.89 and 0.81, 2 MiB 1.30 and 0.79, 4
 * MiB 1.24 and 0.84 (bench/HISTORY.md). */
#define PART_PLAIN_MAX ((size_t)512 << 10)
#define SHARED_WHOLE_MAX ((size_t)4 << 20)
int cadre__direct_pair_stage(struct coll_sched *s, const struct direct *d)
{
    size_t bytes = d->count * s->elsize, lo, hi;
    long long most = cadre__config_int(CADRE_CFG_PAIR_STAGE);
    int me = s->comm->rank;
    unsigned char *st = cadre__direct_stage(cadre__world_rank(s->comm, me));
    if (!st || !bytes || most <= 0)
        return 0;
    int shared = cadre__direct_place_shared(cadre__world_rank(s->comm, !me));
    if (shared && (unsigned long long)most < SHARED_WHOLE_MAX)
        most = SHARED_WHOLE_MAX;
    if (bytes <= (unsigned long long)most && bytes <= DIRECT_STAGE_BYTES) {
        memcpy(st, d->sbuf, bytes);
        return DIRECT_STAGED;
    }
    if (d->sbuf == d->rbuf || bytes <= PAIR_FULL_BUSY_MAX)
        return 0;
    part_range(me, d->count, s->elsize, &lo, &hi);
    const char *from = (const char *)d->sbuf + lo * s->elsize;
    size_t part = (hi - lo) * s->elsize;
    if (part <= PART_PLAIN_MAX || shared)
        memcpy(st, from, part);
    else
        cadre__copy_nt(st, from, part);
    /* Room past the part for the results of at least half the chunks. */
    return DIRECT_STAGED_PART | (bytes <= DIRECT_STAGE_BYTES ? DIRECT_RESULTS : 0);
}

int cadre__direct_pair_staged(const struct direct *d)
{
    return (d->peer[0].busy & d->peer[1].busy & DIRECT_STAGED) != 0;
}

/* Round 2 where both ranks staged: the whole result in rank order (rank 0's
 * input op rank 1's: the same bits on both ranks), from this rank's input
 * and the peer's stage area, in chunks that stay in cache. In place the
 * own chunk is read before it is written, and the peer reads the copy, not
 * this buffer. */
static int allreduce_pair_staged(struct coll_sched *s, struct direct *d)
{
    int me = s->comm->rank;
    /* Mapped: the peer staged with its window open, which needs every
     * rank's segment. */
    const unsigned char *pst = cadre__direct_stage(cadre__world_rank(s->comm, !me));
    unsigned char *acc, *tmp;
    CADRE_CHECK(cadre__direct_scratch(s, &acc, &tmp));
    size_t es = s->elsize, step = DIRECT_CHUNK / es;
    for (size_t off = 0; off < d->count; off += step) {
        size_t m = d->count - off < step ? d->count - off : step, bytes = m * es;
        const unsigned char *own = (const unsigned char *)d->sbuf + off * es;
        const unsigned char *peer = pst + off * es;
        unsigned char *out = (unsigned char *)d->rbuf + off * es;
        const unsigned char *first = me == 0 ? own : peer, *second = me == 0 ? peer : own;
        if (out == second) { /* in place at rank 1: through acc */
            memcpy(acc, first, bytes);
            cadre__coll_reduce(acc, second, m, s->dt, s->op);
            memcpy(out, acc, bytes);
        } else {
            if (out != first)
                memcpy(out, first, bytes);
            cadre__coll_reduce(out, second, m, s->dt, s->op);
        }
    }
    return CADRE_SUCCESS;
}

/* The two-rank allreduce on a busy machine: each rank computes the whole
 * result up to one chunk out of place (allreduce_pair; in place, the fixed
 * halves of coll_direct.c), and the two claim chunks above it
 * (allreduce_pair_claim). Neither rank then waits for the other in round
 * 2. Beside six `yes`, 2 ranks, 6 alternated turns, medians: the claims
 * against the whole result 64 KiB 72 us against 39, 256 KiB 240 against
 * 129, 512 KiB 187 against 260, 1 MiB 468 against 580 (bench/HISTORY.md). */
int cadre__direct_pair_claims(const struct coll_sched *s, const struct direct *d)
{
    uint64_t any = d->peer[0].busy | d->peer[1].busy, all = d->peer[0].busy & d->peer[1].busy;
    return (any & DIRECT_BUSY) && !(any & DIRECT_OVERLAP) && (all & DIRECT_WINDOW) &&
           claim_word(s) && d->count * s->elsize > PAIR_FULL_BUSY_MAX;
}

int cadre__direct_pair_allreduce(struct coll_sched *s, struct direct *d)
{
    /* Every rank decides from the same addresses and flags. Overlapping
     * another call (build, coll_direct.c): the one variant that never
     * waits for the peer. */
    if (cadre__direct_pair_staged(d))
        return allreduce_pair_staged(s, d);
    if (cadre__direct_pair_claims(s, d))
        return allreduce_pair_claim(s, d);
    uint64_t any = d->peer[0].busy | d->peer[1].busy;
    if (any & (DIRECT_OVERLAP | DIRECT_BUSY))
        return allreduce_pair(s, d);
    return d->count * s->elsize >= DIRECT_STREAM_MIN &&
                   cadre__direct_ring(cadre__world_rank(s->comm, 0)) &&
                   cadre__direct_ring(cadre__world_rank(s->comm, 1))
               ? allreduce_pair_stream(s, d)
               : allreduce_pair(s, d);
}
