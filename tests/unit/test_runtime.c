/* Runtime core without a launcher: status strings, errors before init,
 * the singleton world, configuration parsing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cadre.h"
#include "testutil.h"

static void test_error_strings(void)
{
    for (int s = CADRE_SUCCESS; s <= CADRE_ERR_INTERNAL; s++) {
        const char *t = cadre_error_string(s);
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        CU_ASSERT(strncmp(t, "CADRE_", 6) == 0);
    }
    CU_ASSERT_STRING_EQUAL(cadre_error_string(-5), "unknown status");
    CU_ASSERT_STRING_EQUAL(cadre_error_string(9999), "unknown status");
    CU_ASSERT(strstr(cadre_error_string(CADRE_ERR_TRUNCATE), "TRUNCATE") != NULL);
}

static void test_datatype_size(void)
{
    static const struct { cadre_datatype_t dt; size_t size; } t[] = {
        {CADRE_INT8, 1}, {CADRE_UINT8, 1}, {CADRE_INT32, 4}, {CADRE_UINT32, 4},
        {CADRE_INT64, 8}, {CADRE_UINT64, 8}, {CADRE_FLOAT16, 2}, {CADRE_BFLOAT16, 2},
        {CADRE_FLOAT32, 4}, {CADRE_FLOAT64, 8}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        CU_ASSERT_EQUAL(cadre_datatype_size(t[i].dt), t[i].size);
    CU_ASSERT_EQUAL(cadre_datatype_size((cadre_datatype_t)99), 0);
    CU_ASSERT_EQUAL(cadre_datatype_size((cadre_datatype_t)-1), 0);
}

/* Runs the singleton program in a child: init is once per process. */
static void test_singleton_program(void)
{
    struct run_result r;
    CU_ASSERT_FATAL(run_cmd(build_path("tests/ranks/init_basic"), NULL, 30, &r) == 0);
    CHECK_MSG(r.exit_code == 0, "init_basic alone exited %d\nstdout:%s\nstderr:%s", r.exit_code,
              r.out, r.err);
    run_free(&r);
}

/* What this process writes to stderr between stderr_begin and stderr_end
 * (the failing calls' warnings, CADRE_ERRORS=warn), captured in a file. */
static int stderr_begin(FILE **f)
{
    fflush(stderr);
    *f = tmpfile();
    int saved = dup(STDERR_FILENO);
    if (*f && saved >= 0)
        dup2(fileno(*f), STDERR_FILENO);
    return saved;
}

static char *stderr_end(FILE *f, int saved)
{
    static char text[8192];
    fflush(stderr);
    if (saved >= 0) {
        dup2(saved, STDERR_FILENO);
        close(saved);
    }
    text[0] = '\0';
    if (f) {
        rewind(f);
        size_t n = fread(text, 1, sizeof text - 1, f);
        text[n] = '\0';
        fclose(f);
    }
    return text;
}

/* Whether the warnings of this process can be counted: the runner's
 * environment may set CADRE_ERRORS. */
static int default_mode(void)
{
    const char *e = getenv("CADRE_ERRORS");
    return !e || !strcmp(e, "warn");
}

static void test_version(void)
{
    int a, b, c;
    CU_ASSERT_EQUAL(cadre_version(&a, &b, &c), CADRE_SUCCESS);
    CU_ASSERT_EQUAL(a, CADRE_VERSION_MAJOR);
    CU_ASSERT_EQUAL(b, CADRE_VERSION_MINOR);
    CU_ASSERT_EQUAL(c, CADRE_VERSION_PATCH);
    FILE *f;
    int saved = stderr_begin(&f);
    CU_ASSERT_EQUAL(cadre_version(NULL, &b, &c), CADRE_ERR_ARG);
    const char *err = stderr_end(f, saved);
    CU_ASSERT(strstr(cadre_last_error(), "major") != NULL);
    /* Before cadre_init the warning has no rank: "cadre" stands in. */
    if (default_mode())
        CHECK_MSG(!strcmp(err, "[cadre WARN RUNTIME] cadre_version: major is NULL "
                               "(CADRE_ERR_ARG)\n"),
                  "stderr: %s", err);
}

/* In this process cadre_init is never called: every call that needs it must
 * say so with CADRE_ERR_STATE and a message naming the function. */
static void test_calls_before_init(void)
{
    int x = 42, flag = 7;
    FILE *f;
    int saved = stderr_begin(&f);
    CU_ASSERT_EQUAL(cadre_initialized(&flag), CADRE_SUCCESS);
    CU_ASSERT_EQUAL(flag, 0);
    CU_ASSERT_EQUAL(cadre_initialized(NULL), CADRE_ERR_ARG);
    CU_ASSERT_EQUAL(cadre_comm_rank(CADRE_COMM_WORLD, &x), CADRE_ERR_STATE);
    CU_ASSERT(strstr(cadre_last_error(), "cadre_comm_rank") != NULL);
    CU_ASSERT(strstr(cadre_last_error(), "before cadre_init") != NULL);
    CU_ASSERT_EQUAL(cadre_comm_size(CADRE_COMM_WORLD, &x), CADRE_ERR_STATE);
    CU_ASSERT_EQUAL(cadre_local_rank(&x), CADRE_ERR_STATE);
    CU_ASSERT_EQUAL(cadre_local_size(&x), CADRE_ERR_STATE);
    CU_ASSERT_EQUAL(cadre_device(&x), CADRE_ERR_STATE);
    CU_ASSERT_EQUAL(cadre_finalize(), CADRE_ERR_STATE);
    CU_ASSERT(strstr(cadre_last_error(), "cadre_finalize") != NULL);
    CU_ASSERT_EQUAL(x, 42); /* outputs untouched on failure */
    /* One warning per failing call, each naming it. */
    const char *err = stderr_end(f, saved);
    if (default_mode()) {
        static const char *const calls[] = {"cadre_initialized", "cadre_comm_rank",
                                            "cadre_comm_size",   "cadre_local_rank",
                                            "cadre_local_size",  "cadre_device",
                                            "cadre_finalize"};
        for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
            char head[64];
            snprintf(head, sizeof head, "[cadre WARN RUNTIME] %s: ", calls[i]);
            CHECK_MSG(count_matching(err, head) == 1, "%s: stderr: %s", calls[i], err);
        }
        CHECK_MSG(count_matching(err, "WARN") == 7, "stderr: %s", err);
    }
}

/* Config values reach the runtime; a bad value warns and falls back. */
static void test_config_debug(void)
{
    struct run_result r;
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "CADRE_DEBUG=INFO CADRE_DEBUG_SUBSYS=RUNTIME %s",
             build_path("examples/hello"));
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 30, &r) == 0);
    CU_ASSERT_EQUAL(r.exit_code, 0);
    CHECK_MSG(strstr(r.err, "INFO RUNTIME] initialized") != NULL, "stderr: %s", r.err);
    CU_ASSERT(strstr(r.err, "BOOTSTRAP") == NULL); /* filtered out */
    run_free(&r);

    snprintf(cmd, sizeof cmd, "CADRE_GPU=banana %s", build_path("examples/hello"));
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 30, &r) == 0);
    CU_ASSERT_EQUAL(r.exit_code, 0);
    (void)r; /* without CUDA the value is never read; with CUDA it warns */
    run_free(&r);
}

/* A CADRE_DEBUG, CADRE_DEBUG_SUBSYS or CADRE_WAIT value that
 * means nothing is said once per process (it was ignored in silence), as
 * CADRE_TIMEOUT=abc is. */
static void test_config_debug_bad(void)
{
    static const struct {
        const char *env, *want;
        int lines;
    } cases[] = {
        {"CADRE_DEBUG=abc", "ignoring CADRE_DEBUG=\"abc\": not WARN, INFO or TRACE", 1},
        {"CADRE_DEBUG=Info CADRE_DEBUG_SUBSYS=RUNTIME", "ignoring", 0},
        {"CADRE_DEBUG=warn", "ignoring", 0},
        {"CADRE_DEBUG=", "ignoring", 0},
        {"CADRE_DEBUG_SUBSYS=RUNTIME,nosuch", "ignoring \"nosuch\" in CADRE_DEBUG_SUBSYS", 1},
        {"CADRE_WAIT=busy", "ignoring CADRE_WAIT=\"busy\": not auto, spin or sleep; using auto", 1},
        {"CADRE_WAIT=Sleep", "ignoring", 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "env %s %s", cases[k].env, build_path("examples/hello"));
        struct run_result r;
        CU_ASSERT_FATAL(run_cmd(cmd, NULL, 30, &r) == 0);
        CHECK_MSG(r.exit_code == 0 && count_matching(r.err, cases[k].want) == cases[k].lines,
                  "%s: want %d line(s) with '%s'; exit %d, stderr:\n%s", cases[k].env,
                  cases[k].lines, cases[k].want, r.exit_code, r.err);
        run_free(&r);
    }
}

/* CADRE_TIMEOUT of 0 or less: cadre_init fails with CADRE_ERR_ARG naming it
 * (it once made every wait fail at once, "made no progress for 0 s", while
 * the device waits took it for "never"); inf is no limit. */
static void test_config_timeout(void)
{
    static const struct {
        const char *value, *want;
        int exit_code;
    } cases[] = {
        {"0", "CADRE_TIMEOUT=0 out of range (seconds, more than 0; inf for no limit)", 1},
        {"-5", "CADRE_TIMEOUT=-5 out of range", 1},
        {"nan", "CADRE_TIMEOUT=nan out of range", 1},
        {"inf", "hello from rank 0 of 1", 0},
        {"0.5", "hello from rank 0 of 1", 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "env CADRE_TIMEOUT=%s %s 2>&1", cases[k].value,
                 build_path("examples/hello"));
        struct run_result r;
        CU_ASSERT_FATAL(run_cmd(cmd, NULL, 30, &r) == 0);
        CHECK_MSG(r.exit_code == cases[k].exit_code && strstr(r.out, cases[k].want),
                  "CADRE_TIMEOUT=%s: want exit %d and '%s'; exit %d, output:\n%s", cases[k].value,
                  cases[k].exit_code, cases[k].want, r.exit_code, r.out);
        run_free(&r);
    }
}

/* The tunables every rank must set alike (CADRE_CHECK, CADRE_ALGO,
 * CADRE_GPU_ALGO): one rank set otherwise fails every rank's cadre_init
 * with CADRE_ERR_ARG naming it. Before, CADRE_CHECK=0 at one rank made the
 * first collective fail with "rank 1 called ?(count=0)", and a CADRE_ALGO of
 * its own with CADRE_CHECK=0 everywhere waited until CADRE_TIMEOUT with "every
 * rank has joined it, yet nothing moved"; these hellos ran. Values that mean
 * the same (CADRE_CHECK=2, CADRE_GPU_ALGO=auto set or not) agree. */
static void test_config_agree(void)
{
    static const struct {
        const char *env, *want;
        int ok;
    } cases[] = {
        {"CADRE_CHECK=0", "CADRE_CHECK is ", 0},
        {"CADRE_ALGO=allreduce=ring", "CADRE_ALGO (\"", 0},
        {"CADRE_GPU_ALGO=staged", "CADRE_GPU_ALGO is ", 0},
        {"CADRE_GPU_ALGO=auto", "hello from rank 1 of 3", 1},
        {"CADRE_CHECK=2", "hello from rank 1 of 3", 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd,
                 "CADRE_TIMEOUT=20 %s -n 3 --timeout 30 sh -c 'if [ \"$CADRE_RANK\" = 1 ]; then "
                 "export %s; fi; exec %s' 2>&1",
                 CADRERUN, cases[k].env, build_path("examples/hello"));
        struct run_result r;
        CU_ASSERT_FATAL(run_cmd(cmd, NULL, 60, &r) == 0);
        int hellos = count_matching(r.out, "hello from rank ");
        int named = count_matching(r.out, cases[k].want);
        /* every rank that got as far as saying why names the tunable and rank 1, or
         * rank 1 names another rank */
        int wrong = 0;
        if (!cases[k].ok)
            for (const char *p = strstr(r.out, "WARN RUNTIME] cadre_init: "); p;
                 p = strstr(p + 1, "WARN RUNTIME] cadre_init: ")) {
                const char *eol = strchr(p, '\n');
                size_t len = eol ? (size_t)(eol - p) : strlen(p);
                char line[1024];
                snprintf(line, sizeof line, "%.*s", (int)(len < 1000 ? len : 1000), p);
                wrong += !strstr(line, cases[k].want) || !strstr(line, "(CADRE_ERR_ARG)") ||
                         !(strstr(line, "at rank 1") || strstr(line, "at rank 0") ||
                           strstr(line, "at rank 2"));
            }
        if (cases[k].ok)
            CHECK_MSG(r.exit_code == 0 && hellos == 3, "rank 1 with %s: want 3 hellos; exit %d, "
                      "output:\n%s", cases[k].env, r.exit_code, r.out);
        else
            CHECK_MSG(r.exit_code != 0 && hellos == 0 && named >= 1 && !wrong,
                      "rank 1 with %s: want every cadre_init to fail naming it ('%s'), no "
                      "hello; exit %d, %d hellos, %d lines naming it, %d wrong, output:\n%s",
                      cases[k].env, cases[k].want, r.exit_code, hellos, named, wrong, r.out);
        run_free(&r);
    }
}

/* A rank that does not take part in shared memory (CADRE_TRANSPORT=tcp)
 * publishes no verdict on it (p2p_shm_agree.c), and its peers must not ask
 * for one: each such lookup waited out the bootstrap's timeout before the
 * miss came (2 s a peer: 4 s for a 3-rank hello over tcp, 0.3 without),
 * and CADRE_DEBUG=TRACE logged it as "PMIx_Get(rank 1, cadre.shm.ok)
 * failed". All ranks on tcp, then rank 1 alone (its peers publish theirs,
 * which it reads; they ask it nothing). */
static void test_config_transport_verdict(void)
{
    static const char *const which[] = {"", "if [ \"$CADRE_RANK\" = 1 ]; then "};
    for (size_t k = 0; k < sizeof which / sizeof which[0]; k++) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd,
                 "CADRE_TIMEOUT=20 CADRE_DEBUG=TRACE %s -n 3 --timeout 30 sh -c '%sexport "
                 "CADRE_TRANSPORT=tcp%s; exec %s' 2>&1",
                 CADRERUN, which[k], k ? "; fi" : "", build_path("examples/hello"));
        struct run_result r;
        CU_ASSERT_FATAL(run_cmd(cmd, NULL, 60, &r) == 0);
        int hellos = count_matching(r.out, "hello from rank ");
        int asked = count_matching(r.out, "shm.ok");
        CHECK_MSG(r.exit_code == 0 && hellos == 3 && asked == 0,
                  "CADRE_TRANSPORT=tcp at %s: want 3 hellos and no lookup of a shared-memory "
                  "verdict that was never published; exit %d, %d hellos, %d lookups, output:\n%s",
                  k ? "rank 1" : "every rank", r.exit_code, hellos, asked, r.out);
        run_free(&r);
    }
}

void suite_runtime(void)
{
    CU_pSuite s = CU_add_suite("runtime", NULL, NULL);
    CU_add_test(s, "error strings", test_error_strings);
    CU_add_test(s, "datatype sizes", test_datatype_size);
    CU_add_test(s, "version", test_version);
    CU_add_test(s, "calls before init", test_calls_before_init);
    CU_add_test(s, "singleton program", test_singleton_program);
    CU_add_test(s, "CADRE_DEBUG and subsystems", test_config_debug);
    CU_add_test(s, "CADRE_DEBUG values that mean nothing", test_config_debug_bad);
    CU_add_test(s, "CADRE_TIMEOUT of 0 or less", test_config_timeout);
    CU_add_test(s, "tunables every rank must set alike", test_config_agree);
    CU_add_test(s, "CADRE_TRANSPORT=tcp: no lookup of a verdict never published",
                test_config_transport_verdict);
}
