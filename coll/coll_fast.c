/*
 * Shared-memory collectives for small buffers, for communicators whose ranks
 * all share one node.
 *
 * Each process's shm segment ends with an area of FAST_NSLOTS slots; a
 * communicator gets one slot index, the same on every member (agreed when it
 * is created; the world has slot 0). A slot holds this rank's `done` counter
 * and two buffers, used by alternate calls. In call f a rank that contributes
 * data copies it into its buffer f%2 and then publishes f in the buffer's
 * sequence word; the ranks that need it wait for that word and read the data
 * straight from there, in the owner's segment; every rank then publishes f in
 * `done`. Before writing buffer f%2 again (call f+2) a rank waits until every
 * peer's `done` has reached f: nobody still reads it. So an 8-byte allreduce
 * moves one cache line each way and needs no message, no request and no lock.
 *
 * Sequence words carry the communicator's context id in their high half, so
 * what an earlier communicator left in a reused slot never passes for data.
 * Each buffer also carries the call's signature (coll_sig.h): a rank that
 * finds a peer's call differs from its own fails with CADRE_ERR_MISMATCH.
 *
 * Waiting spins for a while (yielding, a short while, when ranks outnumber
 * cores; hardly at all with CADRE_WAIT=sleep, p2p_busy.c),
 * then naps on the process's doorbell, which publishers ring; it watches the
 * peers for failure and gives up after CADRE_TIMEOUT seconds without
 * progress.
 */
#include <errno.h>
#include <sched.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_fast.h"
#include "coll_sig.h"
#include "coll_fast_impl.h"

/* ---- waiting ------------------------------------------------------------------- */
struct waiter {
    const char *fn;
    struct cadre_comm *comm;
    uint64_t sig;
    int32_t tag; /* this call's collective number on comm, less 1 */
    int spins;
    double nap, since;
    int rc; /* begin: a peer's message of this call differs */
    int stuck_said; /* warned of CADRE_STUCK_WARN */
};

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* One unsuccessful look at rank q's word: spin, yield or nap; fails when q
 * died or nothing happened for CADRE_TIMEOUT seconds. */
static int idle(struct coll_fast *F, struct waiter *w, int q, const char *what)
{
    struct cadre_engine *e = &cadre__eng;
    /* Ranks that outnumber the cores yield while it is brief, and nap as
     * soon as another process holds the core (cadre__yield_brief). */
    int limit = e->oversubscribed ? 64 : 20000;
    if (++w->spins < limit) {
        /* CADRE_WAIT=sleep: nap on the doorbell soon (p2p_busy.c). */
        if (!e->oversubscribed) {
            if (w->spins == CADRE_BUSY_ASK && cadre__wait_doze())
                w->spins = limit - 1;
            else
                relax();
        } else if (!cadre__yield_brief()) {
            w->spins = limit - 1;
        }
        return CADRE_SUCCESS;
    }
    double now = cadre__now();
    if (!w->since)
        w->since = now;
    /* Another rank found a mismatch; or a peer sent this call's tag a
     * message: it runs a scheduled collective where this rank runs one
     * from the slots, so the calls differ. */
    if (cadre__coll_any_poisoned())
        CADRE_CHECK(cadre__coll_poisoned(cadre__coll_ctx(w->comm), w->fn));
    uint64_t theirs = 0;
    int src = cadre__p2p_probe_coll(cadre__coll_ctx(w->comm), w->tag, &theirs);
    if (src >= 0 && theirs != w->sig) {
        cadre__coll_poison(w->comm, w->tag, src, theirs, w->sig);
        return cadre__sig_mismatch(w->fn, src, theirs, F->me, w->sig);
    }
    eng_lock();
    cadre__p2p_check_peers();
    int dead = e->peers[F->world[q]].state == PEER_DEAD;
    eng_unlock();
    if (dead) {
        /* Looking at the peers drained what they sent before they left: a
         * rank that found a mismatch tells before it finalizes, and that
         * news, not its leaving, is what this call failed of. */
        if (cadre__coll_any_poisoned())
            CADRE_CHECK(cadre__coll_poisoned(cadre__coll_ctx(w->comm), w->fn));
        eng_lock();
        cadre__coll_poison_peer_locked(w->comm, q);
        eng_unlock();
        return cadre__error(CADRE_ERR_PEER, "%s: rank %d (world rank %d) failed: %s", w->fn, q,
                            F->world[q], e->peers[F->world[q]].why);
    }
    cadre__state_stamp(now);
    if (now - w->since > e->timeout)
        return cadre__p2p_coll_timed_out(w->comm, w->fn, (uint32_t)w->tag + 1, q, what);
    if (e->stuck_warn > 0 && !w->stuck_said && now - w->since > e->stuck_warn) {
        w->stuck_said = 1;
        cadre__p2p_coll_stuck(w->comm, w->fn, (uint32_t)w->tag + 1, now - w->since);
    }
    /* One membarrier for the call's naps, not one per nap. */
    cadre__bell_series_nap(&F->napping);
    cadre__p2p_sleep(w->nap);
    if (w->nap < 10e-3)
        w->nap *= 2;
    w->spins -= 8;
    return CADRE_SUCCESS;
}

/* ---- one call --------------------------------------------------------------------- */
/* Starts call number f on comm (also taking a collective sequence number, so
 * that the tags of later scheduled collectives stay aligned on all ranks). */
static uint32_t begin(struct cadre_comm *c, struct coll_fast *F, struct waiter *w)
{
    w->comm = c;
    w->tag = cadre__coll_next_tag(c);
    F->cur_sig = w->sig;
    F->fn = w->fn;
    F->tag = w->tag;
    cadre__state_enter(w->fn, NULL, c->context_id, (uint32_t)w->tag + 1, -1, -1);
    w->rc = cadre__coll_sig_begin(c, w->tag, w->sig, w->fn);
    return ++F->seq;
}

/* Waits until every peer finished call f-2, so buffer f%2 is free. */
static int wait_free(struct coll_fast *F, uint32_t f, struct waiter *w)
{
    if (f <= 2)
        return CADRE_SUCCESS;
    for (int q = 0; q < F->n; q++) {
        while (F->seen_done[q] < f - 2 && q != F->me) {
            uint64_t d = atomic_load_explicit(&F->peer[q]->done, memory_order_acquire);
            if ((d & ~0xffffffffull) == F->ctx && (uint32_t)d >= f - 2) {
                F->seen_done[q] = (uint32_t)d;
                break;
            }
            CADRE_CHECK(idle(F, w, q, "finished the call before"));
        }
    }
    return CADRE_SUCCESS;
}

/* Publishes this rank's word of call f, its data (seq) or, in a split
 * allreduce, its send buffer's address (aseq), with the call's signature. */
static void announce(struct coll_fast *F, uint32_t f, uint64_t sig, int addr)
{
    struct fast_buf *b = &F->peer[F->me]->buf[f & 1];
    b->sig = sig;
    b->prev_sig = F->last_sig;
    atomic_store_explicit(addr ? &b->aseq : &b->seq, F->ctx | f, memory_order_release);
    for (int q = 0; q < F->n; q++)
        if (q != F->me)
            cadre__shm_wake(F->world[q]);
}

static void publish(struct coll_fast *F, uint32_t f, uint64_t sig, const void *data, size_t len)
{
    if (len)
        cadre__copy(F->peer[F->me]->buf[f & 1].data, data, len);
    announce(F, f, sig, 0);
}

/* A reduction's input of FAST_PIECES_MIN bytes or more is published in
 * pieces of FAST_PIECE: the word first, then each piece as it is in place
 * (fill), so that the ranks that combine the inputs read the first pieces,
 * from this core's cache, while the rest is copied. Whole, a 2-rank 64 KiB
 * reduce paid the copy into the slot and the root's pass over it one after
 * the other. */
#define FAST_PIECE ((size_t)16 << 10)
#define FAST_PIECES_MIN ((size_t)32 << 10)

static void publish_pieces(struct coll_fast *F, uint32_t f, uint64_t sig, const void *data,
                           size_t len)
{
    if (len < FAST_PIECES_MIN) {
        publish(F, f, sig, data, len);
        return;
    }
    struct fast_buf *b = &F->peer[F->me]->buf[f & 1];
    uint64_t key = (uint64_t)f << 32;
    atomic_store_explicit(&b->fill, key, memory_order_relaxed); /* seen with the word */
    announce(F, f, sig, 0);
    for (size_t off = 0, k = 1; off < len; off += FAST_PIECE, k++) {
        size_t m = len - off < FAST_PIECE ? len - off : FAST_PIECE;
        memcpy(b->data + off, (const char *)data + off, m);
        atomic_store_explicit(&b->fill, key | k, memory_order_release);
    }
    for (int q = 0; q < F->n; q++) /* for those that napped meanwhile */
        if (q != F->me)
            cadre__shm_wake(F->world[q]);
}

/* Waits until rank q's published input of call f (len bytes) holds its
 * first `upto` bytes. */
static int await_fill(struct coll_fast *F, uint32_t f, int q, size_t len, size_t upto,
                      struct waiter *w)
{
    if (len < FAST_PIECES_MIN)
        return CADRE_SUCCESS;
    struct fast_buf *b = &F->peer[q]->buf[f & 1];
    uint32_t want = (uint32_t)((upto + FAST_PIECE - 1) / FAST_PIECE);
    for (;;) {
        uint64_t v = atomic_load_explicit(&b->fill, memory_order_acquire);
        if ((uint32_t)(v >> 32) == f && (uint32_t)v >= want)
            return CADRE_SUCCESS;
        CADRE_CHECK(idle(F, w, q, "published its input"));
    }
}

/* Waits for rank q's word of call f: its data (seq) or, in a split
 * allreduce, its send buffer's address (aseq); checks that q made the same
 * call. A rank that published the other word runs a call of another kind,
 * and its signature says so at once. */
static int await_word(struct coll_fast *F, uint32_t f, int q, uint64_t sig, struct waiter *w,
                      int addr, struct fast_buf **out)
{
    struct fast_buf *b = &F->peer[q]->buf[f & 1];
    _Atomic uint64_t *want = addr ? &b->aseq : &b->seq, *other = addr ? &b->seq : &b->aseq;
    while (atomic_load_explicit(want, memory_order_acquire) != (F->ctx | f)) {
        if (atomic_load_explicit(other, memory_order_acquire) == (F->ctx | f) && b->sig != sig)
            break;
        CADRE_CHECK(idle(F, w, q, "joined it"));
    }
    if (b->sig != sig) {
        /* A rank whose call of this number went by messages (a scheduled
         * collective) has its next slot call here: its message, if one
         * came, names the call that differs. */
        uint64_t theirs = 0;
        cadre__p2p_progress(); /* it was sent before the word was published */
        int src = cadre__p2p_probe_coll(cadre__coll_ctx(w->comm), w->tag, &theirs);
        if (src >= 0 && theirs && theirs != sig) {
            cadre__coll_poison(w->comm, w->tag, src, theirs, sig);
            return cadre__sig_mismatch(w->fn, src, theirs, F->me, sig);
        }
        cadre__coll_poison(w->comm, w->tag, q, b->sig, sig);
        return cadre__sig_mismatch(w->fn, q, b->sig, F->me, sig);
    }
    if (b->prev_sig != F->last_sig) {
        /* The call before differed where nobody read the other's data
         * (two ranks both the root of a bcast): it surfaces now. */
        cadre__coll_poison(w->comm, w->tag, q, b->prev_sig, F->last_sig);
        return cadre__sig_mismatch(w->fn, q, b->prev_sig, F->me, F->last_sig);
    }
    *out = b;
    return CADRE_SUCCESS;
}

/* Rank q's data of call f, once published. */
static int fetch(struct coll_fast *F, uint32_t f, int q, uint64_t sig, struct waiter *w,
                 const unsigned char **data)
{
    struct fast_buf *b;
    CADRE_CHECK(await_word(F, f, q, sig, w, 0, &b));
    *data = b->data;
    return CADRE_SUCCESS;
}

void cadre__fast_note_messages(struct cadre_comm *c)
{
    struct coll_fast *F = c->fast;
    if (F)
        F->drain = 1;
}

static int end(struct coll_fast *F, struct cadre_comm *c, uint32_t f, int rc)
{
    if (F->drain) {
        /* After a scheduled collective, a peer whose call of that number
         * differed may have sent this rank a message that no receive took
         * (two roots of a scatter), and then published its word of this
         * call, which this rank has just read: the message is in the rings
         * now. Judged as it is drained (coll_poison.c), it fails this call
         * rather than the next one. */
        F->drain = 0;
        eng_lock();
        cadre__p2p_progress_locked();
        eng_unlock();
        if (rc == CADRE_SUCCESS && cadre__coll_any_poisoned())
            rc = cadre__coll_poisoned_by(cadre__coll_ctx(c), F->tag, F->fn);
    }
    cadre__bell_series_end(&F->napping);
    F->last_sig = F->cur_sig;
    atomic_store_explicit(&F->peer[F->me]->done, F->ctx | f, memory_order_release);
    cadre__state_leave();
    return rc;
}

#define WAITER(fn_) {.fn = (fn_), .nap = 50e-6, .sig = sig}

/* ---- the collectives ------------------------------------------------------------------ */
/* allreduce (root < 0: every rank gets the result) and reduce: every rank
 * publishes its input, the ranks that want the result combine all inputs in
 * rank order, so that every rank gets the same bits. */
static int reduce_common(struct cadre_comm *c, const char *fn, uint64_t sig, const void *sbuf,
                         void *rbuf, size_t count, cadre_datatype_t dt, cadre_op_t op, int root)
{
    struct coll_fast *F = c->fast;
    struct waiter w = WAITER(fn);
    uint32_t f = begin(c, F, &w);
    if (w.rc != CADRE_SUCCESS)
        return end(F, c, f, w.rc);
    size_t bytes = count * cadre_datatype_size(dt);
    int rc = wait_free(F, f, &w);
    if (rc != CADRE_SUCCESS)
        return end(F, c, f, rc);
    /* The root of a reduce reads its own input where it is, and nobody else
     * reads it: only its word is published, not its data (unless in place
     * at a root other than rank 0, whose input the result overwrites before
     * it is combined). */
    const unsigned char *own = F->peer[F->me]->buf[f & 1].data;
    if (root == F->me && !(sbuf == rbuf && F->me > 0)) {
        own = sbuf;
        announce(F, f, sig, 0);
    } else {
        publish_pieces(F, f, sig, sbuf, bytes);
    }
    if (root >= 0 && F->me != root)
        return end(F, c, f, CADRE_SUCCESS);
    cadre_op_t rop = op == CADRE_AVG ? CADRE_SUM : op;
    size_t es = cadre_datatype_size(dt);
    /* Every rank's input, checked before any is combined, then piece by
     * piece as the pieces arrive, each element in rank order. */
    for (int q = 0; q < F->n; q++) {
        const unsigned char *d;
        if (q != F->me && (rc = fetch(F, f, q, sig, &w, &d)) != CADRE_SUCCESS)
            return end(F, c, f, rc);
    }
    for (size_t off = 0; off < bytes; off += FAST_PIECE) {
        size_t m = bytes - off < FAST_PIECE ? bytes - off : FAST_PIECE, k = m / es;
        char *out = (char *)rbuf + off;
        const unsigned char *first = NULL;
        for (int q = 0; q < F->n; q++) {
            const unsigned char *d = q == F->me ? own : F->peer[q]->buf[f & 1].data;
            d += off;
            if (q != F->me && (rc = await_fill(F, f, q, bytes, off + m, &w)) != CADRE_SUCCESS)
                return end(F, c, f, rc);
            /* Ranks 0 and 1 in one pass over the output. */
            if (q == 0 && F->n > 1 && (const char *)d != out)
                first = d;
            else if (q == 1 && first)
                cadre__coll_reduce_to(out, first, d, k, dt, rop);
            else if (q > 0)
                cadre__coll_reduce(out, d, k, dt, rop);
            else if ((const char *)d != out)
                memcpy(out, d, m);
        }
    }
    if (op == CADRE_AVG)
        cadre__coll_scale(rbuf, count, dt, F->n);
    return end(F, c, f, CADRE_SUCCESS);
}

int cadre__fast_allreduce(struct cadre_comm *c, const char *fn, uint64_t sig, const void *sbuf,
                          void *rbuf, size_t count, cadre_datatype_t dt, cadre_op_t op)
{
    return reduce_common(c, fn, sig, sbuf, rbuf, count, dt, op, -1);
}

/* allreduce, split (three ranks or more; reduce: where forced, two or more,
 * the root alone copying the shares): a reduce-scatter that reads the
 * peers' send buffers with process_vm_readv, then an allgather through the
 * slots. In call f each rank publishes its send buffer's address (aseq);
 * rank r reduces share r of every rank's input into its own slot buffer
 * (scaled there for AVG) and publishes it (seq); every rank copies the n
 * shares into its output. Two waits on shared words and no message, and the
 * kernel only reads (a write into another process costs it a read of every
 * line first). A rank leaves once every share is published, that is once
 * nobody reads its send buffer any more (in place, share q of the output is
 * written only after rank q, its only reader, published); wait_free keeps
 * the slot buffer until the peers copied from it. One rank computes each
 * share, so every rank gets the same bits. */
#define FAST_SPLIT_CHUNK ((size_t)256 << 10)

/* Rank q's send buffer address in call f. */
static int fetch_addr(struct coll_fast *F, uint32_t f, int q, uint64_t sig, struct waiter *w,
                      uint64_t *addr)
{
    struct fast_buf *b;
    CADRE_CHECK(await_word(F, f, q, sig, w, 1, &b));
    *addr = b->addr;
    return CADRE_SUCCESS;
}

/* Whether rank q has left call f (its `done` word): before this rank
 * published its share, only a failed wait of q's can have made it leave,
 * after which its caller may change or free its send buffer. */
static int split_left(struct coll_fast *F, uint32_t f, int q, struct waiter *w)
{
    uint64_t d = atomic_load_explicit(&F->peer[q]->done, memory_order_acquire);
    if ((d & ~0xffffffffull) != F->ctx || (uint32_t)d < f)
        return 0;
    cadre__error(CADRE_ERR_PEER, "%s: rank %d left the call (a wait of its failed) while this "
                 "rank read its send buffer", w->fn, q);
    return 1;
}

/* n bytes at addr in rank q's process into local memory. */
static int split_read(struct coll_fast *F, uint32_t f, struct waiter *w, int q, void *dst,
                      uint64_t addr, size_t n)
{
    int err = cadre__cma(F->world[q], dst, addr, n, 0);
    if (!err)
        return CADRE_SUCCESS;
    if (err == EFAULT && split_left(F, f, q, w))
        return CADRE_ERR_PEER;
    eng_lock();
    int rc = cadre__cma_failed(w->comm, w->fn, q, err, n, 0);
    eng_unlock();
    return rc;
}

/* root < 0: the allreduce; else the reduce, where only the root copies the
 * shares into its output and the others wait for every share to be
 * published (nobody reads their send buffers any more) and leave. */
static int split_common(struct cadre_comm *c, const char *fn, uint64_t sig, const void *sbuf,
                        void *rbuf, size_t count, cadre_datatype_t dt, cadre_op_t op, int root)
{
    struct coll_fast *F = c->fast;
    struct waiter w = WAITER(fn);
    uint32_t f = begin(c, F, &w);
    if (w.rc != CADRE_SUCCESS)
        return end(F, c, f, w.rc);
    size_t es = cadre_datatype_size(dt), lo, hi;
    cadre_op_t rop = op == CADRE_AVG ? CADRE_SUM : op;
    if ((!F->tmp && !(F->tmp = malloc(FAST_SPLIT_CHUNK))) ||
        (!F->addr && !(F->addr = calloc((size_t)F->n, sizeof *F->addr))))
        return end(F, c, f, cadre__error(CADRE_ERR_NOMEM, "%s: no memory", fn));
    int rc = wait_free(F, f, &w);
    if (rc != CADRE_SUCCESS)
        return end(F, c, f, rc);
    struct fast_buf *mine = &F->peer[F->me]->buf[f & 1];
    mine->addr = (uint64_t)(uintptr_t)sbuf;
    announce(F, f, sig, 1);
    for (int q = 0; q < F->n; q++)
        if (q != F->me && (rc = fetch_addr(F, f, q, sig, &w, &F->addr[q])) != CADRE_SUCCESS)
            return end(F, c, f, rc);

    /* This rank's share: the peers' parts in rank order, then its own. */
    cadre__share(count, es, F->n, F->me, &lo, &hi);
    size_t step = FAST_SPLIT_CHUNK / es;
    for (size_t off = lo; off < hi; off += step) {
        size_t m = hi - off < step ? hi - off : step, bytes = m * es;
        unsigned char *acc = mine->data + (off - lo) * es;
        int first = 1;
        for (int q = 0; q < F->n; q++) {
            if (q == F->me)
                continue;
            rc = split_read(F, f, &w, q, first ? acc : F->tmp, F->addr[q] + off * es, bytes);
            if (rc != CADRE_SUCCESS)
                return end(F, c, f, rc);
            if (!first)
                cadre__coll_reduce(acc, F->tmp, m, dt, rop);
            first = 0;
        }
        cadre__coll_reduce(acc, (const char *)sbuf + off * es, m, dt, rop);
        if (op == CADRE_AVG)
            cadre__coll_scale(acc, m, dt, F->n);
    }
    /* Every peer still in the call: no buffer read changed under the reads. */
    for (int q = 0; q < F->n; q++)
        if (q != F->me && split_left(F, f, q, &w))
            return end(F, c, f, CADRE_ERR_PEER);
    publish(F, f, sig, NULL, 0);

    for (int q = 0; q < F->n; q++) {
        const unsigned char *d = mine->data;
        if (q != F->me && (rc = fetch(F, f, q, sig, &w, &d)) != CADRE_SUCCESS)
            return end(F, c, f, rc);
        cadre__share(count, es, F->n, q, &lo, &hi);
        if (hi > lo && (root < 0 || F->me == root))
            cadre__copy((char *)rbuf + lo * es, d, (hi - lo) * es);
    }
    return end(F, c, f, CADRE_SUCCESS);
}

int cadre__fast_allreduce_split(struct cadre_comm *c, const char *fn, uint64_t sig,
                                const void *sbuf, void *rbuf, size_t count, cadre_datatype_t dt,
                                cadre_op_t op)
{
    return split_common(c, fn, sig, sbuf, rbuf, count, dt, op, -1);
}

int cadre__fast_reduce_split(struct cadre_comm *c, const char *fn, uint64_t sig,
                             const void *sbuf, void *rbuf, size_t count, cadre_datatype_t dt,
                             cadre_op_t op, int root)
{
    return split_common(c, fn, sig, sbuf, rbuf, count, dt, op, root);
}

int cadre__fast_reduce(struct cadre_comm *c, const char *fn, uint64_t sig, const void *sbuf,
                       void *rbuf, size_t count, cadre_datatype_t dt, cadre_op_t op, int root)
{
    return reduce_common(c, fn, sig, sbuf, rbuf, count, dt, op, root);
}

int cadre__fast_bcast(struct cadre_comm *c, const char *fn, uint64_t sig, void *buf, size_t bytes,
                      int root)
{
    struct coll_fast *F = c->fast;
    struct waiter w = WAITER(fn);
    uint32_t f = begin(c, F, &w);
    if (w.rc != CADRE_SUCCESS)
        return end(F, c, f, w.rc);
    int rc = CADRE_SUCCESS;
    if (F->me == root) {
        if ((rc = wait_free(F, f, &w)) == CADRE_SUCCESS)
            publish(F, f, sig, buf, bytes);
        return end(F, c, f, rc);
    }
    const unsigned char *d;
    if ((rc = fetch(F, f, root, sig, &w, &d)) == CADRE_SUCCESS && bytes)
        cadre__copy(buf, d, bytes);
    return end(F, c, f, rc);
}

int cadre__fast_barrier(struct cadre_comm *c, const char *fn, uint64_t sig)
{
    struct coll_fast *F = c->fast;
    struct waiter w = WAITER(fn);
    uint32_t f = begin(c, F, &w);
    if (w.rc != CADRE_SUCCESS)
        return end(F, c, f, w.rc);
    int rc = wait_free(F, f, &w);
    if (rc != CADRE_SUCCESS)
        return end(F, c, f, rc);
    publish(F, f, sig, NULL, 0);
    const unsigned char *d;
    for (int q = 0; q < F->n && rc == CADRE_SUCCESS; q++)
        if (q != F->me)
            rc = fetch(F, f, q, sig, &w, &d);
    return end(F, c, f, rc);
}

/* The writer of a held exchange (cadre__fast_exchange_hold) waits until
 * every peer finished call f. A peer that published a word of its own in
 * call f runs another call (two roots of a scatter, each waiting for the
 * other to finish): the signatures say which. */
static int wait_readers(struct coll_fast *F, uint32_t f, uint64_t sig, struct waiter *w)
{
    for (int q = 0; q < F->n; q++) {
        struct fast_buf *b = &F->peer[q]->buf[f & 1];
        while (F->seen_done[q] < f && q != F->me) {
            uint64_t d = atomic_load_explicit(&F->peer[q]->done, memory_order_acquire);
            if ((d & ~0xffffffffull) == F->ctx && (uint32_t)d >= f) {
                F->seen_done[q] = (uint32_t)d;
                break;
            }
            if ((atomic_load_explicit(&b->seq, memory_order_acquire) == (F->ctx | f) ||
                 atomic_load_explicit(&b->aseq, memory_order_acquire) == (F->ctx | f)) &&
                b->sig != sig) {
                cadre__coll_poison(w->comm, w->tag, q, b->sig, sig);
                return cadre__sig_mismatch(w->fn, q, b->sig, F->me, sig);
            }
            CADRE_CHECK(idle(F, w, q, "read what this rank published"));
        }
    }
    return CADRE_SUCCESS;
}

/* Every rank publishes `len` bytes from `in` (or, with `fill`, what fill
 * writes into its slot buffer); then for every rank q whose part this rank
 * needs, take(q, data of q) runs (rank order). *tag: the call's collective
 * number, for messages of the same call (coll_fast_v.c). */
static int exchange(struct cadre_comm *c, const char *fn, uint64_t sig, const void *in, size_t len,
                    void (*fill)(void *arg, unsigned char *dst), int reader, int only_from,
                    void (*take)(void *arg, int q, const unsigned char *data), void *arg,
                    int32_t *tag, int hold)
{
    struct coll_fast *F = c->fast;
    struct waiter w = WAITER(fn);
    uint32_t f = begin(c, F, &w);
    if (tag)
        *tag = w.tag;
    if (w.rc != CADRE_SUCCESS)
        return end(F, c, f, w.rc);
    int rc = CADRE_SUCCESS;
    if (only_from < 0 || only_from == F->me) {
        if ((rc = wait_free(F, f, &w)) != CADRE_SUCCESS)
            return end(F, c, f, rc);
        if (fill) {
            fill(arg, F->peer[F->me]->buf[f & 1].data);
            announce(F, f, sig, 0);
        } else {
            publish(F, f, sig, in, len);
        }
    }
    if (!reader)
        return end(F, c, f, CADRE_SUCCESS);
    for (int q = 0; q < F->n; q++) {
        if (only_from >= 0 && q != only_from)
            continue;
        const unsigned char *d = F->peer[F->me]->buf[f & 1].data;
        if (q != F->me && (rc = fetch(F, f, q, sig, &w, &d)) != CADRE_SUCCESS)
            return end(F, c, f, rc);
        take(arg, q, d);
    }
    /* hold: what the writer published names its own memory, which the
     * readers copy during the call. */
    if (hold && only_from == F->me)
        rc = wait_readers(F, f, sig, &w);
    return end(F, c, f, rc);
}

/* The pattern of allgather(v), gather, scatter, reduce_scatter and alltoall. */
int cadre__fast_exchange(struct cadre_comm *c, const char *fn, uint64_t sig, const void *in,
                         size_t len, int reader, int only_from,
                         void (*take)(void *arg, int q, const unsigned char *data), void *arg)
{
    return exchange(c, fn, sig, in, len, NULL, reader, only_from, take, arg, NULL, 0);
}

int cadre__fast_exchange_fill(struct cadre_comm *c, const char *fn, uint64_t sig,
                              void (*fill)(void *arg, unsigned char *dst), int reader,
                              int only_from,
                              void (*take)(void *arg, int q, const unsigned char *data),
                              void *arg, int32_t *tag)
{
    return exchange(c, fn, sig, NULL, 0, fill, reader, only_from, take, arg, tag, 0);
}

int cadre__fast_exchange_hold(struct cadre_comm *c, const char *fn, uint64_t sig,
                              void (*fill)(void *arg, unsigned char *dst), int from,
                              void (*take)(void *arg, int q, const unsigned char *data),
                              void *arg)
{
    return exchange(c, fn, sig, NULL, 0, fill, 1, from, take, arg, NULL, 1);
}

int cadre__fast_left(struct cadre_comm *c, int q)
{
    struct coll_fast *F = c->fast;
    uint64_t d = atomic_load_explicit(&F->peer[q]->done, memory_order_acquire);
    return (d & ~0xffffffffull) == F->ctx && (uint32_t)d >= F->seq;
}
