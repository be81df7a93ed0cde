/* The two-rank allreduce of a busy machine from staged inputs
 * (coll_direct_pair.c, allreduce_pair_staged; run with CADRE_WAIT=sleep,
 * which counts the cores as busy, CADRE_PAIR_STAGE=8388608 and
 * CADRE_TIMEOUT=2): each rank copies its input into its shared-memory stage
 * area at the call and reduces from the peer's copy. A reader must never
 * return a result made of two calls' data with success. With the default
 * CADRE_PAIR_STAGE the ranks claim chunks instead, out of place from the
 * half of the peer's input it staged for them (rank 0's back half for rank
 * 1): the same case, on that half.
 *
 * Rank 1 stops itself (SIGSTOP, from a thread of its own) as soon as its
 * first output element changes, in the middle of reading rank 0's copy (32
 * chunks of 256 KiB of float16). Rank 0's call then times out in round 3 (CADRE_TIMEOUT),
 * and rank 0 makes the next call with other data, which copies that data
 * over its stage area; a thread of rank 0 wakes rank 1 (SIGCONT) from 0.3 s
 * after that call started on (or 5 s after call 1 started, where rank 1
 * stopped in the middle of a write into rank 0's output in the claims, for
 * which rank 0's call 1 waits before it returns). Rank 1's first call must then fail (CADRE_ERR_PEER: rank
 * 0 left the call while rank 1 read its copy) or, where it had read everything
 * before it stopped, succeed with every element right. Rank 1 then makes the
 * second call too, and both check its result where it succeeds (rank 0's
 * waits CADRE_TIMEOUT for rank 1, which comes 0.3 s late).
 *
 * Before that, a checked call of each kind with no stop: out of place and in
 * place. Prints "stagefail_test: rank r ok" and, at rank 1, whether its stop
 * landed in the middle of its reads (the case under test) or after them. */
#define _GNU_SOURCE
#include "rank_util.h"
#include "stop_self.h"

#define W CADRE_COMM_WORLD
#define N ((size_t)4 << 20) /* 8 MiB of float16, the largest CADRE_PAIR_STAGE */
#define PATIENT 60.0        /* s, for the waits outside CADRE_TIMEOUT */

int main(int argc, char **argv)
{
    int me;
    if (!ru_init_np(&argc, &argv, "stagefail_test", 2, &me))
        return 2;
    elem *in = malloc(N * sizeof *in), *out = malloc(N * sizeof *out);
    EXPECT(in && out, "no memory");
    if (!in || !out)
        return 1;

    /* Checked calls, out of place and in place, no stop. */
    for (size_t i = 0; i < N; i++)
        in[i] = stop_input(me, i, 0);
    OK(cadre_allreduce(in, out, N, CADRE_FLOAT16, CADRE_SUM, W));
    EXPECT(stop_wrong_sum(out, 0, N, 0) == 0, "out of place: %ld wrong elements",
           stop_wrong_sum(out, 0, N, 0));
    for (size_t i = 0; i < N; i++)
        out[i] = stop_input(me, i, 0);
    OK(cadre_allreduce(CADRE_IN_PLACE, out, N, CADRE_FLOAT16, CADRE_SUM, W));
    EXPECT(stop_wrong_sum(out, 0, N, 0) == 0, "in place: %ld wrong elements",
           stop_wrong_sum(out, 0, N, 0));

    /* Call 1: rank 1 stops in the middle of its reads. */
    for (size_t i = 0; i < N; i++) {
        in[i] = stop_input(me, i, 1);
        out[i] = STOP_SENTINEL;
    }
    struct stop_self st;
    struct waker wk;
    stop_begin(me, &st, &wk, out, 300000);
    int rc = cadre_allreduce(in, out, N, CADRE_FLOAT16, CADRE_SUM, W);
    int mid = 0;
    if (me == 1) {
        int stopped = stop_self_end(&st);
        if (rc == CADRE_SUCCESS) {
            EXPECT(stop_wrong_sum(out, 0, N, 1) == 0, "call 1 succeeded with %ld wrong elements",
                   stop_wrong_sum(out, 0, N, 1));
        } else {
            EXPECT(rc == CADRE_ERR_PEER, "call 1 -> %s: %s", cadre_error_string(rc),
                   cadre_last_error());
            mid = 1;
        }
        printf("stagefail_test: rank 1 %s (%s)\n",
               mid ? "failed its call: stopped in the middle of reading rank 0's copy"
                   : "finished its reads before it stopped",
               stopped ? "stopped" : "not stopped");
    } else {
        /* Rank 1 stopped before its round 3, or after it: either is fine. */
        if (rc == CADRE_SUCCESS)
            EXPECT(stop_wrong_sum(out, 0, N, 1) == 0, "call 1 succeeded with %ld wrong elements",
                   stop_wrong_sum(out, 0, N, 1));
        else
            EXPECT(rc == CADRE_ERR_TIMEOUT, "call 1 -> %s: %s", cadre_error_string(rc),
                   cadre_last_error());
    }

    /* Call 2, other data: at rank 0 it copies over the stage area while rank
     * 1 is still stopped; its thread wakes rank 1 0.3 s later. */
    for (size_t i = 0; i < N; i++) {
        in[i] = stop_input(me, i, 2);
        out[i] = STOP_SENTINEL;
    }
    if (me == 0)
        atomic_store(&wk.go, 1);
    rc = cadre_allreduce(in, out, N, CADRE_FLOAT16, CADRE_SUM, W);
    if (rc == CADRE_SUCCESS)
        EXPECT(stop_wrong_sum(out, 0, N, 2) == 0, "call 2 succeeded with %ld wrong elements",
               stop_wrong_sum(out, 0, N, 2));
    else
        EXPECT(rc == CADRE_ERR_TIMEOUT || rc == CADRE_ERR_PEER, "call 2 -> %s: %s",
               cadre_error_string(rc), cadre_last_error());

    stop_finish(me, &wk, PATIENT);
    free(in);
    free(out);
    cadre_finalize();
    if (!ru_failures)
        printf("stagefail_test: rank %d ok\n", me);
    return ru_failures != 0;
}
