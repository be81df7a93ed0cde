/*
 * tcp_intruder - who may connect to a rank's TCP listener: only processes
 * that present the job's secret. Run with CADRE_TRANSPORT=tcp and >= 2 ranks.
 *
 * Every rank finds its own listening port (the AF_INET listening sockets
 * among its descriptors: no internal interface needed) and the ranks
 * allgather them. Rank 0 then plays intruder against every other rank while
 * they wait in a receive (progressing): cadre handshakes with a wrong job
 * secret, claiming no rank and each rank of the job, random garbage, and
 * half a handshake. Each must be closed by the peer, unanswered. Then every rank
 * exchanges messages with every other (eager and rendezvous sizes) and
 * checks them byte for byte, and an allreduce checks the job as a whole.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rank_util.h"
#include "tcp_port.h"

/* The handshake the TCP transport expects (p2p/p2p_tcp.h), spoken here on
 * purpose to play a process that does not know the secret. */
#define TCP_MAGIC 0x43445443u
#define TCP_VERSION 1u
struct hello {
    uint32_t magic, version;
    int32_t from, to;
    uint64_t cookie;
};

static int dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        EXPECT(0, "connect to port %d: %s", port, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* Waits until the peer closes fd (EOF or reset); returns whether it did
 * within `limit` seconds. Whatever the peer sends first (it answers no bad
 * handshake) is counted in *got. */
static int closed_by_peer(int fd, double limit, size_t *got)
{
    double end = ru_now() + limit;
    *got = 0;
    while (ru_now() < end) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0)
            continue;
        char buf[256];
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n == 0 || (n < 0 && errno == ECONNRESET))
            return 1;
        if (n > 0)
            *got += (size_t)n;
    }
    return 0;
}

/* Connections to rank `rank`: a handshake with a wrong secret from no rank
 * of the job, one claiming each rank of the job (some have not connected
 * to `rank` yet: only the secret keeps the claim out), random garbage, and
 * half a handshake followed by EOF. Each must be closed unanswered. */
static void intrude(int rank, int port, int np)
{
    int ncases = 3 + np - 1;
    int *fds = calloc((size_t)ncases, sizeof *fds);
    char (*names)[80] = calloc((size_t)ncases, sizeof *names);
    int claim = 0;
    for (int k = 0; k < ncases; k++) {
        uint64_t wrong;
        if (getrandom(&wrong, sizeof wrong, 0) != sizeof wrong)
            wrong = 0x0123456789abcdefull ^ (uint64_t)getpid() ^ (uint64_t)k;
        struct hello h = {TCP_MAGIC, TCP_VERSION, 1000, rank, wrong};
        unsigned char buf[512];
        size_t len = sizeof h;
        if (k == 0) {
            snprintf(names[k], sizeof names[k], "a handshake with a wrong secret");
        } else if (k == 1) {
            len = sizeof buf;
            if (getrandom(buf, len, 0) != (ssize_t)len)
                memset(buf, 0x5a, len);
            snprintf(names[k], sizeof names[k], "random garbage");
        } else if (k == 2) {
            len = sizeof h / 2;
            snprintf(names[k], sizeof names[k], "half a handshake, then EOF");
        } else {
            if (claim == rank)
                claim++;
            h.from = claim++;
            snprintf(names[k], sizeof names[k], "a handshake claiming rank %d with a wrong secret",
                     h.from);
        }
        if (k != 1)
            memcpy(buf, &h, len);
        fds[k] = dial(port);
        if (fds[k] < 0)
            continue;
        ssize_t w = send(fds[k], buf, len, MSG_NOSIGNAL);
        EXPECT(w == (ssize_t)len, "sending %s to rank %d: %s", names[k], rank, strerror(errno));
        if (k == 2)
            shutdown(fds[k], SHUT_WR);
    }
    for (int k = 0; k < ncases; k++) {
        if (fds[k] < 0)
            continue;
        size_t got;
        int closed = closed_by_peer(fds[k], 20.0, &got);
        EXPECT(closed, "rank %d kept a connection open after %s", rank, names[k]);
        EXPECT(got == 0, "rank %d answered %s with %zu bytes", rank, names[k], got);
        close(fds[k]);
    }
    free(names);
    free(fds);
}

/* Every pair exchanges a small and a large message, both ways. */
static void exchange(int me, int np)
{
    static const size_t sizes[] = {13, 300000};
    for (size_t s = 0; s < 2; s++) {
        size_t n = sizes[s];
        unsigned char *out = malloc(n * (size_t)np), *in = malloc(n * (size_t)np);
        cadre_request_t *rq = calloc(2 * (size_t)np, sizeof *rq);
        int nr = 0;
        for (int p = 0; p < np; p++) {
            if (p == me)
                continue;
            for (size_t i = 0; i < n; i++)
                out[(size_t)p * n + i] = ru_byte(me, p, s, i);
            OK(cadre_irecv(in + (size_t)p * n, n, CADRE_UINT8, p, 5, CADRE_COMM_WORLD, &rq[nr++]));
            OK(cadre_isend(out + (size_t)p * n, n, CADRE_UINT8, p, 5, CADRE_COMM_WORLD, &rq[nr++]));
        }
        OK(cadre_waitall(nr, rq, NULL));
        for (int p = 0; p < np; p++) {
            if (p == me)
                continue;
            size_t bad = 0;
            for (size_t i = 0; i < n; i++)
                bad += in[(size_t)p * n + i] != ru_byte(p, me, s, i);
            EXPECT(bad == 0, "%zu of %zu bytes from rank %d differ", bad, n, p);
        }
        free(rq);
        free(in);
        free(out);
    }
}

int main(int argc, char **argv)
{
    OK(cadre_init(&argc, &argv));
    int me, np;
    OK(cadre_comm_rank(CADRE_COMM_WORLD, &me));
    OK(cadre_comm_size(CADRE_COMM_WORLD, &np));
    ru_rank = me;
    EXPECT(np >= 2, "needs 2 ranks or more");
    int port = my_port();
    int *ports = calloc((size_t)np, sizeof *ports);
    OK(cadre_allgather(&port, ports, 1, CADRE_INT32, CADRE_COMM_WORLD));

    /* Rank 0 intrudes while the others wait for its word, progressing. */
    int go = 0;
    if (me == 0) {
        for (int r = 1; r < np; r++)
            if (ports[r] > 0)
                intrude(r, ports[r], np);
        go = 1;
        for (int r = 1; r < np; r++)
            OK(cadre_send(&go, 1, CADRE_INT32, r, 1, CADRE_COMM_WORLD));
    } else {
        OK(cadre_recv(&go, 1, CADRE_INT32, 0, 1, CADRE_COMM_WORLD, CADRE_STATUS_IGNORE));
        EXPECT(go == 1, "go %d", go);
    }

    exchange(me, np);
    int one = 1, sum = 0;
    OK(cadre_allreduce(&one, &sum, 1, CADRE_INT32, CADRE_SUM, CADRE_COMM_WORLD));
    EXPECT(sum == np, "allreduce gave %d, expected %d", sum, np);
    free(ports);
    OK(cadre_finalize());
    if (ru_failures)
        return 1;
    if (me == 0)
        printf("tcp_intruder: ok (%d ranks)\n", np);
    return 0;
}
