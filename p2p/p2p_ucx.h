/*
 * p2p_ucx.h - shared by the files of the UCX transport: p2p_ucx.c (setup,
 * choice, progress, sleeping, liveness, finalize), p2p_ucx_wire.c (wireup,
 * endpoints, each pair's agreement on ucx), p2p_ucx_send.c
 * (endpoints, sending, peer failure), p2p_ucx_recv.c (the active-message
 * handler, in-order delivery, rendezvous receives) and p2p_ucx_pull.c (the
 * data of large messages, held until received). Nothing outside them
 * includes it. See p2p_ucx.c for the design.
 */
#ifndef CADRE_P2P_UCX_H
#define CADRE_P2P_UCX_H

#include "config.h"

#include <stdint.h>
#include <time.h>

#include "p2p/p2p.h"
#include "p2p/p2p_ucx_load.h"

#if HAVE_UCX

#define UCX_MAGIC 0x58554443u /* "CDUX" */
#define UCX_BLOB_VERSION 1u
#define UCX_AM_ID 17                  /* cadre's active message */
/* Largest EAGER payload; larger: the RTS with its data (p2p_ucx_pull.c). An EAGER
 * message is one active message. Over RDMA its protocol is UCX's choice:
 * eager (copies) or, above UCX's rendezvous threshold, its own rendezvous
 * into the posted receive (cadre__p2p_eager_dest), one round trip fewer
 * than RTS/CTS. Over UCX's tcp (no RDMA in the context) it is UCX's eager
 * protocol (st->eager_proto) unless the user set UCX_RNDV_THRESH: there UCX's rendezvous (from 20 KiB in UCX
 * 1.13) is a put emulated over the same socket, which saves one copy at
 * the price of a round trip, and the receiver can run one EAGER
 * rendezvous at a time per peer (one claim), so that a stream of 64 KiB
 * messages paid a round trip (and under load a wakeup of each side) per
 * message; up to UCX_TCP_EAGER. */
#define UCX_EAGER (256u << 10)
#define UCX_EAGER_IMM (16u << 10)     /* larger EAGER payloads: no try at once, a copy */
/* Over UCX's tcp (st->eager_proto), EAGER payloads up to this take UCX's
 * eager protocol; larger ones UCX's choice (its rendezvous): measured on
 * the namespace test bed, UCX 1.13, one way: 32 KiB 140 us against 354 by
 * UCX's rendezvous, 128 KiB 431 against 633, but 256 KiB 1996 against 1177
 * (UCX's eager over tcp in many fragments is slow there: ucx_perftest
 * alone showed the same). */
#define UCX_TCP_EAGER (128u << 10)
#define UCX_MAX_PAYLOAD (64u << 20)   /* largest RTS or DATA payload: one rendezvous */
#define UCX_RNDV_AHEAD 2              /* pulls, and DATA receives, at once per peer */
#define UCX_BYE_WAIT 0.5              /* s to read a failed peer's last messages (its BYE) */
#define UCX_CLOSE_WAIT 2.0            /* s for the endpoints' flush at finalize */
#define UCX_HOST_MAX 64

/* Kinds of active message. */
enum { UK_MSG = 1, UK_HB = 2 };

/* The active message's header: who sends (the job's secret proves it is
 * of this job), the message's place in the pair's stream (tseq, from 1:
 * delivered in that order, whatever order UCX hands them over in), and
 * cadre's header. A heartbeat (UK_HB) has tseq 0 and no cadre header. */
struct ucx_wire {
    uint64_t cookie;
    uint64_t tseq;
    int32_t from;
    uint32_t kind;
    struct cadre_p2p_hdr h;
};

/* Endpoint blob published with cadre__bootstrap_put ("ucx"). */
struct ucx_blob {
    uint32_t magic;
    uint16_t version;
    uint16_t pad;
    uint32_t addrlen; /* bytes of the worker address after the blob */
    uint32_t pad2;
    char host[UCX_HOST_MAX];
    unsigned char addr[];
};

/* One arrived message waiting for its turn (tseq order). */
enum { IN_WAIT, IN_RECV, IN_READY };
struct ucx_in {
    struct ucx_wire w;
    void *data;   /* the payload (UCX's, held), or a rendezvous descriptor */
    size_t len;
    int held;     /* data is UCX's: ucp_am_data_release after delivery */
    int rndv;     /* data is a rendezvous descriptor to receive from */
    int state;
    char *buf;    /* where a rendezvous lands: the receive's buffer or own */
    int own;      /* buf is malloc'ed here */
    int status;   /* of the rendezvous receive: 0, or a ucs_status_t */
    struct ucx_in *next;
};

/* A message whose data came with its RTS (UCX's rendezvous descriptor, or
 * the data itself where UCX sent it eagerly), held until a receive takes it
 * (its CTS: PL_WANT), pulled into the receive's buffer (PL_RECV), then
 * passed to the engine as DATA (PL_DONE). p2p_ucx_pull.c. */
enum { PL_HELD, PL_WANT, PL_RECV, PL_DONE };
struct ucx_pull {
    uint64_t sreq, rreq;
    void *data;   /* the descriptor (rndv), UCX's data (held), or a copy of ours */
    size_t len;   /* the message's bytes */
    size_t xfer;  /* of those, the receive's (fewer: truncated) */
    int rndv, held;
    int state;
    int status;   /* of the pull: 0, or a ucs_status_t */
    char *dest;   /* the receive's buffer (cadre__p2p_data_dest), or NULL: gone */
    char *buf;    /* where the pull lands: dest, or own (truncation: all len bytes) */
    int own;
    struct ucx_pull *next;
};

/* A send UCX completes later: its header (UCX reads it until then), the
 * bounce copy of an eager payload, or the DATA whose sender's buffer UCX
 * reads (reported with cadre__p2p_sent). */
struct ucx_op {
    struct ucx_wire w;
    int peer;
    int later;       /* a DATA sent with CADRE_P2P_LATER */
    int cuda;        /* its payload is device memory (CADRE_P2P_DEVMEM) */
    int status;      /* ucs_status_t once done */
    void *req;       /* UCX's request, until done */
    struct ucx_op *next, *prev;
    char bounce[];   /* eager payload copy */
};

/* EP_GOING: being failed (cadre__ucx_peer_gone runs). */
enum { EP_NONE, EP_UP, EP_GOING, EP_FAILED };
struct ucx_peer {
    ucp_ep_h ep;
    int state;
    int bye;          /* its BYE went by: silence is no failure */
    int reachable;    /* it published an address (and is off-host), and both
                       * sides made their endpoint at wireup */
    int ep_status;    /* ucp_ep_create's failure at wireup (a ucs_status_t), or 0 */
    uint64_t send_tseq, recv_tseq; /* last sent; last delivered */
    struct ucx_in *in, *in_tail;   /* arrived, by tseq */
    struct ucx_pull *pulls, *pulls_tail; /* RTS with data, delivered, in order */
    int ops;          /* sends in flight to it */
    double last_heard, last_sent;
    double err_at;    /* its endpoint failed at (0: not); failed after UCX_BYE_WAIT */
    char err[200];
    char host[UCX_HOST_MAX];
    void *addr;       /* its worker address (from its blob) */
    size_t addrlen;
};

struct ucx_state {
    int on;           /* initialised: a context and a worker */
    int rank, size;
    uint64_t cookie;
    double peer_timeout; /* CADRE_UCX_PEER_TIMEOUT */
    double hb_every;
    double next_check;
    ucp_context_h ctx;
    ucp_worker_h worker;
    int efd;
    int armed;        /* the worker's fd was armed by pollfds */
    int cuda;         /* UCX takes CUDA memory here */
    /* Device buffers go to UCX directly (cuda, the build has CUDA, and
     * CADRE_UCX_DEVICE is not staged): device sends carry their pointer
     * with the RTS, device receives name their buffer for the pull
     * (p2p_ucx_pull.c). */
    int direct;
    /* EAGER messages take UCX's eager protocol (UCX_EAGER): UCX offers no
     * RDMA transport here (every endpoint is UCX's tcp) and the user did
     * not set UCX_RNDV_THRESH (which then decides, as over RDMA). */
    int eager_proto;
    char host[UCX_HOST_MAX];
    struct ucx_peer *peers;
    struct ucx_op *ops;   /* in flight, a list */
    int events;           /* counted by callbacks during a progress call */
    int failing;          /* in ucx_fail: no reentry */
};
extern struct ucx_state cadre__ucx_st;

/* p2p_ucx_wire.c */
/* This rank's failure to wire up, for the forced case ("rank R: why"). */
extern char cadre__ucx_own_why[384];
/* Addresses, endpoints, the verdict published (the transport's wireup). */
int cadre__ucx_wireup(void);

/* p2p_ucx_send.c */
/* Makes the endpoint to peer (at wireup, while every host is up): UCS_OK,
 * or UCX's failure (the pair then goes over tcp, or cadre_init fails). */
ucs_status_t cadre__ucx_ep(int peer);
int cadre__ucx_send(int peer, const struct cadre_p2p_hdr *h, const void *payload);
void cadre__ucx_heartbeat(int peer);
/* Fails the peer (once): closes its endpoint (UCX cancels what is in
 * flight), reports its LATER sends, tells the engine why (host first). */
/* Seconds on the monotonic clock: heartbeats, peer timeouts, close waits. */
static inline double cadre__ucx_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cadre__ucx_fail(int peer, const char *fmt, ...) CADRE_PRINTF(2, 3);
/* Closes the endpoint of a peer gone or failed, forcing: in-flight
 * operations end (canceled), and are reaped here. */
void cadre__ucx_ep_force_close(int peer);
/* The send completions (UCX callbacks recorded them): frees the ops,
 * reports LATER ones. Returns how many. */
int cadre__ucx_reap(void);
void cadre__ucx_peer_gone(int peer);

/* p2p_ucx_recv.c */
ucs_status_t cadre__ucx_am_cb(void *arg, const void *header, size_t header_length, void *data,
                              size_t length, const ucp_am_recv_param_t *param);
/* Delivers what is whole and next in each peer's stream; starts
 * rendezvous receives. Returns events. */
int cadre__ucx_deliver(void);
void cadre__ucx_release_dest(int peer, const char *buf, size_t len);
/* Drops what arrived from peer (failure, finalize): frees and releases. */
void cadre__ucx_in_drop(int peer);
/* Waits until no rendezvous receive of peer writes into user memory. */
void cadre__ucx_in_settle(int peer);

/* p2p_ucx_pull.c */
/* The RTS `in` (next in its stream) came with its data: held for its CTS.
 * Takes in's data. 0, or an error status (no memory). */
int cadre__ucx_pull_hold(int peer, struct ucx_in *in);
/* A CTS goes to peer: the pull of its message starts if its data is held
 * here; returns 1 then (the CTS is flagged CADRE_P2P_PULL). */
int cadre__ucx_pull_cts(int peer, const struct cadre_p2p_hdr *cts);
/* NACK with rreq 0 from peer: its sender withdrew message sreq. */
void cadre__ucx_pull_withdrawn(int peer, uint64_t sreq);
/* How device buffers go (st->direct from st->cuda, the build, and
 * CADRE_UCX_DEVICE=auto or not), said in an INFO line. */
void cadre__ucx_device_choice(int want_direct);
/* Pulls done: DATA to the engine; pulls wanted: started. Returns events. */
int cadre__ucx_pulls(void);
/* The receive whose buffer is [buf, buf+len) is gone: no pull lands there. */
void cadre__ucx_pull_release(int peer, const char *buf, size_t len);
/* Failure, finalize: pulls of peer end (waited for, UCX_CLOSE_WAIT), held
 * data released. */
void cadre__ucx_pull_drop(int peer);

static inline unsigned ucx_progress_worker(void)
{
    unsigned n = 0, k;
    while ((k = cadre__ucx.ucp_worker_progress(cadre__ucx_st.worker)) != 0 && n < 4096)
        n += k;
    return n;
}

#endif /* HAVE_UCX */
#endif /* CADRE_P2P_UCX_H */
