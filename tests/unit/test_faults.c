/* A fixed set of the fault-injection soak's runs (bench/fault_soak.sh runs
 * random ones by the hundred): tests/ranks/fault_soak, a loop of mixed
 * point-to-point and collective calls with every result checked, in which
 * one rank fails on purpose (SIGKILL, segmentation fault, abort(), exit 0 or
 * 3 without cadre_finalize, cadre_abort), at 3-5 ranks, over shared memory
 * and TCP, with and without --keep-going. Each run must end by itself; no
 * call may return success with wrong data; a survivor's error must be
 * CADRE_ERR_PEER naming the failed rank within 5 s of the failure (or, for
 * a send, naming a survivor that has finalized since);
 * cadrerun must name the rank and exit with the failure's status (128+signal,
 * the exit code, cadre_abort's code, non-zero for an exit without
 * cadre_finalize); under --keep-going every survivor must learn of the
 * failure or end its loop. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

struct fault_case {
    const char *kind;
    int code; /* cadrerun's exit status; -1: any but 0 */
};

static const struct fault_case kinds[] = {
    {"kill", 137}, {"segv", 139}, {"abort", 134}, {"exit0", -1}, {"exit3", 3}, {"cadre_abort", 42},
};

/* Whether `text` names "rank V" (not rank V0..V9). */
static int names_rank(const char *text, int v)
{
    char want[32];
    int len = snprintf(want, sizeof want, "rank %d", v);
    for (const char *p = strstr(text, want); p; p = strstr(p + 1, want))
        if (p[len] < '0' || p[len] > '9')
            return 1;
    return 0;
}

/* Judges one run; returns NULL when it ended as it must, else why not. */
static const char *judge(const struct run_result *r, const struct fault_case *k, int n, int victim,
                         int kg, char *why, size_t len)
{
    if (r->timed_out)
        return "the job did not end by itself";
    if (strstr(r->out, "WRONG"))
        return "a call returned success with wrong data";
    int detected = 0, finished = 0;
    for (const char *line = r->out; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t l = end ? (size_t)(end - line) : strlen(line);
        char buf[2048];
        snprintf(buf, sizeof buf, "%.*s", (int)(l < sizeof buf - 1 ? l : sizeof buf - 1), line);
        if (strstr(buf, " done") && l >= 5 && !strcmp(buf + strlen(buf) - 5, " done"))
            finished++;
        const char *d = strstr(buf, "detected rc=");
        if (d) {
            detected++;
            const char *after = strstr(buf, " after ");
            double secs = after ? atof(after + 7) : -1;
            /* A send to a survivor that finalized after it learned of
             * the failure fails on that rank, which the text says: true,
             * and no blame. */
            int told_finalized = (strstr(d, " in cadre_send ") || strstr(d, " in cadre_sendrecv ")) &&
                                 (strstr(d, "has finalized") || strstr(d, "has called cadre_finalize"));
            if (strcmp(k->kind, "cadre_abort") &&
                (strncmp(d, "detected rc=6 ", 14) || (!names_rank(d, victim) && !told_finalized))) {
                snprintf(why, len, "wrong error or blame: %s", buf);
                return why;
            }
            if (secs > 5.0) {
                snprintf(why, len, "learned of the failure after %.1f s: %s", secs, buf);
                return why;
            }
        }
        line = end ? end + 1 : NULL;
    }
    /* cadrerun's own lines, not the ranks' warnings, must name it. */
    int named = 0;
    for (const char *l = r->err; l && *l && !named;) {
        const char *end = strchr(l, '\n');
        size_t n = end ? (size_t)(end - l) : strlen(l);
        char buf[1024];
        snprintf(buf, sizeof buf, "%.*s", (int)(n < sizeof buf - 1 ? n : sizeof buf - 1), l);
        named = !strncmp(buf, "cadrerun:", 9) && names_rank(buf, victim);
        l = end ? end + 1 : NULL;
    }
    if (!named) {
        snprintf(why, len, "no line of cadrerun names rank %d", victim);
        return why;
    }
    if (k->code < 0 ? r->exit_code == 0 : r->exit_code != k->code) {
        snprintf(why, len, "cadrerun exited %d, expected %s%d", r->exit_code,
                 k->code < 0 ? "non-zero, not " : "", k->code < 0 ? 0 : k->code);
        return why;
    }
    if (kg && strcmp(k->kind, "cadre_abort") && detected + finished < n - 1) {
        snprintf(why, len, "%d survivors learned of the failure and %d finished, of %d", detected,
                 finished, n - 1);
        return why;
    }
    return NULL;
}

static void test_faults(void)
{
    const char *transports[] = {"shm", "tcp"};
    int nk = (int)(sizeof kinds / sizeof kinds[0]), ran = 0;
    char dir[] = "/tmp/cadre-faults.XXXXXX";
    CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
    for (int t = 0; t < 2; t++) {
        for (int kg = 0; kg < 2; kg++) {
            for (int i = 0; i < nk; i++) {
                /* Vary the rank count, the victim and where it fails. */
                int c = ran++;
                int n = 3 + c % 3, victim = (c * 7 + 1) % n, iter = 1 + c % 9, step = c % 8;
                char cmd[4096];
                snprintf(cmd, sizeof cmd,
                         "rm -f %s/fault; env ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}"
                         "handle_segv=0\" CADRE_TIMEOUT=20 SOAK_ITERS=12 SOAK_VICTIM=%d "
                         "SOAK_ITER=%d SOAK_STEP=%d SOAK_KIND=%s SOAK_DIR=%s %s %s %s -n %d %s",
                         dir, victim, iter, step, kinds[i].kind, dir,
                         t ? "CADRE_TRANSPORT=tcp" : "", CADRERUN, kg ? "--keep-going" : "", n,
                         build_path("tests/ranks/fault_soak"));
                /* ASAN_OPTIONS: in a sanitizer build a segfault must
                 * still kill the rank by its signal, not end it with
                 * AddressSanitizer's exit status 1. */
                struct run_result r;
                CU_ASSERT_FATAL(run_cmd(cmd, NULL, 60, &r) == 0);
                char why[2300];
                const char *bad = judge(&r, &kinds[i], n, victim, kg, why, sizeof why);
                fprintf(stderr, "\n    %-11s %s%s n=%d victim %d at %d:%d: exit %d, %.2f s%s%s",
                        kinds[i].kind, transports[t], kg ? " --keep-going" : "", n, victim, iter,
                        step, r.exit_code, r.seconds, bad ? ": " : "", bad ? bad : "");
                CHECK_MSG(!bad, "%s %s%s n=%d victim %d at iteration %d step %d: %s\n--- stdout\n%s"
                          "--- stderr\n%s",
                          kinds[i].kind, transports[t], kg ? " --keep-going" : "", n, victim, iter,
                          step, bad, r.out, r.err);
                run_free(&r);
            }
        }
    }
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    CU_ASSERT(system(rm) == 0);
}

void suite_faults(void)
{
    CU_pSuite s = CU_add_suite("faults", NULL, NULL);
    CU_add_test(s, "a rank fails in a loop of calls: no hang, no wrong blame, no wrong data",
                test_faults);
}
