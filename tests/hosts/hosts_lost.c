/* hosts_lost: a host lost under a loop of collectives (tests/hosts/
 * hosts-test.sh lost-kill and lost-cut). Errors return to the caller
 * (cadre_comm_set_errors), each rank prints "hosts_lost: rank R on HOST
 * looping" once its first allreduce is right, then loops until one fails;
 * the script meanwhile kills every rank of one host, or cuts its link. A
 * survivor prints when and how its pending allreduce failed (the wall clock,
 * to compare with the moment of the kill or the cut), then how a receive from
 * HOSTS_LOST_RANK (a rank of the lost host) fails, then finalizes and prints
 * "hosts_lost: rank R done": the script checks the times (within 10 s), that
 * the messages name the lost ranks and their host, and that survivors exit.
 * Without an error for HOSTS_LOST_WAIT seconds (default 120) it exits 1. */
#include <unistd.h>

#include "tests/ranks/rank_util.h"

#define W CADRE_COMM_WORLD

static double wall(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (cadre_init(&argc, &argv) != CADRE_SUCCESS) {
        fprintf(stderr, "hosts_lost: cadre_init: %s\n", cadre_last_error());
        return 1;
    }
    int me, np;
    cadre_comm_rank(W, &me);
    cadre_comm_size(W, &np);
    ru_rank = me;
    OK(cadre_comm_set_errors(W, CADRE_ERRORS_RETURN));
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    const char *e = getenv("HOSTS_LOST_RANK");
    int lost = e ? atoi(e) : -1;
    e = getenv("HOSTS_LOST_WAIT");
    double limit = e ? atof(e) : 120;
    enum { N = 65536 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    for (size_t i = 0; i < N; i++)
        x[i] = (float)(me + 1);
    const float want = (float)np * (float)(np + 1) / 2;
    int rc = CADRE_SUCCESS;
    long it;
    double t0 = ru_now();
    for (it = 0; ru_now() - t0 < limit; it++) {
        rc = cadre_allreduce(x, y, N, CADRE_FLOAT32, CADRE_SUM, W);
        if (rc != CADRE_SUCCESS)
            break;
        EXPECT(y[0] == want && y[N - 1] == want, "iteration %ld: %g %g, expected %g", it, y[0],
               y[N - 1], want);
        if (it == 0) {
            printf("hosts_lost: rank %d on %s looping\n", me, host);
            fflush(stdout);
        }
    }
    if (rc == CADRE_SUCCESS) {
        printf("hosts_lost: rank %d on %s: no error in %.0f s (%ld allreduces)\n", me, host, limit, it);
        return 1;
    }
    printf("hosts_lost: rank %d on %s: allreduce failed at %.3f (%s) at iteration %ld: %s\n", me, host,
           wall(), cadre_error_string(rc), it, cadre_last_error());
    fflush(stdout);
    if (lost >= 0 && lost < np && lost != me) {
        int v;
        double t = ru_now();
        rc = cadre_recv(&v, 1, CADRE_INT32, lost, 99, W, CADRE_STATUS_IGNORE);
        printf("hosts_lost: rank %d on %s: recv from rank %d failed after %.3f s (%s): %s\n", me, host,
               lost, ru_now() - t, cadre_error_string(rc), cadre_last_error());
        fflush(stdout);
    }
    rc = cadre_finalize();
    printf("hosts_lost: rank %d on %s done (finalize: %s)\n", me, host, cadre_error_string(rc));
    free(x);
    free(y);
    return ru_failures ? 1 : 0;
}
