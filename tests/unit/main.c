/* The one CUnit runner of make check. `cadre-tests [suite ...]` runs only the
 * named suites. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "testutil.h"

#define X(fn) void fn(void);
#include "suites.h"
#undef X

/* ---- progress: one line per test, as it ends (test_progress) ------------------ */
/* CUnit's basic interface owns the run's event handlers, so each test
 * function is wrapped instead: the wrapper finishes the line of the test
 * before it (which ended just now, or by a fatal assertion's longjmp out of
 * its function, past any code of ours after the call) and runs its own. */
struct wrapped {
    CU_pTest test;
    CU_TestFunc fn;
};
static struct wrapped *wrapped;
static size_t nwrapped;

static struct {
    CU_pTest test;
    const char *suite;
    double t0;
    unsigned failures;
} current;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Failures so far in this run: assertions and whole tests (a test that
 * failed by a fatal assertion counts in both). */
static unsigned failures_now(void)
{
    return CU_get_number_of_failures() + CU_get_number_of_tests_failed();
}

/* ---- the closing summary: counts, then the failed tests by name ------------------ */
static struct {
    unsigned passed, failed;
    char **names; /* "suite: test" of the failed ones */
} tally;

static void tally_test(const char *suite, const char *test, int failed)
{
    if (!failed) {
        tally.passed++;
        return;
    }
    char **more = realloc(tally.names, (tally.failed + 1) * sizeof *more);
    size_t len = strlen(suite) + strlen(test) + 3;
    char *name = malloc(len);
    if (!more || !name)
        abort();
    snprintf(name, len, "%s: %s", suite, test);
    tally.names = more;
    tally.names[tally.failed++] = name;
}

/* Printed last, on stdout (the log) and on the progress fd (make check's
 * stderr, just before the harness's "# TOTAL" block, which counts test
 * programs, not tests): one line "tests: N passed, N failed" (the form CI
 * reads), then one line per failed test and failed program of ranks.list. */
static void print_suite_times(void);

static void print_summary(const char *failures_beyond)
{
    int pfailed;
    const char *const *pnames;
    int pran = test_programs(&pfailed, &pnames);
    print_suite_times();
    if (pran) {
        printf("ranks.list: %d programs run, %d failed\n", pran, pfailed);
        test_progress("ranks.list: %d programs run, %d failed", pran, pfailed);
    }
    if (failures_beyond) {
        printf("%s\n", failures_beyond);
        test_progress("%s", failures_beyond);
    }
    printf("tests: %u passed, %u failed\n", tally.passed, tally.failed);
    test_progress_plain("tests: %u passed, %u failed", tally.passed, tally.failed);
    enum { SHOWN = 40 };
    for (unsigned i = 0; i < tally.failed; i++) {
        if (i < SHOWN) {
            printf("FAILED: %s\n", tally.names[i]);
            test_progress_plain("FAILED: %s", tally.names[i]);
        }
        free(tally.names[i]);
    }
    if (tally.failed > SHOWN) {
        printf("... and %u more failed tests\n", tally.failed - SHOWN);
        test_progress_plain("... and %u more failed tests", tally.failed - SHOWN);
    }
    for (int i = 0; i < pfailed && i < SHOWN; i++) {
        printf("FAILED: ranks.list: %s\n", pnames[i]);
        test_progress_plain("FAILED: ranks.list: %s", pnames[i]);
    }
    free(tally.names);
    fflush(stdout);
}

/* Wall time by suite, in the order they ran: the closing summary's line
 * "time by suite", which says where make check's minutes go. */
static struct {
    const char *name;
    double secs;
} suite_time[64];
static int nsuite_time;

static void add_suite_time(const char *suite, double secs)
{
    int i = 0;
    while (i < nsuite_time && strcmp(suite_time[i].name, suite) != 0)
        i++;
    if (i == nsuite_time) {
        if (nsuite_time == 64)
            return;
        suite_time[nsuite_time++].name = suite;
    }
    suite_time[i].secs += secs;
}

static void print_suite_times(void)
{
    char line[2048];
    size_t len = 0;
    for (int i = 0; i < nsuite_time && len < sizeof line; i++)
        len += (size_t)snprintf(line + len, sizeof line - len, "%s%s %.0f s", i ? ", " : "",
                                suite_time[i].name, suite_time[i].secs);
    if (nsuite_time) {
        printf("time by suite: %s\n", line);
        test_progress("time by suite: %s", line);
    }
}

static void finish_current(void)
{
    if (!current.test)
        return;
    unsigned failed = failures_now() - current.failures;
    double secs = now_s() - current.t0;
    test_progress("%s: %s: %s (%.1f s)", current.suite, current.test->pName,
                  failed ? "FAILED" : "ok", secs);
    add_suite_time(current.suite, secs);
    tally_test(current.suite, current.test->pName, failed != 0);
    current.test = NULL;
}

/* A test that printed a partial line on stderr (the tests print "name: exit
 * 0, 0.79 s" as they go, each line started with a newline) would get
 * CUnit's verdict glued to it, as if that program had failed ("exit 0, 0.79
 * sFAILED"). make check's log is a file: when its last byte is not a
 * newline, the verdict goes on a line of its own. */
static void end_partial_line(void)
{
    fflush(stdout);
    fflush(stderr);
    off_t end = lseek(STDERR_FILENO, 0, SEEK_CUR);
    if (end <= 0)
        return; /* a terminal or a pipe: nothing to look at */
    /* The log is open write-only: read its last byte through a new file. */
    int fd = open("/proc/self/fd/2", O_RDONLY);
    char last = '\n';
    if (fd >= 0) {
        if (pread(fd, &last, 1, end - 1) != 1)
            last = '\n';
        close(fd);
    }
    if (last != '\n')
        fputs("\n  test verdict: ", stderr);
}

static void run_wrapped(void)
{
    finish_current();
    CU_pTest t = CU_get_current_test();
    CU_pSuite s = CU_get_current_suite();
    for (size_t i = 0; i < nwrapped; i++) {
        if (wrapped[i].test != t)
            continue;
        current.test = t;
        current.suite = s ? s->pName : "?";
        current.failures = failures_now();
        current.t0 = now_s();
        wrapped[i].fn();
        end_partial_line();
        return;
    }
}

static int wrap_tests(void)
{
    CU_pTestRegistry reg = CU_get_registry();
    for (CU_pSuite s = reg->pSuite; s; s = s->pNext) {
        for (CU_pTest t = s->pTest; t; t = t->pNext) {
            struct wrapped *more = realloc(wrapped, (nwrapped + 1) * sizeof *more);
            if (!more)
                return -1;
            wrapped = more;
            wrapped[nwrapped++] = (struct wrapped){t, t->pTestFunc};
            t->pTestFunc = run_wrapped;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    double t_start = now_s();
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
#define X(fn) fn();
#include "suites.h"
#undef X
    if (wrap_tests() != 0)
        return 1;
    /* The log keeps CUnit's lines and the tests' stderr in the order they
     * happened. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    /* The suites to run: the arguments, else CADRE_TEST_SUITES (names
     * separated by spaces or commas; what make check runs), else all. */
    char *names[64];
    int nnames = 0;
    for (int i = 1; i < argc && nnames < 64; i++)
        names[nnames++] = argv[i];
    char env[512] = "";
    const char *sel = getenv("CADRE_TEST_SUITES");
    if (!nnames && sel && *sel) {
        snprintf(env, sizeof env, "%s", sel);
        char *save = NULL;
        for (char *t = strtok_r(env, " ,", &save); t && nnames < 64; t = strtok_r(NULL, " ,", &save))
            names[nnames++] = t;
    }
    /* Each CU_basic_run_suite starts a new run summary: the failures are
     * added up suite by suite, or a failing suite followed by a passing one
     * would pass. */
    unsigned failed = 0, suites_failed = 0;
    if (nnames) {
        for (int i = 0; i < nnames; i++) {
            if (!CU_get_suite(names[i])) {
                fprintf(stderr, "cadre-tests: no suite named '%s'\n", names[i]);
                CU_cleanup_registry();
                return 2;
            }
        }
        for (int i = 0; i < nnames; i++) {
            CU_basic_run_suite(CU_get_suite(names[i]));
            finish_current(); /* before the next run resets the counts */
            failed += CU_get_number_of_failures() + CU_get_number_of_tests_failed();
            suites_failed += CU_get_number_of_suites_failed();
        }
    } else {
        CU_basic_run_tests();
        finish_current();
        failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
        suites_failed = CU_get_number_of_suites_failed();
    }
    /* CUnit's "Elapsed time" is clock(): this process's CPU time, which
     * leaves out every program the tests ran and the time spent waiting
     * for them. */
    double wall = now_s() - t_start;
    printf("\ncadre-tests: %.1f s of wall time (CUnit's \"Elapsed time\" above counts only the "
           "runner's own CPU time)\n", wall);
    test_progress("%s, %.1f s", failed ? "some tests FAILED (see tests/unit/cadre-tests.log)"
                                      : "every test passed", wall);
    if (failed && nnames > 1)
        fprintf(stderr, "\ncadre-tests: %u failure(s) in the suites run (see each summary)\n",
                failed);
    /* A suite whose set-up failed ran no test: a failure none of the
     * tests' names tells. */
    char beyond[128] = "";
    if (suites_failed)
        snprintf(beyond, sizeof beyond, "%u suite(s) failed to set up or clean up: see the log",
                 suites_failed);
    print_summary(beyond[0] ? beyond : NULL);
    CU_cleanup_registry();
    return failed || tally.failed ? 1 : 0;
}
