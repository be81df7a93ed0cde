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
 *
 * Here: the steps of one call (declared in coll_fast_impl.h), bcast, barrier
 * and the exchanges. The reductions (allreduce and reduce, and their split
 * variants) are in coll_fast_reduce.c.
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
static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* One unsuccessful look at rank q's word: spin, yield or nap; fails when q
 * died or nothing happened for CADRE_TIMEOUT seconds. */
int cadre__fast_idle(struct coll_fast *F, struct waiter *w, int q, const char *what)
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
uint32_t cadre__fast_begin(struct cadre_comm *c, struct coll_fast *F, struct waiter *w)
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
int cadre__fast_wait_free(struct coll_fast *F, uint32_t f, struct waiter *w)
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
            CADRE_CHECK(cadre__fast_idle(F, w, q, "finished the call before"));
        }
    }
    return CADRE_SUCCESS;
}

/* Publishes this rank's word of call f, its data (seq) or, in a split
 * allreduce, its send buffer's address (aseq), with the call's signature. */
void cadre__fast_announce(struct coll_fast *F, uint32_t f, uint64_t sig, int addr)
{
    struct fast_buf *b = &F->peer[F->me]->buf[f & 1];
    b->sig = sig;
    b->prev_sig = F->last_sig;
    atomic_store_explicit(addr ? &b->aseq : &b->seq, F->ctx | f, memory_order_release);
    cadre__fast_wake_peers(F);
}

void cadre__fast_wake_peers(struct coll_fast *F)
{
    for (int q = 0; q < F->n; q++)
        if (q != F->me)
            cadre__shm_wake(F->world[q]);
}

/* Waits for rank q's word of call f: its data (seq) or, in a split
 * allreduce, its send buffer's address (aseq); checks that q made the same
 * call. A rank that published the other word runs a call of another kind,
 * and its signature says so at once. */
int cadre__fast_await_word(struct coll_fast *F, uint32_t f, int q, uint64_t sig,
                           struct waiter *w, int addr, struct fast_buf **out)
{
    struct fast_buf *b = &F->peer[q]->buf[f & 1];
    _Atomic uint64_t *want = addr ? &b->aseq : &b->seq, *other = addr ? &b->seq : &b->aseq;
    while (atomic_load_explicit(want, memory_order_acquire) != (F->ctx | f)) {
        if (atomic_load_explicit(other, memory_order_acquire) == (F->ctx | f) && b->sig != sig)
            break;
        CADRE_CHECK(cadre__fast_idle(F, w, q, "joined it"));
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

void cadre__fast_note_messages(struct cadre_comm *c)
{
    struct coll_fast *F = c->fast;
    if (F)
        F->drain = 1;
}

int cadre__fast_end(struct coll_fast *F, struct cadre_comm *c, uint32_t f, int rc)
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

/* ---- the collectives ------------------------------------------------------------------ */

int cadre__fast_bcast(struct cadre_comm *c, const char *fn, uint64_t sig, void *buf, size_t bytes,
                      int root)
{
    struct coll_fast *F = c->fast;
    struct waiter w = WAITER(fn);
    uint32_t f = cadre__fast_begin(c, F, &w);
    if (w.rc != CADRE_SUCCESS)
        return cadre__fast_end(F, c, f, w.rc);
    int rc = CADRE_SUCCESS;
    if (F->me == root) {
        if ((rc = cadre__fast_wait_free(F, f, &w)) == CADRE_SUCCESS)
            cadre__fast_publish(F, f, sig, buf, bytes);
        return cadre__fast_end(F, c, f, rc);
    }
    const unsigned char *d;
    if ((rc = cadre__fast_fetch(F, f, root, sig, &w, &d)) == CADRE_SUCCESS && bytes)
        cadre__copy(buf, d, bytes);
    return cadre__fast_end(F, c, f, rc);
}

int cadre__fast_barrier(struct cadre_comm *c, const char *fn, uint64_t sig)
{
    struct coll_fast *F = c->fast;
    struct waiter w = WAITER(fn);
    uint32_t f = cadre__fast_begin(c, F, &w);
    if (w.rc != CADRE_SUCCESS)
        return cadre__fast_end(F, c, f, w.rc);
    int rc = cadre__fast_wait_free(F, f, &w);
    if (rc != CADRE_SUCCESS)
        return cadre__fast_end(F, c, f, rc);
    cadre__fast_publish(F, f, sig, NULL, 0);
    const unsigned char *d;
    for (int q = 0; q < F->n && rc == CADRE_SUCCESS; q++)
        if (q != F->me)
            rc = cadre__fast_fetch(F, f, q, sig, &w, &d);
    return cadre__fast_end(F, c, f, rc);
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
            CADRE_CHECK(cadre__fast_idle(F, w, q, "read what this rank published"));
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
    uint32_t f = cadre__fast_begin(c, F, &w);
    if (tag)
        *tag = w.tag;
    if (w.rc != CADRE_SUCCESS)
        return cadre__fast_end(F, c, f, w.rc);
    int rc = CADRE_SUCCESS;
    if (only_from < 0 || only_from == F->me) {
        if ((rc = cadre__fast_wait_free(F, f, &w)) != CADRE_SUCCESS)
            return cadre__fast_end(F, c, f, rc);
        if (fill) {
            fill(arg, F->peer[F->me]->buf[f & 1].data);
            cadre__fast_announce(F, f, sig, 0);
        } else {
            cadre__fast_publish(F, f, sig, in, len);
        }
    }
    if (!reader)
        return cadre__fast_end(F, c, f, CADRE_SUCCESS);
    for (int q = 0; q < F->n; q++) {
        if (only_from >= 0 && q != only_from)
            continue;
        const unsigned char *d = F->peer[F->me]->buf[f & 1].data;
        if (q != F->me && (rc = cadre__fast_fetch(F, f, q, sig, &w, &d)) != CADRE_SUCCESS)
            return cadre__fast_end(F, c, f, rc);
        take(arg, q, d);
    }
    /* hold: what the writer published names its own memory, which the
     * readers copy during the call. */
    if (hold && only_from == F->me)
        rc = wait_readers(F, f, sig, &w);
    return cadre__fast_end(F, c, f, rc);
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
