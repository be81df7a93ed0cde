/* The user-facing tools outside cadrerun: cadrecc's --showme forms (those
 * of Open MPI's mpicc) and cadre-info's report. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <regex.h>

#include "cadre.h"
#include "testutil.h"

#define CADRECC build_path("tools/cadrecc")

/* Runs cadrecc with args; returns its stdout (malloc'ed) and exit code. */
static char *cadrecc(const char *args, int *code, char **err)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "CADRE_CC=cc %s %s", CADRECC, args);
    struct run_result r;
    if (run_cmd(cmd, NULL, 30, &r) != 0)
        return NULL;
    *code = r.exit_code;
    char *out = r.out;
    *err = r.err;
    return out;
}

/* Every form prints its answer, exits 0 and runs no compiler (the file
 * named does not exist). */
static void test_showme_forms(void)
{
    static const struct {
        const char *args, *want, *not_want;
    } cases[] = {
        {"--showme -o app app.c", "cc -I", NULL},
        {"--showme -o app app.c", " -lcadre", NULL},
        {"--showme -c app.c", "-c app.c", "-lcadre"},
        {"-O2 --showme -o app app.c", "cc -I", NULL}, /* anywhere, as in mpicc */
        {"-showme -o app app.c", "-lcadre", NULL},
        {"--showme:command", "cc\n", "-I"},
        {"--showme:compile", "-I", "-lcadre"},
        {"--showme:link", "-lcadre", "-I"},
        {"-showme:link", "-lcadre", "-I"},
        {"--showme:incdirs", "/include\n", "-I"},
        {"--showme:libdirs", "/lib\n", "-L"},
        {"--showme:libs", "cadre\n", "-l"},
        {"--showme:version", "cadre", NULL},
        {"--showme:help", "--showme:libdirs", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int code = -1;
        char *err = NULL, *out = cadrecc(cases[i].args, &code, &err);
        CU_ASSERT_FATAL(out != NULL);
        CHECK_MSG(code == 0 && strstr(out, cases[i].want) &&
                      !(cases[i].not_want && strstr(out, cases[i].not_want)),
                  "cadrecc %s: exit %d, want '%s'%s%s in\n%s--- stderr\n%s", cases[i].args, code,
                  cases[i].want, cases[i].not_want ? " and no " : "",
                  cases[i].not_want ? cases[i].not_want : "", out, err);
        free(out);
        free(err);
    }
    /* --showme:incdirs and :libdirs are the directories of :compile and :link. */
    int c1, c2;
    char *e1, *e2, *inc = cadrecc("--showme:incdirs", &c1, &e1), *comp = cadrecc("--showme:compile", &c2, &e2);
    CU_ASSERT_FATAL(inc && comp);
    inc[strcspn(inc, "\n")] = '\0';
    char want[600];
    snprintf(want, sizeof want, "-I%s", inc);
    CHECK_MSG(strstr(comp, want) != NULL, "--showme:compile '%s' lacks %s", comp, want);
    free(inc), free(comp), free(e1), free(e2);
}

/* An unknown form is an error that names it as given (dashes included),
 * and no compiler runs. */
static void test_showme_unknown(void)
{
    static const struct {
        const char *args, *named;
    } bad[] = {{"--showme:libs_static", "'--showme:libs_static'"},
               {"--showme:", "'--showme:'"},
               {"-showme:foo app.c", "'-showme:foo'"},
               {"--showme:foo app.c", "'--showme:foo'"},
               {"-c x.c --showme:cflags", "'--showme:cflags'"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int code = -1;
        char *err = NULL, *out = cadrecc(bad[i].args, &code, &err);
        CU_ASSERT_FATAL(out != NULL);
        char want[128];
        snprintf(want, sizeof want, "cadrecc: unknown option %s ", bad[i].named);
        CHECK_MSG(code == 2 && strstr(err, want) && !*out,
                  "cadrecc %s: exit %d, want 2 and \"%s\"\n--- stdout\n%s--- stderr\n%s",
                  bad[i].args, code, want, out, err);
        free(out);
        free(err);
    }
}

/* ---- pkg-config ---------------------------------------------------------------- */
/* The build tree's cadre.pc (installcheck checks the installed one):
 * --cflags gives cadre's include directory and nothing else (cadre.h includes
 * no other package's headers; "Requires.private: pmix" added PMIx's), while
 * --static --libs still names what libcadre.a needs, libpmix among them. */
static void test_pkgconfig(void)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "command -v pkg-config >/dev/null || { echo 'no pkg-config'; exit 0; }; "
             "export PKG_CONFIG_PATH='%s'; echo \"inc=$(pkg-config --variable=includedir cadre)\"; "
             "echo \"cflags=$(pkg-config --cflags cadre)\"; "
             "echo \"static=$(pkg-config --static --libs cadre)\"",
             build_path("."));
    struct run_result r;
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 60, &r) == 0);
    if (strstr(r.out, "no pkg-config")) {
        fprintf(stderr, "\n    skipped: no pkg-config ");
        run_free(&r);
        return;
    }
    char inc[512] = "", cflags[1024] = "", stat[1024] = "";
    for (char *p = r.out; p && *p;) {
        char *e = strchr(p, '\n');
        if (e)
            *e = '\0';
        if (!strncmp(p, "inc=", 4))
            snprintf(inc, sizeof inc, "-I%s", p + 4);
        else if (!strncmp(p, "cflags=", 7))
            snprintf(cflags, sizeof cflags, "%s", p + 7);
        else if (!strncmp(p, "static=", 7))
            snprintf(stat, sizeof stat, " %s ", p + 7);
        p = e ? e + 1 : NULL;
    }
    /* Every word of --cflags is -I<includedir>; none where that is a system
     * directory pkg-config leaves out. */
    int others = 0;
    char *save = NULL;
    for (char *w = strtok_r(cflags, " \t", &save); w; w = strtok_r(NULL, " \t", &save))
        others += strcmp(w, inc) != 0;
    CHECK_MSG(r.exit_code == 0 && inc[2] && others == 0,
              "pkg-config --cflags cadre: %d word(s) besides %s\n--- stdout\n%s--- stderr\n%s",
              others, inc, r.out, r.err);
    CHECK_MSG(strstr(stat, " -lcadre ") && strstr(stat, " -lpmix ") && strstr(stat, " -lpthread "),
              "pkg-config --static --libs cadre: '%s' lacks -lcadre, -lpmix or -lpthread", stat);
    run_free(&r);
}

/* ---- cadre-info ---------------------------------------------------------------- */
static struct run_result info(const char *env, const char *args)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "env %s %s %s", env, build_path("tools/cadre-info"), args);
    struct run_result r;
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 60, &r) == 0);
    return r;
}

/* The line of out that starts with `start`, copied to line; 0 if none. */
static int line_starting(const char *out, const char *start, char *line, size_t cap)
{
    for (const char *p = out; p && *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (!strncmp(p, start, strlen(start))) {
            snprintf(line, cap, "%.*s", (int)(len < cap ? len : cap - 1), p);
            return 1;
        }
        p = e ? e + 1 : NULL;
    }
    return 0;
}

/* The build section: the library's version, the configure line that
 * config.status keeps, and no claim of a verbs transport. */
static void test_info_build(void)
{
    struct run_result r = info("", ""), c;
    char want[1200], line[1200];
    int ma, mi, pa;
    cadre_version(&ma, &mi, &pa);
    snprintf(want, sizeof want, "cadre version     : %d.%d.%d", ma, mi, pa);
    CHECK_MSG(r.exit_code == 0 && count_lines(r.out, want) == 1, "want '%s' in\n%s%s", want, r.out,
              r.err);
    snprintf(want, sizeof want, "%s --config", build_path("config.status"));
    CU_ASSERT_FATAL(run_cmd(want, NULL, 30, &c) == 0);
    c.out[strcspn(c.out, "\n")] = '\0';
    snprintf(want, sizeof want, "configure         : %s", c.out[0] ? c.out : "(no arguments)");
    CHECK_MSG(count_lines(r.out, want) == 1, "want '%s' in\n%s", want, r.out);
    CHECK_MSG(!strstr(r.out, "verbs"), "cadre-info mentions verbs, which no transport uses:\n%s",
              r.out);
    CHECK_MSG(line_starting(r.out, "CUDA              : ", line, sizeof line),
              "no CUDA line in\n%s", r.out);
    run_free(&c);
    run_free(&r);
}

/* The transports section: shm and tcp built and usable here (the tests run
 * over both); CADRE_TRANSPORT=tcp marks shm unused, with the reason. */
static void test_info_transports(void)
{
    struct run_result r = info("", "--transports");
    char line[600];
    CHECK_MSG(r.exit_code == 0 && line_starting(r.out, "shm ", line, sizeof line) &&
                  strstr(line, " yes    yes ") != NULL,
              "shm is not built and usable:\n%s%s", r.out, r.err);
    CHECK_MSG(line_starting(r.out, "tcp ", line, sizeof line) && strstr(line, " yes    yes ") &&
                  strstr(line, "lo 127.0.0.1"),
              "tcp is not built and usable on lo:\n%s", r.out);
    CHECK_MSG(line_starting(r.out, "cuda_ipc ", line, sizeof line), "no cuda_ipc line:\n%s", r.out);
    CHECK_MSG(!strstr(r.out, "tunable") && !strstr(r.out, "cadre version"),
              "--transports shows other sections:\n%s", r.out);
    run_free(&r);
    r = info("CADRE_TRANSPORT=tcp", "--transports");
    CHECK_MSG(line_starting(r.out, "shm ", line, sizeof line) &&
                  strstr(line, "no: not in CADRE_TRANSPORT") != NULL &&
                  line_starting(r.out, "tcp ", line, sizeof line) && strstr(line, " yes    yes "),
              "CADRE_TRANSPORT=tcp:\n%s", r.out);
    run_free(&r);
}

/* The tunables table: every row's type, default and meaning start in the
 * header's columns, whatever the length of the name (CADRE_LAUNCHER_KILL_GRACE
 * pushed them right before); a value set is shown. */
static void test_info_columns(void)
{
    struct run_result r = info("CADRE_LAUNCHER_KILL_GRACE=7", "--tunables");
    CU_ASSERT_FATAL(r.exit_code == 0);
    const char *hdr = r.out;
    CU_ASSERT_FATAL(!strncmp(hdr, "tunable ", 8));
    size_t col_type = (size_t)(strstr(hdr, "type") - hdr),
           col_def = (size_t)(strstr(hdr, "default") - hdr),
           col_mean = (size_t)(strstr(hdr, "meaning") - hdr);
    int rows = 0, bad = 0;
    for (const char *p = strchr(hdr, '\n'); p && p[1]; p = strchr(p + 1, '\n')) {
        const char *l = p + 1;
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        rows++;
        /* A column starts after a space, with a non-space. */
        size_t cols[3] = {col_type, col_def, col_mean};
        for (int k = 0; k < 3; k++)
            if (len <= cols[k] || l[cols[k] - 1] != ' ' || l[cols[k]] == ' ')
                bad++;
    }
    CHECK_MSG(rows >= 20 && bad == 0, "%d rows, %d cells out of their column:\n%s", rows, bad,
              r.out);
    char line[600];
    CHECK_MSG(line_starting(r.out, "CADRE_LAUNCHER_KILL_GRACE ", line, sizeof line) &&
                  strstr(line, "[set: 7]") != NULL,
              "no [set: 7]:\n%s", r.out);
    run_free(&r);
    r = info("", "--nosuch");
    CHECK_MSG(r.exit_code == 2 && strstr(r.err, "unknown option '--nosuch'") &&
                  strstr(r.err, "--transports"),
              "--nosuch: exit %d\n%s", r.exit_code, r.err);
    run_free(&r);
}

/* CADRE_DEBUG=INFO: one banner line per job, from rank 0, with the
 * version, the build and the rank count; alone, the singleton writes it. */
static void test_info_banner(void)
{
    int ma, mi, pa;
    cadre_version(&ma, &mi, &pa);
    for (int n = 1; n <= 3; n += 2) {
        char cmd[1024], want[128];
        if (n == 1)
            snprintf(cmd, sizeof cmd, "CADRE_DEBUG=INFO %s", build_path("examples/hello"));
        else
            snprintf(cmd, sizeof cmd, "CADRE_DEBUG=INFO %s -n %d %s", CADRERUN, n,
                     build_path("examples/hello"));
        struct run_result r;
        CU_ASSERT_FATAL(run_cmd(cmd, NULL, 60, &r) == 0);
        snprintf(want, sizeof want, "[rank 0 INFO RUNTIME] cadre version %d.%d.%d (cuda=", ma, mi,
                 pa);
        char tail[32];
        snprintf(tail, sizeof tail, "), %d ranks", n);
        CHECK_MSG(r.exit_code == 0 && count_matching(r.err, want) == 1 &&
                      count_matching(r.err, " cadre version ") == 1 &&
                      count_matching(r.err, tail) == 1,
                  "%d ranks: want one '%s...%s' line\n--- stderr\n%s", n, want, tail, r.err);
        run_free(&r);
    }
}

/* ---- make check's own output -------------------------------------------------- */
/* The runner on a suite whose tests print "name n=3: exit 0, 0.17 s" lines,
 * its stdout and stderr in one file as make check keeps them: CUnit's
 * verdict is never glued to such a line ("0.17 spassed"), and the runner
 * gives its wall time beside CUnit's CPU-only "Elapsed time". */
static void test_runner_output(void)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "env -u CADRE_TEST_PROGRESS_FD %s examples > cadre-tests-self.log 2>&1; "
             "st=$?; cat cadre-tests-self.log; rm -f cadre-tests-self.log; exit $st",
             build_path("tests/unit/cadre-tests"));
    struct run_result r;
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 300, &r) == 0);
    int glued = count_matching(r.out, " spassed") + count_matching(r.out, " sFAILED");
    CHECK_MSG(r.exit_code == 0 && glued == 0 && count_matching(r.out, "test verdict: passed") > 0 &&
                  count_matching(r.out, " s of wall time (CUnit's") == 1,
              "exit %d, %d verdicts glued to a program's line\n%s", r.exit_code, glued, r.out);
    run_free(&r);
}

/* A suite that fails on purpose, for the test below: registered only when
 * CADRE_TEST_SELFTEST is set, so no other run has it. */
static void selftest_passes(void)
{
    CU_ASSERT(1);
}

static void selftest_fails(void)
{
    test_note_program("good_prog n=2: exit 0", 1);
    test_note_program("bad_prog n=3 env X=1: exit 1", 0);
    CU_ASSERT(0);
}

void suite_selftest(void)
{
    if (!getenv("CADRE_TEST_SELFTEST"))
        return;
    CU_pSuite s = CU_add_suite("selftest", NULL, NULL);
    CU_add_test(s, "passes", selftest_passes);
    CU_add_test(s, "fails on purpose", selftest_fails);
}

/* Lines of text matching the extended regular expression re. */
static int count_regex(const char *text, const char *re)
{
    regex_t rx;
    if (regcomp(&rx, re, REG_EXTENDED | REG_NEWLINE | REG_NOSUB) != 0)
        return -1;
    int n = 0;
    for (const char *p = text; p && *p;) {
        const char *e = strchr(p, '\n');
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)(e ? e - p : (long)strlen(p)), p);
        n += regexec(&rx, line, 0, NULL, 0) == 0;
        p = e ? e + 1 : NULL;
    }
    regfree(&rx);
    return n;
}

/* The runner's closing summary, on a suite with a failed test: on the
 * progress fd (make check's stderr) and in the log, one line of the form CI
 * reads ("tests: 1 passed, 1 failed", alone, the only such line), then the
 * failed test and the failed ranks.list program by name; and the exit
 * status is not 0. */
static void test_runner_summary(void)
{
    static const char form[] =
        "^([A-Za-z0-9_]+: )?[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$";
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "CADRE_TEST_SELFTEST=1 CADRE_TEST_PROGRESS_FD=3 %s selftest 3>&1 1>&2",
             build_path("tests/unit/cadre-tests"));
    struct run_result r;
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 60, &r) == 0);
    /* r.out: the progress fd; r.err: the log (CUnit's output and stderr). */
    const char *where[] = {r.out, r.err};
    for (int i = 0; i < 2; i++) {
        const char *t = where[i];
        const char *count = strstr(t, "\ntests: 1 passed, 1 failed\n");
        const char *failed = strstr(t, "\nFAILED: selftest: fails on purpose\n");
        const char *prog = strstr(t, "\nFAILED: ranks.list: bad_prog n=3 env X=1: exit 1\n");
        CHECK_MSG(count_regex(t, form) == 1 && count && failed > count && prog > count &&
                      count_matching(t, "ranks.list: 2 programs run, 1 failed") == 1 &&
                      count_matching(t, "good_prog") == 0,
                  "%s: want the counts, then the failed test and program\n%s",
                  i ? "the log" : "the progress fd", t);
    }
    CHECK_MSG(r.exit_code == 1, "cadre-tests selftest: exit %d, want 1", r.exit_code);
    run_free(&r);
}

void suite_tools(void)
{
    CU_pSuite s = CU_add_suite("tools", NULL, NULL);
    CU_add_test(s, "cadrecc: every --showme form of mpicc", test_showme_forms);
    CU_add_test(s, "cadrecc: an unknown --showme form is an error", test_showme_unknown);
    CU_add_test(s, "pkg-config: --cflags only cadre's directory, --static --libs PMIx's",
                test_pkgconfig);
    CU_add_test(s, "cadre-info: version, configure line, no verbs", test_info_build);
    CU_add_test(s, "cadre-info: transports built and usable", test_info_transports);
    CU_add_test(s, "cadre-info: tunables in columns; unknown option", test_info_columns);
    CU_add_test(s, "CADRE_DEBUG=INFO: rank 0's version banner", test_info_banner);
    CU_add_test(s, "cadre-tests: verdicts on their own line, wall time", test_runner_output);
    CU_add_test(s, "cadre-tests: closing counts and failed tests by name; exit 1",
                test_runner_summary);
}
