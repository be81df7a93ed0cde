/* A direct collective that reads its peer's buffer with process_vm_readv
 * (coll_direct.c; here the two-rank reduce_scatter of 8 MiB blocks of
 * float16, whose reduction is slow enough for a stop to land in the middle
 * of the reads) must never return success with data its peer changed after
 * leaving the call. Run with CADRE_TIMEOUT=2.
 *
 * Rank 1 stops itself (SIGSTOP, from a thread of its own) once its first
 * output element is written, in the middle of reading rank 0's input (32
 * chunks of 256 KiB). Rank 0's call then times out in round 3, and rank 0,
 * whose buffers are its own again, writes other data into its input and
 * wakes rank 1 (SIGCONT). Rank 1 reads the rest of its block from the
 * changed input: its call must fail (CADRE_ERR_PEER: rank 0 left the call
 * while this rank read its buffers) or, where it had read everything before
 * it stopped, succeed with every element right.
 *
 * With READFAIL=free rank 0 frees its input instead (its pages unmapped),
 * and rank 1's next read finds no memory there: it must fail the same way
 * (CADRE_ERR_PEER naming rank 0), not as an internal error.
 *
 * Before that, a checked call with no stop. Prints "readfail_test: rank r
 * ok" and, at rank 1, whether its stop landed in the middle of its reads. */
#define _GNU_SOURCE
#include "rank_util.h"
#include "stop_self.h"

#define W CADRE_COMM_WORLD
#define N ((size_t)4 << 20) /* elements of a block: 8 MiB of float16 */
#define PATIENT 60.0

int main(int argc, char **argv)
{
    int me;
    const char *mode = getenv("READFAIL");
    int freeing = mode && !strcmp(mode, "free");
    if (!ru_init_np(&argc, &argv, "readfail_test", 2, &me))
        return 2;
    elem *in = malloc(2 * N * sizeof *in), *out = malloc(N * sizeof *out);
    EXPECT(in && out, "no memory");
    if (!in || !out)
        return 1;

    for (size_t i = 0; i < 2 * N; i++)
        in[i] = stop_input(me, i, 0);
    OK(cadre_reduce_scatter(in, out, N, CADRE_FLOAT16, CADRE_SUM, W));
    EXPECT(stop_wrong_sum(out, (size_t)me * N, N, 0) == 0, "checked call: %ld wrong elements",
           stop_wrong_sum(out, (size_t)me * N, N, 0));

    for (size_t i = 0; i < 2 * N; i++)
        in[i] = stop_input(me, i, 1);
    for (size_t i = 0; i < N; i++)
        out[i] = STOP_SENTINEL;
    struct stop_self st;
    struct waker wk;
    stop_begin(me, &st, &wk, out, 0);
    int rc = cadre_reduce_scatter(in, out, N, CADRE_FLOAT16, CADRE_SUM, W);
    if (me == 0) {
        if (rc == CADRE_SUCCESS)
            EXPECT(stop_wrong_sum(out, 0, N, 1) == 0, "call succeeded with %ld wrong elements",
                   stop_wrong_sum(out, 0, N, 1));
        else
            EXPECT(rc == CADRE_ERR_TIMEOUT, "call -> %s: %s", cadre_error_string(rc),
                   cadre_last_error());
        /* The buffers are this rank's again: other data, or none, then rank 1 goes on. */
        if (freeing) {
            free(in); /* 16 MiB: malloc's own mapping, unmapped */
            in = NULL;
        } else {
            for (size_t i = 0; i < 2 * N; i++)
                in[i] = stop_input(0, i, 2);
        }
        atomic_store(&wk.go, 1);
    } else {
        int stopped = stop_self_end(&st), mid = rc != CADRE_SUCCESS;
        if (rc == CADRE_SUCCESS)
            EXPECT(stop_wrong_sum(out, N, N, 1) == 0, "call succeeded with %ld wrong elements",
                   stop_wrong_sum(out, N, N, 1));
        else
            EXPECT(rc == CADRE_ERR_PEER, "call -> %s: %s", cadre_error_string(rc),
                   cadre_last_error());
        printf("readfail_test: rank 1 %s (%s)\n",
               mid ? "failed its call: stopped in the middle of reading rank 0's input"
                   : "finished its reads before it stopped",
               stopped ? "stopped" : "not stopped");
    }

    stop_finish(me, &wk, PATIENT);
    free(in);
    free(out);
    cadre_finalize();
    if (!ru_failures)
        printf("readfail_test: rank %d ok\n", me);
    return ru_failures != 0;
}
