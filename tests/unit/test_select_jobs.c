/* The select suite's cases that run programs (test_select.c has the
 * suite and the tables' cases): the COLL INFO line of a real job (one line
 * per collective, algorithm and size class), CADRE_ALGO set on one rank
 * only, and cadre-info --algorithms. */
#include <stdio.h>
#include <string.h>

#include "coll/coll_select.h"
#include "test_select.h"
#include "testutil.h"

/* A real job: the first allreduce of each size class logs one line, with
 * the algorithm the table gives, and CADRE_ALGO's choice says so. */
void test_log_lines(void)
{
    const char *prog = build_path("tests/ranks/select_log");
    char cmd[4096];
    struct run_result r;
    snprintf(cmd, sizeof cmd, "CADRE_DEBUG=INFO CADRE_DEBUG_SUBSYS=COLL %s -n 3 %s", CADRERUN,
             prog);
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 120, &r) == 0);
    CHECK_MSG(r.exit_code == 0, "exit %d\n%s", r.exit_code, r.err);
    /* 8 bytes: the slots; 16 MiB: direct (every rank on this node); each
     * class once per rank though the program calls each ten times. */
    CHECK_MSG(count_matching(r.err, "allreduce: algorithm slots (8 bytes, 3 ranks, 1 hosts: "
                                    "rule") == 3,
              "%s", r.err);
    CHECK_MSG(count_matching(r.err, "allreduce: algorithm direct (16777216 bytes, 3 ranks, "
                                    "1 hosts: rule") == 3,
              "%s", r.err);
    CHECK_MSG(count_matching(r.err, "allreduce: algorithm") == 6, "%s", r.err);
    run_free(&r);

    snprintf(cmd, sizeof cmd,
             "CADRE_ALGO=allreduce=ring CADRE_DEBUG=INFO CADRE_DEBUG_SUBSYS=COLL %s -n 3 %s",
             CADRERUN, prog);
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 120, &r) == 0);
    CHECK_MSG(r.exit_code == 0, "exit %d\n%s", r.exit_code, r.err);
    CHECK_MSG(count_matching(r.err, "allreduce: algorithm ring (8 bytes, 3 ranks, 1 hosts: "
                                    "CADRE_ALGO=allreduce=ring)") == 3,
              "%s", r.err);
    CHECK_MSG(count_matching(r.err, "allreduce: algorithm ring (16777216 bytes, 3 ranks, 1 hosts: "
                                    "CADRE_ALGO=allreduce=ring)") == 3,
              "%s", r.err);
    CHECK_MSG(count_matching(r.err, "allreduce: algorithm") == 6, "%s", r.err);
    run_free(&r);

    /* gatherv, scatterv, alltoallv: blocking, the slots under the v rule;
     * igatherv, linear. */
    snprintf(cmd, sizeof cmd, "SELECT_V=1 CADRE_DEBUG=INFO CADRE_DEBUG_SUBSYS=COLL %s -n 3 %s",
             CADRERUN, prog);
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 120, &r) == 0);
    CHECK_MSG(r.exit_code == 0, "exit %d\n%s", r.exit_code, r.err);
    const char *const vlines[] = {"gather: algorithm slots (", "scatter: algorithm slots (",
                                  "alltoall: algorithm slots ("};
    for (int i = 0; i < 3; i++) {
        char line[160];
        snprintf(line, sizeof line, "%s", vlines[i]);
        CHECK_MSG(count_matching(r.err, line) == 3, "%s\n%s", line, r.err);
    }
    CHECK_MSG(count_matching(r.err, "rule 3: blocking, host, slots, v-variant") == 9, "%s", r.err);
    CHECK_MSG(count_matching(r.err, "gather: algorithm linear (") == 3, "%s", r.err);
    run_free(&r);

    /* Without INFO for COLL, nothing. */
    snprintf(cmd, sizeof cmd, "CADRE_DEBUG=INFO CADRE_DEBUG_SUBSYS=P2P %s -n 2 %s", CADRERUN, prog);
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 120, &r) == 0);
    CHECK_MSG(r.exit_code == 0 && count_matching(r.err, ": algorithm ") == 0, "exit %d\n%s",
              r.exit_code, r.err);
    run_free(&r);
}

/* CADRE_ALGO on one rank only (set after cadre_init, which refuses ranks
 * that start with different ones): the algorithm is in the signature, and
 * every rank fails with a mismatch that says the ranks chose different
 * algorithms (the rank that finds it and those it tells) instead of mixing
 * two algorithms' messages. */
void test_mismatched_choice(void)
{
    char cmd[4096];
    struct run_result r;
    snprintf(cmd, sizeof cmd,
             "SELECT_MISMATCH=allreduce=ring CADRE_TIMEOUT=30 %s -n 3 %s", CADRERUN,
             build_path("tests/ranks/select_log"));
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 120, &r) == 0);
    CHECK_MSG(r.exit_code == 0 && count_matching(r.out, " ok") == 3 &&
                  count_matching(r.out, "chose different algorithms for allreduce") == 3,
              "exit %d\n--- stdout\n%s--- stderr\n%s", r.exit_code, r.out, r.err);
    run_free(&r);
}

/* cadre-info --algorithms prints every collective's table. */
void test_info_algorithms(void)
{
    struct run_result r;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s --algorithms", build_path("tools/cadre-info"));
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 30, &r) == 0);
    CU_ASSERT_EQUAL(r.exit_code, 0);
    for (int k = 0; k < COLL_NKINDS; k++) {
        char head[64];
        snprintf(head, sizeof head, "\n%s: bytes = ", cadre__coll_kind_name(k));
        CHECK_MSG(strstr(r.out, head) != NULL, "no table for %s:\n%s",
                  cadre__coll_kind_name(k), r.out);
    }
    CHECK_MSG(strstr(r.out, "split               blocking, host, slots, ranks>2, share<=1048576, "
                            "bytes>=65536") != NULL,
              "%s", r.out);
    CHECK_MSG(strstr(r.out, "CADRE_ALGO=allreduce=split: where blocking, host, slots, ranks>2, "
                            "share<=1048576, else the rules without slots") != NULL,
              "%s", r.out);
    run_free(&r);
}
