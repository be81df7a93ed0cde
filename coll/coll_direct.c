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
 *
 * reduce: the same slices, each written into the root's output only (the
 * root's own with a local copy).
 *
 * A rank writes into a peer only while the peer is in the call, through
 * the windows of coll_direct_window.c; a call that overlaps another direct
 * call in its process has none, and takes variants that write into nobody.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sched.h>

#include "coll_direct.h"


int cadre__direct_usable(const struct cadre_comm *c)
{
    if (c->size < 2 || !cadre__eng.peers)
        return 0;
    for (int i = 0; i < c->size; i++) {
        if (i == c->rank)
            continue;
        const struct cadre_peer *p = &cadre__eng.peers[cadre__world_rank(c, i)];
        if (p->tp != &cadre__p2p_shm || p->pid <= 0)
            return 0;
    }
    return 1;
}

int cadre__cma_failed(struct cadre_comm *c, const char *fn, int rank, int err, size_t n, int write)
{
    int w = cadre__world_rank(c, rank);
    if (err == ESRCH) {
        cadre__coll_poison_peer_locked(c, rank);
        return cadre__error(CADRE_ERR_PEER, "%s: rank %d (world rank %d, pid %d) is gone", fn, rank,
                            w, (int)cadre__eng.peers[w].pid);
    }
    return cadre__error(CADRE_ERR_INTERNAL, "%s: process_vm_%s of %zu bytes at rank %d: %s", fn,
                        write ? "writev" : "readv", n, rank,
                        err == EIO ? "no progress" : strerror(err));
}

int cadre__direct_cma(struct coll_sched *s, const struct direct *d, int rank, void *local,
                      uint64_t remote, size_t n, int write)
{
    int err = cadre__cma(cadre__world_rank(s->comm, rank), local, remote, n, write);
    if (!err)
        return CADRE_SUCCESS;
    /* A peer that left the call (a wait of its failed) may have freed the
     * buffer being read: its failure, not this library's. */
    if (err == EFAULT && d && cadre__direct_peer_left(s, d, rank))
        return cadre__error(CADRE_ERR_PEER, "%s: rank %d left the call while this rank read its "
                            "buffers (its call failed) and unmapped them; this call's result is "
                            "not valid", s->op_name, rank);
    return cadre__cma_failed(s->comm, s->op_name, rank, err, n, write);
}

static unsigned char *scratch;

int cadre__direct_scratch(struct coll_sched *s, unsigned char **acc, unsigned char **tmp)
{
    if (!scratch && posix_memalign((void **)&scratch, 4096, 2 * DIRECT_CHUNK))
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", s->op_name), scratch = NULL,
               CADRE_ERR_NOMEM;
    *acc = scratch;
    *tmp = scratch + DIRECT_CHUNK;
    return CADRE_SUCCESS;
}

/* Reduces m elements at byte offset sboff of every rank's send buffer into
 * acc. Ranked: in rank order (rank 0's op rank 1's ...), the same bits
 * whichever rank computes it; otherwise the peers in rank order and this
 * rank's own last, which never copies its own (one rank computes each
 * element there). */
static int reduce_chunk(struct coll_sched *s, struct direct *d, size_t sboff, size_t m,
                        unsigned char *acc, unsigned char *tmp, int ranked)
{
    int n = s->comm->size, me = s->comm->rank;
    size_t bytes = m * s->elsize;
    for (int i = 0; i < n; i++) {
        int q = ranked || i < me ? i : i == n - 1 ? me : i + 1;
        const void *src = (const char *)d->sbuf + sboff;
        if (q != me) {
            unsigned char *dst = i ? tmp : acc;
            CADRE_CHECK(cadre__direct_cma(s, d, q, dst, d->peer[q].s + sboff, bytes, 0));
            src = dst;
        }
        if (i)
            cadre__coll_reduce(acc, src, m, s->dt, s->op);
        else if (src != acc)
            memcpy(acc, src, bytes);
    }
    return CADRE_SUCCESS;
}

/* The allreduce where some rank's window is closed (it overlaps another
 * direct call in its process: build): each rank reads every peer's input
 * and computes the whole result itself, writing into nobody. In place the
 * result goes to a scratch vector, copied into the buffer after round 3
 * (allreduce_finish), once no peer reads the input any more. */
static int allreduce_whole(struct coll_sched *s, struct direct *d)
{
    size_t es = s->elsize;
    unsigned char *acc, *tmp;
    CADRE_CHECK(cadre__direct_scratch(s, &acc, &tmp));
    char *out = d->rbuf;
    if (d->sbuf == d->rbuf) {
        out = d->tmpout = cadre__sched_alloc(s, d->count * es);
        if (!out)
            return cadre__error(CADRE_ERR_NOMEM, "%s: no memory for %zu bytes", s->op_name,
                                d->count * es);
    }
    size_t step = DIRECT_CHUNK / es;
    for (size_t off = 0; off < d->count; off += step) {
        size_t m = d->count - off < step ? d->count - off : step;
        CADRE_CHECK(reduce_chunk(s, d, off * es, m, acc, tmp, 1));
        memcpy(out + off * es, acc, m * es);
    }
    return CADRE_SUCCESS;
}

static int allreduce_finish(struct coll_sched *s, const struct coll_step *st)
{
    struct direct *d = st->arg;
    if (d->tmpout)
        cadre__copy_out(d->rbuf, d->tmpout, d->count * s->elsize, s->out_bytes);
    return CADRE_SUCCESS;
}

static int allreduce_call(struct coll_sched *s, const struct coll_step *st)
{
    struct direct *d = st->arg;
    int n = s->comm->size, me = s->comm->rank;
    int inplace = 0;
    for (int q = 0; q < n; q++)
        inplace |= d->peer[q].s == d->peer[q].r;
    /* The pair algorithms read the peer's input while the peer writes its
     * output: only where no rank works in place. Every rank decides from
     * the same addresses and flags. */
    if (n == 2 && !inplace)
        return cadre__direct_pair_allreduce(s, d);
    /* The slices below write into every peer: only where every window is
     * open. */
    if (!cadre__direct_windows(s, d))
        return allreduce_whole(s, d);
    size_t es = s->elsize, lo, hi;
    cadre__share(d->count, es, n, me, &lo, &hi);
    unsigned char *acc, *tmp;
    CADRE_CHECK(cadre__direct_scratch(s, &acc, &tmp));
    size_t step = DIRECT_CHUNK / es;
    for (size_t off = lo; off < hi; off += step) {
        size_t m = hi - off < step ? hi - off : step, bytes = m * es;
        CADRE_CHECK(reduce_chunk(s, d, off * es, m, acc, tmp, 0));
        cadre__copy_nt((char *)d->rbuf + off * es, acc, bytes);
        for (int q = 0; q < n; q++)
            if (q != me)
                CADRE_CHECK(cadre__direct_write(s, q, acc, d->peer[q].r + off * es, bytes));
    }
    return CADRE_SUCCESS;
}

/* Rank r reduces slice r of every rank's input and writes it into the
 * root's output (the root its own slice with a copy): each input byte is
 * read once and each output byte written once, spread over the ranks. In
 * place at the root, slice r of the root's input is its output, which only
 * rank r reads and writes, a chunk read before it is written. Where a
 * window is closed (the call overlaps another direct call in some process:
 * build) nobody writes into a peer: the root computes the whole result
 * itself, in rank order, and the others only wait in round 3 while it reads
 * their inputs; on two ranks too (the root reads the other's input,
 * nobody writes into a peer). Only the root's output is written; the others' receive
 * buffers are never looked at (they may be NULL). */
static int reduce_call(struct coll_sched *s, const struct coll_step *st)
{
    struct direct *d = st->arg;
    int n = s->comm->size, me = s->comm->rank, root = d->root;
    /* Two ranks: the other rank's half reaches the root through its ring
     * (coll_direct_pair.c), or, on a busy machine, for small vectors or
     * beside another direct call, the root computes it all; never with
     * process_vm_writev, whose kernel reads each line of the target before
     * writing it. */
    if (n == 2 && cadre__direct_pair_reduce_streams(s, d))
        return cadre__direct_pair_reduce(s, d);
    int whole = n == 2 || !cadre__direct_windows(s, d);
    if (whole && me != root)
        return CADRE_SUCCESS;
    size_t es = s->elsize, lo = 0, hi = d->count, total = d->count * es;
    if (!whole)
        cadre__share(d->count, es, n, me, &lo, &hi);
    unsigned char *acc, *tmp;
    CADRE_CHECK(cadre__direct_scratch(s, &acc, &tmp));
    size_t step = DIRECT_CHUNK / es;
    for (size_t off = lo; off < hi; off += step) {
        size_t m = hi - off < step ? hi - off : step, bytes = m * es;
        CADRE_CHECK(reduce_chunk(s, d, off * es, m, acc, tmp, whole));
        if (me == root)
            cadre__copy_out((char *)d->rbuf + off * es, acc, bytes, total);
        else
            CADRE_CHECK(cadre__direct_write(s, root, acc, d->peer[root].r + off * es, bytes));
    }
    return CADRE_SUCCESS;
}

static int reduce_scatter_call(struct coll_sched *s, const struct coll_step *st)
{
    struct direct *d = st->arg;
    size_t es = s->elsize, base = (size_t)s->comm->rank * d->count * es;
    unsigned char *acc, *tmp;
    CADRE_CHECK(cadre__direct_scratch(s, &acc, &tmp));
    size_t step = DIRECT_CHUNK / es;
    for (size_t off = 0; off < d->count; off += step) {
        size_t m = d->count - off < step ? d->count - off : step;
        CADRE_CHECK(reduce_chunk(s, d, base + off * es, m, acc, tmp, 0));
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
     * size measured, 16 to 64 MiB, here and in bcast (bench/HISTORY.md,
     * 2026-11-24): the kernel's cost is per page pinned, and the chunk adds a
     * second copy. */
    for (int i = 1; i < n; i++) {
        int q = (me + i) % n;
        if (d->counts[q])
            CADRE_CHECK(cadre__direct_cma(s, d, q, rb + d->displs[q] * es, d->peer[q].s,
                                          d->counts[q] * es, 0));
    }
    return CADRE_SUCCESS;
}

/* The two-rank bcast's writes, at a time (bcast_call). */
#define BCAST_PIECE ((size_t)4 << 20)

static int bcast_call(struct coll_sched *s, const struct coll_step *st)
{
    struct direct *d = st->arg;
    int n = s->comm->size, me = s->comm->rank, root = d->root;
    size_t bytes = d->count * s->elsize;
    char *buf = d->rbuf;
    if (n == 2 && cadre__direct_windows(s, d)) {
        /* Both cores copy: the root writes the first 60%, the other rank
         * reads the rest. The root's process_vm_writev costs less per byte
         * than the reader's readv here: at 16 MiB, 60% against 50% took
         * 564 against 657 us (medians of 5, c2c ~470 ns), and 65-75% did
         * better still where c2c read ~110 ns (bench/HISTORY.md). In pieces
         * of BCAST_PIECE, so that a peer that left the call stops the
         * writes within one (cadre__direct_write). */
        size_t half = bytes / 5 * 3 / 64 * 64;
        if (me == root) {
            for (size_t off = 0; off < half; off += BCAST_PIECE)
                CADRE_CHECK(cadre__direct_write(s, !me, buf + off, d->peer[!me].r + off,
                                                half - off < BCAST_PIECE ? half - off
                                                                         : BCAST_PIECE));
            return CADRE_SUCCESS;
        }
        return cadre__direct_cma(s, d, root, buf + half, d->peer[root].r + half, bytes - half, 0);
    }
    if (me == root)
        return CADRE_SUCCESS;
    return cadre__direct_cma(s, d, root, buf, d->peer[root].r, bytes, 0);
}

/* Round 2, then: every peer whose buffers this rank read was still in the
 * call all along (cadre__direct_peers_stayed). */
static int round2_call(struct coll_sched *s, const struct coll_step *st)
{
    struct direct *d = st->arg;
    CADRE_CHECK(d->round2(s, st));
    return cadre__direct_peers_stayed(s, d);
}

/* The direct schedules alive in this process. */
static _Atomic int live;

void cadre__direct_gone(struct coll_sched *s)
{
    if (s->direct_window)
        cadre__direct_window_close(s);
    s->direct_live = 0;
    atomic_fetch_sub(&live, 1);
}

/* Rounds 1 and 3 around the CS_CALL of round 2.
 *
 * A process runs the CS_CALLs of its schedules one at a time, and the
 * two-rank allreduce's variants (coll_direct_pair.c) wait in theirs for
 * the peer's progress in the same call. Two such calls in flight on one
 * pair of processes (nonblocking calls, or threads, on two communicators),
 * their CS_CALLs run in opposite orders in the two, would wait for each
 * other until CADRE_TIMEOUT. So a schedule built while another is alive in
 * its process says so in round 1 (DIRECT_OVERLAP), and a call that either
 * rank flags takes the variant that never waits. In each process at most
 * one alive schedule is unflagged, and a call waits only where both its
 * ranks left it unflagged: no two waiting calls can hold up each other,
 * nor a cycle of them over more processes. */
uint64_t cadre__direct_enter(struct coll_sched *s)
{
    int others = atomic_fetch_add(&live, 1);
    s->direct_live = 1;
    /* Before the peers have this rank's addresses: the window for the
     * variants that write into them, and by which those that read them know
     * they are still in the call (coll_direct_window.c). */
    if (!others)
        cadre__direct_window_open(s);
    int busy = cadre__cores_busy();
    return (busy ? DIRECT_BUSY : 0) | (others ? DIRECT_OVERLAP : 0) |
           (s->direct_window ? DIRECT_WINDOW : 0);
}

static int build(struct coll_sched *s, struct direct *d, coll_call_fn fn)
{
    int n = s->comm->size, me = s->comm->rank;
    d->mine.s = (uint64_t)(uintptr_t)d->sbuf;
    d->mine.r = (uint64_t)(uintptr_t)d->rbuf;
    d->mine.busy = cadre__direct_enter(s);
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
    d->round2 = fn;
    CADRE_CHECK(cadre__sched_call(s, round2_call, d));
    CADRE_CHECK(cadre__sched_barrier(s));
    for (int i = 1; i < n; i++) {
        int q = (me + i) % n;
        CADRE_CHECK(cadre__sched_send(s, q, NULL, 0));
        CADRE_CHECK(cadre__sched_recv(s, q, NULL, 0));
    }
    return cadre__sched_barrier(s);
}

struct direct *cadre__direct_new(struct coll_sched *s)
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
    struct direct *d = cadre__direct_new(s);
    if (!d)
        return CADRE_ERR_NOMEM;
    d->sbuf = sbuf;
    d->rbuf = rbuf;
    d->count = count;
    CADRE_CHECK(build(s, d, allreduce_call));
    if (sbuf != rbuf)
        return CADRE_SUCCESS;
    /* allreduce_whole's result, in place, once no peer reads the input. */
    CADRE_CHECK(cadre__sched_call(s, allreduce_finish, d));
    return cadre__sched_barrier(s);
}

int cadre__algo_reduce_direct(struct coll_sched *s, const void *sbuf, void *rbuf, size_t count,
                              int root)
{
    struct direct *d = cadre__direct_new(s);
    if (!d)
        return CADRE_ERR_NOMEM;
    d->sbuf = sbuf;
    /* A non-root's receive buffer is not the call's: nobody writes there. */
    d->rbuf = s->comm->rank == root ? rbuf : NULL;
    d->count = count;
    d->root = root;
    return build(s, d, reduce_call);
}

int cadre__algo_reduce_scatter_direct(struct coll_sched *s, const void *sbuf, void *rbuf,
                                      size_t recvcount)
{
    struct direct *d = cadre__direct_new(s);
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
    struct direct *d = cadre__direct_new(s);
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
    struct direct *d = cadre__direct_new(s);
    if (!d)
        return CADRE_ERR_NOMEM;
    d->sbuf = buf;
    d->rbuf = buf;
    d->count = count;
    d->root = root;
    return build(s, d, bcast_call);
}
