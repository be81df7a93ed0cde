/*
 * tcp_alternate - cadre's TCP ping-pong and a plain-socket ping-pong between
 * the same two processes, in short alternated blocks, so that both are
 * measured in the same milliseconds.
 *
 * This machine has episodes of a few seconds in which every large socket copy
 * runs 2-4x slower (bench/HISTORY.md, notes of 2026-11-24, fifth session): a
 * program measured in one such episode and its reference in the next second
 * differ by the episode, not by the programs. Here each round of a size runs a
 * block of cadre_send/cadre_recv round trips, a block over one plain blocking
 * TCP connection between the same two ranks (TCP_NODELAY, recv/send until the
 * whole message moved: bench/tcp_pingpong.c's loop) and a block over the same
 * connection busy-polling (MSG_DONTWAIT), in an order that rotates from round
 * to round; a block lasts a few milliseconds.
 *
 *   CADRE_TRANSPORT=tcp cadrerun -n 2 --bind-to core ./tcp_alternate [-q] [-b MIN] [-m MAX]
 *                                                        (sizes in bytes, or with K, M, G)
 *                                                        [-r ROUNDS] [-t SECONDS_PER_BLOCK]
 *
 * Prints a markdown table: per size the median one-way latency (half the
 * round trip, us) of each over the rounds, cadre's median over the blocking
 * socket's, and the rounds in which cadre took at most 1.1x the blocking
 * socket's time of the same round. -q: a few round trips and 2 rounds (a
 * smoke test). Every message is checked: the receiver finds the pattern the
 * sender wrote (the round trip's number in the first and the last byte).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cadre.h>

#include "sock_io.h"

enum { M_CADRE, M_BLOCK, M_SPIN, NMETHODS };
static const char *const method_name[NMETHODS] = {"cadre tcp", "socket, blocking", "socket, busy-polling"};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void fail(const char *what, const char *detail)
{
    fprintf(stderr, "tcp_alternate: %s: %s\n", what, detail);
    cadre_abort(CADRE_COMM_WORLD, 1);
    exit(1);
}

static void check(int rc, const char *what)
{
    if (rc != CADRE_SUCCESS)
        fail(what, cadre_last_error());
}

static void sock_send(int fd, const char *p, size_t n, int flags)
{
    if (sock_send_all(fd, p, n, flags))
        fail("send", strerror(errno));
}

static void sock_recv(int fd, char *p, size_t n, int flags)
{
    if (sock_recv_all(fd, p, n, flags))
        fail("recv", errno ? strerror(errno) : "the peer closed the connection");
}

/* One plain TCP connection over loopback: rank 0 listens on a port the
 * kernel picks and sends its number to rank 1 through cadre. */
static int connect_pair(int rank)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    int port = 0, fd;
    if (rank == 0) {
        int lfd = socket(AF_INET, SOCK_STREAM, 0);
        if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) || listen(lfd, 1) ||
            getsockname(lfd, (struct sockaddr *)&sa, &sl))
            fail("listen", strerror(errno));
        port = ntohs(sa.sin_port);
        check(cadre_send(&port, 1, CADRE_INT32, 1, 1, CADRE_COMM_WORLD), "cadre_send");
        fd = accept(lfd, NULL, NULL);
        if (fd < 0)
            fail("accept", strerror(errno));
        close(lfd);
    } else {
        check(cadre_recv(&port, 1, CADRE_INT32, 0, 1, CADRE_COMM_WORLD, NULL), "cadre_recv");
        sa.sin_port = htons((uint16_t)port);
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa))
            fail("connect", strerror(errno));
    }
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one))
        fail("TCP_NODELAY", strerror(errno));
    return fd;
}

/* The round trip's mark in the first and the last byte of a message (one
 * byte: the last's mark only). */
static void mark(char *buf, size_t size, long i)
{
    buf[0] = (char)(i * 7 + 1);
    buf[size - 1] = (char)(i * 13 + 5);
}

static void expect(const char *buf, size_t size, long i, int m)
{
    if ((size > 1 && buf[0] != (char)(i * 7 + 1)) || buf[size - 1] != (char)(i * 13 + 5)) {
        char what[96];
        snprintf(what, sizeof what, "%s, %zu bytes, round trip %ld", method_name[m], size, i);
        fail(what, "the message arrived wrong");
    }
}

/* n timed round trips (after one untimed) of one method; rank 0 starts them.
 * Returns the one-way time in seconds on rank 0. */
static double block(int m, int rank, int fd, char *buf, size_t size, long n)
{
    int flags = m == M_SPIN ? MSG_DONTWAIT : 0;
    double t0 = 0;
    for (long i = -1; i < n; i++) {
        if (i == 0)
            t0 = now();
        if (rank == 0) {
            mark(buf, size, i);
            if (m == M_CADRE) {
                check(cadre_send(buf, size, CADRE_UINT8, 1, 0, CADRE_COMM_WORLD), "cadre_send");
                check(cadre_recv(buf, size, CADRE_UINT8, 1, 0, CADRE_COMM_WORLD, NULL), "cadre_recv");
            } else {
                sock_send(fd, buf, size, flags);
                sock_recv(fd, buf, size, flags);
            }
            expect(buf, size, i + 1, m);
        } else {
            if (m == M_CADRE)
                check(cadre_recv(buf, size, CADRE_UINT8, 0, 0, CADRE_COMM_WORLD, NULL), "cadre_recv");
            else
                sock_recv(fd, buf, size, flags);
            expect(buf, size, i, m);
            mark(buf, size, i + 1);
            if (m == M_CADRE)
                check(cadre_send(buf, size, CADRE_UINT8, 0, 0, CADRE_COMM_WORLD), "cadre_send");
            else
                sock_send(fd, buf, size, flags);
        }
    }
    return (now() - t0) / (2.0 * (double)n);
}

/* A size with an optional K, M or G (binary) suffix. */
static size_t parse_size(const char *s)
{
    char *end;
    size_t v = strtoul(s, &end, 0);
    switch (*end) {
    case 'K': case 'k': return v << 10;
    case 'M': case 'm': return v << 20;
    case 'G': case 'g': return v << 30;
    default: return v;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
    double s[1000];
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    check(cadre_init(&argc, &argv), "cadre_init");
    int rank, size;
    check(cadre_comm_rank(CADRE_COMM_WORLD, &rank), "cadre_comm_rank");
    check(cadre_comm_size(CADRE_COMM_WORLD, &size), "cadre_comm_size");
    size_t minsize = 8, maxsize = 4u << 20;
    int rounds = 15, quick = 0, opt;
    double secs = 0.005;
    while ((opt = getopt(argc, argv, "qb:m:r:t:")) != -1) {
        switch (opt) {
        case 'q': quick = 1; break;
        case 'b': minsize = parse_size(optarg); break;
        case 'm': maxsize = parse_size(optarg); break;
        case 'r': rounds = atoi(optarg); break;
        case 't': secs = atof(optarg); break;
        default:
            if (rank == 0)
                fprintf(stderr, "usage: %s [-q] [-b MIN] [-m MAX] [-r ROUNDS] [-t SECONDS_PER_BLOCK]\n",
                        argv[0]);
            cadre_finalize();
            return 2;
        }
    }
    if (size != 2 || minsize < 1 || minsize > maxsize || rounds < 1 || rounds > 1000 || secs <= 0) {
        if (rank == 0)
            fprintf(stderr, "tcp_alternate: needs 2 ranks, 1 <= -b <= -m, 1 <= -r <= 1000, -t > 0\n");
        cadre_finalize();
        return 2;
    }
    if (quick)
        rounds = 2;
    int fd = connect_pair(rank);
    char *buf = malloc(maxsize);
    if (!buf)
        fail("malloc", strerror(errno));
    memset(buf, 0x5a, maxsize);

    if (rank == 0) {
        const char *tr = getenv("CADRE_TRANSPORT");
        printf("Alternated blocks in one job (%d rounds of about %.0f ms each; CADRE_TRANSPORT=%s).\n"
               "One-way latency, us: medians over the rounds; \"within 10%%\" counts the rounds in\n"
               "which cadre took at most 1.1x the blocking socket's time of the same round.\n\n",
               rounds, secs * 1e3, tr ? tr : "(unset)");
        printf("| size (B) | %s | %s | %s | cadre / blocking | rounds within 10%% |\n",
               method_name[M_CADRE], method_name[M_BLOCK], method_name[M_SPIN]);
        printf("|---:|---:|---:|---:|---:|---:|\n");
    }
    double t[NMETHODS][1000];
    for (size_t sz = minsize; sz <= maxsize; sz *= 2) {
        /* Round trips per block from a guess of 20 us plus 4 GB/s per
         * round trip, the same on both ranks. */
        double rt = 20e-6 + 2.0 * (double)sz / 4e9;
        long n = quick ? 3 : (long)(secs / rt);
        n = n < 3 ? 3 : n > 5000 ? 5000 : n;
        int within = 0;
        for (int r = 0; r < rounds; r++) {
            check(cadre_barrier(CADRE_COMM_WORLD), "cadre_barrier");
            for (int k = 0; k < NMETHODS; k++) {
                int m = (r + k) % NMETHODS;
                t[m][r] = block(m, rank, fd, buf, sz, n) * 1e6;
            }
            within += t[M_CADRE][r] <= 1.1 * t[M_BLOCK][r];
        }
        if (rank == 0) {
            double mc = median(t[M_CADRE], rounds), mb = median(t[M_BLOCK], rounds);
            printf("| %zu | %.2f | %.2f | %.2f | %.2f | %d of %d |\n", sz, mc, mb,
                   median(t[M_SPIN], rounds), mc / mb, within, rounds);
            fflush(stdout);
        }
    }
    close(fd);
    free(buf);
    check(cadre_finalize(), "cadre_finalize");
    return 0;
}
