/* The peer of `cadre-perf sendrecv` and `cadre-perf stream` for MPI
 * libraries: the same loops (ping-pong; windowed isends answered once per
 * window, like osu_latency and osu_bw / osu_mbw_mr), the same sizes and
 * iteration counts, the same output columns. Data checking is off in both
 * for timing.
 *   mpirun -np N mpi_pingpong sendrecv|stream [MINB [MAXB [many|one [ITERS]]]]
 * sendrecv: ranks 0 and 1. stream: as cadre-perf's, rank i < N/2 streams to
 * rank i + N/2 (an odd N's last rank idles), each message from its own
 * buffer, into its own buffer (many, osu_mbw_mr) or all into one (one,
 * osu_bw); the time is the largest over the senders, the last column the
 * messages per second summed over the pairs. */
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
    int me, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    int stream = argc > 1 && !strcmp(argv[1], "stream");
    size_t minb = argc > 2 ? strtoull(argv[2], NULL, 0) : 8;
    size_t maxb = argc > 3 ? strtoull(argv[3], NULL, 0) : (64u << 20);
    int one = argc > 4 && !strcmp(argv[4], "one");
    /* ITERS: windows (stream) or round trips per size, as cadre-perf's -n */
    int fixed_iters = argc > 5 ? atoi(argv[5]) : 0;
    int win = 64, pairs = np / 2;
    int sender = me < pairs, peer = -1;
    if (stream)
        peer = me < pairs ? me + pairs : me < 2 * pairs ? me - pairs : -1;
    else
        peer = me == 0 ? 1 : me == 1 ? 0 : -1;
    unsigned char *buf = calloc(stream ? maxb * (size_t)win : maxb, 1);
    MPI_Request reqs[64];
    char ack = 0;
    if (me == 0)
        printf("# mpi %s: %d ranks%s\n#       size(B)     time(us)  algbw(GB/s)  msg/s(summed)\n",
               stream ? "stream" : "sendrecv", np,
               stream ? (one ? ", receives into one buffer" : ", receives into one buffer per message") : "");
    for (size_t n = minb; n <= maxb; n *= 2) {
        int iters = fixed_iters > 0 ? fixed_iters : stream ? iters_for(n) / 10 + 1 : iters_for(n);
        int warm = stream ? 2 : iters / 10 + 1;
        double t0 = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        for (int it = -warm; it < iters && peer >= 0; it++) {
            if (it == 0)
                t0 = MPI_Wtime();
            if (stream) {
                if (sender) {
                    for (int k = 0; k < win; k++)
                        MPI_Isend(buf + n * (size_t)k, (int)n, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &reqs[k]);
                    MPI_Waitall(win, reqs, MPI_STATUSES_IGNORE);
                    MPI_Recv(&ack, 1, MPI_BYTE, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    for (int k = 0; k < win; k++)
                        MPI_Irecv(buf + (one ? 0 : n * (size_t)k), (int)n, MPI_BYTE, peer, 2,
                                  MPI_COMM_WORLD, &reqs[k]);
                    MPI_Waitall(win, reqs, MPI_STATUSES_IGNORE);
                    MPI_Send(&ack, 1, MPI_BYTE, peer, 3, MPI_COMM_WORLD);
                }
            } else if (me == 0) {
                MPI_Send(buf, (int)n, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)n, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(buf, (int)n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, (int)n, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
            }
        }
        double t = peer >= 0 ? (MPI_Wtime() - t0) / iters / (stream ? win : 2) : 0;
        /* sendrecv: rank 0's time; stream: the slowest sender's, and the rates summed. */
        double mine[2] = {me == 0 || (stream && sender) ? t : 0,
                          stream && sender && t > 0 ? 1 / t : me == 0 && t > 0 ? 1 / t : 0};
        double tmax = 0, rate = 0;
        MPI_Reduce(&mine[0], &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(&mine[1], &rate, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        if (me == 0)
            printf("  %12zu %12.3f %12.2f %14.0f\n", n, tmax * 1e6, (double)n / tmax / 1e9, rate);
        fflush(stdout);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
