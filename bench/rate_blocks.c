/* The 8-byte message rate block by block, one pair: rank 0 sends windows of
 * 64 isends of 8 bytes into rank 1's 64 buffers and waits for a 1-byte
 * acknowledgment per window (osu_mbw_mr's loop, as cadre-perf stream), and
 * prints the rate of every block of PER windows (millions of messages per
 * second), one block per line. Built twice by bench/rate_blocks.sh: against
 * cadre, and with -DUSE_MPI against an MPI library. Turns of one rate hide
 * how this machine's speed moves from one part of a second to the next; the
 * blocks show it, and the script's alternated launches let both libraries
 * meet the same moves.
 *   rate_blocks [BLOCKS [PER]]   (defaults 40 and 1000) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef USE_MPI
#include <mpi.h>
#define REQ MPI_Request
#define INIT() MPI_Init(&argc, &argv)
#define RANK(me) MPI_Comm_rank(MPI_COMM_WORLD, me)
#define SIZE(np) MPI_Comm_size(MPI_COMM_WORLD, np)
#define ISEND(b, r) MPI_Isend(b, 8, MPI_BYTE, 1, 2, MPI_COMM_WORLD, r)
#define IRECV(b, r) MPI_Irecv(b, 8, MPI_BYTE, 0, 2, MPI_COMM_WORLD, r)
#define WAITALL(n, r) MPI_Waitall(n, r, MPI_STATUSES_IGNORE)
#define ACK_RECV(a) MPI_Recv(a, 1, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
#define ACK_SEND(a) MPI_Send(a, 1, MPI_BYTE, 0, 3, MPI_COMM_WORLD)
#define FINALIZE() MPI_Finalize()
#define OK 0
#else
#include <cadre.h>
#define REQ cadre_request_t
#define INIT() cadre_init(&argc, &argv)
#define RANK(me) cadre_comm_rank(CADRE_COMM_WORLD, me)
#define SIZE(np) cadre_comm_size(CADRE_COMM_WORLD, np)
#define ISEND(b, r) cadre_isend(b, 8, CADRE_UINT8, 1, 2, CADRE_COMM_WORLD, r)
#define IRECV(b, r) cadre_irecv(b, 8, CADRE_UINT8, 0, 2, CADRE_COMM_WORLD, r)
#define WAITALL(n, r) cadre_waitall(n, r, NULL)
#define ACK_RECV(a) cadre_recv(a, 1, CADRE_UINT8, 1, 3, CADRE_COMM_WORLD, CADRE_STATUS_IGNORE)
#define ACK_SEND(a) cadre_send(a, 1, CADRE_UINT8, 0, 3, CADRE_COMM_WORLD)
#define FINALIZE() cadre_finalize()
#define OK CADRE_SUCCESS
#endif

enum { WIN = 64 };

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void check(int rc, const char *what)
{
    if (rc != OK) {
        fprintf(stderr, "rate_blocks: %s failed (%d)\n", what, rc);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    check(INIT(), "init");
    int me, np;
    check(RANK(&me), "rank");
    check(SIZE(&np), "size");
    int blocks = argc > 1 ? atoi(argv[1]) : 40, per = argc > 2 ? atoi(argv[2]) : 1000;
    if (np != 2 || blocks < 1 || per < 1) {
        if (me == 0)
            fprintf(stderr, "usage: (2 ranks) rate_blocks [BLOCKS>0 [PER>0]]\n");
        return 2;
    }
    REQ reqs[WIN];
    static unsigned char buf[WIN * 8];
    char ack = 0;
    double *rate = malloc((size_t)blocks * sizeof *rate);
    if (!rate)
        return 1;
    for (int b = 0; b < blocks; b++) {
        double t0 = now();
        for (int it = 0; it < per; it++) {
            if (me == 0) {
                for (int k = 0; k < WIN; k++)
                    check(ISEND(buf + 8 * k, &reqs[k]), "isend");
                check(WAITALL(WIN, reqs), "waitall");
                check(ACK_RECV(&ack), "recv");
            } else {
                for (int k = 0; k < WIN; k++)
                    check(IRECV(buf + 8 * k, &reqs[k]), "irecv");
                check(WAITALL(WIN, reqs), "waitall");
                check(ACK_SEND(&ack), "send");
            }
        }
        rate[b] = (double)per * WIN / (now() - t0) / 1e6;
    }
    if (me == 0)
        for (int b = 0; b < blocks; b++)
            printf("%.2f\n", rate[b]);
    free(rate);
    check(FINALIZE(), "finalize");
    return 0;
}
