/* The start without PMIx (bootstrap/bootstrap_rdv*.c): ranks started by
 * tests/rdv_run.sh as a shell loop or torchrun does (RANK, WORLD_SIZE,
 * MASTER_ADDR, MASTER_PORT on a free port) find each other, host by host;
 * a rank that never comes, a wrong job key or two processes given one rank
 * end in an error naming the rank; strangers at the port (tests/
 * rdv_stranger.py) change nothing. The examples run this way in the suite
 * examples_rdv (test_examples.c), the collective suite in
 * ranks.list (LAUNCH=rdv). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#define SHOWW(r, w) "no \"%s\"; exit %d%s\n--- stdout\n%s--- stderr\n%s", (w), (r).exit_code, \
                    (r).timed_out ? " (timed out)" : "", (r).out, (r).err
#define RDV_RUN src_path("tests/rdv_run.sh")
#define INIT_BASIC build_path("tests/ranks/init_basic")

/* `env ENV sh rdv_run.sh N PROG` into r. */
static void rdv(struct run_result *r, const char *env, int n, const char *prog, double limit)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "env %s sh %s %d %s", env, RDV_RUN, n, prog);
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, limit, r) == 0);
}

/* One host: every rank sees the others there and reaches them by shared
 * memory; local ranks 0..n-1. Two fake hosts (CADRE_HOSTID) of 2 ranks:
 * shared memory within, TCP between, local ranks 0 and 1 on each. */
static void test_hosts(void)
{
    char host[256] = "", want[512];
    CU_ASSERT_FATAL(gethostname(host, sizeof host - 1) == 0);
    host[63] = '\0';
    struct run_result r;
    rdv(&r, "CADRE_DEBUG=INFO CADRE_DEBUG_SUBSYS=P2P,BOOTSTRAP HOST_COUNTS=3", 3,
        build_path("tests/ranks/host_test"), 90);
    CHECK_MSG(r.exit_code == 0, SHOWW(r, "exit 0"));
    for (int w = 0; w < 3; w++) {
        snprintf(want, sizeof want,
                 "[rank %d INFO P2P] locality: host 0 of 1 (%s), ranks on this host: 0,1,2", w,
                 host);
        CHECK_MSG(count_lines(r.err, want) == 1, SHOWW(r, want));
        snprintf(want, sizeof want, ": rank %d/3 local %d/3 node 0 (%s)", w, w, host);
        CHECK_MSG(count_matching(r.err, want) == 1, SHOWW(r, want));
        for (int v = 0; v < 3; v++) {
            snprintf(want, sizeof want, "[rank %d INFO P2P] peer %d: shm", w, v);
            CHECK_MSG(v == w || count_lines(r.err, want) == 1, SHOWW(r, want));
        }
    }
    run_free(&r);

    rdv(&r, "CADRE_DEBUG=INFO CADRE_DEBUG_SUBSYS=P2P,BOOTSTRAP HOST_COUNTS=3 FAKE_HOSTS=block:2",
        4, build_path("tests/ranks/host_test"), 90);
    CHECK_MSG(r.exit_code == 0, SHOWW(r, "exit 0"));
    for (int w = 0; w < 4; w++) {
        int h = w / 2;
        snprintf(want, sizeof want,
                 "[rank %d INFO P2P] locality: host %d of 2 (h%d), ranks on this host: %d,%d", w,
                 h, h, 2 * h, 2 * h + 1);
        CHECK_MSG(count_lines(r.err, want) == 1, SHOWW(r, want));
        snprintf(want, sizeof want, ": rank %d/4 local %d/2 node %d (h%d)", w, w % 2, h, h);
        CHECK_MSG(count_matching(r.err, want) == 1, SHOWW(r, want));
        for (int v = 0; v < 4; v++) {
            snprintf(want, sizeof want, "[rank %d INFO P2P] peer %d: %s", w, v,
                     v / 2 == h ? "shm" : "tcp");
            CHECK_MSG(v == w || count_lines(r.err, want) == 1, SHOWW(r, want));
        }
    }
    run_free(&r);
}

/* torchrun's LOCAL_RANK and LOCAL_WORLD_SIZE, where given, are the local
 * numbering (init_basic checks them against cadre_local_rank/size); the
 * CADRE_ names come first; MASTER_ADDR as a name and as IPv6; rank 0
 * starting a second after the others. */
static void test_variants(void)
{
    static const struct {
        const char *env, *prog;
    } cases[] = {
        {"", "sh -c 'LOCAL_RANK=$((RANK % 2)) LOCAL_WORLD_SIZE=2 exec %s'"},
        {"RDV_ADDR=localhost", "%s"},
        {"RDV_ADDR=::1", "%s"},
        {"", "sh -c 'test $RANK = 0 && sleep 1; exec %s'"},
        /* the CADRE_ names win: a wrong torchrun port is never used */
        {"", "sh -c 'CADRE_MASTER_PORT=$MASTER_PORT MASTER_PORT=1 exec %s'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char prog[1024];
        snprintf(prog, sizeof prog, cases[i].prog, INIT_BASIC);
        struct run_result r;
        rdv(&r, cases[i].env, 4, prog, 60);
        CHECK_MSG(r.exit_code == 0 && !count_matching(r.err, "init_basic: rank"),
                  "%s %s: exit %d\n--- stderr\n%s", cases[i].env, prog, r.exit_code, r.err);
        run_free(&r);
    }
}

/* PMIx wins: under cadrerun, torchrun's variables left in the environment
 * (here a world of 1 at a port nobody serves) change nothing. */
static void test_pmix_first(void)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "env RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 "
                              "CADRE_MASTER_PORT=1 %s -n 3 %s", CADRERUN, INIT_BASIC);
    struct run_result r;
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 60, &r) == 0);
    CHECK_MSG(r.exit_code == 0, SHOWW(r, "exit 0"));
    run_free(&r);
}

/* Rank 2 of 4 never starts: within CADRE_TIMEOUT every rank fails with
 * CADRE_ERR_TIMEOUT naming it, rank 0 and the ranks that joined alike.
 * Rank 0 never starts: the others name it. */
static void test_missing(void)
{
    struct run_result r;
    rdv(&r, "RDV_SKIP=2 CADRE_TIMEOUT=2", 4, INIT_BASIC, 60);
    const char *want = "init_basic: cadre_init: CADRE_ERR_TIMEOUT: operation timed out: "
                       "cadre_init: rank 2 did not join the rendezvous at 127.0.0.1:";
    CHECK_MSG(r.exit_code != 0 && !r.timed_out && count_matching(r.err, want) == 3,
              SHOWW(r, want));
    CHECK_MSG(count_matching(r.err, "within 2 s (CADRE_TIMEOUT); 3 of 4 ranks joined") == 6,
              SHOWW(r, "3 of 4 ranks joined (6 lines, with the warnings)"));
    run_free(&r);

    rdv(&r, "RDV_SKIP=0 CADRE_TIMEOUT=2", 3, INIT_BASIC, 60);
    want = "could not join the rendezvous of rank 0 at 127.0.0.1:";
    CHECK_MSG(r.exit_code != 0 && !r.timed_out && count_matching(r.err, want) == 4,
              SHOWW(r, want));
    CHECK_MSG(count_matching(r.err, "Connection refused (is rank 0 running") == 4,
              SHOWW(r, "Connection refused"));
    run_free(&r);
}

/* Misconfigured ranks are told what is wrong, and rank 0 names them: a
 * different job key; two processes given RANK=1 (and none 2); another world
 * size; a rank out of range; a CADRE_ name read before torchrun's. */
static void test_refusals(void)
{
    struct run_result r;
    char prog[1024];
    snprintf(prog, sizeof prog, "sh -c 'CADRE_JOB_KEY=k$((RANK == 2)) exec %s'", INIT_BASIC);
    rdv(&r, "CADRE_TIMEOUT=2", 3, prog, 60);
    const char *want = "cadre_init: rank 0 refused rank 2: rank 2's hello does not prove the "
                       "job key";
    CHECK_MSG(r.exit_code != 0 && count_matching(r.err, want) == 2, SHOWW(r, want));
    want = "init_basic: cadre_init: CADRE_ERR_TIMEOUT: operation timed out: cadre_init: rank 2 "
           "did not join";
    CHECK_MSG(count_matching(r.err, want) == 2, SHOWW(r, want));
    run_free(&r);

    snprintf(prog, sizeof prog, "sh -c 'RANK=$((RANK == 2 ? 1 : RANK)) exec %s'", INIT_BASIC);
    rdv(&r, "CADRE_TIMEOUT=2", 3, prog, 60);
    want = "cadre_init: rank 0 refused rank 1: rank 1 has joined already (two processes given "
           "RANK=1?)";
    CHECK_MSG(r.exit_code != 0 && count_matching(r.err, want) == 2, SHOWW(r, want));
    want = "init_basic: cadre_init: CADRE_ERR_TIMEOUT: operation timed out: cadre_init: rank 2 "
           "did not join";
    CHECK_MSG(count_matching(r.err, want) == 2, SHOWW(r, want));
    run_free(&r);

    snprintf(prog, sizeof prog, "sh -c 'WORLD_SIZE=$((RANK == 2 ? 4 : 3)) exec %s'", INIT_BASIC);
    rdv(&r, "CADRE_TIMEOUT=2", 3, prog, 60);
    want = "cadre_init: rank 0 refused rank 2: world size 4, rank 0's is 3";
    CHECK_MSG(r.exit_code != 0 && count_matching(r.err, want) == 2, SHOWW(r, want));
    run_free(&r);

    char cmd[4096];
    snprintf(cmd, sizeof cmd, "env -u PMIX_NAMESPACE RANK=0 WORLD_SIZE=1 CADRE_RANK=7 "
                              "CADRE_WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 %s",
             INIT_BASIC);
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 30, &r) == 0);
    want = "init_basic: cadre_init: CADRE_ERR_ARG: invalid argument: cadre_init: CADRE_RANK=\"7\" "
           "is not an integer in [0, 3]";
    CHECK_MSG(r.exit_code != 0 && count_lines(r.err, want) == 1, SHOWW(r, want));
    run_free(&r);
}

/* 1,000 strangers reach rank 0's port before the other ranks start
 * (rdv_stranger.py checks each was greeted, so each came during the start)
 * and more while they join: the job's results are right, none is admitted;
 * with a job key and without. */
static void test_strangers(void)
{
    const char *envs[] = {"", "CADRE_JOB_KEY=s3cret", "TORCHELASTIC_RUN_ID=job42"};
    for (int i = 0; i < 3; i++) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "env %s /usr/bin/python3 %s 4 1000 %s", envs[i],
                 src_path("tests/rdv_stranger.py"), build_path("examples/all_reduce"));
        struct run_result r;
        CU_ASSERT_FATAL(run_cmd(cmd, NULL, 120, &r) == 0);
        fprintf(stderr, "\n    strangers %s: exit %d, %.2f s", envs[i], r.exit_code, r.seconds);
        CHECK_MSG(r.exit_code == 0, SHOWW(r, "exit 0"));
        for (int w = 0; w < 4; w++) {
            char want[64];
            snprintf(want, sizeof want, "Rank %d has data 4.0", w);
            CHECK_MSG(count_lines(r.out, want) == 1, SHOWW(r, want));
        }
        const char *want = "rdv_stranger: 1000 of 1000 strangers greeted before ranks 1-3 "
                           "started";
        CHECK_MSG(count_matching(r.err, want) == 1, SHOWW(r, want));
        CHECK_MSG(count_matching(r.err, " 0 admitted") == 1, SHOWW(r, "0 admitted"));
        run_free(&r);
    }
}

void suite_rdv(void)
{
    CU_pSuite s = CU_add_suite("rdv", NULL, NULL);
    CU_add_test(s, "hosts, local ranks, shared memory within a host", test_hosts);
    CU_add_test(s, "LOCAL_RANK, CADRE_ names, MASTER_ADDR forms, rank 0 late", test_variants);
    CU_add_test(s, "PMIx first", test_pmix_first);
    CU_add_test(s, "a missing rank named", test_missing);
    CU_add_test(s, "wrong key, one rank twice, world size, rank out of range", test_refusals);
    CU_add_test(s, "1,000 strangers at the port", test_strangers);
}
