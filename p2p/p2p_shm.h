/* The shared-memory transport's layout and lanes, shared by its sending
 * and setting-up side (p2p_shm.c) and its receiving side (p2p_shm_recv.c). */
#ifndef CADRE_P2P_SHM_H
#define CADRE_P2P_SHM_H

#include "p2p_engine.h"

#define SEG_MAGIC 0x6361647265736d31ull /* "cadresm1" */
#define SLOT_DATA CADRE_SHM_EAGER
_Static_assert(64 + SLOT_DATA <= CADRE_SHM_SLOT, "a slot holds its header line and payload");

struct slot {
    _Atomic uint64_t seq;
    struct cadre_p2p_hdr hdr;
    unsigned char data[];
};
_Static_assert(sizeof(struct slot) == 64, "slot header must fill one cache line");

/* The tiny lane: a plain message of at most TINY_MAX bytes (no flags, no
 * signature) in a cell of 32 bytes, two to a cache line, the cells side by
 * side. A window of small messages in the eager lane's slots, 8 KiB apart,
 * touches a page per message and puts every slot's line in the same set of
 * the L1 cache; 256 cells take 2 pages and spread over the sets, a cell
 * carries only what a plain message needs, and a receiver that lags reads
 * two messages per line it takes from the sender's core. (Cells of a whole
 * line, measured against these: level in 30 alternated turns on
 * 2026-11-27; on 2026-11-28 the median 4 ms block 2-3% slower in two runs
 * of 90 alternated launches each, the slowest tenth of the blocks faster in
 * one run and slower in the other, by the host's slow moments:
 * bench/HISTORY.md.) The receiver takes messages from the
 * tiny and the eager lane in the order of their sequence numbers (every
 * message but DATA has the next one). */
#define TINY_MAX 8
#define TINY_CELLS 256
struct cell {
    _Atomic uint32_t valid; /* the low 32 bits of (lane position + 1) */
    uint32_t seq_lo;        /* the low 32 bits of the message's sequence number */
    uint32_t ctx;
    int32_t src, tag;
    uint32_t len; /* the low 24 bits; the high 8: the header's dt */
    unsigned char data[TINY_MAX];
};
#define TINY_DT_SHIFT 24
#define TINY_LEN_MASK ((1u << TINY_DT_SHIFT) - 1)
_Static_assert(sizeof(struct cell) == 32, "two cells to a cache line");
/* How far ahead the tiny lane's receiver asks for cells (RX_AHEAD lines, as
 * the eager lane), and its sender for the line it writes next but one. */
#define TINY_RX_AHEAD (2 * RX_AHEAD)
#define TINY_TX_AHEAD 4

/* A slot is the sender's alone to write: it holds message pos while its seq
 * is pos + 1. The receiver never writes into slots; it tells the sender how
 * far it has read in a counter of its own, each on its own cache line, which
 * the sender reads only when its last copy of it says the lane is full. So a
 * message moves one cache line (the slot) and the receiver's acknowledgment
 * stays in its own cache: no store of the receiver waits for the sender's
 * core on the path of a message. */
struct ring_hdr {
    _Atomic uint32_t sender_waiting; /* set by a sender that found the ring full */
    char pad[60];
    struct {
        _Atomic uint64_t n; /* messages of the lane the receiver has read */
        char pad[56];
    } head[2];              /* [0] eager, [1] bulk */
};

struct seg_hdr {
    uint64_t magic;
    uint32_t nlocal, owner;
    uint32_t nslots, nfrags;
    uint64_t frag;
    uint64_t ring_bytes;
    /* The CPU the owner last waited on, plus 1 (0: not known); written
     * by the owner at the start of its waits while the node is
     * oversubscribed (cadre__shm_same_cpu). */
    _Atomic int32_t cpu1;
    char pad[20];
    struct cadre_p2p_doorbell bell;
    char pad2[64 - sizeof(struct cadre_p2p_doorbell)]; /* the bell's own cache line */
};
/* The rings and the collectives' area follow the header on 64-byte lines. */
_Static_assert(sizeof(struct seg_hdr) % 64 == 0, "struct seg_hdr: not whole cache lines");

struct shm_blob {
    int32_t node_id, local_rank, pid, fd;
    uint64_t size, ring_bytes, frag;
    uint32_t nslots, nfrags;
};

/* A lane seen from one side: where its slots are and our position. */
struct lane {
    unsigned char *base;
    size_t stride;
    uint32_t n;
    uint64_t pos;
    struct slot *cur;       /* the slot of message pos (no division on the path) */
    _Atomic uint64_t *head; /* the receiver's count of messages read */
    uint64_t seen;          /* sender: the last value read from *head */
};

struct shm_peer {
    int mapped;
    int local_rank;
    unsigned char *seg; /* the peer's segment (we write into our ring there) */
    size_t seg_size;
    struct ring_hdr *tx_ring;
    struct lane tx_eager, tx_bulk, tx_tiny;
    struct ring_hdr *rx_ring; /* our segment's ring for this sender */
    struct lane rx_eager, rx_bulk, rx_tiny;
    struct lane *peeked; /* the lane of the message shm_peek returned */
};

/* The transport in this process: its own segment and its peers'. */
struct shm_state {
    unsigned char *seg;
    size_t seg_size, ring_bytes, frag;
    uint32_t nslots, nfrags;
    int fd;
    int nlocal;
    struct shm_peer *peers; /* by world rank */
    int *senders;           /* world ranks of local peers */
    int nsenders;
};
extern struct shm_state cadre__shm;

/* How far ahead a receiver asks for the eager lane's slots: a message
 * costs it about a quarter of a line's way from the sender's core. */
#define RX_AHEAD 4

/* The slot `ahead` slots after the lane's current one (ahead < n). */
static inline const unsigned char *lane_slot_ahead(const struct lane *l, size_t ahead)
{
    size_t ring = (size_t)l->n * l->stride;
    const unsigned char *s = (const unsigned char *)l->cur + ahead * l->stride;
    return s >= l->base + ring ? s - ring : s;
}

/* A hint that this process will write the line at p soon. */
static inline void prefetch_write(const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
    /* prefetchw (a no-op before Broadwell), whatever -march says */
    __asm__ volatile("prefetchw (%0)" ::"r"(p));
#else
    __builtin_prefetch(p, 1);
#endif
}

/* Sender: whether the lane has a free slot, reading the receiver's count
 * only when our last copy of it says the lane is full (the acquire orders
 * the receiver's reads of the slot before our writes into it). */
static inline int lane_has_room(struct lane *l)
{
    if (l->pos - l->seen < l->n)
        return 1;
    l->seen = atomic_load_explicit(l->head, memory_order_acquire);
    return l->pos - l->seen < l->n;
}

/* Moves the lane on to its next message. */
static inline void lane_next(struct lane *l)
{
    unsigned char *next = (unsigned char *)l->cur + l->stride;
    l->pos++;
    __atomic_store_n(&l->cur,
                     (struct slot *)(next == l->base + (size_t)l->n * l->stride ? l->base : next),
                     __ATOMIC_RELAXED);
}

static inline struct cadre_p2p_doorbell *peer_bell(struct shm_peer *p)
{
    return &((struct seg_hdr *)p->seg)->bell;
}

/* Rings a peer's doorbell, and its wake socket when it sleeps in poll(). */
static inline void ring_peer(struct shm_peer *p)
{
    struct cadre_p2p_doorbell *b = peer_bell(p);
    if (cadre__bell_ring(b)) {
        atomic_fetch_add_explicit(&cadre__eng.n_wakes, 1, memory_order_relaxed);
        cadre__p2p_wake_peer(b);
    }
}

/* Failures and the agreement on them (p2p_shm_agree.c): records this
 * rank's failure to set up shared memory (the text names the rank, the
 * segment and the cause) and sets cadre_last_error(). */
int cadre__shm_failed(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Unmaps world rank w's segment: the pair does without shared memory. */
void cadre__shm_drop(int w);

/* The receiving side (p2p_shm_recv.c). */
const void *cadre__shm_peek(int w, struct cadre_p2p_hdr *h, const struct cadre_p2p_wire **framing);
void cadre__shm_take(int w);
int cadre__shm_ready(int w);
int cadre__shm_progress(void);

#endif
