/*
 * The reductions through the shared-memory slots (coll_fast.c, which
 * describes the slots and the steps of a call): allreduce and reduce, their
 * inputs published in pieces, and the split allreduce and reduce, which read
 * the peers' send buffers with process_vm_readv.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "coll_fast.h"
#include "coll_fast_impl.h"

/* ---- publishing in pieces -------------------------------------------------------------- */
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
        cadre__fast_publish(F, f, sig, data, len);
        return;
    }
    struct fast_buf *b = &F->peer[F->me]->buf[f & 1];
    uint64_t key = (uint64_t)f << 32;
    atomic_store_explicit(&b->fill, key, memory_order_relaxed); /* seen with the word */
    cadre__fast_announce(F, f, sig, 0);
    for (size_t off = 0, k = 1; off < len; off += FAST_PIECE, k++) {
        size_t m = len - off < FAST_PIECE ? len - off : FAST_PIECE;
        memcpy(b->data + off, (const char *)data + off, m);
        atomic_store_explicit(&b->fill, key | k, memory_order_release);
    }
    cadre__fast_wake_peers(F); /* for those that napped meanwhile */
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
        CADRE_CHECK(cadre__fast_idle(F, w, q, "published its input"));
    }
}

/* ---- the reductions ------------------------------------------------------------------ */
/* allreduce (root < 0: every rank gets the result) and reduce: every rank
 * publishes its input, the ranks that want the result combine all inputs in
 * rank order, so that every rank gets the same bits. */
static int reduce_common(struct cadre_comm *c, const char *fn, uint64_t sig, const void *sbuf,
                         void *rbuf, size_t count, cadre_datatype_t dt, cadre_op_t op, int root)
{
    struct coll_fast *F = c->fast;
    struct waiter w = WAITER(fn);
    uint32_t f = cadre__fast_begin(c, F, &w);
    if (w.rc != CADRE_SUCCESS)
        return cadre__fast_end(F, c, f, w.rc);
    size_t es = cadre_datatype_size(dt), bytes = count * es;
    int rc = cadre__fast_wait_free(F, f, &w);
    if (rc != CADRE_SUCCESS)
        return cadre__fast_end(F, c, f, rc);
    /* The root of a reduce reads its own input where it is, and nobody else
     * reads it: only its word is published, not its data (unless in place
     * at a root other than rank 0, whose input the result overwrites before
     * it is combined). */
    const unsigned char *own = F->peer[F->me]->buf[f & 1].data;
    if (root == F->me && !(sbuf == rbuf && F->me > 0)) {
        own = sbuf;
        cadre__fast_announce(F, f, sig, 0);
    } else {
        publish_pieces(F, f, sig, sbuf, bytes);
    }
    if (root >= 0 && F->me != root)
        return cadre__fast_end(F, c, f, CADRE_SUCCESS);
    cadre_op_t rop = op == CADRE_AVG ? CADRE_SUM : op;
    if (bytes < FAST_PIECES_MIN) {
        /* Whole: each input as it is there, in rank order. */
        for (int q = 0; q < F->n; q++) {
            const unsigned char *d = own;
            if (q != F->me && (rc = cadre__fast_fetch(F, f, q, sig, &w, &d)) != CADRE_SUCCESS)
                return cadre__fast_end(F, c, f, rc);
            if (q > 0)
                cadre__coll_reduce(rbuf, d, count, dt, rop);
            else if (bytes && (const void *)d != rbuf)
                cadre__copy(rbuf, d, bytes);
        }
        if (op == CADRE_AVG)
            cadre__coll_scale(rbuf, count, dt, F->n);
        return cadre__fast_end(F, c, f, CADRE_SUCCESS);
    }
    /* Every rank's input, checked before any is combined, then piece by
     * piece as the pieces arrive, each element in rank order. */
    for (int q = 0; q < F->n; q++) {
        const unsigned char *d;
        if (q != F->me && (rc = cadre__fast_fetch(F, f, q, sig, &w, &d)) != CADRE_SUCCESS)
            return cadre__fast_end(F, c, f, rc);
    }
    for (size_t off = 0; off < bytes; off += FAST_PIECE) {
        size_t m = bytes - off < FAST_PIECE ? bytes - off : FAST_PIECE, k = m / es;
        char *out = (char *)rbuf + off;
        const unsigned char *first = NULL;
        for (int q = 0; q < F->n; q++) {
            const unsigned char *d = q == F->me ? own : F->peer[q]->buf[f & 1].data;
            d += off;
            if (q != F->me && (rc = await_fill(F, f, q, bytes, off + m, &w)) != CADRE_SUCCESS)
                return cadre__fast_end(F, c, f, rc);
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
    return cadre__fast_end(F, c, f, CADRE_SUCCESS);
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
 * written only after rank q, its only reader, published);
 * cadre__fast_wait_free keeps the slot buffer until the peers copied from
 * it. One rank computes each share, so every rank gets the same bits. */
#define FAST_SPLIT_CHUNK ((size_t)256 << 10)

/* Rank q's send buffer address in call f. */
static int fetch_addr(struct coll_fast *F, uint32_t f, int q, uint64_t sig, struct waiter *w,
                      uint64_t *addr)
{
    struct fast_buf *b;
    CADRE_CHECK(cadre__fast_await_word(F, f, q, sig, w, 1, &b));
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
    uint32_t f = cadre__fast_begin(c, F, &w);
    if (w.rc != CADRE_SUCCESS)
        return cadre__fast_end(F, c, f, w.rc);
    size_t es = cadre_datatype_size(dt), lo, hi;
    cadre_op_t rop = op == CADRE_AVG ? CADRE_SUM : op;
    if ((!F->tmp && !(F->tmp = malloc(FAST_SPLIT_CHUNK))) ||
        (!F->addr && !(F->addr = calloc((size_t)F->n, sizeof *F->addr))))
        return cadre__fast_end(F, c, f, cadre__error(CADRE_ERR_NOMEM, "%s: no memory", fn));
    int rc = cadre__fast_wait_free(F, f, &w);
    if (rc != CADRE_SUCCESS)
        return cadre__fast_end(F, c, f, rc);
    struct fast_buf *mine = &F->peer[F->me]->buf[f & 1];
    mine->addr = (uint64_t)(uintptr_t)sbuf;
    cadre__fast_announce(F, f, sig, 1);
    for (int q = 0; q < F->n; q++)
        if (q != F->me && (rc = fetch_addr(F, f, q, sig, &w, &F->addr[q])) != CADRE_SUCCESS)
            return cadre__fast_end(F, c, f, rc);

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
                return cadre__fast_end(F, c, f, rc);
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
            return cadre__fast_end(F, c, f, CADRE_ERR_PEER);
    cadre__fast_publish(F, f, sig, NULL, 0);

    for (int q = 0; q < F->n; q++) {
        const unsigned char *d = mine->data;
        if (q != F->me && (rc = cadre__fast_fetch(F, f, q, sig, &w, &d)) != CADRE_SUCCESS)
            return cadre__fast_end(F, c, f, rc);
        cadre__share(count, es, F->n, q, &lo, &hi);
        if (hi > lo && (root < 0 || F->me == root))
            cadre__copy((char *)rbuf + lo * es, d, (hi - lo) * es);
    }
    return cadre__fast_end(F, c, f, CADRE_SUCCESS);
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
