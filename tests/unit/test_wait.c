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
#include <sys/prctl.h>
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

static void run_loaded(const char *wait, int want_line)
{
    pid_t pids[64];
    int n = start_hogs(pids, 64);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "CADRE_WAIT=%s CADRE_DEBUG=INFO CADRE_DEBUG_SUBSYS=P2P %s -n 2 %s allreduce -b 4M -e 16M "
             "-f 2 -n 6 -w 1 -c 1",
             wait, CADRERUN, build_path("tools/cadre-perf"));
    struct run_result r;
    int rc = run_cmd(cmd, NULL, 240, &r);
    stop_hogs(pids, n);
    CU_ASSERT_FATAL(rc == 0);
    /* the result lines: 4, 8 and 16 MiB, #wrong 0 out of place and in place */
    int lines = 0, wrong = 0;
    for (const char *p = r.out; p && *p;) {
        const char *e = strchr(p, '\n');
        unsigned long long size;
        char f[12][32];
        if (*p != '#' && sscanf(p, "%llu %31s %31s %31s %31s %31s %31s %31s %31s %31s %31s %31s %31s",
                                &size, f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9],
                                f[10], f[11]) == 13) {
            lines++;
            wrong += strcmp(f[7], "0") != 0 || strcmp(f[11], "0") != 0;
        }
        p = e ? e + 1 : NULL;
    }
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

void suite_wait(void)
{
    CU_pSuite s = CU_add_suite("wait", NULL, NULL);
    CU_add_test(s, "CPU hogs beside the job: CADRE_WAIT=auto notices, results right", test_auto_notices);
    CU_add_test(s, "CPU hogs beside the job: CADRE_WAIT=spin keeps spinning, results right",
                test_spin_never_asks);
}
