/* The rendezvous' wire helpers: the keyed hash of the handshake and
 * reads/writes with a deadline on nonblocking sockets. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap_rdv.h"

/* SipHash-2-4 (Aumasson and Bernstein): a keyed hash made for short inputs,
 * 128-bit key; forging a proof without the key means guessing 2 x 64 bits. */
#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                                   \
    do {                                                                                           \
        v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32);                                  \
        v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                                                     \
        v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                                                     \
        v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32);                                  \
    } while (0)

static uint64_t siphash(const uint64_t k[2], const uint8_t *in, size_t len)
{
    uint64_t v0 = 0x736f6d6570736575ull ^ k[0], v1 = 0x646f72616e646f6dull ^ k[1];
    uint64_t v2 = 0x6c7967656e657261ull ^ k[0], v3 = 0x7465646279746573ull ^ k[1];
    uint64_t b = (uint64_t)len << 56;
    const uint8_t *end = in + len - (len % 8);
    for (; in != end; in += 8) {
        uint64_t m = 0;
        for (int i = 7; i >= 0; i--)
            m = m << 8 | in[i];
        v3 ^= m;
        SIPROUND;
        SIPROUND;
        v0 ^= m;
    }
    for (int i = (int)(len & 7) - 1; i >= 0; i--)
        b |= (uint64_t)in[i] << (8 * i);
    v3 ^= b;
    SIPROUND;
    SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

void cadre__rdv_key(const char *secret, uint64_t key[2])
{
    static const uint64_t fixed[2][2] = {{0x6361647265726476ull, 0x6b65792d6c616e31ull},
                                         {0x6361647265726476ull, 0x6b65792d6c616e32ull}};
    for (int i = 0; i < 2; i++)
        key[i] = siphash(fixed[i], (const uint8_t *)secret, strlen(secret));
}

void cadre__rdv_mac(const uint64_t key[2], char tag, const void *a, size_t alen, const void *b,
                    size_t blen, uint8_t proof[RDV_PROOF])
{
    uint8_t buf[2 + 2 * sizeof(struct rdv_hello)];
    size_t n = 0;
    buf[n++] = (uint8_t)tag;
    n++; /* the lane */
    if (alen > sizeof buf - n)
        alen = sizeof buf - n;
    memcpy(buf + n, a, alen);
    n += alen;
    if (blen > sizeof buf - n)
        blen = sizeof buf - n;
    memcpy(buf + n, b, blen);
    n += blen;
    for (int lane = 0; lane < 2; lane++) {
        buf[1] = (uint8_t)lane;
        uint64_t h = siphash(key, buf, n);
        for (int i = 0; i < 8; i++)
            proof[8 * lane + i] = (uint8_t)(h >> (8 * i));
    }
}

/* In constant time: a wrong proof says nothing about how much was right. */
int cadre__rdv_equal(const uint8_t *a, const uint8_t *b, size_t n)
{
    uint8_t d = 0;
    for (size_t i = 0; i < n; i++)
        d |= a[i] ^ b[i];
    return d == 0;
}

double cadre__rdv_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int wait_fd(int fd, short ev, double deadline)
{
    for (;;) {
        int ms = -1;
        if (isfinite(deadline)) {
            double left = deadline - cadre__rdv_now();
            if (left <= 0) {
                errno = ETIMEDOUT;
                return -1;
            }
            ms = left > 1e6 ? 1000000000 : (int)(left * 1000) + 1;
        }
        struct pollfd p = {.fd = fd, .events = ev};
        int n = poll(&p, 1, ms);
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return -1;
    }
}

int cadre__rdv_read(int fd, void *buf, size_t len, double deadline)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = recv(fd, (char *)buf + got, len - got, MSG_DONTWAIT);
        if (n > 0) {
            got += (size_t)n;
            continue;
        }
        if (n == 0) {
            errno = ECONNRESET;
            return -1;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -1;
        if (wait_fd(fd, POLLIN, deadline) != 0)
            return -1;
    }
    return 0;
}

int cadre__rdv_write(int fd, const void *buf, size_t len, double deadline)
{
    size_t put = 0;
    while (put < len) {
        ssize_t n = send(fd, (const char *)buf + put, len - put, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
            put += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return -1;
        if (wait_fd(fd, POLLOUT, deadline) != 0)
            return -1;
    }
    return 0;
}

int cadre__rdv_send(int fd, uint32_t type, const void *payload, size_t len, double deadline)
{
    uint32_t hdr[2] = {htonl(type), htonl((uint32_t)len)};
    if (cadre__rdv_write(fd, hdr, sizeof hdr, deadline) != 0)
        return -1;
    return len ? cadre__rdv_write(fd, payload, len, deadline) : 0;
}

int cadre__rdv_recv(int fd, uint32_t *type, void **payload, size_t *len, size_t max,
                    double deadline)
{
    uint32_t hdr[2];
    if (cadre__rdv_read(fd, hdr, sizeof hdr, deadline) != 0)
        return -1;
    size_t n = ntohl(hdr[1]);
    if (n > max) {
        errno = EPROTO;
        return -1;
    }
    void *p = NULL;
    if (n) {
        p = malloc(n + 1); /* + 1: text payloads get a NUL */
        if (!p)
            return -1;
        if (cadre__rdv_read(fd, p, n, deadline) != 0) {
            int e = errno;
            free(p);
            errno = e;
            return -1;
        }
        ((char *)p)[n] = '\0';
    }
    *type = ntohl(hdr[0]);
    *payload = p;
    *len = n;
    return 0;
}
