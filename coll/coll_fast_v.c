/*
 * gatherv, scatterv and alltoallv through the shared-memory slots
 * (coll_fast.c): blocking calls, host memory, a communicator whose members
 * all share this node.
 *
 * Who takes this path. Every rank of a call must choose alike, or one rank
 * waits in the slots while another sends it messages. The ranks of a
 * v-call do not know each other's counts (a gatherv's non-root knows its
 * own sendcount only), so no rule on a size can be decided alike. The
 * choice (coll_select.c, the rule "v-variant") therefore looks only at what
 * every rank knows the same: a blocking call, host memory, the slots, the
 * number of ranks. The sizes decide, on each rank alone, how that rank's
 * own data moves, and the rank says so in what it publishes, so no rank
 * ever guesses what another did:
 *
 * A writer publishes in its slot buffer a table of 64-bit entries, one per
 * destination (gatherv: one, for the root; scatterv's root and alltoallv:
 * one per rank, rank i's at i), then the blocks kept in the slot, packed.
 * An entry is the block's offset in the buffer << 32 | its bytes, or
 * VS_MSG | its bytes for a block that moves by message. A writer keeps its
 * blocks in the slot when all of them together are at most the size up to
 * which the equal-count call takes the slots (kind_max: 4 KiB on two
 * ranks, 1 MiB else; coll_select.c) and fit the buffer with the table;
 * otherwise it marks every nonempty block VS_MSG and, after the slot call,
 * sends them as messages on the call's own collective number and signature
 * (the pairwise order of the scheduled alltoallv: no rank waits on a send
 * before it posted its receives of that step). A reader receives by message
 * exactly the blocks its entries mark VS_MSG: writer and reader agree by
 * construction, whatever the counts say.
 *
 * Every reader compares the bytes published for it with the count it
 * expects. A difference is CADRE_ERR_MISMATCH at the reader, naming the
 * call, both ranks and both counts; the block is not copied (a block that
 * comes by message is still received, into scratch room of its own size,
 * so that the writer's send completes). As in the scheduled path ("sent
 * more data than this rank expects"), the writer, whose part finished, is
 * not told.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_fast.h"

#define VS_MSG (1ull << 63)
#define VS_ERRLEN 256
#define VS_INLINE 32 /* ranks whose `msg` needs no malloc (the small calls) */

struct vx {
    const char *fn;
    size_t es;
    int me, n;
    /* Writer: nt entries, block i of `cnt[i]` elements at src + dsp[i] *
     * es; by_msg: the nonempty ones go by message. */
    int nt, by_msg;
    const char *src;
    const size_t *cnt, *dsp;
    /* Reader: entry `idx` of each peer's table is this rank's; from q it
     * expects rcnt[q] elements at rbuf + rdsp[q] * es (one: the same
     * rcnt[0], rdsp[0] whoever sends). own: this rank's block to itself
     * (NULL: none, or in place). */
    int idx, one;
    char *rbuf;
    const size_t *rcnt, *rdsp;
    const char *own;
    /* What came marked VS_MSG: bytes published per rank (0: none). */
    size_t *msg, msg_in[VS_INLINE];
    int nmsg;
    int err;
    char errmsg[VS_ERRLEN];
};

static char *vx_dst(const struct vx *v, int q, size_t *bytes)
{
    int i = v->one ? 0 : q;
    *bytes = v->rcnt[i] * v->es;
    return v->rbuf + v->rdsp[i] * v->es;
}

static void vx_fill(void *arg, unsigned char *dst)
{
    struct vx *v = arg;
    uint64_t *tab = (uint64_t *)(void *)dst;
    size_t off = (size_t)v->nt * sizeof *tab;
    for (int i = 0; i < v->nt; i++) {
        size_t b = v->cnt[i] * v->es;
        if (v->by_msg && b) {
            tab[i] = VS_MSG | b;
            continue;
        }
        tab[i] = (uint64_t)off << 32 | b;
        if (b)
            memcpy(dst + off, v->src + v->dsp[i] * v->es, b);
        off += b;
    }
}

static void vx_mismatch(struct vx *v, int q, size_t theirs, size_t mine)
{
    if (v->err)
        return;
    v->err = 1;
    snprintf(v->errmsg, sizeof v->errmsg,
             "%s: rank %d sends %zu elements to rank %d, which expects %zu from it (do the ranks "
             "agree on the counts?)",
             v->fn, q, theirs / v->es, v->me, mine / v->es);
}

static void vx_take(void *arg, int q, const unsigned char *d)
{
    struct vx *v = arg;
    size_t want;
    char *dst = vx_dst(v, q, &want);
    if (q == v->me) {
        if (v->own && want)
            memmove(dst, v->own, want);
        return;
    }
    uint64_t e = ((const uint64_t *)(const void *)d)[v->idx];
    size_t got = (size_t)(e & (e & VS_MSG ? ~VS_MSG : 0xffffffffull));
    if (got != want)
        vx_mismatch(v, q, got, want);
    if (e & VS_MSG) {
        v->msg[q] = got;
        v->nmsg++;
    } else if (got == want && want) {
        memcpy(dst, d + (e >> 32), want);
    }
}

/* Whether this rank keeps its blocks in the slot (see the top). */
static void vx_decide(struct vx *v, size_t kind_max)
{
    size_t total = 0;
    for (int i = 0; i < v->nt; i++)
        total += v->cnt[i] * v->es;
    size_t table = (size_t)v->nt * sizeof(uint64_t);
    v->by_msg = !(total <= kind_max && total <= FAST_BYTES && table <= FAST_BYTES - total);
}

/* The messages of the call (tag, sig) after its slot part: this rank's
 * blocks marked VS_MSG to `to` (< 0: to every other rank), those marked
 * for it from the others; in the pairwise order, one step after the other
 * when `pairwise` (alltoallv, as its scheduled path), else all at once (the
 * rooted calls, as their linear schedules). Then the slot part's mismatch,
 * if it found one. */
static int vx_messages(struct vx *v, struct cadre_comm *c, int32_t tag, uint64_t sig, int rc,
                       int to, int pairwise)
{
    if (rc != CADRE_SUCCESS)
        return rc;
    int sends = v->by_msg && v->nt;
    if (sends || v->nmsg) {
        struct coll_sched s;
        cadre__sched_init_on(&s, c, v->fn, cadre__coll_ctx(c), tag);
        s.sig = sig;
        int n = v->n, me = v->me;
        for (int st = 1; st < n && rc == CADRE_SUCCESS; st++) {
            int dst = (me + st) % n, src = (me - st + n) % n;
            int i = v->nt == 1 ? 0 : dst;
            if (sends && (to < 0 || dst == to) && v->cnt[i])
                rc = cadre__sched_send(&s, dst, v->src + v->dsp[i] * v->es, v->cnt[i] * v->es);
            if (rc == CADRE_SUCCESS && v->msg[src]) {
                size_t want;
                void *room = vx_dst(v, src, &want);
                if (want != v->msg[src])
                    room = cadre__sched_alloc(&s, v->msg[src]);
                rc = room ? cadre__sched_recv(&s, src, room, v->msg[src])
                          : cadre__error(CADRE_ERR_NOMEM, "%s: no memory", v->fn);
            }
            if (rc == CADRE_SUCCESS && pairwise)
                rc = cadre__sched_barrier(&s);
        }
        if (rc == CADRE_SUCCESS)
            rc = cadre__sched_barrier(&s);
        if (rc != CADRE_SUCCESS)
            cadre__sched_free(&s);
        else
            rc = cadre__sched_run(&s);
    }
    if (rc == CADRE_SUCCESS && v->err)
        rc = cadre__error(CADRE_ERR_MISMATCH, "%s", v->errmsg);
    return rc;
}

static int vx_alloc(struct vx *v, struct cadre_comm *c, const char *fn, size_t es)
{
    v->fn = fn;
    v->es = es;
    v->me = c->rank;
    v->n = c->size;
    v->msg = c->size <= VS_INLINE ? v->msg_in : calloc((size_t)c->size, sizeof *v->msg);
    if (!v->msg)
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", fn);
    return CADRE_SUCCESS;
}

static void vx_free(struct vx *v)
{
    if (v->msg != v->msg_in)
        free(v->msg);
}

int cadre__fast_gatherv(struct cadre_comm *c, const char *fn, uint64_t sig, const void *sbuf,
                        size_t sendcount, void *rbuf, const size_t *counts, const size_t *displs,
                        size_t es, int root, size_t kind_max)
{
    static const size_t zero = 0;
    struct vx v = {0};
    CADRE_CHECK(vx_alloc(&v, c, fn, es));
    int is_root = v.me == root;
    /* The root publishes an empty table (nobody reads it) and keeps its own
     * block; every other rank one entry, for the root. */
    v.nt = is_root ? 0 : 1;
    v.src = sbuf;
    v.cnt = &sendcount;
    v.dsp = &zero;
    vx_decide(&v, kind_max);
    v.rbuf = rbuf;
    v.rcnt = counts;
    v.rdsp = displs;
    if (is_root && (char *)sbuf != (char *)rbuf + displs[root] * es)
        v.own = sbuf;
    int32_t tag = 0;
    int rc = cadre__fast_exchange_fill(c, fn, sig, vx_fill, is_root, -1, vx_take, &v, &tag);
    rc = vx_messages(&v, c, tag, sig, rc, root, 0);
    vx_free(&v);
    return rc;
}

int cadre__fast_scatterv(struct cadre_comm *c, const char *fn, uint64_t sig, const void *sbuf,
                         const size_t *counts, const size_t *displs, void *rbuf,
                         size_t recvcount, size_t es, int root, size_t kind_max)
{
    static const size_t zero = 0;
    struct vx v = {0};
    CADRE_CHECK(vx_alloc(&v, c, fn, es));
    int is_root = v.me == root;
    if (is_root) {
        v.nt = v.n;
        v.src = sbuf;
        v.cnt = counts;
        v.dsp = displs;
        vx_decide(&v, kind_max);
        if ((const char *)rbuf != (const char *)sbuf + displs[root] * es)
            v.own = (const char *)sbuf + displs[root] * es;
    }
    v.idx = v.me;
    v.one = 1;
    v.rbuf = rbuf;
    v.rcnt = &recvcount;
    v.rdsp = &zero;
    int32_t tag = 0;
    int rc = cadre__fast_exchange_fill(c, fn, sig, vx_fill, 1, root, vx_take, &v, &tag);
    rc = vx_messages(&v, c, tag, sig, rc, -1, 0);
    vx_free(&v);
    return rc;
}

/* In place (sbuf == rbuf, the same layout), a rank whose blocks go by
 * message sends them from a copy: the blocks of the slots land in rbuf
 * before its messages leave. */
int cadre__fast_alltoallv(struct cadre_comm *c, const char *fn, uint64_t sig, const void *sbuf,
                          const size_t *scounts, const size_t *sdispls, void *rbuf,
                          const size_t *rcounts, const size_t *rdispls, size_t es,
                          size_t kind_max)
{
    struct vx v = {0};
    CADRE_CHECK(vx_alloc(&v, c, fn, es));
    v.nt = v.n;
    v.src = sbuf;
    v.cnt = scounts;
    v.dsp = sdispls;
    vx_decide(&v, kind_max);
    char *copy = NULL;
    if (v.by_msg && sbuf == rbuf) {
        size_t hi = 0;
        for (int i = 0; i < v.n; i++)
            if (scounts[i] && (sdispls[i] + scounts[i]) * es > hi)
                hi = (sdispls[i] + scounts[i]) * es;
        if (!(copy = malloc(hi ? hi : 1))) {
            vx_free(&v);
            return cadre__error(CADRE_ERR_NOMEM, "%s: no memory for the in-place copy", fn);
        }
        memcpy(copy, sbuf, hi);
        v.src = copy;
    }
    v.idx = v.me;
    v.rbuf = rbuf;
    v.rcnt = rcounts;
    v.rdsp = rdispls;
    if (sbuf != rbuf)
        v.own = (const char *)sbuf + sdispls[v.me] * es;
    int32_t tag = 0;
    int rc = cadre__fast_exchange_fill(c, fn, sig, vx_fill, 1, -1, vx_take, &v, &tag);
    rc = vx_messages(&v, c, tag, sig, rc, -1, 1);
    free(copy);
    vx_free(&v);
    return rc;
}
