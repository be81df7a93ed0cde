/* The peer of `cadre-perf sendrecv` and `cadre-perf stream` for MPI
 * libraries: the same loops (ping-pong; windowed isends answered once per
 * window, like osu_latency and osu_bw), the same sizes and iteration counts,
 * the same output columns. Data checking is off in both for timing. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int iters_for(size_t n)
{
    if (n <= 65536)
        return 10000;
    if (n <= (1u << 20))
        return 1000;
    if (n <= (16u << 20))
        return 100;
    return 20;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int me;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    int stream = argc > 1 && !strcmp(argv[1], "stream");
    size_t minb = argc > 2 ? strtoull(argv[2], NULL, 0) : 8;
    size_t maxb = argc > 3 ? strtoull(argv[3], NULL, 0) : (64u << 20);
    int win = 64;
    unsigned char *buf = calloc(stream ? maxb * (size_t)win : maxb, 1);
    MPI_Request reqs[64];
    char ack = 0;
    if (me == 0)
        printf("# mpi %s\n#       size(B)     time(us)  algbw(GB/s)\n", stream ? "stream" : "sendrecv");
    for (size_t n = minb; n <= maxb; n *= 2) {
        int iters = stream ? iters_for(n) / 10 + 1 : iters_for(n);
        int warm = stream ? 2 : iters / 10 + 1;
        double t0 = 0;
        for (int it = -warm; it < iters; it++) {
            if (it == 0)
                t0 = MPI_Wtime();
            if (stream) {
                if (me == 0) {
                    for (int k = 0; k < win; k++)
                        MPI_Isend(buf + n * (size_t)k, (int)n, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &reqs[k]);
                    MPI_Waitall(win, reqs, MPI_STATUSES_IGNORE);
                    MPI_Recv(&ack, 1, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else if (me == 1) {
                    for (int k = 0; k < win; k++)
                        MPI_Irecv(buf + n * (size_t)k, (int)n, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &reqs[k]);
                    MPI_Waitall(win, reqs, MPI_STATUSES_IGNORE);
                    MPI_Send(&ack, 1, MPI_BYTE, 0, 3, MPI_COMM_WORLD);
                }
            } else if (me == 0) {
                MPI_Send(buf, (int)n, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)n, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (me == 1) {
                MPI_Recv(buf, (int)n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, (int)n, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
            }
        }
        double t = (MPI_Wtime() - t0) / iters / (stream ? win : 2);
        if (me == 0)
            printf("  %12zu %12.3f %12.2f\n", n, t * 1e6, (double)n / t / 1e9);
        fflush(stdout);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
