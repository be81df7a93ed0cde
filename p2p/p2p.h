/*
 * p2p.h - internal interface of the point-to-point layer: the wire header,
 * the transport ops struct, the engine entry points transports call, and the
 * request object shared with the collective layer.
 *
 * Threading: every transport function is called with the engine lock held,
 * so a transport sees one thread at a time. Engine entry points called by a
 * transport (cadre__p2p_incoming, ...) also run under that lock.
 */
#ifndef CADRE_P2P_H
#define CADRE_P2P_H

#include <poll.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/runtime.h"

/* ---- wire header -------------------------------------------------------- */
enum cadre_p2p_type {
    CADRE_P2P_EAGER = 1, /* matched message, payload inline (len bytes)            */
    CADRE_P2P_RTS = 2,   /* matched; announces len bytes held by sender request sreq */
    CADRE_P2P_CTS = 3,   /* receiver rreq will take `len` bytes of sender sreq      */
    CADRE_P2P_DATA = 4,  /* len payload bytes for receiver rreq at byte offset `off` */
    CADRE_P2P_NACK = 5,  /* sender sreq abandoned the message (timed out): rreq fails;
                            rreq 0: an RTS of ctx no receive took yet is withdrawn */
    CADRE_P2P_BYE = 6,   /* the peer finalized; its connections closing is not a failure */
    CADRE_P2P_STATE_Q = 7, /* what are you doing? (a timed-out operation's diagnosis) */
    CADRE_P2P_STATE_R = 8, /* the answer: the sender's operation state (p2p_diag.c) */
    CADRE_P2P_DONE = 9,    /* sender sreq was whole while receiver rreq read it (p2p_cma.c) */
    CADRE_P2P_TYPE_MAX = 9
};

/* flags */
#define CADRE_P2P_INLINE 0x1 /* shm: an EAGER payload of <= 16 bytes sits in sreq..rreq */
#define CADRE_P2P_INLINE_MAX 16
#define CADRE_P2P_DEVICE 0x2 /* EAGER: the payload describes a device buffer (device/device_p2p.c) */
/* RTS: the receiver may read the data at address rreq of the sender with
 * process_vm_readv; CTS: it did, len bytes; CTS with SPLIT too: the sender
 * is to write bytes ctx..len of the message at the receiver's address off
 * with process_vm_writev (p2p/p2p_cma.c). */
#define CADRE_P2P_CMA 0x4
#define CADRE_P2P_SPLIT 0x8
/* CTS: the receiver's transport pulls the data that came with the RTS (the
 * sender's transport returned CADRE_P2P_LATER for the RTS); the sender sends
 * no DATA, the CTS only says that a receive took the message. */
#define CADRE_P2P_PULL 0x10
/* RTS, between the engine and its transport only (never on the wire): the
 * payload is device memory (cadre__p2p_isend_device), which the host must
 * not read: the transport carries it with the RTS (CADRE_P2P_LATER),
 * telling its library the memory kind, or fails the send. */
#define CADRE_P2P_DEVMEM 0x20
/* STATE_Q: the asker's own state follows, as in STATE_R (p2p_diag.c); it
 * asks at its CADRE_TIMEOUT (not for a stuck warning). */
#define CADRE_P2P_Q_STATE 0x40
#define CADRE_P2P_Q_GIVES_UP 0x80
/* Collective traffic (odd contexts): a tag above every collective sequence
 * number that tells the communicator's ranks that two of them disagreed:
 * EAGER, len 0, sreq = the other rank's signature, rreq = the sender's,
 * off = the other rank, with the collective number found at fault + 1 in its
 * high half (0: not known). */
#define CADRE_P2P_POISON_TAG 0x7ffffffe
/* A collective that waits on a rank asks it whether it made the same call
 * (coll/coll_poison.c): EAGER on the collective context, len 0, sreq = the
 * call's tag, rreq = its signature. */
#define CADRE_P2P_SIGQ_TAG 0x7ffffffd

struct cadre_p2p_hdr {
    uint8_t type;
    uint8_t flags;
    /* EAGER/RTS: the sender's datatype + 1, so that cadre_probe can count
     * the message in the sender's elements; 0: not given (the library's own
     * traffic), counted in bytes. A value that names no datatype counts in
     * bytes too: nothing else reads it. */
    uint8_t dt;
    uint8_t reserved;
    uint32_t ctx;  /* communicator context id (EAGER/RTS)                   */
    int32_t src;   /* sender's rank in that communicator (EAGER/RTS)        */
    int32_t tag;   /* (EAGER/RTS)                                           */
    uint64_t len;  /* EAGER/DATA: payload bytes; RTS: message bytes; CTS: bytes accepted */
    uint64_t sreq; /* sender request id (RTS, CTS, NACK)                    */
    uint64_t rreq; /* receiver request id (CTS, DATA, NACK)                 */
    uint64_t off;  /* DATA: byte offset in the message; EAGER/RTS: the call's
                      signature (collectives, coll/coll_sig.h), 0 for p2p */
    uint64_t seq;  /* per (sender, receiver) sequence number, checked by receivers */
};

/* ---- checking what a peer sent (p2p_wire.c) -------------------------------- */
/* Every type from 1 to CADRE_P2P_TYPE_MAX, as a mask of (1u << type). */
#define CADRE_P2P_TYPES_ALL ((2u << CADRE_P2P_TYPE_MAX) - 2u)
#define CADRE_P2P_TYPE_BIT(t) (1u << (t))

/* What one receiving path accepts: a transport's lane, or the engine. */
struct cadre_p2p_wire {
    uint32_t types;       /* mask of the types this path carries */
    uint64_t max_payload; /* EAGER and DATA payload bytes */
    uint64_t max_inline;  /* INLINE-flagged EAGER payload; 0 = the flag means nothing here */
    int nranks;           /* EAGER/RTS sources are < nranks; 0 = not checked here */
    uint64_t seq;         /* the sequence number expected next (not DATA); 0 = not checked */
};

/* Results of cadre__p2p_hdr_check. */
#define CADRE_P2P_HDR_OK 0
#define CADRE_P2P_HDR_CORRUPT 1 /* the stream from this peer cannot be trusted: fail the peer */
#define CADRE_P2P_HDR_IGNORE 2  /* sound framing, unusable fields: drop this message, warn */

/* Checks a header a peer sent before anything acts on it. On a bad header
 * returns CORRUPT or IGNORE and writes why: what the peer did, a phrase to
 * follow "rank N" ("sent a message of unknown type 9 (corrupt stream)").
 * Needs nothing else: the fuzz target calls it alone. */
int cadre__p2p_hdr_check(const struct cadre_p2p_hdr *h, const struct cadre_p2p_wire *w, char *why,
                         size_t whylen);

/* Whether messages of this type carry h->len payload bytes after the header. */
static inline int cadre__p2p_has_payload(unsigned type)
{
    return type == CADRE_P2P_EAGER || type == CADRE_P2P_DATA;
}

/* ---- transports ---------------------------------------------------------- */
/* Return values of send(). */
#define CADRE_P2P_SENT 0   /* taken whole: the payload may be reused now */
#define CADRE_P2P_BUSY (-1) /* nothing taken; retry after progress        */
/* DATA: taken whole, but the transport still reads the payload (the
 * sender's buffer, a zero-copy rendezvous in flight) until it calls
 * cadre__p2p_sent(peer, h->sreq, status) for this message, under the lock.
 * The engine counts such messages in the send request (`later`) and
 * completes the send only when every one is reported: the user's buffer is
 * never handed back while a transport reads it. A transport that returns
 * it must report each message exactly once, also when the peer fails
 * (peer_gone).
 * RTS: the engine passes the sender's buffer as the payload (h->len bytes);
 * a transport that returns LATER carries the data with the RTS, and the
 * peer's transport pulls it into the receive once its CTS is posted there
 * (it sends that CTS flagged CADRE_P2P_PULL, and passes the engine the
 * DATA when the pull is done): one handshake, the transport's own. The
 * send then completes when cadre__p2p_sent reports it (the data taken, or
 * dropped after the sender withdrew it: NACK with rreq 0). */
#define CADRE_P2P_LATER 1

struct cadre_p2p_transport {
    const char *name;
    /* Before the bootstrap fence: create local resources, publish endpoint data
     * with cadre__bootstrap_put. A non-success return disables the transport
     * (with a warning), it does not fail cadre_init. */
    int (*init)(void);
    /* After the fence: read peers' endpoint data, map or prepare connections. */
    int (*wireup)(void);
    /* Whether this transport can carry messages to world rank `peer`. */
    int (*reachable)(int peer);
    /* Largest payload one DATA message may carry on this transport. */
    size_t (*max_payload)(int peer);
    /* Largest message sent EAGER (inline); NULL = max_payload. */
    size_t (*eager_limit)(int peer);
    /* Sends one message (header plus h->len payload bytes for EAGER/DATA).
     * All or nothing: returns CADRE_P2P_SENT once the whole message is taken
     * (copied, written, or staged by the transport), CADRE_P2P_BUSY when
     * nothing was taken, or CADRE_ERR_PEER after calling
     * cadre__p2p_peer_failed when the peer is gone. */
    int (*send)(int peer, const struct cadre_p2p_hdr *h, const void *payload);
    /* Delivers what has arrived through cadre__p2p_incoming; returns the
     * number of events handled (0 = nothing happened). */
    int (*progress)(void);
    /* File descriptors to poll while sleeping (sockets); may be NULL. Returns
     * how many were written (at most max). */
    int (*pollfds)(struct pollfd *fds, int max);
    /* The idle progress thread's tick (every 0.1 s while nothing is
     * outstanding), before its progress call: do there what busy progress
     * does only now and then to save system calls (accepting connections),
     * so that a rank computing outside cadre answers a new peer at once. May
     * be NULL. */
    void (*idle)(void);
    /* The receive whose buffer [buf, buf+len) a payload from `peer` may be
     * read into (cadre__p2p_data_dest, cadre__p2p_eager_dest) is done or
     * given up (lock held): write no more there; keep what was read of an
     * EAGER payload, which is matched again once whole. May be NULL for a
     * transport that never reads a payload in several steps. */
    void (*release_dest)(int peer, const char *buf, size_t len);
    /* The receive fast path (cadre__p2p_recv_direct); all three may be NULL.
     * peek: the next message from `peer` on the lane small messages take,
     * left in place: its header copied into *h, the framing that lane allows
     * in *framing; returns where its payload is (valid until take), or NULL
     * when none has arrived. Lock held. take: consumes the message peek
     * returned. Lock held. ready: whether a message from `peer` may be
     * waiting; without the lock (a stale answer costs a look, no more). */
    const void *(*peek)(int peer, struct cadre_p2p_hdr *h, const struct cadre_p2p_wire **framing);
    void (*take)(int peer);
    int (*ready)(int peer);
    /* The engine failed `peer` (cadre__p2p_peer_failed, lock held, before
     * its requests fail): stop reading the payloads of its sends (report
     * each CADRE_P2P_LATER message with cadre__p2p_sent) and writing into
     * its receives' buffers. May be NULL (a transport that copies). */
    void (*peer_gone)(int peer);
    /* The process of `peer` has ended (its pidfd; lock held): read what it
     * sent, which may still be on its way, until its connection ends or a
     * bound of time, before the engine judges its exit (a BYE read here
     * makes it no failure). May be NULL (a transport whose messages are
     * all in place when the sender ends: shared memory). */
    void (*drain)(int peer);
    /* Releases everything; peers have been sent BYE already. */
    void (*finalize)(void);
};

extern const struct cadre_p2p_transport cadre__p2p_shm;
extern const struct cadre_p2p_transport cadre__p2p_tcp;
/* Over UCX (p2p_ucx*.c): off-host peers, where CADRE_TRANSPORT names it or
 * UCX offers an RDMA transport here. */
extern const struct cadre_p2p_transport cadre__p2p_ucx;

/* ---- engine entry points for transports ------------------------------------ */
/* One complete incoming message from world rank `peer`; payload holds h->len
 * bytes for EAGER and DATA and is valid only during the call. A transport
 * that read DATA straight into cadre__p2p_data_dest() passes that pointer. */
void cadre__p2p_incoming(int peer, const struct cadre_p2p_hdr *h, const void *payload);
/* The same, for a transport that has not checked the header: the engine
 * checks it once against the transport's framing (types, payload limits)
 * and its own rules together, and fails the peer when it is corrupt. h
 * must be the transport's private copy (not memory the peer can write). */
void cadre__p2p_incoming_wire(int peer, const struct cadre_p2p_hdr *h, const void *payload,
                              const struct cadre_p2p_wire *framing);
/* Where the payload of DATA header h should land (the user's buffer at the
 * offset), or NULL when the transport must buffer it and pass it to incoming. */
void *cadre__p2p_data_dest(int peer, const struct cadre_p2p_hdr *h);
/* For an EAGER header h from `peer` whose payload will be read in several
 * steps: the buffer of the posted receive it matches, which it claims (no
 * other message can take it), or NULL when the transport must buffer the
 * payload (nothing posted, a device buffer, truncation, another call's
 * signature, a header the engine will refuse). The transport then passes
 * that buffer as the payload to cadre__p2p_incoming*, which completes the
 * receive without a copy; if release_dest is called first, it passes its
 * own copy and the message is matched again. One claim per peer at a time. */
void *cadre__p2p_eager_dest(int peer, const struct cadre_p2p_hdr *h);
/* A transport that pulls a message's data (CADRE_P2P_PULL) asks, before
 * each start, where its `whole` bytes (DATA header h, offset 0) go, saying
 * which memory kinds it can write this time (`mems`, a mask of 1 << kind)
 * (p2p_pull.c): CADRE_P2P_PULL_NOW, into to->buf (memory kind to->mem);
 * CADRE_P2P_PULL_WAIT, not yet: ask again at a later progress pass;
 * CADRE_P2P_PULL_GONE, nowhere (the receive is gone: drop the data). The
 * answer is the receive's buffer (cadre__p2p_data_dest), or the
 * destination the receive named instead (cadre__p2p_recv_redirect: a
 * device buffer, reached by the transport directly) where its kind is in
 * mems and the message is whole, which waits for the receive's gate. When the pull is done the transport passes the DATA to
 * cadre__p2p_incoming with to->buf as its payload. */
#define CADRE_P2P_PULL_GONE 0
#define CADRE_P2P_PULL_NOW 1
#define CADRE_P2P_PULL_WAIT 2
#define CADRE_P2P_MEM_HOST 0
#define CADRE_P2P_MEM_CUDA 1 /* a CUDA device buffer */
struct cadre_p2p_pull_to {
    char *buf;
    int mem;
};
int cadre__p2p_pull_dest(int peer, const struct cadre_p2p_hdr *h, size_t whole, unsigned mems,
                         struct cadre_p2p_pull_to *to);
/* A DATA message sent with CADRE_P2P_LATER (h->sreq, the sending request's
 * wire id) is no longer read: status CADRE_SUCCESS when it was delivered,
 * else the error that failed it (CADRE_ERR_PEER). */
void cadre__p2p_sent(int peer, uint64_t sreq, int status);
/* The transport found `peer` gone (connection reset, EOF without BYE...). */
void cadre__p2p_peer_failed(int peer, const char *why);
/* The peer said BYE: later EOF from it is orderly. */
void cadre__p2p_peer_finalized(int peer);
/* The hostname world rank `peer` published with its TCP endpoint (read on
 * first use), for messages; NULL when not known (no TCP transport). */
const char *cadre__p2p_tcp_host(int peer);
/* The same from the UCX transport's endpoint (NULL: not reached by ucx). */
const char *cadre__p2p_ucx_host(int peer);
/* Whether the ucx transport runs and takes device buffers directly: the
 * UCX found at run time takes CUDA memory, the build has CUDA, and
 * CADRE_UCX_DEVICE does not say staged (decided and logged in its init). */
int cadre__p2p_ucx_direct(void);

/* cadre_init, after the fence that follows the transports' wireup
 * (cadre__shm_agree's): a pair uses ucx only where both ranks started it
 * and wired up (each publishes a verdict in its wireup), else tcp, said in
 * an INFO line; where ucx is forced (CADRE_TRANSPORT, `list`), an error
 * naming the rank whose ucx failed and why. */
int cadre__p2p_ucx_agree(const char *list);
/* The hostname of world rank `peer` from whichever transport reaches it
 * (tcp's, else ucx's); NULL when neither published one. */
const char *cadre__p2p_host(int peer);

/* ---- engine internals shared by the p2p files ------------------------------- */
struct cadre_p2p_engine_info {
    int shm_enabled, tcp_enabled;
    /* ucx is named in CADRE_TRANSPORT: it must start (its failure fails
     * cadre_init); 0, it starts only where UCX offers RDMA. */
    int ucx_forced;
    uint64_t job_cookie; /* the job's secret, for transports that accept connections */
};
extern struct cadre_p2p_engine_info cadre__p2p_info;

int cadre__p2p_init(void);

/* ---- locality (p2p_host.c) --------------------------------------------------- */
/* Hosts, numbered densely in the order of their lowest world rank, the same
 * at every rank; valid from cadre_init to cadre_finalize (1 host, index 0,
 * outside that). A host is CADRE_HOSTID's value when set, else the
 * launcher's node id, else the hostname. Shared memory only within one. */
int cadre__p2p_nhosts(void);
int cadre__p2p_host_of(int world_rank);
/* Whether world rank w is on this rank's host. */
int cadre__p2p_same_host(int w);
/* How many ranks of the job run on this rank's machine (one kernel, one set
 * of cores): its host's ranks, and those of other hosts that share its
 * kernel's boot id (containers, network namespaces). */
int cadre__p2p_machine_ranks(void);
/* How many CPUs those ranks may run on together (the union of their
 * affinity masks: a launcher under taskset, a cgroup's cpuset, binding), or
 * 0 when a rank's mask is unknown. */
int cadre__p2p_machine_cpus(void);

/* The CPUs this many machines' masks can name (glibc's cpu_set_t). */
#define CADRE_CPU_WORDS 16

#define CADRE_HOST_NAME_MAX 64
/* What a rank publishes of its host: a hash of the key, a name for logs, a
 * hash of the running kernel's boot id (0: unknown), which is the same for
 * "hosts" that are containers or network namespaces of one machine, and
 * the CPUs it may run on (sched_getaffinity; all zero: unknown). */
struct cadre_host_id {
    uint64_t key;
    uint64_t machine;
    char name[CADRE_HOST_NAME_MAX];
    uint64_t cpus[CADRE_CPU_WORDS];
};
void cadre__p2p_host_self(struct cadre_host_id *id);
/* The engine fills the table at init: begin, set for every rank, end (which
 * numbers the hosts and logs this rank's locality line). */
int cadre__p2p_hosts_begin(int nranks);
void cadre__p2p_hosts_set(int w, const struct cadre_host_id *id);
void cadre__p2p_hosts_end(void);
void cadre__p2p_hosts_free(void);
void cadre__p2p_finalize(void);
/* Whether cadre_finalize has reached its farewells (BYE and the like), whose
 * loss is no news. */
int cadre__p2p_farewells(void);
/* Runs every transport once; returns events handled. Takes the engine lock
 * (trylock: returns 0 when another thread is progressing). */
int cadre__p2p_progress(void);

#endif /* CADRE_P2P_H */
