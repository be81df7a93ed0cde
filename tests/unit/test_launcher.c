/* cadrerun as users rely on it, through the real binary, with
 * tests/ranks/launch_probe as the ranks. Every job runs with TMPDIR set to a
 * private directory (the job's temp dir goes there) that must be empty
 * afterwards, and /dev/shm must hold nothing with the job's prefix. */
#define _GNU_SOURCE
#include <dirent.h>
#include <sched.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#define PROBE build_path("tests/ranks/launch_probe")
#define LIMIT 20.0

static char tmpdir[64];

static int suite_init(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/cadre-lt.XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int suite_clean(void)
{
    return rmdir(tmpdir);
}

/* "exec env TMPDIR=<ours> <env> cadrerun <args>": exec, so that the pid
 * run_start reports is cadrerun's. */
static void vcommand(char *cmd, size_t len, const char *env, const char *fmt, va_list ap)
{
    int n = snprintf(cmd, len, "exec env TMPDIR=%s %s %s ", tmpdir, env ? env : "", CADRERUN);
    vsnprintf(cmd + n, len - (size_t)n, fmt, ap);
}

/* Runs cadrerun with args (and variables env, may be NULL) to the end. */
static void launch(struct run_result *r, const char *input, const char *env, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void launch(struct run_result *r, const char *input, const char *env, const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vcommand(cmd, sizeof cmd, env, fmt, ap);
    va_end(ap);
    CU_ASSERT_FATAL(run_cmd(cmd, input, LIMIT, r) == 0);
}

/* Starts cadrerun with args; j->pid is cadrerun itself. */
static void launch_start(struct run_job *j, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void launch_start(struct run_job *j, const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vcommand(cmd, sizeof cmd, NULL, fmt, ap);
    va_end(ap);
    CU_ASSERT_FATAL(run_start(cmd, NULL, LIMIT, j) == 0);
}

struct rank_line {
    int rank, size, local, pid, gpu;
    char prefix[64];
};

/* The "rank R size S ..." lines of the probes, by rank; returns how many
 * there were (a rank reporting twice counts twice). */
static int parse_ranks(const char *out, struct rank_line *by_rank, int max)
{
    int n = 0;
    for (const char *p = out; p && *p;) {
        struct rank_line l;
        if (sscanf(p, "rank %d size %d local %d pid %d gpu %d prefix %63s", &l.rank, &l.size,
                   &l.local, &l.pid, &l.gpu, l.prefix) == 6) {
            n++;
            if (l.rank >= 0 && l.rank < max)
                by_rank[l.rank] = l;
        }
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    return n;
}

/* Whether pid is a live launch_probe (zombies are dead: init may never reap
 * them here). */
static int probe_running(int pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')');
    return strstr(buf, "(launch_probe)") && rp && rp[2] != 'Z' && rp[2] != 'X';
}

/* Nothing of the job may remain: its temp dir under our TMPDIR, its
 * /dev/shm entries. Removes what it finds so later tests start clean. */
static void check_clean(const char *out)
{
    char left[1024] = "";
    DIR *d = opendir(tmpdir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        strncat(left, e->d_name, sizeof left - strlen(left) - 2);
        strcat(left, " ");
        char cmd[512];
        snprintf(cmd, sizeof cmd, "rm -rf '%s/%s'", tmpdir, e->d_name);
        if (system(cmd) != 0)
            fprintf(stderr, "cannot remove %s/%s\n", tmpdir, e->d_name);
    }
    closedir(d);
    CHECK_MSG(left[0] == '\0', "left in TMPDIR: %s", left);

    const char *p = out ? strstr(out, " prefix ") : NULL;
    char prefix[64];
    if (!p || sscanf(p, " prefix %63s", prefix) != 1)
        return;
    left[0] = '\0';
    d = opendir("/dev/shm");
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, prefix, strlen(prefix)))
            continue;
        strncat(left, e->d_name, sizeof left - strlen(left) - 2);
        strcat(left, " ");
        unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
    CHECK_MSG(left[0] == '\0', "left in /dev/shm: %s", left);
}

#define REPORT_FMT "exit %d%s\n--- stdout\n%s--- stderr\n%s"
#define REPORT_ARGS(r) (r).exit_code, (r).timed_out ? " (timed out)" : "", (r).out, (r).err
#define REPORT(r) REPORT_FMT, REPORT_ARGS(r)

/* ---- ranks and their environment ----------------------------------------------- */
static void test_every_rank_once(void)
{
    static const int sizes[] = {1, 2, 4, 8};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int n = sizes[k];
        struct run_result r;
        launch(&r, NULL, NULL, "-n %d %s shm", n, PROBE);
        CHECK_MSG(r.exit_code == 0, REPORT(r));
        struct rank_line l[8];
        memset(l, -1, sizeof l);
        CHECK_MSG(parse_ranks(r.out, l, n) == n, "n=%d: %s", n, r.out);
        for (int i = 0; i < n; i++) {
            char want[64];
            snprintf(want, sizeof want, "rank %d size %d local %d pid ", i, n, i);
            CHECK_MSG(count_matching(r.out, want) == 1, "n=%d: rank %d: %s", n, i, r.out);
            CU_ASSERT_EQUAL(l[i].gpu, -1); /* no GPU here, none forced */
            CU_ASSERT(strncmp(l[i].prefix, "cadre-", 6) == 0);
            CU_ASSERT_STRING_EQUAL(l[i].prefix, l[0].prefix);
        }
        check_clean(r.out);
        run_free(&r);
    }
}

static void test_gpu_env(void)
{
    static const struct {
        const char *args;
        int n;
        int gpu[4];
    } cases[] = {
        {"-n 4", 4, {0, 1, 0, 1}},
        {"-n 4 --ranks-per-gpu 2", 4, {0, 0, 1, 1}},
        {"--ranks-per-gpu 2", 4, {0, 0, 1, 1}}, /* default n: 2 GPUs x 2 */
        {"", 2, {0, 1}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        struct run_result r;
        launch(&r, NULL, "CADRE_LAUNCHER_NGPUS=2", "%s %s", cases[k].args, PROBE);
        CHECK_MSG(r.exit_code == 0, REPORT(r));
        struct rank_line l[4];
        memset(l, -1, sizeof l);
        CHECK_MSG(parse_ranks(r.out, l, 4) == cases[k].n, "%s: %s", cases[k].args, r.out);
        for (int i = 0; i < cases[k].n; i++)
            CHECK_MSG(l[i].gpu == cases[k].gpu[i], "%s: rank %d has GPU %d, not %d",
                      cases[k].args, i, l[i].gpu, cases[k].gpu[i]);
        check_clean(r.out);
        run_free(&r);
    }
    /* No GPU: one rank per CPU, CADRE_GPU=-1. */
    struct run_result r;
    launch(&r, NULL, "CADRE_LAUNCHER_NGPUS=0", "%s", PROBE);
    CHECK_MSG(r.exit_code == 0, REPORT(r));
    struct rank_line l[256];
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    CHECK_MSG(parse_ranks(r.out, l, 256) == cpus, "%ld CPUs: %s", cpus, r.out);
    CU_ASSERT_EQUAL(l[0].gpu, -1);
    check_clean(r.out);
    run_free(&r);
}

static void test_export(void)
{
    struct run_result r;
    launch(&r, NULL, "CADRE_T_B=two CADRE_T_C=three",
           "-n 2 -x CADRE_T_A=one -x CADRE_T_B -x CADRE_T_C=3 -xCADRE_T_D=d= %s env=CADRE_T_A "
           "env=CADRE_T_B env=CADRE_T_C env=CADRE_T_D env=CADRE_T_E",
           PROBE);
    CHECK_MSG(r.exit_code == 0, REPORT(r));
    for (int i = 0; i < 2; i++) {
        static const char *const want[] = {"env CADRE_T_A=one", "env CADRE_T_B=two",
                                           "env CADRE_T_C=3", "env CADRE_T_D=d=",
                                           "env CADRE_T_E unset"};
        for (size_t k = 0; k < 5; k++) {
            char line[128];
            snprintf(line, sizeof line, "rank %d %s", i, want[k]);
            CHECK_MSG(count_lines(r.out, line) == 1, "missing '%s' in:\n%s", line, r.out);
        }
    }
    check_clean(r.out);
    run_free(&r);
}

/* ---- failures and exit statuses ------------------------------------------------------ */
/* Runs a 3-rank job in which `action` fails one rank while the others
 * sleep; checks the status, the time, and the one line naming the rank. */
static void check_failure(const char *action, int bad, int want_code, const char *cause)
{
    struct run_result r;
    launch(&r, NULL, NULL, "-n 3 %s %s@%d sleep=30", PROBE, action, bad);
    CHECK_MSG(r.exit_code == want_code, "%s: " REPORT_FMT, action, REPORT_ARGS(r));
    CHECK_MSG(r.seconds < 10, "%s took %.1f s", action, r.seconds);
    struct rank_line l[3];
    memset(l, -1, sizeof l);
    parse_ranks(r.out, l, 3);
    char line[256];
    snprintf(line, sizeof line, "cadrerun: rank %d (pid %d) %s", bad, l[bad].pid, cause);
    CHECK_MSG(count_lines(r.err, line) == 1, "want '%s' in stderr:\n%s", line, r.err);
    CHECK_MSG(count_matching(r.err, "cadrerun:") == 1, "one line only:\n%s", r.err);
    for (int i = 0; i < 3; i++)
        CHECK_MSG(!probe_running(l[i].pid), "rank %d (pid %d) survived", i, l[i].pid);
    check_clean(r.out);
    run_free(&r);
}

static void test_exit_status(void)
{
    check_failure("exit=3", 1, 3, "exited with status 3 without calling cadre_finalize");
}

static void test_segv(void)
{
    check_failure("segv", 0, 139, "killed by SIGSEGV");
}

static void test_abort(void)
{
    check_failure("abort=7", 2, 7, "called cadre_abort(7)");
}

static void test_timeout(void)
{
    struct run_result r;
    launch(&r, NULL, NULL, "--timeout 0.5 -n 2 %s sleep=30", PROBE);
    CHECK_MSG(r.exit_code == 124, REPORT(r));
    CHECK_MSG(r.seconds >= 0.5 && r.seconds < 5, "took %.2f s", r.seconds);
    CHECK_MSG(count_matching(r.err, "cadrerun: timeout") == 1, "stderr:\n%s", r.err);
    check_clean(r.out);
    run_free(&r);

    /* A job that ends in time is not touched. */
    launch(&r, NULL, NULL, "--timeout 30 -n 2 %s", PROBE);
    CHECK_MSG(r.exit_code == 0, REPORT(r));
    check_clean(r.out);
    run_free(&r);
}

/* ---- signals ------------------------------------------------------------------------- */
/* Runs 3 ranks of `actions`, sends sig to cadrerun once each rank printed a
 * line containing `ready`, and collects the rest. */
static void signal_job(struct run_result *r, const char *actions, const char *ready, int sig)
{
    struct run_job j;
    launch_start(&j, "-n 3 %s %s", PROBE, actions);
    CHECK_MSG(run_wait_output(&j, ready, 3), "ranks not ready:\n%s", j.r.out);
    kill(j.pid, sig);
    /* Returns once stderr closes: the cleaner holds it until it is done. */
    run_finish(&j, r);
}

static void test_sigkill_launcher(void)
{
    struct run_result r;
    signal_job(&r, "shm sleep=30", " shm ", SIGKILL);
    CHECK_MSG(r.exit_code == 128 + SIGKILL && !r.timed_out, REPORT(r));
    struct rank_line l[3];
    memset(l, -1, sizeof l);
    CU_ASSERT_EQUAL(parse_ranks(r.out, l, 3), 3);
    for (int i = 0; i < 3; i++)
        CHECK_MSG(!probe_running(l[i].pid), "rank %d (pid %d) survived cadrerun", i, l[i].pid);
    check_clean(r.out);
    run_free(&r);
}

static void test_sigint_forwarded(void)
{
    struct run_result r;
    signal_job(&r, "sigwait", " ready", SIGINT);
    CHECK_MSG(r.exit_code == 0, REPORT(r));
    for (int i = 0; i < 3; i++) {
        char line[64];
        snprintf(line, sizeof line, "rank %d got SIGINT", i);
        CHECK_MSG(count_lines(r.out, line) == 1, "want '%s':\n%s", line, r.out);
    }
    check_clean(r.out);
    run_free(&r);
}

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

static void test_tag_output(void)
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

static void test_stdin(void)
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

static void test_output_dir(void)
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
static void test_bad_input(void)
{
    static const struct {
        const char *args;
        int code;
        const char *msg;
    } cases[] = {
        {"--frobnicate PROBE", 2, "unknown option '--frobnicate'"},
        {"-q PROBE", 2, "unknown option '-q'"},
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
static void test_exit_without_finalize(void)
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
static void test_not_cadre_program(void)
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
static void test_keep_going_timeout(void)
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
static void test_keep_going_abort(void)
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
static void test_bind_core_warning(void)
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

void suite_launcher(void)
{
    CU_pSuite s = CU_add_suite("launcher", suite_init, suite_clean);
    CU_add_test(s, "every rank reports once (n = 1, 2, 4, 8)", test_every_rank_once);
    CU_add_test(s, "CADRE_GPU and the default rank count", test_gpu_env);
    CU_add_test(s, "-x", test_export);
    CU_add_test(s, "a rank's exit status decides", test_exit_status);
    CU_add_test(s, "a rank killed by SIGSEGV gives 139", test_segv);
    CU_add_test(s, "cadre_abort gives its code", test_abort);
    CU_add_test(s, "--timeout", test_timeout);
    CU_add_test(s, "SIGKILL to cadrerun leaves nothing", test_sigkill_launcher);
    CU_add_test(s, "SIGINT reaches every rank", test_sigint_forwarded);
    CU_add_test(s, "--tag-output keeps lines whole", test_tag_output);
    CU_add_test(s, "stdin goes to rank 0", test_stdin);
    CU_add_test(s, "--output-dir", test_output_dir);
    CU_add_test(s, "bad command lines", test_bad_input);
    CU_add_test(s, "a rank that exits without cadre_finalize", test_exit_without_finalize);
    CU_add_test(s, "programs that never call cadre_init", test_not_cadre_program);
    CU_add_test(s, "--timeout after a death under --keep-going", test_keep_going_timeout);
    CU_add_test(s, "cadre_abort under --keep-going", test_keep_going_abort);
    CU_add_test(s, "--bind-to core with more ranks than cores", test_bind_core_warning);
}
