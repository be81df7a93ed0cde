/*
 * p2p_tcp_recv.c - the receiving half of the TCP transport: accepting
 * connections, checking their handshakes, and a state machine per inbound
 * socket that reads headers and small payloads in one recv (often several
 * messages), and larger payloads straight into their destination. A corrupt
 * header fails that peer; EOF is orderly only after the peer's BYE.
 */
#include "config.h"

#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "p2p/p2p_tcp.h"

static struct tcp_state *const tcp = &cadre__p2p_tcp_state;

/* The framing a socket carries; the engine checks the rest. */
static const struct cadre_p2p_wire tcp_wire = {.types = CADRE_P2P_TYPES_ALL,
                                               .max_payload = TCP_MAX_PAYLOAD};

/* Stops reading c. A connection that also carries our messages to the
 * peer stays open for them (the sending side closes it). */
void cadre__p2p_tcp_in_close(struct tcp_in *c)
{
    if (c->fd < 0)
        return;
    struct tcp_peer *p = c->peer >= 0 ? &tcp->peers[c->peer] : NULL;
    if (p && p->shared && p->fd == c->fd)
        p->shared = 0;
    else
        close(c->fd);
    c->fd = -1;
    if (!p)
        tcp->npending--;
    else if (p->in == c)
        p->in = NULL;
    else if (p->back == c)
        p->back = NULL;
}

static void in_refuse(struct tcp_in *c, const char *why)
{
    CADRE_INFO(P2P, "tcp: refused a connection from %s: %s", c->from, why);
    cadre__p2p_tcp_in_close(c);
}

static int in_hello(struct tcp_in *c)
{
    struct tcp_hello h;
    memcpy(&h, c->rbuf + c->rpos, sizeof h);
    char why[128] = "";
    if (h.magic != TCP_MAGIC || h.version != TCP_VERSION)
        snprintf(why, sizeof why, "not a cadre tcp handshake (magic %#x, version %u)", h.magic,
                 h.version);
    else if (h.cookie != cadre__p2p_info.job_cookie)
        snprintf(why, sizeof why, "wrong job cookie from a process claiming rank %d", h.from);
    else if (h.to != tcp->rank)
        snprintf(why, sizeof why, "meant for rank %d", h.to);
    else if (h.from < 0 || h.from >= tcp->size)
        snprintf(why, sizeof why, "rank %d out of range", h.from);
    else if (h.from == tcp->rank)
        snprintf(why, sizeof why, "claims to be this rank (%d)", h.from);
    else if (tcp->peers[h.from].seen_in || tcp->peers[h.from].failed)
        snprintf(why, sizeof why, "rank %d is already connected (or failed)", h.from);
    if (why[0]) {
        in_refuse(c, why);
        return -1;
    }
    /* No connection of ours to it yet: we will write on this one (the
     * answer says so), so that each side's acknowledgements ride on the
     * other's messages (two connections, one each way, send a bare ACK
     * packet for every other message: a 56-byte round trip over loopback
     * took 6.5-7.5 us against 4.3-5.1 on one connection). */
    struct tcp_peer *p = &tcp->peers[h.from];
    int both = p->state == OUT_NONE;
    struct tcp_hello ack = {TCP_MAGIC, TCP_VERSION | (both ? TCP_BOTH_WAYS : 0), tcp->rank, h.from,
                            cadre__p2p_info.job_cookie};
    if (send(c->fd, &ack, sizeof ack, MSG_NOSIGNAL) != (ssize_t)sizeof ack) {
        in_refuse(c, "could not answer the handshake");
        return -1;
    }
    tcp->npending--;
    c->peer = h.from;
    c->state = IN_HDR;
    c->rpos += sizeof h;
    p->in = c;
    p->seen_in = 1;
    CADRE_TRACE(P2P, "tcp: rank %d connected", h.from);
    if (both) {
        p->fd = c->fd;
        p->shared = 1;
        p->state = OUT_UP;
        CADRE_INFO(P2P, "tcp: rank %d reached on its connection from %s", h.from, c->from);
    }
    return 0;
}

/* The connection's staging buffer (TCP_MAX_PAYLOAD bytes), allocated on
 * first use; fails the peer when there is no memory for a message of n. */
static int in_big(struct tcp_in *c, size_t n)
{
    if (c->big || (c->big = malloc(TCP_MAX_PAYLOAD)))
        return 0;
    cadre__p2p_tcp_peer_fail(c->peer, "out of memory for a %zu-byte message", n);
    return -1;
}

static void in_deliver(struct tcp_in *c, const struct cadre_p2p_hdr *h, const void *payload)
{
    if (h->type == CADRE_P2P_BYE)
        c->bye = 1;
    cadre__p2p_incoming(c->peer, h, payload);
}

/* Delivers the complete messages in rbuf; starts a body read for a message
 * whose payload is not all there. Returns messages delivered, -1 when the
 * connection was closed. */
static int in_parse(struct tcp_in *c, int budget)
{
    int msgs = 0;
    while (c->fd >= 0 && msgs < budget) {
        size_t avail = c->rlen - c->rpos;
        if (c->state == IN_HELLO) {
            if (avail < sizeof(struct tcp_hello) || in_hello(c))
                break;
            continue;
        }
        if (avail < TCP_HDR)
            break;
        struct cadre_p2p_hdr h;
        memcpy(&h, c->rbuf + c->rpos, TCP_HDR);
        char why[160];
        if (cadre__p2p_hdr_check(&h, &tcp_wire, why, sizeof why) != CADRE_P2P_HDR_OK) {
            cadre__p2p_tcp_peer_fail(c->peer, "corrupt message header from rank %d: %s", c->peer,
                                     why);
            return -1;
        }
        size_t plen = tcp_has_payload(h.type) ? (size_t)h.len : 0;
        void *dest = h.type == CADRE_P2P_DATA ? cadre__p2p_data_dest(c->peer, &h) : NULL;
        avail -= TCP_HDR;
        char *at = c->rbuf + c->rpos + TCP_HDR;
        if (avail >= plen) {
            c->rpos += TCP_HDR + plen;
            if (dest && plen)
                memcpy(dest, at, plen);
            in_deliver(c, &h, dest ? dest : at);
            msgs++;
            continue;
        }
        /* The rest of the payload is read straight into its place: DATA's,
         * or the receive a large EAGER matches. The staging buffer exists
         * before a claim, for release_dest. */
        c->h = h;
        if (!dest && TCP_HDR + plen > TCP_RBUF) {
            if (in_big(c, plen))
                return -1;
            if (h.type == CADRE_P2P_EAGER)
                dest = cadre__p2p_eager_dest(c->peer, &h);
            if (!dest)
                dest = c->big;
        }
        if (dest) {
            c->body = dest;
        } else {
            memmove(c->rbuf, at, avail);
            at = c->body = c->rbuf;
        }
        if (at != c->body)
            memcpy(c->body, at, avail);
        c->got = avail;
        c->need = plen;
        c->rpos = c->rlen = 0;
        c->state = IN_BODY;
        break;
    }
    if (c->rpos == c->rlen)
        c->rpos = c->rlen = 0;
    return c->fd >= 0 ? msgs : -1;
}

/* recv returned n <= 0. Returns 0 when the socket is drained, -1 when closed. */
static int in_read_end(struct tcp_in *c, ssize_t n)
{
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    if (c->peer < 0) {
        in_refuse(c, n == 0 ? "closed before its handshake" : strerror(errno));
    } else if (c->bye && c->state == IN_HDR && c->rlen == 0 &&
               (n == 0 || errno == ECONNRESET || errno == EPIPE)) {
        /* A reset after the BYE is an orderly end too: the peer closed a
         * connection that carried both ways while our last messages
         * (our BYE) were still unread there. */
        CADRE_TRACE(P2P, "tcp: rank %d closed its connection after BYE", c->peer);
        cadre__p2p_tcp_in_close(c);
    } else if (n == 0) {
        int clean = c->state == IN_HDR && c->rlen == 0;
        cadre__p2p_tcp_peer_fail(c->peer, "connection closed by rank %d%s", c->peer,
                                 clean ? "" : " in the middle of a message");
    } else if (errno == ETIMEDOUT || errno == EHOSTUNREACH) {
        /* keepalive or TCP_USER_TIMEOUT: its host died, or the link is cut */
        cadre__p2p_tcp_peer_fail(c->peer, "unreachable: no answer for %g s (receiving from rank "
                                          "%d: %s)",
                                 tcp->peer_timeout, c->peer, strerror(errno));
    } else {
        cadre__p2p_tcp_peer_fail(c->peer, "receiving from rank %d: %s", c->peer, strerror(errno));
    }
    return -1;
}

/* At most TCP_MSGS_PER_CALL messages per call. */
int cadre__p2p_tcp_in_progress(struct tcp_in *c)
{
    int msgs = 0, events = 0;
    c->more = 0;
    for (;;) {
        if (c->state == IN_BODY) {
            size_t want = c->need - c->got;
            ssize_t n = want ? recv(c->fd, c->body + c->got, want, 0) : 0;
            if (want && n <= 0)
                return in_read_end(c, n) < 0 ? events + 1 : events;
            c->got += (size_t)n;
            events++;
            if (c->got < c->need) {
                if ((size_t)n < want)
                    return events; /* drained for now */
                continue;
            }
            c->state = IN_HDR;
            in_deliver(c, &c->h, c->body);
            /* A payload read on its own ends the call: the waiter sees its
             * message one recv() sooner (usually an EAGAIN, about a
             * microsecond here); what follows is read by the next call. */
            return events;
        }
        int m = in_parse(c, TCP_MSGS_PER_CALL - msgs);
        if (m < 0)
            return events + msgs + 1;
        msgs += m;
        events += m;
        if (c->state == IN_BODY)
            continue;
        if (msgs >= TCP_MSGS_PER_CALL) {
            size_t unit = c->state == IN_HELLO ? sizeof(struct tcp_hello) : TCP_HDR;
            c->more = c->rlen - c->rpos >= unit;
            return events;
        }
        if (c->rpos > 0) { /* keep a partial header at the front */
            memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
            c->rlen -= c->rpos;
            c->rpos = 0;
        }
        size_t room = TCP_RBUF - c->rlen; /* > 0: a message that fits is read in place */
        ssize_t n = recv(c->fd, c->rbuf + c->rlen, room, 0);
        if (n <= 0)
            return in_read_end(c, n) < 0 ? events + 1 : events;
        c->rlen += (size_t)n;
        if ((size_t)n < room) { /* drained: parse, then stop without another recv */
            m = in_parse(c, TCP_MSGS_PER_CALL - msgs);
            if (m < 0)
                return events + 1;
            events += m;
            msgs += m;
            c->more = c->state != IN_BODY && msgs >= TCP_MSGS_PER_CALL &&
                      c->rlen - c->rpos >= TCP_HDR;
            return events + 1;
        }
    }
}

static void release_dest(struct tcp_in *c, int peer, const char *buf, size_t len)
{
    if (!c || c->fd < 0 || c->state != IN_BODY)
        return;
    uintptr_t b = (uintptr_t)c->body, lo = (uintptr_t)buf;
    if (b < lo || b - lo >= len)
        return;
    if (in_big(c, c->need))
        return;
    /* DATA for a receive that is gone is dropped when whole; an EAGER
     * payload is kept and matched again. */
    CADRE_INFO(P2P, "tcp: the receive a %s payload from rank %d was read into is gone, %zu of %zu "
                    "bytes read; the rest goes to the staging buffer",
               c->h.type == CADRE_P2P_EAGER ? "EAGER" : "DATA", peer, c->got, c->need);
    if (c->h.type == CADRE_P2P_EAGER)
        memcpy(c->big, c->body, c->got);
    c->body = c->big;
}

/* Either connection with the peer may be reading into it. */
void cadre__p2p_tcp_release_dest(int peer, const char *buf, size_t len)
{
    if (peer < 0 || peer >= tcp->size)
        return;
    release_dest(tcp->peers[peer].in, peer, buf, len);
    release_dest(tcp->peers[peer].back, peer, buf, len);
}

/* Closes the connection that has waited longest for its handshake, to make
 * room: the listener never refuses a peer because strangers came first. */
static int evict_oldest(const char *why)
{
    struct tcp_in *old = NULL;
    for (int i = 0; i < tcp->nin; i++) {
        struct tcp_in *c = tcp->in[i];
        if (c->fd >= 0 && c->peer < 0 && (!old || c->deadline < old->deadline))
            old = c;
    }
    if (!old)
        return 0;
    cadre__p2p_tcp_in_progress(old); /* its hello may be there by now */
    if (old->fd >= 0 && old->peer < 0)
        in_refuse(old, why);
    return 1;
}

/* A reader of fd, in tcp->in, or NULL (no memory). */
static struct tcp_in *in_new(int fd, const struct sockaddr_in *sa)
{
    if (tcp->nin == tcp->capin) {
        int cap = tcp->capin ? 2 * tcp->capin : 16;
        struct tcp_in **a = realloc(tcp->in, (size_t)cap * sizeof *a);
        if (!a)
            return NULL;
        tcp->in = a;
        tcp->capin = cap;
    }
    struct tcp_in *c = malloc(sizeof *c);
    if (!c)
        return NULL;
    memset(c, 0, offsetof(struct tcp_in, rbuf));
    c->fd = fd;
    c->peer = -1;
    snprintf(c->from, sizeof c->from, "?");
    if (sa->sin_family == AF_INET && inet_ntop(AF_INET, &sa->sin_addr, c->from, sizeof c->from))
        snprintf(c->from + strlen(c->from), sizeof c->from - strlen(c->from), ":%u",
                 ntohs(sa->sin_port));
    tcp->in[tcp->nin++] = c;
    return c;
}

int cadre__p2p_tcp_in_back(int peer)
{
    struct tcp_peer *p = &tcp->peers[peer];
    struct sockaddr_in sa = {0};
    socklen_t sl = sizeof sa;
    (void)getpeername(p->fd, (struct sockaddr *)&sa, &sl);
    struct tcp_in *c = in_new(p->fd, &sa);
    if (!c)
        return cadre__p2p_tcp_peer_fail(peer, "out of memory for reading rank %d's connection",
                                        peer);
    c->peer = peer;
    c->state = IN_HDR;
    p->back = c;
    p->shared = 1;
    return 0;
}

/* A new connection, in its handshake; its hello is read at once when it is
 * there (a peer writes it as soon as its connect completes). */
static int in_add(int fd, const struct sockaddr_in *sa)
{
    if (tcp->npending >= TCP_MAX_PENDING)
        evict_oldest("the oldest of too many handshakes");
    struct tcp_in *c = in_new(fd, sa);
    if (!c)
        return -1;
    c->state = IN_HELLO;
    c->deadline = tcp_now() + TCP_IN_HELLO_TIMEOUT;
    tcp_sockopts(fd);
    tcp->npending++;
    return cadre__p2p_tcp_in_progress(c);
}

/* Takes every connection waiting on the listeners (at most
 * 4 * TCP_MAX_PENDING per call, so that a flood does not stop progress):
 * one left in the kernel's queue would reach its handshake late, or find
 * the queue full. */
int cadre__p2p_tcp_accept(void)
{
    int events = 0, budget = 4 * TCP_MAX_PENDING;
    /* With several listeners, one poll finds those with connections: one
     * syscall when there are none, as with a single listener. */
    struct pollfd pf[TCP_MAX_ADDRS];
    for (int l = 0; l < tcp->nlfd; l++)
        pf[l] = (struct pollfd){tcp->lfd[l], POLLIN, tcp->nlfd == 1 ? POLLIN : 0};
    if (tcp->nlfd > 1 && poll(pf, (nfds_t)tcp->nlfd, 0) <= 0)
        return 0;
    for (int l = 0; l < tcp->nlfd; l++) {
        while (pf[l].revents && budget-- > 0) {
            struct sockaddr_in sa;
            socklen_t sl = sizeof sa;
            int fd = accept4(tcp->lfd[l], (struct sockaddr *)&sa, &sl,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno == EINTR || errno == ECONNABORTED)
                    continue;
                /* Out of descriptors: strangers' connections make room
                 * for what waits, a peer's maybe. */
                if ((errno == EMFILE || errno == ENFILE) &&
                    evict_oldest("out of file descriptors"))
                    continue;
                static int logged; /* EMFILE would repeat on every call */
                if (errno != EAGAIN && errno != EWOULDBLOCK && !logged++)
                    CADRE_WARN(P2P, "tcp: accept: %s", strerror(errno));
                break;
            }
            events++;
            int m = in_add(fd, &sa);
            if (m < 0) {
                CADRE_INFO(P2P, "tcp: out of memory for an accepted connection");
                close(fd);
            } else {
                events += m;
            }
        }
    }
    return events;
}

void cadre__p2p_tcp_sweep(void)
{
    double t = tcp->npending ? tcp_now() : 0;
    for (int i = 0; i < tcp->nin; i++) {
        struct tcp_in *c = tcp->in[i];
        if (c->fd >= 0 && c->peer < 0 && t > c->deadline)
            in_refuse(c, "no handshake in time");
        if (c->fd < 0) {
            free(c->big);
            free(c);
            tcp->in[i--] = tcp->in[--tcp->nin];
        }
    }
}
