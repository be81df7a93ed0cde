/* What ranks do when other processes want the cores (p2p_busy.c): with CPU
 * hogs beside the job (twice as many as cores, and two more) CADRE_WAIT=auto
 * notices the busy machine and says so at INFO, and the 2-rank allreduce of
 * every size from 4 to 16 MiB (the direct path's unpaced variant) is right
 * element by element, and where the kernel has custom slices (se.slice in
 * /proc/self/sched) the waiting threads take the shortest; CADRE_WAIT=spin,
 * under the same hogs, never asks and keeps the slices. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/membarrier.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define BUSY_LINE "the cores are busy: short scheduler slices, the 2-rank allreduce unpaced"
#define SLICE_LINE "scheduler slice of the waiting threads: 0.1 ms"

/* The kernel has EEVDF's custom slices (Linux 6.12 and later) where its
 * scheduler statistics show se.slice. */
static int kernel_has_slices(void)
{
    FILE *f = fopen("/proc/self/sched", "r");
    if (!f)
        return 0;
    char line[256];
    int yes = 0;
    while (!yes && fgets(line, sizeof line, f))
        yes = !strncmp(line, "se.slice", 8);
    fclose(f);
    return yes;
}

static int start_hogs(pid_t *pids, int max)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int n = (int)(cores > 0 ? cores : 1) * 2 + 2;
    if (n > max)
        n = max;
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            for (volatile unsigned long k = 0;; k++)
                ;
        }
        if (pids[i] < 0)
            return i;
    }
    return n;
}

static void stop_hogs(pid_t *pids, int n)
{
    for (int i = 0; i < n; i++)
        kill(pids[i], SIGKILL);
    for (int i = 0; i < n; i++)
        waitpid(pids[i], NULL, 0);
}

/* cadre-perf's result lines in out; *wrong: those whose #wrong is not 0
 * out of place or in place. */
static int perf_lines(const char *out, int *wrong)
{
    int lines = 0;
    *wrong = 0;
    for (const char *p = out; p && *p;) {
        const char *e = strchr(p, '\n');
        unsigned long long size;
        char f[12][32];
        if (*p != '#' && sscanf(p, "%llu %31s %31s %31s %31s %31s %31s %31s %31s %31s %31s %31s %31s",
                                &size, f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9],
                                f[10], f[11]) == 13) {
            lines++;
            *wrong += strcmp(f[7], "0") != 0 || strcmp(f[11], "0") != 0;
        }
        p = e ? e + 1 : NULL;
    }
    return lines;
}

/* `cadre-perf allreduce ARGS` on np ranks, with the environment env and
 * P2P's INFO lines, beside CPU hogs (start_hogs); returns how many hogs
 * ran. */
static int allreduce_beside_hogs(const char *env, int np, const char *args, struct run_result *r)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s CADRE_DEBUG=INFO CADRE_DEBUG_SUBSYS=P2P %s -n %d %s allreduce %s",
             env, CADRERUN, np, build_path("tools/cadre-perf"), args);
    pid_t pids[64];
    int n = start_hogs(pids, 64);
    int rc = run_cmd(cmd, NULL, 240, r);
    stop_hogs(pids, n);
    CU_ASSERT_FATAL(rc == 0);
    return n;
}

static void run_loaded(const char *wait, int want_line)
{
    char env[64];
    snprintf(env, sizeof env, "CADRE_WAIT=%s", wait);
    struct run_result r;
    int n = allreduce_beside_hogs(env, 2, "-b 4M -e 16M -f 2 -n 6 -w 1 -c 1", &r);
    /* the result lines: 4, 8 and 16 MiB, #wrong 0 out of place and in place */
    int wrong, lines = perf_lines(r.out, &wrong);
    int said = count_matching(r.err, BUSY_LINE), sliced = count_matching(r.err, SLICE_LINE);
    int want_slice = want_line && kernel_has_slices();
    CHECK_MSG(r.exit_code == 0 && !r.timed_out && lines == 3 && !wrong &&
                  (want_line ? said >= 1 : said == 0) && (want_slice ? sliced >= 1 : !want_line ? sliced == 0 : 1),
              "CADRE_WAIT=%s beside %d hogs: exit %d%s, %d result lines (want 3), %d with #wrong, "
              "%d '%s' lines (want %s), %d '%s' lines (want %s)\n--- stdout\n%s--- stderr\n%s",
              wait, n, r.exit_code, r.timed_out ? " (timed out)" : "", lines, wrong, said, BUSY_LINE,
              want_line ? "at least 1" : "0", sliced, SLICE_LINE,
              want_slice ? "at least 1" : !want_line ? "0" : "any: no custom slices here", r.out, r.err);
    run_free(&r);
}

static void test_auto_notices(void)
{
    run_loaded("auto", 1);
}

static void test_spin_never_asks(void)
{
    run_loaded("spin", 0);
}

/* The counts of the INFO line of cadre_finalize (p2p_engine.c) in rank
 * `rank`'s lines of err: wake-ups sent to peers, of the progress thread,
 * turns of napping, and membarriers. 0 when the line is there. */
static int wake_counts(const char *err, int rank, unsigned long v[4])
{
    char head[64];
    snprintf(head, sizeof head, "[rank %d INFO P2P] wake-ups: ", rank);
    const char *p = err ? strstr(err, head) : NULL;
    if (!p)
        return -1;
    return sscanf(p + strlen(head),
                  "%lu sent to peers' sleeping threads, %lu of the progress thread; %lu turns "
                  "of napping after a yield to another job's process; %lu membarriers",
                  &v[0], &v[1], &v[2], &v[3]) == 4
               ? 0
               : -1;
}

/* wake_test WINDOWS 3000 on 2 ranks under CADRE_WAIT=sleep, with the
 * environment env and P2P's INFO lines: each rank's finalize counts in
 * s (rank 0, the sender) and rv (rank 1); 0 when both lines are there. */
static int run_wake_test(const char *env, int windows, struct run_result *r, unsigned long s[4],
                         unsigned long rv[4])
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "%s CADRE_WAIT=sleep CADRE_DEBUG=INFO CADRE_DEBUG_SUBSYS=P2P %s -n 2 %s %d 3000", env,
             CADRERUN, build_path("tests/ranks/wake_test"), windows);
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 120, r) == 0);
    int ok0 = wake_counts(r->err, 0, s), ok1 = wake_counts(r->err, 1, rv);
    return ok0 == 0 && ok1 == 0 ? 0 : -1;
}

/* A window of 64 small messages to a rank asleep in cadre_waitall wakes it
 * once, not once per message (the doorbell's armed word), and the
 * receiver's long waits for such messages never wake its idle progress
 * thread. Without either change: about 60 wake-ups per window, and one of
 * the progress thread per window. A busy machine may put the receiver back
 * to sleep within a window, so up to 8 per window pass. */
static void test_burst_wakes_once(void)
{
    const int windows = 20;
    struct run_result r;
    unsigned long s[4] = {0}, rv[4] = {0};
    int lines = run_wake_test("", windows, &r, s, rv);
    CHECK_MSG(r.exit_code == 0 && !r.timed_out && lines == 0 &&
                  s[0] >= 1 && s[0] <= 8ul * windows && rv[1] <= (unsigned long)windows / 4,
              "wake_test, %d windows: exit %d%s; sender's wake-ups %lu (want 1 to %d), "
              "receiver's progress-thread wake-ups %lu (want at most %d)\n--- stderr\n%s",
              windows, r.exit_code, r.timed_out ? " (timed out)" : "", s[0], 8 * windows, rv[1],
              windows / 4, r.err);
    /* Where the kernel has membarrier's global expedited barrier, the
     * sender rang without a fence and the sleeper paid for both
     * (cadre__bell_ring): both ranks said so at cadre_init. */
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    const char *said = cmds >= 0 && (cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED)
                           ? "INFO P2P] membarrier: registered"
                           : "INFO P2P] membarrier: not available";
    int n = 0;
    for (const char *p = r.err ? strstr(r.err, said) : NULL; p; p = strstr(p + 1, said))
        n++;
    CHECK_MSG(n == 2, "wake_test: %d lines with \"%s\", want one per rank\n--- stderr\n%s", n,
              said, r.err ? r.err : "");
    /* The sleeper's naps in one wait make one series with one membarrier
     * (cadre__bell_naps_begin): about one per window, where a membarrier
     * per nap made about six (naps of 50 us doubling through the 3 ms
     * pause). Each interrupts the peer's core: a 64 MiB ping-pong, whose
     * waits nap, took 9% longer with one per nap. */
    if (cmds >= 0 && (cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED))
        CHECK_MSG(rv[3] >= 1 && rv[3] <= 3ul * windows,
                  "wake_test, %d windows: the sleeping receiver made %lu membarriers, want 1 to "
                  "%d\n--- stderr\n%s",
                  windows, rv[3], 3 * windows, r.err);
    run_free(&r);
}

/* Without shared memory (TCP alone) only a process's own threads ring its
 * doorbell: its naps take a fence, no membarrier. The same wake_test made
 * one membarrier per nap of its sleeping receiver (about 6 a window) when the
 * local bell took the asymmetric fence. */
static void test_tcp_naps_no_membarrier(void)
{
    const int windows = 5;
    struct run_result r;
    unsigned long v0[4] = {0}, v1[4] = {0};
    int lines = run_wake_test("CADRE_TRANSPORT=tcp", windows, &r, v0, v1);
    CHECK_MSG(r.exit_code == 0 && !r.timed_out && lines == 0 && v0[3] == 0 && v1[3] == 0,
              "wake_test over TCP, %d windows: exit %d%s; membarriers %lu and %lu (want 0)\n"
              "--- stderr\n%s",
              windows, r.exit_code, r.timed_out ? " (timed out)" : "", v0[3], v1[3], r.err);
    run_free(&r);
}

/* Ranks that outnumber the cores yield when they wait; a yield that takes
 * long because another job's process (here CPU hogs) holds the core turns
 * the waits into naps, and the results stay right. (A long yield to the
 * job's own ranks does not; that case depends on the scheduler, and
 * bench/msgrate.sh measures it.) */
static void test_hogs_turn_to_naps(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int np = (int)(cores > 0 ? cores : 1) + 2;
    struct run_result r;
    int n = allreduce_beside_hogs("", np, "-b 8 -e 64 -f 8 -n 300 -w 1 -c 1", &r);
    unsigned long naps = 0;
    int lines = 0;
    for (int q = 0; q < np; q++) {
        unsigned long v[4];
        if (wake_counts(r.err, q, v) == 0) {
            lines++;
            naps += v[2];
        }
    }
    int wrong, results = perf_lines(r.out, &wrong);
    CHECK_MSG(r.exit_code == 0 && !r.timed_out && lines == np && naps >= 1 && results == 2 &&
                  !wrong,
              "%d ranks beside %d hogs: exit %d%s, %d wake-up lines (want %d), %lu turns of "
              "napping (want at least 1), %d result lines (want 2: 8 and 64 B), %d with #wrong\n"
              "--- stdout\n%s--- stderr\n%s",
              np, n, r.exit_code, r.timed_out ? " (timed out)" : "", lines, np, naps, results,
              wrong, r.out, r.err);
    run_free(&r);
}

/* `cadre-perf stream` of 8 and 64 B, checked, on 2 ranks started through
 * `prefix` (taskset or nothing), with P2P's INFO lines; returns the lines
 * that say the job's cores are oversubscribed. */
static int stream_oversubscribed(const char *prefix, const char *bind, struct run_result *r,
                                 int *lines, int *wrong)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "CADRE_DEBUG=INFO CADRE_DEBUG_SUBSYS=P2P %s %s -n 2 %s %s stream -b 8 -e 64 -f 8 "
             "-c 1 -n 200",
             prefix, CADRERUN, bind, build_path("tools/cadre-perf"));
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 120, r) == 0);
    *lines = perf_lines(r->out, wrong);
    return count_matching(r->err, "oversubscribed, waits yield");
}

/* A job given fewer cores than it has ranks (its launcher under taskset, a
 * cgroup's cpuset) is oversubscribed, though the machine has a core per
 * rank: the ranks count the CPUs their affinity masks allow, together.
 * Counting the machine's cores, 2 ranks on one core spun against each
 * other, each waiting out the other's whole slice (8 B message rate 0.16 M
 * against 6.5 M yielding). Bound to a core each, they are not. */
static void test_fewer_cores_than_ranks(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 2 || system("taskset -c 0 true >/dev/null 2>&1") != 0) {
        printf("\n  skipped: needs 2 cores and taskset\n");
        return;
    }
    struct run_result r;
    int lines, wrong;
    int said = stream_oversubscribed("taskset -c 0", "", &r, &lines, &wrong);
    char want[160];
    snprintf(want, sizeof want,
             "2 ranks of the job share 1 of this machine's %ld cores (2 on this host): "
             "oversubscribed, waits yield", cores);
    int exact = count_matching(r.err, want);
    CHECK_MSG(r.exit_code == 0 && !r.timed_out && lines == 2 && !wrong && said == 2 && exact == 2,
              "taskset -c 0, 2 ranks: exit %d%s, %d result lines (want 2), %d with #wrong, %d "
              "lines saying oversubscribed (want 2), %d of them \"%s\"\n--- stdout\n%s--- "
              "stderr\n%s",
              r.exit_code, r.timed_out ? " (timed out)" : "", lines, wrong, said, exact, want,
              r.out, r.err);
    run_free(&r);
    said = stream_oversubscribed("", "--bind-to core", &r, &lines, &wrong);
    CHECK_MSG(r.exit_code == 0 && !r.timed_out && lines == 2 && !wrong && said == 0,
              "2 ranks bound to a core each: exit %d%s, %d result lines (want 2), %d with #wrong, "
              "%d lines saying oversubscribed (want 0)\n--- stdout\n%s--- stderr\n%s",
              r.exit_code, r.timed_out ? " (timed out)" : "", lines, wrong, said, r.out, r.err);
    run_free(&r);
}

void suite_wait(void)
{
    CU_pSuite s = CU_add_suite("wait", NULL, NULL);
    CU_add_test(s, "CPU hogs beside the job: CADRE_WAIT=auto notices, results right", test_auto_notices);
    CU_add_test(s, "CPU hogs beside the job: CADRE_WAIT=spin keeps spinning, results right",
                test_spin_never_asks);
    CU_add_test(s, "a burst of small messages wakes a sleeping rank once", test_burst_wakes_once);
    CU_add_test(s, "over TCP alone, naps make no membarrier", test_tcp_naps_no_membarrier);
    CU_add_test(s, "CPU hogs beside an oversubscribed job: waits turn to naps, results right",
                test_hogs_turn_to_naps);
    CU_add_test(s, "a job given fewer cores than ranks (taskset) is oversubscribed",
                test_fewer_cores_than_ranks);
}
