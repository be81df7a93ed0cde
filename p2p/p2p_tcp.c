/*
 * p2p_tcp.c - the TCP transport: reaches a peer on any node.
 *
 * One connection per pair where the pair allows it. To send to P we connect
 * to P's listener (lazily, on the first send), unless P connected to us
 * first: then we write on P's connection. Each side writes to a peer on one
 * connection for the whole job (TCP keeps their order), and reads every
 * connection it has with the peer: its own too, since the peer may write
 * there. Two connections, one each way, remain only where both sides began
 * connecting before either was answered (no race to settle: each writes
 * on its own). One connection carrying both ways lets each side's
 * acknowledgements ride on the other's messages: with one per direction
 * the kernel sends a bare ACK packet for every other message, and a
 * 56-byte round trip over loopback took 6.5-7.5 us against 4.3-5.1
 * (2026-12-02). Such a connection closes when both its reader and writer
 * let go of it (p2p_tcp_recv.c in_close, out_close here); at finalize our
 * side of it is shut down first (p2p_tcp_conn.c).
 *
 * Handshake: the connecting side writes a hello {magic, version, from, to,
 * job cookie}; the accepting side checks it (cookie, `to` is itself, `from` in
 * range, one connection per peer), closes anything else (logged at INFO), and
 * answers with its own hello. Messages follow only after that answer, so a
 * connection that reached another process through an address several nodes
 * share (docker0, virbr0, a remote 127.0.0.1) is noticed, and the next address
 * of the peer is tried instead.
 *
 * Who may connect (cadre-nodes(7), "Security of the TCP transport"): a listener on
 * each published address, none on the wildcard; an accepted connection has
 * TCP_IN_HELLO_TIMEOUT to say who it is, and the oldest of too many silent
 * ones is closed for each new one (p2p_tcp_recv.c), so strangers' idle
 * connections never make the listener refuse a peer. A connect that the
 * listener reset or closed before answering is made again with backoff
 * (OUT_RETRY) instead of failing the peer. Listeners and connecting:
 * p2p_tcp_conn.c.
 *
 * Sending is all or nothing (p2p.h): one sendmsg of header and payload. When
 * the socket fills, send waits briefly for the reader to drain it (a plain
 * blocking socket's behaviour, which keeps large transfers free of copies),
 * but only while none of our own inbound sockets has data: a peer may be
 * blocked sending to us, and only our progress unblocks it. What is left is
 * copied to a per-peer staging buffer (one message at most) and flushed by
 * progress; the next send to that peer is BUSY while it cannot be flushed.
 *
 * Receiving: a state machine per inbound socket. Reads of up to TCP_RBUF bytes
 * take a header and a small payload (often several messages) in one call; the
 * rest of a larger payload is read straight into its destination: for DATA
 * the one cadre__p2p_data_dest names, for EAGER the posted receive it matches
 * (cadre__p2p_eager_dest), else a staging buffer; release_dest moves a body
 * to the staging buffer when its receive goes away (p2p_tcp_recv.c).
 */
#include "config.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "p2p/p2p_tcp.h"

struct tcp_state cadre__p2p_tcp_state;
static struct tcp_state *const tcp = &cadre__p2p_tcp_state;

#define TCP_DIRECT_READS 4     /* with more inbound sockets, poll before reading */
#define TCP_SEND_WAIT 1e-3     /* seconds one send may wait for the reader */
static int tcp_reachable(int peer)
{
    return peer >= 0 && peer < tcp->size && peer != tcp->rank;
}

static int pfd_reserve(int n)
{
    if (n <= tcp->cappfd)
        return 0;
    struct pollfd *p = realloc(tcp->pfd, (size_t)n * 2 * sizeof *p);
    if (!p)
        return -1;
    tcp->pfd = p;
    tcp->cappfd = n * 2;
    return 0;
}

/* ---- peers: failure, the busy list ---------------------------------------- */

static void out_close(struct tcp_peer *p)
{
    if (p->fd >= 0 && !p->shared)
        close(p->fd);
    p->shared = 0; /* a reader of it closes it */
    p->fd = -1;
    for (int i = 0; p->try && i < p->naddr; i++) {
        if (p->try[i].fd >= 0)
            close(p->try[i].fd);
        p->try[i].fd = -1;
        p->try[i].state = TRY_DONE;
    }
    p->stage_off = p->stage_len = 0;
}

int cadre__p2p_tcp_peer_fail(int peer, const char *fmt, ...)
{
    struct tcp_peer *p = &tcp->peers[peer];
    out_close(p);
    p->state = OUT_FAILED;
    if (p->in)
        cadre__p2p_tcp_in_close(p->in);
    if (p->back)
        cadre__p2p_tcp_in_close(p->back);
    if (p->failed)
        return CADRE_ERR_PEER;
    p->failed = 1;
    /* "(host H) ...": the engine puts it with the pid it knows. */
    char why[320];
    const char *host = cadre__p2p_tcp_host(peer);
    int l = host ? snprintf(why, sizeof why, "(host %s) ", host) : 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why + l, sizeof why - (size_t)l, fmt, ap);
    va_end(ap);
    CADRE_INFO(P2P, "tcp: rank %d failed: %s", peer, why);
    cadre__p2p_peer_failed(peer, why);
    return CADRE_ERR_PEER;
}

/* ---- outbound: writing ---------------------------------------------------- */

/* Waits until `until` for fd to take more bytes. 0: give up now, because
 * the time ran out or one of our inbound sockets has data. */
static int send_wait(int fd, double until)
{
    double left = until - tcp_now();
    if (left <= 0 || pfd_reserve(tcp->nin + 1))
        return 0;
    int n = 0;
    tcp->pfd[n++] = (struct pollfd){fd, POLLOUT, 0};
    for (int i = 0; i < tcp->nin; i++)
        if (tcp->in[i]->fd >= 0)
            tcp->pfd[n++] = (struct pollfd){tcp->in[i]->fd, POLLIN, 0};
    struct timespec ts = {0, (long)(left * 1e9)};
    int r = ppoll(tcp->pfd, (nfds_t)n, &ts, NULL);
    if (r <= 0)
        return 0;
    for (int i = 1; i < n; i++)
        if (tcp->pfd[i].revents)
            return 0;
    return tcp->pfd[0].revents != 0;
}

/* A peer whose end is closed may have left messages in our inbound socket
 * (or on a connection still waiting to be accepted) before it went: its
 * BYE, a POISON saying why it left a collective. They are read and
 * delivered before the broken pipe fails the peer, so that they, not the
 * pipe, tell what happened (a rank that finalized after a failure elsewhere
 * is not blamed for it). They may also still be on their way: the reset of
 * our connection (the peer closed it with our bytes unread) can overtake
 * them, sent before it on the peer's connection to us, when the peer's
 * process moved to another core in between (each core's loopback queue
 * is its own). So the peer's connection is read until it ends (its EOF,
 * after its BYE or not), for at most TCP_DRAIN_IN_WAIT: a rank that
 * finalized, read too early, was blamed for a failure (the fault soak of
 * make check, under load). Not while a drain runs: a message delivered
 * here may itself be answered with a send to the same peer. Also the
 * transport's drain, when the peer's process is seen to end (its pidfd):
 * the bytes it wrote last, and its BYE, may still be on their way on
 * loopback then (scan_test over TCP under load, 3 ranks: rank 0 finalized
 * and exited first, rank 1 read until one call found the socket empty,
 * failed rank 0 "exited with status 0" and every later call with it). */
static void drain_in(int peer)
{
    static int draining;
    if (draining)
        return;
    draining = 1;
    double until = tcp_now() + TCP_DRAIN_IN_WAIT;
    for (;;) {
        /* What it sent may be on a connection it opened last, not yet accepted. */
        cadre__p2p_tcp_accept();
        for (int i = 0; i < tcp->nin; i++)
            if (tcp->in[i]->fd >= 0 && tcp->in[i]->peer < 0)
                cadre__p2p_tcp_in_progress(tcp->in[i]);
        /* Its connection, and ours, which it may write on too. */
        struct pollfd pf[2];
        int n = 0;
        for (int r = 0; r < 2; r++) {
            struct tcp_in *const *slot = r ? &tcp->peers[peer].back : &tcp->peers[peer].in;
            struct tcp_in *c = *slot;
            for (int k = 0; c && k < 1024 && *slot == c && c->fd >= 0; k++)
                if (cadre__p2p_tcp_in_progress(c) == 0)
                    break;
            /* Unless it ended (closed after its BYE, or failed). */
            if (c && *slot == c && c->fd >= 0)
                pf[n++] = (struct pollfd){c->fd, POLLIN, 0};
        }
        double left = until - tcp_now();
        if (n == 0 || left <= 0)
            break;
        (void)poll(pf, (nfds_t)n, (int)(left * 1e3) + 1);
    }
    draining = 0;
}

/* Writes the bytes of iov (total in all); *done says how many the kernel
 * took. wait: while the socket is full, wait for the reader (send_wait), at
 * most TCP_SEND_WAIT in all: a slower reader costs less with a copy. */
static int out_write(int peer, struct iovec *iov, int iovcnt, size_t total, size_t *done, int wait)
{
    struct tcp_peer *p = &tcp->peers[peer];
    double until = 0;
    *done = 0;
    while (*done < total) {
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)iovcnt};
        ssize_t n = sendmsg(p->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                int err = errno;
                if (err == EPIPE || err == ECONNRESET)
                    drain_in(peer);
                if (err == ETIMEDOUT || err == EHOSTUNREACH)
                    return cadre__p2p_tcp_peer_fail(peer, "unreachable: no answer for %g s "
                                                          "(sending to rank %d: %s)",
                                                    tcp->peer_timeout, peer, strerror(err));
                /* EFAULT: the payload (a buffer of this rank's caller) is
                 * not readable here; part of the message may be out, so
                 * the connection is lost all the same. */
                return cadre__p2p_tcp_peer_fail(peer, "sending to rank %d: %s%s", peer,
                                                strerror(err),
                                                err == EFAULT ? " (the send buffer of this rank "
                                                                "is not readable memory)"
                                                              : "");
            }
            n = 0;
        }
        *done += (size_t)n;
        if (*done == total)
            break;
        size_t k = (size_t)n;
        while (k >= iov->iov_len) {
            k -= iov->iov_len;
            iov++;
            iovcnt--;
        }
        iov->iov_base = (char *)iov->iov_base + k;
        iov->iov_len -= k;
        /* The socket is full (a partial write or EAGAIN). */
        if (!wait)
            break;
        if (until == 0)
            until = tcp_now() + TCP_SEND_WAIT;
        if (!send_wait(p->fd, until))
            break;
    }
    return CADRE_SUCCESS;
}

static int out_flush(int peer)
{
    struct tcp_peer *p = &tcp->peers[peer];
    struct iovec iov = {p->stage + p->stage_off, p->stage_len - p->stage_off};
    size_t done = 0;
    int rc = out_write(peer, &iov, 1, iov.iov_len, &done, 0);
    if (rc != CADRE_SUCCESS)
        return rc;
    p->stage_off += done;
    if (p->stage_off == p->stage_len)
        p->stage_off = p->stage_len = 0;
    return done > 0;
}

static int tcp_send(int peer, const struct cadre_p2p_hdr *h, const void *payload)
{
    if (!tcp_reachable(peer))
        return cadre__error(CADRE_ERR_INTERNAL, "tcp: send to rank %d of %d (self %d)", peer,
                            tcp->size, tcp->rank);
    struct tcp_peer *p = &tcp->peers[peer];
    if (p->state != OUT_UP) {
        int rc = CADRE_SUCCESS;
        if (p->state == OUT_FAILED)
            return CADRE_ERR_PEER;
        if (p->state == OUT_NONE) {
            rc = cadre__p2p_tcp_connect(peer);
        } else {
            rc = cadre__p2p_tcp_advance(peer);
        }
        if (rc != CADRE_SUCCESS)
            return rc;
        if (p->state != OUT_UP)
            return CADRE_P2P_BUSY;
    }
    if (p->stage_len) {
        int rc = out_flush(peer);
        if (rc < 0)
            return rc;
        if (p->stage_len)
            return CADRE_P2P_BUSY;
    }
    size_t plen = tcp_has_payload(h->type) ? h->len : 0;
    if (h->type < 1 || h->type > CADRE_P2P_TYPE_MAX || plen > TCP_MAX_PAYLOAD)
        return cadre__error(CADRE_ERR_INTERNAL,
                            "tcp: send to rank %d: bad message (type %u, %zu bytes)", peer,
                            h->type, plen);
    struct iovec iov[2] = {{(void *)h, TCP_HDR}, {(void *)payload, plen}};
    size_t total = TCP_HDR + plen, done = 0;
    int rc = out_write(peer, iov, plen ? 2 : 1, total, &done, 1);
    if (rc != CADRE_SUCCESS)
        return rc;
    if (done == total)
        return CADRE_P2P_SENT;
    /* Stage what the kernel did not take (all of it when the socket was full
     * already: pollfds then asks for POLLOUT). */
    if (!p->stage && !(p->stage = malloc(TCP_HDR + TCP_MAX_PAYLOAD))) {
        if (done == 0)
            return cadre__error(CADRE_ERR_NOMEM, "tcp: out of memory for a staging buffer");
        /* Part of the message is out and the rest cannot follow. */
        return cadre__p2p_tcp_peer_fail(peer, "out of memory for a staging buffer");
    }
    cadre__p2p_tcp_busy_add(peer);
    p->stage_off = 0;
    p->stage_len = total - done;
    if (done < TCP_HDR) {
        memcpy(p->stage, (const char *)h + done, TCP_HDR - done);
        if (plen)
            memcpy(p->stage + TCP_HDR - done, payload, plen);
    } else {
        memcpy(p->stage, (const char *)payload + (done - TCP_HDR), total - done);
    }
    return CADRE_P2P_SENT;
}

/* Connecting peers and staged data. */
static int out_progress(void)
{
    int events = 0;
    for (int i = 0; i < tcp->nbusy; i++) {
        int peer = tcp->busy[i];
        struct tcp_peer *p = &tcp->peers[peer];
        if (p->state == OUT_CONNECTING || p->state == OUT_RETRY) {
            int before = p->state;
            cadre__p2p_tcp_advance(peer);
            events += p->state != before;
        }
        if (p->state == OUT_UP && p->stage_len) {
            int rc = out_flush(peer);
            events += rc > 0;
        }
        if (p->state == OUT_FAILED || (p->state == OUT_UP && !p->stage_len)) {
            p->busy = 0;
            tcp->busy[i--] = tcp->busy[--tcp->nbusy];
        }
    }
    return events;
}

static int tcp_progress(void)
{
    int events = 0, n = tcp->nin;
    tcp->calls++;
    if (tcp->nbusy)
        events += out_progress();
    if (n > TCP_DIRECT_READS && pfd_reserve(n) == 0) {
        /* Many sockets: one poll finds those with data. */
        for (int i = 0; i < n; i++)
            tcp->pfd[i] = (struct pollfd){tcp->in[i]->more ? -1 : tcp->in[i]->fd, POLLIN, 0};
        if (poll(tcp->pfd, (nfds_t)n, 0) < 0)
            n = 0;
        for (int i = 0; i < n; i++)
            if (tcp->in[i]->fd >= 0 && (tcp->in[i]->more || tcp->pfd[i].revents))
                events += cadre__p2p_tcp_in_progress(tcp->in[i]);
    } else {
        for (int i = 0; i < n; i++)
            if (tcp->in[i]->fd >= 0)
                events += cadre__p2p_tcp_in_progress(tcp->in[i]);
    }
    /* accept4 costs a syscall: try it after the engine slept in poll (the
     * listener may be why it woke) and on every 32nd call. */
    if (tcp->slept || (tcp->calls & 31) == 0) {
        tcp->slept = 0;
        events += cadre__p2p_tcp_accept();
    }
    int dead = 0;
    for (int i = 0; i < tcp->nin; i++)
        dead |= tcp->in[i]->fd < 0;
    if (dead || (tcp->npending && events == 0))
        cadre__p2p_tcp_sweep();
    return events;
}

static void tcp_idle(void)
{
    tcp->slept = 1;
}

/* The listeners, the peers' sockets, and last the connections still in
 * their handshake: when there are more than fit, those go unwatched, not a
 * peer's (the listeners wake the engine for them anyway). */
static int tcp_pollfds(struct pollfd *fds, int max)
{
    int n = 0;
    tcp->slept = 1;
    for (int i = 0; i < tcp->nlfd && n < max; i++)
        fds[n++] = (struct pollfd){tcp->lfd[i], POLLIN, 0};
    for (int i = 0; i < tcp->nin && n < max; i++) {
        struct tcp_in *c = tcp->in[i];
        /* Messages already buffered: an inbound socket is never full, so
         * POLLOUT keeps poll from sleeping on them. */
        if (c->fd >= 0 && c->peer >= 0)
            fds[n++] = (struct pollfd){c->fd, (short)(POLLIN | (c->more ? POLLOUT : 0)), 0};
    }
    for (int i = 0; i < tcp->nbusy && n < max; i++) {
        struct tcp_peer *p = &tcp->peers[tcp->busy[i]];
        if (p->fd >= 0)
            fds[n++] = (struct pollfd){p->fd, POLLOUT, 0};
        for (int k = 0; p->state == OUT_CONNECTING && k < p->naddr && n < max; k++)
            if (p->try[k].fd >= 0)
                fds[n++] = (struct pollfd){p->try[k].fd,
                                           p->try[k].state == TRY_HELLO ? POLLIN : POLLOUT, 0};
    }
    for (int i = 0; i < tcp->nin && n < max; i++)
        if (tcp->in[i]->fd >= 0 && tcp->in[i]->peer < 0)
            fds[n++] = (struct pollfd){tcp->in[i]->fd, POLLIN, 0};
    return n;
}

/* ---- setup ---------------------------------------------------------------- */

/* The engine's BYE may still sit in a staging buffer: let it go out (the
 * peers are reading, waiting for it) before the sockets close. */
static void out_drain(void)
{
    double until = tcp_now() + 2;
    while (tcp->nbusy && pfd_reserve(tcp->nbusy) == 0) {
        int n = 0;
        for (int i = 0; i < tcp->nbusy; i++) {
            struct tcp_peer *p = &tcp->peers[tcp->busy[i]];
            if (p->state == OUT_UP && p->stage_len && out_flush(tcp->busy[i]) >= 0 && p->stage_len)
                tcp->pfd[n++] = (struct pollfd){p->fd, POLLOUT, 0};
        }
        if (n == 0)
            break;
        if (tcp_now() > until) {
            CADRE_INFO(P2P, "tcp: finalize: %d peers did not take their last bytes", n);
            break;
        }
        poll(tcp->pfd, (nfds_t)n, 10);
    }
}

static void tcp_finalize(void)
{
    out_drain();
    cadre__p2p_tcp_end_shared();
    for (int i = 0; i < tcp->nin; i++) {
        cadre__p2p_tcp_in_close(tcp->in[i]);
        free(tcp->in[i]->big);
        free(tcp->in[i]);
    }
    for (int i = 0; tcp->peers && i < tcp->size; i++) {
        out_close(&tcp->peers[i]);
        free(tcp->peers[i].addr);
        free(tcp->peers[i].try);
        free(tcp->peers[i].stage);
    }
    cadre__p2p_tcp_close_listeners();
    free(tcp->in);
    free(tcp->peers);
    free(tcp->busy);
    free(tcp->pfd);
    memset(tcp, 0, sizeof *tcp);
}

static int tcp_init(void)
{
    tcp_finalize();
    long bufsize = cadre__config_int(CADRE_CFG_TCP_BUFFER);
    if (bufsize != 0 && (bufsize < 4096 || bufsize > (1L << 30)))
        return cadre__error(CADRE_ERR_ARG,
                            "cadre_init: CADRE_TCP_BUFFER=%ld out of range (0, or 4096..1 GiB)",
                            bufsize);
    tcp->bufsize = (int)bufsize;
    tcp->rank = cadre__proc.rank;
    tcp->size = cadre__proc.size;
    tcp->peers = calloc((size_t)tcp->size, sizeof *tcp->peers);
    tcp->busy = calloc((size_t)tcp->size, sizeof *tcp->busy);
    if (!tcp->peers || !tcp->busy) {
        tcp_finalize();
        return cadre__error(CADRE_ERR_NOMEM, "tcp: out of memory for %d peers", tcp->size);
    }
    for (int i = 0; i < tcp->size; i++) {
        tcp->peers[i].fd = -1;
        tcp->peers[i].naddr = -1;
    }

    tcp->timeout = cadre__config_dbl(CADRE_CFG_TIMEOUT);
    tcp->peer_timeout = cadre__config_dbl(CADRE_CFG_TCP_PEER_TIMEOUT);
    if (!(tcp->peer_timeout >= 1 && tcp->peer_timeout <= 3600)) {
        double bad = tcp->peer_timeout;
        tcp_finalize();
        return cadre__error(CADRE_ERR_ARG,
                            "cadre_init: CADRE_TCP_PEER_TIMEOUT=%g out of range (1..3600 s)", bad);
    }

    size_t cap = sizeof(struct tcp_blob) + TCP_MAX_ADDRS * sizeof(struct tcp_blob_addr);
    uint64_t buf[(sizeof(struct tcp_blob) + TCP_MAX_ADDRS * sizeof(struct tcp_blob_addr)) / 8 + 1];
    struct tcp_blob *b = (struct tcp_blob *)buf;
    memset(b, 0, cap);
    int naddr = cadre__p2p_tcp_local_addrs(b->a);
    if (naddr < 0) {
        tcp_finalize();
        return CADRE_ERR_ARG;
    }
    const char *what = NULL;
    uint16_t port = cadre__p2p_tcp_listen(b->a, &naddr, &what);
    if (port == 0) {
        int err = errno;
        tcp_finalize();
        return cadre__error(CADRE_ERR_INTERNAL, "tcp: %s: %s", what, strerror(err));
    }
    b->magic = TCP_MAGIC;
    b->version = TCP_BLOB_VERSION;
    b->port = port;
    b->naddr = (uint32_t)naddr;
    b->netns = tcp->netns = cadre__p2p_tcp_netns();
    if (gethostname(b->host, sizeof b->host - 1))
        snprintf(b->host, sizeof b->host, "?");
    memcpy(tcp->host, b->host, sizeof tcp->host);
    int rc = cadre__bootstrap_put(TCP_KEY, b, sizeof *b + b->naddr * sizeof b->a[0]);
    if (rc != CADRE_SUCCESS) {
        tcp_finalize();
        return rc;
    }
    if (cadre__log_enabled(CADRE_LOG_INFO, CADRE_SUBSYS_P2P)) {
        char list[TCP_MAX_ADDRS * (INET_ADDRSTRLEN + TCP_IFNAMSIZ + 12)] = "", ip[INET_ADDRSTRLEN];
        for (uint32_t i = 0; i < b->naddr; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s:%u (%s)",
                     i ? ", " : "", tcp_ip_str(b->a[i].addr, ip), ntohs(port), b->a[i].ifname);
        CADRE_INFO(P2P, "tcp: listening on %s", list);
    }
    return CADRE_SUCCESS;
}

static int tcp_wireup(void)
{
    return CADRE_SUCCESS; /* connections are made on first use */
}

static size_t tcp_max_payload(int peer)
{
    (void)peer;
    return TCP_MAX_PAYLOAD;
}

const struct cadre_p2p_transport cadre__p2p_tcp = {
    .name = "tcp",
    .init = tcp_init,
    .wireup = tcp_wireup,
    .reachable = tcp_reachable,
    .max_payload = tcp_max_payload,
    .send = tcp_send,
    .progress = tcp_progress,
    .pollfds = tcp_pollfds,
    .idle = tcp_idle,
    .release_dest = cadre__p2p_tcp_release_dest,
    .drain = drain_in,
    .finalize = tcp_finalize,
};
