/* The two-level collectives as schedules (coll.h): groups of ranks (a host's
 * members, one rank of each host, every member in host order) and rings,
 * trees and chains over them. Within a host the messages take shared memory
 * and between hosts TCP, each rank over its own connections.
 *
 * The ring algorithms cut the vector into chunks and run chunk c's step j in
 * round c + j: while one chunk crosses the network, the next is reduced
 * within the host, and a ring in host order crosses the network once per
 * host whatever the placement of the ranks. Each element is reduced along
 * one chain and then copied, so every rank gets the same bits. */
#include <string.h>

#include "coll_hier.h"
#include "coll_algo_util.h"

/* Ranks of the communicator; me: this rank's index, -1 when not a member. */
struct grp {
    int n, me;
    int *rank;
};

static int grp_new(struct coll_sched *s, struct grp *g, int cap)
{
    g->n = 0;
    g->me = -1;
    SCRATCH(g->rank, (size_t)cap * sizeof *g->rank);
    return CADRE_SUCCESS;
}

static void grp_add(struct grp *g, int q, int me)
{
    if (q == me)
        g->me = g->n;
    g->rank[g->n++] = q;
}

/* Host h's members, `first` (one of them, or -1) put first. */
static int grp_host(struct coll_sched *s, const struct coll_hier *h, int host, int first,
                    struct grp *g)
{
    TRY(grp_new(s, g, h->start[host + 1] - h->start[host]));
    if (first >= 0)
        grp_add(g, first, s->comm->rank);
    for (int i = h->start[host]; i < h->start[host + 1]; i++)
        if (h->order[i] != first)
            grp_add(g, h->order[i], s->comm->rank);
    return CADRE_SUCCESS;
}

/* One rank per host: `first` for its host, the lowest rank of the others
 * (or the l-th, for l >= 0), hosts in order from first's host on. */
static int grp_heads(struct coll_sched *s, const struct coll_hier *h, int first, int l,
                     struct grp *g)
{
    TRY(grp_new(s, g, h->nh));
    int h0 = first >= 0 ? h->host[first] : 0;
    for (int k = 0; k < h->nh; k++) {
        int hh = (h0 + k) % h->nh;
        int q = first >= 0 && hh == h0 ? first : h->order[h->start[hh] + (l > 0 ? l : 0)];
        grp_add(g, q, s->comm->rank);
    }
    return CADRE_SUCCESS;
}

/* Every member in host order. */
static int grp_all(struct coll_sched *s, const struct coll_hier *h, struct grp *g)
{
    TRY(grp_new(s, g, s->comm->size));
    for (int i = 0; i < s->comm->size; i++)
        grp_add(g, h->order[i], s->comm->rank);
    return CADRE_SUCCESS;
}

/* ---- trees and chains over a group (its first member the root) ------------------------ */
static int g_bcast_binomial(struct coll_sched *s, const struct grp *g, void *buf, size_t bytes)
{
    int n = g->n, vr = g->me, mask = 1;
    if (vr < 0 || n < 2)
        return CADRE_SUCCESS;
    while (mask < n) {
        if (vr & mask) {
            TRY(cadre__sched_recv(s, g->rank[vr - mask], buf, bytes));
            TRY(cadre__sched_barrier(s));
            break;
        }
        mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (vr + mask < n)
            TRY(cadre__sched_send(s, g->rank[vr + mask], buf, bytes));
    return cadre__sched_barrier(s);
}

/* acc holds this member's contribution; afterwards the first member's acc
 * holds the group's reduction. in: scratch of bytes. */
static int g_reduce_binomial(struct coll_sched *s, const struct grp *g, void *acc, size_t count,
                             void *in)
{
    int n = g->n, vr = g->me;
    size_t bytes = count * s->elsize;
    if (vr < 0 || n < 2)
        return CADRE_SUCCESS;
    for (int mask = 1; mask < n; mask <<= 1) {
        if (vr & mask) {
            TRY(cadre__sched_send(s, g->rank[vr - mask], acc, bytes));
            return cadre__sched_barrier(s);
        }
        if (vr + mask < n) {
            TRY(cadre__sched_recv(s, g->rank[vr + mask], in, bytes));
            TRY(cadre__sched_reduce(s, acc, in, count));
            TRY(cadre__sched_barrier(s));
        }
    }
    return CADRE_SUCCESS;
}

/* Every member sends acc to every other and reduces all of them in member
 * order, so all compute the same bits: one hop, for small vectors. */
static int g_allreduce_exchange(struct coll_sched *s, const struct grp *g, void *acc, size_t count)
{
    int n = g->n, me = g->me;
    size_t bytes = count * s->elsize;
    if (me < 0 || n < 2)
        return CADRE_SUCCESS;
    char *all;
    SCRATCH(all, (size_t)n * bytes);
    for (int i = 0; i < n; i++) {
        if (i == me)
            continue;
        TRY(cadre__sched_send(s, g->rank[i], acc, bytes));
        TRY(cadre__sched_recv(s, g->rank[i], all + (size_t)i * bytes, bytes));
    }
    TRY(cadre__sched_copy(s, all + (size_t)me * bytes, acc, bytes));
    TRY(cadre__sched_copy(s, acc, all, bytes));
    for (int i = 1; i < n; i++)
        TRY(cadre__sched_reduce(s, acc, all + (size_t)i * bytes, count));
    return cadre__sched_barrier(s);
}

/* ---- chunked rings ------------------------------------------------------------------------ */
/* One ring pass over a group: reduce-scatter (rs) or allgather of the n
 * blocks off[i], len[i] (elements) of buf; in: reduce-scatter scratch.
 * first: for a reduce-scatter that starts from the caller's input, that
 * input (at the same offsets as buf), which is then not copied to buf
 * first: the block sent at step 0 is sent from it, and every other block is
 * reduced once, from it into buf (ring_reduce_scatter in coll_algos.c). */
struct phase {
    const struct grp *g;
    int rs;
    size_t *off, *len;
    char *in;
    const char *first;
};

static int phase_step(struct coll_sched *s, const struct phase *p, char *buf, int st)
{
    int n = p->g->n, me = p->g->me;
    size_t es = s->elsize;
    int next = p->g->rank[mod(me + 1, n)], prev = p->g->rank[mod(me - 1, n)];
    int sb = mod(me - st - p->rs, n), rb = mod(me - st - 1 - p->rs, n);
    const char *first = p->first ? p->first : buf;
    TRY(cadre__sched_send(s, next, (st ? buf : first) + p->off[sb] * es, p->len[sb] * es));
    if (!p->rs)
        return cadre__sched_recv(s, prev, buf + p->off[rb] * es, p->len[rb] * es);
    TRY(cadre__sched_recv(s, prev, p->in, p->len[rb] * es));
    return cadre__sched_reduce_to(s, buf + p->off[rb] * es, first + p->off[rb] * es, p->in,
                                  p->len[rb]);
}

static int phase_new(struct coll_sched *s, struct phase *p, const struct grp *g, int rs)
{
    p->g = g;
    p->rs = rs;
    p->in = NULL;
    p->first = NULL;
    SCRATCH(p->off, (size_t)g->n * sizeof *p->off);
    SCRATCH(p->len, (size_t)g->n * sizeof *p->len);
    return CADRE_SUCCESS;
}

#define MAX_PHASES 4
typedef struct phase chunk_phases[MAX_PHASES];

/* The reduce-scatter phases' receive buffers. A chunk's step j of phase k
 * runs in one round (received, then reduced), and at most g->n - 1 chunks
 * are in phase k in one round (chunk c in round r takes step r - c - the
 * phase's first step): chunk c takes buffer c mod that, so the whole call
 * needs a few blocks of scratch, not one per chunk. */
static int phase_scratch(struct coll_sched *s, chunk_phases *ph, int nc, int nph)
{
    for (int k = 0; k < nph; k++) {
        if (!ph[0][k].rs)
            continue;
        size_t most = 0;
        for (int c = 0; c < nc; c++)
            for (int i = 0; i < ph[c][k].g->n; i++)
                if (ph[c][k].len[i] > most)
                    most = ph[c][k].len[i];
        int nb = ph[0][k].g->n - 1 < nc ? ph[0][k].g->n - 1 : nc;
        if (nb < 1)
            nb = 1;
        char **bufs;
        SCRATCH(bufs, (size_t)nb * sizeof *bufs);
        for (int b = 0; b < nb; b++)
            SCRATCH(bufs[b], most * s->elsize);
        for (int c = 0; c < nc; c++)
            ph[c][k].in = bufs[c % nb];
    }
    return CADRE_SUCCESS;
}

/* Chunk c's step j in round c + j: the phases of several chunks overlap. */
static int run_chunks(struct coll_sched *s, char *buf, int nc, chunk_phases *ph, int nph)
{
    int m = 0;
    for (int k = 0; k < nph; k++)
        m += ph[0][k].g->n - 1;
    for (int r = 0; r < nc + m - 1; r++) {
        for (int c = 0; c < nc; c++) {
            int j = r - c;
            if (j < 0 || j >= m)
                continue;
            for (int k = 0; k < nph; j -= ph[c][k].g->n - 1, k++)
                if (j < ph[c][k].g->n - 1) {
                    TRY(phase_step(s, &ph[c][k], buf, j));
                    break;
                }
        }
        TRY(cadre__sched_barrier(s));
    }
    return CADRE_SUCCESS;
}

/* Chunks of about 1 MiB of the whole vector, at most 8: the two-level
 * algorithms, whose rounds each ask every rank of a host to run. */
#define MAX_CHUNKS 8
static int nchunks(size_t bytes)
{
    size_t c = bytes >> 20;
    return c < 1 ? 1 : c > MAX_CHUNKS ? MAX_CHUNKS : (int)c;
}

/* With one rank per host the ring of n ranks crosses the network at every
 * step, and short messages keep it busy: chunks whose blocks (a message)
 * are about RING_1PPN_BLOCK bytes, at most RING_1PPN_MAX. 2 hosts,
 * alternated in one run (2026-11-27, 100 iterations, out-of-place): 1 MiB
 * 0.40-0.48 ms against 0.76-0.86 unchunked, 4 MiB 1.88-1.97 against
 * 2.95-3.67 in 4 chunks of 1 MiB; 16 MiB 7.5-10.5 ms against 9.2-12.4 with
 * 256 KiB blocks and 16.3-18.1 in 8 chunks. */
#define RING_1PPN_BLOCK ((size_t)64 << 10)
#define RING_1PPN_MAX 512
static int nchunks_1ppn(size_t bytes, int n)
{
    size_t c = bytes / (RING_1PPN_BLOCK * (size_t)n);
    return c < 1 ? 1 : c > RING_1PPN_MAX ? RING_1PPN_MAX : (int)c;
}

/* A ring over g (every member, host order) on blocks base_off/base_len of
 * each position, in nc chunks: chunk c takes part c of every block. */
static int ring_chunked(struct coll_sched *s, const struct grp *g, char *buf, const char *first,
                        const size_t *base_off, const size_t *base_len, int nc, int rs, int ag)
{
    int nph = 0;
    chunk_phases *ph;
    SCRATCH(ph, (size_t)nc * sizeof *ph);
    for (int c = 0; c < nc; c++) {
        nph = 0;
        for (int k = 0; k < 2; k++) {
            if ((k == 0 && !rs) || (k == 1 && !ag))
                continue;
            struct phase *p = &ph[c][nph++];
            TRY(phase_new(s, p, g, k == 0));
            if (k == 0)
                p->first = first;
            for (int i = 0; i < g->n; i++) {
                block(base_len[i], nc, c, &p->off[i], &p->len[i]);
                p->off[i] += base_off[i];
            }
        }
    }
    TRY(phase_scratch(s, ph, nc, nph));
    return run_chunks(s, buf, nc, ph, nph);
}

/* ---- the collectives -------------------------------------------------------------------------- */
int cadre__hier_barrier(struct coll_sched *s, int a)
{
    (void)a;
    struct coll_hier *h = cadre__hier_get(s->comm);
    if (!h)
        return CADRE_ERR_NOMEM;
    struct grp loc, heads;
    TRY(grp_host(s, h, h->myh, -1, &loc));
    TRY(grp_heads(s, h, -1, 0, &heads));
    /* In: every member tells its host's first rank; across: those ranks
     * disseminate; out: each tells its host. */
    for (int i = 1; i < loc.n; i++) {
        if (loc.me == 0)
            TRY(cadre__sched_recv(s, loc.rank[i], NULL, 0));
        else if (loc.me == i)
            TRY(cadre__sched_send(s, loc.rank[0], NULL, 0));
    }
    TRY(cadre__sched_barrier(s));
    if (heads.me >= 0) {
        for (int k = 1; k < heads.n; k <<= 1) {
            TRY(cadre__sched_send(s, heads.rank[mod(heads.me + k, heads.n)], NULL, 0));
            TRY(cadre__sched_recv(s, heads.rank[mod(heads.me - k, heads.n)], NULL, 0));
            TRY(cadre__sched_barrier(s));
        }
    }
    for (int i = 1; i < loc.n; i++) {
        if (loc.me == 0)
            TRY(cadre__sched_send(s, loc.rank[i], NULL, 0));
        else if (loc.me == i)
            TRY(cadre__sched_recv(s, loc.rank[0], NULL, 0));
    }
    return cadre__sched_barrier(s);
}

int cadre__hier_bcast(struct coll_sched *s, int a, void *buf, size_t count, int root)
{
    struct coll_hier *h = cadre__hier_get(s->comm);
    if (!h)
        return CADRE_ERR_NOMEM;
    size_t bytes = count * s->elsize;
    if (a == HA_LEADER) {
        /* The root to one rank of each host, then each of those within. */
        struct grp heads, loc;
        TRY(grp_heads(s, h, root, 0, &heads));
        int head = h->myh == h->host[root] ? root : h->order[h->start[h->myh]];
        TRY(grp_host(s, h, h->myh, head, &loc));
        TRY(g_bcast_binomial(s, &heads, buf, bytes));
        return g_bcast_binomial(s, &loc, buf, bytes);
    }
    /* A chain from the root through its host, then host by host, in
     * segments so that every link works at once. */
    struct grp g;
    TRY(grp_new(s, &g, s->comm->size));
    for (int k = 0; k < h->nh; k++) {
        int hh = (h->host[root] + k) % h->nh;
        if (k == 0)
            grp_add(&g, root, s->comm->rank);
        for (int i = h->start[hh]; i < h->start[hh + 1]; i++)
            if (h->order[i] != root)
                grp_add(&g, h->order[i], s->comm->rank);
    }
    size_t seg = CADRE_COLL_SEGMENT, nseg = bytes ? (bytes + seg - 1) / seg : 1;
    int vr = g.me, n = g.n;
    for (size_t c = 0; c <= nseg; c++) {
        if (c < nseg && vr != 0) {
            size_t off = c * seg, len = bytes - off < seg ? bytes - off : seg;
            TRY(cadre__sched_recv(s, g.rank[vr - 1], (char *)buf + off, len));
        }
        if (c > 0 && vr != n - 1) {
            size_t off = (c - 1) * seg, len = bytes - off < seg ? bytes - off : seg;
            TRY(cadre__sched_send(s, g.rank[vr + 1], (char *)buf + off, len));
        }
        TRY(cadre__sched_barrier(s));
    }
    return CADRE_SUCCESS;
}

int cadre__hier_reduce(struct coll_sched *s, int a, const void *sbuf, void *rbuf, size_t count,
                       int root)
{
    (void)a;
    struct coll_hier *h = cadre__hier_get(s->comm);
    if (!h)
        return CADRE_ERR_NOMEM;
    size_t bytes = count * s->elsize;
    int me = s->comm->rank;
    char *acc, *in;
    if (me == root)
        acc = rbuf;
    else
        SCRATCH(acc, bytes);
    SCRATCH(in, bytes);
    if (acc != sbuf)
        TRY(cadre__sched_copy(s, acc, sbuf, bytes));
    TRY(cadre__sched_barrier(s));
    /* Within each host into one rank (the root on its host), then those
     * ranks into the root. */
    struct grp loc, heads;
    int head = h->myh == h->host[root] ? root : h->order[h->start[h->myh]];
    TRY(grp_host(s, h, h->myh, head, &loc));
    TRY(grp_heads(s, h, root, 0, &heads));
    TRY(g_reduce_binomial(s, &loc, acc, count, in));
    return g_reduce_binomial(s, &heads, acc, count, in);
}

static int allreduce_leader(struct coll_sched *s, struct coll_hier *h, void *rbuf, size_t count)
{
    size_t bytes = count * s->elsize;
    struct grp loc, heads;
    char *in;
    SCRATCH(in, bytes);
    TRY(grp_host(s, h, h->myh, -1, &loc));
    TRY(grp_heads(s, h, -1, 0, &heads));
    TRY(g_reduce_binomial(s, &loc, rbuf, count, in));
    TRY(g_allreduce_exchange(s, &heads, rbuf, count));
    return g_bcast_binomial(s, &loc, rbuf, bytes);
}

/* Each rank l of a host reduces block l of the vector within the host
 * (ring), then carries it across hosts with the l-th ranks of the others
 * (ring), then the host gathers the blocks (ring); chunked. */
static int allreduce_split(struct coll_sched *s, struct coll_hier *h, const char *sbuf,
                           char *rbuf, size_t count)
{
    int L = h->maxl, nc = nchunks(count * s->elsize);
    struct grp loc, cross;
    TRY(grp_host(s, h, h->myh, -1, &loc));
    TRY(grp_heads(s, h, -1, h->myl, &cross));
    /* The first ring reads the input where the host has company; alone, a
     * rank's block must be in rbuf before the ring across hosts. */
    if (loc.n < 2 && rbuf != sbuf) {
        TRY(cadre__sched_copy(s, rbuf, sbuf, count * s->elsize));
        TRY(cadre__sched_barrier(s));
    }
    chunk_phases *ph;
    SCRATCH(ph, (size_t)nc * sizeof *ph);
    for (int c = 0; c < nc; c++) {
        size_t coff, clen, loff, llen;
        block(count, nc, c, &coff, &clen);
        struct phase *p = ph[c];
        TRY(phase_new(s, &p[0], &loc, 1));
        if (loc.n >= 2)
            p[0].first = sbuf;
        TRY(phase_new(s, &p[1], &cross, 1));
        TRY(phase_new(s, &p[2], &cross, 0));
        TRY(phase_new(s, &p[3], &loc, 0));
        for (int l = 0; l < L; l++) {
            block(clen, L, l, &p[0].off[l], &p[0].len[l]);
            p[0].off[l] += coff;
            p[3].off[l] = p[0].off[l];
            p[3].len[l] = p[0].len[l];
        }
        loff = p[0].off[h->myl];
        llen = p[0].len[h->myl];
        for (int k = 0; k < h->nh; k++) {
            block(llen, h->nh, k, &p[1].off[k], &p[1].len[k]);
            p[1].off[k] += loff;
            p[2].off[k] = p[1].off[k];
            p[2].len[k] = p[1].len[k];
        }
    }
    TRY(phase_scratch(s, ph, nc, 4));
    return run_chunks(s, rbuf, nc, ph, 4);
}

int cadre__hier_allreduce(struct coll_sched *s, int a, const void *sbuf, void *rbuf, size_t count)
{
    struct coll_hier *h = cadre__hier_get(s->comm);
    if (!h)
        return CADRE_ERR_NOMEM;
    if (a == HA_SPLIT && h->minl == h->maxl)
        return allreduce_split(s, h, sbuf, rbuf, count);
    if (a == HA_LEADER || s->comm->size < 2) {
        if (rbuf != sbuf)
            TRY(cadre__sched_copy(s, rbuf, sbuf, count * s->elsize));
        TRY(cadre__sched_barrier(s));
        if (a == HA_LEADER)
            return allreduce_leader(s, h, rbuf, count);
    }
    struct grp g;
    TRY(grp_all(s, h, &g));
    size_t *off, *len;
    SCRATCH(off, (size_t)g.n * sizeof *off);
    SCRATCH(len, (size_t)g.n * sizeof *len);
    for (int i = 0; i < g.n; i++)
        block(count, g.n, i, &off[i], &len[i]);
    /* The reduce-scatter reads the input; the allgather fills what it
     * leaves unwritten. */
    int nc = h->maxl == 1 ? nchunks_1ppn(count * s->elsize, g.n) : nchunks(count * s->elsize);
    return ring_chunked(s, &g, rbuf, sbuf, off, len, nc, 1, 1);
}

int cadre__hier_allgatherv(struct coll_sched *s, int a, const void *sbuf, void *rbuf,
                           const size_t *counts, const size_t *displs)
{
    (void)a;
    struct coll_hier *h = cadre__hier_get(s->comm);
    if (!h)
        return CADRE_ERR_NOMEM;
    int me = s->comm->rank;
    size_t es = s->elsize, total = 0;
    char *r = rbuf;
    if (r + displs[me] * es != (const char *)sbuf)
        TRY(cadre__sched_copy(s, r + displs[me] * es, sbuf, counts[me] * es));
    TRY(cadre__sched_barrier(s));
    struct grp g;
    TRY(grp_all(s, h, &g));
    size_t *off, *len;
    SCRATCH(off, (size_t)g.n * sizeof *off);
    SCRATCH(len, (size_t)g.n * sizeof *len);
    for (int i = 0; i < g.n; i++) {
        off[i] = displs[g.rank[i]];
        len[i] = counts[g.rank[i]];
        total += len[i] * es;
    }
    return ring_chunked(s, &g, rbuf, NULL, off, len, nchunks(total), 0, 1);
}

int cadre__hier_reduce_scatter(struct coll_sched *s, int a, const void *sbuf, void *rbuf,
                               size_t recvcount)
{
    (void)a;
    struct coll_hier *h = cadre__hier_get(s->comm);
    if (!h)
        return CADRE_ERR_NOMEM;
    int n = s->comm->size, me = s->comm->rank;
    size_t es = s->elsize, total = recvcount * (size_t)n;
    char *acc;
    SCRATCH(acc, total * es);
    if (n < 2) {
        TRY(cadre__sched_copy(s, acc, sbuf, total * es));
        TRY(cadre__sched_barrier(s));
    }
    struct grp g;
    TRY(grp_all(s, h, &g));
    size_t *off, *len;
    SCRATCH(off, (size_t)n * sizeof *off);
    SCRATCH(len, (size_t)n * sizeof *len);
    /* Position i of the ring ends with block i reduced: make it the block
     * of the rank at that position. */
    for (int i = 0; i < n; i++) {
        off[i] = (size_t)g.rank[i] * recvcount;
        len[i] = recvcount;
    }
    TRY(ring_chunked(s, &g, acc, n < 2 ? NULL : sbuf, off, len, nchunks(total * es), 1, 0));
    TRY(cadre__sched_copy(s, rbuf, acc + (size_t)me * recvcount * es, recvcount * es));
    return cadre__sched_barrier(s);
}
