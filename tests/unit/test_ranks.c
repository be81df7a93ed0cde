/* Runs every multi-rank program of tests/ranks/ranks.list through cadrerun.
 * A line is: name nranks [VAR=VALUE ...]; each program checks its own results
 * and exits non-zero (saying why) on any mismatch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static double limit_for(int n)
{
    return 60 + 15.0 * n;
}

static void test_ranks_list(void)
{
    FILE *f = fopen(src_path("tests/ranks/ranks.list"), "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char line[1024];
    int ran = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *p = line + strspn(line, " \t");
        if (*p == '#' || *p == '\0')
            continue;
        char name[256], env[700] = "";
        int n, off = 0;
        if (sscanf(p, "%255s %d %n", name, &n, &off) < 2) {
            CHECK_MSG(0, "bad line in ranks.list: %s", line);
            continue;
        }
        snprintf(env, sizeof env, "%s", p + off);
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "env %s %s -n %d %s", env, CADRERUN, n,
                 build_path(name[0] == '/' ? name + 1 : name));
        struct run_result r;
        CU_ASSERT_FATAL(run_cmd(cmd, NULL, limit_for(n), &r) == 0);
        fprintf(stderr, "\n    %-40s n=%d %s%s: exit %d, %.2f s", name, n, env[0] ? "env " : "", env,
                r.exit_code, r.seconds);
        CHECK_MSG(r.exit_code == 0 && !r.timed_out,
                  "%s with %d ranks (%s): exit %d%s\n--- stdout\n%s--- stderr\n%s", name, n, env,
                  r.exit_code, r.timed_out ? " (timed out)" : "", r.out, r.err);
        run_free(&r);
        ran++;
    }
    fclose(f);
    CU_ASSERT(ran > 0);
}

/* A rank killed while streaming to rank 0: rank 0 gets CADRE_ERR_PEER within
 * 5 s from the library itself (cadrerun --keep-going stops nobody), and the
 * job goes on; cadrerun reports the death and exits 128+SIGKILL. */
static void test_peer_killed(void)
{
    const char *transports[] = {"", "tcp"};
    for (int i = 0; i < 2; i++) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "CADRE_TRANSPORT=%s %s --keep-going -n 3 %s", transports[i],
                 CADRERUN, build_path("tests/ranks/p2p_peerfail"));
        struct run_result r;
        CU_ASSERT_FATAL(run_cmd(cmd, NULL, 60, &r) == 0);
        CHECK_MSG(r.exit_code == 137 && !r.timed_out,
                  "peer failure (%s): exit %d\n--- stdout\n%s--- stderr\n%s",
                  transports[i][0] ? transports[i] : "shm", r.exit_code, r.out, r.err);
        CHECK_MSG(count_lines(r.out, "peerfail: ok") == 1, "stdout: %s\nstderr: %s", r.out, r.err);
        CHECK_MSG(strstr(r.err, "rank 1 (pid") && strstr(r.err, "killed by SIGKILL"), "stderr: %s",
                  r.err);
        CU_ASSERT(count_shm_leftovers() == 0);
        run_free(&r);
    }
}

/* Several senders lose their receiver mid-stream (the double-free path). */
static void test_senders_lose_receiver(void)
{
    const char *transports[] = {"tcp", ""};
    for (int i = 0; i < 2; i++) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "CADRE_TRANSPORT=%s %s --keep-going -n 4 %s", transports[i],
                 CADRERUN, build_path("tests/ranks/tcp_flush_peerfail"));
        struct run_result r;
        CU_ASSERT_FATAL(run_cmd(cmd, NULL, 60, &r) == 0);
        int oks = 0;
        for (int k = 1; k < 4; k++) {
            char line[64];
            snprintf(line, sizeof line, "tcp_flush_peerfail: rank %d ok", k);
            oks += count_lines(r.out, line);
        }
        CHECK_MSG(r.exit_code == 137 && oks == 3, "%s: exit %d, %d ok lines\n--- stdout\n%s--- stderr\n%s",
                  transports[i][0] ? transports[i] : "shm", r.exit_code, oks, r.out, r.err);
        run_free(&r);
    }
}

/* A rank SIGKILLed in a loop of allreduces: every survivor gets
 * CADRE_ERR_PEER within 5 s and finalizes (16 MiB through the direct
 * algorithm, 8 bytes through the shared-memory slots, 16 MiB over TCP). */
static void test_coll_peer_killed(void)
{
    const char *envs[] = {"", "COLL_PEERFAIL_COUNT=2", "CADRE_TRANSPORT=tcp"};
    for (int i = 0; i < 3; i++) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "env %s %s --keep-going -n 4 %s", envs[i], CADRERUN,
                 build_path("tests/ranks/coll_peerfail"));
        struct run_result r;
        CU_ASSERT_FATAL(run_cmd(cmd, NULL, 60, &r) == 0);
        int oks = 0;
        for (int k = 0; k < 4; k++) {
            char line[64];
            snprintf(line, sizeof line, "coll_peerfail: rank %d ok", k);
            oks += count_lines(r.out, line);
        }
        CHECK_MSG(r.exit_code == 137 && oks == 3 && !r.timed_out,
                  "%s: exit %d, %d ok lines\n--- stdout\n%s--- stderr\n%s", envs[i],
                  r.exit_code, oks, r.out, r.err);
        CU_ASSERT(count_shm_leftovers() == 0);
        run_free(&r);
    }
}

void suite_ranks(void)
{
    CU_pSuite s = CU_add_suite("ranks", NULL, NULL);
    CU_add_test(s, "programs of ranks.list under cadrerun", test_ranks_list);
    CU_add_test(s, "a peer killed mid-transfer gives CADRE_ERR_PEER", test_peer_killed);
    CU_add_test(s, "senders that lose their receiver mid-stream", test_senders_lose_receiver);
    CU_add_test(s, "a rank killed in a loop of allreduces", test_coll_peer_killed);
}
