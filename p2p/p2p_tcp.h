/*
 * p2p_tcp.h - shared by the three files of the TCP transport: p2p_tcp.c
 * (setup, sending, progress), p2p_tcp_conn.c (listeners, connecting) and
 * p2p_tcp_recv.c (accepting, handshakes, receiving). Nothing outside them
 * includes it. See p2p_tcp.c for the design.
 */
#ifndef CADRE_P2P_TCP_H
#define CADRE_P2P_TCP_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "p2p/p2p.h"
#include "p2p/p2p_tcp_if.h"

#define TCP_MAGIC 0x43445443u /* "CTDC" */
#define TCP_VERSION 2u      /* of the handshake; 2: a connection may carry both ways */
/* In the version of a handshake's answer: the answering side writes on this
 * connection too (it had none to the peer), and will make none. */
#define TCP_BOTH_WAYS 0x10000u
#define TCP_BLOB_VERSION 2u /* of the endpoint blob */
#define TCP_MAX_PAYLOAD (1024u << 10)
#define TCP_RBUF 8192          /* per inbound socket: headers and small payloads */
#define TCP_MSGS_PER_CALL 64   /* per socket and progress call: fairness */
#define TCP_HELLO_TIMEOUT 30   /* seconds for the answer to our hello */
#define TCP_DRAIN_IN_WAIT 0.5  /* seconds to read a peer's last messages after its reset */
/* An accepted connection that has not said who it is: a peer's hello is
 * written as soon as its connect completes, so anything silent for longer
 * than TCP_IN_HELLO_TIMEOUT is closed; past TCP_MAX_PENDING of them the
 * oldest is closed to make room (a peer that loses its connection so
 * dials again: tcp_peer's retry). Nothing unauthenticated is ever a
 * reason to refuse a new connection. */
#define TCP_IN_HELLO_TIMEOUT 2.0
#define TCP_MAX_PENDING 256
#define TCP_MAX_ADDRS 16       /* addresses a rank publishes and listens on */
#define TCP_HDR sizeof(struct cadre_p2p_hdr)

struct tcp_hello {
    uint32_t magic, version;
    int32_t from, to;
    uint64_t cookie;
};

/* OUT_CONNECTING: connects to every address of the peer at once, each
 * through its own handshake (struct tcp_try), the first answered wins.
 * OUT_RETRY: every address was tried and reset or refused the connection
 * (a crowded or slow listener); waiting for deadline to try them again. */
enum { OUT_NONE, OUT_CONNECTING, OUT_UP, OUT_FAILED, OUT_RETRY };
enum { TRY_DONE, TRY_CONNECTING, TRY_HELLO };
enum { IN_HELLO, IN_HDR, IN_BODY };

struct tcp_in {
    int fd, peer; /* peer is -1 until the hello was accepted */
    int state;
    int bye;  /* BYE seen: EOF is orderly */
    int more; /* complete messages left in rbuf (the per-call budget ran out) */
    double deadline;
    char from[32];          /* address:port, for the log */
    struct cadre_p2p_hdr h; /* header of the body being read */
    char *body;
    size_t need, got;
    char *big; /* max_payload bytes, for large payloads without a destination */
    size_t rpos, rlen;
    char rbuf[TCP_RBUF];
};

/* Endpoint blob published with cadre__bootstrap_put: the addresses in
 * network order, each with its interface's name (loopback ones last, for
 * peers whose netns is the same); host: the hostname, for messages. */
struct tcp_blob_addr {
    uint32_t addr;
    char ifname[TCP_IFNAMSIZ];
};
struct tcp_blob {
    uint32_t magic;
    uint16_t version;
    uint16_t port; /* network order */
    uint32_t naddr, pad;
    uint64_t netns; /* same value: same network namespace of the same boot */
    char host[64];
    struct tcp_blob_addr a[];
};

/* One connect (and its handshake) to one address of a peer. */
struct tcp_try {
    int fd, state;
    double deadline; /* of the handshake's answer */
    size_t ack_got;
    struct tcp_hello ack;
};

struct tcp_peer {
    /* outbound: the connection we write to the peer on, for the whole job:
     * the one we made, or the peer's (shared) */
    int fd, state;
    /* fd is also an inbound socket's: the peer's connection, answered while
     * we had none to it (in), or ours, which the peer may write on too
     * (back). Whichever side lets go of it last closes it. */
    int shared;
    int busy; /* in tcp->busy: connecting or staged data */
    int naddr; /* -1: blob not fetched yet */
    uint16_t port;
    struct tcp_blob_addr *addr; /* those worth trying from here */
    struct tcp_try *try;        /* one per address */
    char host[64];              /* from the blob; "" before it is read */
    double deadline;
    /* retrying: until retry_until (refused alone: refused_until), after
     * backoff seconds; pass_retry says what the current pass over the
     * addresses met: 0 nothing worth a retry, 1 refused, 2 reset or closed */
    double retry_until, refused_until, backoff;
    int pass_retry, tries;
    char last[200]; /* the failures of the last pass, for the message that gives up */
    char *stage;
    size_t stage_off, stage_len;
    /* inbound: the connection the peer made (in), and the reader of ours
     * (back) */
    struct tcp_in *in, *back;
    int seen_in, failed;
};

struct tcp_state {
    int lfd[TCP_MAX_ADDRS], nlfd; /* one listener per published address, one port */
    int rank, size;
    double timeout; /* CADRE_TIMEOUT: bounds the retries of a connect */
    double peer_timeout; /* CADRE_TCP_PEER_TIMEOUT: unanswered connects, keepalive */
    uint64_t netns;
    char host[64];
    int slept; /* pollfds was called: the engine is about to sleep */
    int bufsize; /* CADRE_TCP_BUFFER: SO_SNDBUF and SO_RCVBUF; 0 = the kernel's */
    uint64_t calls;
    struct tcp_peer *peers;
    struct tcp_in **in;
    int nin, capin, npending;
    int *busy;
    int nbusy;
    struct pollfd *pfd; /* scratch for poll in send and progress */
    int cappfd;
};

extern struct tcp_state cadre__p2p_tcp_state;

#define TCP_KEY "tcp"

/* p2p_tcp_conn.c: the addresses to publish (CADRE_SOCKET_IFNAME,
 * p2p_tcp_if.c), or -1 and an error; a listener on each of the n
 * addresses, all on one port, returned in network order (addresses that
 * cannot be bound are dropped from a and *n; 0 and errno, *what the
 * failing call, when none is left); closing them. */
int cadre__p2p_tcp_local_addrs(struct tcp_blob_addr *a);
uint16_t cadre__p2p_tcp_listen(struct tcp_blob_addr *a, int *n, const char **what);
void cadre__p2p_tcp_close_listeners(void);
/* This process's network namespace, for the blob's netns (0: unknown). */
uint64_t cadre__p2p_tcp_netns(void);
/* The first connect to a peer (its endpoint fetched on first use), and
 * the connection moved on through RETRY, CONNECTING and HELLO without
 * blocking; both fail the peer when no address is left to try. */
int cadre__p2p_tcp_connect(int peer);
int cadre__p2p_tcp_advance(int peer);

/* At finalize: ends our side of the connections that carry both ways, once
 * what we wrote has gone out (p2p_tcp_conn.c). */
void cadre__p2p_tcp_end_shared(void);

/* Reports the peer gone (once), naming its host, and closes its sockets;
 * returns CADRE_ERR_PEER. */
int cadre__p2p_tcp_peer_fail(int peer, const char *fmt, ...) CADRE_PRINTF(2, 3);
void cadre__p2p_tcp_in_close(struct tcp_in *c);
/* Starts reading our own new connection to the peer, which its answer said
 * it writes on too (the back reader); 0, or fails the peer. */
int cadre__p2p_tcp_in_back(int peer);
/* Reads and delivers what one inbound socket has; returns events. */
int cadre__p2p_tcp_in_progress(struct tcp_in *c);
/* The transport's release_dest (p2p.h): a body being read into
 * [buf, buf+len) goes to the staging buffer instead. */
void cadre__p2p_tcp_release_dest(int peer, const char *buf, size_t len);
/* Accepts pending connections; returns how many. */
int cadre__p2p_tcp_accept(void);
/* Frees closed connections, refuses handshakes that never completed. */
void cadre__p2p_tcp_sweep(void);

static inline const char *tcp_ip_str(uint32_t a, char *buf)
{
    struct in_addr ia = {.s_addr = a};
    return inet_ntop(AF_INET, &ia, buf, INET_ADDRSTRLEN) ? buf : "?";
}

/* Connecting peers and peers with staged data, watched by progress. */
static inline void cadre__p2p_tcp_busy_add(int peer)
{
    struct tcp_state *t = &cadre__p2p_tcp_state;
    if (!t->peers[peer].busy) {
        t->peers[peer].busy = 1;
        t->busy[t->nbusy++] = peer;
    }
}

static inline double tcp_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int tcp_has_payload(uint8_t type)
{
    return cadre__p2p_has_payload(type);
}

/* No Nagle delay. A peer whose host died, or whose link was cut, sends no
 * FIN or RST: keepalive probes after a third of CADRE_TCP_PEER_TIMEOUT of
 * silence, and TCP_USER_TIMEOUT (which also ends the probing), make the
 * kernel fail the connection (ETIMEDOUT) once the peer has answered
 * nothing, neither data nor probe, for that long. A live peer answers the
 * probes (its kernel does) even while it does not read. */
static inline void tcp_sockopts(int fd)
{
    double t = cadre__p2p_tcp_state.peer_timeout;
    int one = 1, idle = t >= 3 ? (int)(t / 3) : 1, intvl = 1;
    int cnt = (int)t - idle > 1 ? (int)t - idle : 1;
    unsigned user = (unsigned)(t * 1000);
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) ||
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one) ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle) ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl) ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt) ||
        setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user, sizeof user))
        CADRE_INFO(P2P, "tcp: setsockopt: %s", strerror(errno));
    int b = cadre__p2p_tcp_state.bufsize;
    if (b && (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &b, sizeof b) ||
              setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &b, sizeof b)))
        CADRE_INFO(P2P, "tcp: setsockopt (CADRE_TCP_BUFFER): %s", strerror(errno));
}

#endif /* CADRE_P2P_TCP_H */
