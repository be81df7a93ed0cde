/* Matching on (context, source, tag) and the message protocols:
 * EAGER for small messages; RTS, CTS, DATA for large ones, so a message whose
 * receive is not posted costs the receiver a header, never the payload; and
 * the direct receive of a message still in the transport. The table of
 * posted receives and queued messages is p2p_match_ctx.c's. May call: this
 * folder, runtime/ (the device path's table of runtime_device.h among it);
 * the layers above only through cadre__p2p_up and that table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime_device.h"
#include "p2p_engine.h"
#include "p2p_match.h"

static int matches(const struct cadre_request *r, const struct cadre_p2p_hdr *h)
{
    return takes(r->peer, r->tag, h);
}

static void set_status(struct cadre_request *r, const struct cadre_p2p_hdr *h, size_t got)
{
    r->status.source = h->src;
    r->status.tag = h->tag;
    /* Bytes are the common case: no division for them. */
    r->status.count = r->elsize > 1 ? got / r->elsize : got;
}

void cadre__p2p_complete_recv(struct cadre_request *r)
{
    if (r->msg_len > r->bytes) {
        char got[64], room[64];
        cadre__elements_text(got, sizeof got, r->msg_len, r->elsize);
        cadre__elements_text(room, sizeof room, r->bytes, r->elsize);
        cadre__req_complete(r, CADRE_ERR_TRUNCATE,
                            "%s: message of %s from rank %d tag %d is longer than the receive "
                            "buffer of %s",
                            r->op, got, r->status.source, r->status.tag, room);
    } else {
        cadre__req_complete_ok(r);
    }
}

/* A collective receive that matched a message of a different call. */
static int sig_differs(struct cadre_request *r, const struct cadre_p2p_hdr *h)
{
    if (!r->sig || !h->off || r->sig == h->off)
        return 0;
    r->peer_sig = h->off;
    set_status(r, h, 0);
    return 1;
}

static void deliver_eager(struct cadre_request *r, const struct cadre_p2p_hdr *h, int peer,
                          const void *data)
{
    if (sig_differs(r, h)) {
        r->peer_world = peer;
        cadre__req_complete(r, CADRE_ERR_MISMATCH, "%s: rank %d made a different call", r->op,
                            (int)h->src);
        return;
    }
    if (h->flags & CADRE_P2P_DEVICE) {
        cadre__gpu.deliver(r, h, peer, data);
        return;
    }
    size_t n = h->len < r->bytes ? h->len : r->bytes;
    if (n && data != r->buf) /* a claimed receive has its payload in place */
        cadre__copy(r->buf, data, n);
    r->peer_world = peer;
    r->msg_len = h->len;
    set_status(r, h, n);
    cadre__p2p_complete_recv(r);
}

/* A matched RTS: take the data. From ourselves it is one memcpy from the
 * sending request; from a peer it is a CTS, then DATA. */
static void deliver_rts(struct cadre_request *r, const struct cadre_p2p_hdr *h, int peer)
{
    struct cadre_engine *e = &cadre__eng;
    r->peer_world = peer;
    r->msg_len = h->len;
    r->xfer = h->len < r->bytes ? h->len : r->bytes;
    if (sig_differs(r, h)) {
        /* Take nothing; the sender's collective learns from the POISON. */
        r->xfer = 0;
        r->msg_len = 0;
    }
    r->remote = h->sreq;
    set_status(r, h, r->xfer);
    if (peer == cadre__proc.rank && r->peer_sig) {
        cadre__req_complete(r, CADRE_ERR_MISMATCH, "%s: this rank made a different call", r->op);
        return;
    }
    if (peer == cadre__proc.rank) {
        struct cadre_request *s = cadre__req_lookup(h->sreq);
        if (s && r->xfer)
            cadre__copy_out(r->buf, s->buf, r->xfer, r->xfer);
        if (s)
            cadre__req_complete(s, CADRE_SUCCESS, NULL);
        cadre__p2p_complete_recv(r);
        return;
    }
    if (e->peers[peer].state == PEER_DEAD) {
        cadre__req_complete(r, CADRE_ERR_PEER, "%s: peer rank %d %s", r->op, peer,
                            e->peers[peer].why);
        return;
    }
    if (cadre__req_register(r) != CADRE_SUCCESS) {
        cadre__req_complete(r, CADRE_ERR_NOMEM, "%s: no memory for a request id", r->op);
        return;
    }
    r->state = RS_WAIT_DATA;
    r->last_activity = cadre__now();
    struct cadre_p2p_hdr c = {.type = CADRE_P2P_CTS, .len = r->xfer, .sreq = h->sreq, .rreq = r->id};
    if ((h->flags & CADRE_P2P_CMA) && r->xfer && !r->peer_sig && cadre__p2p_cma_recv(r, peer, h))
        return; /* read in place, or failed: complete on the sender's DONE (p2p_cma.c) */
    int rc = cadre__p2p_post(peer, &c, NULL, NULL);
    if (rc != CADRE_SUCCESS) {
        cadre__req_complete(r, rc, "%s: cannot answer rank %d: %s", r->op, peer,
                            cadre_last_error());
        return;
    }
    if (r->peer_sig)
        cadre__req_complete(r, CADRE_ERR_MISMATCH, "%s: rank %d made a different call", r->op,
                            (int)h->src);
    else if (r->xfer == 0)
        cadre__p2p_complete_recv(r);
}

int cadre__p2p_start_recv(struct cadre_request *r)
{
    struct match_ctx *m = ctx_find(r->ctx, 1);
    if (!m)
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", r->op);
    for (struct unexp *u = m->unexp, *prev = NULL; u; prev = u, u = u->next) {
        if (!matches(r, &u->h))
            continue;
        unexp_unlink(m, u, prev);
        if (u->h.type == CADRE_P2P_EAGER)
            deliver_eager(r, &u->h, u->peer, u->data);
        else
            deliver_rts(r, &u->h, u->peer);
        free(u->data);
        free(u);
        return CADRE_SUCCESS;
    }
    /* What a dead or finalized peer sent is delivered above; nothing more will come. */
    if (r->peer_world >= 0 && r->peer_world != cadre__proc.rank) {
        struct cadre_peer *p = &cadre__eng.peers[r->peer_world];
        if (p->state != PEER_OK)
            return cadre__error(CADRE_ERR_PEER, "%s: peer rank %d %s", r->op, r->peer_world,
                                p->why);
    }
    /* Nothing that came matches, and a rank that might send it is dead. */
    int q;
    if (r->peer == CADRE_ANY_SOURCE && r->comm &&
        (q = cadre__p2p_comm_dead_member(r->comm)) >= 0) {
        char msg[512];
        cadre__p2p_any_source_text(r, q, cadre__world_rank(r->comm, q), msg,
                        sizeof msg);
        return cadre__error(CADRE_ERR_PEER, "%s", msg);
    }
    r->state = RS_POSTED;
    r->next = NULL;
    r->prev = m->posted_tail;
    if (m->posted_tail)
        m->posted_tail->next = r;
    else
        m->posted = r;
    m->posted_tail = r;
    return CADRE_SUCCESS;
}

/* Takes posted receive r off m's queue. */
static inline void unpost_from(struct match_ctx *m, struct cadre_request *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        m->posted = r->next;
    if (r->next)
        r->next->prev = r->prev;
    else
        m->posted_tail = r->prev;
    r->next = r->prev = NULL;
    r->state = RS_NEW;
}

void cadre__p2p_unpost(struct cadre_request *r)
{
    struct match_ctx *m = ctx_find(r->ctx, 0);
    if (m && r->state == RS_POSTED)
        unpost_from(m, r);
}

int cadre__p2p_start_send(struct cadre_request *r)
{
    struct cadre_engine *e = &cadre__eng;
    int w = r->peer_world;
    struct cadre_p2p_hdr h = {.dt = r->dt, .ctx = r->ctx, .src = r->comm->rank, .tag = r->tag,
                              .len = r->bytes, .off = r->sig};
    if (w == cadre__proc.rank) {
        /* To ourselves: an eager copy for small messages; large ones wait,
         * by reference, for the receive and are then copied once. */
        if (r->bytes <= CADRE_SHM_EAGER) {
            h.type = CADRE_P2P_EAGER;
            cadre__p2p_incoming(w, &h, r->buf);
            cadre__req_complete(r, CADRE_SUCCESS, NULL);
            return CADRE_SUCCESS;
        }
        CADRE_CHECK(cadre__req_register(r));
        r->state = RS_WAIT_CTS;
        h.type = CADRE_P2P_RTS;
        h.sreq = r->id;
        cadre__p2p_incoming(w, &h, NULL);
        return CADRE_SUCCESS;
    }
    struct cadre_peer *p = &e->peers[w];
    if (p->state != PEER_OK)
        return cadre__error(CADRE_ERR_PEER, "%s: peer rank %d %s", r->op, w, p->why);
    if (r->dev_mem && r->bytes <= p->eager)
        return cadre__error(CADRE_ERR_INTERNAL, "%s: a device buffer of %zu bytes to rank %d "
                            "would go eager", r->op, r->bytes, w);
    if (r->bytes <= p->eager) {
        h.type = CADRE_P2P_EAGER;
        return cadre__p2p_post(w, &h, r->buf, r);
    }
    CADRE_CHECK(cadre__req_register(r));
    r->state = RS_WAIT_CTS;
    h.type = CADRE_P2P_RTS;
    h.sreq = r->id;
    if (r->dev_mem) {
        h.flags = CADRE_P2P_DEVMEM; /* never read here, nor offered to CMA */
    } else if (cadre__p2p_cma_offer(w, r)) {
        h.flags = CADRE_P2P_CMA;
        h.rreq = (uint64_t)(uintptr_t)r->buf;
        r->cma = 1;
    }
    /* The buffer, for a transport that carries the data with the RTS (p2p.h). */
    int rc = cadre__p2p_post(w, &h, r->buf, NULL);
    if (rc != CADRE_SUCCESS)
        return cadre__error(rc, "%s: %s", r->op, cadre_last_error());
    return CADRE_SUCCESS;
}

static void incoming_matched(int peer, const struct cadre_p2p_hdr *h, const void *payload)
{
    if ((h->ctx & 1) && h->tag == CADRE_P2P_POISON_TAG) {
        if (cadre__p2p_up.poison_in)
            cadre__p2p_up.poison_in(peer, h);
        return;
    }
    if ((h->ctx & 1) && h->tag == CADRE_P2P_SIGQ_TAG) {
        if (cadre__p2p_up.sigq_in)
            cadre__p2p_up.sigq_in(peer, h);
        return;
    }
    struct cadre_request *c = cadre__eng.peers[peer].claimed;
    if (c && h->type == CADRE_P2P_EAGER) {
        /* Read into place; the claim was the matching. */
        cadre__eng.peers[peer].claimed = NULL;
        deliver_eager(c, h, peer, payload);
        return;
    }
    struct match_ctx *m = ctx_find(h->ctx, 1);
    if (!m) {
        CADRE_WARN(P2P, "no memory to queue a message from rank %d; dropped", peer);
        return;
    }
    for (struct cadre_request *r = m->posted; r; r = r->next) {
        if (!matches(r, h))
            continue;
        unpost_from(m, r);
        if (h->type == CADRE_P2P_EAGER)
            deliver_eager(r, h, peer, payload);
        else
            deliver_rts(r, h, peer);
        return;
    }
    struct unexp *u = calloc(1, sizeof *u);
    if (u && h->type == CADRE_P2P_EAGER && h->len) {
        u->data = malloc(h->len);
        if (!u->data) {
            free(u);
            u = NULL;
        } else {
            cadre__copy(u->data, payload, h->len);
        }
    }
    if (!u) {
        CADRE_WARN(P2P, "no memory to queue a message from rank %d; dropped", peer);
        return;
    }
    u->h = *h;
    u->peer = peer;
    if (m->unexp_tail)
        m->unexp_tail->next = u;
    else
        m->unexp = u;
    m->unexp_tail = u;
    __atomic_store_n(&cadre__p2p_unexp_gen, cadre__p2p_unexp_gen + 1, __ATOMIC_RELEASE);
    /* Early, or of a call this rank did not make (another root): the
     * collective layer judges by the signature. */
    if ((h->ctx & 1) && cadre__p2p_up.stray_in)
        cadre__p2p_up.stray_in(peer, h);
}

static void incoming_cts(int peer, const struct cadre_p2p_hdr *h)
{
    if (h->flags & CADRE_P2P_CMA) {
        cadre__p2p_cma_fin(peer, h);
        return;
    }
    struct cadre_request *s = cadre__req_lookup(h->sreq);
    if (h->flags & CADRE_P2P_PULL) {
        /* The receiver's transport pulls the data that went with the RTS:
         * matched, the data moving; done when the transport says
         * (cadre__p2p_sent), which may have come first. */
        if (s && s->kind == REQ_SEND && s->state == RS_WAIT_CTS && s->peer_world == peer &&
            h->len <= s->bytes) {
            s->remote = h->rreq;
            s->xfer = s->moved = h->len;
            s->state = RS_STREAM;
            s->last_activity = cadre__now();
        }
        return;
    }
    if (!s || s->kind != REQ_SEND || s->state != RS_WAIT_CTS || s->peer_world != peer ||
        h->len > s->bytes) {
        CADRE_WARN(P2P, "ignoring a CTS from rank %d for unknown send %llx", peer,
                   (unsigned long long)h->sreq);
        return;
    }
    if (s->abandoned) {
        /* Freed first: a post that finds the peer gone fails its requests,
         * this one too, and that would free it under our hands. */
        struct cadre_p2p_hdr n = {.type = CADRE_P2P_NACK, .sreq = h->sreq, .rreq = h->rreq};
        cadre__req_complete(s, CADRE_ERR_TIMEOUT, NULL);
        cadre__p2p_post(peer, &n, NULL, NULL);
        return;
    }
    s->remote = h->rreq;
    s->xfer = h->len;
    s->moved = 0;
    s->last_activity = cadre__now();
    if (s->xfer == 0) {
        cadre__req_complete(s, CADRE_SUCCESS, NULL);
        return;
    }
    s->state = RS_STREAM;
    /* sreq: the send a transport names when it has read the payload
     * (CADRE_P2P_LATER, cadre__p2p_sent). */
    struct cadre_p2p_hdr d = {.type = CADRE_P2P_DATA, .sreq = h->sreq, .rreq = h->rreq};
    int rc = cadre__p2p_post(peer, &d, NULL, s);
    if (rc != CADRE_SUCCESS)
        cadre__req_complete(s, rc, "%s: %s", s->op, cadre_last_error());
}

void *cadre__p2p_data_dest(int peer, const struct cadre_p2p_hdr *h)
{
    struct cadre_request *r = cadre__p2p_data_target(peer, h);
    return r ? r->buf + h->off : NULL;
}

/* What a transport that checked the framing itself passes to incoming_wire. */
static const struct cadre_p2p_wire framing_checked = {.types = CADRE_P2P_TYPES_ALL,
                                                      .max_payload = UINT64_MAX};

/* The engine's check of h from world rank peer (0 <= peer < nranks) on top
 * of the transport's framing: the stream's sequence number (our own
 * messages and DATA have none) and the fields matching relies on. */
static int engine_check(int peer, const struct cadre_p2p_hdr *h,
                        const struct cadre_p2p_wire *framing, char *why, size_t whylen)
{
    struct cadre_p2p_wire w = *framing;
    w.nranks = cadre__eng.nranks;
    w.seq = h->type != CADRE_P2P_DATA && peer != cadre__proc.rank
                ? cadre__eng.peers[peer].recv_seq + 1
                : 0;
    return cadre__p2p_hdr_check(h, &w, why, whylen);
}

/* A plain EAGER message from another rank that passes every rule of
 * engine_check (and cadre__p2p_hdr_check): the common case, decided
 * inline; any other header, good or bad, takes the full check. */
static inline int eager_sound(int peer, const struct cadre_p2p_hdr *h,
                              const struct cadre_p2p_wire *framing)
{
    const struct cadre_engine *e = &cadre__eng;
    return h->type == CADRE_P2P_EAGER && (framing->types & CADRE_P2P_TYPE_BIT(CADRE_P2P_EAGER)) &&
           h->len <= framing->max_payload &&
           (!(h->flags & CADRE_P2P_INLINE) || !framing->max_inline ||
            h->len <= framing->max_inline) &&
           peer != cadre__proc.rank && h->seq == e->peers[peer].recv_seq + 1 &&
           (uint32_t)h->src < (uint32_t)e->nranks && h->tag >= 0;
}

void *cadre__p2p_eager_dest(int peer, const struct cadre_p2p_hdr *h)
{
    struct cadre_engine *e = &cadre__eng;
    if (peer < 0 || peer >= e->nranks || peer == cadre__proc.rank || e->peers[peer].claimed ||
        h->type != CADRE_P2P_EAGER || !h->len || (h->flags & CADRE_P2P_DEVICE) ||
        ((h->ctx & 1) && (h->tag == CADRE_P2P_POISON_TAG || h->tag == CADRE_P2P_SIGQ_TAG)))
        return NULL;
    /* The check incoming makes when the payload is whole. */
    char why[160];
    if (engine_check(peer, h, &framing_checked, why, sizeof why) != CADRE_P2P_HDR_OK)
        return NULL;
    struct match_ctx *m = ctx_find(h->ctx, 0);
    struct cadre_request *r = m ? m->posted : NULL;
    while (r && !matches(r, h))
        r = r->next;
    if (!r || h->len > r->bytes || (r->sig && h->off && r->sig != h->off) ||
        (!r->id && cadre__req_register(r) != CADRE_SUCCESS))
        return NULL;
    cadre__p2p_unpost(r);
    r->state = RS_WAIT_DATA;
    r->peer_world = peer;
    r->xfer = 0; /* no DATA for it */
    r->last_activity = cadre__now();
    e->peers[peer].claimed = r;
    return r->buf;
}

void cadre__p2p_dest_gone(struct cadre_request *r)
{
    int w = r->peer_world;
    if (w < 0 || w == cadre__proc.rank || w >= cadre__eng.nranks)
        return;
    struct cadre_peer *p = &cadre__eng.peers[w];
    if (p->claimed == r)
        p->claimed = NULL;
    if (p->tp && p->tp->release_dest && r->buf)
        p->tp->release_dest(w, r->buf, r->bytes);
}

static void incoming_data(int peer, const struct cadre_p2p_hdr *h, const void *payload)
{
    struct cadre_request *r = cadre__p2p_data_target(peer, h);
    if (!r) {
        CADRE_WARN(P2P, "ignoring %llu DATA bytes from rank %d for unknown receive %llx",
                   (unsigned long long)h->len, peer, (unsigned long long)h->rreq);
        return;
    }
    if (payload && payload == r->pull_to && !h->off && h->len == r->xfer) {
        /* Pulled whole into the destination the receive named
         * (cadre__p2p_pull_dest): in place there, not in buf. */
        atomic_store_explicit(&r->pull_go, PULL_GATE_LANDED, memory_order_release);
    } else if (payload != r->buf + h->off && h->len)
        cadre__copy_out(r->buf + h->off, payload, h->len, r->nt ? SIZE_MAX : r->xfer);
    r->moved += h->len;
    r->last_activity = cadre__now();
    if (r->moved == r->xfer)
        cadre__p2p_complete_recv(r);
}

void cadre__p2p_incoming(int peer, const struct cadre_p2p_hdr *h, const void *payload)
{
    /* The transport checked the framing; here the stream and the fields
     * matching relies on. */
    cadre__p2p_incoming_wire(peer, h, payload, &framing_checked);
}

void cadre__p2p_incoming_wire(int peer, const struct cadre_p2p_hdr *h, const void *payload,
                              const struct cadre_p2p_wire *framing)
{
    struct cadre_engine *e = &cadre__eng;
    if (peer < 0 || peer >= e->nranks)
        return;
    char why[160];
    int rc = eager_sound(peer, h, framing) ? CADRE_P2P_HDR_OK
                                           : engine_check(peer, h, framing, why, sizeof why);
    if (rc == CADRE_P2P_HDR_CORRUPT) {
        cadre__p2p_peer_failed(peer, why);
        return;
    }
    /* Our own messages and DATA have no sequence numbers. */
    if (h->type != CADRE_P2P_DATA && peer != cadre__proc.rank)
        e->peers[peer].recv_seq = h->seq;
    if (rc != CADRE_P2P_HDR_OK) {
        CADRE_WARN(P2P, "dropping a message: rank %d %s", peer, why);
        return;
    }
    switch (h->type) {
    case CADRE_P2P_EAGER:
    case CADRE_P2P_RTS:
        incoming_matched(peer, h, payload);
        break;
    case CADRE_P2P_CTS: incoming_cts(peer, h); break;
    case CADRE_P2P_DATA: incoming_data(peer, h, payload); break;
    case CADRE_P2P_NACK: {
        if (!h->rreq) {
            cadre__p2p_unexp_withdraw(peer, h);
            break;
        }
        struct cadre_request *r = cadre__req_lookup(h->rreq);
        if (r && r->kind == REQ_RECV && r->peer_world == peer)
            cadre__req_complete(r, CADRE_ERR_TIMEOUT,
                                "%s: rank %d gave up sending this message (its operation timed out)",
                                r->op, peer);
        break;
    }
    case CADRE_P2P_DONE: cadre__p2p_cma_done(peer, h); break;
    case CADRE_P2P_BYE: cadre__p2p_peer_finalized(peer); break;
    case CADRE_P2P_STATE_Q:
    case CADRE_P2P_STATE_R: cadre__p2p_state_incoming(peer, h); break;
    default:
        cadre__p2p_peer_failed(peer, "sent a message of unknown type (corrupt stream)");
    }
}

/* One look for cadre__p2p_recv_direct, lock held. */
enum { DIRECT_DONE, DIRECT_EMPTY, DIRECT_NO };
static int direct_try(const struct cadre_p2p_direct *d, cadre_status_t *status)
{
    struct cadre_engine *e = &cadre__eng;
    struct cadre_peer *p = &e->peers[d->world];
    if (p->state != PEER_OK || p->claimed)
        return DIRECT_NO;
    /* Nothing that came before may match first: no posted receive on the
     * communicator (it was posted earlier), no queued message we match. */
    struct match_ctx *m = ctx_find(d->ctx, 0);
    if (m) {
        if (m->posted)
            return DIRECT_NO;
        for (struct unexp *u = m->unexp; u; u = u->next)
            if (takes(d->src, d->tag, &u->h))
                return DIRECT_NO;
    }
    struct cadre_p2p_hdr h;
    const struct cadre_p2p_wire *framing;
    const void *payload = p->tp->peek(d->world, &h, &framing);
    if (!payload)
        return DIRECT_EMPTY;
    /* Anything but a plain message for us goes the general way. */
    if (h.type != CADRE_P2P_EAGER || h.ctx != d->ctx || !takes(d->src, d->tag, &h) ||
        h.len > d->bytes || (h.flags & CADRE_P2P_DEVICE) || h.off)
        return DIRECT_NO;
    char why[160];
    if (engine_check(d->world, &h, framing, why, sizeof why) != CADRE_P2P_HDR_OK)
        return DIRECT_NO;
    if (h.len)
        cadre__copy(d->buf, payload, h.len);
    p->recv_seq = h.seq;
    p->tp->take(d->world);
    if (status)
        *status = (cadre_status_t){.source = (int)h.src, .tag = (int)h.tag,
                                   .count = d->elsize ? h.len / d->elsize : h.len};
    return DIRECT_DONE;
}

int cadre__p2p_recv_direct(const struct cadre_p2p_direct *d, cadre_status_t *status)
{
    struct cadre_engine *e = &cadre__eng;
    const struct cadre_p2p_transport *tp = e->peers[d->world].tp;
    if (!tp || !tp->peek)
        return 0;
    /* While other work is under way (nonblocking requests, collectives,
     * several threads), one look and no spinning: the general path drives it. */
    int polls = e->oversubscribed || atomic_load_explicit(&e->outstanding, memory_order_relaxed) ||
                        __atomic_load_n(&e->generic, __ATOMIC_RELAXED)
                    ? 0
                    : DIRECT_POLLS;
    eng_lock();
    int rc = direct_try(d, status);
    eng_unlock();
    for (int i = 0; rc == DIRECT_EMPTY && i < polls; i++) {
        if (!tp->ready(d->world)) {
            __builtin_ia32_pause();
            continue;
        }
        eng_lock();
        rc = direct_try(d, status);
        eng_unlock();
    }
    return rc == DIRECT_DONE;
}
