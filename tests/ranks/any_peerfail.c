/* A rank's death reaches every survivor and every communicator (issue 14).
 * Under cadrerun --keep-going with 3 or 4 ranks, the last rank D dies
 * (ANY_PEERFAIL_DEATH=kill: SIGKILL; exit: exit(0) without cadre_finalize)
 * 0.3 s after a barrier, while the others wait in calls that need it only
 * indirectly:
 *   rank 0: irecv(ANY_SOURCE) on a dup of the world, then recv(ANY_SOURCE)
 *           on the world (nobody sends: only D's death can end them);
 *   rank 1: bcast from root 0 on the world (its partner, rank 0, is alive
 *           but elsewhere);
 *   rank 2 (4 ranks): iallreduce on the dup, then wait.
 * Each must fail with CADRE_ERR_PEER naming rank D within 10 s (5 s promised,
 * slack for a loaded machine), by what its own library sees: rank 0 calls
 * no collective until the others' calls have failed. Afterwards every survivor checks that later
 * calls fail at once the same way (ANY_SOURCE receives, blocking and
 * nonblocking; collectives on the world, the dup, a split and a created
 * communicator containing D) and that what does not need D still works:
 * point-to-point between ranks 0 and 1 with data checked, and with 4 ranks
 * an allreduce and an ANY_SOURCE receive on the split {1, 2} that D is not
 * in. Each survivor prints "any_peerfail: rank R ok".
 * ANY_PEERFAIL_DEATH=finalize: D calls cadre_finalize and exits 0 instead,
 * which is no failure: a receive from ANY_SOURCE posted on the dup before,
 * and one on the world after D has gone (1.5 s later), take what rank 1
 * sends, and with 4 ranks the split {1, 2} still works. */
#include <signal.h>
#include <unistd.h>

#include "rank_util.h"

#define W CADRE_COMM_WORLD
#define BOUND 10.0 /* the 5 s promised, with slack for a loaded machine */

static char dead_text[64];

/* A call that must fail with CADRE_ERR_PEER naming the dead rank, within BOUND
 * of t0. */
#define DIES(call, t0)                                                                 \
    do {                                                                               \
        FAILS(call, CADRE_ERR_PEER, dead_text);                                        \
        double dt_ = ru_now() - (t0);                                                  \
        EXPECT(dt_ < BOUND, "%s failed after %.2f s", #call, dt_);                     \
    } while (0)

/* {1, 2} (4 ranks): an allreduce and an ANY_SOURCE receive, data checked. */
static void alive_split(int me, int np, cadre_comm_t split)
{
    if (np != 4 || (me != 1 && me != 2))
        return;
    int sr;
    OK(cadre_comm_rank(split, &sr));
    int64_t a = me, b = -1;
    OK(cadre_allreduce(&a, &b, 1, CADRE_INT64, CADRE_SUM, split));
    EXPECT(b == 3, "allreduce on {1, 2}: %lld", (long long)b);
    int v = -1;
    if (sr == 0) {
        cadre_request_t r;
        cadre_status_t st;
        OK(cadre_irecv(&v, 1, CADRE_INT32, CADRE_ANY_SOURCE, 9, split, &r));
        OK(cadre_wait(&r, &st));
        EXPECT(v == 4242 && st.source == 1, "ANY_SOURCE on {1, 2}: %d from %d", v, st.source);
    } else {
        v = 4242;
        OK(cadre_send(&v, 1, CADRE_INT32, 0, 9, split));
    }
}

static int finish(int me, cadre_comm_t dup, cadre_comm_t split, cadre_comm_t made, const char *what)
{
    OK(cadre_comm_free(&dup));
    OK(cadre_comm_free(&split));
    if (made != CADRE_COMM_NULL)
        OK(cadre_comm_free(&made));
    OK(cadre_finalize());
    if (ru_failures) {
        fprintf(stderr, "[rank %d] %d check(s) failed\n", me, ru_failures);
        return 1;
    }
    printf("any_peerfail: rank %d %s\nany_peerfail: rank %d ok\n", me, what, me);
    return 0;
}

/* D finalizes and exits: nothing fails that does not need it. */
static int finalized(int me, int np, cadre_comm_t dup, cadre_comm_t split, cadre_comm_t made)
{
    const int D = np - 1;
    if (me == D) {
        /* D's own communicators are not freed: finalize does it. */
        OK(cadre_finalize());
        return ru_failures ? 1 : 0;
    }
    cadre_request_t r = CADRE_REQUEST_NULL;
    int x = -1, y = -1;
    if (me == 0)
        OK(cadre_irecv(&x, 1, CADRE_INT32, CADRE_ANY_SOURCE, 31, dup, &r));
    usleep(1500 * 1000); /* D is gone, and its exit seen */
    if (me == 0) {
        cadre_status_t st;
        OK(cadre_wait(&r, &st));
        EXPECT(x == 31 && st.source == 1, "ANY_SOURCE on the dup: %d from %d", x, st.source);
        OK(cadre_recv(&y, 1, CADRE_INT32, CADRE_ANY_SOURCE, 32, W, &st));
        EXPECT(y == 32 && st.source == 1, "ANY_SOURCE on the world: %d from %d", y, st.source);
    } else if (me == 1) {
        x = 31;
        y = 32;
        OK(cadre_send(&x, 1, CADRE_INT32, 0, 31, dup));
        OK(cadre_send(&y, 1, CADRE_INT32, 0, 32, W));
    }
    alive_split(me, np, split);
    return finish(me, dup, split, made, "saw no failure");
}

int main(int argc, char **argv)
{
    if (cadre_init(&argc, &argv) != CADRE_SUCCESS) {
        fprintf(stderr, "any_peerfail: cadre_init: %s\n", cadre_last_error());
        return 1;
    }
    int me, np;
    cadre_comm_rank(W, &me);
    cadre_comm_size(W, &np);
    ru_rank = me;
    if (np < 3) {
        fprintf(stderr, "any_peerfail: needs 3 ranks or more\n");
        return 2;
    }
    const char *death = getenv("ANY_PEERFAIL_DEATH");
    int by_exit = death && !strcmp(death, "exit");
    int finalize_mode = death && !strcmp(death, "finalize");
    const int D = np - 1;
    /* "rank D" is in every message: "peer rank D ...", "rank D failed", and
     * in a communicator where D has another rank, "(world rank D)". */
    snprintf(dead_text, sizeof dead_text, "rank %d", D);

    cadre_comm_t dup, split, made;
    OK(cadre_comm_dup(W, &dup));
    /* {D, 0} (D first) and {1 .. D-1} */
    OK(cadre_comm_split(W, me == 0 || me == D ? 0 : 1, me == D ? 0 : me, &split));
    int with_d[2] = {D, 1};
    OK(cadre_comm_create(W, 2, with_d, &made)); /* {D, 1}; others get COMM_NULL */
    OK(cadre_barrier(W));

    if (finalize_mode)
        return finalized(me, np, dup, split, made);
    if (me == D) {
        usleep(300 * 1000);
        if (by_exit)
            exit(0);
        raise(SIGKILL);
    }

    /* ---- calls pending when D dies ---------------------------------------- */
    double t0 = ru_now();
    int x = -1;
    if (me == 0) {
        cadre_request_t r;
        cadre_status_t st;
        OK(cadre_irecv(&x, 1, CADRE_INT32, CADRE_ANY_SOURCE, 7, dup, &r));
        DIES(cadre_recv(&x, 1, CADRE_INT32, CADRE_ANY_SOURCE, 7, W, CADRE_STATUS_IGNORE), t0);
        DIES(cadre_wait(&r, &st), t0);
        EXPECT(st.error == CADRE_ERR_PEER, "status.error %d", st.error);
        EXPECT(x == -1, "the failed receives wrote %d", x);
    } else if (me == 1) {
        int v[5] = {-1, -1, -1, -1, -1};
        DIES(cadre_bcast(v, 5, CADRE_INT32, 0, W), t0);
    } else if (me == 2) {
        int64_t a = me, b = -1;
        cadre_request_t r;
        OK(cadre_iallreduce(&a, &b, 1, CADRE_INT64, CADRE_SUM, dup, &r));
        DIES(cadre_wait(&r, CADRE_STATUS_IGNORE), t0);
    }
    double pending = ru_now() - t0;
    char first[512];
    snprintf(first, sizeof first, "%s", cadre_last_error());
    /* Rank 0 makes no collective call before the others' pending calls have
     * failed: theirs must fail without its help (it would find D dead in
     * a collective of its own, and tell them). */
    int go = 1;
    if (me == 0) {
        for (int q = 1; q < D; q++)
            OK(cadre_recv(&go, 1, CADRE_INT32, q, 40, W, CADRE_STATUS_IGNORE));
    } else {
        OK(cadre_send(&go, 1, CADRE_INT32, 0, 40, W));
    }

    /* ---- later calls that need D fail at once ------------------------------ */
    cadre_request_t r = CADRE_REQUEST_NULL;
    t0 = ru_now();
    DIES(cadre_recv(&x, 1, CADRE_INT32, CADRE_ANY_SOURCE, 7, W, CADRE_STATUS_IGNORE), t0);
    DIES(cadre_recv(&x, 1, CADRE_INT32, CADRE_ANY_SOURCE, CADRE_ANY_TAG, dup, CADRE_STATUS_IGNORE),
         t0);
    DIES(cadre_irecv(&x, 1, CADRE_INT32, CADRE_ANY_SOURCE, 7, dup, &r), t0);
    EXPECT(r == CADRE_REQUEST_NULL, "a failed irecv set its request");
    DIES(cadre_recv(&x, 1, CADRE_INT32, D, 7, W, CADRE_STATUS_IGNORE), t0);
    DIES(cadre_barrier(W), t0);
    int64_t a = me, b = -1;
    DIES(cadre_allreduce(&a, &b, 1, CADRE_INT64, CADRE_SUM, dup), t0);
    DIES(cadre_allreduce(&a, &b, 1, CADRE_INT64, CADRE_SUM, W), t0);
    DIES(cadre_ibarrier(dup, &r), t0);
    if (me == 0) {
        int v = 5;
        DIES(cadre_bcast(&v, 1, CADRE_INT32, 1, split), t0); /* {D, 0}: root is this rank */
    }
    if (me == 1)
        DIES(cadre_barrier(made), t0); /* {D, 1} */
    EXPECT(b == -1, "a failed allreduce wrote %lld", (long long)b);

    /* ---- what does not need D still works ---------------------------------- */
    if (me == 0 || me == 1) {
        int peer = 1 - me, out[3] = {me, 100 + me, -me}, in[3] = {-1, -1, -1};
        cadre_status_t st;
        OK(cadre_sendrecv(out, 3, peer, 20, in, 3, peer, 20, CADRE_INT32, W, &st));
        EXPECT(in[0] == peer && in[1] == 100 + peer && in[2] == -peer, "got %d %d %d", in[0],
               in[1], in[2]);
        EXPECT(st.source == peer && st.count == 3, "status source %d count %zu", st.source,
               st.count);
    }
    alive_split(me, np, split); /* D is not in {1, 2} */
    char what[700];
    snprintf(what, sizeof what, "saw CADRE_ERR_PEER after %.3f s (%s)", pending, first);
    return finish(me, dup, split, made, what);
}
