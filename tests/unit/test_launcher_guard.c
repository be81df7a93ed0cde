/* The launcher suite's cases on what a job leaves and who may reach it
 * (issue 40): garbage and forged connect messages to cadrerun's PMIx port
 * from a process of the job, from another process of the same user and from
 * another user; and the processes ranks leave behind. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_launcher.h"
#include "../ranks/pmix_junk.h"

/* Sends every junk message to port from this process; returns how many
 * the server did not close. */
static int send_all_junk(int port, const char *nspace, const char *who)
{
    int open_ones = 0;
    for (int k = 0; k < PMIX_JUNK_COUNT; k++) {
        unsigned char m[1024];
        const char *what;
        size_t len = pmix_junk_make(k, nspace, 0, m, &what);
        int rc = pmix_junk_send(port, m, len, 10000);
        CHECK_MSG(rc == 1, "%s: %s: %s", who, what,
                  rc < 0 ? "cannot connect (cadrerun gone?)" : "connection not closed");
        open_ones += rc != 1;
    }
    return open_ones;
}

/* The same from a child running as user `nobody`. */
static void send_junk_as_nobody(int port, const char *nspace)
{
    struct passwd *pw = getpwnam("nobody");
    if (!pw) {
        fprintf(stderr, "\n  (skipped the other user's part: no user 'nobody')\n");
        return;
    }
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        if (setgroups(0, NULL) != 0 || setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0)
            _exit(100);
        _exit(send_all_junk(port, nspace, "as nobody") == 0 ? 0 : 1);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "as nobody: status 0x%x", st);
}

/* A 3-rank job whose ranks wait for SIGINT after `actions`: sends `from`
 * outside the job (0: nothing; 1: the junk from this process; 2: and from
 * user nobody too) while it runs, then SIGINT, and checks that the job
 * ended as if nothing had happened. */
static void junk_job(const char *actions, int from, struct run_result *r)
{
    struct run_job j;
    launch_start(&j, "-n 3 %s env=PMIX_SERVER_URI41@0 %s sigwait", PROBE, actions);
    int ready = run_wait_output(&j, " ready", 3);
    CHECK_MSG(ready, "ranks not ready:\n%s", j.r.out);
    const char *u = strstr(j.r.out, "env PMIX_SERVER_URI41=");
    const char *p = strstr(j.r.out, " prefix ");
    char uri[256] = "", nspace[64] = "";
    if (u)
        sscanf(u, "env PMIX_SERVER_URI41=%255s", uri);
    if (p)
        sscanf(p, " prefix %63s", nspace);
    int port = pmix_junk_port(uri);
    if (ready && from) {
        CHECK_MSG(port > 0 && nspace[0], "no port or namespace in:\n%s", j.r.out);
        send_all_junk(port, nspace, "same user");
        if (from > 1 && geteuid() == 0)
            send_junk_as_nobody(port, nspace);
        else if (from > 1)
            fprintf(stderr, "\n  (skipped the other user's part: not root)\n");
        CHECK_MSG(kill(j.pid, 0) == 0, "cadrerun is gone");
    }
    kill(j.pid, SIGINT);
    run_finish(&j, r);
    CHECK_MSG(r->exit_code == 0, REPORT(*r));
    int got = 0;
    for (int i = 0; i < 3; i++) {
        char line[64];
        snprintf(line, sizeof line, "rank %d got SIGINT", i);
        got += count_lines(r->out, line) == 1;
    }
    CHECK_MSG(got == 3, "%d of 3 ranks got SIGINT:\n%s", got, r->out);
    CHECK_MSG(count_matching(r->err, "PMIX ERROR") == 0, "libpmix read junk:\n%s", r->err);
    CHECK_MSG(count_matching(r->err, "refused a connection to the PMIx server") >= 5,
              "no WARN lines:\n%s", r->err);
    check_clean(r->out);
}

void test_pmix_port_junk(void)
{
    struct run_result r;
    junk_job("", 2, &r);
    run_free(&r);
}

void test_pmix_port_junk_inside(void)
{
    /* Rank 1, a process of the job, sends it before it waits. */
    struct run_result r;
    junk_job("pmixjunk@1", 0, &r);
    int refused = 0;
    for (int k = 0; k < PMIX_JUNK_COUNT; k++) {
        char line[64];
        snprintf(line, sizeof line, "rank 1 junk %d refused", k);
        refused += count_lines(r.out, line) == 1;
    }
    CHECK_MSG(refused == PMIX_JUNK_COUNT, "%d of %d refused:\n%s", refused, PMIX_JUNK_COUNT,
              r.out);
    run_free(&r);
}

/* The check must not refuse the job's own clients: here each rank is a
 * shell whose child calls cadre_init. */
void test_pmix_client_below_rank(void)
{
    struct run_result r;
    launch(&r, NULL, NULL, "-n 3 sh -c '%s; true'", PROBE);
    CHECK_MSG(r.exit_code == 0, REPORT(r));
    struct rank_line l[3];
    CHECK_MSG(parse_ranks(r.out, l, 3) == 3, "%s", r.out);
    CHECK_MSG(count_matching(r.err, "refused") == 0, "%s", r.err);
    check_clean(r.out);
    run_free(&r);
}

/* ---- what ranks leave behind -------------------------------------------------------- */
/* Runs the job, then checks that the process rank `rank` left (it ignores
 * SIGTERM) is gone once cadrerun has exited. */
static void check_nothing_left(const char *args, int want_code, int rank)
{
    struct run_result r;
    launch(&r, NULL, NULL, "%s", args);
    CHECK_MSG(r.exit_code == want_code, "%s: " REPORT_FMT, args, REPORT_ARGS(r));
    char want[64];
    snprintf(want, sizeof want, "rank %d left pid ", rank);
    const char *p = strstr(r.out, want);
    int pid = 0;
    if (p)
        sscanf(p + strlen(want), "%d", &pid);
    CHECK_MSG(pid > 0, "%s: no '%s' line:\n%s", args, want, r.out);
    if (pid > 0) {
        CHECK_MSG(!probe_running(pid), "%s: pid %d, left by rank %d, outlived the job", args, pid,
                  rank);
        /* Not to leave it to later tests. */
        if (probe_running(pid))
            kill(pid, SIGKILL);
    }
    check_clean(r.out);
    run_free(&r);
}

void test_orphan_failed_job(void)
{
    char args[512];
    /* Rank 1 fails; cadrerun stops rank 0 and its group. */
    snprintf(args, sizeof args, "-n 2 %s orphan=child@1 exit=3@1 sleep=30@0", PROBE);
    check_nothing_left(args, 3, 1);
}

void test_orphan_ended_job(void)
{
    char args[512];
    /* Every rank exits 0; a child in the group and a daemon out of it stay. */
    snprintf(args, sizeof args, "-n 2 %s orphan=child@0", PROBE);
    check_nothing_left(args, 0, 0);
    snprintf(args, sizeof args, "-n 3 %s orphan=daemon@2", PROBE);
    check_nothing_left(args, 0, 2);
    snprintf(args, sizeof args, "-n 1 %s orphan=daemon", PROBE);
    check_nothing_left(args, 0, 0);
}
