/* The one command on the GPU machine (issue 19), checked here, where there
 * is no GPU: tests/gpu/device-bundle.sh stages this build tree (with or
 * without CUDA) into a bundle and its checks pass, running it with the
 * system's copies of its libraries hidden where the machine allows; the
 * checks fail a bundle that lacks a library or does not put its own first;
 * tests/gpu/device-run.sh is valid bash (and shellcheck-clean where
 * shellcheck is installed), and its dry run against the bundle runs its
 * self-test steps (a host allreduce; a hang, caught at its limit as rc 124;
 * cadre-perf -G refused with a clear line), skips the GPU steps saying why,
 * writes its logs, and skips every step once its budget is spent; and it
 * reads the figures of the goals out of a run's logs.
 *
 * The full CUDA build of device-bundle.sh (copy of the checkout, autogen,
 * configure, make: about 35 s on 2 cores from scratch) runs only with
 * CADRE_TEST_BUNDLE_BUILD=1, where nvcc and a git checkout are there: the
 * staging and checks above are the same code, run on make check's own build. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#define BUNDLE_SH src_path("tests/gpu/device-bundle.sh")
#define RUN_SH src_path("tests/gpu/device-run.sh")

static char tmpdir[64];
static char dist[128];
static int staged; /* the bundle of this build tree is in dist */

static int setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/cadre-bundle-XXXXXX");
    if (!mkdtemp(tmpdir))
        return -1;
    snprintf(dist, sizeof dist, "%s/dist", tmpdir);
    return 0;
}

static int teardown(void)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static int build_has_cuda(void)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "grep -q '^#define HAVE_CUDA 1' '%s'", build_path("config.h"));
    return system(cmd) == 0;
}

static int build_has_ucx(void)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "grep -q '^#define HAVE_UCX 1' '%s'", build_path("config.h"));
    return system(cmd) == 0;
}

static void test_scripts_parse(void)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "bash -n '%s' && bash -n '%s' && sh -n '%s'", RUN_SH, BUNDLE_SH,
             src_path("tests/gpu/gpu-tests.sh"));
    struct run_result r;
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 30, &r) == 0);
    CHECK_MSG(r.exit_code == 0, "bash -n: exit %d\n%s%s", r.exit_code, r.out, r.err);
    run_free(&r);
    /* torch_ref.py runs only on the GPU machine: here, that it parses. */
    snprintf(cmd, sizeof cmd,
             "if command -v python3 >/dev/null; then python3 -c 'import ast, sys; "
             "ast.parse(open(sys.argv[1]).read())' '%s'; else echo 'no python3'; fi",
             src_path("tests/gpu/torch_ref.py"));
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 30, &r) == 0);
    CHECK_MSG(r.exit_code == 0, "torch_ref.py does not parse: exit %d\n%s%s", r.exit_code, r.out,
              r.err);
    run_free(&r);
    snprintf(cmd, sizeof cmd, "if command -v shellcheck >/dev/null; then shellcheck -S warning '%s' '%s'; "
             "else echo 'shellcheck: not installed'; fi", RUN_SH, BUNDLE_SH);
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 60, &r) == 0);
    CHECK_MSG(r.exit_code == 0, "shellcheck: exit %d\n%s%s", r.exit_code, r.out, r.err);
    if (strstr(r.out, "not installed"))
        fprintf(stderr, "\n    shellcheck not installed: bash -n only ");
    run_free(&r);
}

static void test_stage_and_verify(void)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "bash '%s' --from-build '%s' --out '%s' --allow-no-cuda", BUNDLE_SH,
             build_path("."), dist);
    struct run_result r;
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 180, &r) == 0);
    int simulated = count_matching(r.out, "simulated GPU machine (system copies hidden): ok") == 1;
    int sim_skipped = count_matching(r.out, "simulation skipped") == 1;
    /* With the ucx transport built, the simulation ran a job over the
     * bundled UCX (the system's hidden). */
    int ucx_ok = !simulated || !build_has_ucx() ||
                 count_matching(r.out, "on two fake hosts over ucx (bundled UCX, UCX_TLS=tcp): ok") == 1;
    CHECK_MSG(r.exit_code == 0 && count_matching(r.out, "device-bundle: ok: ") == 1 &&
                  count_matching(r.out, " MiB (") == 1 && (simulated || sim_skipped) && ucx_ok,
              "device-bundle.sh --from-build: exit %d\n--- stdout\n%s--- stderr\n%s", r.exit_code,
              r.out, r.err);
    if (sim_skipped)
        fprintf(stderr, "\n    the run with the system libraries hidden was skipped here ");
    run_free(&r);
    /* What device-run.sh needs is there; with CUDA, the GPU programs and the
     * CUDA runtime too; never a static archive. */
    const char *need_cuda = build_has_cuda()
                                ? " tests/gpu/kernel_test tests/gpu/coll_gpu_test tests/gpu/ipc_gpu_test"
                                  " tests/gpu/gpu_peerfail tests/gpu/copy_bw lib/libcudart.so.13"
                                : "";
    snprintf(cmd, sizeof cmd,
             "cd '%s' && for f in env.sh MANIFEST bin/cadrerun bin/cadre-perf bin/cadre-info "
             "lib/libcadre.so.0 lib/libpmix.so.2 lib/libevent_core-2.1.so.7%s; do "
             "[ -e $f ] || echo missing $f; done; ls lib/pmix/*.so >/dev/null || echo missing plugins; "
             "find . -name '*.a' -o -name '*.la' | sed 's/^/archive /'%s",
             dist, need_cuda,
             build_has_ucx() ? "; for f in lib/libucp.so.0 lib/libucs.so.0 lib/libuct.so.0 "
                               "lib/libucm.so.0; do [ -e $f ] || echo missing $f; done; "
                               "grep -q '^export UCX_MODULE_DIR=' env.sh || echo no UCX_MODULE_DIR"
                             : "");
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 30, &r) == 0);
    CHECK_MSG(r.exit_code == 0 && r.out_len == 0, "the bundle %s:\n%s%s", dist, r.out, r.err);
    run_free(&r);
    staged = 1;
}

/* A copy of the bundle without libevent_core: the ldd checks name it. A
 * copy whose env.sh does not put the bundle on LD_LIBRARY_PATH passes them
 * (they set it themselves) but not the run with the system's copies hidden. */
static void test_verify_fails_incomplete(void)
{
    CU_ASSERT_FATAL(staged);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "rm -rf '%s/nolib' && cp -a '%s' '%s/nolib' && rm '%s/nolib/lib/libevent_core-2.1.so.7' && "
             "bash '%s' --verify '%s/nolib' --no-simulate",
             tmpdir, dist, tmpdir, tmpdir, BUNDLE_SH, tmpdir);
    struct run_result r;
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 120, &r) == 0);
    CHECK_MSG(r.exit_code == 1 &&
                  count_matching(r.out, "needs libevent_core-2.1.so.7: resolves outside the bundle") > 0 &&
                  count_matching(r.out, "is not self-contained") == 1,
              "--verify of a bundle without libevent_core: exit %d (want 1)\n--- stdout\n%s--- stderr\n%s",
              r.exit_code, r.out, r.err);
    run_free(&r);

    snprintf(cmd, sizeof cmd,
             "rm -rf '%s/noenv' && cp -a '%s' '%s/noenv' && sed -i '/LD_LIBRARY_PATH/d' '%s/noenv/env.sh' && "
             "bash '%s' --verify '%s/noenv'",
             tmpdir, dist, tmpdir, tmpdir, BUNDLE_SH, tmpdir);
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 180, &r) == 0);
    if (count_matching(r.out, "simulation skipped")) {
        fprintf(stderr, "\n    the run with the system libraries hidden was skipped here ");
    } else {
        CHECK_MSG(r.exit_code == 1 &&
                      count_matching(r.out, "does not run with the system's copies of its libraries hidden") == 1,
                  "--verify of a bundle whose env.sh leaves LD_LIBRARY_PATH alone: exit %d (want 1)"
                  "\n--- stdout\n%s--- stderr\n%s", r.exit_code, r.out, r.err);
    }
    run_free(&r);
}

static void test_dry_run(void)
{
    CU_ASSERT_FATAL(staged);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "OUT='%s/out' bash '%s' --dry-run '%s'", tmpdir, RUN_SH, dist);
    struct run_result r;
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 150, &r) == 0);
    int gpu_here = system("nvidia-smi -L >/dev/null 2>&1") == 0;
    /* Each step's line comes twice: as the step ends, and in the summary.
     * Without a GPU the hang and cadre-perf -G's refusal are the outcomes
     * the self-tests expect. */
    CHECK_MSG(r.exit_code == 0 && !r.timed_out &&
                  count_matching(r.out, "] selftest-host-allreduce  ok ") == 2 &&
                  count_matching(r.out, "] selftest-hang            HANG (killed at its 3 s limit), as expected rc=124") == 2 &&
                  count_matching(r.out, ", as expected ") == (gpu_here ? 2 : 4) &&
                  count_matching(r.out, "NOT the expected") == 0 &&
                  count_matching(r.out, "cadre-perf: -G: ") >= 1 &&
                  (gpu_here || (count_matching(r.out, "SKIP (no GPU: nvidia-smi lists none)") >= 2 * 20 &&
                                count_matching(r.out, "the GPU steps skip") == 1)) &&
                  count_matching(r.out, "none failed or hung") == 1,
              "device-run.sh --dry-run: exit %d%s\n--- stdout\n%s--- stderr\n%s", r.exit_code,
              r.timed_out ? " (timed out)" : "", r.out, r.err);
    run_free(&r);
    /* The files: the whole log, the summary (a line per step: 3 self-tests
     * and 25 GPU steps), each run step's log. */
    snprintf(cmd, sizeof cmd,
             "cd '%s/out' && test -s device-run.log && test $(grep -c '^\\[[0-9][0-9]\\] ' summary.txt) = 28 && "
             "grep -q 'cadre-perf: -G: ' steps/03-selftest-perf-G.log && test -f steps/02-selftest-hang.log && "
             "grep -q 'Out of bounds values : 0 OK' steps/01-selftest-host-allreduce.log",
             tmpdir);
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 30, &r) == 0);
    CHECK_MSG(r.exit_code == 0, "device-run.sh --dry-run's files in %s/out: %s%s", tmpdir, r.out,
              r.err);
    run_free(&r);

    /* A spent budget: every step skips, and says so, at once. */
    snprintf(cmd, sizeof cmd, "OUT='%s/out2' DEVICE_RUN_BUDGET=8 bash '%s' --dry-run '%s'", tmpdir,
             RUN_SH, dist);
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 60, &r) == 0);
    CHECK_MSG(r.exit_code == 0 && r.seconds < 30 &&
                  count_matching(r.out, "SKIP (no time left: ") >= 2 * 3 &&
                  count_matching(r.out, "=== [") == 0,
              "device-run.sh --dry-run with an 8 s budget: exit %d, %.1f s\n--- stdout\n%s--- stderr\n%s",
              r.exit_code, r.seconds, r.out, r.err);
    run_free(&r);

    /* Usage errors. */
    snprintf(cmd, sizeof cmd, "bash '%s' --nosuch; a=$?; bash '%s' '%s/nonexistent'; echo \"rc $a $?\"",
             RUN_SH, RUN_SH, tmpdir);
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 30, &r) == 0);
    CHECK_MSG(count_matching(r.out, "rc 2 2") == 1 && count_matching(r.err, "no bundle there") == 1,
              "device-run.sh usage errors:\n--- stdout\n%s--- stderr\n%s", r.out, r.err);
    run_free(&r);
}

/* device-run.sh --figures: the figures of the goals from a run's logs
 * (made up here, in the formats of copy_bw, cadre-perf under cadrerun
 * --tag-output and torch_ref.py). */
static void test_figures(void)
{
    static const char *const logs[][2] = {
        {"05-copy_bw.log",
         "copy_bw: memory traffic at 256 MiB: 3000.0 GB/s (read + write); floor of a 4-rank 256 MiB "
         "allreduce: 0.716 ms (goal: within 1/0.7 of it, 1.023 ms)\n"},
        {"12-perf-G-allreduce-4.log",
         "[0] # cadre-perf allreduce: 4 ranks, float32 sum\n"
         "[0] #        (B)    (elements)     (us)  (GB/s)\n"
         "[0]         8192          2048   float32     sum      -1    12.50    0.66    0.98    N/A    11.00    0.74    1.12    N/A\n"
         "[0]    268435456      67108864   float32     sum      -1    900.0  298.26  447.39    N/A    1000    268.44  402.65    N/A\n"
         "[2] a line of rank 2\n"},
        {"08-perf-G-allreduce-1.log",
         "        8192          2048   float32     sum      -1    9.000    0.91    0.00    N/A    8.000    1.02    0.00    N/A\n"},
        {"09-torch-nccl-1.log",
         "torch_ref: torch D2D copy of 256 MiB: 0.200 ms, 1342.2 GB/s copied, 2684.4 GB/s memory traffic (read + write)\n"
         "# NCCL 22105 (ctypes) allreduce, 1 rank, float32 sum, out of place (a copy); time: mean of one call\n"
         "#       size         count      type   redop    root       time    algbw\n"
         "   268435456      67108864   float32     sum      -1     200.00  1342.18\n"
         "# NCCL 22105 (ctypes) allreduce, 1 rank, float32 sum, in place; time: mean of one call\n"
         "   268435456      67108864   float32     sum      -1       3.00  89478.49\n"},
    };
    char dir[256], path[512];
    snprintf(dir, sizeof dir, "%s/fig/steps", tmpdir);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    CU_ASSERT_FATAL(system(cmd) == 0);
    for (size_t i = 0; i < sizeof logs / sizeof logs[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, logs[i][0]);
        FILE *f = fopen(path, "w");
        CU_ASSERT_FATAL(f != NULL);
        fputs(logs[i][1], f);
        fclose(f);
    }
    snprintf(cmd, sizeof cmd, "bash '%s' --figures '%s/fig'", RUN_SH, tmpdir);
    struct run_result r;
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 30, &r) == 0);
    CHECK_MSG(r.exit_code == 0 &&
                  count_lines(r.out, "copy_bw memory traffic (read + write): 3000.0 GB/s") == 1 &&
                  count_lines(r.out, "cadre 4 ranks allreduce      8192 B: out of place 12.50 us, in "
                                     "place 11.00 us (goal: under 15 us)") == 1 &&
                  count_matching(r.out, "cadre 4 ranks allreduce 268435456 B: out of place 900.0 us, in "
                                        "place 1000 us (floor 716 us, goal under 1023 us; 0.80 and 0.72 "
                                        "of the floor speed") == 1 &&
                  count_lines(r.out, "cadre 1 rank  allreduce      8192 B: out of place 9.000 us, in "
                                     "place 8.000 us") == 1 &&
                  count_lines(r.out, "NCCL out of place, 1 rank, allreduce 268435456 B: 200.00 us") == 1 &&
                  count_lines(r.out, "NCCL in place, 1 rank, allreduce 268435456 B: 3.00 us") == 1 &&
                  count_matching(r.out, "torch_ref: torch D2D copy of 256 MiB") == 1 &&
                  count_matching(r.out, "rank 2") == 0,
              "device-run.sh --figures: exit %d\n--- stdout\n%s--- stderr\n%s", r.exit_code, r.out,
              r.err);
    run_free(&r);
}

/* The whole of device-bundle.sh: a CUDA build of a copy of the checkout,
 * staged and checked; opt-in (CADRE_TEST_BUNDLE_BUILD=1). */
static void test_full_build(void)
{
    const char *want = getenv("CADRE_TEST_BUNDLE_BUILD");
    if (!want || strcmp(want, "1")) {
        fprintf(stderr, "\n    skipped: CADRE_TEST_BUNDLE_BUILD=1 runs the full CUDA build (~35 s) ");
        return;
    }
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "if ! [ -x \"${CUDA_DIR:-/usr/local/cuda}/bin/nvcc\" ] || ! git -C '%s' rev-parse HEAD >/dev/null 2>&1; "
             "then echo 'SKIP: no nvcc or no git checkout'; exit 0; fi; bash '%s' --dir '%s/full'",
             src_path("."), BUNDLE_SH, tmpdir);
    struct run_result r;
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 900, &r) == 0);
    if (strstr(r.out, "SKIP: ")) {
        fprintf(stderr, "\n    skipped: no nvcc or no git checkout ");
    } else {
        CHECK_MSG(r.exit_code == 0 && count_matching(r.out, "device-bundle: ok: ") == 1 &&
                      count_matching(r.out, "device-bundle: built in ") == 1,
                  "device-bundle.sh --dir: exit %d\n--- stdout\n%s--- stderr\n%s", r.exit_code, r.out,
                  r.err);
    }
    run_free(&r);
}

void suite_gpubundle(void)
{
    CU_pSuite s = CU_add_suite("gpubundle", setup, teardown);
    CU_add_test(s, "device-run.sh and device-bundle.sh parse (bash -n, shellcheck)", test_scripts_parse);
    CU_add_test(s, "device-bundle.sh stages this build and its checks pass", test_stage_and_verify);
    CU_add_test(s, "the checks fail a bundle that lacks a library or does not come first",
                test_verify_fails_incomplete);
    CU_add_test(s, "device-run.sh --dry-run: self-tests, GPU steps skipped, logs, budget",
                test_dry_run);
    CU_add_test(s, "device-run.sh --figures: the goals' figures from a run's logs", test_figures);
    CU_add_test(s, "device-bundle.sh builds with CUDA (CADRE_TEST_BUNDLE_BUILD=1)", test_full_build);
}
