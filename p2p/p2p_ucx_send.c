/* The UCX transport's sending side (p2p_ucx.c has the design): endpoints,
 * made on first use with peer error handling; eager messages sent at once
 * from the caller's buffer where UCX completes them immediately, else from
 * a copy; DATA as one zero-copy rendezvous from the sender's buffer,
 * reported to the engine when UCX is done reading it (CADRE_P2P_LATER);
 * heartbeats; and the failure of a peer. May call: this folder, runtime/. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "p2p/p2p_ucx.h"

#if HAVE_UCX

#define st (&cadre__ucx_st)
#define U cadre__ucx

/* UCX calls it from progress (ours): the peer's endpoint failed. Its
 * failure waits UCX_BYE_WAIT for what it sent last to be delivered, its
 * BYE among it (a peer that finalized closed the endpoint: no failure). */
static void ep_err_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    (void)ep;
    int peer = (int)(intptr_t)arg;
    struct ucx_peer *p = &st->peers[peer];
    st->events++;
    if (!p->err_at) {
        p->err_at = cadre__ucx_now();
        snprintf(p->err, sizeof p->err, "connection lost (UCX: %s)", U.ucs_status_string(status));
    }
}

ucs_status_t cadre__ucx_ep(int peer)
{
    struct ucx_peer *p = &st->peers[peer];
    if (p->state != EP_NONE)
        return p->state == EP_UP ? UCS_OK : UCS_ERR_CONNECTION_RESET;
    ucp_ep_params_t ep = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .address = p->addr,
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = {.cb = ep_err_cb, .arg = (void *)(intptr_t)peer},
    };
    ucs_status_t s = U.ucp_ep_create(st->worker, &ep, &p->ep);
    if (s != UCS_OK) {
        p->ep = NULL;
        return s;
    }
    p->state = EP_UP;
    p->last_heard = p->last_sent = cadre__ucx_now();
    return UCS_OK;
}

/* UCX completed a send (or canceled it: the endpoint closed): recorded,
 * acted on by cadre__ucx_reap outside UCX's progress. */
static void send_cb(void *request, ucs_status_t status, void *user_data)
{
    struct ucx_op *op = user_data;
    op->status = status;
    op->req = NULL;
    /* A rendezvous ends when the peer has taken the data: it is alive
     * (its heartbeats may be queued behind our data, as ours behind its). */
    if (status == UCS_OK && op->later)
        st->peers[op->peer].last_heard = cadre__ucx_now();
    U.ucp_request_free(request);
    st->events++;
}

static void op_unlink(struct ucx_op *op)
{
    if (op->prev)
        op->prev->next = op->next;
    else
        st->ops = op->next;
    if (op->next)
        op->next->prev = op->prev;
    st->peers[op->peer].ops--;
}

int cadre__ucx_reap(void)
{
    int n = 0;
    for (struct ucx_op *op = st->ops, *next; op; op = next) {
        next = op->next;
        if (op->req)
            continue; /* in flight */
        struct ucx_peer *p = &st->peers[op->peer];
        if (op->status != UCS_OK && p->state != EP_FAILED) {
            /* The peer is failing: its failure (ep_err_cb's wait, or now)
             * comes first, so the send fails with the peer's record. */
            if (!p->err_at) {
                p->err_at = cadre__ucx_now();
                snprintf(p->err, sizeof p->err, "sending to it failed (UCX: %s)",
                         U.ucs_status_string(op->status));
            }
            continue;
        }
        op_unlink(op);
        if (op->later)
            cadre__p2p_sent(op->peer, op->w.h.sreq,
                            op->status == UCS_OK ? CADRE_SUCCESS : CADRE_ERR_PEER);
        free(op);
        n++;
    }
    return n;
}

static void op_link(int peer, struct ucx_op *op)
{
    op->peer = peer;
    op->prev = NULL;
    op->next = st->ops;
    if (st->ops)
        st->ops->prev = op;
    st->ops = op;
    st->peers[peer].ops++;
}

/* Sends header w with payload [buf, len): UCX's answer, the op tracked when
 * it is in flight. */
static ucs_status_ptr_t am_send(int peer, struct ucx_op *op, const void *buf, size_t len,
                                uint32_t flags)
{
    ucp_request_param_t prm = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                        UCP_OP_ATTR_FIELD_FLAGS,
        .cb = {.send = send_cb},
        .user_data = op,
        .flags = flags,
    };
    if (op->cuda) {
        /* A device buffer (CADRE_P2P_DEVMEM): UCX reads it itself. */
        prm.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMORY_TYPE;
        prm.memory_type = UCS_MEMORY_TYPE_CUDA;
    }
    ucs_status_ptr_t sp = U.ucp_am_send_nbx(st->peers[peer].ep, UCX_AM_ID, &op->w, sizeof op->w,
                                            buf, len, &prm);
    if (sp && !UCS_PTR_IS_ERR(sp)) {
        op->req = sp;
        op_link(peer, op);
    }
    return sp;
}

/* A large message: the RTS with its data, one active message by UCX's
 * rendezvous, which the receiver pulls into the receive's buffer when one
 * takes it (p2p_ucx_pull.c); reported when UCX is done with the buffer
 * (CADRE_P2P_LATER). */
static int send_rts(int peer, const struct cadre_p2p_hdr *h, const void *payload)
{
    struct ucx_peer *p = &st->peers[peer];
    struct ucx_op *op = calloc(1, sizeof *op);
    if (!op)
        return cadre__error(CADRE_ERR_NOMEM, "ucx: no memory for a send to rank %d", peer);
    op->w = (struct ucx_wire){.cookie = st->cookie, .tseq = p->send_tseq + 1, .from = st->rank,
                              .kind = UK_MSG, .h = *h};
    op->w.h.flags &= (uint8_t)~CADRE_P2P_DEVMEM; /* ours, not the receiver's */
    op->cuda = (h->flags & CADRE_P2P_DEVMEM) != 0;
    op->later = 1;
    ucs_status_ptr_t sp = am_send(peer, op, payload, h->len, UCP_AM_SEND_FLAG_RNDV);
    if (UCS_PTR_IS_ERR(sp)) {
        free(op);
        cadre__ucx_fail(peer, "sending to rank %d failed (UCX: %s)", peer,
                        U.ucs_status_string(UCS_PTR_STATUS(sp)));
        return CADRE_ERR_PEER;
    }
    if (!sp) /* done at once: reported by the next reap */
        op_link(peer, op);
    p->send_tseq++;
    p->last_sent = cadre__ucx_now();
    return CADRE_P2P_LATER;
}

int cadre__ucx_send(int peer, const struct cadre_p2p_hdr *h, const void *payload)
{
    if (peer < 0 || peer >= st->size || !st->peers[peer].reachable)
        return cadre__error(CADRE_ERR_INTERNAL, "ucx: send to rank %d, which it does not reach",
                            peer);
    struct ucx_peer *p = &st->peers[peer];
    /* Its endpoint was made at wireup (a pair whose endpoint could not be
     * made does not use ucx): failed since, or never. */
    if (p->state == EP_FAILED || p->state == EP_GOING)
        return CADRE_ERR_PEER;
    if (p->state != EP_UP)
        return cadre__error(CADRE_ERR_INTERNAL, "ucx: send to rank %d, which has no endpoint",
                            peer);
    if (p->err_at) {
        /* Gone: what it sent last (a BYE?) first, then its failure. */
        cadre__ucx_deliver();
        if (p->state != EP_FAILED)
            cadre__ucx_fail(peer, "%s", p->err);
        return CADRE_ERR_PEER;
    }
    if (h->type == CADRE_P2P_RTS && payload && h->len && h->len <= UCX_MAX_PAYLOAD &&
        (st->direct || !(h->flags & CADRE_P2P_DEVMEM)))
        return send_rts(peer, h, payload);
    if (h->flags & CADRE_P2P_DEVMEM)
        return cadre__error(CADRE_ERR_INTERNAL, "ucx: a device buffer of %zu bytes to rank %d "
                            "that UCX cannot take directly", (size_t)h->len, peer);
    size_t plen = cadre__p2p_has_payload(h->type) ? h->len : 0;
    if (h->type < 1 || h->type > CADRE_P2P_TYPE_MAX || plen > UCX_MAX_PAYLOAD ||
        (h->type == CADRE_P2P_EAGER && plen > UCX_EAGER))
        return cadre__error(CADRE_ERR_INTERNAL,
                            "ucx: send to rank %d: bad message (type %u, %zu bytes)", peer, h->type,
                            plen);
    struct ucx_wire w = {.cookie = st->cookie, .tseq = p->send_tseq + 1, .from = st->rank,
                         .kind = UK_MSG, .h = *h};
    /* A receive took a message whose data came with its RTS: pulled from
     * here on; the CTS tells the sender so (p2p_ucx_pull.c). */
    if (h->type == CADRE_P2P_CTS && cadre__ucx_pull_cts(peer, h))
        w.h.flags |= CADRE_P2P_PULL;
    ucs_status_ptr_t sp;
    if (h->type == CADRE_P2P_DATA) {
        /* Zero copy: UCX reads the sender's buffer until send_cb. */
        struct ucx_op *op = calloc(1, sizeof *op);
        if (!op)
            return cadre__error(CADRE_ERR_NOMEM, "ucx: no memory for a send to rank %d", peer);
        op->w = w;
        op->later = 1;
        sp = am_send(peer, op, payload, plen, UCP_AM_SEND_FLAG_RNDV);
        if (!UCS_PTR_IS_PTR(sp) || !sp)
            free(op);
        if (sp && !UCS_PTR_IS_ERR(sp)) {
            p->send_tseq++;
            p->last_sent = cadre__ucx_now();
            return CADRE_P2P_LATER;
        }
    } else {
        /* From the caller's buffer when UCX is done with it at once (a
         * short or buffered-copy eager send), else from a copy. */
        struct ucx_op tmp = {.w = w};
        ucp_request_param_t prm = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS |
                                                   UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL,
                                   .flags = UCP_AM_SEND_FLAG_EAGER};
        sp = plen > UCX_EAGER_IMM ? UCS_STATUS_PTR(UCS_ERR_NO_RESOURCE)
                                  : U.ucp_am_send_nbx(p->ep, UCX_AM_ID, &tmp.w, sizeof tmp.w,
                                                      payload, plen, &prm);
        if (UCS_PTR_IS_ERR(sp) && UCS_PTR_STATUS(sp) == UCS_ERR_NO_RESOURCE) {
            struct ucx_op *op = malloc(sizeof *op + plen);
            if (!op)
                return cadre__error(CADRE_ERR_NOMEM, "ucx: no memory for a send to rank %d",
                                    peer);
            memset(op, 0, sizeof *op);
            op->w = w;
            if (plen)
                memcpy(op->bounce, payload, plen);
            /* Over RDMA UCX's choice (its rendezvous into the posted
             * receive above its threshold); over tcp its eager protocol
             * (p2p_ucx.h, UCX_EAGER). */
            sp = am_send(peer, op, op->bounce, plen,
                         st->eager_proto && plen <= UCX_TCP_EAGER ? UCP_AM_SEND_FLAG_EAGER : 0);
            if (!sp || UCS_PTR_IS_ERR(sp))
                free(op);
        } else if (UCS_PTR_IS_PTR(sp)) {
            /* Not immediate after all: it reads our caller's buffer and
             * header, so wait here (not expected with FORCE_IMM_CMPL). */
            while (U.ucp_request_check_status(sp) == UCS_INPROGRESS)
                U.ucp_worker_progress(st->worker);
            ucs_status_t s = U.ucp_request_check_status(sp);
            U.ucp_request_free(sp);
            sp = s == UCS_OK ? NULL : UCS_STATUS_PTR(s);
        }
    }
    if (UCS_PTR_IS_ERR(sp)) {
        cadre__ucx_fail(peer, "sending to rank %d failed (UCX: %s)", peer,
                        U.ucs_status_string(UCS_PTR_STATUS(sp)));
        return CADRE_ERR_PEER;
    }
    p->send_tseq++;
    p->last_sent = cadre__ucx_now();
    return CADRE_P2P_SENT;
}

void cadre__ucx_heartbeat(int peer)
{
    struct ucx_peer *p = &st->peers[peer];
    struct ucx_wire w = {.cookie = st->cookie, .from = st->rank, .kind = UK_HB};
    ucp_request_param_t prm = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS |
                                               UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL,
                               .flags = UCP_AM_SEND_FLAG_EAGER};
    ucs_status_ptr_t sp = U.ucp_am_send_nbx(p->ep, UCX_AM_ID, &w, sizeof w, NULL, 0, &prm);
    /* NO_RESOURCE: the link is full of our messages, which say as much. */
    if (!UCS_PTR_IS_ERR(sp))
        p->last_sent = cadre__ucx_now();
}

void cadre__ucx_ep_force_close(int peer)
{
    struct ucx_peer *p = &st->peers[peer];
    if (!p->ep)
        return;
    ucp_request_param_t prm = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                               .flags = UCP_EP_CLOSE_FLAG_FORCE};
    ucs_status_ptr_t sp = U.ucp_ep_close_nbx(p->ep, &prm);
    p->ep = NULL;
    double until = cadre__ucx_now() + UCX_CLOSE_WAIT;
    if (UCS_PTR_IS_PTR(sp) && sp) {
        while (U.ucp_request_check_status(sp) == UCS_INPROGRESS && cadre__ucx_now() < until)
            U.ucp_worker_progress(st->worker);
        U.ucp_request_free(sp);
    }
    /* What was in flight to it ends canceled. */
    while (p->ops && cadre__ucx_now() < until)
        if (!U.ucp_worker_progress(st->worker))
            cadre__ucx_reap();
}

void cadre__ucx_peer_gone(int peer)
{
    struct ucx_peer *p = &st->peers[peer];
    if (!st->on || peer < 0 || peer >= st->size || p->state == EP_GOING)
        return;
    p->state = EP_GOING; /* once */
    cadre__ucx_ep_force_close(peer);
    cadre__ucx_in_settle(peer);
    cadre__ucx_in_drop(peer);
    cadre__ucx_pull_drop(peer);
    /* Report what UCX still holds (canceled, or never answered: the
     * endpoint is closed, nothing reads those buffers now). */
    for (struct ucx_op *op = st->ops, *next; op; op = next) {
        next = op->next;
        if (op->peer != peer)
            continue;
        if (op->req)
            continue; /* UCX's own, freed with the worker; left as it is */
        op_unlink(op);
        if (op->later)
            cadre__p2p_sent(peer, op->w.h.sreq, CADRE_ERR_PEER);
        free(op);
    }
    for (struct ucx_op *op = st->ops; op; op = op->next)
        if (op->peer == peer && op->later && op->req) {
            CADRE_INFO(P2P, "ucx: a send to rank %d was not canceled by UCX", peer);
            op->later = 0;
            cadre__p2p_sent(peer, op->w.h.sreq, CADRE_ERR_PEER);
        }
    p->state = EP_FAILED;
}

void cadre__ucx_fail(int peer, const char *fmt, ...)
{
    struct ucx_peer *p = &st->peers[peer];
    if (p->state == EP_FAILED || p->state == EP_GOING)
        return;
    char why[400];
    int l = snprintf(why, sizeof why, "(host %s) ", p->host[0] ? p->host : "?");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why + l, sizeof why - (size_t)l, fmt, ap);
    va_end(ap);
    CADRE_INFO(P2P, "ucx: rank %d failed: %s", peer, why);
    /* The engine calls peer_gone (cadre__ucx_peer_gone) before it fails
     * the peer's requests; if it knew the peer gone already, it does not. */
    cadre__p2p_peer_failed(peer, why);
    cadre__ucx_peer_gone(peer);
}

#endif /* HAVE_UCX */
