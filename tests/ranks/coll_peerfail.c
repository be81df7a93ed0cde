/* A rank killed in a loop of collectives (issue 5): under cadrerun
 * --keep-going, rank 2 of 4 SIGKILLs itself at the start of iteration 5 of a
 * loop of allreduces; every survivor's allreduce must fail with
 * CADRE_ERR_PEER within 5 s, naming rank 2, and the survivors must finalize.
 * COLL_PEERFAIL_COUNT sets the float count (default 4Mi: 16 MiB). Each
 * survivor prints "coll_peerfail: rank R ok". */
#include <signal.h>
#include <unistd.h>

#include "rank_util.h"

#define W CADRE_COMM_WORLD

int main(int argc, char **argv)
{
    if (cadre_init(&argc, &argv) != CADRE_SUCCESS) {
        fprintf(stderr, "coll_peerfail: cadre_init: %s\n", cadre_last_error());
        return 1;
    }
    int me, np;
    cadre_comm_rank(W, &me);
    cadre_comm_size(W, &np);
    ru_rank = me;
    const char *c = getenv("COLL_PEERFAIL_COUNT");
    size_t n = c ? strtoul(c, NULL, 0) : (size_t)4 << 20;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    for (size_t i = 0; i < n; i++)
        x[i] = 1.0f;
    int rc = CADRE_SUCCESS, it;
    double t0 = 0;
    for (it = 0; it < 1000; it++) {
        if (me == 2 && it == 5)
            raise(SIGKILL);
        t0 = ru_now();
        rc = cadre_allreduce(x, y, n, CADRE_FLOAT32, CADRE_SUM, W);
        if (rc != CADRE_SUCCESS)
            break;
        EXPECT(y[n - 1] == (float)np, "iteration %d: %g", it, y[n - 1]);
    }
    double t = ru_now() - t0;
    EXPECT(rc == CADRE_ERR_PEER, "allreduce returned %s at iteration %d: %s",
           cadre_error_string(rc), it, cadre_last_error());
    EXPECT(strstr(cadre_last_error(), "rank 2"), "message: %s", cadre_last_error());
    EXPECT(t < 5.0, "CADRE_ERR_PEER after %.2f s", t);
    /* Rank 2's last messages of iteration 4 may die with it. */
    EXPECT(it >= 4, "failed at iteration %d", it);
    /* Later collectives on the world fail at once. */
    t0 = ru_now();
    EXPECT(cadre_barrier(W) == CADRE_ERR_PEER, "barrier after the failure: %s", cadre_last_error());
    EXPECT(ru_now() - t0 < 5.0, "barrier took %.2f s", ru_now() - t0);
    OK(cadre_finalize());
    free(x);
    free(y);
    if (!ru_failures)
        printf("coll_peerfail: rank %d saw CADRE_ERR_PEER after %.3f s\ncoll_peerfail: rank %d ok\n",
               me, t, me);
    return ru_failures ? 1 : 0;
}
