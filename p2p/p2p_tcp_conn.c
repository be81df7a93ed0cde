/*
 * p2p_tcp_conn.c - where the TCP transport listens and how it connects:
 * the addresses a rank publishes, one listener on each (never the wildcard
 * address), and the outbound connection to a peer through its addresses,
 * its handshake, and the retries when a crowded listener reset or closed
 * it (cadre(7), "Security of the TCP transport"). p2p_tcp.c sends over
 * the connections made here; p2p_tcp_recv.c accepts.
 */
#include "config.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "p2p/p2p_tcp.h"

static struct tcp_state *const tcp = &cadre__p2p_tcp_state;

#define TCP_CONNECT_TIMEOUT 5  /* seconds per address; 30 for the last one */
/* Connects that a listener reset or closed (it was crowded, or we were too
 * slow with our hello) are tried again, with backoff, for up to
 * TCP_RETRY_MAX seconds (CADRE_TIMEOUT when shorter); refused ones (no
 * listener: the peer is gone, or going) only for TCP_REFUSED_RETRY. */
#define TCP_RETRY_MAX 30.0
#define TCP_REFUSED_RETRY 1.0
#define TCP_BACKOFF_FIRST 0.01
#define TCP_BACKOFF_MAX 0.5
enum { RETRY_NO, RETRY_REFUSED, RETRY_RESET };

/* ---- addresses and listeners ------------------------------------------- */

/* IPv4 addresses of the interfaces that are up, loopback last, each once. */
int cadre__p2p_tcp_local_addrs(uint32_t *addr)
{
    struct ifaddrs *ifa = NULL;
    int n = 0;
    if (getifaddrs(&ifa) == 0) {
        for (int loop = 0; loop < 2; loop++)
            for (struct ifaddrs *i = ifa; i && n < TCP_MAX_ADDRS; i = i->ifa_next) {
                if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
                    !(i->ifa_flags & IFF_UP) || !!(i->ifa_flags & IFF_LOOPBACK) != loop)
                    continue;
                uint32_t a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
                int dup = 0;
                for (int k = 0; k < n; k++)
                    dup |= addr[k] == a;
                if (!dup)
                    addr[n++] = a;
            }
        freeifaddrs(ifa);
    }
    if (n == 0)
        addr[n++] = htonl(INADDR_LOOPBACK);
    return n;
}

void cadre__p2p_tcp_close_listeners(void)
{
    for (int i = 0; i < tcp->nlfd; i++)
        close(tcp->lfd[i]);
    tcp->nlfd = 0;
}

/* One listener on each of the n addresses, all on one port (the blob
 * carries one), which the first picks: never on the wildcard address, so
 * that nothing reaches the rank through an interface it does not publish.
 * An address that cannot be bound (gone since getifaddrs) is dropped from
 * addr; a port taken on a later address starts over on another. Returns
 * the port (network order) and the number of addresses kept, or 0 and
 * errno. */
uint16_t cadre__p2p_tcp_listen(uint32_t *addr, int *n, const char **what)
{
    uint32_t want[TCP_MAX_ADDRS];
    int nwant = *n, err = 0;
    memcpy(want, addr, (size_t)nwant * sizeof *want);
    for (int attempt = 0; attempt < 16; attempt++) {
        uint16_t port = 0;
        int kept = 0, again = 0;
        for (int i = 0; i < nwant && !again; i++) {
            struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = port,
                                     .sin_addr.s_addr = want[i]};
            socklen_t sl = sizeof sa;
            int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            if (fd < 0) {
                *what = "socket";
                goto fail;
            }
            /* Accepted sockets inherit the receive buffer, and the window
             * scale their handshake announces follows from it. */
            if (tcp->bufsize)
                setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &tcp->bufsize, sizeof tcp->bufsize);
            if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
                err = errno;
                close(fd);
                if (err == EADDRINUSE && port != 0) {
                    again = 1; /* the first address's port is taken here */
                    continue;
                }
                char ip[INET_ADDRSTRLEN];
                CADRE_INFO(P2P, "tcp: not listening on %s: bind: %s", tcp_ip_str(want[i], ip),
                           strerror(err));
                continue;
            }
            if (listen(fd, SOMAXCONN) != 0 ||
                (port == 0 && getsockname(fd, (struct sockaddr *)&sa, &sl) != 0)) {
                *what = "listen";
                err = errno;
                close(fd);
                goto fail;
            }
            port = sa.sin_port;
            tcp->lfd[tcp->nlfd++] = fd;
            addr[kept++] = want[i];
        }
        if (!again && kept > 0) {
            *n = kept;
            return port;
        }
        cadre__p2p_tcp_close_listeners();
        if (!again)
            break;
    }
    *what = "bind";
fail:
    cadre__p2p_tcp_close_listeners();
    errno = err ? err : errno;
    return 0;
}

/* ---- outbound: connecting ----------------------------------------------- */

static int out_fetch(int peer)
{
    struct tcp_peer *p = &tcp->peers[peer];
    void *data = NULL;
    size_t len = 0;
    if (cadre__bootstrap_get(peer, TCP_KEY, &data, &len) != CADRE_SUCCESS)
        return cadre__p2p_tcp_peer_fail(peer, "no TCP endpoint published by rank %d", peer);
    const struct tcp_blob *b = data;
    if (len < sizeof *b || b->magic != TCP_MAGIC || b->version != TCP_VERSION || b->naddr == 0 ||
        b->naddr > TCP_MAX_ADDRS || len != sizeof *b + b->naddr * sizeof(uint32_t)) {
        free(data);
        return cadre__p2p_tcp_peer_fail(peer, "malformed TCP endpoint of rank %d (%zu bytes)",
                                        peer, len);
    }
    p->addr = malloc(b->naddr * sizeof(uint32_t));
    if (!p->addr) {
        free(data);
        return cadre__error(CADRE_ERR_NOMEM, "tcp: out of memory for rank %d's addresses", peer);
    }
    memcpy(p->addr, b->addr, b->naddr * sizeof(uint32_t));
    p->naddr = (int)b->naddr;
    p->port = b->port;
    free(data);
    return CADRE_SUCCESS;
}

static int out_start_hello(int peer)
{
    struct tcp_peer *p = &tcp->peers[peer];
    struct tcp_hello h = {TCP_MAGIC, TCP_VERSION, tcp->rank, peer, cadre__p2p_info.job_cookie};
    ssize_t n;
    do
        n = send(p->fd, &h, sizeof h, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof h) /* an empty new socket takes 24 bytes or is broken */
        return -1;
    p->state = OUT_HELLO;
    p->ack_got = 0;
    p->deadline = tcp_now() + TCP_HELLO_TIMEOUT;
    return 0;
}

static int retry_kind(int err)
{
    return err == ECONNREFUSED ? RETRY_REFUSED
           : err == ECONNRESET || err == EPIPE ? RETRY_RESET
                                                : RETRY_NO;
}

/* Tries the peer's addresses from addr_idx on until one connects or is
 * connecting. When none is left: tries them all again later if one reset
 * or refused us (OUT_RETRY), else fails the peer. */
static int out_connect(int peer)
{
    struct tcp_peer *p = &tcp->peers[peer];
    char ip[INET_ADDRSTRLEN];
    for (; p->addr_idx < p->naddr; p->addr_idx++) {
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = p->port};
        sa.sin_addr.s_addr = p->addr[p->addr_idx];
        p->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (p->fd < 0)
            return cadre__p2p_tcp_peer_fail(peer, "no socket for rank %d: %s", peer,
                                            strerror(errno));
        tcp_sockopts(p->fd);
        int rc;
        do
            rc = connect(p->fd, (struct sockaddr *)&sa, sizeof sa);
        while (rc < 0 && errno == EINTR);
        if (rc == 0 && out_start_hello(peer) == 0)
            break;
        if (rc < 0 && errno == EINPROGRESS) {
            p->state = OUT_CONNECTING;
            p->deadline = tcp_now() + (p->addr_idx + 1 < p->naddr ? TCP_CONNECT_TIMEOUT : 30);
            break;
        }
        int err = errno, kind = retry_kind(err);
        if (kind > p->pass_retry)
            p->pass_retry = kind;
        snprintf(p->last, sizeof p->last, "%s:%u: %s", tcp_ip_str(sa.sin_addr.s_addr, ip),
                 ntohs(p->port), rc < 0 ? strerror(err) : "handshake failed");
        CADRE_INFO(P2P, "tcp: connecting to rank %d: %s", peer, p->last);
        close(p->fd);
        p->fd = -1;
    }
    if (p->addr_idx < p->naddr) {
        cadre__p2p_tcp_busy_add(peer);
        return CADRE_SUCCESS;
    }
    double now = tcp_now();
    if (p->pass_retry == RETRY_REFUSED && p->refused_until == 0)
        p->refused_until = now + TCP_REFUSED_RETRY;
    else if (p->pass_retry == RETRY_RESET)
        p->refused_until = 0;
    if (p->pass_retry == RETRY_NO || now > p->retry_until ||
        (p->pass_retry == RETRY_REFUSED && now > p->refused_until))
        return cadre__p2p_tcp_peer_fail(
            peer, "cannot connect to rank %d (%d addresses tried, %d times; last: %s)", peer,
            p->naddr, p->tries + 1, p->last);
    CADRE_INFO(P2P, "tcp: connecting to rank %d: trying again in %.0f ms", peer, p->backoff * 1e3);
    p->tries++;
    p->state = OUT_RETRY;
    p->deadline = now + p->backoff;
    p->backoff = p->backoff * 2 < TCP_BACKOFF_MAX ? p->backoff * 2 : TCP_BACKOFF_MAX;
    cadre__p2p_tcp_busy_add(peer);
    return CADRE_SUCCESS;
}

int cadre__p2p_tcp_connect(int peer)
{
    struct tcp_peer *p = &tcp->peers[peer];
    int rc;
    if (p->naddr < 0 && (rc = out_fetch(peer)) != CADRE_SUCCESS)
        return rc;
    double window = tcp->timeout > 0 && tcp->timeout < TCP_RETRY_MAX ? tcp->timeout : TCP_RETRY_MAX;
    p->retry_until = tcp_now() + window;
    p->refused_until = 0;
    p->backoff = TCP_BACKOFF_FIRST;
    p->tries = p->pass_retry = p->addr_idx = 0;
    return out_connect(peer);
}

/* The current address did not work out: try the next one. */
static int out_next(int peer, int kind, const char *what)
{
    struct tcp_peer *p = &tcp->peers[peer];
    char ip[INET_ADDRSTRLEN];
    snprintf(p->last, sizeof p->last, "%s:%u: %s", tcp_ip_str(p->addr[p->addr_idx], ip),
             ntohs(p->port), what);
    CADRE_INFO(P2P, "tcp: connecting to rank %d: %s", peer, p->last);
    if (kind > p->pass_retry)
        p->pass_retry = kind;
    close(p->fd);
    p->fd = -1;
    p->addr_idx++;
    return out_connect(peer);
}

/* Moves a connection through RETRY, CONNECTING and HELLO without blocking.
 * Only a listener that closed or reset our connection, or refused it, is
 * worth a retry: one that took our hello and did not answer in time may
 * still take it later. */
int cadre__p2p_tcp_advance(int peer)
{
    struct tcp_peer *p = &tcp->peers[peer];
    if (p->state == OUT_RETRY) {
        if (tcp_now() < p->deadline)
            return 0;
        p->addr_idx = 0;
        p->pass_retry = RETRY_NO;
        p->state = OUT_NONE;
        int rc = out_connect(peer);
        if (rc != CADRE_SUCCESS || p->state == OUT_RETRY)
            return rc;
    }
    if (p->state == OUT_CONNECTING) {
        struct pollfd pf = {p->fd, POLLOUT, 0};
        if (poll(&pf, 1, 0) <= 0)
            return tcp_now() > p->deadline ? out_next(peer, RETRY_NO, "connect timed out") : 0;
        int err = 0;
        socklen_t el = sizeof err;
        if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &err, &el) || err) {
            err = err ? err : errno;
            return out_next(peer, retry_kind(err), strerror(err));
        }
        if (out_start_hello(peer))
            return out_next(peer, retry_kind(errno), "could not send the handshake");
    }
    if (p->state == OUT_HELLO) {
        ssize_t n = recv(p->fd, (char *)&p->ack + p->ack_got, sizeof p->ack - p->ack_got, 0);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return tcp_now() > p->deadline ? out_next(peer, RETRY_NO, "no handshake answer") : 0;
        if (n == 0)
            return out_next(peer, RETRY_RESET, "closed during the handshake");
        if (n < 0)
            return out_next(peer, retry_kind(errno), strerror(errno));
        p->ack_got += (size_t)n;
        if (p->ack_got < sizeof p->ack)
            return 0;
        if (p->ack.magic != TCP_MAGIC || p->ack.version != TCP_VERSION || p->ack.from != peer ||
            p->ack.to != tcp->rank || p->ack.cookie != cadre__p2p_info.job_cookie)
            return out_next(peer, RETRY_NO, "answered by another process");
        p->state = OUT_UP;
        CADRE_TRACE(P2P, "tcp: connected to rank %d", peer);
    }
    return CADRE_SUCCESS;
}

