/*
 * tcp_pingpong - the reference the TCP transport is measured against: a plain
 * blocking-socket ping-pong over loopback between two processes (fork), one
 * connection, TCP_NODELAY, sizes 8 B (or -b) .. 4 MiB (or -m). Prints one-way latency (half
 * the round trip) in microseconds and bandwidth (size / one-way time) in GB/s.
 *
 *   cc -O2 -o tcp_pingpong bench/tcp_pingpong.c     (or: make -C tests bench/tcp_pingpong)
 *   ./tcp_pingpong [-p] [-q] [-b MINBYTES] [-m MAXBYTES] [-t SECONDS_PER_SIZE]
 *
 * -p busy-polls instead of blocking (MSG_DONTWAIT calls in a loop), as a
 *    progress engine that spins does: the best case for plain sockets.
 * -q runs a few iterations per size only (a smoke test for make check).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sock_io.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int spin_flag; /* MSG_DONTWAIT with -p */

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static void write_all(int fd, const char *p, size_t n)
{
    if (sock_send_all(fd, p, n, spin_flag))
        die("send");
}

static void read_all(int fd, char *p, size_t n)
{
    if (sock_recv_all(fd, p, n, spin_flag) == 0)
        return;
    if (errno)
        die("recv");
    fprintf(stderr, "tcp_pingpong: peer closed the connection\n");
    exit(1);
}

/* Iterations for a size: aim at `secs` seconds of traffic from a rough guess
 * (20 us per round trip plus 4 GB/s), at least 10, at most 20000. */
static long iters_for(size_t size, double secs, int quick)
{
    if (quick)
        return 5;
    double rt = 20e-6 + 2.0 * (double)size / 4e9;
    long n = (long)(secs / rt);
    return n < 10 ? 10 : n > 20000 ? 20000 : n;
}

static void nodelay(int fd)
{
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one))
        die("TCP_NODELAY");
}

int main(int argc, char **argv)
{
    size_t minsize = 8, maxsize = 4u << 20;
    double secs = 0.3;
    int quick = 0, opt;
    while ((opt = getopt(argc, argv, "pqb:m:t:")) != -1) {
        switch (opt) {
        case 'p': spin_flag = MSG_DONTWAIT; break;
        case 'q': quick = 1; break;
        case 'b': minsize = strtoul(optarg, NULL, 0); break;
        case 'm': maxsize = strtoul(optarg, NULL, 0); break;
        case 't': secs = atof(optarg); break;
        default:
            fprintf(stderr, "usage: %s [-p] [-q] [-b MINBYTES] [-m MAXBYTES] [-t SECONDS_PER_SIZE]\n", argv[0]);
            return 2;
        }
    }

    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0)
        die("socket");
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) || listen(lfd, 1) ||
        getsockname(lfd, (struct sockaddr *)&sa, &sl))
        die("listen");

    if (minsize < 1 || minsize > maxsize) {
        fprintf(stderr, "tcp_pingpong: -b must be at least 1 and at most -m\n");
        return 2;
    }
    char *buf = malloc(maxsize);
    if (!buf)
        die("malloc");
    memset(buf, 0x5a, maxsize);

    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) { /* the echo side */
        close(lfd);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa))
            die("connect");
        nodelay(fd);
        for (size_t size = minsize; size <= maxsize; size *= 2) {
            long n = iters_for(size, secs, quick) + (quick ? 1 : 10);
            for (long i = 0; i < n; i++) {
                read_all(fd, buf, size);
                write_all(fd, buf, size);
            }
        }
        close(fd);
        _exit(0);
    }
    int fd = accept(lfd, NULL, NULL);
    if (fd < 0)
        die("accept");
    close(lfd);
    nodelay(fd);

    printf("# plain %s TCP ping-pong over loopback (one connection, TCP_NODELAY)\n",
           spin_flag ? "busy-polling" : "blocking");
    printf("%10s %8s %12s %10s\n", "bytes", "iters", "latency_us", "GB/s");
    for (size_t size = minsize; size <= maxsize; size *= 2) {
        long n = iters_for(size, secs, quick), warm = quick ? 1 : 10;
        double t0 = 0;
        for (long i = 0; i < n + warm; i++) {
            if (i == warm)
                t0 = now();
            write_all(fd, buf, size);
            read_all(fd, buf, size);
        }
        double oneway = (now() - t0) / (2.0 * (double)n);
        printf("%10zu %8ld %12.2f %10.3f\n", size, n, oneway * 1e6, (double)size / oneway / 1e9);
        fflush(stdout);
    }
    close(fd);
    free(buf);
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "tcp_pingpong: the echo process failed\n");
        return 1;
    }
    return 0;
}
