/* Runs every multi-rank program of tests/ranks/ranks.list through cadrerun
 * (or without a launcher, LAUNCH=rdv).
 * A line is: name nranks [VAR=VALUE ...] [nosan]; each program checks its own
 * results and exits non-zero (saying why) on any mismatch. With
 * CADRE_TEST_RANKS=san (.ci/run's sanitizer step) the lines ending in the
 * word nosan are left out (ranks.list's header has the rule); the word is
 * never passed to the program. A build without UCX skips the lines whose
 * CADRE_TRANSPORT names ucx (they would fail in cadre_init, as asked). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "testutil.h"

static double limit_for(int n)
{
    return 60 + 15.0 * n;
}

/* The rule of the nosan lines: every program, and every CADRE_TRANSPORT a
 * line sets (none included), keeps a line that the sanitizers run. */
struct san_key {
    char key[300];
    int san; /* a line without nosan has it */
};

static void san_note(struct san_key *keys, int *nkeys, int max, const char *key, int san)
{
    for (int i = 0; i < *nkeys; i++)
        if (!strcmp(keys[i].key, key)) {
            keys[i].san |= san;
            return;
        }
    if (*nkeys < max) {
        snprintf(keys[*nkeys].key, sizeof keys[*nkeys].key, "%s", key);
        keys[(*nkeys)++].san = san;
    }
}

/* Takes a trailing "nosan" off env; whether it was there. */
static int strip_nosan(char *env)
{
    size_t len = strlen(env);
    while (len && (env[len - 1] == ' ' || env[len - 1] == '\t'))
        env[--len] = '\0';
    if (len >= 5 && !strcmp(env + len - 5, "nosan") &&
        (len == 5 || env[len - 6] == ' ' || env[len - 6] == '\t')) {
        len -= 5;
        env[len] = '\0';
        while (len && (env[len - 1] == ' ' || env[len - 1] == '\t'))
            env[--len] = '\0';
        return 1;
    }
    return 0;
}

static void test_ranks_list(void)
{
    FILE *f = fopen(src_path("tests/ranks/ranks.list"), "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char line[1024];
    int ran = 0, skipped = 0;
    const char *sel = getenv("CADRE_TEST_RANKS");
    int san_only = sel && !strcmp(sel, "san");
    enum { MAXKEYS = 256 };
    static struct san_key keys[MAXKEYS];
    int nkeys = 0;
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
        int nosan = strip_nosan(env);
        char key[300];
        snprintf(key, sizeof key, "program %s", name);
        san_note(keys, &nkeys, MAXKEYS, key, !nosan);
        const char *tp = strstr(env, "CADRE_TRANSPORT=");
        snprintf(key, sizeof key, "CADRE_TRANSPORT=%.*s", tp ? (int)strcspn(tp + 16, " \t") : 0,
                 tp ? tp + 16 : "");
        san_note(keys, &nkeys, MAXKEYS, key, !nosan);
        if (!HAVE_UCX && tp && strstr(key, "ucx")) {
            fprintf(stderr, "\n    %-40s n=%d env %s: skipped (this build has no UCX)", name, n,
                    env);
            skipped++;
            continue;
        }
        if (san_only && nosan) {
            fprintf(stderr, "\n    %-40s n=%d %s%s: skipped (nosan, CADRE_TEST_RANKS=san)", name,
                    n, env[0] ? "env " : "", env);
            skipped++;
            continue;
        }
        char cmd[4096];
        /* LAUNCH=rdv: started without a launcher, as torchrun or a shell
         * loop does (tests/rdv_run.sh). */
        int rdv = strstr(env, "LAUNCH=rdv") != NULL;
        snprintf(cmd, sizeof cmd, "env %s %s %s%s%d %s", env, rdv ? "sh" : CADRERUN,
                 rdv ? src_path("tests/rdv_run.sh") : "-n ", rdv ? " " : "", n,
                 build_path(name[0] == '/' ? name + 1 : name));
        struct run_result r;
        CU_ASSERT_FATAL(run_cmd(cmd, NULL, limit_for(n), &r) == 0);
        fprintf(stderr, "\n    %-40s n=%d %s%s: exit %d, %.2f s", name, n, env[0] ? "env " : "", env,
                r.exit_code, r.seconds);
        test_progress("ranks.list: %s n=%d%s%s: %s, exit %d%s, %.1f s", name, n, env[0] ? " env " : "",
                      env, r.exit_code == 0 && !r.timed_out ? "ok" : "FAILED", r.exit_code,
                      r.timed_out ? " (killed at the limit)" : "", r.seconds);
        char what[1024];
        snprintf(what, sizeof what, "%s n=%d%s%s: exit %d%s", name, n, env[0] ? " env " : "", env,
                 r.exit_code, r.timed_out ? " (killed at the limit)" : "");
        test_note_program(what, r.exit_code == 0 && !r.timed_out);
        CHECK_MSG(r.exit_code == 0 && !r.timed_out,
                  "%s with %d ranks (%s): exit %d%s\n--- stdout\n%s--- stderr\n%s", name, n, env,
                  r.exit_code, r.timed_out ? " (timed out)" : "", r.out, r.err);
        run_free(&r);
        ran++;
    }
    fclose(f);
    CU_ASSERT(ran > 0);
    CHECK_MSG(nkeys < MAXKEYS, "ranks.list: more than %d programs and transports", MAXKEYS - 1);
    for (int i = 0; i < nkeys; i++)
        CHECK_MSG(keys[i].san, "ranks.list: every line of %s says nosan: the sanitizers would "
                  "never run it (keep one line of each program and transport without nosan)",
                  keys[i].key);
    if (san_only)
        fprintf(stderr, "\n    CADRE_TEST_RANKS=san: %d lines run, %d nosan (or ucx) lines left "
                "out", ran, skipped);
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

/* A rank killed while rank 0 probes for it (probe_test, PROBE_TESTS=peerfail):
 * the probe with its source, and those from CADRE_ANY_SOURCE, fail with
 * CADRE_ERR_PEER naming it. */
static void test_probe_peer_killed(void)
{
    const char *transports[] = {"", "tcp"};
    for (int i = 0; i < 2; i++) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "PROBE_TESTS=peerfail CADRE_TRANSPORT=%s %s --keep-going -n 2 %s",
                 transports[i], CADRERUN, build_path("tests/ranks/probe_test"));
        struct run_result r;
        CU_ASSERT_FATAL(run_cmd(cmd, NULL, 60, &r) == 0);
        CHECK_MSG(r.exit_code == 137 && !r.timed_out,
                  "probe peer failure (%s): exit %d\n--- stdout\n%s--- stderr\n%s",
                  transports[i][0] ? transports[i] : "shm", r.exit_code, r.out, r.err);
        CHECK_MSG(count_lines(r.out, "probe peerfail: ok") == 1, "stdout: %s\nstderr: %s", r.out,
                  r.err);
        CU_ASSERT(count_shm_leftovers() == 0);
        run_free(&r);
    }
}

/* Several senders lose their receiver mid-stream (the double-free path).
 * Within the node the stream is the pipeline's queued fragments: 4 ranks on
 * this 2-core machine would otherwise have each 64 MiB read in place in one
 * copy (p2p_cma.c), often all of it before the receiver dies, and those
 * sends rightly succeed. */
static void test_senders_lose_receiver(void)
{
    const char *transports[] = {"tcp", ""};
    for (int i = 0; i < 2; i++) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "CADRE_TRANSPORT=%s CADRE_SHM_CMA_MIN=0 %s --keep-going -n 4 %s",
                 transports[i], CADRERUN, build_path("tests/ranks/tcp_flush_peerfail"));
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
 * algorithm, 8 bytes through the shared-memory slots, 400 KB through the
 * split algorithm, 16 MiB over TCP). */
static void test_coll_peer_killed(void)
{
    const char *envs[] = {"", "COLL_PEERFAIL_COUNT=2", "COLL_PEERFAIL_COUNT=100000",
                          "CADRE_TRANSPORT=tcp"};
    for (int i = 0; i < 4; i++) {
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

/* Entries of directory `dir` whose names start with `prefix`, listed in
 * `left` (removed, so that later tests start clean); returns how many. */
static int leftovers(const char *dir, const char *prefix, char *left, size_t len)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
            strncmp(e->d_name, prefix, strlen(prefix)))
            continue;
        n++;
        size_t l = strlen(left);
        snprintf(left + l, len - l, "%s/%s ", dir, e->d_name);
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "rm -rf '%s/%s'", dir, e->d_name);
        if (system(cmd) != 0)
            fprintf(stderr, "cannot remove %s/%s\n", dir, e->d_name);
    }
    closedir(d);
    return n;
}

/* Nothing is left behind by jobs that move data over shared memory and
 * TCP, nor by one whose rank is SIGKILLed mid-transfer: no entry of the job
 * in /dev/shm (segments are memfds; PMIx keeps its files in the job's temp
 * dir), none in /tmp, and the TMPDIR given to cadrerun, where the job's temp
 * dir goes, is empty again. The job's names start with "cadre-<cadrerun's
 * pid>-", which keeps other jobs on the machine out of the count. */
static void test_nothing_left(void)
{
    static const struct {
        const char *env, *args, *prog;
        int code;
    } jobs[] = {
        {"P2P_TESTS=pingpong,fanin,background", "-n 3", "tests/ranks/p2p_test", 0},
        {"P2P_TESTS=pingpong,fanin CADRE_TRANSPORT=tcp", "-n 3", "tests/ranks/p2p_test", 0},
        {"", "--keep-going -n 3", "tests/ranks/p2p_peerfail", 137},
        {"CADRE_TRANSPORT=tcp", "--keep-going -n 3", "tests/ranks/p2p_peerfail", 137},
    };
    char tmpdir[] = "/tmp/cadre-nl.XXXXXX";
    CU_ASSERT_FATAL(mkdtemp(tmpdir) != NULL);
    for (size_t k = 0; k < sizeof jobs / sizeof jobs[0]; k++) {
        char cmd[4096];
        /* exec: the pid run_start reports is cadrerun's */
        snprintf(cmd, sizeof cmd, "exec env TMPDIR=%s %s %s %s %s", tmpdir, jobs[k].env, CADRERUN,
                 jobs[k].args, build_path(jobs[k].prog));
        struct run_job j;
        struct run_result r;
        CU_ASSERT_FATAL(run_start(cmd, NULL, 90, &j) == 0);
        pid_t pid = j.pid;
        CU_ASSERT_FATAL(run_finish(&j, &r) == 0);
        CHECK_MSG(r.exit_code == jobs[k].code && !r.timed_out,
                  "%s %s: exit %d, expected %d\n--- stdout\n%s--- stderr\n%s", jobs[k].env,
                  jobs[k].prog, r.exit_code, jobs[k].code, r.out, r.err);
        char prefix[64], left[2048] = "";
        snprintf(prefix, sizeof prefix, "cadre-%d-", (int)pid);
        int n = leftovers("/dev/shm", prefix, left, sizeof left) +
                leftovers("/tmp", prefix, left, sizeof left) +
                leftovers(tmpdir, "", left, sizeof left);
        CHECK_MSG(n == 0, "%s %s left: %s", jobs[k].env, jobs[k].prog, left);
        run_free(&r);
    }
    CU_ASSERT(rmdir(tmpdir) == 0);
}

/* A rank's death reaches every survivor and every communicator it is in
 * (issue 14): the last of 3 or 4 ranks is SIGKILLed, or exits 0 without
 * cadre_finalize, while rank 0 waits in receives from CADRE_ANY_SOURCE and
 * rank 1 in a bcast whose root is alive but elsewhere; every survivor gets
 * CADRE_ERR_PEER naming it within 10 s, later calls needing it (any source,
 * collectives on the world, a dup, a split, a created communicator) fail at
 * once, and what does not need it still works (any_peerfail.c). Over shared
 * memory and TCP. CADRE_TIMEOUT=30: without the propagation each wait ends
 * by timing out, which the program reports, not by the harness's limit.
 * Blame stays right: when the last rank calls cadre_finalize and exits 0
 * instead, nothing that does not need it fails, receives from
 * CADRE_ANY_SOURCE included, and the job exits 0. */
static void test_peer_death_spreads(void)
{
    const char *transports[] = {"", "tcp"}, *deaths[] = {"kill", "exit", "finalize"};
    for (int n = 3; n <= 4; n++) {
        for (int t = 0; t < 2; t++) {
            for (int d = 0; d < 3; d++) {
                char cmd[4096];
                snprintf(cmd, sizeof cmd,
                         "env CADRE_TIMEOUT=30 CADRE_TRANSPORT=%s ANY_PEERFAIL_DEATH=%s %s "
                         "--keep-going -n %d %s",
                         transports[t], deaths[d], CADRERUN, n,
                         build_path("tests/ranks/any_peerfail"));
                struct run_result r;
                CU_ASSERT_FATAL(run_cmd(cmd, NULL, 120, &r) == 0);
                int oks = 0;
                for (int k = 0; k < n - 1; k++) {
                    char line[64];
                    snprintf(line, sizeof line, "any_peerfail: rank %d ok", k);
                    oks += count_lines(r.out, line);
                }
                fprintf(stderr, "\n    any_peerfail n=%d %s %s: exit %d, %.2f s", n,
                        t ? "tcp" : "shm", deaths[d], r.exit_code, r.seconds);
                /* The exit status of an exit 0 without cadre_finalize is
                 * cadrerun's business (test_launcher.c), not the library's. */
                int code = d == 0 ? 137 : d == 2 ? 0 : r.exit_code;
                CHECK_MSG(oks == n - 1 && !r.timed_out && r.exit_code == code,
                          "%d ranks, %s, %s: exit %d, %d ok lines%s\n--- stdout\n%s--- stderr\n%s",
                          n, t ? "tcp" : "shm", deaths[d], r.exit_code, oks,
                          r.timed_out ? " (timed out)" : "", r.out, r.err);
                CU_ASSERT(count_shm_leftovers() == 0);
                run_free(&r);
            }
        }
    }
}

/* A rank killed right after posting a window of large sends (issue 17: read
 * in place by the receiver, p2p/p2p_cma.c): every receive is right or fails
 * with CADRE_ERR_PEER within 5 s. */
static void test_window_sender_killed(void)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "WINDOW_KILL=1 %s --keep-going -n 2 %s", CADRERUN,
             build_path("tests/ranks/window_test"));
    struct run_result r;
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 60, &r) == 0);
    CHECK_MSG(r.exit_code == 137 && !r.timed_out, "exit %d\n--- stdout\n%s--- stderr\n%s",
              r.exit_code, r.out, r.err);
    CHECK_MSG(count_lines(r.out, "window_test: kill ok") == 1, "stdout: %s\nstderr: %s", r.out,
              r.err);
    CU_ASSERT(count_shm_leftovers() == 0);
    run_free(&r);
}

void suite_ranks(void)
{
    CU_pSuite s = CU_add_suite("ranks", NULL, NULL);
    CU_add_test(s, "programs of ranks.list under cadrerun", test_ranks_list);
    CU_add_test(s, "a peer killed mid-transfer gives CADRE_ERR_PEER", test_peer_killed);
    CU_add_test(s, "a peer killed while probed for gives CADRE_ERR_PEER", test_probe_peer_killed);
    CU_add_test(s, "senders that lose their receiver mid-stream", test_senders_lose_receiver);
    CU_add_test(s, "a rank killed in a loop of allreduces", test_coll_peer_killed);
    CU_add_test(s, "nothing left in /dev/shm or the temp dir, a rank killed or not",
                test_nothing_left);
    CU_add_test(s, "a rank's death fails every call that needs it, on every survivor",
                test_peer_death_spreads);
    CU_add_test(s, "a sender killed with a window of large messages in flight",
                test_window_sender_killed);
}
