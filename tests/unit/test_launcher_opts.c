/* The launcher suite's cases on stdio (--tag-output, stdin, --output-dir),
 * bad command lines, ranks that exit without cadre_finalize, --keep-going
 * with --timeout and cadre_abort, and --bind-to core's warning; the suite,
 * its helpers and its other cases are in test_launcher.c. Calls
 * test_launcher.h, testutil.h and the C library only. */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_launcher.h"

/* ---- stdio ----------------------------------------------------------------------------- */
/* Line `idx` of rank `rank` as launch_probe's write=K writes it (64 bytes
 * with the newline); returns its length. */
static size_t probe_line(char *buf, int rank, int idx)
{
    static const char pad[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    int n = snprintf(buf, 65, "rank %d line %06d ", rank, idx);
    memcpy(buf + n, pad, (size_t)(63 - n));
    buf[63] = '\n';
    buf[64] = '\0';
    return 64;
}

void test_tag_output(void)
{
    enum { NR = 4, KIB = 64, LINES = KIB * 16 };
    struct run_result r;
    launch(&r, NULL, NULL, "--tag-output -n %d %s write=%d", NR, PROBE, KIB);
    CHECK_MSG(r.exit_code == 0, "exit %d\n%s", r.exit_code, r.err);
    int next[NR] = {0}, bad = 0, header[NR] = {0};
    for (const char *p = r.out; *p;) {
        const char *nl = strchr(p, '\n');
        CU_ASSERT_PTR_NOT_NULL_FATAL(nl);
        size_t len = (size_t)(nl - p) + 1;
        int tag, rank, idx;
        char want[128];
        if (sscanf(p, "[%d] rank %d line %d ", &tag, &rank, &idx) == 3 && tag == rank &&
            rank >= 0 && rank < NR && idx == next[rank] &&
            (size_t)snprintf(want, sizeof want, "[%d] ", rank) + probe_line(want + strlen(want), rank, idx) == len &&
            !memcmp(p, want, len)) {
            next[rank]++;
        } else if (sscanf(p, "[%d] rank %d size", &tag, &rank) == 2 && tag == rank && rank >= 0 &&
                   rank < NR) {
            header[rank]++;
        } else if (bad++ < 3) {
            fprintf(stderr, "\n  bad line: %.*s", len > 200 ? 200 : (int)len, p);
        }
        p = nl + 1;
    }
    CU_ASSERT_EQUAL(bad, 0);
    for (int i = 0; i < NR; i++) {
        CHECK_MSG(next[i] == LINES, "rank %d: %d of %d lines in order", i, next[i], LINES);
        CU_ASSERT_EQUAL(header[i], 1);
    }
    check_clean(r.out);
    run_free(&r);
}

void test_stdin(void)
{
    struct run_result r;
    launch(&r, "alpha\nbeta\n", NULL, "-n 2 %s echo", PROBE);
    CHECK_MSG(r.exit_code == 0, REPORT(r));
    CU_ASSERT_EQUAL(count_lines(r.out, "rank 0 stdin: alpha"), 1);
    CU_ASSERT_EQUAL(count_lines(r.out, "rank 0 stdin: beta"), 1);
    CHECK_MSG(count_lines(r.out, "rank 0 stdin EOF after 2 lines") == 1, "%s", r.out);
    CHECK_MSG(count_lines(r.out, "rank 1 stdin EOF after 0 lines") == 1, "%s", r.out);
    check_clean(r.out);
    run_free(&r);

    /* No input at all: rank 0 sees EOF too. */
    launch(&r, NULL, NULL, "-n 1 %s echo", PROBE);
    CHECK_MSG(count_lines(r.out, "rank 0 stdin EOF after 0 lines") == 1, REPORT(r));
    check_clean(r.out);
    run_free(&r);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

void test_output_dir(void)
{
    char dir[128], path[256];
    snprintf(dir, sizeof dir, "%s-out/sub", tmpdir); /* created, parents too */
    struct run_result r;
    launch(&r, NULL, NULL, "--output-dir %s -n 2 %s err=oops write=1", dir, PROBE);
    CHECK_MSG(r.exit_code == 0, REPORT(r));
    CHECK_MSG(r.out_len == 0, "stdout should be empty:\n%s", r.out);
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/rank.%d.stdout", dir, i);
        char *out = slurp(path);
        CHECK_MSG(out != NULL, "no %s", path);
        if (out) {
            char want[64];
            snprintf(want, sizeof want, "rank %d size 2 local %d", i, i);
            CU_ASSERT_EQUAL(count_matching(out, want), 1);
            snprintf(want, sizeof want, "rank %d line 0000", i);
            CU_ASSERT_EQUAL(count_matching(out, want), 16);
            check_clean(out);
        }
        snprintf(path, sizeof path, "%s/rank.%d.stderr", dir, i);
        char *err = slurp(path);
        CHECK_MSG(err && !strcmp(err, "oops\n"), "%s: %s", path, err ? err : "(missing)");
    }
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s-out'", tmpdir);
    CU_ASSERT(system(cmd) == 0);
    run_free(&r);
}

/* ---- bad input --------------------------------------------------------------------------- */
void test_bad_input(void)
{
    static const struct {
        const char *args;
        int code;
        const char *msg;
    } cases[] = {
        {"--frobnicate PROBE", 2, "unknown option '--frobnicate' (see"},
        {"-q PROBE", 2, "unknown option '-q' (see"},
        /* A near miss of one option names it. */
        {"--tag-ouput PROBE", 2, "unknown option '--tag-ouput'; did you mean '--tag-output'?"},
        {"-tag-output PROBE", 2, "unknown option '-tag-output'; did you mean '--tag-output'?"},
        {"--keepgoing PROBE", 2, "unknown option '--keepgoing'; did you mean '--keep-going'?"},
        {"--timout=5 PROBE", 2, "unknown option '--timout=5'; did you mean '--timeout'?"},
        {"--outptu-dir x PROBE", 2, "did you mean '--output-dir'?"},
        {"--ranks-per-gpus 2 PROBE", 2, "did you mean '--ranks-per-gpu'?"},
        {"--keep-going=yes PROBE", 2, "option --keep-going takes no value"},
        {"-n 0 PROBE", 2, "-n: expected a whole number"},
        {"-n abc PROBE", 2, "-n: expected a whole number"},
        {"-np -3 PROBE", 2, "-np: expected a whole number"},
        {"-n", 2, "option -n needs a value"},
        {"-n 2", 2, "no program given"},
        {"", 2, "no program given"},
        {"--timeout soon PROBE", 2, "--timeout: expected a number"},
        {"--bind-to socket PROBE", 2, "--bind-to: expected core, numa or none"},
        {"-x 1A=b PROBE", 2, "-x: '1A=b' is not VAR"},
        {"--tag-output=yes PROBE", 2, "option --tag-output takes no value"},
        {"-n 2 cadre-no-such-program", 127, "program 'cadre-no-such-program' not found"},
        {"-n 2 ./cadre/no/such/file", 127, "program './cadre/no/such/file' not found"},
        {"-n 2 /etc/passwd", 126, "cannot execute '/etc/passwd'"},
        {"-n 2 /tmp", 126, "cannot execute '/tmp'"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char args[1024] = "";
        const char *p = strstr(cases[k].args, "PROBE");
        if (p)
            snprintf(args, sizeof args, "%.*s%s%s", (int)(p - cases[k].args), cases[k].args, PROBE,
                     p + 5);
        else
            snprintf(args, sizeof args, "%s", cases[k].args);
        struct run_result r;
        launch(&r, NULL, NULL, "%s", args);
        CHECK_MSG(r.exit_code == cases[k].code, "cadrerun %s: " REPORT_FMT, cases[k].args,
                  REPORT_ARGS(r));
        CHECK_MSG(count_matching(r.err, cases[k].msg) == 1 &&
                      count_matching(r.err, "cadrerun:") == 1 && r.err[r.err_len - 1] == '\n',
                  "cadrerun %s: want one line with '%s', got:\n%s", cases[k].args, cases[k].msg,
                  r.err);
        CU_ASSERT_EQUAL(r.out_len, 0);
        check_clean(NULL);
        run_free(&r);
    }

    struct run_result r;
    launch(&r, NULL, NULL, "--help");
    CU_ASSERT_EQUAL(r.exit_code, 0);
    CU_ASSERT(strstr(r.out, "usage: cadrerun") != NULL);
    run_free(&r);
    launch(&r, NULL, NULL, "--version");
    CU_ASSERT_EQUAL(r.exit_code, 0);
    CU_ASSERT(strncmp(r.out, "cadrerun (cadre) ", 17) == 0);
    run_free(&r);
}

/* ---- exits without cadre_finalize; --keep-going with --timeout and abort ------------- */
/* The rank's pid from its probe line, -1 when it printed none. */
static int probe_pid(const char *out, int rank, int n)
{
    struct rank_line l[8];
    memset(l, -1, sizeof l);
    parse_ranks(out, l, n < 8 ? n : 8);
    return rank < 8 ? l[rank].pid : -1;
}

static void check_none_running(const char *out, int n)
{
    struct rank_line l[8];
    memset(l, -1, sizeof l);
    parse_ranks(out, l, n < 8 ? n : 8);
    for (int i = 0; i < n && i < 8; i++)
        CHECK_MSG(l[i].pid <= 0 || !probe_running(l[i].pid), "rank %d (pid %d) survived", i,
                  l[i].pid);
}

/* A rank that initialized and exits without cadre_finalize leaves the
 * others waiting for it: status 0 is a failure too (status 1), said with the
 * rank and pid, and the job stops (a non-zero status: test_exit_status). */
void test_exit_without_finalize(void)
{
    check_failure("exit=0", 2, 1, "exited with status 0 without calling cadre_finalize");

    /* --keep-going: said the same way; the others finish. */
    struct run_result r;
    launch(&r, NULL, NULL, "--keep-going -n 3 %s exit=0@1 sleep=1", PROBE);
    CHECK_MSG(r.exit_code == 1 && !r.timed_out, REPORT(r));
    char line[256];
    snprintf(line, sizeof line,
             "cadrerun: rank 1 (pid %d) exited with status 0 without calling cadre_finalize "
             "(--keep-going: the other ranks go on)",
             probe_pid(r.out, 1, 3));
    CHECK_MSG(count_lines(r.err, line) == 1, "want '%s' in stderr:\n%s", line, r.err);
    CHECK_MSG(count_matching(r.err, "cadrerun:") == 1, "one line only:\n%s", r.err);
    check_clean(r.out);
    run_free(&r);
}

/* Programs that never call cadre_init are judged by their status alone. */
void test_not_cadre_program(void)
{
    struct run_result r;
    launch(&r, NULL, NULL, "-n 2 /bin/true");
    CHECK_MSG(r.exit_code == 0 && r.err_len == 0, REPORT(r));
    check_clean(NULL);
    run_free(&r);

    launch(&r, NULL, NULL, "-n 3 /bin/sh -c 'sleep 0.2'");
    CHECK_MSG(r.exit_code == 0 && r.err_len == 0, REPORT(r));
    check_clean(NULL);
    run_free(&r);

    launch(&r, NULL, NULL, "-n 2 /bin/false");
    CHECK_MSG(r.exit_code == 1, REPORT(r));
    CHECK_MSG(count_matching(r.err, ") exited with status 1") == 1 &&
                  count_matching(r.err, "cadre_finalize") == 0,
              REPORT(r));
    check_clean(NULL);
    run_free(&r);
}

/* --timeout stops a job that --keep-going let run on after a death (it
 * never stopped before); the death, first, decides the status. */
void test_keep_going_timeout(void)
{
    struct run_result r;
    launch(&r, NULL, NULL, "--keep-going --timeout 2 -n 3 %s exit=3@1 sleep=30", PROBE);
    CHECK_MSG(r.exit_code == 3 && !r.timed_out, REPORT(r));
    CHECK_MSG(r.seconds >= 2 && r.seconds < 15, "took %.1f s", r.seconds);
    char line[256];
    snprintf(line, sizeof line,
             "cadrerun: rank 1 (pid %d) exited with status 3 without calling cadre_finalize "
             "(--keep-going: the other ranks go on)",
             probe_pid(r.out, 1, 3));
    CHECK_MSG(count_lines(r.err, line) == 1, "want '%s' in stderr:\n%s", line, r.err);
    CHECK_MSG(count_matching(r.err, "cadrerun: timeout: the job ran longer than 2 s") == 1 &&
                  count_lines(r.err, "cadrerun: stopping 2 rank(s) after the timeout") == 1,
              REPORT(r));
    CHECK_MSG(count_matching(r.err, "killed by") == 0, "ranks we stopped are no news:\n%s", r.err);
    check_none_running(r.out, 3);
    check_clean(r.out);
    run_free(&r);
}

/* Under --keep-going, cadre_abort still ends the job and is said once, as
 * without it: the ranks stopped because of it are not failures of their
 * own ("killed by SIGTERM (--keep-going ...)" for each, before). */
void test_keep_going_abort(void)
{
    struct run_result r;
    launch(&r, NULL, NULL, "--keep-going -n 3 %s sleep=0.5 abort=5@1 sleep=30", PROBE);
    CHECK_MSG(r.exit_code == 5 && !r.timed_out && r.seconds < 15, REPORT(r));
    char line[256];
    snprintf(line, sizeof line, "cadrerun: rank 1 (pid %d) called cadre_abort(5)",
             probe_pid(r.out, 1, 3));
    CHECK_MSG(count_lines(r.err, line) == 1, "want '%s' in stderr:\n%s", line, r.err);
    CHECK_MSG(count_matching(r.err, "cadrerun:") == 1, "one line only:\n%s", r.err);
    check_none_running(r.out, 3);
    check_clean(r.out);
    run_free(&r);

    /* After a death that --keep-going let pass, an abort still stops the
     * job (it went on to the end before); the death decides the status. */
    launch(&r, NULL, NULL, "--keep-going -n 3 %s exit=3@2 sleep=1 abort=5@1 sleep=30", PROBE);
    CHECK_MSG(r.exit_code == 3 && !r.timed_out && r.seconds < 15, REPORT(r));
    snprintf(line, sizeof line, "cadrerun: rank 1 (pid %d) called cadre_abort(5)",
             probe_pid(r.out, 1, 3));
    CHECK_MSG(count_lines(r.err, line) == 1, "want '%s' in stderr:\n%s", line, r.err);
    CHECK_MSG(count_matching(r.err, "cadrerun:") == 2 &&
                  count_matching(r.err, "exited with status 3 without calling cadre_finalize "
                                        "(--keep-going") == 1,
              REPORT(r));
    check_none_running(r.out, 3);
    check_clean(r.out);
    run_free(&r);
}

/* --bind-to core with more ranks than cores says so once; within one CPU
 * (this process's affinity, which cadrerun inherits). */
void test_bind_core_warning(void)
{
    cpu_set_t saved, one;
    CU_ASSERT_FATAL(sched_getaffinity(0, sizeof saved, &saved) == 0);
    int cpu = 0;
    while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &saved))
        cpu++;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    CU_ASSERT_FATAL(sched_setaffinity(0, sizeof one, &one) == 0);
    static const struct {
        const char *args;
        int warned;
    } cases[] = {{"--bind-to core -n 3", 1}, {"--bind-to core -n 1", 0}, {"-n 3", 0}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        struct run_result r;
        launch(&r, NULL, NULL, "%s %s", cases[k].args, PROBE);
        CHECK_MSG(r.exit_code == 0, "%s: " REPORT_FMT, cases[k].args, REPORT_ARGS(r));
        CHECK_MSG(count_matching(r.err, "cadrerun: warning: --bind-to core: 3 ranks on 1 core(s); "
                                        "up to 3 ranks share each core") == cases[k].warned &&
                      count_matching(r.err, "cadrerun:") == cases[k].warned,
                  "%s: " REPORT_FMT, cases[k].args, REPORT_ARGS(r));
        check_clean(r.out);
        run_free(&r);
    }
    CU_ASSERT(sched_setaffinity(0, sizeof saved, &saved) == 0);
}

/* ---- the README's table of options ---------------------------------------------------- */
/* Whether `text` holds opt as a whole word: followed by none of [A-Za-z0-9-]. */
static int has_option(const char *text, const char *opt, const char *before)
{
    size_t n = strlen(opt);
    for (const char *p = strstr(text, opt); p; p = strstr(p + 1, opt)) {
        char next = p[n];
        if ((p == text || strchr(before, p[-1])) && !(next == '-' || next == '_' ||
                                                      (next >= 'a' && next <= 'z') ||
                                                      (next >= 'A' && next <= 'Z') ||
                                                      (next >= '0' && next <= '9')))
            return 1;
    }
    return 0;
}

/* Every option of cadrerun --help is in the README's table of cadrerun's
 * options, and every option of that table in --help. */
void test_readme_options(void)
{
    struct run_result r;
    launch(&r, NULL, NULL, "--help");
    CU_ASSERT_EQUAL_FATAL(r.exit_code, 0);
    FILE *f = fopen(src_path("README.md"), "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    static char table[16384];
    size_t used = 0;
    char line[1024];
    int in_section = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "## ", 3))
            in_section = !strncmp(line, "## Running jobs: cadrerun", 25);
        else if (in_section && !strncmp(line, "| `", 3) && used + strlen(line) < sizeof table)
            used += (size_t)snprintf(table + used, sizeof table - used, "%s", line);
    }
    fclose(f);
    CU_ASSERT_FATAL(used > 0);
    /* --help: "  -n, -np N   start ..." and "  --bind-to core|numa|none". */
    int nhelp = 0;
    for (char *p = r.out; p && *p;) {
        char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > 3 && !strncmp(p, "  -", 3)) {
            char opts[128];
            snprintf(opts, sizeof opts, "%.*s", (int)len, p + 2);
            char *save = NULL;
            for (char *w = strtok_r(opts, " ,", &save); w && w[0] == '-';
                 w = strtok_r(NULL, " ,", &save)) {
                nhelp++;
                CHECK_MSG(has_option(table, w, "`"),
                          "cadrerun --help lists %s; README's option table does not", w);
            }
        }
        p = e ? e + 1 : NULL;
    }
    CU_ASSERT(nhelp >= 10);
    /* The table's options: "| `-n N`, `-np N` | ...". */
    for (char *p = table; *p;) {
        char *e = strchr(p, '\n');
        char *bar = strchr(p + 1, '|');
        for (char *q = strchr(p, '`'); q && bar && q < bar; q = strchr(q + 1, '`')) {
            char *end = strchr(q + 1, '`');
            if (!end)
                break;
            char opt[64];
            snprintf(opt, sizeof opt, "%.*s", (int)strcspn(q + 1, " `\\"), q + 1);
            CHECK_MSG(opt[0] != '-' || has_option(r.out, opt, " "),
                      "README's option table lists %s; cadrerun --help does not", opt);
            q = end;
        }
        p = e ? e + 1 : p + strlen(p);
    }
    run_free(&r);
}
