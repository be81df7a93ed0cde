/* The programs of examples/ (the PyTorch distributed tutorial in C) under
 * cadrerun, and again started without a launcher (suite examples_rdv): each
 * prints one line per rank, in no particular order between ranks, so the
 * lines are compared as sorted lists with the ones expected, which are
 * worked out here from what each example does. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#define LIMIT 30.0
#define MAX_LINES 16
#define LINE_LEN 256

struct lines {
    int n;
    char line[MAX_LINES][LINE_LEN];
};

static void add(struct lines *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct lines *e, const char *fmt, ...)
{
    CU_ASSERT_FATAL(e->n < MAX_LINES);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->line[e->n++], LINE_LEN, fmt, ap);
    va_end(ap);
}

/* "[a, b, ...]" as the examples print a list of float32 values. */
static const char *list(const double *v, int n)
{
    static char buf[4][LINE_LEN];
    static int next;
    char *s = buf[next++ % 4];
    int len = snprintf(s, LINE_LEN, "[");
    for (int i = 0; i < n; i++)
        len += snprintf(s + len, LINE_LEN - (size_t)len, "%s%.1f", i ? ", " : "", v[i]);
    snprintf(s + len, LINE_LEN - (size_t)len, "]");
    return s;
}

static int cmp_line(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void join(char *out, size_t cap, const struct lines *l)
{
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; i < l->n && len < cap; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s\n", l->line[i]);
}

/* How the suite being run starts the ranks: cadrerun, or without a launcher
 * (tests/rdv_run.sh: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT). */
static int no_launcher;

static int with_cadrerun(void)
{
    no_launcher = 0;
    return 0;
}

static int with_rdv_run(void)
{
    no_launcher = 1;
    return 0;
}

/* Runs `cadrerun -n nranks examples/name` (or `rdv_run.sh nranks ...`) and
 * compares its stdout, as a set of lines, with `expect`. */
static void check_example(const char *name, int nranks, struct lines *expect)
{
    char rel[128], cmd[4096];
    snprintf(rel, sizeof rel, "examples/%s", name);
    if (no_launcher)
        snprintf(cmd, sizeof cmd, "sh %s %d %s", src_path("tests/rdv_run.sh"), nranks,
                 build_path(rel));
    else
        snprintf(cmd, sizeof cmd, "%s -n %d %s", CADRERUN, nranks, build_path(rel));
    struct run_result r;
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, LIMIT, &r) == 0);
    fprintf(stderr, "\n    %-16s n=%d: exit %d, %.2f s", name, nranks, r.exit_code, r.seconds);
    CHECK_MSG(r.exit_code == 0 && !r.timed_out, "%s -n %d: exit %d%s\n--- stdout\n%s--- stderr\n%s",
              name, nranks, r.exit_code, r.timed_out ? " (timed out)" : "", r.out, r.err);

    struct lines got = {0};
    int extra = 0;
    for (const char *p = r.out; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t l = nl ? (size_t)(nl - p) : strlen(p);
        if (got.n < MAX_LINES && l < LINE_LEN) {
            memcpy(got.line[got.n], p, l);
            got.line[got.n++][l] = '\0';
        } else {
            extra = 1;
        }
        p = nl ? nl + 1 : NULL;
    }
    qsort(got.line, (size_t)got.n, LINE_LEN, cmp_line);
    qsort(expect->line, (size_t)expect->n, LINE_LEN, cmp_line);
    int same = !extra && got.n == expect->n;
    for (int i = 0; same && i < got.n; i++)
        same = strcmp(got.line[i], expect->line[i]) == 0;
    char want[MAX_LINES * LINE_LEN], have[MAX_LINES * LINE_LEN];
    join(want, sizeof want, expect);
    join(have, sizeof have, &got);
    CHECK_MSG(same, "%s -n %d: the lines differ\n--- expected (sorted)\n%s--- got (sorted)\n%s%s"
                    "--- stderr\n%s",
              name, nranks, want, have, extra ? "(and more)\n" : "", r.err);
    run_free(&r);
}

/* Rank 0 sends 1.0 to rank 1: both have 1.0. */
static void test_send_recv(void)
{
    const char *names[] = {"send_recv", "isend_irecv"};
    for (int i = 0; i < 2; i++) {
        struct lines e = {0};
        for (int r = 0; r < 2; r++)
            add(&e, "Rank %d has data %.1f", r, 1.0);
        check_example(names[i], 2, &e);
    }
}

/* Rank r starts with r + 1; after the broadcast from 0, all have 1.0. */
static void test_broadcast(void)
{
    for (int n = 3; n <= 4; n++) {
        double root_value = 0 + 1; /* rank 0's r + 1 */
        struct lines e = {0};
        for (int r = 0; r < n; r++)
            add(&e, "Rank %d has data %.1f", r, root_value);
        check_example("broadcast", n, &e);
    }
}

/* Ones, summed at rank 0 (in place): n there, 1.0 elsewhere. */
static void test_reduce(void)
{
    for (int n = 3; n <= 4; n++) {
        struct lines e = {0};
        for (int r = 0; r < n; r++)
            add(&e, "Rank %d has data %.1f", r, r == 0 ? (double)n : 1.0);
        check_example("reduce", n, &e);
    }
}

/* Ones, summed everywhere: n. */
static void test_all_reduce(void)
{
    for (int n = 3; n <= 4; n++) {
        struct lines e = {0};
        for (int r = 0; r < n; r++)
            add(&e, "Rank %d has data %.1f", r, (double)n);
        check_example("all_reduce", n, &e);
    }
}

/* Rank r holds r + 1: rank 0 gathers [1, ..., n], the others keep theirs. */
static void test_gather(void)
{
    for (int n = 3; n <= 4; n++) {
        double all[MAX_LINES];
        for (int r = 0; r < n; r++)
            all[r] = r + 1;
        struct lines e = {0};
        add(&e, "Rank 0 has data %s", list(all, n));
        for (int r = 1; r < n; r++)
            add(&e, "Rank %d has data %.1f", r, r + 1.0);
        check_example("gather", n, &e);
    }
}

/* Rank r holds r + 1: everyone gets [1, ..., n]. */
static void test_all_gather(void)
{
    for (int n = 3; n <= 4; n++) {
        double all[MAX_LINES];
        for (int r = 0; r < n; r++)
            all[r] = r + 1;
        struct lines e = {0};
        for (int r = 0; r < n; r++)
            add(&e, "Rank %d has data %s", r, list(all, n));
        check_example("all_gather", n, &e);
    }
}

/* Rank 0 scatters [1, ..., n]: rank r gets r + 1. */
static void test_scatter(void)
{
    for (int n = 3; n <= 4; n++) {
        struct lines e = {0};
        for (int r = 0; r < n; r++)
            add(&e, "Rank %d has data %.1f", r, r + 1.0);
        check_example("scatter", n, &e);
    }
}

/* Input j of rank r is [(r+1)*1, (r+1)*2]^(j+1); rank j gets the sum over r
 * of input j. n = 3: [6, 12], [14, 56], [36, 288]. */
static void test_reduce_scatter(void)
{
    for (int n = 3; n <= 4; n++) {
        struct lines e = {0};
        for (int j = 0; j < n; j++) {
            double out[2] = {0, 0};
            for (int r = 0; r < n; r++) {
                for (int k = 0; k < 2; k++) {
                    double p = 1;
                    for (int i = 0; i <= j; i++)
                        p *= (r + 1) * (k + 1);
                    out[k] += p;
                }
            }
            add(&e, "Rank %d has data %s", j, list(out, 2));
        }
        if (n == 3) { /* the figures of README.md */
            CU_ASSERT_STRING_EQUAL(e.line[0], "Rank 0 has data [6.0, 12.0]");
            CU_ASSERT_STRING_EQUAL(e.line[1], "Rank 1 has data [14.0, 56.0]");
            CU_ASSERT_STRING_EQUAL(e.line[2], "Rank 2 has data [36.0, 288.0]");
        }
        check_example("reduce_scatter", n, &e);
    }
}

/* Rank r sleeps r s before the barrier: all pass it after n - 1 s. */
static void test_barrier(void)
{
    int n = 3;
    struct lines e = {0};
    for (int r = 0; r < n; r++)
        add(&e, "Rank %d passed the barrier after %d s", r, n - 1);
    check_example("barrier", n, &e);
}

/* The README's mpirun commands for one machine, as written there, with
 * hello for ./app: each starts 4 ranks, on this 2-core machine too (mpirun
 * refuses more ranks than cores without --oversubscribe). The one for root
 * runs as any user. Skipped without Open MPI's mpirun. */
static void test_readme_mpirun(void)
{
    struct run_result r;
    CU_ASSERT_FATAL(run_cmd("mpirun --version", NULL, 30, &r) == 0);
    int have = r.exit_code == 0 && strstr(r.out, "Open MPI") != NULL;
    run_free(&r);
    if (!have) {
        fprintf(stderr, "\n    skipped: no Open MPI mpirun ");
        return;
    }
    FILE *f = fopen(src_path("README.md"), "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char line[1024];
    int in_section = 0, in_block = 0, ran = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "## ", 3))
            in_section = !strncmp(line, "## Running jobs: cadrerun", 25);
        if (!in_section)
            continue;
        if (!strncmp(line, "```", 3)) {
            in_block = !in_block;
            continue;
        }
        if (!in_block || strncmp(line, "mpirun ", 7))
            continue;
        line[strcspn(line, "#\n")] = '\0';
        char *app = strstr(line, " ./app");
        CU_ASSERT_PTR_NOT_NULL_FATAL(app);
        *app = '\0';
        /* The command for users other than root, run by root (CI). */
        const char *as_root = geteuid() == 0 && !strstr(line, "--allow-run-as-root")
                                  ? "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                                  : "";
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "%s%s %s%s", as_root, line, build_path("examples/hello"),
                 app + 6);
        CU_ASSERT_FATAL(run_cmd(cmd, NULL, 120, &r) == 0);
        CHECK_MSG(r.exit_code == 0 && count_matching(r.out, "hello from rank ") == 4 &&
                      count_matching(r.out, " of 4 (local rank ") == 4,
                  "README's %s: exit %d, want 4 ranks\n--- stdout\n%s--- stderr\n%s", line,
                  r.exit_code, r.out, r.err);
        run_free(&r);
        ran++;
    }
    fclose(f);
    CHECK_MSG(ran == 2, "%d mpirun commands in README's Running jobs, want 2", ran);
}

void suite_examples(void)
{
    for (int k = 0; k < 2; k++) {
        CU_pSuite s = CU_add_suite(k ? "examples_rdv" : "examples",
                                   k ? with_rdv_run : with_cadrerun, NULL);
        CU_add_test(s, "send_recv, isend_irecv (n = 2)", test_send_recv);
        CU_add_test(s, "broadcast (n = 3, 4)", test_broadcast);
        CU_add_test(s, "reduce (n = 3, 4)", test_reduce);
        CU_add_test(s, "all_reduce (n = 3, 4)", test_all_reduce);
        CU_add_test(s, "gather (n = 3, 4)", test_gather);
        CU_add_test(s, "all_gather (n = 3, 4)", test_all_gather);
        CU_add_test(s, "scatter (n = 3, 4)", test_scatter);
        CU_add_test(s, "reduce_scatter (n = 3, 4)", test_reduce_scatter);
        CU_add_test(s, "barrier (n = 3)", test_barrier);
        if (!k)
            CU_add_test(s, "README's mpirun commands: 4 ranks on any machine",
                        test_readme_mpirun);
    }
}
