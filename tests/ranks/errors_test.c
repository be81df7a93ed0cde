/* Error modes (CADRE_ERRORS, cadre_comm_set_errors): what a failing call
 * writes to stderr. The driver is tests/unit/test_errors.c, which runs this
 * program under cadrerun with ERRTEST naming the case and counts the lines
 * on stderr; this side checks the statuses and the modes.
 *   send      every rank sends to rank 99: CADRE_ERR_ARG (run with the
 *             default, CADRE_ERRORS=return and CADRE_ERRORS=abort)
 *   override  world keeps the mode of the environment; a dup gets the other
 *             one (return <-> warn); a dup and a split of the dup inherit
 *             it; a dup made before world's mode changes keeps the old one.
 *             Each failing send names its own dst (98 .. 94), so the driver
 *             can tell which were reported
 *   abort_dup CADRE_ERRORS=return; a dup set to abort: its failing send
 *             ends the job, world's does not
 *   quiet     expected results are not reported: cadre_wait_timeout's
 *             CADRE_ERR_TIMEOUT, cadre_test's not-done; a failing
 *             cadre_comm_set_errors (mode 7) is
 *   internal  the last rank never joins a cadre_comm_split, whose
 *             allgather inside times out (CADRE_TIMEOUT=2), then an
 *             allreduce the same way: each call fails once and is reported
 *             once, as the call the program made
 * Prints "errors: rank R ok" when its checks passed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rank_util.h"

#define W CADRE_COMM_WORLD

static int me, np;

static void send_to(int dst, cadre_comm_t comm)
{
    int x = 1;
    char want[64];
    snprintf(want, sizeof want, "dst %d out of range", dst);
    FAILS(cadre_send(&x, 1, CADRE_INT32, dst, 0, comm), CADRE_ERR_ARG, want);
}

static int mode_of(cadre_comm_t comm)
{
    int m = -1;
    OK(cadre_comm_get_errors(comm, &m));
    return m;
}

static void override(void)
{
    int base = mode_of(W);
    EXPECT(base == CADRE_ERRORS_WARN || base == CADRE_ERRORS_RETURN, "world's mode %d", base);
    int other = base == CADRE_ERRORS_WARN ? CADRE_ERRORS_RETURN : CADRE_ERRORS_WARN;
    cadre_comm_t dup, dupdup, split, before;
    OK(cadre_comm_dup(W, &dup));
    EXPECT(mode_of(dup) == base, "a dup of world starts with %d, world has %d", mode_of(dup),
           base);
    OK(cadre_comm_set_errors(dup, other));
    EXPECT(mode_of(dup) == other, "set %d, got %d", other, mode_of(dup));
    EXPECT(mode_of(W) == base, "world's mode changed to %d", mode_of(W));
    OK(cadre_comm_dup(dup, &dupdup));
    OK(cadre_comm_split(dup, me % 2, me, &split));
    OK(cadre_comm_dup(W, &before));
    EXPECT(mode_of(dupdup) == other && mode_of(split) == other,
           "dup and split of the dup: %d and %d, expected %d", mode_of(dupdup), mode_of(split),
           other);

    send_to(98, W);      /* reported iff base is warn */
    send_to(97, dup);    /* iff other is warn */
    send_to(96, dupdup); /* as dup */
    send_to(95, split);  /* as dup */

    /* World changes; a communicator made before keeps what it got. */
    OK(cadre_comm_set_errors(W, other));
    EXPECT(mode_of(before) == base, "changing world changed an older dup to %d",
           mode_of(before));
    send_to(94, before); /* iff base is warn */
    OK(cadre_comm_set_errors(W, base));

    OK(cadre_comm_free(&before));
    OK(cadre_comm_free(&split));
    OK(cadre_comm_free(&dupdup));
    OK(cadre_comm_free(&dup));
}

static void abort_dup(void)
{
    EXPECT(mode_of(W) == CADRE_ERRORS_RETURN, "world's mode %d", mode_of(W));
    cadre_comm_t dup;
    OK(cadre_comm_dup(W, &dup));
    OK(cadre_comm_set_errors(dup, CADRE_ERRORS_ABORT));
    send_to(98, W); /* silent, returns */
    OK(cadre_barrier(W));
    if (me == np - 1) {
        int x = 1;
        cadre_send(&x, 1, CADRE_INT32, 97, 0, dup);
        fprintf(stderr, "errors: rank %d: cadre_send returned under CADRE_ERRORS_ABORT\n", me);
        ru_failures++;
    } else {
        /* Waits for the abort to end it. */
        sleep(30);
    }
}

static void quiet(void)
{
    /* Rank 0 receives what rank 1 sends only after the barrier. */
    if (me == 0) {
        int x = 0;
        cadre_request_t r;
        OK(cadre_irecv(&x, 1, CADRE_INT32, 1, 5, W, &r));
        int done = -1;
        OK(cadre_test(&r, &done, CADRE_STATUS_IGNORE));
        EXPECT(done == 0, "test: done %d before the send", done);
        FAILS(cadre_wait_timeout(&r, 0.05, CADRE_STATUS_IGNORE), CADRE_ERR_TIMEOUT,
              "not complete after");
        OK(cadre_barrier(W));
        OK(cadre_wait(&r, CADRE_STATUS_IGNORE));
        EXPECT(x == 42, "received %d", x);
    } else {
        OK(cadre_barrier(W));
        if (me == 1) {
            int x = 42;
            OK(cadre_send(&x, 1, CADRE_INT32, 0, 5, W));
        }
    }
    FAILS(cadre_comm_set_errors(W, 7), CADRE_ERR_ARG, "mode 7 is not");
    EXPECT(mode_of(W) == CADRE_ERRORS_WARN, "a failed set changed the mode to %d", mode_of(W));
}

/* The last rank (CADRE_TIMEOUT=120 for itself, set by main) waits in a
 * receive from rank 0 instead of joining: the others give up meanwhile, and
 * rank 0 tells it when they all are done, however slow the machine, so that
 * no rank finalizes while another still waits. */
static void internal(void)
{
    int go = 0, done = 1;
    if (me == np - 1) {
        OK(cadre_recv(&go, 1, CADRE_INT32, 0, 99, W, CADRE_STATUS_IGNORE));
        EXPECT(go == 1, "rank 0 sent %d", go);
        return;
    }
    cadre_comm_t sub = CADRE_COMM_NULL;
    FAILS(cadre_comm_split(W, 0, me, &sub), CADRE_ERR_TIMEOUT, "made no progress");
    EXPECT(sub == CADRE_COMM_NULL, "a failed split wrote %p", (void *)sub);
    int64_t x = me, sum = -1;
    FAILS(cadre_allreduce(&x, &sum, 1, CADRE_INT64, CADRE_SUM, W), CADRE_ERR_TIMEOUT,
          "made no progress");
    if (me == 0) {
        for (int r = 1; r < np - 1; r++) {
            OK(cadre_recv(&done, 1, CADRE_INT32, r, 98, W, CADRE_STATUS_IGNORE));
            EXPECT(done == 1, "rank %d sent %d", r, done);
        }
        go = 1;
        for (int r = 1; r < np; r++)
            OK(cadre_send(&go, 1, CADRE_INT32, r, 99, W));
    } else {
        OK(cadre_send(&done, 1, CADRE_INT32, 0, 98, W));
        OK(cadre_recv(&go, 1, CADRE_INT32, 0, 99, W, CADRE_STATUS_IGNORE));
    }
}

int main(void)
{
    const char *what = getenv("ERRTEST"), *rank = getenv("CADRE_RANK"),
               *size = getenv("CADRE_WORLD_SIZE");
    if (!what)
        what = "";
    if (!strcmp(what, "internal") && rank && size && atoi(rank) == atoi(size) - 1)
        setenv("CADRE_TIMEOUT", "120", 1);
    OK(cadre_init(NULL, NULL));
    OK(cadre_comm_rank(W, &me));
    OK(cadre_comm_size(W, &np));
    ru_rank = me;
    if (!strcmp(what, "send")) {
        send_to(99, W);
    } else if (!strcmp(what, "override")) {
        override();
    } else if (!strcmp(what, "abort_dup")) {
        abort_dup();
    } else if (!strcmp(what, "quiet")) {
        quiet();
    } else if (!strcmp(what, "internal")) {
        internal();
    } else {
        fprintf(stderr, "errors_test: unknown ERRTEST \"%s\"\n", what);
        return 2;
    }
    if (strcmp(what, "internal") != 0)
        OK(cadre_barrier(W));
    OK(cadre_finalize());
    if (ru_failures == 0)
        printf("errors: rank %d ok\n", me);
    return ru_failures ? 1 : 0;
}
