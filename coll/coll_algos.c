/* Collective algorithms, each a schedule builder. Buffers arrive resolved:
 * CADRE_IN_PLACE has been turned into the right pointers by coll_api.c, and
 * counts are in elements of s->dt (s->elsize bytes each). */
#include <string.h>

#include "coll_algos.h"
#include "coll_algo_util.h"

/* ---- barrier ----------------------------------------------------------------- */
int cadre__algo_barrier_dissemination(struct coll_sched *s)
{
    int n = s->comm->size, me = s->comm->rank;
    for (int k = 1; k < n; k <<= 1) {
        TRY(cadre__sched_send(s, mod(me + k, n), NULL, 0));
        TRY(cadre__sched_recv(s, mod(me - k, n), NULL, 0));
        TRY(cadre__sched_barrier(s));
    }
    return CADRE_SUCCESS;
}

/* ---- bcast ------------------------------------------------------------------- */
int cadre__algo_bcast_binomial(struct coll_sched *s, void *buf, size_t count, int root)
{
    int n = s->comm->size, me = s->comm->rank, vr = mod(me - root, n);
    size_t bytes = count * s->elsize;
    int mask = 1;
    while (mask < n) {
        if (vr & mask) {
            TRY(cadre__sched_recv(s, mod(vr - mask + root, n), buf, bytes));
            TRY(cadre__sched_barrier(s));
            break;
        }
        mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (vr + mask < n)
            TRY(cadre__sched_send(s, mod(vr + mask + root, n), buf, bytes));
    return cadre__sched_barrier(s);
}

/* A chain from the root, cut into segments so every link works at once. */
int cadre__algo_bcast_pipeline(struct coll_sched *s, void *buf, size_t count, int root)
{
    int n = s->comm->size, me = s->comm->rank, vr = mod(me - root, n);
    size_t bytes = count * s->elsize, seg = CADRE_COLL_SEGMENT;
    size_t nseg = bytes ? (bytes + seg - 1) / seg : 1;
    int prev = mod(me - 1, n), next = mod(me + 1, n);
    for (size_t c = 0; c <= nseg; c++) {
        if (c < nseg && vr != 0) {
            size_t off = c * seg, len = bytes - off < seg ? bytes - off : seg;
            TRY(cadre__sched_recv(s, prev, (char *)buf + off, len));
        }
        if (c > 0 && vr != n - 1) {
            size_t off = (c - 1) * seg, len = bytes - off < seg ? bytes - off : seg;
            TRY(cadre__sched_send(s, next, (char *)buf + off, len));
        }
        TRY(cadre__sched_barrier(s));
    }
    return CADRE_SUCCESS;
}

/* ---- reduce ------------------------------------------------------------------ */
int cadre__algo_reduce_binomial(struct coll_sched *s, const void *sbuf, void *rbuf, size_t count,
                                int root)
{
    int n = s->comm->size, me = s->comm->rank, vr = mod(me - root, n);
    size_t bytes = count * s->elsize;
    /* acc: what this rank has reduced so far; its own input until the first
     * child's arrives (a leaf sends its input as it is), then rbuf at the
     * root and scratch elsewhere, written by the first reduce_to (no copy of
     * the input first: on 2 ranks that copy was on the path twice, once on
     * each rank). */
    const char *acc = sbuf;
    char *out = NULL, *in = NULL;
    for (int mask = 1; mask < n; mask <<= 1) {
        if (vr & mask) {
            TRY(cadre__sched_send(s, mod(vr - mask + root, n), acc, bytes));
            return cadre__sched_barrier(s);
        }
        if (vr + mask < n) {
            if (!in)
                SCRATCH(in, bytes);
            TRY(cadre__sched_recv(s, mod(vr + mask + root, n), in, bytes));
            if (!out) {
                if (me == root)
                    out = rbuf;
                else
                    SCRATCH(out, bytes);
                TRY(cadre__sched_reduce_to(s, out, acc, in, count));
                acc = out;
            } else {
                TRY(cadre__sched_reduce(s, out, in, count));
            }
            TRY(cadre__sched_barrier(s));
        }
    }
    /* The root of a communicator of one rank. */
    if (!out && me == root)
        TRY(cadre__sched_copy(s, rbuf, sbuf, bytes));
    return cadre__sched_barrier(s);
}

/* ---- allreduce --------------------------------------------------------------- */
/* Recursive doubling; with n not a power of two the first 2*rem ranks pair up
 * first so that p = 2^k ranks double, then the result goes back. */
int cadre__algo_allreduce_rd(struct coll_sched *s, const void *sbuf, void *rbuf, size_t count)
{
    int n = s->comm->size, me = s->comm->rank;
    size_t bytes = count * s->elsize;
    char *in;
    SCRATCH(in, bytes);
    TRY(cadre__sched_copy(s, rbuf, sbuf, bytes));
    TRY(cadre__sched_barrier(s));
    int p = 1;
    while (p * 2 <= n)
        p *= 2;
    int rem = n - p, newrank;
    if (me < 2 * rem) {
        if (me % 2 == 0) {
            TRY(cadre__sched_send(s, me + 1, rbuf, bytes));
            TRY(cadre__sched_barrier(s));
            newrank = -1;
        } else {
            TRY(cadre__sched_recv(s, me - 1, in, bytes));
            TRY(cadre__sched_reduce(s, rbuf, in, count));
            TRY(cadre__sched_barrier(s));
            newrank = me / 2;
        }
    } else {
        newrank = me - rem;
    }
    if (newrank >= 0) {
        for (int mask = 1; mask < p; mask <<= 1) {
            int np_ = newrank ^ mask;
            int partner = np_ < rem ? np_ * 2 + 1 : np_ + rem;
            TRY(cadre__sched_send(s, partner, rbuf, bytes));
            TRY(cadre__sched_recv(s, partner, in, bytes));
            TRY(cadre__sched_reduce(s, rbuf, in, count));
            TRY(cadre__sched_barrier(s));
        }
    }
    if (me < 2 * rem) {
        if (me % 2)
            TRY(cadre__sched_send(s, me - 1, rbuf, bytes));
        else
            TRY(cadre__sched_recv(s, me + 1, rbuf, bytes));
        TRY(cadre__sched_barrier(s));
    }
    return CADRE_SUCCESS;
}

/* Ring reduce-scatter over n blocks of acc; afterwards rank r holds the
 * reduced block r in acc. The input is `first` (acc itself, or another
 * buffer that is not copied to acc: each block this rank reduces is reduced
 * once, from first into acc, and the one it never reduces is sent from
 * first at step 0). in: scratch of the largest block. */
static int ring_reduce_scatter(struct coll_sched *s, char *acc, const char *first, size_t count,
                               char *in)
{
    int n = s->comm->size, me = s->comm->rank;
    int prev = mod(me - 1, n), next = mod(me + 1, n);
    size_t es = s->elsize;
    for (int st = 0; st < n - 1; st++) {
        size_t so, sl, ro, rl;
        block(count, n, mod(me - st - 1, n), &so, &sl);
        block(count, n, mod(me - st - 2, n), &ro, &rl);
        TRY(cadre__sched_send(s, next, (st ? acc : first) + so * es, sl * es));
        TRY(cadre__sched_recv(s, prev, in, rl * es));
        TRY(cadre__sched_reduce_to(s, acc + ro * es, first + ro * es, in, rl));
        TRY(cadre__sched_barrier(s));
    }
    return CADRE_SUCCESS;
}

/* Ring allgather of the n blocks of buf; rank r starts with block r. */
static int ring_allgather_blocks(struct coll_sched *s, char *buf, size_t count)
{
    int n = s->comm->size, me = s->comm->rank;
    int prev = mod(me - 1, n), next = mod(me + 1, n);
    for (int st = 0; st < n - 1; st++) {
        size_t so, sl, ro, rl;
        block(count, n, mod(me - st, n), &so, &sl);
        block(count, n, mod(me - st - 1, n), &ro, &rl);
        TRY(cadre__sched_send(s, next, buf + so * s->elsize, sl * s->elsize));
        TRY(cadre__sched_recv(s, prev, buf + ro * s->elsize, rl * s->elsize));
        TRY(cadre__sched_barrier(s));
    }
    return CADRE_SUCCESS;
}

int cadre__algo_allreduce_ring(struct coll_sched *s, const void *sbuf, void *rbuf, size_t count)
{
    int n = s->comm->size;
    size_t q = count / (size_t)n + 1;
    char *in;
    SCRATCH(in, q * s->elsize);
    if (n < 2) {
        TRY(cadre__sched_copy(s, rbuf, sbuf, count * s->elsize));
        return cadre__sched_barrier(s);
    }
    /* No copy of the input to the output: the reduce-scatter reads it, and
     * every block it leaves unwritten the allgather fills. */
    TRY(ring_reduce_scatter(s, rbuf, sbuf, count, in));
    return ring_allgather_blocks(s, rbuf, count);
}

/* ---- reduce_scatter ------------------------------------------------------------ */
int cadre__algo_reduce_scatter_ring(struct coll_sched *s, const void *sbuf, void *rbuf,
                                    size_t recvcount)
{
    int n = s->comm->size, me = s->comm->rank;
    size_t total = recvcount * (size_t)n;
    char *acc, *in;
    SCRATCH(acc, total * s->elsize);
    SCRATCH(in, recvcount * s->elsize);
    if (n < 2)
        TRY(cadre__sched_copy(s, acc, sbuf, total * s->elsize));
    TRY(ring_reduce_scatter(s, acc, sbuf, total, in));
    TRY(cadre__sched_copy(s, rbuf, acc + (size_t)me * recvcount * s->elsize,
                          recvcount * s->elsize));
    return cadre__sched_barrier(s);
}

/* ---- allgather(v) ---------------------------------------------------------------- */
int cadre__algo_allgatherv_ring(struct coll_sched *s, const void *sbuf, size_t sendcount,
                                void *rbuf, const size_t *counts, const size_t *displs)
{
    int n = s->comm->size, me = s->comm->rank;
    char *r = rbuf;
    size_t es = s->elsize;
    (void)sendcount;
    TRY(cadre__sched_copy(s, r + displs[me] * es, sbuf, counts[me] * es));
    TRY(cadre__sched_barrier(s));
    int prev = mod(me - 1, n), next = mod(me + 1, n);
    for (int st = 0; st < n - 1; st++) {
        int sb = mod(me - st, n), rb = mod(me - st - 1, n);
        TRY(cadre__sched_send(s, next, r + displs[sb] * es, counts[sb] * es));
        TRY(cadre__sched_recv(s, prev, r + displs[rb] * es, counts[rb] * es));
        TRY(cadre__sched_barrier(s));
    }
    return CADRE_SUCCESS;
}

/* Recursive doubling for a power-of-two size with equal counts. */
int cadre__algo_allgather_rd(struct coll_sched *s, const void *sbuf, void *rbuf, size_t count)
{
    int n = s->comm->size, me = s->comm->rank;
    size_t bytes = count * s->elsize;
    char *r = rbuf;
    TRY(cadre__sched_copy(s, r + (size_t)me * bytes, sbuf, bytes));
    TRY(cadre__sched_barrier(s));
    for (int mask = 1; mask < n; mask <<= 1) {
        int partner = me ^ mask;
        int mine = me & ~(mask - 1), theirs = partner & ~(mask - 1);
        TRY(cadre__sched_send(s, partner, r + (size_t)mine * bytes, (size_t)mask * bytes));
        TRY(cadre__sched_recv(s, partner, r + (size_t)theirs * bytes, (size_t)mask * bytes));
        TRY(cadre__sched_barrier(s));
    }
    return CADRE_SUCCESS;
}

/* ---- gather(v) / scatter(v): the root talks to everyone at once --------------------- */
int cadre__algo_gatherv_linear(struct coll_sched *s, const void *sbuf, size_t sendcount,
                               void *rbuf, const size_t *counts, const size_t *displs, int root)
{
    int n = s->comm->size, me = s->comm->rank;
    size_t es = s->elsize;
    if (me != root) {
        TRY(cadre__sched_send(s, root, sbuf, sendcount * es));
        return cadre__sched_barrier(s);
    }
    char *r = rbuf;
    for (int i = 0; i < n; i++) {
        if (i == root)
            TRY(cadre__sched_copy(s, r + displs[i] * es, sbuf, counts[i] * es));
        else
            TRY(cadre__sched_recv(s, i, r + displs[i] * es, counts[i] * es));
    }
    return cadre__sched_barrier(s);
}

int cadre__algo_scatterv_linear(struct coll_sched *s, const void *sbuf, const size_t *counts,
                                const size_t *displs, void *rbuf, size_t recvcount, int root)
{
    int n = s->comm->size, me = s->comm->rank;
    size_t es = s->elsize;
    if (me != root) {
        TRY(cadre__sched_recv(s, root, rbuf, recvcount * es));
        return cadre__sched_barrier(s);
    }
    const char *sb = sbuf;
    for (int i = 0; i < n; i++) {
        if (i == root)
            TRY(cadre__sched_copy(s, rbuf, sb + displs[i] * es, counts[i] * es));
        else
            TRY(cadre__sched_send(s, i, sb + displs[i] * es, counts[i] * es));
    }
    return cadre__sched_barrier(s);
}

/* ---- alltoall(v): pairwise exchange, or all at once ---------------------------------- */
/* Linear: every receive and send in one round, the own block copied while
 * the peers take theirs: one wait for the slowest peer instead of n-1 steps
 * each waiting for its partner, which on ranks sharing cores is a partner
 * descheduled at every step (Open MPI 4.1's choice on 3 to 7 ranks for
 * blocks of 1 MiB on). Only when forced (CADRE_ALGO=alltoall=linear). */
int cadre__algo_alltoallv_linear(struct coll_sched *s, const void *sbuf, const size_t *scounts,
                                 const size_t *sdispls, void *rbuf, const size_t *rcounts,
                                 const size_t *rdispls)
{
    int n = s->comm->size, me = s->comm->rank;
    size_t es = s->elsize;
    const char *sb = sbuf;
    char *r = rbuf;
    for (int st = 1; st < n; st++) {
        int from = mod(me - st, n);
        TRY(cadre__sched_recv(s, from, r + rdispls[from] * es, rcounts[from] * es));
    }
    for (int st = 1; st < n; st++) {
        int to = mod(me + st, n);
        TRY(cadre__sched_send(s, to, sb + sdispls[to] * es, scounts[to] * es));
    }
    TRY(cadre__sched_copy(s, r + rdispls[me] * es, sb + sdispls[me] * es, rcounts[me] * es));
    return cadre__sched_barrier(s);
}

int cadre__algo_alltoallv_pairwise(struct coll_sched *s, const void *sbuf, const size_t *scounts,
                                   const size_t *sdispls, void *rbuf, const size_t *rcounts,
                                   const size_t *rdispls)
{
    int n = s->comm->size, me = s->comm->rank;
    size_t es = s->elsize;
    const char *sb = sbuf;
    char *r = rbuf;
    TRY(cadre__sched_copy(s, r + rdispls[me] * es, sb + sdispls[me] * es, rcounts[me] * es));
    TRY(cadre__sched_barrier(s));
    for (int st = 1; st < n; st++) {
        int to = mod(me + st, n), from = mod(me - st, n);
        TRY(cadre__sched_send(s, to, sb + sdispls[to] * es, scounts[to] * es));
        TRY(cadre__sched_recv(s, from, r + rdispls[from] * es, rcounts[from] * es));
        TRY(cadre__sched_barrier(s));
    }
    return CADRE_SUCCESS;
}

/* ---- scan / exscan ------------------------------------------------------------------ */
/* The order of the reductions is fixed by the algorithm, the number of ranks
 * and the rank, never by timing: a call repeated with the same arguments
 * gives the same bits. Every cadre op is commutative, so a step may combine
 * a block of lower ranks into a block of higher ranks from either side (for
 * SUM and PROD of floats, a op b and b op a are the same bits). */

/* Recursive doubling (Hillis and Steele; MPICH's scan and exscan). In round
 * k a rank trades with me ^ 2^k its partial result, the reduction of the
 * aligned block of 2^k ranks that holds it; what comes from a lower block
 * goes into the result too. The result of rank me is thus the reduction of
 * x_me with the blocks below it, largest last: for me = 6,
 * ((x6 op x4..5) op x0..3), each block itself reduced the same way. */
int cadre__algo_scan_rd(struct coll_sched *s, const void *sbuf, void *rbuf, size_t count,
                        int exclusive)
{
    int n = s->comm->size, me = s->comm->rank, have = !exclusive;
    size_t bytes = count * s->elsize;
    char *part, *in;
    SCRATCH(part, bytes);
    SCRATCH(in, bytes);
    TRY(cadre__sched_copy(s, part, sbuf, bytes));
    if (!exclusive)
        TRY(cadre__sched_copy(s, rbuf, sbuf, bytes));
    TRY(cadre__sched_barrier(s));
    for (int mask = 1; mask < n; mask <<= 1) {
        int peer = me ^ mask;
        if (peer >= n)
            continue;
        TRY(cadre__sched_send(s, peer, part, bytes));
        TRY(cadre__sched_recv(s, peer, in, bytes));
        TRY(cadre__sched_barrier(s));
        if (peer < me) {
            /* exscan: the first lower block is the result so far */
            if (have)
                TRY(cadre__sched_reduce(s, rbuf, in, count));
            else
                TRY(cadre__sched_copy(s, rbuf, in, bytes));
            have = 1;
        }
        /* The last round's partial result is never sent. */
        if (mask << 1 < n)
            TRY(cadre__sched_reduce(s, part, in, count));
        TRY(cadre__sched_barrier(s));
    }
    return CADRE_SUCCESS;
}

/* A chain 0 -> 1 -> ... -> n-1 cut into segments so every link works at
 * once: each rank sends its vector once (recursive doubling sends it log2 n
 * times). Rank me receives the reduction of ranks 0..me-1 from me-1, left
 * to right ((x0 op x1) op x2 ...), and passes on that op x_me. */
int cadre__algo_scan_linear(struct coll_sched *s, const void *sbuf, void *rbuf, size_t count,
                            int exclusive)
{
    int n = s->comm->size, me = s->comm->rank;
    size_t es = s->elsize, bytes = count * es;
    size_t seg = CADRE_COLL_SEGMENT / es * es, nseg = bytes ? (bytes + seg - 1) / seg : 1;
    const char *x = sbuf;
    char *r = rbuf, *in = NULL, *out = NULL;
    if (me > 0)
        SCRATCH(in, seg);
    if (exclusive && me > 0 && me < n - 1)
        SCRATCH(out, seg);
    if (exclusive && me > 0 && x == r) {
        /* in place: the input is overwritten by what comes from me-1 */
        char *keep;
        SCRATCH(keep, bytes);
        TRY(cadre__sched_copy(s, keep, x, bytes));
        TRY(cadre__sched_barrier(s));
        x = keep;
    }
    if (!exclusive) {
        TRY(cadre__sched_copy(s, r, x, bytes));
        TRY(cadre__sched_barrier(s));
    }
    /* Round c receives segment c and sends segment c-1. */
    for (size_t c = 0; c <= nseg; c++) {
        size_t off = c * seg, len = c < nseg ? (bytes - off < seg ? bytes - off : seg) : 0;
        size_t poff = off - seg, plen = c > 0 ? (bytes - poff < seg ? bytes - poff : seg) : 0;
        if (c > 0 && me < n - 1) {
            const char *what = !exclusive ? r + poff : me == 0 ? x + poff : out;
            TRY(cadre__sched_send(s, me + 1, what, plen));
        }
        if (c < nseg && me > 0)
            TRY(cadre__sched_recv(s, me - 1, in, len));
        TRY(cadre__sched_barrier(s));
        if (c < nseg && me > 0) {
            if (!exclusive)
                TRY(cadre__sched_reduce(s, r + off, in, len / es));
            else {
                TRY(cadre__sched_copy(s, r + off, in, len));
                if (me < n - 1)
                    TRY(cadre__sched_reduce_to(s, out, in, x + off, len / es));
            }
            TRY(cadre__sched_barrier(s));
        }
    }
    return CADRE_SUCCESS;
}
