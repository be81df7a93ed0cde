/* The program of the select suite's log test (tests/unit/test_select.c):
 * allreduces of 8 and 12 bytes (one size class) and of 16 MiB and 16 MiB
 * plus 4 bytes (another), ten of each, every result checked. With
 * CADRE_DEBUG=INFO CADRE_DEBUG_SUBSYS=COLL each rank should log one line
 * per class. With SELECT_MISMATCH=<CADRE_ALGO value> rank 0 sets CADRE_ALGO to
 * it after cadre_init (which refuses ranks set otherwise) and before its
 * first collective, which reads it: one 16 MiB allreduce must fail with a
 * mismatch on every rank (the rank that finds it says the ranks chose
 * different algorithms). */
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
