/* Shared-memory transport for ranks of one node.
 *
 * Each process owns one segment: a doorbell and, for every local sender, a
 * ring with two lanes of single-producer single-consumer slots: an eager
 * lane of small slots (headers, small messages) and a bulk lane of large
 * fragments (DATA). A large message thus moves as a pipeline: the sender
 * copies fragment k+1 into the ring while the receiver copies fragment k out,
 * each on its own core. (process_vm_readv measured 9.5 GB/s against 31 GB/s
 * for memcpy on the development machine, so copies beat the syscall here.)
 *
 * Segments are memfds: they never have a name in /dev/shm, so nothing is left
 * behind whatever happens to the processes. Peers take the descriptor with
 * pidfd_getfd (or /proc/PID/fd as a fallback); both need the same permission
 * as ptrace, which processes of one job and one user have.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
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
    char pad[24];
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
    struct lane tx_eager, tx_bulk;
    struct ring_hdr *rx_ring; /* our segment's ring for this sender */
    struct lane rx_eager, rx_bulk;
};

static struct {
    unsigned char *seg;
    size_t seg_size, ring_bytes, frag;
    uint32_t nslots, nfrags;
    int fd;
    int nlocal;
    struct shm_peer *peers; /* by world rank */
    int *senders;           /* world ranks of local peers */
    int nsenders;
} S = {.fd = -1};

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

/* Moves the lane on to its next message. */
static inline void lane_next(struct lane *l)
{
    unsigned char *next = (unsigned char *)l->cur + l->stride;
    l->pos++;
    __atomic_store_n(&l->cur,
                     (struct slot *)(next == l->base + (size_t)l->n * l->stride ? l->base : next),
                     __ATOMIC_RELAXED);
}

static size_t ring_layout(uint32_t nslots, uint32_t nfrags, size_t frag, size_t *bulk_off)
{
    *bulk_off = sizeof(struct ring_hdr) + (size_t)nslots * CADRE_SHM_SLOT;
    size_t fstride = 64 + frag;
    return *bulk_off + (size_t)nfrags * fstride;
}

static void lanes_for(unsigned char *ring, uint32_t nslots, uint32_t nfrags, size_t frag,
                      struct lane *eager, struct lane *bulk)
{
    size_t bulk_off;
    ring_layout(nslots, nfrags, frag, &bulk_off);
    struct ring_hdr *r = (struct ring_hdr *)ring;
    *eager = (struct lane){ring + sizeof(struct ring_hdr), CADRE_SHM_SLOT, nslots, 0,
                           (struct slot *)(ring + sizeof(struct ring_hdr)), &r->head[0].n, 0};
    *bulk = (struct lane){ring + bulk_off, 64 + frag, nfrags, 0, (struct slot *)(ring + bulk_off),
                          &r->head[1].n, 0};
}

static struct cadre_p2p_doorbell *peer_bell(struct shm_peer *p);

/* The collectives' area (coll/coll_fast.c) follows the rings. */
static size_t coll_area_off(void)
{
    return sizeof(struct seg_hdr) + (size_t)S.nlocal * S.ring_bytes;
}

void *cadre__shm_coll_area(int w)
{
    if (w == cadre__proc.rank)
        return S.seg ? S.seg + coll_area_off() : NULL;
    if (!S.peers || !S.peers[w].mapped)
        return NULL;
    return S.peers[w].seg + coll_area_off();
}

/* Rings a peer's doorbell, and its wake socket when it sleeps in poll(). */
static void ring_peer(struct shm_peer *p)
{
    struct cadre_p2p_doorbell *b = peer_bell(p);
    if (cadre__bell_ring(b)) {
        atomic_fetch_add_explicit(&cadre__eng.n_wakes, 1, memory_order_relaxed);
        cadre__p2p_wake_peer(b);
    }
}

void cadre__shm_wake(int w)
{
    if (S.peers && S.peers[w].mapped)
        ring_peer(&S.peers[w]);
}

static int shm_init(void)
{
    S.nlocal = cadre__proc.local_size;
    S.nslots = 64;
    S.frag = (size_t)cadre__config_int(CADRE_CFG_SHM_FRAG);
    S.nfrags = (uint32_t)cadre__config_int(CADRE_CFG_SHM_NFRAGS);
    if (S.frag < 4096 || S.frag > (64u << 20) || S.frag % 64 || S.nfrags < 2 || S.nfrags > 4096)
        return cadre__error(CADRE_ERR_ARG,
                            "cadre_init: CADRE_SHM_FRAG=%zu / CADRE_SHM_NFRAGS=%u out of range "
                            "(4096..64 MiB, multiple of 64; 2..4096)",
                            S.frag, S.nfrags);
    size_t bulk_off;
    S.ring_bytes = ring_layout(S.nslots, S.nfrags, S.frag, &bulk_off);
    S.ring_bytes = (S.ring_bytes + 4095) & ~(size_t)4095;
    S.seg_size = coll_area_off() + CADRE_SHM_COLL_BYTES;
    S.seg_size = (S.seg_size + 4095) & ~(size_t)4095;

    S.fd = memfd_create("cadre-shm", MFD_CLOEXEC);
    if (S.fd < 0)
        return cadre__error(CADRE_ERR_INTERNAL, "shm: memfd_create: %s", strerror(errno));
    if (ftruncate(S.fd, (off_t)S.seg_size) != 0) {
        int e = errno;
        close(S.fd);
        S.fd = -1;
        return cadre__error(CADRE_ERR_NOMEM, "shm: cannot size a %zu-byte segment: %s", S.seg_size,
                            strerror(e));
    }
    S.seg = mmap(NULL, S.seg_size, PROT_READ | PROT_WRITE, MAP_SHARED, S.fd, 0);
    if (S.seg == MAP_FAILED) {
        int e = errno;
        close(S.fd);
        S.fd = -1;
        S.seg = NULL;
        return cadre__error(CADRE_ERR_NOMEM, "shm: mmap of %zu bytes: %s", S.seg_size, strerror(e));
    }
    struct seg_hdr *h = (struct seg_hdr *)S.seg;
    h->magic = SEG_MAGIC;
    h->nlocal = (uint32_t)S.nlocal;
    h->owner = (uint32_t)cadre__proc.local_rank;
    h->nslots = S.nslots;
    h->nfrags = S.nfrags;
    h->frag = S.frag;
    h->ring_bytes = S.ring_bytes;
    /* The memfd starts zeroed: every slot's seq is 0, and slot i holds
     * message pos = i + k*n only when its seq is pos + 1, never 0. The
     * receivers' counters start at 0 too. */
    atomic_store(&h->bell.asym, (uint32_t)cadre__membarrier);
    cadre__eng.bell = &h->bell;

    struct shm_blob blob = {.node_id = cadre__proc.node_id,
                            .local_rank = cadre__proc.local_rank,
                            .pid = (int32_t)getpid(),
                            .fd = S.fd,
                            .size = S.seg_size,
                            .ring_bytes = S.ring_bytes,
                            .frag = S.frag,
                            .nslots = S.nslots,
                            .nfrags = S.nfrags};
    return cadre__bootstrap_put("shm", &blob, sizeof blob);
}

/* Returns the peer's segment descriptor, or -1 with `why` filled in. */
static int grab_fd(pid_t pid, int fd, char *why, size_t whylen)
{
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    int e1 = errno, e2 = 0;
    if (pidfd >= 0) {
        int got = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
        e2 = errno;
        close(pidfd);
        if (got >= 0)
            return got;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, fd);
    int got = open(path, O_RDWR | O_CLOEXEC);
    if (got < 0)
        snprintf(why, whylen, "pidfd_open: %s, pidfd_getfd: %s, open %s: %s",
                 pidfd >= 0 ? "ok" : strerror(e1), pidfd >= 0 ? strerror(e2) : "-", path,
                 strerror(errno));
    return got;
}

static int shm_wireup(void)
{
    int nr = cadre__proc.size, me = cadre__proc.rank;
    S.peers = calloc((size_t)nr, sizeof *S.peers);
    S.senders = calloc((size_t)nr, sizeof *S.senders);
    if (!S.peers || !S.senders)
        return cadre__error(CADRE_ERR_NOMEM, "shm: no memory");
    for (int w = 0; w < nr; w++) {
        if (w == me)
            continue;
        void *data;
        size_t len;
        if (cadre__bootstrap_get(w, "shm", &data, &len) != CADRE_SUCCESS)
            continue; /* the peer has no shm endpoint: another transport reaches it */
        struct shm_blob b;
        memcpy(&b, data, len < sizeof b ? len : sizeof b);
        free(data);
        /* Never between hosts (p2p_host.c): the same launcher node and the
         * same host identity, which CADRE_HOSTID or the hostname decide. */
        if (len != sizeof b || b.node_id != cadre__proc.node_id || !cadre__eng.peers[w].same_node)
            continue;
        if (b.local_rank < 0 || b.local_rank >= S.nlocal || b.ring_bytes != S.ring_bytes ||
            b.frag != S.frag || b.nslots != S.nslots || b.nfrags != S.nfrags ||
            b.size < coll_area_off() + CADRE_SHM_COLL_BYTES)
            return cadre__error(CADRE_ERR_ARG,
                                "shm: rank %d has a different shared-memory layout (are "
                                "CADRE_SHM_* set alike on every rank?)",
                                w);
        char why[256];
        int fd = grab_fd(b.pid, b.fd, why, sizeof why);
        if (fd < 0)
            return cadre__error(CADRE_ERR_INTERNAL,
                                "shm: cannot open the segment of rank %d (pid %d): %s", w, b.pid,
                                why);
        void *m = mmap(NULL, b.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (m == MAP_FAILED)
            return cadre__error(CADRE_ERR_NOMEM, "shm: mmap of rank %d's segment: %s", w,
                                strerror(errno));
        struct shm_peer *p = &S.peers[w];
        p->mapped = 1;
        p->local_rank = b.local_rank;
        p->seg = m;
        p->seg_size = b.size;
        unsigned char *tx = p->seg + sizeof(struct seg_hdr) +
                            (size_t)cadre__proc.local_rank * S.ring_bytes;
        p->tx_ring = (struct ring_hdr *)tx;
        lanes_for(tx, S.nslots, S.nfrags, S.frag, &p->tx_eager, &p->tx_bulk);
        unsigned char *rx = S.seg + sizeof(struct seg_hdr) + (size_t)b.local_rank * S.ring_bytes;
        p->rx_ring = (struct ring_hdr *)rx;
        lanes_for(rx, S.nslots, S.nfrags, S.frag, &p->rx_eager, &p->rx_bulk);
        S.senders[S.nsenders++] = w;
    }
    return CADRE_SUCCESS;
}

static int shm_reachable(int w)
{
    return S.peers && S.peers[w].mapped;
}

static size_t shm_max_payload(int w)
{
    (void)w;
    return S.frag;
}

static size_t shm_eager_limit(int w)
{
    (void)w;
    return SLOT_DATA;
}

static struct cadre_p2p_doorbell *peer_bell(struct shm_peer *p)
{
    return &((struct seg_hdr *)p->seg)->bell;
}

/* Writes the header *h into a slot, field by field, with `flags` added.
 * The caller has just stored *h field by field; a wider load across two of
 * those stores (a struct copy's 16-byte moves) cannot take its bytes from
 * the store buffer and waits until they reach the cache, behind the last
 * message's stores into its slot, whose line may still be on its way from
 * the receiver's core: a stall on every small message. Loads of the fields'
 * own sizes (atomic, so that the compiler does not merge them) take theirs
 * from the stores directly. */
static inline void hdr_to_slot(struct cadre_p2p_hdr *d, const struct cadre_p2p_hdr *h,
                               uint8_t flags)
{
#define LD(f) __atomic_load_n(&h->f, __ATOMIC_RELAXED)
    d->type = LD(type);
    d->flags = (uint8_t)(LD(flags) | flags);
    d->reserved = 0;
    d->ctx = LD(ctx);
    d->src = LD(src);
    d->tag = LD(tag);
    d->len = LD(len);
    d->sreq = LD(sreq);
    d->rreq = LD(rreq);
    d->off = LD(off);
    d->seq = LD(seq);
#undef LD
}

static int shm_send(int w, const struct cadre_p2p_hdr *h, const void *payload)
{
    struct shm_peer *p = &S.peers[w];
    int bulk = h->type == CADRE_P2P_DATA;
    struct lane *l = bulk ? &p->tx_bulk : &p->tx_eager;
    size_t len = (h->type == CADRE_P2P_EAGER || bulk) ? h->len : 0;
    struct slot *s = l->cur;
    if (l->pos - l->seen >= l->n) {
        /* Full as far as we knew: the acquire orders the receiver's reads
         * of the slot before our writes into it. */
        l->seen = atomic_load_explicit(l->head, memory_order_acquire);
        if (l->pos - l->seen >= l->n) {
            atomic_store_explicit(&p->tx_ring->sender_waiting, 1, memory_order_relaxed);
            atomic_thread_fence(memory_order_seq_cst);
            /* The receiver may have read on before it saw our flag. */
            l->seen = atomic_load_explicit(l->head, memory_order_acquire);
            if (l->pos - l->seen >= l->n)
                return CADRE_P2P_BUSY;
        }
    }
    if (h->type == CADRE_P2P_EAGER && len <= CADRE_P2P_INLINE_MAX) {
        /* Header and payload in the slot's one cache line: one line moves.
         * The payload takes sreq and rreq, copied there directly (through
         * a buffer of ours, the load of it would stall as above). */
        _Static_assert(2 * sizeof(uint64_t) == CADRE_P2P_INLINE_MAX, "inline: sreq and rreq");
        hdr_to_slot(&s->hdr, h, CADRE_P2P_INLINE);
        if (len)
            memcpy(&s->hdr.sreq, payload, len);
    } else {
        hdr_to_slot(&s->hdr, h, 0);
        if (len)
            cadre__copy(s->data, payload, len);
    }
    atomic_store_explicit(&s->seq, l->pos + 1, memory_order_release);
    lane_next(l);
    /* A window of small messages writes one slot after another, each a
     * line the receiver holds from the lap before, and each message's
     * locked instructions (the engine lock; the doorbell's fence where
     * membarrier is not there, cadre__bell_ring) wait
     * until its slot's line is ours: ask for the line after next now
     * (prefetchw), so that taking it from the receiver's cache overlaps
     * this message's way out. Only a slot the receiver is known to be done
     * with: taking a line it has still to read would cost it a miss. */
    if (!bulk && l->pos + 1 - l->seen < l->n) {
        const unsigned char *next = lane_slot_ahead(l, 1);
        prefetch_write(next);
        prefetch_write(next + 64); /* the first line of a payload that is not inline */
    }
    ring_peer(p);
    return CADRE_P2P_SENT;
}

/* Tells the sender how far we have read; wakes it if it found the lane full. */
static void lane_read(struct shm_peer *p, struct lane *l)
{
    /* The counter's line is ours, so the fence that orders this store before
     * the look at sender_waiting is cheap. */
    atomic_store_explicit(l->head, l->pos, memory_order_release);
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&p->rx_ring->sender_waiting, memory_order_relaxed)) {
        atomic_store_explicit(&p->rx_ring->sender_waiting, 0, memory_order_relaxed);
        ring_peer(p);
    }
}

/* What the eager lane may hold (the bulk lane's depends on CADRE_SHM_FRAG). */
static const struct cadre_p2p_wire eager_framing = {
    .types = CADRE_P2P_TYPES_ALL & ~CADRE_P2P_TYPE_BIT(CADRE_P2P_DATA),
    .max_payload = SLOT_DATA,
    .max_inline = CADRE_P2P_INLINE_MAX,
};

/* The message at the head of lane l, left in place: its header copied into
 * *h; returns where its payload is, or NULL when none has arrived. The
 * engine checks the copy, not the slot (the peer could rewrite the slot):
 * a corrupt header fails the peer and never makes us read out of bounds (an
 * inline payload is read from the copy, any other from the slot's data,
 * within the checked length). */
static const void *lane_peek(struct lane *l, struct cadre_p2p_hdr *h)
{
    struct slot *s = l->cur;
    if (atomic_load_explicit(&s->seq, memory_order_acquire) != l->pos + 1)
        return NULL;
    *h = s->hdr;
    return (h->flags & CADRE_P2P_INLINE) ? (const void *)&h->sreq : s->data;
}

static const void *shm_peek(int w, struct cadre_p2p_hdr *h, const struct cadre_p2p_wire **framing)
{
    *framing = &eager_framing;
    return lane_peek(&S.peers[w].rx_eager, h);
}

static void shm_take(int w)
{
    struct shm_peer *p = &S.peers[w];
    lane_next(&p->rx_eager);
    lane_read(p, &p->rx_eager);
}

static int shm_ready(int w)
{
    struct lane *l = &S.peers[w].rx_eager;
    uint64_t pos = __atomic_load_n(&l->pos, __ATOMIC_RELAXED);
    struct slot *s = __atomic_load_n(&l->cur, __ATOMIC_RELAXED);
    return atomic_load_explicit(&s->seq, memory_order_relaxed) == pos + 1;
}

static int drain_lane(int w, struct shm_peer *p, struct lane *l, int bulk, int max)
{
    const struct cadre_p2p_wire bulk_framing = {
        .types = CADRE_P2P_TYPE_BIT(CADRE_P2P_DATA),
        .max_payload = S.frag,
        .max_inline = CADRE_P2P_INLINE_MAX,
    };
    int n = 0;
    while (n < max) {
        struct cadre_p2p_hdr h;
        const void *payload = lane_peek(l, &h);
        if (!payload)
            break;
        /* A later slot's line, while this message is handled: a burst of
         * small messages then waits for the sender's core once, not once
         * each. */
        if (!bulk && RX_AHEAD < l->n) {
            const unsigned char *later = lane_slot_ahead(l, RX_AHEAD);
            __builtin_prefetch(later);
            __builtin_prefetch(later + 64);
        }
        cadre__p2p_incoming_wire(w, &h, payload, bulk ? &bulk_framing : &eager_framing);
        if (cadre__eng.peers[w].state == PEER_DEAD)
            return n;
        lane_next(l);
        n++;
    }
    if (n) /* the slots are read (copied out, or queued): the sender may reuse them */
        lane_read(p, l);
    return n;
}

static int shm_progress(void)
{
    int events = 0;
    for (int i = 0; i < S.nsenders; i++) {
        int w = S.senders[i];
        struct shm_peer *p = &S.peers[w];
        events += drain_lane(w, p, &p->rx_eager, 0, 32);
        if (cadre__eng.peers[w].state == PEER_DEAD)
            continue;
        events += drain_lane(w, p, &p->rx_bulk, 1, 8);
    }
    return events;
}

int cadre__p2p_shm_pending(void)
{
    /* Positions move under the engine lock; a stale one only means a
     * spurious "yes", and the caller then takes the lock. */
    for (int i = 0; i < S.nsenders; i++) {
        struct shm_peer *p = &S.peers[S.senders[i]];
        struct lane *e = &p->rx_eager, *b = &p->rx_bulk;
        uint64_t pe = __atomic_load_n(&e->pos, __ATOMIC_RELAXED);
        uint64_t pb = __atomic_load_n(&b->pos, __ATOMIC_RELAXED);
        struct slot *se = __atomic_load_n(&e->cur, __ATOMIC_RELAXED);
        struct slot *sb = __atomic_load_n(&b->cur, __ATOMIC_RELAXED);
        if (atomic_load_explicit(&se->seq, memory_order_relaxed) == pe + 1 ||
            atomic_load_explicit(&sb->seq, memory_order_relaxed) == pb + 1)
            return 1;
    }
    return 0;
}

static void shm_finalize(void)
{
    if (S.peers) {
        for (int w = 0; w < cadre__proc.size; w++)
            if (S.peers[w].mapped)
                munmap(S.peers[w].seg, S.peers[w].seg_size);
    }
    free(S.peers);
    free(S.senders);
    S.peers = NULL;
    S.senders = NULL;
    S.nsenders = 0;
    if (cadre__eng.bell != &cadre__eng.bell_local) {
        /* Threads may still look at the bell until the engine stops them. */
        cadre__eng.bell_local = (struct cadre_p2p_doorbell){0}; /* asym 0: cadre__p2p_init */
        cadre__eng.bell = &cadre__eng.bell_local;
    }
    if (S.seg)
        munmap(S.seg, S.seg_size);
    S.seg = NULL;
    if (S.fd >= 0)
        close(S.fd);
    S.fd = -1;
}

const struct cadre_p2p_transport cadre__p2p_shm = {
    .name = "shm",
    .init = shm_init,
    .wireup = shm_wireup,
    .reachable = shm_reachable,
    .max_payload = shm_max_payload,
    .eager_limit = shm_eager_limit,
    .send = shm_send,
    .progress = shm_progress,
    .pollfds = NULL,
    .finalize = shm_finalize,
    .peek = shm_peek,
    .take = shm_take,
    .ready = shm_ready,
};
