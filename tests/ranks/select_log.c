/* The program of the select suite's log test (tests/unit/test_select.c):
 * allreduces of 8 and 12 bytes (one size class) and of 16 MiB and 16 MiB
 * plus 4 bytes (another), ten of each, every result checked. With
 * CADRE_DEBUG=INFO CADRE_DEBUG_SUBSYS=COLL each rank should log one line
 * per class. With SELECT_MISMATCH=<CADRE_ALGO value> rank 0 sets CADRE_ALGO to
 * it after cadre_init (which refuses ranks set otherwise) and before its
 * first collective, which reads it: one 16 MiB allreduce must fail with a
 * mismatch on every rank (the rank that finds it says the ranks chose
 * different algorithms). SELECT_V: the v-variants instead (run_v). */
#include <string.h>

#include "rank_util.h"

static void run(size_t count, int me, int n)
{
    int32_t *in = malloc(count * sizeof *in), *out = malloc(count * sizeof *out);
    EXPECT(in && out, "no memory for %zu elements", count);
    if (!in || !out)
        exit(1);
    for (int it = 0; it < 10; it++) {
        for (size_t i = 0; i < count; i++)
            in[i] = (int32_t)(i % 1000) * (me + 1) + it;
        OK(cadre_allreduce(in, out, count, CADRE_INT32, CADRE_SUM, CADRE_COMM_WORLD));
        size_t bad = 0;
        /* sum over ranks r of (i%1000)*(r+1) + it */
        for (size_t i = 0; i < count; i++)
            bad += out[i] != (int32_t)(i % 1000) * (n * (n + 1) / 2) + it * n;
        EXPECT(bad == 0, "%zu of %zu elements wrong (count %zu, call %d)", bad, count, count, it);
    }
    free(in);
    free(out);
}

/* SELECT_V: a gatherv, scatterv and alltoallv of a few elements (rank r
 * sends r + 1 to each rank), blocking (the slots) and an igatherv (the
 * messages), every result checked. */
static void run_v(int me, int n)
{
    size_t un = (size_t)n, *cnt = calloc(un, sizeof *cnt), *dis = calloc(un, sizeof *dis);
    size_t *sc = calloc(un, sizeof *sc), *sd = calloc(un, sizeof *sd), t = 0;
    int32_t in[64], out[64 * 8];
    if (!cnt || !dis || !sc || !sd || n > 8)
        exit(1);
    for (int r = 0; r < n; r++)
        cnt[r] = (size_t)r + 1, dis[r] = t, t += cnt[r], sc[r] = (size_t)me + 1,
        sd[r] = (size_t)r * sc[r];
    for (int i = 0; i < 64; i++)
        in[i] = me * 100 + i;
    for (int nb = 0; nb < 2; nb++) {
        cadre_request_t rq = CADRE_REQUEST_NULL;
        memset(out, 0, sizeof out);
        OK(nb ? cadre_igatherv(in, (size_t)me + 1, out, cnt, dis, CADRE_INT32, 0,
                               CADRE_COMM_WORLD, &rq)
              : cadre_gatherv(in, (size_t)me + 1, out, cnt, dis, CADRE_INT32, 0,
                              CADRE_COMM_WORLD));
        if (nb)
            OK(cadre_wait(&rq, NULL));
        for (int r = 0; me == 0 && r < n; r++)
            for (size_t i = 0; i < cnt[r]; i++)
                EXPECT(out[dis[r] + i] == r * 100 + (int)i, "gatherv nb=%d from %d [%zu]", nb, r,
                       i);
    }
    OK(cadre_scatterv(in, cnt, dis, out, (size_t)me + 1, CADRE_INT32, 0, CADRE_COMM_WORLD));
    for (int i = 0; i <= me; i++)
        EXPECT(out[i] == (int)dis[me] + i, "scatterv [%d]", i);
    OK(cadre_alltoallv(in, sc, sd, out, cnt, dis, CADRE_INT32, CADRE_COMM_WORLD));
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < cnt[r]; i++)
            EXPECT(out[dis[r] + i] == r * 100 + (int)(me * cnt[r] + i), "alltoallv from %d [%zu]",
                   r, i);
    free(cnt), free(dis), free(sc), free(sd);
}

int main(int argc, char **argv)
{
    OK(cadre_init(&argc, &argv));
    int me, n;
    cadre_comm_rank(CADRE_COMM_WORLD, &me);
    cadre_comm_size(CADRE_COMM_WORLD, &n);
    ru_rank = me;
    if (getenv("SELECT_MISMATCH")) {
        if (me == 0)
            setenv("CADRE_ALGO", getenv("SELECT_MISMATCH"), 1);
        size_t count = (size_t)4 << 20;
        int32_t *in = calloc(count, sizeof *in), *out = calloc(count, sizeof *out);
        EXPECT(in && out, "no memory");
        if (!in || !out)
            return 1;
        int rc = cadre_allreduce(in, out, count, CADRE_INT32, CADRE_SUM, CADRE_COMM_WORLD);
        EXPECT(rc == CADRE_ERR_MISMATCH, "%s: %s", cadre_error_string(rc), cadre_last_error());
        printf("select_log: rank %d: %s\n", me, cadre_last_error());
        free(in);
        free(out);
        cadre_finalize();
        if (ru_failures)
            return 1;
        printf("select_log: rank %d ok\n", me);
        return 0;
    }
    if (getenv("SELECT_V")) {
        run_v(me, n);
        OK(cadre_finalize());
        if (ru_failures)
            return 1;
        printf("select_log: rank %d ok\n", me);
        return 0;
    }
    run(2, me, n);
    run(3, me, n);
    run((size_t)4 << 20, me, n);
    run(((size_t)4 << 20) + 1, me, n);
    OK(cadre_finalize());
    if (ru_failures)
        return 1;
    printf("select_log: rank %d ok\n", me);
    return 0;
}
