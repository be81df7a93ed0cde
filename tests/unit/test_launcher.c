/* cadrerun as users rely on it, through the real binary, with
 * tests/ranks/launch_probe as the ranks. Every job runs with TMPDIR set to a
 * private directory (the job's temp dir goes there) that must be empty
 * afterwards, and /dev/shm must hold nothing with the job's prefix.
 *
 * This file: the suite (suite_launcher), the helpers test_launcher.h
 * declares, and the cases on ranks and their environment, failures and exit
 * statuses, and signals; test_launcher_opts.c holds the rest. Both call
 * testutil.h and the C library only. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_launcher.h"

char tmpdir[64];

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
void launch(struct run_result *r, const char *input, const char *env, const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vcommand(cmd, sizeof cmd, env, fmt, ap);
    va_end(ap);
    CU_ASSERT_FATAL(run_cmd(cmd, input, LIMIT, r) == 0);
}

/* Starts cadrerun with args; j->pid is cadrerun itself. */
void launch_start(struct run_job *j, const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vcommand(cmd, sizeof cmd, NULL, fmt, ap);
    va_end(ap);
    CU_ASSERT_FATAL(run_start(cmd, NULL, LIMIT, j) == 0);
}

/* The "rank R size S ..." lines of the probes, by rank; returns how many
 * there were (a rank reporting twice counts twice). */
int parse_ranks(const char *out, struct rank_line *by_rank, int max)
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
int probe_running(int pid)
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
void check_clean(const char *out)
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
void check_failure(const char *action, int bad, int want_code, const char *cause)
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
    CU_add_test(s, "README's table lists every option of cadrerun --help", test_readme_options);
    CU_add_test(s, "junk to the PMIx port from the user and another user",
                test_pmix_port_junk);
    CU_add_test(s, "junk to the PMIx port from a rank", test_pmix_port_junk_inside);
    CU_add_test(s, "a rank's child is a PMIx client", test_pmix_client_below_rank);
    CU_add_test(s, "a failed job leaves no process behind", test_orphan_failed_job);
    CU_add_test(s, "a job that ends leaves no process behind", test_orphan_ended_job);
}
