/* No hang without a diagnosis: an operation that makes no progress for
 * CADRE_TIMEOUT seconds fails and says which ranks it waited for and what
 * they are doing, in one block whose first line names the cause; one stuck
 * for CADRE_STUCK_WARN seconds says so once and waits on; cadrerun --timeout
 * and SIGINT print every rank's state before they stop the job. The rank
 * side is tests/ranks/diag_test.c, which checks cadre_last_error(); here
 * the stderr blocks are checked. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define DIAG build_path("tests/ranks/diag_test")
#define SHOW(r) "exit %d%s\n--- stdout\n%s--- stderr\n%s", (r).exit_code, \
                (r).timed_out ? " (timed out)" : "", (r).out, (r).err
/* The same, naming the text that was looked for. */
#define SHOWW(r, w) "no \"%s\"; exit %d%s\n--- stdout\n%s--- stderr\n%s", (w), (r).exit_code, \
                    (r).timed_out ? " (timed out)" : "", (r).out, (r).err

static void run_diag(struct run_result *r, const char *env, const char *opts, int n)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "env %s %s %s -n %d %s", env, CADRERUN, opts, n, DIAG);
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 60, r) == 0);
}

/* Lines of rank r's diagnosis blocks ("rank R: ..."), and of the failing
 * calls' CADRE_ERRORS warnings, which must not repeat them. */
static int block_lines(const char *err, int r)
{
    char head[32];
    snprintf(head, sizeof head, "rank %d: ", r);
    int n = 0;
    for (const char *l = err; l && *l;) {
        n += !strncmp(l, head, strlen(head));
        l = strchr(l, '\n');
        l = l ? l + 1 : NULL;
    }
    return n + count_matching(err, " WARN RUNTIME] cadre_");
}

/* Every rank printed "diag: rank R ok" (its own checks passed). */
static int all_ok(const struct run_result *r, int n)
{
    int ok = 0;
    for (int i = 0; i < n; i++) {
        char line[64];
        snprintf(line, sizeof line, "diag: rank %d ok", i);
        ok += count_lines(r->out, line) == 1;
    }
    return ok == n;
}

/* The last rank sleeps instead of joining an allreduce: the others fail
 * within 8 s (checked by the ranks) and each prints a block that names it
 * missing and not in cadre. */
static void test_allreduce_sleeper(void)
{
    for (int n = 3; n <= 4; n++) {
        const char *transports[] = {"", "tcp"};
        for (int t = 0; t < (n == 3 ? 2 : 1); t++) {
            char env[256];
            snprintf(env, sizeof env, "CADRE_TIMEOUT=3 DIAG=coll_sleeper CADRE_TRANSPORT=%s",
                     transports[t]);
            struct run_result r;
            run_diag(&r, env, "", n);
            CHECK_MSG(r.exit_code == 0 && all_ok(&r, n), SHOW(r));
            char want[256];
            for (int i = 0; i < n - 1; i++) {
                /* One line: the call, then the cause. */
                snprintf(want, sizeof want,
                         "rank %d: cadre_allreduce: #1 on WORLD (%d ranks) made no progress for "
                         "3 s (CADRE_TIMEOUT): waiting for rank %d (1 of %d missing), which is "
                         "not in cadre for ",
                         i, n, n - 1, n);
                CHECK_MSG(count_matching(r.err, want) == 1, SHOWW(r, want));
                CHECK_MSG(block_lines(r.err, i) == 1, SHOWW(r, "one line"));
            }
            /* CADRE_STUCK_WARN's default (60 s) stays quiet. */
            CHECK_MSG(count_matching(r.err, "CADRE_STUCK_WARN") == 0, SHOW(r));
            snprintf(want, sizeof want, "rank %d: cadre_allreduce", n - 1);
            CHECK_MSG(count_matching(r.err, want) == 0, SHOW(r));
            run_free(&r);
        }
    }
}

/* Each rank's timer starts when it enters: rank 0 (CADRE_TIMEOUT=1) times
 * out, finalizes and exits before the others time out and ask it. It left
 * its count behind at finalize, so they still name only the sleeper. */
static void test_allreduce_leaver(void)
{
    const char *transports[] = {"", "tcp"};
    for (int t = 0; t < 2; t++) {
        char env[256];
        snprintf(env, sizeof env, "CADRE_TIMEOUT=3 DIAG=coll_leaver CADRE_TRANSPORT=%s",
                 transports[t]);
        struct run_result r;
        run_diag(&r, env, "", 4);
        CHECK_MSG(r.exit_code == 0 && all_ok(&r, 4), SHOW(r));
        CHECK_MSG(count_matching(r.err, "rank 0: cadre_allreduce: #1 on WORLD (4 ranks) made no "
                                        "progress for 1 s") == 1,
                  SHOW(r));
        char want[160];
        for (int i = 1; i < 3; i++) {
            snprintf(want, sizeof want, "rank %d: cadre_allreduce: #1 on WORLD (4 ranks) made no "
                     "progress for 3 s (CADRE_TIMEOUT): waiting for rank 3 (1 of 4 missing), "
                     "which is not in cadre for ", i);
            CHECK_MSG(count_matching(r.err, want) == 1, SHOWW(r, want));
        }
        CHECK_MSG(count_matching(r.err, "has finalized") == 0, SHOW(r));
        run_free(&r);
    }
}

/* The same on a communicator that is not the world: its name, and ranks
 * given in it and in the world. */
static void test_subcomm_sleeper(void)
{
    struct run_result r;
    run_diag(&r, "CADRE_TIMEOUT=3 DIAG=sub_sleeper", "", 4);
    CHECK_MSG(r.exit_code == 0 && all_ok(&r, 4), SHOW(r));
    /* The block, one line naming the sleeper in the communicator and the
     * world; the failed call's warning (CADRE_ERRORS=warn) would say the
     * same again: it is left out. */
    CHECK_MSG(count_matching(r.err, ": cadre_allreduce: #1 on comm ctx ") == 2, SHOW(r));
    CHECK_MSG(count_matching(r.err, " WARN RUNTIME] cadre_allreduce") == 0, SHOW(r));
    CHECK_MSG(count_matching(r.err, " made no progress for 3 s (CADRE_TIMEOUT): waiting for rank 2 "
                                    "(world 3) (1 of 3 missing), which is not in cadre for ") == 2,
              SHOW(r));
    CHECK_MSG(block_lines(r.err, 1) == 1 && block_lines(r.err, 2) == 1, SHOW(r));
    run_free(&r);
}

/* sub_leaver: the communicator's rank 0 (world 1) times out after 1 s, frees
 * the communicator and finalizes; its rank 1 (world 2), timing out at 3 s,
 * must count it as arrived: the diagnosis asks after the communicator is
 * gone there (it said "missing (2): 0 2 ... rank 0 (world 1): gone: has
 * finalized", and, for a rank still in cadre_finalize, "in cadre_finalize").
 * The count comes with the freeing rank's farewell when it left, from its
 * record of freed communicators when it stays. */
static void test_subcomm_leaver(void)
{
    /* sub_freer: the same, but world 1 stays alive, out of cadre: it
     * answers the question about the communicator it freed. */
    const char *envs[] = {"CADRE_TIMEOUT=3 DIAG=sub_leaver", "CADRE_TIMEOUT=3 DIAG=sub_freer"};
    for (int k = 0; k < 2; k++) {
        struct run_result r;
        run_diag(&r, envs[k], "", 4);
        CHECK_MSG(r.exit_code == 0 && all_ok(&r, 4), SHOW(r));
        /* Rank 2's line (rank 1 gave up at 1 s and wrote its own). */
        const char *l = strstr(r.err, "rank 2: cadre_allreduce: #1 on comm ctx ");
        const char *nl = l ? strchr(l, '\n') : NULL;
        const char *m = l ? strstr(l, "made no progress for 3 s (CADRE_TIMEOUT): waiting for rank 2 "
                                      "(world 3) (1 of 3 missing), which is not in cadre for ")
                          : NULL;
        CHECK_MSG(m && (!nl || m < nl), SHOW(r));
        run_free(&r);
    }
}

/* The same with rank 1 in cadre_waitall (a request to itself, done, then the
 * receive): rank 0 names the call and the receive (it was shown as
 * cadre_wait before); each waits for the other: a deadlock. */
static void test_waitall_stuck(void)
{
    struct run_result r;
    run_diag(&r, "CADRE_TIMEOUT=3 DIAG=waitall_stuck", "", 2);
    CHECK_MSG(r.exit_code == 0 && all_ok(&r, 2), SHOW(r));
    CHECK_MSG(count_matching(r.err, "rank 0: cadre_recv: cadre_recv from rank 1 (tag 777) on WORLD "
                                    "made no progress for 3 s (CADRE_TIMEOUT): a deadlock: rank 1 "
                                    "waits for this rank too (in cadre_waitall on cadre_irecv from "
                                    "rank 0 (tag 778) on WORLD for ") == 1,
              SHOW(r));
    CHECK_MSG(count_matching(r.err, "rank 1: cadre_waitall: cadre_irecv from rank 0 (tag "
                                    "778) on WORLD made no progress for 3 s (CADRE_TIMEOUT): a "
                                    "deadlock: rank 0 waited for this rank too (in cadre_recv from "
                                    "rank 1 (tag 777) on WORLD) and gave up after ") == 1,
              SHOW(r));
    CHECK_MSG(count_matching(r.err, "(its CADRE_TIMEOUT); now it is not in cadre for ") == 1,
              SHOW(r));
    /* cadre_last_error() adds "reqs[2]: " (diag_test checks it); the
     * call's warning does not repeat the block. */
    CHECK_MSG(block_lines(r.err, 0) == 1 && block_lines(r.err, 1) == 1, SHOW(r));
    run_free(&r);
}

/* Rank 0 receives from rank 1, which sits in a receive from rank 0 that
 * never matches: rank 0 names the deadlock; so does rank 1, timing out later
 * with rank 0 out of cadre (it said only "rank 0 is not in cadre"). */
static void test_recv_stuck(void)
{
    const char *transports[] = {"", "tcp"};
    for (int t = 0; t < 2; t++) {
        char env[256];
        snprintf(env, sizeof env, "CADRE_TIMEOUT=3 DIAG=recv_stuck CADRE_TRANSPORT=%s",
                 transports[t]);
        struct run_result r;
        run_diag(&r, env, "", 2);
        CHECK_MSG(r.exit_code == 0 && all_ok(&r, 2), SHOW(r));
        CHECK_MSG(count_matching(r.err, "rank 0: cadre_recv: cadre_recv from rank 1 (tag 777) on "
                                        "WORLD made no progress for 3 s (CADRE_TIMEOUT): a "
                                        "deadlock: rank 1 waits for this rank too (in cadre_recv "
                                        "from rank 0 (tag 778) on WORLD for ") == 1,
                  SHOW(r));
        CHECK_MSG(count_matching(r.err, "rank 1: cadre_recv: cadre_recv from rank 0 (tag 778) on "
                                        "WORLD made no progress for 3 s (CADRE_TIMEOUT): a "
                                        "deadlock: rank 0 waited for this rank too (in cadre_recv "
                                        "from rank 1 (tag 777) on WORLD) and gave up after ") == 1,
                  SHOW(r));
        CHECK_MSG(block_lines(r.err, 0) == 1 && block_lines(r.err, 1) == 1, SHOW(r));
        run_free(&r);
    }
}

/* cadrerun --timeout: every rank's state, then 124. */
static void test_cadrerun_timeout_report(void)
{
    struct run_result r;
    run_diag(&r, "DIAG=barrier_sleeper", "--timeout 3", 4);
    CHECK_MSG(r.exit_code == 124 && !r.timed_out, SHOW(r));
    CHECK_MSG(r.seconds < 20, "took %.2f s", r.seconds);
    CHECK_MSG(count_matching(r.err, "cadrerun: timeout: the job ran longer than 3 s") == 1,
              SHOW(r));
    for (int i = 0; i < 3; i++) {
        char want[128];
        snprintf(want, sizeof want, "cadre: rank %d: in cadre_barrier #1 on WORLD for ", i);
        CHECK_MSG(count_matching(r.err, want) == 1, SHOWW(r, want));
    }
    CHECK_MSG(count_matching(r.err, "cadre: rank 3: not in cadre for ") == 1, SHOW(r));
    CHECK_MSG(count_matching(r.err, "no state") == 0, SHOW(r));
    /* The states come before cadrerun stops the job. */
    const char *stop = strstr(r.err, "cadrerun: stopping 4 rank(s) after the timeout");
    const char *last = strstr(r.err, "cadre: rank 3:");
    CHECK_MSG(stop && last && last < stop, SHOW(r));
    run_free(&r);
}

/* A program that never connects (not a cadre program) is named, and the job
 * still ends at once with 124. */
static void test_cadrerun_timeout_not_cadre(void)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s --timeout 1 -n 2 sleep 30", CADRERUN);
    struct run_result r;
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 30, &r) == 0);
    CHECK_MSG(r.exit_code == 124 && r.seconds < 8, SHOWW(r, "an end within 8 s"));
    CHECK_MSG(count_matching(r.err, "no state: not connected") == 2, SHOW(r));
    run_free(&r);
}

/* A receive from any rank that times out names the ranks it could come
 * from in sentences: "rank 0 has called cadre_finalize" (it read "rank 0
 * is has called cadre_finalize"), then a line for the other state. */
static void test_any_source_finalized(void)
{
    struct run_result r;
    run_diag(&r, "CADRE_TIMEOUT=3 DIAG=any_finalized", "", 3);
    CHECK_MSG(r.exit_code == 0 && all_ok(&r, 3), SHOW(r));
    CHECK_MSG(count_lines(r.err, "rank 2: cadre_recv: cadre_recv from any rank (tag 5) on WORLD "
                                 "made no progress for 3 s (CADRE_TIMEOUT): no matching message "
                                 "arrived; rank 0 has called cadre_finalize") == 1,
              SHOW(r));
    CHECK_MSG(count_matching(r.err, "rank 2:   rank 1 is not in cadre for ") == 1, SHOW(r));
    CHECK_MSG(block_lines(r.err, 2) == 2, SHOW(r));
    CHECK_MSG(count_matching(r.err, " is has ") == 0, SHOW(r));
    run_free(&r);
}

/* cadre_finalize with work left undone (tests/ranks/finalize_pending.c):
 * it returns success, and each rank prints one block, in one piece, that
 * names its pending requests (call, peer, tag, size, communicator, where it
 * stands) and the messages that came and that no receive took; completed
 * and received ones are not named (issue 40). */
static const char *const pending_block[2][4] = {
    {"[rank 0 WARN P2P] cadre_finalize: dropping 2 pending requests and 1 message never received "
     "(complete every request and receive every message before cadre_finalize):",
     "[rank 0 WARN P2P]   cadre_isend to rank 1 (tag 5, 16777216 bytes) on WORLD: the receiver "
     "never posted a matching receive",
     "[rank 0 WARN P2P]   cadre_irecv from rank 1 (tag 6, up to 40 bytes) on WORLD: no matching "
     "message arrived",
     "[rank 0 WARN P2P]   a message from rank 1 (tag 11, 3 bytes) on comm ctx "},
    {"[rank 1 WARN P2P] cadre_finalize: dropping 1 pending request and 2 messages never received "
     "(complete every request and receive every message before cadre_finalize):",
     "[rank 1 WARN P2P]   cadre_irecv from any rank (tag 9, up to 100 bytes) on WORLD: no "
     "matching message arrived",
     "[rank 1 WARN P2P]   a message from rank 0 (tag 5, 16777216 bytes) on WORLD: never received "
     "(its sender's send is dropped)",
     "[rank 1 WARN P2P]   a message from rank 0 (tag 7, 12 bytes) on WORLD: never received"}};

static void test_finalize_pending(void)
{
    const char *transports[] = {"", "tcp"};
    for (int t = 0; t < 2; t++) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "env CADRE_TRANSPORT=%s %s -n 2 %s", transports[t], CADRERUN,
                 build_path("tests/ranks/finalize_pending"));
        struct run_result r;
        CU_ASSERT_FATAL(run_cmd(cmd, NULL, 60, &r) == 0);
        CHECK_MSG(r.exit_code == 0 && count_matching(r.out, "finalize_pending: rank ") == 2 &&
                      count_matching(r.out, " ok") == 2,
                  SHOW(r));
        for (int rank = 0; rank < 2; rank++) {
            /* The block's lines, in order and together. */
            const char *at = strstr(r.err, pending_block[rank][0]);
            CHECK_MSG(at && count_matching(r.err, pending_block[rank][0]) == 1,
                      SHOWW(r, pending_block[rank][0]));
            for (int i = 1; at && i < 4; i++) {
                at = strchr(at, '\n');
                at = at ? at + 1 : NULL;
                CHECK_MSG(at && !strncmp(at, pending_block[rank][i], strlen(pending_block[rank][i])),
                          SHOWW(r, pending_block[rank][i]));
            }
            char head[32];
            snprintf(head, sizeof head, "[rank %d WARN P2P] ", rank);
            CHECK_MSG(count_matching(r.err, head) == 4, SHOWW(r, "4 lines of each rank"));
        }
        /* Received, completed or matched: not named. */
        const char *quiet[] = {"tag 3,", "tag 4,", "tag 8,"};
        for (int i = 0; i < 3; i++)
            CHECK_MSG(count_matching(r.err, quiet[i]) == 0, SHOWW(r, quiet[i]));
        run_free(&r);
    }
    /* Past the 8 lines of each kind: the rest counted. Rank 0 has 2 + 12
     * requests and 1 + 12 messages. */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "env FINALIZE_MANY=12 %s -n 2 %s", CADRERUN,
             build_path("tests/ranks/finalize_pending"));
    struct run_result r;
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 60, &r) == 0);
    CHECK_MSG(r.exit_code == 0, SHOW(r));
    const char *want[] = {"[rank 0 WARN P2P] cadre_finalize: dropping 14 pending requests and 13 "
                          "messages never received (",
                          "[rank 0 WARN P2P]   and 6 more requests",
                          "[rank 0 WARN P2P]   and 5 more messages"};
    for (int i = 0; i < 3; i++)
        CHECK_MSG(count_matching(r.err, want[i]) == 1, SHOWW(r, want[i]));
    CHECK_MSG(count_matching(r.err, "[rank 0 WARN P2P] ") == 1 + 8 + 1 + 8 + 1,
              SHOWW(r, "19 lines from rank 0"));
    run_free(&r);
}

/* Each rank receives from the other first (rank 1 a second later), the
 * issue's deadlock: both name it in one line. Rank 1 times out after rank 0
 * gave up and left cadre: it said "rank 0 is not in cadre" (and, where rank
 * 0 had finalized, "rank 0 has called cadre_finalize"), blaming the wrong
 * thing; rank 0 told rank 1 its state when it asked. */
static void test_deadlock(void)
{
    const char *transports[] = {"", "tcp"};
    for (int t = 0; t < 2; t++) {
        char env[256];
        snprintf(env, sizeof env, "CADRE_TIMEOUT=3 DIAG=deadlock CADRE_TRANSPORT=%s",
                 transports[t]);
        struct run_result r;
        run_diag(&r, env, "", 2);
        CHECK_MSG(r.exit_code == 0 && all_ok(&r, 2), SHOW(r));
        CHECK_MSG(count_matching(r.err, "rank 0: cadre_recv: cadre_recv from rank 1 (tag 5) on WORLD "
                                        "made no progress for 3 s (CADRE_TIMEOUT): a deadlock: "
                                        "rank 1 waits for this rank too (in cadre_recv from rank 0 "
                                        "(tag 5) on WORLD for ") == 1,
                  SHOW(r));
        CHECK_MSG(count_matching(r.err, "rank 1: cadre_recv: cadre_recv from rank 0 (tag 5) on WORLD "
                                        "made no progress for 3 s (CADRE_TIMEOUT): a deadlock: "
                                        "rank 0 waited for this rank too (in cadre_recv from rank "
                                        "1 (tag 5) on WORLD) and gave up after ") == 1,
                  SHOW(r));
        CHECK_MSG(block_lines(r.err, 0) == 1 && block_lines(r.err, 1) == 1, SHOW(r));
        run_free(&r);
    }
}

/* One rank of 4 skips a barrier: each of the others writes one line (there
 * were 5 each: the block of 4 lines, and the call's warning repeating it). */
static void test_barrier_skip(void)
{
    struct run_result r;
    run_diag(&r, "CADRE_TIMEOUT=3 DIAG=barrier_skip", "", 4);
    CHECK_MSG(r.exit_code == 0 && all_ok(&r, 4), SHOW(r));
    for (int i = 0; i < 3; i++) {
        char want[200];
        snprintf(want, sizeof want, "rank %d: cadre_barrier: #1 on WORLD (4 ranks) made no "
                 "progress for 3 s (CADRE_TIMEOUT): waiting for rank 3 (1 of 4 missing), which is "
                 "not in cadre for ", i);
        CHECK_MSG(count_matching(r.err, want) == 1, SHOWW(r, want));
        CHECK_MSG(block_lines(r.err, i) == 1, SHOWW(r, "one line"));
    }
    CHECK_MSG(count_matching(r.err, "") == 3, SHOWW(r, "3 lines in all"));
    run_free(&r);
}

/* CADRE_STUCK_WARN=1: the deadlock (nobody gives up before CADRE_TIMEOUT=4)
 * warns once per rank after a second, naming the operation, peer, tag,
 * communicator and the cause, and still ends by CADRE_TIMEOUT; so does an
 * allreduce that one rank never joins (the shared-memory collectives), and
 * a blocking probe and cadre_waitany (waits on a condition). */
static void test_stuck_warn(void)
{
    struct run_result r;
    run_diag(&r, "CADRE_STUCK_WARN=1 CADRE_TIMEOUT=4 DIAG=deadlock_wait", "", 2);
    CHECK_MSG(r.exit_code == 0 && all_ok(&r, 2), SHOW(r));
    for (int i = 0; i < 2; i++) {
        char want[256];
        snprintf(want, sizeof want, "[rank %d WARN P2P] cadre_recv: cadre_recv from rank %d (tag 5) "
                 "on WORLD has made no progress for 1 s (CADRE_STUCK_WARN) and still waits: a "
                 "deadlock: rank %d waits for this rank too (in cadre_recv from rank %d (tag 5) on "
                 "WORLD for ", i, 1 - i, 1 - i, i);
        CHECK_MSG(count_matching(r.err, want) == 1, SHOWW(r, want));
        snprintf(want, sizeof want, "[rank %d WARN P2P] ", i);
        CHECK_MSG(count_matching(r.err, want) == 1, SHOWW(r, "one warning"));
        snprintf(want, sizeof want, "rank %d: cadre_recv: cadre_recv from rank %d (tag 5) on WORLD "
                 "made no progress for 4 s (CADRE_TIMEOUT): a deadlock: ", i, 1 - i);
        CHECK_MSG(count_matching(r.err, want) == 1, SHOWW(r, want));
    }
    run_free(&r);

    run_diag(&r, "CADRE_STUCK_WARN=1 CADRE_TIMEOUT=4 DIAG=coll_sleeper", "", 3);
    CHECK_MSG(r.exit_code == 0 && all_ok(&r, 3), SHOW(r));
    for (int i = 0; i < 2; i++) {
        char want[256];
        snprintf(want, sizeof want, "[rank %d WARN P2P] cadre_allreduce: #1 on WORLD (3 ranks) has "
                 "made no progress for 1 s (CADRE_STUCK_WARN) and still waits: waiting for rank 2 "
                 "(1 of 3 missing), which is not in cadre for ", i);
        CHECK_MSG(count_matching(r.err, want) == 1, SHOWW(r, want));
        snprintf(want, sizeof want, "rank %d: cadre_allreduce: #1 on WORLD (3 ranks) made no "
                 "progress for 4 s (CADRE_TIMEOUT): waiting for rank 2", i);
        CHECK_MSG(count_matching(r.err, want) == 1, SHOWW(r, want));
    }
    run_free(&r);

    /* The waits on a condition: a blocking probe and cadre_waitany (they
     * gave no warning). */
    run_diag(&r, "CADRE_STUCK_WARN=1 CADRE_TIMEOUT=4 DIAG=cond_stuck", "", 2);
    CHECK_MSG(r.exit_code == 0 && all_ok(&r, 2), SHOW(r));
    const char *cond[2] = {
        "[rank 0 WARN P2P] cadre_probe: cadre_probe from rank 1 (tag 7) on WORLD has made no "
        "progress for 1 s (CADRE_STUCK_WARN) and still waits: ",
        "[rank 1 WARN P2P] cadre_waitany: cadre_irecv from rank 0 (tag 8) on WORLD has made no "
        "progress for 1 s (CADRE_STUCK_WARN) and still waits: "};
    for (int i = 0; i < 2; i++) {
        CHECK_MSG(count_matching(r.err, cond[i]) == 1, SHOWW(r, cond[i]));
        char want[64];
        snprintf(want, sizeof want, "[rank %d WARN P2P] ", i);
        CHECK_MSG(count_matching(r.err, want) == 1, SHOWW(r, "one warning"));
    }
    run_free(&r);

    /* 0: never. */
    run_diag(&r, "CADRE_STUCK_WARN=0 CADRE_TIMEOUT=3 DIAG=deadlock", "", 2);
    CHECK_MSG(r.exit_code == 0 && all_ok(&r, 2), SHOW(r));
    CHECK_MSG(count_matching(r.err, "CADRE_STUCK_WARN") == 0, SHOW(r));
    run_free(&r);
}

/* SIGINT to cadrerun while the ranks are stuck (each has warned): every
 * rank's state (operation, peer) comes before the signal goes on; the ranks
 * die of it and cadrerun exits 130 (128 + SIGINT). It printed only "rank 0
 * killed by SIGINT". */
static void test_sigint_report(void)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "exec env CADRE_STUCK_WARN=1 DIAG=deadlock_wait %s -n 2 %s",
             CADRERUN, DIAG);
    struct run_job j;
    CU_ASSERT_FATAL(run_start(cmd, NULL, 60, &j) == 0);
    int stuck = run_wait_stderr(&j, "(CADRE_STUCK_WARN)", 2);
    CHECK_MSG(stuck, "no warnings:\n%s", j.r.err);
    kill(j.pid, SIGINT);
    struct run_result r;
    run_finish(&j, &r);
    CHECK_MSG(r.exit_code == 128 + SIGINT && !r.timed_out, SHOW(r));
    CHECK_MSG(count_matching(r.err, "cadrerun: SIGINT: 2 rank(s) running, their states") == 1,
              SHOW(r));
    const char *fwd = strstr(r.err, "cadrerun: forwarding SIGINT to 2 rank(s)");
    for (int i = 0; i < 2; i++) {
        char want[128];
        snprintf(want, sizeof want, "cadre: rank %d: in cadre_recv from rank %d (tag 5) on WORLD for ",
                 i, 1 - i);
        const char *at = strstr(r.err, want);
        CHECK_MSG(at && fwd && at < fwd, SHOWW(r, want));
    }
    CHECK_MSG(count_matching(r.err, "killed by SIGINT") >= 1, SHOW(r));
    run_free(&r);
}

void suite_diag(void)
{
    CU_pSuite s = CU_add_suite("diag", NULL, NULL);
    CU_add_test(s, "an allreduce a rank never joins", test_allreduce_sleeper);
    CU_add_test(s, "a rank that gave up and finalized first", test_allreduce_leaver);
    CU_add_test(s, "the same on a sub-communicator", test_subcomm_sleeper);
    CU_add_test(s, "receives that never match", test_recv_stuck);
    CU_add_test(s, "a receive that never matches, in cadre_waitall", test_waitall_stuck);
    CU_add_test(s, "cadrerun --timeout reports every rank", test_cadrerun_timeout_report);
    CU_add_test(s, "cadrerun --timeout with no cadre program", test_cadrerun_timeout_not_cadre);
    CU_add_test(s, "a receive from any rank, one of them finalized", test_any_source_finalized);
    CU_add_test(s, "a member that gave up and freed the sub-communicator", test_subcomm_leaver);
    CU_add_test(s, "cadre_finalize names the requests and messages it drops",
                test_finalize_pending);
    CU_add_test(s, "a deadlock of two receives, named by both", test_deadlock);
    CU_add_test(s, "a rank that skips a barrier: one line each", test_barrier_skip);
    CU_add_test(s, "CADRE_STUCK_WARN warns once and waits on", test_stuck_warn);
    CU_add_test(s, "SIGINT to cadrerun reports every rank first", test_sigint_report);
}
