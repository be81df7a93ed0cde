/* Communicators: split, create, dup, free, world_rank; collectives and
 * point-to-point on them; many at once; nonblocking collectives in flight on
 * several; bad input. Every rank checks its results against what it computes
 * from the world rank numbers. */
#include "rank_util.h"

#define W CADRE_COMM_WORLD

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

    OK(cadre_finalize());
    if (ru_failures)
        fprintf(stderr, "[rank %d] %d check(s) failed\n", me, ru_failures);
    else if (me == 0)
        printf("comm_test: ok\n");
    return ru_failures ? 1 : 0;
}
