/* pmix_junk.h - what a stranger or a confused process of the job may send to
 * cadrerun's PMIx server port (issue 40): garbage, and connect messages of
 * the kind a libpmix 4.2.2 client sends, forged. Shared by launch_probe's
 * `pmixjunk` action (a process of the job) and the launcher suite (other
 * processes, another user). Header-only: static functions. */
#ifndef CADRE_TEST_PMIX_JUNK_H
#define CADRE_TEST_PMIX_JUNK_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The bytes that ended cadrerun with SIGSEGV in libpmix 4.2.2: a header for
 * 6 bytes, then a security module "&" and a credential length 0xb34e107f. */
static const unsigned char pmix_junk_crash[24] = {0x43, 0x54, 0x44, 0x43, 0x01, 0x00, 0x00, 0x00,
                                                  0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                                  0x26, 0x00, 0xb3, 0x4e, 0x10, 0x7f, 0x21, 0x46};

/* The port of a PMIX_SERVER_URI* value ("name;tcp4://127.0.0.1:PORT"), or -1. */
static int pmix_junk_port(const char *uri)
{
    const char *c = uri ? strrchr(uri, ':') : NULL;
    int port = c ? atoi(c + 1) : 0;
    return port > 0 && port < 65536 ? port : -1;
}

static size_t pmix_junk_put(unsigned char *m, size_t at, const void *p, size_t len)
{
    memcpy(m + at, p, len);
    return at + len;
}

/* A 4.2.2 client's connect message (header included) for nspace/rank, with
 * credential length credlen (8 bytes follow whatever it says). */
static size_t pmix_junk_hello(unsigned char *m, const char *nspace, uint32_t rank,
                              uint32_t credlen)
{
    size_t at = 16;
    uint32_t be = htonl(credlen), zero8[2] = {0, 0}, rk = htonl(rank);
    unsigned char client = 0, buftype = 1;
    at = pmix_junk_put(m, at, "native", 7);
    at = pmix_junk_put(m, at, &be, 4);
    at = pmix_junk_put(m, at, zero8, 8);
    at = pmix_junk_put(m, at, &client, 1);
    at = pmix_junk_put(m, at, nspace, strlen(nspace) + 1);
    at = pmix_junk_put(m, at, &rk, 4);
    at = pmix_junk_put(m, at, "4.2.2", 6);
    at = pmix_junk_put(m, at, "v41", 4);
    at = pmix_junk_put(m, at, &buftype, 1);
    at = pmix_junk_put(m, at, "ds21", 5);
    int32_t pindex = -1;
    uint32_t tag = UINT32_MAX, nbytes = (uint32_t)(at - 16), pad = 0;
    memcpy(m, &pindex, 4);
    memcpy(m + 4, &tag, 4);
    memcpy(m + 8, &nbytes, 4);
    memcpy(m + 12, &pad, 4);
    return at;
}

#define PMIX_JUNK_COUNT 7

/* The k-th message (0 <= k < PMIX_JUNK_COUNT) into m (1024 bytes); its name
 * in *what. nspace and rank make the forged connect messages: `rank` should
 * be one this sender is not. */
static size_t pmix_junk_make(int k, const char *nspace, uint32_t rank, unsigned char *m,
                             const char **what)
{
    switch (k) {
    case 0:
        *what = "the 24 bytes";
        memcpy(m, pmix_junk_crash, sizeof pmix_junk_crash);
        return sizeof pmix_junk_crash;
    case 1: {
        *what = "random bytes";
        unsigned x = 40u;
        for (int i = 0; i < 512; i++) {
            x = x * 1103515245u + 12345u;
            m[i] = (unsigned char)(x >> 16);
        }
        return 512;
    }
    case 2:
        *what = "an HTTP request";
        snprintf((char *)m, 1024, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
        return strlen((char *)m);
    case 3:
        *what = "a truncated header";
        memcpy(m, pmix_junk_crash, 10);
        return 10;
    case 4: {
        *what = "a header announcing 4 GiB";
        memcpy(m, pmix_junk_crash, 16);
        uint32_t big = 0xfffffff0u;
        memcpy(m + 8, &big, 4);
        return 16;
    }
    case 5: {
        *what = "a connect message whose credential is longer than it";
        return pmix_junk_hello(m, nspace, rank, 0x7fffff00u);
    }
    default:
        *what = "a well-formed connect message for another rank";
        return pmix_junk_hello(m, nspace, rank, 8);
    }
}

/* Sends m to 127.0.0.1:port, ends its side, and waits up to limit_ms for the
 * server to close the connection. 1: closed (refused); 0: still open;
 * -1: no connection. */
static int pmix_junk_send(int port, const unsigned char *m, size_t len, int limit_ms)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
        close(s);
        return -1;
    }
    for (size_t off = 0; off < len;) {
        ssize_t w = send(s, m + off, len - off, MSG_NOSIGNAL);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    shutdown(s, SHUT_WR);
    int closed = 0;
    for (int waited = 0; waited < limit_ms && !closed; waited += 100) {
        struct pollfd p = {s, POLLIN, 0};
        if (poll(&p, 1, 100) > 0) {
            char junk[256];
            ssize_t n = recv(s, junk, sizeof junk, MSG_DONTWAIT);
            closed = n == 0 || (n < 0 && errno != EAGAIN);
        }
    }
    close(s);
    return closed;
}

#endif
