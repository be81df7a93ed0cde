/*
 * p2p_tcp_conn.c - where the TCP transport listens and how it connects:
 * the addresses a rank publishes, one listener on each (never the wildcard
 * address), and the outbound connection to a peer through its addresses,
 * its handshake, and the retries when a crowded listener reset or closed
 * it (cadre-nodes(7), "Security of the TCP transport"), and at finalize the
 * end of the connections that carry both ways. p2p_tcp.c sends over the
 * connections made here; p2p_tcp_recv.c accepts.
 */
#include "config.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "p2p/p2p_tcp.h"

static struct tcp_state *const tcp = &cadre__p2p_tcp_state;

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

/* The interfaces that are up with an IPv4 address, chosen by
 * CADRE_SOCKET_IFNAME (p2p_tcp_if.c). A host with no address at all
 * (none up, not even loopback) still has 127.0.0.1 for its own ranks. */
int cadre__p2p_tcp_local_addrs(struct tcp_blob_addr *a)
{
    const char *specstr = cadre__config_str(CADRE_CFG_SOCKET_IFNAME);
    struct tcp_ifspec spec;
    char err[512];
    if (cadre__p2p_tcp_ifspec_parse(specstr, &spec, err, sizeof err))
        return cadre__error(CADRE_ERR_ARG, "cadre_init: %s", err), -1;
    struct ifaddrs *ifa = NULL;
    struct tcp_if all[64], out[TCP_MAX_ADDRS];
    int n = 0;
    memset(all, 0, sizeof all); /* names go out whole, with their padding */
    if (getifaddrs(&ifa) == 0) {
        for (struct ifaddrs *i = ifa; i && n < 64; i = i->ifa_next) {
            if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP))
                continue;
            snprintf(all[n].name, sizeof all[n].name, "%s", i->ifa_name);
            all[n].addr = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
            all[n].loopback = !!(i->ifa_flags & IFF_LOOPBACK);
            n++;
        }
        freeifaddrs(ifa);
    }
    int k = cadre__p2p_tcp_if_select(all, n, &spec, specstr, out, TCP_MAX_ADDRS, err, sizeof err);
    if (k < 0)
        return cadre__error(CADRE_ERR_ARG, "cadre_init: %s", err), -1;
    if (k == 0)
        out[k++] = (struct tcp_if){.name = "lo", .addr = htonl(INADDR_LOOPBACK), .loopback = 1};
    for (int i = 0; i < k; i++) {
        a[i].addr = out[i].addr;
        memcpy(a[i].ifname, out[i].name, sizeof a[i].ifname);
    }
    return k;
}

/* Loopback reaches the processes of this network namespace only: a peer
 * whose value is the same (the same boot, the same namespace) is given
 * loopback, no other is. 0 when not known: loopback for nobody. */
uint64_t cadre__p2p_tcp_netns(void)
{
    char boot[64] = "";
    struct stat st;
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
    if (!f)
        return 0;
    int ok = fgets(boot, sizeof boot, f) != NULL;
    fclose(f);
    if (!ok || stat("/proc/self/ns/net", &st))
        return 0;
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (const char *c = boot; *c && *c != '\n'; c++)
        h = (h ^ (uint8_t)*c) * 0x100000001b3ull;
    h ^= (uint64_t)st.st_ino * 0x9e3779b97f4a7c15ull ^ (uint64_t)st.st_dev;
    return h ? h : 1;
}

void cadre__p2p_tcp_close_listeners(void)
{
    for (int i = 0; i < tcp->nlfd; i++)
        close(tcp->lfd[i]);
    tcp->nlfd = 0;
}

/* One listener on each of the n addresses, all on one port (the blob
 * carries one), which the first picks: never on the wildcard address, so
 * that nothing reaches the rank through an interface it does not publish
 * (loopback included: only peers of this netns are given its address).
 * An address that cannot be bound (gone since getifaddrs) is dropped from
 * addr; a port taken on a later address starts over on another. Returns
 * the port (network order) and the number of addresses kept, or 0 and
 * errno. */
uint16_t cadre__p2p_tcp_listen(struct tcp_blob_addr *addr, int *n, const char **what)
{
    struct tcp_blob_addr want[TCP_MAX_ADDRS];
    int nwant = *n, err = 0;
    memcpy(want, addr, (size_t)nwant * sizeof *want);
    for (int attempt = 0; attempt < 16; attempt++) {
        uint16_t port = 0;
        int kept = 0, again = 0;
        for (int i = 0; i < nwant && !again; i++) {
            struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = port,
                                     .sin_addr.s_addr = want[i].addr};
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
                CADRE_INFO(P2P, "tcp: not listening on %s: bind: %s", tcp_ip_str(want[i].addr, ip),
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

static int is_loopback(uint32_t a)
{
    return (ntohl(a) >> 24) == 127;
}

const char *cadre__p2p_tcp_host(int peer)
{
    if (!tcp->peers || peer < 0 || peer >= tcp->size)
        return NULL;
    if (peer == tcp->rank)
        return tcp->host;
    struct tcp_peer *p = &tcp->peers[peer];
    if (!p->host[0]) {
        void *data = NULL;
        size_t len = 0;
        if (cadre__bootstrap_get(peer, TCP_KEY, &data, &len) == CADRE_SUCCESS &&
            len >= sizeof(struct tcp_blob)) {
            const struct tcp_blob *b = data;
            if (b->magic == TCP_MAGIC && b->version == TCP_BLOB_VERSION)
                snprintf(p->host, sizeof p->host, "%.*s", (int)sizeof b->host - 1, b->host);
        }
        free(data);
    }
    return p->host[0] ? p->host : NULL;
}

/* The peer's blob, and the addresses worth trying from here: the loopback
 * ones when the peer is in this network namespace (they reach nothing
 * else), else every other one, all at once. */
static int out_fetch(int peer)
{
    struct tcp_peer *p = &tcp->peers[peer];
    void *data = NULL;
    size_t len = 0;
    if (cadre__bootstrap_get(peer, TCP_KEY, &data, &len) != CADRE_SUCCESS)
        return cadre__p2p_tcp_peer_fail(peer, "no TCP endpoint published by rank %d", peer);
    const struct tcp_blob *b = data;
    if (len < sizeof *b || b->magic != TCP_MAGIC || b->version != TCP_BLOB_VERSION ||
        b->naddr == 0 ||
        b->naddr > TCP_MAX_ADDRS || len != sizeof *b + b->naddr * sizeof b->a[0]) {
        free(data);
        return cadre__p2p_tcp_peer_fail(peer, "malformed TCP endpoint of rank %d (%zu bytes)",
                                        peer, len);
    }
    snprintf(p->host, sizeof p->host, "%.*s", (int)sizeof b->host - 1, b->host);
    int here = b->netns && b->netns == tcp->netns, nlo = 0;
    for (uint32_t i = 0; i < b->naddr; i++)
        nlo += here && is_loopback(b->a[i].addr);
    p->addr = malloc(b->naddr * sizeof *p->addr);
    p->try = calloc(b->naddr, sizeof *p->try);
    if (!p->addr || !p->try) {
        free(data);
        free(p->addr);
        free(p->try);
        p->addr = NULL;
        p->try = NULL;
        return cadre__error(CADRE_ERR_NOMEM, "tcp: out of memory for rank %d's addresses", peer);
    }
    p->naddr = 0;
    for (uint32_t i = 0; i < b->naddr; i++)
        if (nlo ? is_loopback(b->a[i].addr) : !is_loopback(b->a[i].addr)) {
            p->addr[p->naddr] = b->a[i];
            p->addr[p->naddr++].ifname[TCP_IFNAMSIZ - 1] = '\0';
        }
    for (uint32_t i = 0; i < b->naddr; i++)
        p->try[i].fd = -1;
    p->port = b->port;
    free(data);
    if (p->naddr == 0)
        return cadre__p2p_tcp_peer_fail(peer, "rank %d publishes only loopback addresses, which "
                                              "another host cannot reach (CADRE_SOCKET_IFNAME)",
                                        peer);
    return CADRE_SUCCESS;
}

static const char *addr_str(const struct tcp_peer *p, int i, char *buf, size_t len)
{
    char ip[INET_ADDRSTRLEN];
    snprintf(buf, len, "%s:%u (%s)", tcp_ip_str(p->addr[i].addr, ip), ntohs(p->port),
             p->addr[i].ifname);
    return buf;
}

static int retry_kind(int err)
{
    return err == ECONNREFUSED ? RETRY_REFUSED
           : err == ECONNRESET || err == EPIPE ? RETRY_RESET
                                                : RETRY_NO;
}

/* Try i did not work out: noted in the pass's failures, closed. */
static void try_done(int peer, int i, int kind, const char *what)
{
    struct tcp_peer *p = &tcp->peers[peer];
    struct tcp_try *t = &p->try[i];
    char a[64];
    addr_str(p, i, a, sizeof a);
    size_t l = strlen(p->last);
    if (l + 1 < sizeof p->last)
        snprintf(p->last + l, sizeof p->last - l, "%s%s: %s", l ? "; " : "", a, what);
    CADRE_INFO(P2P, "tcp: connecting to rank %d: %s: %s", peer, a, what);
    if (kind > p->pass_retry)
        p->pass_retry = kind;
    if (t->fd >= 0)
        close(t->fd);
    t->fd = -1;
    t->state = TRY_DONE;
}

static int try_hello(int peer, int i)
{
    struct tcp_try *t = &tcp->peers[peer].try[i];
    struct tcp_hello h = {TCP_MAGIC, TCP_VERSION, tcp->rank, peer, cadre__p2p_info.job_cookie};
    ssize_t n;
    do
        n = send(t->fd, &h, sizeof h, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof h) { /* an empty new socket takes 24 bytes or is broken */
        try_done(peer, i, retry_kind(errno), "could not send the handshake");
        return -1;
    }
    t->state = TRY_HELLO;
    t->ack_got = 0;
    t->deadline = tcp_now() + TCP_HELLO_TIMEOUT;
    return 0;
}

/* Every address at once; each connect that completes says hello. */
static void out_start(int peer)
{
    struct tcp_peer *p = &tcp->peers[peer];
    p->last[0] = '\0';
    p->pass_retry = RETRY_NO;
    p->state = OUT_CONNECTING;
    p->deadline = tcp_now() + tcp->peer_timeout;
    for (int i = 0; i < p->naddr; i++) {
        struct tcp_try *t = &p->try[i];
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = p->port,
                                 .sin_addr.s_addr = p->addr[i].addr};
        t->state = TRY_CONNECTING;
        t->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (t->fd < 0) {
            try_done(peer, i, RETRY_NO, strerror(errno));
            continue;
        }
        tcp_sockopts(t->fd);
        int rc;
        do
            rc = connect(t->fd, (struct sockaddr *)&sa, sizeof sa);
        while (rc < 0 && errno == EINTR);
        if (rc == 0)
            try_hello(peer, i);
        else if (errno != EINPROGRESS)
            try_done(peer, i, retry_kind(errno), strerror(errno));
    }
}

/* The first answered handshake: the connection; the others are closed.
 * When the answer says the peer writes on it too, we read it, and the peer
 * makes no connection to us (one that claims to be it is refused). */
static int out_won(int peer, int i)
{
    struct tcp_peer *p = &tcp->peers[peer];
    int both = (p->try[i].ack.version & TCP_BOTH_WAYS) != 0;
    p->fd = p->try[i].fd;
    p->try[i].fd = -1;
    for (int k = 0; k < p->naddr; k++) {
        if (p->try[k].fd >= 0)
            close(p->try[k].fd);
        p->try[k].fd = -1;
        p->try[k].state = TRY_DONE;
    }
    p->state = OUT_UP;
    char ip[INET_ADDRSTRLEN];
    CADRE_INFO(P2P, "tcp: rank %d reached at %s:%u", peer, tcp_ip_str(p->addr[i].addr, ip),
               ntohs(p->port));
    if (!both)
        return CADRE_SUCCESS;
    p->seen_in = 1;
    return cadre__p2p_tcp_in_back(peer) == 0 ? CADRE_SUCCESS : CADRE_ERR_PEER;
}

/* Every try of the pass is done and none won: all of them again later when
 * one was reset or refused (OUT_RETRY), else the peer failed. */
static int out_pass_over(int peer)
{
    struct tcp_peer *p = &tcp->peers[peer];
    double now = tcp_now();
    if (p->pass_retry == RETRY_REFUSED && p->refused_until == 0)
        p->refused_until = now + TCP_REFUSED_RETRY;
    else if (p->pass_retry == RETRY_RESET)
        p->refused_until = 0;
    /* In cadre_finalize only farewells are sent: a refused one finds the
     * peer gone already (its listener closed), not yet to come, and the
     * retries would hold this process's exit for a second. */
    if (p->pass_retry == RETRY_NO || now > p->retry_until ||
        (p->pass_retry == RETRY_REFUSED && (now > p->refused_until || cadre__p2p_farewells())))
        return cadre__p2p_tcp_peer_fail(
            peer, "cannot connect (%d address%s, %d tr%s): %s", p->naddr,
            p->naddr == 1 ? "" : "es", p->tries + 1, p->tries ? "ies" : "y", p->last);
    CADRE_INFO(P2P, "tcp: connecting to rank %d: trying again in %.0f ms", peer, p->backoff * 1e3);
    p->tries++;
    p->state = OUT_RETRY;
    p->deadline = now + p->backoff;
    p->backoff = p->backoff * 2 < TCP_BACKOFF_MAX ? p->backoff * 2 : TCP_BACKOFF_MAX;
    return CADRE_SUCCESS;
}

/* Moves the tries on: connects that completed say hello, answered hellos
 * are checked. Only a listener that closed or reset our connection, or
 * refused it, is worth a retry: one that took our hello and did not answer
 * in time may still take it later, and an answer from the wrong process
 * (an address several hosts share reached this host's) never changes. */
static int out_tries(int peer)
{
    struct tcp_peer *p = &tcp->peers[peer];
    struct pollfd pf[TCP_MAX_ADDRS];
    int live = 0;
    for (int i = 0; i < p->naddr; i++) {
        struct tcp_try *t = &p->try[i];
        pf[i] = (struct pollfd){t->fd, t->state == TRY_HELLO ? POLLIN : POLLOUT, 0};
        live += t->state != TRY_DONE;
    }
    if (live && poll(pf, (nfds_t)p->naddr, 0) < 0)
        return 0;
    double now = tcp_now();
    for (int i = 0; i < p->naddr && p->state == OUT_CONNECTING; i++) {
        struct tcp_try *t = &p->try[i];
        if (t->state == TRY_CONNECTING) {
            if (!pf[i].revents) {
                if (now > p->deadline) {
                    char what[64];
                    snprintf(what, sizeof what, "no answer to the connect in %g s",
                             tcp->peer_timeout);
                    try_done(peer, i, RETRY_NO, what);
                }
                continue;
            }
            int err = 0;
            socklen_t el = sizeof err;
            if (getsockopt(t->fd, SOL_SOCKET, SO_ERROR, &err, &el) || err) {
                err = err ? err : errno;
                try_done(peer, i, retry_kind(err), strerror(err));
                continue;
            }
            if (try_hello(peer, i))
                continue;
        }
        if (t->state != TRY_HELLO)
            continue;
        ssize_t n = recv(t->fd, (char *)&t->ack + t->ack_got, sizeof t->ack - t->ack_got, 0);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            if (now > t->deadline)
                try_done(peer, i, RETRY_NO, "no handshake answer");
            continue;
        }
        if (n <= 0) {
            try_done(peer, i, n == 0 ? RETRY_RESET : retry_kind(errno),
                     n == 0 ? "closed during the handshake" : strerror(errno));
            continue;
        }
        t->ack_got += (size_t)n;
        if (t->ack_got < sizeof t->ack)
            continue;
        if (t->ack.magic != TCP_MAGIC || (t->ack.version & ~TCP_BOTH_WAYS) != TCP_VERSION ||
            t->ack.from != peer ||
            t->ack.to != tcp->rank || t->ack.cookie != cadre__p2p_info.job_cookie) {
            try_done(peer, i, RETRY_NO, "answered by another process");
            continue;
        }
        return out_won(peer, i);
    }
    for (int i = 0; i < p->naddr; i++)
        if (p->try[i].state != TRY_DONE)
            return CADRE_SUCCESS;
    return out_pass_over(peer);
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
    p->tries = 0;
    out_start(peer);
    cadre__p2p_tcp_busy_add(peer);
    return out_tries(peer);
}

int cadre__p2p_tcp_advance(int peer)
{
    struct tcp_peer *p = &tcp->peers[peer];
    if (p->state == OUT_RETRY) {
        if (tcp_now() < p->deadline)
            return 0;
        out_start(peer);
    }
    if (p->state == OUT_CONNECTING)
        return out_tries(peer);
    return CADRE_SUCCESS;
}

/* A connection that carries both ways, closed with the peer's messages
 * unread (its BYE, sent as ours was), ends with a reset, and the kernel
 * drops what it had not sent yet: our BYE, behind a full window. So our
 * side of each is ended first (shutdown: its FIN follows our last bytes),
 * the last bytes are let go (at most OUT_END_WAIT in all, while they are
 * transmitted), and what the peer sent is read and dropped. The peer takes
 * a reset after our BYE as an orderly end (in_read_end). */
#define OUT_END_WAIT 0.5
void cadre__p2p_tcp_end_shared(void)
{
    double until = tcp_now() + OUT_END_WAIT;
    for (int i = 0; tcp->peers && i < tcp->size; i++)
        if (tcp->peers[i].shared && tcp->peers[i].fd >= 0)
            (void)shutdown(tcp->peers[i].fd, SHUT_WR);
    while (tcp->peers && tcp_now() < until) {
        int left = 0;
        for (int i = 0; i < tcp->size; i++) {
            struct tcp_peer *p = &tcp->peers[i];
            int unsent = 0;
            if (p->shared && p->fd >= 0 && ioctl(p->fd, SIOCOUTQNSD, &unsent) == 0 && unsent > 0)
                left++;
        }
        if (!left)
            break;
        (void)poll(NULL, 0, 1);
    }
    for (int i = 0; tcp->peers && i < tcp->size; i++) {
        struct tcp_peer *p = &tcp->peers[i];
        char buf[4096];
        for (int k = 0; p->shared && p->fd >= 0 && k < 64; k++)
            if (recv(p->fd, buf, sizeof buf, MSG_DONTWAIT) <= 0)
                break;
    }
}
