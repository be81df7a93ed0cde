/* The plain-socket ping-pong's transfer loops, shared by bench/tcp_pingpong.c
 * and bench/tcp_alternate.c: a whole message over a stream socket whatever
 * the partial transfers. flags MSG_DONTWAIT busy-polls (EAGAIN is retried at
 * once), 0 blocks. Each returns 0, or -1 with errno set; a peer that closed
 * the connection reads as -1 with errno 0. */
#ifndef CADRE_BENCH_SOCK_IO_H
#define CADRE_BENCH_SOCK_IO_H

#include <errno.h>
#include <stddef.h>
#include <sys/socket.h>

static int sock_send_all(int fd, const char *p, size_t n, int flags)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL | flags);
        if (w < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int sock_recv_all(int fd, char *p, size_t n, int flags)
{
    while (n > 0) {
        ssize_t r = recv(fd, p, n, flags);
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
                continue;
            return -1;
        }
        if (r == 0) {
            errno = 0;
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

#endif
