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
 * Before that, a checked call with no stop. Prints "readfail_test: rank r
 * ok" and, at rank 1, whether its stop landed in the middle of its reads. */
#define _GNU_SOURCE
#include <errno.h>

#include "rank_util.h"
#include "stop_self.h"

#define W CADRE_COMM_WORLD
typedef _Float16 elem;     /* every value and sum below is exact in it */
#define N ((size_t)4 << 20) /* elements of a block: 8 MiB */
#define PATIENT 60.0

static const elem SENTINEL = (elem)-1234.0f;

static elem input(int rank, size_t i, int call)
{
    return (elem)((i * 7 + (size_t)rank * 13 + (size_t)call * 101) % 1000) - 500;
}

/* Wrong elements of rank `me`'s block of call `call`. */
static long wrong_block(const elem *out, int me, int call)
{
    long wrong = 0;
    for (size_t i = 0; i < N; i++) {
        size_t j = (size_t)me * N + i;
        wrong += out[i] != (elem)((float)input(0, j, call) + (float)input(1, j, call));
    }
    return wrong;
}

int main(int argc, char **argv)
{
    int me;
    if (!ru_init_np(&argc, &argv, "readfail_test", 2, &me))
        return 2;
    elem *in = malloc(2 * N * sizeof *in), *out = malloc(N * sizeof *out);
    EXPECT(in && out, "no memory");
    if (!in || !out)
        return 1;

    for (size_t i = 0; i < 2 * N; i++)
        in[i] = input(me, i, 0);
    OK(cadre_reduce_scatter(in, out, N, CADRE_FLOAT16, CADRE_SUM, W));
    EXPECT(wrong_block(out, me, 0) == 0, "checked call: %ld wrong elements",
           wrong_block(out, me, 0));

    int pid = (int)getpid(), pid1 = 0;
    OK(cadre_bcast(me == 1 ? &pid : &pid1, 1, CADRE_INT32, 1, W));

    for (size_t i = 0; i < 2 * N; i++)
        in[i] = input(me, i, 1);
    for (size_t i = 0; i < N; i++)
        out[i] = SENTINEL;
    struct stop_self st;
    struct waker wk;
    if (me == 1)
        stop_self_start(&st, out);
    else
        waker_start(&wk, (pid_t)pid1, 0);
    int rc = cadre_reduce_scatter(in, out, N, CADRE_FLOAT16, CADRE_SUM, W);
    if (me == 0) {
        if (rc == CADRE_SUCCESS)
            EXPECT(wrong_block(out, 0, 1) == 0, "call succeeded with %ld wrong elements",
                   wrong_block(out, 0, 1));
        else
            EXPECT(rc == CADRE_ERR_TIMEOUT, "call -> %s: %s", cadre_error_string(rc),
                   cadre_last_error());
        /* The buffers are this rank's again: other data, then rank 1 goes on. */
        for (size_t i = 0; i < 2 * N; i++)
            in[i] = input(0, i, 2);
        atomic_store(&wk.go, 1);
    } else {
        int stopped = stop_self_end(&st), mid = rc != CADRE_SUCCESS;
        if (rc == CADRE_SUCCESS)
            EXPECT(wrong_block(out, 1, 1) == 0, "call succeeded with %ld wrong elements",
                   wrong_block(out, 1, 1));
        else
            EXPECT(rc == CADRE_ERR_PEER, "call -> %s: %s", cadre_error_string(rc),
                   cadre_last_error());
        printf("readfail_test: rank 1 %s (%s)\n",
               mid ? "failed its call: stopped in the middle of reading rank 0's input"
                   : "finished its reads before it stopped",
               stopped ? "stopped" : "not stopped");
    }

    int x = 0;
    cadre_request_t r;
    if (me == 1)
        OK(cadre_isend(&x, 1, CADRE_INT32, 0, 1, W, &r));
    else
        OK(cadre_irecv(&x, 1, CADRE_INT32, 1, 1, W, &r));
    OK(cadre_wait_timeout(&r, PATIENT, CADRE_STATUS_IGNORE));
    if (me == 0)
        waker_end(&wk);
    free(in);
    free(out);
    cadre_finalize();
    if (!ru_failures)
        printf("readfail_test: rank %d ok\n", me);
    return ru_failures != 0;
}
