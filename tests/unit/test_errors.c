/* Errors visible by default: a failing call writes one warning line with its
 * rank (CADRE_ERRORS=warn), nothing (return), or ends the job (abort);
 * cadre_comm_set_errors overrides it per communicator; a call fails and is
 * reported once however deep inside the library it failed. The rank side is
 * tests/ranks/errors_test.c (statuses and modes); here the lines on stderr
 * are counted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define ERRPROG build_path("tests/ranks/errors_test")
/* In every line that reports a failed call (and in no other line the jobs
 * here should write; other warnings are not counted). */
#define REPORT " WARN RUNTIME] cadre_"
#define SHOW(r) "exit %d%s\n--- stdout\n%s--- stderr\n%s", (r).exit_code, \
                (r).timed_out ? " (timed out)" : "", (r).out, (r).err

/* env: assignments for the job (CADRE_ERRORS is unset unless they set it). */
static void run_err(struct run_result *r, const char *env, int n)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "env -u CADRE_ERRORS %s %s -n %d %s", env, CADRERUN, n, ERRPROG);
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 90, r) == 0);
}

static int all_ok(const struct run_result *r, int n)
{
    int ok = 0;
    for (int i = 0; i < n; i++) {
        char line[64];
        snprintf(line, sizeof line, "errors: rank %d ok", i);
        ok += count_lines(r->out, line) == 1;
    }
    return ok == n;
}

/* Lines of text that begin with `head` and contain `mid` (may be NULL) and
 * end with `tail`. */
static int count_shaped(const char *text, const char *head, const char *mid, const char *tail)
{
    int n = 0;
    size_t hl = strlen(head), tl = strlen(tail);
    for (const char *p = text; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t l = nl ? (size_t)(nl - p) : strlen(p);
        char line[4096];
        snprintf(line, sizeof line, "%.*s", (int)(l < sizeof line - 1 ? l : sizeof line - 1), p);
        size_t ll = strlen(line);
        if (ll >= hl + tl && !strncmp(line, head, hl) && !strcmp(line + ll - tl, tail) &&
            (!mid || strstr(line, mid)))
            n++;
        p = nl ? nl + 1 : NULL;
    }
    return n;
}

/* Warning lines of rank `rank` for a failing call fn with status code. */
static int warnings(const char *err, int rank, const char *fn, const char *mid, const char *code)
{
    char head[128], tail[64];
    snprintf(head, sizeof head, "[rank %d WARN RUNTIME] %s: ", rank, fn);
    snprintf(tail, sizeof tail, " (%s)", code);
    return count_shaped(err, head, mid, tail);
}

/* Default (warn): one line per failing call, with the rank; the call
 * returned its status (the ranks check it) and the job goes on. */
static void test_default_warns(void)
{
    const int n = 3;
    struct run_result r;
    run_err(&r, "ERRTEST=send", n);
    CHECK_MSG(r.exit_code == 0 && all_ok(&r, n), SHOW(r));
    for (int i = 0; i < n; i++)
        CHECK_MSG(warnings(r.err, i, "cadre_send", "dst 99", "CADRE_ERR_ARG") == 1, SHOW(r));
    CHECK_MSG(count_matching(r.err, REPORT) == n, SHOW(r));
    run_free(&r);

    /* A value that is none of the three is reported, and warn applies. */
    run_err(&r, "ERRTEST=send CADRE_ERRORS=loud", n);
    CHECK_MSG(r.exit_code == 0 && all_ok(&r, n), SHOW(r));
    CHECK_MSG(count_matching(r.err, "ignoring CADRE_ERRORS=\"loud\"") == n, SHOW(r));
    for (int i = 0; i < n; i++)
        CHECK_MSG(warnings(r.err, i, "cadre_send", "dst 99", "CADRE_ERR_ARG") == 1, SHOW(r));
    run_free(&r);
}

static void test_return_is_silent(void)
{
    const int n = 3;
    struct run_result r;
    run_err(&r, "ERRTEST=send CADRE_ERRORS=return", n);
    CHECK_MSG(r.exit_code == 0 && all_ok(&r, n), SHOW(r));
    CHECK_MSG(count_matching(r.err, REPORT) == 0 && count_matching(r.err, "cadre_send") == 0,
              SHOW(r));
    run_free(&r);
}

/* abort: the line, then cadre_abort with the status as exit code. */
static void test_abort_ends_the_job(void)
{
    const int n = 3;
    struct run_result r;
    run_err(&r, "ERRTEST=send CADRE_ERRORS=ABORT", n);
    CHECK_MSG(r.exit_code == 1 /* CADRE_ERR_ARG */, SHOW(r));
    CHECK_MSG(count_matching(r.err, "called cadre_abort(1)") == 1, SHOW(r));
    int lines = 0;
    for (int i = 0; i < n; i++)
        lines += warnings(r.err, i, "cadre_send", "dst 99", "CADRE_ERR_ARG");
    CHECK_MSG(lines >= 1, SHOW(r));
    CHECK_MSG(count_matching(r.out, " ok") == 0, SHOW(r));
    run_free(&r);
}

/* A dup'd communicator set to the other mode, both ways, while world keeps
 * the environment's; dup and split inherit; a dup made before world changes
 * keeps what it had. errors_test's sends name dst 98 (world), 97 (the dup),
 * 96 (its dup), 95 (its split), 94 (the older dup of world). */
static void test_override(void)
{
    const int n = 3;
    for (int base_warn = 1; base_warn >= 0; base_warn--) {
        struct run_result r;
        run_err(&r, base_warn ? "ERRTEST=override" : "ERRTEST=override CADRE_ERRORS=return", n);
        CHECK_MSG(r.exit_code == 0 && all_ok(&r, n), SHOW(r));
        static const char *const dsts[] = {"dst 98", "dst 97", "dst 96", "dst 95", "dst 94"};
        static const int on_base[] = {1, 0, 0, 0, 1}; /* reported when world warns */
        for (int i = 0; i < n; i++)
            for (int d = 0; d < 5; d++) {
                int want = on_base[d] == base_warn;
                int got = warnings(r.err, i, "cadre_send", dsts[d], "CADRE_ERR_ARG");
                if (got != want)
                    fprintf(stderr, "\n  rank %d, %s: %d lines, expected %d", i, dsts[d], got,
                            want);
                CHECK_MSG(got == want, SHOW(r));
            }
        CHECK_MSG(count_matching(r.err, REPORT) == n * (base_warn ? 2 : 3), SHOW(r));
        run_free(&r);
    }
}

/* CADRE_ERRORS=return, a dup set to abort: world's failure is silent, the
 * dup's ends the job. */
static void test_abort_on_a_dup(void)
{
    struct run_result r;
    run_err(&r, "ERRTEST=abort_dup CADRE_ERRORS=return", 2);
    CHECK_MSG(r.exit_code == 1, SHOW(r));
    CHECK_MSG(warnings(r.err, 1, "cadre_send", "dst 97", "CADRE_ERR_ARG") == 1, SHOW(r));
    CHECK_MSG(count_matching(r.err, "dst 98") == 0, SHOW(r));
    CHECK_MSG(count_matching(r.err, "called cadre_abort(1)") == 1, SHOW(r));
    CHECK_MSG(count_matching(r.err, "returned under") == 0, SHOW(r));
    run_free(&r);
}

/* cadre_wait_timeout's timeout and cadre_test's not-done are answers, not
 * failures; a bad cadre_comm_set_errors is a failure. */
static void test_quiet_results(void)
{
    const int n = 3;
    struct run_result r;
    run_err(&r, "ERRTEST=quiet", n);
    CHECK_MSG(r.exit_code == 0 && all_ok(&r, n), SHOW(r));
    for (int i = 0; i < n; i++)
        CHECK_MSG(warnings(r.err, i, "cadre_comm_set_errors", "mode 7", "CADRE_ERR_ARG") == 1,
                  SHOW(r));
    CHECK_MSG(count_matching(r.err, REPORT) == n, SHOW(r));
    run_free(&r);
}

/* A split whose allgather inside times out, then an allreduce: each rank
 * that waited writes its diagnosis block, naming the call it made (not the
 * allgather, the point-to-point or the wait inside), and one warning line
 * per call. The allreduce's warning is its block's line, not repeated; the
 * split's warning stays, saying which step of the split failed. */
static void test_reported_once(void)
{
    const int n = 3;
    struct run_result r;
    run_err(&r, "ERRTEST=internal CADRE_TIMEOUT=2", n);
    CHECK_MSG(r.exit_code == 0 && all_ok(&r, n), SHOW(r));
    for (int i = 0; i < n - 1; i++) {
        CHECK_MSG(warnings(r.err, i, "cadre_comm_split", "made no progress", "CADRE_ERR_TIMEOUT") ==
                      1,
                  SHOW(r));
        char head[64];
        snprintf(head, sizeof head, "rank %d: cadre_allreduce: ", i);
        CHECK_MSG(count_shaped(r.err, head, "made no progress", "") == 1, SHOW(r));
        /* The split's diagnosis block names the split, the call the
         * program made, not the allgather it runs inside. */
        snprintf(head, sizeof head, "rank %d: cadre_comm_split: ", i);
        CHECK_MSG(count_shaped(r.err, head, "made no progress", "") == 1, SHOW(r));
        snprintf(head, sizeof head, "rank %d: cadre_allgather: ", i);
        CHECK_MSG(count_shaped(r.err, head, "", "") == 0, SHOW(r));
    }
    CHECK_MSG(count_matching(r.err, REPORT) == n - 1, SHOW(r));
    run_free(&r);
}

/* cadre-info lists the variable with its default, from the config table. */
static void test_info_lists_it(void)
{
    struct run_result r;
    CU_ASSERT_FATAL(run_cmd(build_path("tools/cadre-info"), NULL, 30, &r) == 0);
    CHECK_MSG(r.exit_code == 0 && count_shaped(r.out, "CADRE_ERRORS ", " warn ", "") == 1,
              SHOW(r));
    run_free(&r);
}

void suite_errors(void)
{
    CU_pSuite s = CU_add_suite("errors", NULL, NULL);
    CU_add_test(s, "a failing call warns once by default", test_default_warns);
    CU_add_test(s, "CADRE_ERRORS=return is silent", test_return_is_silent);
    CU_add_test(s, "CADRE_ERRORS=abort ends the job", test_abort_ends_the_job);
    CU_add_test(s, "cadre_comm_set_errors on a dup, both ways", test_override);
    CU_add_test(s, "abort on a dup only", test_abort_on_a_dup);
    CU_add_test(s, "expected results are not reported", test_quiet_results);
    CU_add_test(s, "a failure inside a call is reported once", test_reported_once);
    CU_add_test(s, "cadre-info lists CADRE_ERRORS", test_info_lists_it);
}
