/* The direct scatter(v) (the other direct algorithms: coll_direct.c): each
 * rank reads its block from the root's send buffer with one
 * process_vm_readv; the root copies its own (nothing in place).
 *
 * A rooted call needs less than build()'s three rounds, where every rank
 * sends every other its addresses and an empty message: only the root's
 * buffer is read, so only the root tells each rank where its block lies
 * and how long it is, and only the root must stay until every reader is
 * done: each rank sends it an empty message once it has read, and leaves.
 * Two messages per rank besides the root, where build() sends 2(n-1) from
 * every rank. The root opens its window (coll_direct_window.c) before it
 * sends the addresses, so that a reader learns when the root left the call
 * while it read (cadre__direct_peers_stayed); nobody writes into a peer. */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "coll_direct.h"

static int scatter_read(struct coll_sched *s, const struct coll_step *st)
{
    struct direct *d = st->arg;
    int root = d->root;
    const struct direct_addr *a = &d->peer[root];
    size_t want = d->count * s->elsize;
    if (a->r != want) {
        /* As a receive of another length does, in its words
         * (coll_sched_run.c): the call runs to its end, the root gets this
         * rank's empty message and is not left waiting, then this rank's
         * call fails. */
        if (!s->count_error) {
            s->count_error = CADRE_ERR_MISMATCH;
            if (a->r > want)
                snprintf(s->count_msg, sizeof s->count_msg,
                         "%s: rank %d sent more data than this rank expects (do the ranks "
                         "agree on count and datatype?)",
                         s->op_name, root);
            else
                snprintf(s->count_msg, sizeof s->count_msg,
                         "%s: rank %d sent %llu bytes where this rank expects %zu (do the ranks "
                         "agree on count and datatype?)",
                         s->op_name, root, (unsigned long long)a->r, want);
        }
        return CADRE_SUCCESS;
    }
    if (want)
        CADRE_CHECK(cadre__direct_cma(s, d, root, d->rbuf, a->s, want, 0));
    return cadre__direct_peers_stayed(s, d);
}

int cadre__algo_scatterv_direct(struct coll_sched *s, const void *sbuf, const size_t *counts,
                                const size_t *displs, void *rbuf, size_t recvcount, int root)
{
    int n = s->comm->size, me = s->comm->rank;
    size_t es = s->elsize;
    struct direct *d = cadre__direct_new(s);
    if (!d)
        return CADRE_ERR_NOMEM;
    /* Every rank's flags 0 but the root's: cadre__direct_peers_stayed
     * looks at the root only. */
    d->peer = cadre__sched_alloc(s, (size_t)n * sizeof *d->peer);
    if (!d->peer)
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", s->op_name);
    memset(d->peer, 0, (size_t)n * sizeof *d->peer);
    d->root = root;
    d->rbuf = rbuf;
    d->count = recvcount;
    if (me != root) {
        CADRE_CHECK(cadre__sched_recv(s, root, &d->peer[root], sizeof *d->peer));
        CADRE_CHECK(cadre__sched_barrier(s));
        CADRE_CHECK(cadre__sched_call(s, scatter_read, d));
        CADRE_CHECK(cadre__sched_barrier(s));
        CADRE_CHECK(cadre__sched_send(s, root, NULL, 0));
        return cadre__sched_barrier(s);
    }
    uint64_t flags = cadre__direct_enter(s);
    const char *sb = sbuf;
    /* The messages live as long as the schedule: d->peer serves, entry q
     * for rank q's block. */
    for (int i = 1; i < n; i++) {
        int q = (me + i) % n;
        d->peer[q].s = (uint64_t)(uintptr_t)(sb + displs[q] * es);
        d->peer[q].r = (uint64_t)(counts[q] * es);
        d->peer[q].busy = flags;
        CADRE_CHECK(cadre__sched_send(s, q, &d->peer[q], sizeof *d->peer));
    }
    /* Its own block while the others read theirs. */
    const char *own = sb + displs[me] * es;
    if (counts[me] && (const char *)rbuf != own)
        CADRE_CHECK(cadre__sched_copy(s, rbuf, own, counts[me] * es));
    CADRE_CHECK(cadre__sched_barrier(s));
    for (int i = 1; i < n; i++)
        CADRE_CHECK(cadre__sched_recv(s, (me + i) % n, NULL, 0));
    return cadre__sched_barrier(s);
}

/* ---- blocking calls: through the shared-memory slots ------------------------------- */
/* A blocking call on a communicator with slots needs no message at all:
 * the root publishes in its slot, for every rank, its block's address and
 * length (16 bytes a rank), each rank reads its block with one
 * process_vm_readv, and the root returns once every rank has finished
 * the call (cadre__fast_exchange_hold), as the split allreduce does
 * (coll_fast.c). Its signature carries its own number
 * (SCATTER_DIRECT_SLOTS_CODE, coll_select.h), so that a rank that runs it
 * and one that runs the plain slots or the schedule above find that they
 * differ. */
struct slot_scatter {
    struct cadre_comm *comm;
    const char *fn;
    const char *sb;
    const size_t *counts, *displs; /* the root's */
    char *rbuf;
    size_t want, es;
    int me, n, rc;
};

static void slot_fill(void *arg, unsigned char *dst)
{
    struct slot_scatter *t = arg;
    for (int q = 0; q < t->n; q++) {
        uint64_t e[2] = {(uint64_t)(uintptr_t)(t->sb + t->displs[q] * t->es),
                         (uint64_t)(t->counts[q] * t->es)};
        memcpy(dst + (size_t)q * sizeof e, e, sizeof e);
    }
}

static void slot_take(void *arg, int root, const unsigned char *d)
{
    struct slot_scatter *t = arg;
    if (root == t->me) {
        const char *own = t->sb + t->displs[root] * t->es;
        if (t->want && t->rbuf != own)
            cadre__copy_out(t->rbuf, own, t->want, t->want);
        return;
    }
    uint64_t e[2];
    memcpy(e, d + (size_t)t->me * sizeof e, sizeof e);
    if (e[1] != t->want) {
        t->rc = cadre__error(CADRE_ERR_MISMATCH, "%s: rank %d sends %llu elements to rank %d, "
                             "which expects %zu from it (do the ranks agree on the counts?)",
                             t->fn, root, (unsigned long long)(e[1] / t->es), t->me,
                             t->want / t->es);
        return;
    }
    if (!t->want)
        return;
    int err = cadre__cma(cadre__world_rank(t->comm, root), t->rbuf, e[0], t->want, 0);
    atomic_thread_fence(memory_order_seq_cst); /* the read before the look */
    if (cadre__fast_left(t->comm, root)) {
        /* A wait of the root's failed: its caller may have changed or freed
         * the buffer while this rank read it. Where it found the calls
         * differ (two roots), it told before it left: that is the error. */
        eng_lock();
        cadre__p2p_progress_locked();
        eng_unlock();
        if (cadre__coll_any_poisoned() &&
            (t->rc = cadre__coll_poisoned(cadre__coll_ctx(t->comm), t->fn)) != CADRE_SUCCESS)
            return;
        t->rc = cadre__error(CADRE_ERR_PEER, "%s: rank %d (the root) left the call while this "
                             "rank read its block (its call failed); the block is not valid",
                             t->fn, root);
    } else if (err) {
        eng_lock();
        t->rc = cadre__cma_failed(t->comm, t->fn, root, err, t->want, 0);
        eng_unlock();
    }
}

int cadre__fast_scatterv_direct(struct cadre_comm *c, const char *fn, uint64_t sig,
                                const void *sbuf, const size_t *counts, const size_t *displs,
                                void *rbuf, size_t recvcount, size_t es, int root)
{
    struct slot_scatter t = {.comm = c, .fn = fn, .sb = sbuf, .counts = counts,
                             .displs = displs, .rbuf = rbuf, .want = recvcount * es, .es = es,
                             .me = c->rank, .n = c->size};
    int rc = cadre__fast_exchange_hold(c, fn, sig, slot_fill, root, slot_take, &t);
    return rc != CADRE_SUCCESS ? rc : t.rc;
}
