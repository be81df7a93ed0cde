/* Communicators: split, create, create_group, dup, free, world_rank;
 * collectives and point-to-point on them; many at once; nonblocking
 * collectives in flight on several; bad input. Every rank checks its results
 * against what it computes from the world rank numbers. */
#include "rank_util.h"

#define W CADRE_COMM_WORLD

/* A group made by create_group from list[0..n-1] (this rank among them):
 * its size and order, an allreduce, a bcast from its rank 0, a scan, and a
 * ring of point-to-point messages with tag `tag`, each checked. */
static void use_group(cadre_comm_t g, const int *list, int n, int me, int tag, const char *what)
{
    int r = -1, s = -1, wr = -1;
    OK(cadre_comm_rank(g, &r));
    OK(cadre_comm_size(g, &s));
    EXPECT(s == n, "%s: size %d, expected %d", what, s, n);
    if (s != n || r < 0 || r >= n)
        return;
    EXPECT(list[r] == me, "%s: rank %d, but ranks[%d] = %d", what, r, r, list[r]);
    for (int i = 0; i < n; i++) {
        OK(cadre_comm_world_rank(g, i, &wr));
        EXPECT(wr == list[i], "%s: rank %d is world %d, expected %d", what, i, wr, list[i]);
    }
    int64_t v = me, sum = -1, want = 0, pre = -1, want_pre = 0;
    for (int i = 0; i < n; i++)
        want += list[i], want_pre += i <= r ? list[i] : 0;
    OK(cadre_allreduce(&v, &sum, 1, CADRE_INT64, CADRE_SUM, g));
    EXPECT(sum == want, "%s: allreduce %lld, expected %lld", what, (long long)sum, (long long)want);
    OK(cadre_scan(&v, &pre, 1, CADRE_INT64, CADRE_SUM, g));
    EXPECT(pre == want_pre, "%s: scan %lld, expected %lld", what, (long long)pre,
           (long long)want_pre);
    int b[3] = {me, me * 3, 7};
    OK(cadre_bcast(b, 3, CADRE_INT32, 0, g));
    EXPECT(b[0] == list[0] && b[1] == 3 * list[0] && b[2] == 7, "%s: bcast got %d %d %d", what,
           b[0], b[1], b[2]);
    int x[2] = {me, tag}, y[2] = {-1, -1};
    cadre_request_t q[2];
    cadre_status_t st[2];
    OK(cadre_irecv(y, 2, CADRE_INT32, (r + n - 1) % n, tag, g, &q[0]));
    OK(cadre_isend(x, 2, CADRE_INT32, (r + 1) % n, tag, g, &q[1]));
    OK(cadre_waitall(2, q, st));
    EXPECT(y[0] == list[(r + n - 1) % n] && y[1] == tag, "%s: p2p got %d %d, expected %d %d", what,
           y[0], y[1], list[(r + n - 1) % n], tag);
}

static void create_group_tests(int me, int np)
{
    int *list = malloc((size_t)np * sizeof *list), n = 0;
    cadre_comm_t g = CADRE_COMM_NULL, g2 = CADRE_COMM_NULL;
    /* Disjoint groups at once: the lower half in reverse (tag 10), the upper
     * half in order (tag 11). A receive of any source and tag on the world,
     * posted before, must get only the user's message after. */
    int h = (np + 1) / 2, lower = me < h;
    for (int i = 0; i < (lower ? h : np - h); i++)
        list[n++] = lower ? h - 1 - i : h + i;
    int got[2] = {-1, -1}, mine[2] = {me, 77};
    cadre_request_t any;
    cadre_status_t ast;
    OK(cadre_irecv(got, 2, CADRE_INT32, CADRE_ANY_SOURCE, CADRE_ANY_TAG, W, &any));
    OK(cadre_comm_create_group(W, n, list, lower ? 10 : 11, &g));
    use_group(g, list, n, me, lower ? 10 : 11, lower ? "lower half" : "upper half");
    OK(cadre_send(mine, 2, CADRE_INT32, (me + 1) % np, 77, W));
    OK(cadre_wait(&any, &ast));
    EXPECT(got[0] == (me + np - 1) % np && got[1] == 77 && ast.tag == 77,
           "the world's receive got %d %d (tag %d): a create_group message leaked", got[0],
           got[1], ast.tag);
    OK(cadre_comm_free(&g));

    /* Overlapping groups, one after the other, then both in use at once:
     * ranks 0..np-2 in order, then np-1 down to 1 (same tag). */
    if (np >= 3) {
        int a[8], na = 0, b[8], nb = 0;
        for (int i = 0; i < np - 1 && na < 8; i++)
            a[na++] = i;
        for (int i = np - 1; i >= 1 && nb < 8; i--)
            b[nb++] = i;
        if (me <= np - 2)
            OK(cadre_comm_create_group(W, na, a, 3, &g));
        if (me >= 1)
            OK(cadre_comm_create_group(W, nb, b, 3, &g2));
        if (me <= np - 2)
            use_group(g, a, na, me, 4, "ranks 0..n-2");
        if (me >= 1)
            use_group(g2, b, nb, me, 4, "ranks n-1..1");
        if (me >= 1 && me <= np - 2) {
            /* both at once: nonblocking allreduces in flight on the two */
            int one = 1, s1 = 0, s2 = 0;
            cadre_request_t q[2];
            OK(cadre_iallreduce(&one, &s1, 1, CADRE_INT32, CADRE_SUM, g, &q[0]));
            OK(cadre_iallreduce(&one, &s2, 1, CADRE_INT32, CADRE_SUM, g2, &q[1]));
            OK(cadre_waitall(2, q, NULL));
            EXPECT(s1 == na && s2 == nb, "two groups at once: %d %d", s1, s2);
        } else {
            /* the end ranks, in one group each: the same nonblocking call */
            int one = 1, s = 0;
            cadre_request_t q;
            OK(cadre_iallreduce(&one, &s, 1, CADRE_INT32, CADRE_SUM, me == 0 ? g : g2, &q));
            OK(cadre_wait(&q, NULL));
            EXPECT(s == (me == 0 ? na : nb), "the end rank's group: %d", s);
        }
        if (g != CADRE_COMM_NULL)
            OK(cadre_comm_free(&g));
        if (g2 != CADRE_COMM_NULL)
            OK(cadre_comm_free(&g2));
    }

    /* A group of one. */
    OK(cadre_comm_create_group(W, 1, &me, 0, &g));
    use_group(g, &me, 1, me, 0, "alone");
    OK(cadre_comm_free(&g));

    /* Bad input: found by the caller alone. */
    cadre_comm_t t = CADRE_COMM_NULL;
    int other = (me + 1) % np, dup2[2] = {me, me}, out[2] = {me, np};
    FAILS(cadre_comm_create_group(W, 1, &me, 0, NULL), CADRE_ERR_ARG, "newcomm is NULL");
    FAILS(cadre_comm_create_group(W, 0, &me, 0, &t), CADRE_ERR_ARG, "n 0 out of range");
    FAILS(cadre_comm_create_group(W, 1, NULL, 0, &t), CADRE_ERR_ARG, "ranks is NULL");
    FAILS(cadre_comm_create_group(W, 1, &me, -1, &t), CADRE_ERR_ARG, "tag -1 is negative");
    FAILS(cadre_comm_create_group(W, 2, dup2, 0, &t), CADRE_ERR_ARG,
          np >= 2 ? "ranks[1] = " : "out of range");
    FAILS(cadre_comm_create_group(W, 2, out, 0, &t), CADRE_ERR_ARG, "out of range");
    if (np >= 2)
        FAILS(cadre_comm_create_group(W, 1, &other, 0, &t), CADRE_ERR_ARG, "is not in ranks[]");
    FAILS(cadre_comm_create_group(CADRE_COMM_NULL, 1, &me, 0, &t), CADRE_ERR_STATE,
          "CADRE_COMM_NULL");
    EXPECT(t == CADRE_COMM_NULL, "create_group wrote newcomm on failure");

    /* Members that disagree on the order: ranks 0 and 1 pass {0,1,2}, rank 2
     * {0,2,1}; each names a member whose list differs. */
    if (np >= 3 && me <= 2) {
        int l01[3] = {0, 1, 2}, l2[3] = {0, 2, 1};
        int rc = cadre_comm_create_group(W, 3, me == 2 ? l2 : l01, 9, &t);
        EXPECT(rc == CADRE_ERR_MISMATCH, "lists that differ: %s", cadre_error_string(rc));
        const char *want = me == 2 ? "rank 0 passed ranks {0,1,2}" : "rank 2 passed ranks {0,2,1}";
        EXPECT(strstr(cadre_last_error(), want), "lists that differ: \"%s\" lacks \"%s\"",
               cadre_last_error(), want);
        EXPECT(t == CADRE_COMM_NULL, "a failed create_group wrote newcomm");
    }
    /* The world goes on. */
    int one = 1, all = 0;
    OK(cadre_allreduce(&one, &all, 1, CADRE_INT32, CADRE_SUM, W));
    EXPECT(all == np, "the world after create_group: %d", all);
    free(list);
}

int main(int argc, char **argv)
{
    if (cadre_init(&argc, &argv) != CADRE_SUCCESS) {
        fprintf(stderr, "comm_test: cadre_init: %s\n", cadre_last_error());
        return 1;
    }
    int me, np;
    cadre_comm_rank(W, &me);
    cadre_comm_size(W, &np);
    ru_rank = me;

    /* split by parity, ordered by decreasing world rank */
    cadre_comm_t half;
    OK(cadre_comm_split(W, me % 2, -me, &half));
    int hr = -1, hs = -1;
    OK(cadre_comm_rank(half, &hr));
    OK(cadre_comm_size(half, &hs));
    int want_size = (np + 1 - me % 2) / 2;
    EXPECT(hs == want_size, "split size %d, expected %d", hs, want_size);
    int wr;
    for (int r = 0; r < hs; r++) {
        OK(cadre_comm_world_rank(half, r, &wr));
        /* rank r of the half is the r-th largest world rank of that parity */
        int expect = -1, k = 0;
        for (int w = np - 1; w >= 0; w--)
            if (w % 2 == me % 2 && k++ == r)
                expect = w;
        EXPECT(wr == expect, "half rank %d is world %d, expected %d", r, wr, expect);
    }
    OK(cadre_comm_world_rank(half, hr, &wr));
    EXPECT(wr == me, "my own world rank through the split: %d", wr);
    int64_t sum = me, got = 0, want = 0;
    for (int w = 0; w < np; w++)
        if (w % 2 == me % 2)
            want += w;
    OK(cadre_allreduce(&sum, &got, 1, CADRE_INT64, CADRE_SUM, half));
    EXPECT(got == want, "allreduce on the split: %lld, expected %lld", (long long)got, (long long)want);
    /* point-to-point on the split uses its own ranks, and does not mix with the world */
    if (hs > 1) {
        int next = (hr + 1) % hs, prev = (hr + hs - 1) % hs, x = me, y = -1, z = -1;
        int world_next;
        OK(cadre_comm_world_rank(half, next, &world_next));
        cadre_request_t rq[2];
        OK(cadre_irecv(&y, 1, CADRE_INT32, prev, 5, half, &rq[0]));
        OK(cadre_isend(&x, 1, CADRE_INT32, next, 5, half, &rq[1]));
        OK(cadre_waitall(2, rq, NULL));
        int world_prev;
        OK(cadre_comm_world_rank(half, prev, &world_prev));
        EXPECT(y == world_prev, "p2p on the split got %d, expected %d", y, world_prev);
        (void)z;
        (void)world_next;
    }

    /* create: the odd world ranks, in reverse order; the others get NULL */
    int *list = malloc((size_t)np * sizeof *list), n = 0;
    for (int w = np - 1; w >= 0; w--)
        if (w % 2 == 1)
            list[n++] = w;
    cadre_comm_t odd;
    OK(cadre_comm_create(W, n, list, &odd));
    if (me % 2 == 1) {
        int r, s;
        OK(cadre_comm_rank(odd, &r));
        OK(cadre_comm_size(odd, &s));
        EXPECT(s == n && list[r] == me, "create: rank %d of %d", r, s);
        int v = me, mx = -1;
        OK(cadre_allreduce(&v, &mx, 1, CADRE_INT32, CADRE_MAX, odd));
        EXPECT(mx == (np - 1) - ((np - 1) % 2 == 0), "max over the odd ranks %d", mx);
        OK(cadre_comm_free(&odd));
        EXPECT(odd == CADRE_COMM_NULL, "free sets NULL");
    } else {
        EXPECT(odd == CADRE_COMM_NULL, "a non-member got a communicator");
    }

    /* dup: same ranks, separate traffic; nonblocking collectives in flight on
     * the world, the dup and the split at once, completed in reverse */
    cadre_comm_t dup;
    OK(cadre_comm_dup(W, &dup));
    int dr;
    OK(cadre_comm_rank(dup, &dr));
    EXPECT(dr == me, "dup rank %d", dr);
    int a = 1, b = 0, c = me, d = 0, e = me, f = 0;
    cadre_request_t q[3];
    OK(cadre_iallreduce(&a, &b, 1, CADRE_INT32, CADRE_SUM, W, &q[0]));
    OK(cadre_iallreduce(&c, &d, 1, CADRE_INT32, CADRE_MAX, dup, &q[1]));
    OK(cadre_iallreduce(&e, &f, 1, CADRE_INT32, CADRE_MIN, half, &q[2]));
    OK(cadre_wait(&q[2], NULL));
    OK(cadre_wait(&q[1], NULL));
    OK(cadre_wait(&q[0], NULL));
    EXPECT(b == np && d == np - 1 && f == me % 2, "concurrent: %d %d %d", b, d, f);

    /* many communicators, created and freed */
    for (int i = 0; i < 300; i++) {
        cadre_comm_t t;
        OK(cadre_comm_split(W, i % 3 == 0 ? CADRE_UNDEFINED : me % 3, me, &t));
        if (i % 3 == 0) {
            EXPECT(t == CADRE_COMM_NULL, "CADRE_UNDEFINED must give NULL");
            continue;
        }
        int v = 1, s = 0, ts;
        OK(cadre_allreduce(&v, &s, 1, CADRE_INT32, CADRE_SUM, t));
        OK(cadre_comm_size(t, &ts));
        EXPECT(s == ts, "allreduce on comm %d: %d of %d", i, s, ts);
        OK(cadre_comm_free(&t));
    }

    /* bad input */
    cadre_comm_t t = CADRE_COMM_NULL;
    FAILS(cadre_comm_split(W, 0, 0, NULL), CADRE_ERR_ARG, "newcomm");
    FAILS(cadre_comm_split(CADRE_COMM_NULL, 0, 0, &t), CADRE_ERR_STATE, "CADRE_COMM_NULL");
    FAILS(cadre_comm_split(W, -5, 0, &t), CADRE_ERR_ARG, "negative");
    int bad[2] = {0, np};
    FAILS(cadre_comm_create(W, 2, bad, &t), CADRE_ERR_ARG, "out of range");
    int twice[2] = {0, 0};
    FAILS(cadre_comm_create(W, 2, twice, &t), CADRE_ERR_ARG, np >= 2 ? "twice" : "out of range");
    FAILS(cadre_comm_create(W, np + 1, list, &t), CADRE_ERR_ARG, "out of range");
    FAILS(cadre_comm_free(NULL), CADRE_ERR_ARG, "NULL");
    cadre_comm_t w = W;
    FAILS(cadre_comm_free(&w), CADRE_ERR_ARG, "CADRE_COMM_WORLD");
    FAILS(cadre_comm_world_rank(half, hs, &wr), CADRE_ERR_ARG, "out of range");
    FAILS(cadre_comm_world_rank(half, 0, NULL), CADRE_ERR_ARG, "NULL");
    OK(cadre_comm_free(&half));
    FAILS(cadre_comm_rank(half, &hr), CADRE_ERR_STATE, "CADRE_COMM_NULL");
    OK(cadre_comm_free(&dup));
    EXPECT(t == CADRE_COMM_NULL, "no communicator written on failure");
    free(list);

    create_group_tests(me, np);

    OK(cadre_finalize());
    if (ru_failures)
        fprintf(stderr, "[rank %d] %d check(s) failed\n", me, ru_failures);
    else if (me == 0)
        printf("comm_test: ok\n");
    return ru_failures ? 1 : 0;
}
