/*
 * p2p_ucx.c - the UCX transport: off-host peers over UCP active messages,
 * so that InfiniBand and RoCE (UCX's rc, dc, ud over verbs or mlx5) carry
 * cadre's messages; tested over UCX's tcp.
 *
 * Choice (ucx_init): where CADRE_TRANSPORT names ucx it must start, and
 * cadre_init fails naming why when it cannot (a forced transport is not
 * replaced); by default it starts only where this node has an RDMA device
 * and UCX offers an RDMA transport on it, else off-host peers take cadre's
 * tcp and libucp is never loaded (p2p_ucx_load.c dlopens it); where the
 * default chose ucx and it cannot start (libucp missing, ucp_init or the
 * worker failing), the engine warns once and the rank goes on with tcp.
 * A pair uses ucx when both ranks published a worker address (bootstrap
 * key "ucx": a rank whose ucx did not start published none) and a positive
 * verdict after wireup ("ucx.ok", read by cadre__p2p_ucx_agree after the
 * engine's agreement fence), and are on different hosts: both sides of a
 * pair see the same, or one would send over ucx to a rank listening on tcp
 * only. Same-host pairs stay on shm. Each rank makes its endpoint to
 * every such peer at wireup, while every host is up (UCX's connect()
 * toward a cut link blocks for tens of seconds: none is made later, toward
 * a host found lost), and lists in its verdict the peers whose endpoint
 * UCX could not make (ucp_ep_create failing: no common transport): both
 * ranks of such a pair read it after the fence and, before any message
 * went over ucx, take tcp, warning (by default), or fail cadre_init naming
 * the pair, its hosts and UCX's reason (forced).
 *
 * Messages: one active message each, cadre's header inside ours (struct
 * ucx_wire) with the pair's sequence number tseq: UCX may hand active
 * messages over out of order, so the receiver delivers in tseq order
 * (p2p_ucx_recv.c). EAGER payloads (up to UCX_EAGER) go from the caller's
 * buffer when UCX completes the send at once (up to UCX_EAGER_IMM), else
 * from a copy, by UCX's eager protocol or, above its rendezvous threshold,
 * its rendezvous into the matching posted receive's buffer
 * (cadre__p2p_eager_dest; a copy of ours when none is posted). Larger
 * messages (up to UCX_MAX_PAYLOAD) take one handshake, UCX's, as Open
 * MPI's pml/ucx does: cadre's RTS is the header of one active message sent
 * with UCX's rendezvous from the sender's buffer (CADRE_P2P_LATER on the
 * RTS, p2p.h). The receiver delivers the RTS in its turn (tseq) and holds
 * UCX's descriptor, not the data (p2p_ucx_pull.c): probe sees the message,
 * the sender's send waits. The CTS the engine posts when a receive takes it
 * starts the pull (ucp_am_recv_data_nbx, zero copy; RDMA reads on
 * InfiniBand) into the receive's buffer (cadre__p2p_data_dest), and goes
 * to the sender flagged CADRE_P2P_PULL (no DATA follows); the engine gets
 * the DATA when the pull is done, and the sender's send completes when UCX
 * has answered it (cadre__p2p_sent). A send given up before any receive
 * took it (CADRE_TIMEOUT) is withdrawn by the engine's NACK with rreq 0,
 * on which the receiver releases the descriptor (ucp_am_data_release: UCX
 * then ends the sender's send). Held descriptors are released as well
 * when the peer fails and at finalize, before the endpoints close (UCX
 * destroys no endpoint that a rendezvous send waits on). Larger than
 * UCX_MAX_PAYLOAD: cadre's RTS and CTS, then DATA by UCX's rendezvous
 * (CADRE_P2P_LATER), at most UCX_RNDV_AHEAD pulls or DATA receives at
 * once per peer.
 *
 * Threads: the engine calls every transport function under its lock, from
 * the application's threads and the progress thread, one at a time: UCX's
 * UCS_THREAD_MODE_SERIALIZED, which is what that is (SINGLE would tie the
 * worker to one thread; MULTI would add UCX's own lock to every call for
 * nothing). UCX's callbacks (arrivals, completions, endpoint errors) run
 * inside ucp_worker_progress and only record; the engine is entered after.
 *
 * Sleeping: the worker's event fd, armed by pollfds (a busy worker gives
 * an fd that is always ready instead). Failure: endpoints with
 * UCP_ERR_HANDLING_MODE_PEER; an endpoint's error fails the peer after
 * UCX_BYE_WAIT, unless its BYE came (it finalized). UCX over tcp reports a
 * cut link only after minutes, so each side also sends a heartbeat every
 * quarter of CADRE_UCX_PEER_TIMEOUT to every peer it has an endpoint to,
 * and fails a peer it has heard nothing from for that long (the progress
 * thread sends them while the application computes).
 *
 * Finalize: the engine's BYE has gone out; endpoints are closed with a
 * flush (at most UCX_CLOSE_WAIT), so the BYE arrives before the worker goes.
 *
 * Device buffers (decided in ucx_init, logged): staged by the device path
 * through pinned host memory, unless UCX takes CUDA memory here, the build
 * has CUDA and CADRE_UCX_DEVICE is not "staged" (st->direct). Then a large
 * device send's RTS comes flagged CADRE_P2P_DEVMEM with the device pointer
 * (sent with UCX's memory type CUDA), and a device receive names its device
 * buffer for the pull of a held message, gated until its stream reaches
 * the call (p2p_ucx_pull.c, p2p/p2p_pull.c, device/device_p2p.c).
 */
#include "config.h"

#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "p2p/p2p_ucx.h"

#if HAVE_UCX

struct ucx_state cadre__ucx_st = {.efd = -1};
#define st (&cadre__ucx_st)
#define U cadre__ucx

static int ready_fd = -1; /* an eventfd kept readable: poll returns at once */

/* Whether this node has an RDMA device (InfiniBand, RoCE, iWARP): without
 * one UCX offers no RDMA transport, and the default need not load it. */
static int rdma_devices(void)
{
    DIR *d = opendir("/sys/class/infiniband");
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void ucx_finalize(void);

/* A failure of init: CADRE_ERR_UNSUPPORTED and why; the engine fails
 * cadre_init when ucx was forced, else warns and goes on with tcp. */
static int init_failed(const char *fmt, const char *what)
{
    ucx_finalize();
    return cadre__error(CADRE_ERR_UNSUPPORTED, fmt, what);
}

/* UCX's own timers must not fail a live peer that cadre's heartbeats
 * (CADRE_UCX_PEER_TIMEOUT, pt) would keep: over UD, UCX acknowledges in
 * software, so a peer process that is stopped or descheduled for
 * UCX_UD_TIMEOUT (30 s) is failed by UCX; where pt is longer and the user
 * did not set it, UCX_UD_TIMEOUT becomes 2 pt (read by ucp_init, like every
 * UCX variable). The others need nothing: RC and DC are acknowledged by
 * the adapter (RNR retries infinite), and UCX's tcp relies on the kernel's
 * keepalive, which the peer's kernel answers; UCX reports every tcp
 * connection that ends (a peer that closed it, or died) as "Endpoint
 * timeout". */
static void ucx_timeouts(double pt)
{
    if (2 * pt > 30 && !getenv("UCX_UD_TIMEOUT") && !getenv("UCX_UD_VERBS_TIMEOUT") &&
        !getenv("UCX_UD_MLX5_TIMEOUT")) {
        char v[32];
        snprintf(v, sizeof v, "%.0fs", 2 * pt);
        setenv("UCX_UD_TIMEOUT", v, 0);
        CADRE_INFO(P2P, "ucx: UCX_UD_TIMEOUT=%s (2 x CADRE_UCX_PEER_TIMEOUT)", v);
    }
}

/* A process that runs LeakSanitizer (cadre or the application built with
 * -fsanitize=address or leak): UCX's memory hooks off, unless the user set
 * UCX_MEM_EVENTS. Where they ran (UCX's mmap hooks, entered on every
 * thread's allocations), LeakSanitizer's check at exit crashed whenever
 * UCX's async thread was still alive (a rank that exits without
 * cadre_finalize): "Tracer caught signal 11" reading a dynamic-TLS range
 * of that thread that is not memory (0x20000067d-0x260000177f, gcc 12's
 * libasan), and no leak was reported at all. UCX turns the hooks off in
 * its own ASan builds; they keep its registration cache of RDMA memory
 * current, which a sanitizer run does without. Read when libucs loads:
 * set before the dlopen. */
static void ucx_sanitizer_env(void)
{
    if (getenv("UCX_MEM_EVENTS") || !dlsym(RTLD_DEFAULT, "__lsan_do_leak_check"))
        return;
    setenv("UCX_MEM_EVENTS", "no", 0);
    CADRE_INFO(P2P, "ucx: UCX_MEM_EVENTS=no (LeakSanitizer runs in this process)");
}

static int ucx_init(void)
{
    ucx_finalize();
    cadre__ucx_own_why[0] = '\0';
    int forced = cadre__p2p_info.ucx_forced;
    double pt = cadre__config_dbl(CADRE_CFG_UCX_PEER_TIMEOUT);
    if (!(pt >= 1 && pt <= 3600))
        return cadre__error(CADRE_ERR_ARG,
                            "cadre_init: CADRE_UCX_PEER_TIMEOUT=%g out of range (1..3600 s)", pt);
    const char *dev = cadre__config_str(CADRE_CFG_UCX_DEVICE);
    if (strcmp(dev, "auto") && strcmp(dev, "staged"))
        return cadre__error(CADRE_ERR_ARG, "cadre_init: CADRE_UCX_DEVICE=\"%s\" is neither auto "
                            "nor staged", dev);
    /* A job on one node needs no network transport. */
    if (!forced && (cadre__proc.local_size == cadre__proc.size &&
                    !cadre__config_str(CADRE_CFG_HOSTID)[0]))
        return CADRE_SUCCESS;
    if (!forced && !rdma_devices()) {
        CADRE_INFO(P2P, "ucx: not used: no RDMA device here (/sys/class/infiniband); off-host "
                        "peers over tcp (CADRE_TRANSPORT=shm,ucx forces ucx)");
        return CADRE_SUCCESS;
    }
    char why[512];
    ucx_sanitizer_env();
    if (cadre__ucx_load(cadre__config_str(CADRE_CFG_UCX_LIB), why, sizeof why))
        return init_failed("ucx: cannot load libucp: %s", why);
    ucx_timeouts(pt);
    ucp_config_t *cfg;
    ucs_status_t s = U.ucp_config_read(NULL, NULL, &cfg);
    if (s != UCS_OK)
        return init_failed("ucx: ucp_config_read: %s", U.ucs_status_string(s));
    ucp_params_t prm = {.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED,
                        .features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP,
                        .mt_workers_shared = 0};
    s = U.ucp_init_version(UCP_API_MAJOR, UCP_API_MINOR, &prm, cfg, &st->ctx);
    U.ucp_config_release(cfg);
    if (s != UCS_OK) {
        st->ctx = NULL;
        return init_failed("ucx: ucp_init: %s (UCX_TLS, UCX_NET_DEVICES?)",
                           U.ucs_status_string(s));
    }
    struct cadre_ucx_info info;
    cadre__ucx_context_info(st->ctx, &info);
    if (!forced && !info.rdma) {
        CADRE_INFO(P2P, "ucx: not used: UCX %s offers no RDMA transport here (%s); off-host "
                        "peers over tcp", info.version, info.resources);
        ucx_finalize();
        return CADRE_SUCCESS;
    }
    st->cuda = info.cuda;
    /* Over UCX's tcp, EAGER messages by UCX's eager protocol, unless the
     * user chose a rendezvous threshold (p2p_ucx.h, UCX_EAGER). */
    st->eager_proto = !info.rdma && !getenv("UCX_RNDV_THRESH");
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SERIALIZED};
    s = U.ucp_worker_create(st->ctx, &wp, &st->worker);
    if (s != UCS_OK) {
        st->worker = NULL;
        return init_failed("ucx: ucp_worker_create: %s", U.ucs_status_string(s));
    }
    ucp_am_handler_param_t ah = {
        .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                      UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG,
        .id = UCX_AM_ID,
        .flags = UCP_AM_FLAG_WHOLE_MSG | UCP_AM_FLAG_PERSISTENT_DATA,
        .cb = cadre__ucx_am_cb,
        .arg = NULL};
    if ((s = U.ucp_worker_set_am_recv_handler(st->worker, &ah)) != UCS_OK)
        return init_failed("ucx: ucp_worker_set_am_recv_handler: %s", U.ucs_status_string(s));
    if ((s = U.ucp_worker_get_efd(st->worker, &st->efd)) != UCS_OK) {
        st->efd = -1;
        return init_failed("ucx: ucp_worker_get_efd: %s", U.ucs_status_string(s));
    }
    ready_fd = eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK);
    st->rank = cadre__proc.rank;
    st->size = cadre__proc.size;
    st->peer_timeout = pt;
    st->hb_every = pt / 4;
    st->peers = calloc((size_t)st->size, sizeof *st->peers);
    if (!st->peers || ready_fd < 0)
        return init_failed("ucx: %s", "out of memory or file descriptors");
    if (gethostname(st->host, sizeof st->host - 1))
        snprintf(st->host, sizeof st->host, "?");
    ucp_address_t *addr;
    size_t alen;
    if ((s = U.ucp_worker_get_address(st->worker, &addr, &alen)) != UCS_OK)
        return init_failed("ucx: ucp_worker_get_address: %s", U.ucs_status_string(s));
    struct ucx_blob *b = calloc(1, sizeof *b + alen);
    if (!b) {
        U.ucp_worker_release_address(st->worker, addr);
        return init_failed("ucx: %s", "out of memory");
    }
    b->magic = UCX_MAGIC;
    b->version = UCX_BLOB_VERSION;
    b->addrlen = (uint32_t)alen;
    memcpy(b->host, st->host, sizeof b->host);
    memcpy(b->addr, addr, alen);
    U.ucp_worker_release_address(st->worker, addr);
    int rc = cadre__bootstrap_put("ucx", b, sizeof *b + alen);
    free(b);
    if (rc != CADRE_SUCCESS) {
        ucx_finalize();
        return rc;
    }
    st->on = 1;
    CADRE_INFO(P2P, "ucx: UCX %s, %s; transports: %s", info.version,
               forced ? "forced (CADRE_TRANSPORT)" : "RDMA offered", info.resources);
    cadre__ucx_device_choice(!strcmp(dev, "auto"));
    return CADRE_SUCCESS;
}

static int ucx_reachable(int w)
{
    return st->on && w >= 0 && w < st->size && st->peers[w].reachable;
}

static size_t ucx_max_payload(int w)
{
    (void)w;
    return UCX_MAX_PAYLOAD;
}

static size_t ucx_eager_limit(int w)
{
    (void)w;
    /* Over UCX's tcp, larger messages take RTS/CTS and DATA, whose
     * rendezvous receives overlap (UCX_RNDV_AHEAD): an EAGER one through
     * UCX's rendezvous runs one at a time per peer (p2p_ucx.h). */
    return st->eager_proto ? UCX_TCP_EAGER : UCX_EAGER;
}

/* Heartbeats, silence, endpoints failed: at most every 0.1 s. */
static void check_peers(double now)
{
    for (int w = 0; w < st->size; w++) {
        struct ucx_peer *p = &st->peers[w];
        if (p->state != EP_UP)
            continue;
        if (p->err_at && now - p->err_at > UCX_BYE_WAIT)
            cadre__ucx_fail(w, "%s", p->err);
        else if (p->bye || p->err_at)
            continue;
        else if (now - p->last_heard > st->peer_timeout)
            cadre__ucx_fail(w, "unreachable: nothing heard from it for %.1f s "
                               "(CADRE_UCX_PEER_TIMEOUT=%g)", now - p->last_heard,
                            st->peer_timeout);
        else if (now - p->last_sent >= st->hb_every)
            cadre__ucx_heartbeat(w);
    }
}

static int ucx_progress(void)
{
    st->events = 0;
    ucx_progress_worker();
    int events = st->events;
    if (st->ops)
        events += cadre__ucx_reap();
    events += cadre__ucx_deliver();
    events += cadre__ucx_pulls();
    double now = cadre__ucx_now();
    if (now >= st->next_check) {
        st->next_check = now + 0.1;
        check_peers(now);
    }
    return events;
}

static int ucx_pollfds(struct pollfd *fds, int max)
{
    if (!st->on || max < 1)
        return 0;
    int ready = 0;
    for (int w = 0; w < st->size && !ready; w++) {
        const struct ucx_peer *p = &st->peers[w];
        ready = p->in && p->in->w.tseq == p->recv_tseq + 1 && p->in->state != IN_RECV;
        for (const struct ucx_pull *pl = p->pulls; pl && !ready; pl = pl->next)
            ready = pl->state == PL_DONE;
    }
    /* Armed: the fd wakes us for anything that comes; BUSY: something
     * came already, look again at once. */
    if (!ready && U.ucp_worker_arm(st->worker) == UCS_OK)
        fds[0] = (struct pollfd){st->efd, POLLIN, 0};
    else
        fds[0] = (struct pollfd){ready_fd, POLLIN, 0};
    return 1;
}

/* Whether a send to peer w (-1: any) by UCX's rendezvous is in flight. */
static int rndv_in_flight(int w)
{
    for (const struct ucx_op *op = st->ops; op; op = op->next)
        if (op->req && op->later && (w < 0 || op->peer == w))
            return 1;
    return 0;
}

static void ucx_finalize(void)
{
    if (st->worker && st->peers) {
        /* Data held for receives never posted is released (UCX ends its
         * senders' sends), and ours, held by peers that do the same, end
         * too (at most UCX_CLOSE_WAIT): UCX destroys no endpoint that a
         * rendezvous send still waits on. */
        for (int w = 0; w < st->size; w++)
            cadre__ucx_pull_drop(w);
        double until = cadre__ucx_now() + UCX_CLOSE_WAIT;
        while (rndv_in_flight(-1) && cadre__ucx_now() < until) {
            ucx_progress_worker();
            cadre__ucx_reap();
        }
        /* Flush and close every endpoint: what is queued (the BYE) goes;
         * where a rendezvous send still waits on the peer, forced (UCX
         * cancels it). */
        void *reqs[256];
        int nreq = 0;
        for (int w = 0; w < st->size; w++) {
            struct ucx_peer *p = &st->peers[w];
            if (!p->ep)
                continue;
            ucp_request_param_t prm = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                       .flags = p->state == EP_UP && !p->err_at &&
                                                        !rndv_in_flight(w)
                                                    ? 0
                                                    : UCP_EP_CLOSE_FLAG_FORCE};
            ucs_status_ptr_t sp = U.ucp_ep_close_nbx(p->ep, &prm);
            p->ep = NULL;
            if (UCS_PTR_IS_PTR(sp) && nreq < 256)
                reqs[nreq++] = sp;
        }
        until = cadre__ucx_now() + UCX_CLOSE_WAIT;
        for (int i = 0; i < nreq; i++) {
            while (U.ucp_request_check_status(reqs[i]) == UCS_INPROGRESS && cadre__ucx_now() < until)
                U.ucp_worker_progress(st->worker);
            U.ucp_request_free(reqs[i]);
        }
        ucx_progress_worker();
        cadre__ucx_reap();
        for (int w = 0; w < st->size; w++) {
            cadre__ucx_in_settle(w);
            cadre__ucx_in_drop(w);
            cadre__ucx_pull_drop(w);
        }
    }
    while (st->ops) { /* not answered by now: left to UCX, which the worker takes */
        struct ucx_op *op = st->ops;
        st->ops = op->next;
        free(op);
    }
    if (st->worker)
        U.ucp_worker_destroy(st->worker);
    if (st->ctx)
        U.ucp_cleanup(st->ctx);
    for (int w = 0; st->peers && w < st->size; w++)
        free(st->peers[w].addr);
    free(st->peers);
    if (ready_fd >= 0)
        close(ready_fd);
    ready_fd = -1;
    memset(st, 0, sizeof *st);
    st->efd = -1;
}

const char *cadre__p2p_ucx_host(int w)
{
    if (!st->on || w < 0 || w >= st->size)
        return NULL;
    return w == st->rank ? st->host : st->peers[w].host[0] ? st->peers[w].host : NULL;
}

int cadre__p2p_ucx_direct(void)
{
    return st->on && st->direct;
}

const struct cadre_p2p_transport cadre__p2p_ucx = {
    .name = "ucx",
    .init = ucx_init,
    .wireup = cadre__ucx_wireup,
    .reachable = ucx_reachable,
    .max_payload = ucx_max_payload,
    .eager_limit = ucx_eager_limit,
    .send = cadre__ucx_send,
    .progress = ucx_progress,
    .pollfds = ucx_pollfds,
    .release_dest = cadre__ucx_release_dest,
    .peer_gone = cadre__ucx_peer_gone,
    .finalize = ucx_finalize,
};

#else /* !HAVE_UCX: the transport is there, and says why it cannot start */

static int ucx_init(void)
{
    if (!cadre__p2p_info.ucx_forced)
        return CADRE_SUCCESS; /* the default: nothing to say */
    char why[256];
    cadre__ucx_load(NULL, why, sizeof why);
    return cadre__error(CADRE_ERR_UNSUPPORTED, "ucx: %s", why);
}

const char *cadre__p2p_ucx_host(int w)
{
    (void)w;
    return NULL;
}

int cadre__p2p_ucx_agree(const char *list)
{
    (void)list;
    return CADRE_SUCCESS;
}

int cadre__p2p_ucx_direct(void)
{
    return 0;
}

static int ucx_none(void)
{
    return CADRE_SUCCESS;
}

static int ucx_reachable(int w)
{
    (void)w;
    return 0;
}

static size_t ucx_max_payload(int w)
{
    (void)w;
    return 0;
}

static int ucx_send(int w, const struct cadre_p2p_hdr *h, const void *payload)
{
    (void)h;
    (void)payload;
    return cadre__error(CADRE_ERR_INTERNAL, "ucx: not built, send to rank %d", w);
}

static int ucx_progress(void)
{
    return 0;
}

static void ucx_finalize(void)
{
}

const struct cadre_p2p_transport cadre__p2p_ucx = {
    .name = "ucx",
    .init = ucx_init,
    .wireup = ucx_none,
    .reachable = ucx_reachable,
    .max_payload = ucx_max_payload,
    .send = ucx_send,
    .progress = ucx_progress,
    .finalize = ucx_finalize,
};
#endif
