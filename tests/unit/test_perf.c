/* cadre-perf as users run it: every mode once on 2 ranks with -c 1 over a
 * small size range must exit 0 with #wrong 0 on every result line; a few
 * datatype, op, root and in-place variants likewise; bad command lines exit 2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define PERF build_path("tools/cadre-perf")

/* Result lines (not starting with '#') and how many of them have a last
 * column other than "0". */
static int result_lines(const char *out, int *bad)
{
    int n = 0;
    *bad = 0;
    for (const char *p = out; p && *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), p);
        char *s = line + strspn(line, " \t");
        if (*s && *s != '#') {
            n++;
            char *last = strrchr(s, ' ');
            if (!last || strcmp(last + 1, "0"))
                (*bad)++;
        }
        p = e ? e + 1 : NULL;
    }
    return n;
}

/* Runs cadre-perf on 2 ranks with args; it must exit 0 with at least
 * `min_lines` result lines, all with #wrong 0. */
static void perf_ok(const char *args, int min_lines)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s -n 2 %s %s", CADRERUN, PERF, args);
    struct run_result r;
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 30, &r) == 0);
    int bad, n = result_lines(r.out, &bad);
    CHECK_MSG(r.exit_code == 0 && !r.timed_out && n >= min_lines && bad == 0,
              "cadre-perf %s: exit %d%s, %d result lines, %d with #wrong not 0\n--- stdout\n%s"
              "--- stderr\n%s",
              args, r.exit_code, r.timed_out ? " (timed out)" : "", n, bad, r.out, r.err);
    run_free(&r);
}

#define SMALL "-b 8 -e 64K -f 4 -n 5 -w 1 -c 1"

static void test_every_mode(void)
{
    static const char *const modes[] = {"allreduce", "reduce",  "bcast",   "allgather",
                                        "reduce_scatter", "alltoall", "gather", "scatter",
                                        "sendrecv", "stream"};
    char args[256];
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        /* 8, 32, ..., 32K, 64K: 8 sizes */
        snprintf(args, sizeof args, "%s " SMALL, modes[i]);
        perf_ok(args, 8);
    }
    perf_ok("barrier -c 1 -n 5", 1);
}

static void test_variants(void)
{
    perf_ok("allreduce " SMALL " -d float16 -o prod", 8);
    perf_ok("allreduce " SMALL " -d bfloat16 -o avg -P 1", 8);
    perf_ok("allreduce " SMALL " -d int8 -o max", 8);
    perf_ok("reduce " SMALL " -d uint64 -o min -r 1 -P 1", 8);
    perf_ok("reduce_scatter " SMALL " -d int32 -P 1", 8);
    perf_ok("allgather " SMALL " -d float64 -P 1", 8);
    perf_ok("gather " SMALL " -d uint8 -r 1 -P 1", 8);
    perf_ok("scatter " SMALL " -d int64 -r 1 -P 1", 8);
    perf_ok("alltoall " SMALL " -P 1", 8);
    perf_ok("bcast " SMALL " -r 1", 8);
}

static void test_usage_errors(void)
{
    static const char *const bad[] = {
        "allreduce -x 1",  "allreduce -d float8", "allreduce -o xor",  "allreduce -c 2",
        "allreduce -P 2",  "allreduce -n 0",      "nosuchmode",        "allreduce -b",
        "allreduce -d int32 -o avg", "allreduce -b 1K -e 8", "bcast -r 2",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "%s -n 2 %s %s", CADRERUN, PERF, bad[i]);
        struct run_result r;
        CU_ASSERT_FATAL(run_cmd(cmd, NULL, 20, &r) == 0);
        CHECK_MSG(r.exit_code == 2 && strstr(r.err, "cadre-perf"),
                  "cadre-perf %s: exit %d, want 2\n--- stderr\n%s", bad[i], r.exit_code, r.err);
        run_free(&r);
    }
}

void suite_perf(void)
{
    CU_pSuite s = CU_add_suite("perf", NULL, NULL);
    CU_add_test(s, "every mode with -c 1 on 2 ranks: #wrong 0", test_every_mode);
    CU_add_test(s, "datatypes, ops, roots, in place: #wrong 0", test_variants);
    CU_add_test(s, "bad command lines exit 2", test_usage_errors);
}
