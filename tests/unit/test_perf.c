/* cadre-perf as users run it: every mode once on 2 ranks with -c 1 over a
 * small size range must exit 0 with #wrong 0 on every result line, out of
 * place and in place, in nccl-tests' layout (header block with a line per
 * rank, 13 columns, closing lines); a few datatype, op and root variants
 * likewise; stream's pairs on more ranks and its one receive buffer; bad
 * command lines exit 2; -G (device buffers) refused clearly where it cannot
 * run, and checked like the host runs where a GPU is. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define PERF build_path("tools/cadre-perf")

/* Result lines (not starting with '#') and how many of them are not
 * nccl-tests' 13 columns with both #wrong columns (out-of-place, the 9th,
 * and in-place, the 13th) "0". */
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
            char *f[16], *save = NULL;
            int nf = 0;
            for (char *t = strtok_r(s, " \t", &save); t && nf < 16; t = strtok_r(NULL, " \t", &save))
                f[nf++] = t;
            if (nf != 13 || strcmp(f[8], "0") || strcmp(f[12], "0"))
                (*bad)++;
        }
        p = e ? e + 1 : NULL;
    }
    return n;
}

/* nccl-tests' header and closing lines: a "#  Rank" line per rank under
 * "# Using devices", the two column heads, "Out of bounds values : 0 OK"
 * and the average bus bandwidth. Returns what is missing, or NULL. */
static const char *layout_missing(const char *out, int nranks)
{
    if (!strstr(out, "\n# nThread 1 nGpus "))
        return "# nThread line";
    if (!strstr(out, "\n#\n# Using devices\n"))
        return "# Using devices";
    if (count_matching(out, "#  Rank ") != nranks || count_matching(out, " Group  0 Pid ") != nranks)
        return "one '#  Rank N Group 0 Pid P' line per rank";
    if (!strstr(out, "out-of-place") || !strstr(out, "in-place") ||
        count_matching(out, "#wrong") != 1)
        return "the out-of-place and in-place heads";
    if (count_lines(out, "# Out of bounds values : 0 OK") != 1)
        return "# Out of bounds values : 0 OK";
    if (count_matching(out, "# Avg bus bandwidth    : ") != 1)
        return "# Avg bus bandwidth";
    return NULL;
}

/* Runs cadre-perf on np ranks with args; it must exit 0 with at least
 * `min_lines` result lines, all with #wrong 0. Returns its stdout (free it). */
static char *perf_ok_np(int np, const char *args, int min_lines)
{
    char cmd[1024];
    /* More ranks than the cores: unbound. */
    snprintf(cmd, sizeof cmd, "%s -n %d%s %s %s", CADRERUN, np, np > 2 ? " --bind-to none" : "", PERF,
             args);
    struct run_result r;
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 60, &r) == 0);
    int bad, n = result_lines(r.out, &bad);
    const char *missing = layout_missing(r.out, np);
    CHECK_MSG(r.exit_code == 0 && !r.timed_out && n >= min_lines && bad == 0 && !missing,
              "cadre-perf %s: exit %d%s, %d result lines, %d not 13 columns with both #wrong 0%s%s"
              "\n--- stdout\n%s--- stderr\n%s",
              args, r.exit_code, r.timed_out ? " (timed out)" : "", n, bad,
              missing ? ", no " : "", missing ? missing : "", r.out, r.err);
    char *out = strdup(r.out ? r.out : "");
    run_free(&r);
    return out;
}

static void perf_ok(const char *args, int min_lines)
{
    free(perf_ok_np(2, args, min_lines));
}

#define SMALL "-b 8 -e 64K -f 4 -n 5 -w 1 -c 1"

static void test_every_mode(void)
{
    static const char *const modes[] = {"allreduce", "reduce",  "bcast",   "allgather",
                                        "reduce_scatter", "alltoall", "gather", "scatter",
                                        "gatherv", "scatterv", "allgatherv", "alltoallv",
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
    perf_ok("allreduce " SMALL " -d bfloat16 -o avg", 8);
    perf_ok("allreduce " SMALL " -d int8 -o max", 8);
    perf_ok("reduce " SMALL " -d uint64 -o min -r 1", 8);
    perf_ok("reduce_scatter " SMALL " -d int32", 8);
    perf_ok("allgather " SMALL " -d float64", 8);
    perf_ok("gather " SMALL " -d uint8 -r 1", 8);
    perf_ok("scatter " SMALL " -d int64 -r 1", 8);
    perf_ok("alltoall " SMALL, 8);
    perf_ok("bcast " SMALL " -r 1", 8);
}

/* The v-variants on 2, 3 and 4 ranks, every root, int32 with sizes whose
 * counts per rank are odd, even and zero (4, 12, 36, ... 2916 bytes; rank k
 * gets 2c(k+1)/(n+1) of c elements per rank): every block checked element by
 * element, and the free elements between the blocks unchanged. */
static void test_v_layouts(void)
{
    static const char *const modes[] = {"gatherv", "scatterv", "allgatherv", "alltoallv"};
    for (int np = 2; np <= 4; np++)
        for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
            for (int root = 0; root < (i < 2 ? np : 1); root++) {
                char args[256];
                snprintf(args, sizeof args, "%s -b 4 -e 3K -f 3 -n 2 -w 1 -c 1 -d int32 -r %d",
                         modes[i], root);
                free(perf_ok_np(np, args, 7));
            }
}

/* stream's pairs (rank i sends to rank i + np/2, an odd np's last rank
 * idles) and -R one (the window into one receive buffer, whose last message
 * is checked), with -c 1: #wrong 0 and a "# msgrate" line per size naming
 * the pairs. */
static void test_stream_pairs(void)
{
    static const struct {
        int np;
        const char *args, *pairs;
    } runs[] = {
        {4, "", "summed over 2 pairs"},       {4, "-R one", "summed over 2 pairs"},
        {2, "-R one", "summed over 1 pair"}, {5, "-R many -W 7", "summed over 2 pairs"},
        {3, "-R one -W 1", "summed over 1 pair"},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        char args[256];
        /* 8, 64, 512, 4K, 32K: 5 sizes */
        snprintf(args, sizeof args, "stream -b 8 -e 32K -f 8 -n 5 -w 1 -c 1 %s", runs[i].args);
        char *out = perf_ok_np(runs[i].np, args, 5);
        CHECK_MSG(count_matching(out, "# msgrate  size ") == 5 &&
                      count_matching(out, runs[i].pairs) == 5 &&
                      (runs[i].np % 2 == 0 || strstr(out, "the last rank idles")),
                  "cadre-perf %s on %d ranks: want 5 '# msgrate' lines '%s'%s\n--- stdout\n%s",
                  args, runs[i].np, runs[i].pairs, runs[i].np % 2 ? " and 'the last rank idles'" : "",
                  out);
        free(out);
    }
}

/* -R one at sizes whose messages move in one copy, in halves that may land
 * in either order (64 KiB to 256 KiB): every byte left is one of the
 * window's messages'. Checking for the window's last message only, as
 * before, counted 131072-196608 bytes wrong at 64 KiB. */
static void test_stream_one_buffer_large(void)
{
    const char *args = "stream -b 64K -e 256K -f 2 -n 5 -w 1 -c 1 -R one";
    char *out = perf_ok_np(2, args, 3);
    CHECK_MSG(count_matching(out, "# msgrate  size ") == 3,
              "cadre-perf %s: want 3 '# msgrate' lines\n--- stdout\n%s", args, out);
    free(out);
}

static void test_usage_errors(void)
{
    static const char *const bad[] = {
        "allreduce -x 1",  "allreduce -d float8", "allreduce -o xor",  "allreduce -c 2",
        "allreduce -P 1",  "allreduce -n 0",      "nosuchmode",        "allreduce -b",
        "allreduce -d int32 -o avg", "allreduce -b 1K -e 8", "bcast -r 2",
        "allreduce -T 1 -t barrier", "allreduce -T 0 -c 0", "allreduce -t osu", "allreduce -t",
        "sendrecv -t barrier", "stream -t barrier", "sendrecv -T 1 -c 0", "allreduce -T x -c 0",
        "stream -R two",   "stream -R",           "stream -R one -W 129",
        "allreduce -Gx",   "allreduce -G 1",  "sendrecv -G -W",
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

/* -T: each size runs until one run of its iterations takes that long; the
 * lines have real times, and the result checked after them (-c 1). */
static void test_mintime(void)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s -n 2 %s allreduce -b 8 -e 64K -f 16 -T 0.05", CADRERUN, PERF);
    struct run_result r;
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 60, &r) == 0);
    int lines = 0, timed = 0;
    for (const char *p = r.out; p && *p;) {
        const char *e = strchr(p, '\n');
        unsigned long long size;
        double t;
        long w1, w2;
        if (*p != '#' &&
            sscanf(p, "%llu %*s %*s %*s %*s %lf %*s %*s %ld %*s %*s %*s %ld", &size, &t, &w1, &w2) == 4) {
            lines++;
            timed += t > 0 && w1 == 0 && w2 == 0;
        }
        p = e ? e + 1 : NULL;
    }
    CHECK_MSG(r.exit_code == 0 && lines == 5 && timed == 5,
              "cadre-perf -T: exit %d, %d result lines (want 5: 8, 128, 2048, 32768, 65536), %d timed"
              "\n--- stdout\n%s--- stderr\n%s", r.exit_code, lines, timed, r.out, r.err);
    run_free(&r);
}

/* -G: in a build without CUDA a usage error (exit 2) that says so; in a CUDA
 * build on a machine without a GPU, exit 1 with a line saying why; with a
 * GPU, every mode on device buffers with -c 1: #wrong 0. */
static void test_device_buffers(void)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "grep -q '^#define HAVE_CUDA 1' '%s'", build_path("config.h"));
    int cuda = system(cmd) == 0;
    int gpu = cuda && system("nvidia-smi -L 2>/dev/null | grep -q '^GPU '") == 0;
    if (gpu) {
        static const char *const modes[] = {"allreduce", "reduce_scatter", "allgather", "bcast",
                                            "sendrecv", "stream"};
        for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
            char args[256];
            snprintf(args, sizeof args, "%s -G " SMALL, modes[i]);
            perf_ok(args, 8);
        }
        return;
    }
    snprintf(cmd, sizeof cmd, "%s -n 2 %s allreduce -G -b 8 -e 64 -n 1 -w 0", CADRERUN, PERF);
    struct run_result r;
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 60, &r) == 0);
    const char *want = cuda ? "cadre-perf: -G: no CUDA device bound to rank "
                            : "cadre-perf: -G: this cadre was built without CUDA (configure --with-cuda)";
    CHECK_MSG(r.exit_code == (cuda ? 1 : 2) && count_matching(r.err, want) >= 1 &&
                  count_matching(r.out, "# Out of bounds") == 0,
              "cadre-perf allreduce -G (%s, no GPU): exit %d, want %d and '%s'\n--- stdout\n%s--- stderr\n%s",
              cuda ? "CUDA build" : "no CUDA", r.exit_code, cuda ? 1 : 2, want, r.out, r.err);
    run_free(&r);
}

/* -t barrier, the standard MPI benchmarks' timing: every collective mode
 * runs, checked, in its layout, and says how it timed; a "# iteration" line
 * after each size gives the call and its barrier together. */
static void test_barrier_timing(void)
{
    static const char *const modes[] = {"allreduce", "reduce", "bcast", "allgather",
                                        "reduce_scatter", "alltoall", "gather", "scatter",
                                        "gatherv", "scatterv", "allgatherv", "alltoallv"};
    char args[256];
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        snprintf(args, sizeof args, "%s " SMALL " -t barrier -r 1", modes[i]);
        char *out = perf_ok_np(3, args, 8);
        CHECK_MSG(count_matching(out, "a barrier after each call, averaged over the ranks") == 1,
                  "cadre-perf %s: the header does not say how it timed\n%s", args, out);
        CHECK_MSG(count_matching(out, "# iteration  size ") == 8 &&
                      count_matching(out, "us: the call and the barrier after it, mean over the "
                                          "ranks") == 8,
                  "cadre-perf %s: want a '# iteration' line after each of the 8 sizes\n%s", args,
                  out);
        free(out);
    }
    free(perf_ok_np(3, "barrier -n 5 -t barrier", 1));
}

/* The check can fail: with CADRE_PERF_CORRUPT=1 cadre-perf changes one byte
 * of each checked result, and every mode must then count wrong elements on
 * every line, out of place and in place, and exit 1. */
static void test_check_fails(void)
{
    static const char *const modes[] = {"allreduce", "reduce", "bcast", "allgather",
                                        "reduce_scatter", "alltoall", "gather", "scatter",
                                        "gatherv", "scatterv", "allgatherv", "alltoallv",
                                        "sendrecv", "stream"};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "CADRE_PERF_CORRUPT=1 %s -n 2 %s %s -b 8 -e 4K -f 8 -n 3 -w 1",
                 CADRERUN, PERF, modes[i]);
        struct run_result r;
        CU_ASSERT_FATAL(run_cmd(cmd, NULL, 60, &r) == 0);
        int lines = 0, caught = 0;
        for (const char *p = r.out; p && *p;) {
            const char *e = strchr(p, '\n');
            long w1, w2;
            if (*p != '#' && sscanf(p, "%*s %*s %*s %*s %*s %*s %*s %*s %ld %*s %*s %*s %ld", &w1,
                                    &w2) == 2) {
                lines++;
                caught += w1 > 0 && w2 > 0;
            }
            p = e ? e + 1 : NULL;
        }
        CHECK_MSG(r.exit_code == 1 && lines == 4 && caught == 4,
                  "cadre-perf %s with a corrupted result: exit %d (want 1), %d of %d lines with "
                  "#wrong > 0 (want 4 of 4)\n--- stdout\n%s--- stderr\n%s",
                  modes[i], r.exit_code, caught, lines, r.out, r.err);
        run_free(&r);
    }
}

void suite_perf(void)
{
    CU_pSuite s = CU_add_suite("perf", NULL, NULL);
    CU_add_test(s, "every mode with -c 1 on 2 ranks: #wrong 0", test_every_mode);
    CU_add_test(s, "datatypes, ops, roots: #wrong 0", test_variants);
    CU_add_test(s, "v-variants on 2-4 ranks, every root, odd and zero counts: #wrong 0",
                test_v_layouts);
    CU_add_test(s, "bad command lines exit 2", test_usage_errors);
    CU_add_test(s, "-T: each size timed for a while", test_mintime);
    CU_add_test(s, "-t barrier: every collective, checked", test_barrier_timing);
    CU_add_test(s, "a corrupted result is counted wrong in every mode", test_check_fails);
    CU_add_test(s, "stream: pairs on 2 to 5 ranks, one receive buffer: #wrong 0", test_stream_pairs);
    CU_add_test(s, "stream: one receive buffer, messages in one copy: #wrong 0",
                test_stream_one_buffer_large);
    CU_add_test(s, "-G: device buffers, or a clear refusal without CUDA or a GPU", test_device_buffers);
}
