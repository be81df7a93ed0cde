/* The UCX transport's large messages (p2p_ucx.c has the design): the data
 * comes with the RTS, as UCX's rendezvous (one active message whose header
 * is cadre's), and is held here as UCX's descriptor, not read, until a
 * receive takes the message: its CTS, which the engine posts to the sender,
 * starts the pull (ucp_am_recv_data_nbx) straight into the receive's buffer
 * (cadre__p2p_data_dest), and the CTS goes on flagged CADRE_P2P_PULL (the
 * sender sends no DATA). When the pull is done the engine gets the DATA.
 * A device receive (where UCX takes CUDA memory, st->direct) names its
 * device buffer instead, gated: the pull waits, wanted (PL_WANT), until the
 * receive's stream has reached the call (cadre__p2p_pull_dest, p2p_pull.c),
 * then lands there with UCX's memory type CUDA; the sender's send waits
 * as long (a rendezvous, as over CUDA IPC).
 * UCX completes the sender's send when the data is taken, or dropped
 * (ucp_am_data_release: the sender withdrew it, the peer failed, finalize).
 * May call: this folder, runtime/. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "p2p/p2p_ucx.h"

#if HAVE_UCX

#define st (&cadre__ucx_st)
#define U cadre__ucx

static void pull_unlink(struct ucx_peer *p, struct ucx_pull *pl)
{
    struct ucx_pull **pp = &p->pulls, *prev = NULL;
    while (*pp && *pp != pl) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (!*pp)
        return;
    *pp = pl->next;
    if (p->pulls_tail == pl)
        p->pulls_tail = prev;
}

/* Frees pl, unlinked: its data released to UCX unless a pull took it (UCX
 * then tells the sender that it is done with its buffer). */
static void pull_free(struct ucx_pull *pl)
{
    if (pl->data && (pl->rndv || pl->held))
        U.ucp_am_data_release(st->worker, pl->data);
    else
        free(pl->data);
    if (pl->own)
        free(pl->buf);
    free(pl);
}

int cadre__ucx_pull_hold(int peer, struct ucx_in *in)
{
    struct ucx_peer *p = &st->peers[peer];
    struct ucx_pull *pl = calloc(1, sizeof *pl);
    if (!pl)
        return UCS_ERR_NO_MEMORY;
    pl->sreq = in->w.h.sreq;
    pl->len = in->len;
    pl->rndv = in->rndv;
    pl->held = in->held;
    pl->state = PL_HELD;
    if (in->rndv || in->held) {
        pl->data = in->data;
    } else {
        /* UCX sent it eagerly after all, into in's own copy. */
        pl->data = malloc(in->len ? in->len : 1);
        if (!pl->data) {
            free(pl);
            return UCS_ERR_NO_MEMORY;
        }
        memcpy(pl->data, in->data, in->len);
    }
    in->rndv = in->held = 0; /* the data is pl's now */
    pl->next = NULL;
    if (p->pulls_tail)
        p->pulls_tail->next = pl;
    else
        p->pulls = pl;
    p->pulls_tail = pl;
    return UCS_OK;
}

static void pull_cb(void *request, ucs_status_t status, size_t length, void *user_data)
{
    (void)length;
    struct ucx_pull *pl = user_data;
    pl->status = status;
    pl->state = PL_DONE;
    U.ucp_request_free(request);
    st->events++;
}

/* Starts the pull of pl (PL_WANT) where its receive says
 * (cadre__p2p_pull_dest): its buffer, or the device buffer it named
 * instead, which waits until the receive's stream has reached the call:
 * pl stays PL_WANT, asked again at each pass (cadre__ucx_pulls). */
static void pull_start(int peer, struct ucx_pull *pl)
{
    struct cadre_p2p_hdr d = {.type = CADRE_P2P_DATA, .sreq = pl->sreq, .rreq = pl->rreq,
                              .len = pl->xfer};
    struct cadre_p2p_pull_to to = {.buf = NULL, .mem = CADRE_P2P_MEM_HOST};
    /* Device memory by UCX's rendezvous only, where UCX takes it. */
    unsigned mems = 1u << CADRE_P2P_MEM_HOST;
    if (st->direct && pl->rndv)
        mems |= 1u << CADRE_P2P_MEM_CUDA;
    int where = cadre__p2p_pull_dest(peer, &d, pl->len, mems, &to);
    if (where == CADRE_P2P_PULL_WAIT)
        return;
    pl->dest = where == CADRE_P2P_PULL_NOW ? cadre__p2p_data_dest(peer, &d) : NULL;
    pl->buf = to.buf;
    if (pl->dest && pl->xfer < pl->len) {
        /* Truncated: UCX takes the whole message or nothing; the receive
         * gets its part, and its error (cadre__p2p_complete_recv). */
        pl->buf = malloc(pl->len);
        pl->own = 1;
        if (!pl->buf) {
            pl->state = PL_DONE;
            pl->status = UCS_ERR_NO_MEMORY;
            return;
        }
    }
    if (!pl->dest) {
        /* Its receive is gone: the data is not wanted. */
        pl->state = PL_DONE;
        return;
    }
    int cuda = !pl->own && to.mem == CADRE_P2P_MEM_CUDA;
    if (!pl->rndv) {
        memcpy(pl->buf, pl->data, pl->len);
        if (pl->held)
            U.ucp_am_data_release(st->worker, pl->data);
        else
            free(pl->data);
        pl->data = NULL;
        pl->held = 0;
        pl->state = PL_DONE;
        return;
    }
    ucp_request_param_t prm = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                                               UCP_OP_ATTR_FIELD_USER_DATA,
                               .cb = {.recv_am = pull_cb},
                               .user_data = pl};
    if (cuda) {
        /* GPUDirect RDMA, or UCX's own staging: UCX's choice. */
        prm.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMORY_TYPE;
        prm.memory_type = UCS_MEMORY_TYPE_CUDA;
    }
    pl->state = PL_RECV;
    void *desc = pl->data;
    pl->data = NULL; /* UCX's from here on, released or not */
    ucs_status_ptr_t sp = U.ucp_am_recv_data_nbx(st->worker, desc, pl->buf, pl->len, &prm);
    if (!UCS_PTR_IS_PTR(sp)) {
        pl->state = PL_DONE;
        pl->status = UCS_PTR_STATUS(sp);
    }
}

static int running(const struct ucx_peer *p)
{
    int n = 0;
    for (const struct ucx_pull *pl = p->pulls; pl; pl = pl->next)
        n += pl->state == PL_RECV;
    return n;
}

int cadre__ucx_pull_cts(int peer, const struct cadre_p2p_hdr *cts)
{
    struct ucx_peer *p = &st->peers[peer];
    struct ucx_pull *pl = p->pulls;
    while (pl && !(pl->sreq == cts->sreq && pl->state == PL_HELD))
        pl = pl->next;
    if (!pl || cts->len > pl->len)
        return 0;
    if (!cts->len) {
        /* It takes nothing (no room, another call's signature): the engine
         * completes the receive; the data is dropped. */
        pull_unlink(p, pl);
        pull_free(pl);
        return 1;
    }
    pl->rreq = cts->rreq;
    pl->xfer = cts->len;
    pl->state = PL_WANT;
    /* At once where few run: its round trip overlaps those in flight. Not
     * more than UCX_RNDV_AHEAD (p2p_ucx_recv.c says why); the others in
     * order as those end (cadre__ucx_pulls). */
    if (running(p) < UCX_RNDV_AHEAD)
        pull_start(peer, pl);
    return 1;
}

void cadre__ucx_pull_withdrawn(int peer, uint64_t sreq)
{
    struct ucx_peer *p = &st->peers[peer];
    for (struct ucx_pull *pl = p->pulls; pl; pl = pl->next)
        if (pl->sreq == sreq && pl->state == PL_HELD) {
            pull_unlink(p, pl);
            pull_free(pl);
            return;
        }
}

int cadre__ucx_pulls(void)
{
    int events = 0;
    for (int w = 0; w < st->size; w++) {
        struct ucx_peer *p = &st->peers[w];
        struct ucx_pull *pl, *next;
        for (pl = p->pulls; pl && p->state != EP_FAILED && p->state != EP_GOING; pl = next) {
            next = pl->next;
            if (pl->state != PL_DONE)
                continue;
            events++;
            pull_unlink(p, pl);
            if (pl->status != UCS_OK) {
                char why[160];
                snprintf(why, sizeof why, "lost while sending %zu bytes to rank %d (UCX: %s)",
                         pl->len, st->rank, U.ucs_status_string((ucs_status_t)pl->status));
                pull_free(pl);
                cadre__ucx_fail(w, "%s", why);
                break;
            }
            /* Its data came: the sender is alive, though its heartbeats may
             * wait behind that data. */
            p->last_heard = cadre__ucx_now();
            if (pl->dest) {
                struct cadre_p2p_hdr d = {.type = CADRE_P2P_DATA, .sreq = pl->sreq,
                                          .rreq = pl->rreq, .len = pl->xfer};
                cadre__p2p_incoming(w, &d, pl->buf);
                /* What the engine did then (a CTS of no room, a peer
                 * failed) may have freed any other pull: from the top. */
                next = p->pulls;
            }
            pull_free(pl);
        }
        int n = p->state == EP_UP ? running(p) : UCX_RNDV_AHEAD;
        for (pl = p->pulls; pl && n < UCX_RNDV_AHEAD; pl = pl->next)
            if (pl->state == PL_WANT) {
                pull_start(w, pl);
                n += pl->state == PL_RECV;
                events += pl->state != PL_WANT; /* else its gate is still closed */
            }
    }
    return events;
}

void cadre__ucx_pull_release(int peer, const char *buf, size_t len)
{
    struct ucx_peer *p = &st->peers[peer];
    for (struct ucx_pull *pl = p->pulls; pl; pl = pl->next) {
        if (!pl->dest || pl->dest < buf || pl->dest >= buf + len)
            continue;
        /* UCX cannot be stopped: let it finish (or the peer fail:
         * liveness bounds the wait). */
        double until = cadre__ucx_now() + st->peer_timeout;
        while (pl->state == PL_RECV && cadre__ucx_now() < until)
            U.ucp_worker_progress(st->worker);
        if (pl->state == PL_RECV) {
            cadre__ucx_fail(peer, "unreachable: a transfer to this rank made no progress for "
                                  "%g s", st->peer_timeout);
            return;
        }
        pl->dest = NULL; /* done: no DATA for a receive that is gone */
    }
}

void cadre__ucx_device_choice(int want_direct)
{
    st->direct = st->cuda && HAVE_CUDA && want_direct;
    if (st->direct)
        CADRE_INFO(P2P, "ucx: device buffers go to UCX directly (UCX here takes CUDA memory): "
                        "messages above the eager limit; smaller ones staged through host "
                        "memory (CADRE_UCX_DEVICE=staged stages all)");
    else
        CADRE_INFO(P2P, "ucx: device buffers staged through host memory (%s)",
                   !st->cuda      ? "UCX here takes no CUDA memory"
                   : !want_direct ? "CADRE_UCX_DEVICE=staged"
                                  : "UCX here takes CUDA memory, but this build has no CUDA");
}

void cadre__ucx_pull_drop(int peer)
{
    struct ucx_peer *p = &st->peers[peer];
    double until = cadre__ucx_now() + UCX_CLOSE_WAIT;
    while (running(p) && cadre__ucx_now() < until)
        U.ucp_worker_progress(st->worker);
    while (p->pulls) {
        struct ucx_pull *pl = p->pulls;
        p->pulls = pl->next;
        if (pl->state == PL_RECV) {
            CADRE_INFO(P2P, "ucx: a transfer from rank %d did not end; its buffer is left to "
                            "UCX", peer);
            continue; /* UCX still holds it: leaked */
        }
        pull_free(pl);
    }
    p->pulls_tail = NULL;
}

#endif /* HAVE_UCX */
