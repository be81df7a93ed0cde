/* The shared-memory transport's receiving side: the lanes of each local
 * sender's ring read in order (the eager and tiny lanes merged by sequence
 * number, the bulk lane's fragments), and the receiver's count of what it has
 * read given back to the sender. */
#include "config.h"

#include <string.h>

#include "p2p_shm.h"

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

/* The message at the head of the tiny lane as a header with its payload
 * inline (in sreq and rreq, as the eager lane's INLINE messages), its
 * sequence number completed from `want`'s high bits; 0 when none. */
static int tiny_peek(struct lane *l, struct cadre_p2p_hdr *h, uint64_t want)
{
    struct cell *c = (struct cell *)l->cur;
    if (atomic_load_explicit(&c->valid, memory_order_acquire) != (uint32_t)(l->pos + 1))
        return 0;
    *h = (struct cadre_p2p_hdr){.type = CADRE_P2P_EAGER,
                                .flags = CADRE_P2P_INLINE,
                                .ctx = c->ctx,
                                .src = c->src,
                                .tag = c->tag,
                                .dt = (uint8_t)(c->len >> TINY_DT_SHIFT),
                                .len = c->len & TINY_LEN_MASK,
                                .seq = (want & ~(uint64_t)UINT32_MAX) | c->seq_lo};
    memcpy(&h->sreq, c->data, TINY_MAX);
    return 1;
}

/* The next message from peer w, from the tiny or the eager lane, whichever
 * holds the sequence number the engine expects (*from: that lane). The
 * sender publishes each message after the one before it, so once one lane
 * shows a later message (an acquire load), the earlier one is visible in
 * the other: a second look at the tiny lane settles it. A message out of
 * sequence in both is returned as it is, and the engine fails the peer.
 * The tiny lane's header is built in *h itself: built on the stack and
 * copied over, its copy read back the field-by-field stores with 16-byte
 * loads, which the core cannot forward (a stall of most of this
 * function's time, 2 pairs on one core each, perf). */
static const void *rx_peek(int w, struct shm_peer *p, struct cadre_p2p_hdr *h, struct lane **from)
{
    uint64_t want = cadre__eng.peers[w].recv_seq + 1;
    int tiny = tiny_peek(&p->rx_tiny, h, want);
    if (tiny && h->seq == want) {
        *from = &p->rx_tiny;
        return &h->sreq;
    }
    /* lane_peek writes *h only when the eager lane shows a message: else
     * *h keeps the tiny lane's, if any. */
    const void *payload = lane_peek(&p->rx_eager, h);
    if (payload) {
        /* The eager lane shows a later message and the tiny lane showed
         * none: the second look. */
        struct cadre_p2p_hdr t;
        if (h->seq != want && !tiny && tiny_peek(&p->rx_tiny, &t, want) && t.seq == want) {
            *h = t;
            *from = &p->rx_tiny;
            return &h->sreq;
        }
        *from = &p->rx_eager;
        return payload;
    }
    if (!tiny)
        return NULL;
    *from = &p->rx_tiny;
    return &h->sreq;
}

/* Tells the sender how far we have read the tiny lane. A sender that finds
 * it full uses the eager lane and never waits for it: no wake-up. */
static void tiny_read(struct shm_peer *p)
{
    atomic_store_explicit(p->rx_tiny.head, p->rx_tiny.pos, memory_order_release);
}

const void *cadre__shm_peek(int w, struct cadre_p2p_hdr *h, const struct cadre_p2p_wire **framing)
{
    *framing = &eager_framing;
    return rx_peek(w, &cadre__shm.peers[w], h, &cadre__shm.peers[w].peeked);
}

void cadre__shm_take(int w)
{
    struct shm_peer *p = &cadre__shm.peers[w];
    lane_next(p->peeked);
    if (p->peeked == &p->rx_tiny)
        tiny_read(p);
    else
        lane_read(p, &p->rx_eager);
}

/* Whether lane l (eager or tiny) shows its next message; a stale position
 * only means a spurious answer either way. */
static int lane_ready(const struct lane *l, int tiny)
{
    uint64_t pos = __atomic_load_n(&l->pos, __ATOMIC_RELAXED);
    struct slot *s = __atomic_load_n(&l->cur, __ATOMIC_RELAXED);
    if (tiny)
        return atomic_load_explicit(&((struct cell *)s)->valid, memory_order_relaxed) ==
               (uint32_t)(pos + 1);
    return atomic_load_explicit(&s->seq, memory_order_relaxed) == pos + 1;
}

int cadre__shm_ready(int w)
{
    return lane_ready(&cadre__shm.peers[w].rx_tiny, 1) || lane_ready(&cadre__shm.peers[w].rx_eager, 0);
}

/* Up to max messages of the eager and tiny lanes, in sequence. */
static int drain_msgs(int w, struct shm_peer *p, int max)
{
    int n = 0, neager = 0;
    while (n < max) {
        struct cadre_p2p_hdr h;
        struct lane *l;
        const void *payload = rx_peek(w, p, &h, &l);
        if (!payload)
            break;
        /* A later slot's or cell's line, while this message is handled: a
         * burst of small messages then waits for the sender's core once,
         * not once each. */
        if (l == &p->rx_eager) {
            neager++;
            if (RX_AHEAD < l->n) {
                const unsigned char *later = lane_slot_ahead(l, RX_AHEAD);
                __builtin_prefetch(later);
                __builtin_prefetch(later + 64);
            }
        } else if (TINY_RX_AHEAD < l->n) {
            __builtin_prefetch(lane_slot_ahead(l, TINY_RX_AHEAD));
        }
        cadre__p2p_incoming_wire(w, &h, payload, &eager_framing);
        if (cadre__eng.peers[w].state == PEER_DEAD)
            return n;
        lane_next(l);
        n++;
    }
    /* The slots and cells are read (copied out, or queued): the sender may
     * reuse them. */
    if (neager)
        lane_read(p, &p->rx_eager);
    if (n > neager)
        tiny_read(p);
    return n;
}

/* Up to max fragments of the bulk lane (DATA, no sequence numbers). */
static int drain_bulk(int w, struct shm_peer *p, int max)
{
    const struct cadre_p2p_wire bulk_framing = {
        .types = CADRE_P2P_TYPE_BIT(CADRE_P2P_DATA),
        .max_payload = cadre__shm.frag,
        .max_inline = CADRE_P2P_INLINE_MAX,
    };
    struct lane *l = &p->rx_bulk;
    int n = 0;
    while (n < max) {
        struct cadre_p2p_hdr h;
        const void *payload = lane_peek(l, &h);
        if (!payload)
            break;
        cadre__p2p_incoming_wire(w, &h, payload, &bulk_framing);
        if (cadre__eng.peers[w].state == PEER_DEAD)
            return n;
        lane_next(l);
        n++;
    }
    if (n)
        lane_read(p, l);
    return n;
}

int cadre__shm_progress(void)
{
    int events = 0;
    for (int i = 0; i < cadre__shm.nsenders; i++) {
        int w = cadre__shm.senders[i];
        struct shm_peer *p = &cadre__shm.peers[w];
        events += drain_msgs(w, p, 32);
        if (cadre__eng.peers[w].state == PEER_DEAD)
            continue;
        events += drain_bulk(w, p, 8);
    }
    return events;
}

int cadre__p2p_shm_pending(void)
{
    /* Positions move under the engine lock; a stale one only means a
     * spurious "yes", and the caller then takes the lock. */
    for (int i = 0; i < cadre__shm.nsenders; i++) {
        int w = cadre__shm.senders[i];
        if (cadre__shm_ready(w) || lane_ready(&cadre__shm.peers[w].rx_bulk, 0))
            return 1;
    }
    return 0;
}
