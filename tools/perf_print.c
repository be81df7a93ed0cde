/* cadre-perf's output, in the layout of nccl-tests (its src/common.cu), so
 * that scripts written for nccl-tests read it: a header block (the run's
 * parameters; "Using devices" with one line per rank: pid, host, device),
 * two column heads with the out-of-place and in-place results side by side,
 * one line per size (time, algbw, busbw and #wrong for each), and the
 * closing "# Out of bounds values" and "# Avg bus bandwidth" lines. Rank 0
 * prints; the header gathers the other ranks' lines, so every rank calls it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf.h"

/* Over the lines printed: for the closing lines (rank 0). */
static long all_wrong;
static double bw_sum;
static int bw_count;

struct rank_line {
    int32_t rank, pid, device;
    char host[52];
};

void perf_print_header(const struct perf_opts *o, const char *what)
{
    struct rank_line mine = {.rank = perf_me, .pid = (int32_t)getpid(), .device = -1};
    int dev = -1;
    cadre_device(&dev);
    mine.device = dev;
    if (gethostname(mine.host, sizeof mine.host - 1) != 0)
        strcpy(mine.host, "?");
    struct rank_line *all = perf_me == 0 ? calloc((size_t)perf_np, sizeof *all) : NULL;
    if (perf_me == 0 && !all) {
        fprintf(stderr, "cadre-perf: no memory for %d ranks' lines\n", perf_np);
        cadre_abort(CADRE_COMM_WORLD, 1);
    }
    PERF_CK(cadre_gather(&mine, all, sizeof mine, CADRE_UINT8, 0, CADRE_COMM_WORLD));
    if (perf_me != 0)
        return;
    char step[48], warm[16] = "by size", iters[16] = "by size";
    if (o->stepb)
        snprintf(step, sizeof step, "%zu(bytes)", o->stepb);
    else
        snprintf(step, sizeof step, "%g(factor)", o->factor);
    if (o->warmup >= 0)
        snprintf(warm, sizeof warm, "%d", o->warmup);
    if (o->iters > 0)
        snprintf(iters, sizeof iters, "%d", o->iters);
    printf("# cadre-perf %s\n", what);
    printf("# nThread 1 nGpus %d minBytes %zu maxBytes %zu step: %s warmup iters: %s iters: %s "
           "agg iters: 1 validation: %d graph: 0\n",
           dev >= 0, o->minb, o->maxb, step, warm, iters, o->check);
    printf("#\n# Using devices\n");
    for (int r = 0; r < perf_np; r++)
        printf("#  Rank %2d Group  0 Pid %6d on %10s device %2d [%s] %s\n", all[r].rank,
               all[r].pid, all[r].host, all[r].device, perf_dev ? "cuda" : "host",
               perf_dev                 ? "device buffers (cudaMalloc, -G)"
               : all[r].device >= 0     ? "host buffers (GPU bound, not used)"
                                        : "host buffers");
    free(all);
    printf("#\n");
    printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place\n",
           "", "", "", "", "");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size", "count",
           "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
           "#wrong");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
           "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
           "");
    fflush(stdout);
}

void perf_print_line(size_t bytes, size_t count, const char *type, const char *redop, int root,
                     const struct perf_result res[2])
{
    printf("%12zu  %12zu  %8s  %6s  %6d", bytes, count, type, redop, root);
    for (int k = 0; k < 2; k++) {
        double us = res[k].seconds * 1e6;
        /* nccl-tests' widths; one more decimal below 10 us, where cadre's
         * calls are. */
        const char *fmt = us >= 10000 ? "  %7.0f" : us >= 100 ? "  %7.1f" : us >= 10 ? "  %7.2f"
                                                                                      : "  %7.3f";
        printf(fmt, us);
        printf("  %6.2f  %6.2f", res[k].algbw, res[k].busbw);
        if (res[k].wrong < 0)
            printf("  %5s", "N/A");
        else
            printf("  %5ld", res[k].wrong);
        all_wrong += res[k].wrong > 0 ? res[k].wrong : 0;
        bw_sum += res[k].busbw;
        bw_count++;
    }
    printf("\n");
    fflush(stdout);
}

void perf_print_footer(void)
{
    printf("# Out of bounds values : %ld %s\n", all_wrong, all_wrong ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %g \n", bw_count ? bw_sum / bw_count : 0.0);
    printf("#\n");
    fflush(stdout);
}
