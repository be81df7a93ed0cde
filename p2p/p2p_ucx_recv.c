/* The UCX transport's receiving side (p2p_ucx.c has the design): the
 * active-message handler only records what came (it runs inside UCX's
 * progress, where cadre's engine is not to be entered); delivery follows,
 * in each pair's order (tseq), a rendezvous landing straight in the
 * buffer of the receive it is for (cadre__p2p_data_dest); an RTS that
 * came with its data hands it to p2p_ucx_pull.c, which holds it until a
 * receive takes the message. May call: this folder, runtime/. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "p2p/p2p_ucx.h"

#if HAVE_UCX

#define st (&cadre__ucx_st)
#define U cadre__ucx

/* What a UCX peer may send: every type, eager payloads up to UCX_EAGER
 * (the engine checks the rest: sequence numbers, ranks, fields). */
static const struct cadre_p2p_wire ucx_framing = {.types = CADRE_P2P_TYPES_ALL,
                                                  .max_payload = UCX_MAX_PAYLOAD};

/* In tseq order (UCX hands them over in order nearly always: from the tail). */
static void in_insert(struct ucx_peer *p, struct ucx_in *in)
{
    if (!p->in_tail || p->in_tail->w.tseq < in->w.tseq) {
        in->next = NULL;
        if (p->in_tail)
            p->in_tail->next = in;
        else
            p->in = in;
        p->in_tail = in;
        return;
    }
    struct ucx_in **pp = &p->in;
    while (*pp && (*pp)->w.tseq < in->w.tseq)
        pp = &(*pp)->next;
    in->next = *pp;
    *pp = in;
}

static int strangers; /* messages dropped as not of this job, for one log line */

ucs_status_t cadre__ucx_am_cb(void *arg, const void *header, size_t header_length, void *data,
                              size_t length, const ucp_am_recv_param_t *param)
{
    (void)arg;
    st->events++;
    int rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    struct ucx_wire w;
    if (header_length != sizeof w) {
        if (!strangers++)
            CADRE_INFO(P2P, "ucx: dropped a message with a %zu-byte header (not cadre's)",
                       header_length);
        return rndv ? UCS_ERR_REJECTED : UCS_OK;
    }
    memcpy(&w, header, sizeof w);
    if (w.cookie != st->cookie || w.from < 0 || w.from >= st->size || w.from == st->rank ||
        !st->peers[w.from].reachable) {
        if (!strangers++)
            CADRE_INFO(P2P, "ucx: dropped a message that is not of this job (rank %d)",
                       (int)w.from);
        return rndv ? UCS_ERR_REJECTED : UCS_OK;
    }
    struct ucx_peer *p = &st->peers[w.from];
    p->last_heard = cadre__ucx_now();
    if (w.kind == UK_HB || w.kind != UK_MSG || p->state == EP_FAILED || p->state == EP_GOING ||
        w.tseq <= p->recv_tseq)
        return rndv ? UCS_ERR_REJECTED : UCS_OK;
    int held = !rndv && (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA);
    size_t copy = rndv || held ? 0 : length;
    struct ucx_in *in = malloc(sizeof *in + copy);
    if (!in) {
        /* The stream has a hole now: the peer is lost to us. */
        if (!p->err_at) {
            p->err_at = cadre__ucx_now();
            snprintf(p->err, sizeof p->err, "no memory for a message from it");
        }
        return rndv ? UCS_ERR_NO_MEMORY : UCS_OK;
    }
    memset(in, 0, sizeof *in);
    in->w = w;
    in->len = length;
    in->rndv = rndv;
    in->held = held;
    in->state = IN_WAIT;
    if (copy) {
        in->data = in + 1;
        memcpy(in->data, data, length);
    } else {
        in->data = data;
    }
    in_insert(p, in);
    return rndv || held ? UCS_INPROGRESS : UCS_OK;
}

static void in_free(struct ucx_in *in)
{
    if (in->held || (in->rndv && in->state == IN_WAIT))
        U.ucp_am_data_release(st->worker, in->data);
    if (in->own)
        free(in->buf);
    free(in);
}

static void rndv_cb(void *request, ucs_status_t status, size_t length, void *user_data)
{
    (void)length;
    struct ucx_in *in = user_data;
    in->status = status;
    in->state = IN_READY;
    /* Its data came: it is alive, though its heartbeats may wait behind
     * that data (a window of large sends can keep the link full for longer
     * than CADRE_UCX_PEER_TIMEOUT under load). */
    if (status == UCS_OK)
        st->peers[in->w.from].last_heard = cadre__ucx_now();
    U.ucp_request_free(request);
    st->events++;
}

/* The rendezvous of `in` (next in its stream) lands in the receive's
 * buffer (DATA) or a buffer of ours. */
static void rndv_start(int peer, struct ucx_in *in)
{
    char *dest = NULL;
    if (in->w.h.type == CADRE_P2P_DATA && in->len == in->w.h.len)
        dest = cadre__p2p_data_dest(peer, &in->w.h);
    else if (in->w.h.type == CADRE_P2P_EAGER && in->len == in->w.h.len)
        dest = cadre__p2p_eager_dest(peer, &in->w.h); /* claims the receive */
    if (!dest) {
        dest = malloc(in->len ? in->len : 1);
        in->own = 1;
        if (!dest) {
            in->state = IN_READY;
            in->status = UCS_ERR_NO_MEMORY;
            U.ucp_am_data_release(st->worker, in->data);
            return;
        }
    }
    in->buf = dest;
    ucp_request_param_t prm = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                                               UCP_OP_ATTR_FIELD_USER_DATA,
                               .cb = {.recv_am = rndv_cb},
                               .user_data = in};
    in->state = IN_RECV;
    ucs_status_ptr_t sp = U.ucp_am_recv_data_nbx(st->worker, in->data, dest, in->len, &prm);
    if (!UCS_PTR_IS_PTR(sp)) {
        in->state = IN_READY;
        in->status = UCS_PTR_STATUS(sp);
    }
}

int cadre__ucx_deliver(void)
{
    int events = 0;
    for (int w = 0; w < st->size; w++) {
        struct ucx_peer *p = &st->peers[w];
        struct ucx_in *in;
        while ((in = p->in) && in->w.tseq == p->recv_tseq + 1 && p->state != EP_FAILED &&
               p->state != EP_GOING) {
            const struct cadre_p2p_hdr *h = &in->w.h;
            /* An RTS with its data: held for its receive (p2p_ucx_pull.c). */
            int pull = h->type == CADRE_P2P_RTS && (in->rndv || in->len);
            if (in->rndv && in->state == IN_WAIT && !pull)
                rndv_start(w, in);
            if (in->state == IN_RECV)
                break; /* its data is on its way: the stream waits */
            p->in = in->next;
            if (!p->in)
                p->in_tail = NULL;
            p->recv_tseq++;
            events++;
            size_t want = cadre__p2p_has_payload(h->type) || pull ? h->len : 0;
            if (in->rndv && in->status != UCS_OK) {
                char why[160];
                snprintf(why, sizeof why, "lost while sending %zu bytes to rank %d (UCX: %s)",
                         in->len, st->rank, U.ucs_status_string((ucs_status_t)in->status));
                in_free(in);
                cadre__ucx_fail(w, "%s", why);
                break;
            }
            if (in->len != want) {
                size_t got = in->len;
                in_free(in);
                cadre__ucx_fail(w, "sent a message whose payload (%zu bytes) is not its header's "
                                   "(%zu bytes): corrupt stream", got, want);
                break;
            }
            if (pull && (in->len > UCX_MAX_PAYLOAD || cadre__ucx_pull_hold(w, in) != UCS_OK)) {
                in_free(in);
                cadre__ucx_fail(w, "no memory for a message from it, or a bad one");
                break;
            }
            if (h->type == CADRE_P2P_BYE)
                p->bye = 1;
            else if (h->type == CADRE_P2P_NACK && !h->rreq)
                cadre__ucx_pull_withdrawn(w, h->sreq);
            cadre__p2p_incoming_wire(w, h, in->rndv ? in->buf : in->data, &ucx_framing);
            in_free(in);
        }
        /* DATA further on: its receive is known (its CTS went out), so its
         * rendezvous may start before those ahead of it are done: up to
         * UCX_RNDV_AHEAD at once, so that the next one's handshake overlaps
         * the transfer before it instead of following it (a window of large
         * sends). Not more: UCX splits concurrent rendezvous into fragments
         * that share the link, so they would all end together, late, and
         * the ends of transfers are this peer's signs of life while its
         * heartbeats wait behind its data (rndv_cb). Delivery stays in
         * tseq order. */
        int running = 0;
        for (in = p->in; in; in = in->next)
            running += in->state == IN_RECV;
        for (in = p->in; in && running < UCX_RNDV_AHEAD && p->state != EP_FAILED &&
                         p->state != EP_GOING;
             in = in->next)
            if (in->rndv && in->state == IN_WAIT && in->w.h.type == CADRE_P2P_DATA) {
                rndv_start(w, in);
                running += in->state == IN_RECV;
                events++;
            }
    }
    return events;
}

/* A rendezvous of `in` (started, not delivered) lands in [buf, buf+len)
 * of a receive that is done or given up. */
static void release_one(int peer, struct ucx_in *in)
{
    /* A rendezvous writes into that buffer: UCX cannot be stopped, so let
     * it finish (or the peer fail: liveness bounds the wait). */
    double until = cadre__ucx_now() + st->peer_timeout;
    while (in->state == IN_RECV && cadre__ucx_now() < until)
        U.ucp_worker_progress(st->worker);
    if (in->state == IN_RECV) {
        cadre__ucx_fail(peer, "unreachable: a transfer to this rank made no progress for %g s",
                        st->peer_timeout);
        return;
    }
    if (in->w.h.type == CADRE_P2P_EAGER) {
        /* Its receive is gone, not the message: a copy of ours is matched
         * again when its turn comes. */
        char *copy = malloc(in->len ? in->len : 1);
        if (copy) {
            memcpy(copy, in->buf, in->len);
            in->buf = copy;
            in->own = 1;
            return;
        }
        in->status = UCS_ERR_NO_MEMORY; /* fails the peer at delivery */
    }
    in->buf = NULL; /* DATA delivered with no payload: its receive is gone */
    in->len = 0;
    in->w.h.len = 0;
}

void cadre__ucx_release_dest(int peer, const char *buf, size_t len)
{
    if (!st->on || peer < 0 || peer >= st->size)
        return;
    cadre__ucx_pull_release(peer, buf, len);
    if (st->peers[peer].state == EP_FAILED || st->peers[peer].state == EP_GOING)
        return;
    /* Any of the peer's messages may be started (DATA runs ahead of the
     * stream, cadre__ucx_deliver), running or done and waiting its turn. */
    for (struct ucx_in *in = st->peers[peer].in; in; in = in->next)
        if (in->rndv && in->state != IN_WAIT && in->buf && !in->own && in->buf >= buf &&
            in->buf < buf + len) {
            release_one(peer, in);
            if (st->peers[peer].state == EP_FAILED || st->peers[peer].state == EP_GOING)
                return;
        }
}

void cadre__ucx_in_settle(int peer)
{
    struct ucx_peer *p = &st->peers[peer];
    double until = cadre__ucx_now() + UCX_CLOSE_WAIT;
    for (;;) {
        int busy = 0;
        for (struct ucx_in *in = p->in; in; in = in->next)
            busy |= in->state == IN_RECV;
        if (!busy)
            return;
        if (cadre__ucx_now() > until) {
            CADRE_INFO(P2P, "ucx: a transfer from rank %d did not end; its buffer is left to UCX",
                       peer);
            return;
        }
        U.ucp_worker_progress(st->worker);
    }
}

void cadre__ucx_in_drop(int peer)
{
    struct ucx_peer *p = &st->peers[peer];
    while (p->in) {
        struct ucx_in *in = p->in;
        p->in = in->next;
        if (in->state == IN_RECV)
            continue; /* UCX still holds it (in_settle gave up): leaked */
        in_free(in);
    }
    p->in_tail = NULL;
}

#endif /* HAVE_UCX */
