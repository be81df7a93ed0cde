/* coll_test's v-variants (coll_test.c has main and the rest): allgatherv,
 * gatherv, scatterv and alltoallv with unequal and zero counts (vvariants),
 * and gatherv, scatterv and alltoallv through the shared-memory slots of
 * coll_fast_v.c, with odd, empty and large blocks (vslots). */
#include "coll_test.h"

/* Block r of buf (cnt[r] elements of dt at dsp[r]), for each of the np
 * ranks, holds tagval(from, i, r). */
static void vfill(char *buf, cadre_datatype_t dt, const size_t *cnt, const size_t *dsp, int from)
{
    size_t es = cadre_datatype_size(dt);
    for (int r = 0; r < np; r++)
        for (size_t i = 0; i < cnt[r]; i++)
            set(buf + dsp[r] * es, dt, i, tagval(from, i, r));
}

/* The v-variants with unequal counts (rank r contributes n + r elements, in
 * reverse order of displacements) and zero counts. */
void test_vvariants(int nb)
{
    cadre_datatype_t dt = CADRE_INT32;
    size_t di = 2, es = 4;
    int op = -1;
    for (int ci = 0; ci < ncounts; ci++) {
        size_t base = counts[ci] == big_count ? 1000 : counts[ci];
        size_t *cnt = calloc((size_t)np, sizeof *cnt), *dsp = calloc((size_t)np, sizeof *dsp);
        size_t total = 0;
        for (int r = np - 1; r >= 0; r--) {
            cnt[r] = base ? base + (size_t)r : 0;
            dsp[r] = total;
            total += cnt[r] + 1; /* a gap between blocks */
        }
        char *a = alloc(total + base + (size_t)np, es), *b = alloc(total, es);
        size_t n = cnt[me];
        for (size_t i = 0; i < n; i++)
            set(a, dt, i, tagval(me, i, 0));
        memset(b, 0xA5, total * es);
        RUN(cadre_allgatherv(a, n, b, cnt, dsp, dt, W),
            cadre_iallgatherv(a, n, b, cnt, dsp, dt, W, &rq_));
        for (int r = 0; r < np; r++) {
            size_t nn = cnt[r];
            for (size_t i = 0; i < nn; i++)
                if (get(b + dsp[r] * es, dt, i) != tagval(r, i, 0)) {
                    EXPECT(0, "allgatherv block %d element %zu", r, i);
                    break;
                }
        }
        for (int root = 0; root < np; root++) {
            memset(b, 0xA5, total * es);
            RUN(cadre_gatherv(a, n, b, cnt, dsp, dt, root, W),
                cadre_igatherv(a, n, b, cnt, dsp, dt, root, W, &rq_));
            if (me == root)
                for (int r = 0; r < np; r++)
                    for (size_t i = 0; i < cnt[r]; i++)
                        if (get(b + dsp[r] * es, dt, i) != tagval(r, i, 0)) {
                            EXPECT(0, "gatherv root %d block %d element %zu", root, r, i);
                            break;
                        }
            if (me == root)
                vfill(b, dt, cnt, dsp, root);
            char *got = alloc(n + 1, es);
            RUN(cadre_scatterv(b, cnt, dsp, got, n, dt, root, W),
                cadre_iscatterv(b, cnt, dsp, got, n, dt, root, W, &rq_));
            COMPARE("scatterv", got, tagval(root, i_, me), dt, op);
            free(got);
        }
        /* alltoallv: rank r sends (r + to) % 3 + base elements to `to`. */
        size_t unp = np > 0 ? (size_t)np : 1;
        size_t *sc = calloc(unp, sizeof *sc), *sd = calloc(unp, sizeof *sd);
        size_t *rc = calloc(unp, sizeof *rc), *rd = calloc(unp, sizeof *rd);
        size_t st = 0, rt = 0;
        for (int r = 0; r < np; r++) {
            sc[r] = base ? base + (size_t)((me + r) % 3) : 0;
            sd[r] = st;
            st += sc[r];
            rc[r] = base ? base + (size_t)((r + me) % 3) : 0;
            rd[r] = rt;
            rt += rc[r];
        }
        char *sa = alloc(st, es), *ra = alloc(rt, es);
        for (int r = 0; r < np; r++)
            for (size_t i = 0; i < sc[r]; i++)
                set(sa + sd[r] * es, dt, i, tagval(me, i, r));
        RUN(cadre_alltoallv(sa, sc, sd, ra, rc, rd, dt, W),
            cadre_ialltoallv(sa, sc, sd, ra, rc, rd, dt, W, &rq_));
        for (int r = 0; r < np; r++)
            for (size_t i = 0; i < rc[r]; i++)
                if (get(ra + rd[r] * es, dt, i) != tagval(r, i, me)) {
                    EXPECT(0, "alltoallv from %d element %zu", r, i);
                    break;
                }
        free(sa), free(ra), free(sc), free(sd), free(rc), free(rd);
        free(cnt), free(dsp), free(a), free(b);
        (void)di;
    }
}

/* ---- the v-variants through the shared-memory slots (coll_fast_v.c) ---- */
/* Elements `from` sends `to` in pattern p: 0, odd and empty blocks; 1, rank
 * 1's blocks over what a slot keeps (messages) beside the others' small
 * ones; 2, mid-sized blocks (over the slot's 4 KiB on two ranks) and empty
 * ones. */
static size_t vcount(int p, int from, int to, size_t big)
{
    if (p == 0)
        return (from + 2 * to) % 3 == 0 ? 0 : (size_t)(1 + 2 * from + to);
    if (p == 1)
        return from == 1 ? big : (size_t)(3 + from + to);
    return (from + to) % 2 ? 5001 + (size_t)from : 0;
}

/* Displacements in reverse rank order, one element of gap after each
 * block; the total span in *span. */
static void vlayout(const size_t *cnt, size_t *dsp, size_t *span)
{
    size_t t = 0;
    for (int r = np - 1; r >= 0; r--)
        dsp[r] = t, t += cnt[r] + 1;
    *span = t;
}

/* buf (span elements + alloc's 16 spare bytes) against the image where
 * block r < nblk (cnt[r] elements at dsp[r]) holds tagval(from r or `from`,
 * i, to r or `to`) (-1: the block's rank) and every other byte alloc's fill. */
static void vexpect(const char *what, const char *buf, size_t di, int p, int nblk,
                    const size_t *cnt, const size_t *dsp, size_t span, int from, int to)
{
    size_t es = cadre_datatype_size(dts[di]);
    char *img = alloc(span, es);
    for (int r = 0; r < nblk; r++)
        for (size_t i = 0; i < cnt[r]; i++)
            set(img + dsp[r] * es, dts[di], i, tagval(from < 0 ? r : from, i, to < 0 ? r : to));
    for (size_t k = 0; k < span * es + 16; k++)
        if (buf[k] != img[k]) {
            EXPECT(0, "%s %s pattern %d ranks %d: byte %zu (element %zu) differs", what,
                   dt_names[di], p, np, k, k / es);
            break;
        }
    free(img);
}

static void vslots_case(int nb, size_t di, int p, int root, size_t big)
{
    cadre_datatype_t dt = dts[di];
    size_t es = cadre_datatype_size(dt), un = (size_t)np, span, n;
    size_t *cnt = calloc(un, sizeof *cnt), *dsp = calloc(un, sizeof *dsp);
    size_t *cnt2 = calloc(un, sizeof *cnt2), *dsp2 = calloc(un, sizeof *dsp2);
    /* gatherv, out of place and in place at the root */
    for (int r = 0; r < np; r++)
        cnt[r] = vcount(p, r, root, big);
    vlayout(cnt, dsp, &span);
    n = cnt[me];
    char *a = alloc(n, es), *b = alloc(span, es);
    for (size_t i = 0; i < n; i++)
        set(a, dt, i, tagval(me, i, root));
    RUN(cadre_gatherv(a, n, b, cnt, dsp, dt, root, W),
        cadre_igatherv(a, n, b, cnt, dsp, dt, root, W, &rq_));
    if (me == root) {
        vexpect("gatherv", b, di, p, np, cnt, dsp, span, -1, root);
        memset(b, 0xA5, span * es + 16);
        memcpy(b + dsp[me] * es, a, n * es);
    }
    RUN(cadre_gatherv(me == root ? CADRE_IN_PLACE : a, n, b, cnt, dsp, dt, root, W),
        cadre_igatherv(me == root ? CADRE_IN_PLACE : a, n, b, cnt, dsp, dt, root, W, &rq_));
    if (me == root)
        vexpect("gatherv in place", b, di, p, np, cnt, dsp, span, -1, root);
    free(a), free(b);
    /* scatterv, out of place and in place at the root */
    for (int r = 0; r < np; r++)
        cnt[r] = vcount(p, root, r, big);
    vlayout(cnt, dsp, &span);
    n = cnt[me];
    a = alloc(span, es), b = alloc(n, es);
    vfill(a, dt, cnt, dsp, root);
    RUN(cadre_scatterv(a, cnt, dsp, b, n, dt, root, W),
        cadre_iscatterv(a, cnt, dsp, b, n, dt, root, W, &rq_));
    const size_t one = 0;
    vexpect("scatterv", b, di, p, 1, &cnt[me], &one, n, root, me);
    RUN(cadre_scatterv(a, cnt, dsp, me == root ? CADRE_IN_PLACE : b, n, dt, root, W),
        cadre_iscatterv(a, cnt, dsp, me == root ? CADRE_IN_PLACE : b, n, dt, root, W, &rq_));
    if (me == root)
        vexpect("scatterv in place (sendbuf)", a, di, p, np, cnt, dsp, span, root, -1);
    else
        vexpect("scatterv in place", b, di, p, 1, &cnt[me], &one, n, root, me);
    free(a), free(b);
    /* alltoallv (every rank its own counts), then in place (symmetric ones) */
    size_t sspan, rspan;
    for (int r = 0; r < np; r++)
        cnt[r] = vcount(p, me, r, big), cnt2[r] = vcount(p, r, me, big);
    vlayout(cnt, dsp, &sspan);
    vlayout(cnt2, dsp2, &rspan);
    a = alloc(sspan, es), b = alloc(rspan, es);
    vfill(a, dt, cnt, dsp, me);
    RUN(cadre_alltoallv(a, cnt, dsp, b, cnt2, dsp2, dt, W),
        cadre_ialltoallv(a, cnt, dsp, b, cnt2, dsp2, dt, W, &rq_));
    vexpect("alltoallv", b, di, p, np, cnt2, dsp2, rspan, -1, me);
    free(a), free(b);
    for (int r = 0; r < np; r++)
        cnt[r] = vcount(p, me < r ? me : r, me < r ? r : me, big);
    vlayout(cnt, dsp, &span);
    b = alloc(span, es);
    vfill(b, dt, cnt, dsp, me);
    RUN(cadre_alltoallv(CADRE_IN_PLACE, NULL, NULL, b, cnt, dsp, dt, W),
        cadre_ialltoallv(CADRE_IN_PLACE, NULL, NULL, b, cnt, dsp, dt, W, &rq_));
    vexpect("alltoallv in place", b, di, p, np, cnt, dsp, span, -1, me);
    free(b), free(cnt), free(dsp), free(cnt2), free(dsp2);
}

/* Counts that differ between ranks, some 0, odd; gaps; every root; every
 * datatype (the large patterns on two); in place. Blocking calls take the
 * slots, nonblocking ones the messages: both against the same images. */
void test_vslots(int nb)
{
    for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++)
        for (int p = 0; p < 3; p++) {
            if (p && dts[di] != CADRE_UINT8 && dts[di] != CADRE_FLOAT64)
                continue;
            size_t big = ((size_t)1 << 20) / cadre_datatype_size(dts[di]) + 5;
            for (int root = 0; root < np; root++)
                vslots_case(nb, di, p, root, big);
        }
}
