/* Timeouts and their diagnosis (run by tests/unit/test_diag.c, with
 * CADRE_TIMEOUT=3 except where said). DIAG selects the scenario:
 *   coll_sleeper    the last rank never joins an allreduce (it sleeps); the
 *                   others fail with CADRE_ERR_TIMEOUT within 8 s, naming it
 *                   as missing and "not in cadre"
 *   coll_leaver     the same, but rank 0 runs with CADRE_TIMEOUT=1: it times
 *                   out, finalizes and exits before the others time out, and
 *                   they must still count it as arrived
 *   sub_sleeper     the same on a communicator of every rank but 0, whose
 *                   last member sleeps
 *   sub_leaver      sub_sleeper with rank 1 (the communicator's rank 0) at
 *                   CADRE_TIMEOUT=1: it times out, frees the communicator
 *                   and finalizes before the others time out, and they must
 *                   still count it as arrived (its count outlives the
 *                   communicator; under load sub_sleeper's ranks raced so)
 *   sub_freer       sub_leaver, but rank 1 stays (out of cadre) after it
 *                   freed the communicator: it answers the others' question
 *                   about it with its count
 *   recv_stuck      rank 0 receives from rank 1, which receives from rank 0 a
 *                   tag never sent: each names the deadlock, rank 1 after
 *                   rank 0 gave up (it said "rank 0 is not in cadre")
 *   waitall_stuck   the same with rank 1 in cadre_waitall: rank 0 names that
 *                   call and the receive it waits on
 *   barrier_sleeper (cadrerun --timeout, no CADRE_TIMEOUT) every rank but the
 *                   last waits in a barrier, the last sleeps
 *   any_finalized   (3 ranks) rank 0 sends to rank 2 and finalizes, rank 1
 *                   sleeps, rank 2 receives from any rank a tag never sent:
 *                   its summary says "rank 0 has called cadre_finalize"
 *                   (it said "rank 0 is has called ..."), then rank 1's state
 *   deadlock        (2 ranks) each receives from the other (tag 5) first,
 *                   rank 1 a second later; rank 0, timing out first, stays
 *                   out of cadre a while: both name the deadlock (rank 1
 *                   blamed rank 0's state when it asked: "not in cadre",
 *                   or "has called cadre_finalize" where rank 0 finalized)
 *   deadlock_wait   (cadrerun SIGINT, no CADRE_TIMEOUT) the same receives,
 *                   never failing: the job is stopped from outside
 *   barrier_skip    the last rank skips a barrier (it computes meanwhile);
 *                   the others fail naming it
 *   cond_stuck      (2 ranks) rank 0 probes for tag 7 from rank 1, rank 1
 *                   waits in cadre_waitany on a receive of tag 8 from rank
 *                   0: neither is ever sent; both fail by CADRE_TIMEOUT
 *                   (the waits on a condition, which CADRE_STUCK_WARN's
 *                   warning skipped)
 * Prints "diag: rank R ok" when its checks passed.
 *
 * A rank that stays out of cadre while the others time out and ask about it
 * (rest) stays until every other rank is done or rests too, not a fixed
 * while: each marks it with a file in the job's temp dir (cadrerun's
 * PMIX_SERVER_TMPDIR), "done" at the end of main before cadre_finalize,
 * "rest" as it starts resting. The fixed sleeps (CADRE_TIMEOUT + 4 s and
 * the like) stay as the limit; they were idle time once the others were
 * done, about 4 s a job, and on a loaded machine could end before a slow
 * rank had asked. Without that directory it sleeps them out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rank_util.h"

#define W CADRE_COMM_WORLD

static int me, np;
static double timeout_s;

/* Writes the mark `what` ("done", "rest") of this rank. */
static void mark(const char *what)
{
    const char *dir = getenv("PMIX_SERVER_TMPDIR");
    if (!dir)
        return;
    char path[4096];
    snprintf(path, sizeof path, "%s/diag-%s.%d", dir, what, me);
    FILE *f = fopen(path, "w");
    if (f)
        fclose(f);
}

static int marked(const char *what, int r)
{
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/diag-%s.%d", getenv("PMIX_SERVER_TMPDIR"), what, r);
    return stat(path, &st) == 0;
}

/* Out of cadre until every other rank is done or rests too, at most
 * limit_s seconds (the fixed sleep this replaces). */
static void rest(double limit_s)
{
    if (!getenv("PMIX_SERVER_TMPDIR")) {
        sleep((unsigned)limit_s);
        return;
    }
    mark("rest");
    double t0 = ru_now();
    while (ru_now() - t0 < limit_s) {
        int waiting = 0;
        for (int r = 0; r < np && !waiting; r++)
            waiting = r != me && !marked("done", r) && !marked("rest", r);
        if (!waiting)
            return;
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static void expect_text(const char *text)
{
    EXPECT(strstr(cadre_last_error(), text) != NULL, "cadre_last_error() \"%s\" lacks \"%s\"",
           cadre_last_error(), text);
}

static void sleeper(cadre_comm_t comm, int sleeper_rank)
{
    int r, n;
    OK(cadre_comm_rank(comm, &r));
    OK(cadre_comm_size(comm, &n));
    if (r == sleeper_rank) {
        /* Computing, never joining: the others give up meanwhile. */
        rest(timeout_s + 4);
        return;
    }
    int64_t x = r, sum = -1;
    double t0 = ru_now();
    int rc = cadre_allreduce(&x, &sum, 1, CADRE_INT64, CADRE_SUM, comm);
    double el = ru_now() - t0;
    EXPECT(rc == CADRE_ERR_TIMEOUT, "allreduce -> %s: %s", cadre_error_string(rc),
           cadre_last_error());
    EXPECT(el < 8, "failed after %.2f s", el);
    expect_text("made no progress");
    char want[96];
    snprintf(want, sizeof want, "(CADRE_TIMEOUT): waiting for rank %d", sleeper_rank);
    expect_text(want);
    snprintf(want, sizeof want, "(1 of %d missing), which is not in cadre for ", n);
    expect_text(want);
}

static void recv_stuck(void)
{
    int x = 0;
    if (me == 0) {
        FAILS(cadre_recv(&x, 1, CADRE_INT32, 1, 777, W, CADRE_STATUS_IGNORE), CADRE_ERR_TIMEOUT,
              "from rank 1 (tag 777) on WORLD made no progress");
        expect_text("a deadlock: rank 1 waits for this rank too (in cadre_recv from rank 0 (tag 778) "
                    "on WORLD for ");
        /* Out of cadre while rank 1 times out and asks about us. */
        rest(3);
    } else if (me == 1) {
        sleep(1);
        FAILS(cadre_recv(&x, 1, CADRE_INT32, 0, 778, W, CADRE_STATUS_IGNORE), CADRE_ERR_TIMEOUT,
              "from rank 0 (tag 778) on WORLD made no progress");
        expect_text("a deadlock: rank 0 waited for this rank too (in cadre_recv from rank 1 (tag "
                    "777) on WORLD) and gave up after ");
        expect_text("; now it is not in cadre for ");
    }
}

/* As recv_stuck, but rank 1 waits in cadre_waitall: on a request to itself,
 * done, and on the receive that never matches. */
static void waitall_stuck(void)
{
    int x = 0, y = 5, z = 0;
    if (me == 0) {
        FAILS(cadre_recv(&x, 1, CADRE_INT32, 1, 777, W, CADRE_STATUS_IGNORE), CADRE_ERR_TIMEOUT,
              "from rank 1 (tag 777) on WORLD made no progress");
        expect_text("rank 1 waits for this rank too (in cadre_waitall on cadre_irecv from rank 0 "
                    "(tag 778) on WORLD for ");
        rest(3);
    } else if (me == 1) {
        sleep(1);
        cadre_request_t r[3];
        OK(cadre_isend(&y, 1, CADRE_INT32, 1, 5, W, &r[0]));
        OK(cadre_irecv(&z, 1, CADRE_INT32, 1, 5, W, &r[1]));
        OK(cadre_irecv(&x, 1, CADRE_INT32, 0, 778, W, &r[2]));
        FAILS(cadre_waitall(3, r, NULL), CADRE_ERR_TIMEOUT,
              "cadre_waitall: reqs[2]: cadre_irecv from rank 0 (tag 778) on WORLD made no progress");
        expect_text("a deadlock: rank 0 waited for this rank too");
        expect_text("; now it is not in cadre for ");
        EXPECT(z == 5, "the message to itself: %d", z);
    }
}

static void any_finalized(void)
{
    int x = 7;
    OK(cadre_barrier(W));
    if (me == 0) {
        OK(cadre_send(&x, 1, CADRE_INT32, 2, 4, W));
        OK(cadre_finalize());
        rest(timeout_s + 3);
    } else if (me == 2) {
        OK(cadre_recv(&x, 1, CADRE_INT32, 0, 4, W, CADRE_STATUS_IGNORE));
        FAILS(cadre_recv(&x, 1, CADRE_INT32, CADRE_ANY_SOURCE, 5, W, CADRE_STATUS_IGNORE),
              CADRE_ERR_TIMEOUT, "from any rank (tag 5) on WORLD made no progress");
        expect_text("; rank 0 has called cadre_finalize; rank 1 is not in cadre for ");
    } else {
        rest(timeout_s + 3);
    }
}

/* Each rank receives from the other first: nothing is ever sent. */
static void deadlock(int expect_fail)
{
    int x = 0, peer = 1 - me;
    if (me > 1)
        return;
    if (me == 1 && expect_fail)
        sleep(1);
    int rc = cadre_recv(&x, 1, CADRE_INT32, peer, 5, W, CADRE_STATUS_IGNORE);
    if (!expect_fail)
        return;
    EXPECT(rc == CADRE_ERR_TIMEOUT, "recv -> %s: %s", cadre_error_string(rc), cadre_last_error());
    char want[128];
    snprintf(want, sizeof want, "cadre_recv: cadre_recv from rank %d (tag 5) on WORLD made no progress",
             peer);
    expect_text(want);
    snprintf(want, sizeof want, "(CADRE_TIMEOUT): a deadlock: rank %d wait", peer);
    expect_text(want);
    expect_text(" for this rank too (");
    /* Not the cause it named before (rank 0, which timed out first, had
     * finalized by the time rank 1 asked): at most a note after it. */
    const char *fin = strstr(cadre_last_error(), "has called cadre_finalize");
    EXPECT(!fin || fin > strstr(cadre_last_error(), "a deadlock"), "cadre_last_error() \"%s\"",
           cadre_last_error());
    /* Out of cadre while rank 1 times out and asks. */
    if (me == 0)
        rest(3);
}

static void cond_stuck(void)
{
    if (me > 1)
        return;
    if (me == 0) {
        FAILS(cadre_probe(1, 7, W, CADRE_STATUS_IGNORE), CADRE_ERR_TIMEOUT, "made no progress");
    } else {
        int x = 0, index = -1;
        cadre_request_t req;
        OK(cadre_irecv(&x, 1, CADRE_INT32, 0, 8, W, &req));
        FAILS(cadre_waitany(1, &req, &index, CADRE_STATUS_IGNORE), CADRE_ERR_TIMEOUT,
              "made no progress");
        EXPECT(index == 0, "waitany index %d", index);
    }
    /* Both out of the waits before either finalizes. */
    OK(cadre_barrier(W));
}

static void barrier_skip(void)
{
    if (me == np - 1) {
        rest(timeout_s + 3);
        return;
    }
    FAILS(cadre_barrier(W), CADRE_ERR_TIMEOUT, "made no progress");
    char want[128];
    snprintf(want, sizeof want,
             "(CADRE_TIMEOUT): waiting for rank %d (1 of %d missing), which is not in cadre for ",
             np - 1, np);
    expect_text(want);
}

int main(void)
{
    const char *what = getenv("DIAG"), *rank = getenv("CADRE_RANK");
    if (!what)
        what = "";
    if (!strcmp(what, "coll_leaver") && rank && !strcmp(rank, "0"))
        setenv("CADRE_TIMEOUT", "1", 1);
    if ((!strcmp(what, "sub_leaver") || !strcmp(what, "sub_freer")) && rank && !strcmp(rank, "1"))
        setenv("CADRE_TIMEOUT", "1", 1);
    OK(cadre_init(NULL, NULL));
    OK(cadre_comm_rank(W, &me));
    OK(cadre_comm_size(W, &np));
    ru_rank = me;
    const char *t = getenv("CADRE_TIMEOUT");
    timeout_s = t ? atof(t) : 600;
    if (!strcmp(what, "coll_sleeper") || !strcmp(what, "coll_leaver")) {
        sleeper(W, np - 1);
    } else if (!strcmp(what, "sub_sleeper") || !strcmp(what, "sub_leaver") ||
               !strcmp(what, "sub_freer")) {
        /* Ranks 1..np-1 in a communicator of their own; its last sleeps. */
        cadre_comm_t sub;
        OK(cadre_comm_split(W, me == 0 ? CADRE_UNDEFINED : 1, me, &sub));
        if (sub != CADRE_COMM_NULL) {
            sleeper(sub, np - 2);
            OK(cadre_comm_free(&sub));
        }
        /* sub_freer: the rank that gave up stays, out of cadre, while the
         * others time out and ask it about the communicator it freed. */
        if (!strcmp(what, "sub_freer") && me == 1)
            rest(5);
    } else if (!strcmp(what, "recv_stuck")) {
        recv_stuck();
    } else if (!strcmp(what, "waitall_stuck")) {
        waitall_stuck();
    } else if (!strcmp(what, "barrier_sleeper")) {
        printf("diag: rank %d ready\n", me);
        fflush(stdout);
        if (me == np - 1)
            sleep(60);
        else
            OK(cadre_barrier(W));
    } else if (!strcmp(what, "any_finalized")) {
        any_finalized();
    } else if (!strcmp(what, "deadlock") || !strcmp(what, "deadlock_wait")) {
        deadlock(!strcmp(what, "deadlock"));
    } else if (!strcmp(what, "barrier_skip")) {
        barrier_skip();
    } else if (!strcmp(what, "cond_stuck")) {
        cond_stuck();
    } else {
        EXPECT(0, "unknown DIAG=\"%s\"", what);
    }
    if (!ru_failures)
        printf("diag: rank %d ok\n", me);
    fflush(stdout);
    mark("done");
    int init = 0;
    cadre_initialized(&init);
    if (init)
        cadre_finalize();
    return ru_failures ? 1 : 0;
}
