/* The peer of cadre-perf's collective modes for MPI libraries: the same loops
 * as `cadre-perf MODE -c 0` (float32, sum, root 0, out of place): per size,
 * the same count, iterations and warm-ups, then a barrier, the timed calls
 * back to back, and the mean time of one call taken as the largest over the
 * ranks. The same sizes as nccl-tests (the whole buffer for allgather,
 * reduce_scatter, alltoall, gather, scatter) and the columns of cadre-perf's
 * out-of-place half (the bench scripts read the time, column 6, of both).
 *
 *   mpirun -np 2 mpi_coll MODE [MINBYTES [MAXBYTES [ITERS [WARMUP [MINTIME [TIMING [TYPE]]]]]]]
 *
 * MODE: allreduce reduce bcast allgather reduce_scatter alltoall gather
 * scatter barrier gatherv scatterv allgatherv alltoallv (the v-variants in
 * cadre-perf's layout: rank k's block 2c(k+1)/(n+1) of c elements per rank,
 * one element free before each block and after the last; alltoallv's block
 * of rank r for k that of (r+k) mod n; the size printed is the counts' sum
 * times the type size); sizes 8 .. 64M by default, doubling, the last one
 * MAXBYTES as in cadre-perf (it used to double past it, out of the buffers);
 * ITERS and WARMUP as cadre-perf's -n and -w (default, or 0: by size); MINTIME > 0 as cadre-perf's
 * -T: runs of ITERS (default 1) calls, growing, until one takes MINTIME
 * seconds on the slowest rank, whose mean is the time. TIMING "barrier" (as
 * cadre-perf's -t barrier, and the OSU micro-benchmarks): each call timed on
 * its own, a barrier after it, each rank's mean averaged over the ranks;
 * "loop" (the default) as above; with barrier a line "# iteration  size N
 * out-of-place T  us" follows each size's: the mean of a whole iteration (the
 * call and the barrier), averaged over the ranks, as cadre-perf prints it.
 * TYPE: float32 (the default) or uint8 (whose sizes start at 1 byte;
 * reductions on it are sums of bytes). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int iters_for(size_t bytes) /* cadre-perf's perf_default_iters */
{
    if (bytes <= 65536)
        return 10000;
    if (bytes <= (1u << 20))
        return 1000;
    if (bytes <= (16u << 20))
        return 100;
    return 20;
}

static const char *const modes[] = {"allreduce", "reduce",  "bcast",   "allgather", "reduce_scatter",
                                    "alltoall",  "gather",  "scatter", "barrier",   "gatherv",
                                    "scatterv",  "allgatherv", "alltoallv"};

/* cadre-perf's v-variant layout (tools/perf_data.c) of c elements per rank on
 * np ranks, rotated by `rot` (alltoallv: this rank; the others 0): the counts
 * and displacements, np each; returns the counts' sum. */
static size_t layout(size_t c, int np, int rot, int *counts, int *displs)
{
    size_t at = 0, sum = 0;
    for (int k = 0; k < np; k++) {
        counts[k] = (int)(c * 2 * (size_t)((rot + k) % np + 1) / (size_t)(np + 1));
        displs[k] = (int)at + 1;
        at = (size_t)displs[k] + (size_t)counts[k];
        sum += (size_t)counts[k];
    }
    return sum;
}

/* A byte count as cadre-perf takes it: digits with an optional K, M or G
 * (binary); 0 with *ok cleared for anything else. */
static size_t parse_bytes(const char *a, int *ok)
{
    char *end;
    unsigned long long v = strtoull(a, &end, 10);
    int shift = *end == 'K' || *end == 'k' ? 10 : *end == 'M' || *end == 'm' ? 20 : *end == 'G' || *end == 'g' ? 30 : 0;
    if (shift)
        end++;
    if (end == a || *end || v > (~0ull >> shift)) {
        *ok = 0;
        return 0;
    }
    return (size_t)(v << shift);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int me, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    const char *mode = argc > 1 ? argv[1] : "allreduce";
    int k = -1;
    for (int i = 0; i < (int)(sizeof modes / sizeof modes[0]); i++)
        if (!strcmp(mode, modes[i]))
            k = i;
    if (k < 0) {
        if (me == 0)
            fprintf(stderr, "mpi_coll: unknown mode '%s'\n", mode);
        MPI_Finalize();
        return 2;
    }
    int ok = 1;
    size_t minb = argc > 2 ? parse_bytes(argv[2], &ok) : 8;
    size_t maxb = argc > 3 ? parse_bytes(argv[3], &ok) : (64u << 20);
    if (!ok) {
        /* "64M" once read as 64: a run that stopped at 64 bytes. */
        if (me == 0)
            fprintf(stderr, "mpi_coll: MINBYTES and MAXBYTES are byte counts (digits, then K, M "
                            "or G), not '%s' '%s'\n", argv[2], argc > 3 ? argv[3] : "");
        MPI_Finalize();
        return 2;
    }
    int opt_iters = argc > 4 ? atoi(argv[4]) : 0, opt_warm = argc > 5 ? atoi(argv[5]) : -1;
    double mintime = argc > 6 ? atof(argv[6]) : 0;
    int each = argc > 7 && !strcmp(argv[7], "barrier");
    int bytes8 = argc > 8 && !strcmp(argv[8], "uint8");
    if ((argc > 7 && !each && strcmp(argv[7], "loop")) || (argc > 8 && !bytes8 && strcmp(argv[8], "float32")) ||
        (each && mintime > 0)) {
        if (me == 0)
            fprintf(stderr, "mpi_coll: TIMING is loop or barrier (barrier without MINTIME), TYPE float32 "
                            "or uint8\n");
        MPI_Finalize();
        return 2;
    }
    MPI_Datatype dt = bytes8 ? MPI_UINT8_T : MPI_FLOAT;
    size_t ts = bytes8 ? 1 : 4;
    int whole = (k >= 3 && k <= 7) || k >= 9, reduces = k <= 1 || k == 4;
    int rooted = k == 1 || k == 2 || k == 6 || k == 7 || k == 9 || k == 10;
    /* nccl-tests' bus bandwidth factors, as in cadre-perf */
    double factor = k == 0 ? 2.0 * (np - 1) / np : k == 1 || k == 2 ? 1 : k == 8 ? 0 : (double)(np - 1) / np;
    /* the v-variants' free elements: np + 1 */
    size_t bufb = maxb + 4 * ((size_t)np + 2);
    float *s = malloc(bufb), *r = malloc(bufb);
    int *vc = malloc(2 * (size_t)np * sizeof *vc), *vd = vc + np;
    memset(r, 0, bufb);
    for (size_t i = 0; i < bufb / 4; i++)
        s[i] = bytes8 ? 0 : (float)(i % 8) - 3;
    if (me == 0) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        MPI_Get_library_version(lib, &len);
        lib[strcspn(lib, "\n")] = '\0';
        printf("# mpi_coll %s: %d ranks, %s%s, out-of-place, %s; time: %s\n", mode, np,
               bytes8 ? "uint8" : "float32", reduces ? " sum" : "", lib,
               each ? "mean of one call on each rank, a barrier after each call, averaged over the ranks"
                    : "mean of one call, calls back to back, largest over the ranks");
        printf("# %10s %12s %8s %6s %6s %10s %9s %9s %8s\n", "size", "count", "type", "redop",
               "root", "time", "algbw", "busbw", "#wrong");
        printf("# %10s %12s %8s %6s %6s %10s %9s %9s %8s\n", "(B)", "(elements)", "", "", "", "(us)",
               "(GB/s)", "(GB/s)", "");
    }
    for (size_t size = k == 8 ? 0 : minb;; size = size * 2 > maxb ? maxb : size * 2) {
        size_t count = k == 8 ? 0 : whole ? size / ts / (size_t)np : size / ts;
        size_t bytes = whole ? count * ts * (size_t)np : count * ts;
        if (k >= 9)
            bytes = layout(count, np, k == 12 ? me : 0, vc, vd) * ts;
        int c = (int)count, iters = opt_iters > 0 ? opt_iters : mintime > 0 ? 1 : iters_for(bytes);
        int warm = opt_warm >= 0 ? opt_warm : iters / 10 + 1;
        double t0 = 0, t, sum = 0;
    again:
        for (int it = mintime > 0 && t0 > 0 ? 0 : -warm; it < iters; it++) {
            if (it == 0) {
                MPI_Barrier(MPI_COMM_WORLD);
                t0 = MPI_Wtime();
            }
            double t1 = MPI_Wtime();
            switch (k) {
            case 0: MPI_Allreduce(s, r, c, dt, MPI_SUM, MPI_COMM_WORLD); break;
            case 1: MPI_Reduce(s, r, c, dt, MPI_SUM, 0, MPI_COMM_WORLD); break;
            case 2: MPI_Bcast(r, c, dt, 0, MPI_COMM_WORLD); break;
            case 3: MPI_Allgather(s, c, dt, r, c, dt, MPI_COMM_WORLD); break;
            case 4: MPI_Reduce_scatter_block(s, r, c, dt, MPI_SUM, MPI_COMM_WORLD); break;
            case 5: MPI_Alltoall(s, c, dt, r, c, dt, MPI_COMM_WORLD); break;
            case 6: MPI_Gather(s, c, dt, r, c, dt, 0, MPI_COMM_WORLD); break;
            case 7: MPI_Scatter(s, c, dt, r, c, dt, 0, MPI_COMM_WORLD); break;
            case 8: MPI_Barrier(MPI_COMM_WORLD); break;
            case 9: MPI_Gatherv(s, vc[me], dt, r, vc, vd, dt, 0, MPI_COMM_WORLD); break;
            case 10: MPI_Scatterv(s, vc, vd, dt, r, vc[me], dt, 0, MPI_COMM_WORLD); break;
            case 11: MPI_Allgatherv(s, vc[me], dt, r, vc, vd, dt, MPI_COMM_WORLD); break;
            case 12: MPI_Alltoallv(s, vc, vd, dt, r, vc, vd, dt, MPI_COMM_WORLD); break;
            }
            if (each) {
                if (it >= 0)
                    sum += MPI_Wtime() - t1;
                MPI_Barrier(MPI_COMM_WORLD);
            }
        }
        t = MPI_Wtime() - t0;
        double iter = t;
        if (each) {
            double both[2] = {sum, iter};
            MPI_Allreduce(MPI_IN_PLACE, both, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            t = both[0] / np;
            iter = both[1] / np;
        } else {
            MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        }
        if (mintime > 0 && t < mintime && iters < (1 << 30)) {
            double want = t > 0 ? iters * mintime * 1.2 / t : iters * 64.0;
            if (want > iters * 64.0)
                want = iters * 64.0;
            iters = want > (double)(1 << 30) ? 1 << 30 : want > 2.0 * iters ? (int)want : 2 * iters;
            goto again;
        }
        t /= iters;
        if (me == 0) {
            double algbw = t > 0 ? (double)bytes / t / 1e9 : 0;
            printf("  %10zu %12zu %8s %6s %6d %10.3f %9.2f %9.2f %8s\n", bytes, count,
                   k == 8 ? "none" : bytes8 ? "uint8" : "float32", reduces ? "sum" : "none", rooted ? 0 : -1, t * 1e6,
                   algbw, algbw * factor, "N/A");
            if (each)
                printf("# iteration  size %zu  out-of-place %.3f  us: the call and the barrier after it, "
                       "mean over the ranks\n", bytes, iter / iters * 1e6);
            fflush(stdout);
        }
        if (k == 8 || size >= maxb)
            break;
    }
    free(s);
    free(r);
    free(vc);
    MPI_Finalize();
    return 0;
}
