/* cadre_probe and cadre_iprobe: the status of the message that a receive
 * with the same source, tag and communicator would take next, left where it
 * is. A receive takes the first message of its context's unmatched queue
 * that it matches (cadre__p2p_start_recv), before anything still in a
 * transport (the direct path of cadre__p2p_recv_direct steps aside while a
 * queued message matches), so the probe reports that message: the next
 * matching receive of this thread gets exactly it. The sender's datatype
 * comes in the wire header (hdr.dt), so the count is in its elements.
 * May call: this folder's engine, matching table and requests, runtime/. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "p2p_engine.h"
#include "p2p_match.h"
#include "runtime/runtime_device.h"

struct probe {
    const char *fn;
    struct cadre_comm *comm;
    uint32_t ctx;
    int src, tag;
    int world; /* src's world rank; -1 for CADRE_ANY_SOURCE */
    /* the blocking probe: what its last look saw, and its outcome */
    uint32_t gen;
    int ndead, rc;
    double since;
    cadre_status_t st;
};

static int check_args(const char *fn, int src, int tag, cadre_comm_t comm, struct probe *p)
{
    CADRE_CHECK(cadre__check_initialized(fn));
    cadre__app_active();
    int st;
    struct cadre_comm *c = cadre__comm_get(comm, fn, &st);
    if (!c)
        return st;
    if (src != CADRE_ANY_SOURCE && (src < 0 || src >= c->size))
        return cadre__error(CADRE_ERR_ARG, "%s: src %d out of range [0,%d)", fn, src, c->size);
    if (tag < 0 && tag != CADRE_ANY_TAG)
        return cadre__error(CADRE_ERR_ARG, "%s: tag %d is negative", fn, tag);
    *p = (struct probe){.fn = fn, .comm = c, .ctx = c->context_id, .src = src, .tag = tag,
                        .world = src == CADRE_ANY_SOURCE ? -1 : cadre__world_rank(c, src)};
    return CADRE_SUCCESS;
}

/* The status of queued message u, counted in the sender's elements. */
static int status_of(const struct probe *p, const struct unexp *u, cadre_status_t *st)
{
    uint64_t bytes = u->h.len; /* EAGER: the payload; RTS: the whole message */
    if (u->h.type == CADRE_P2P_EAGER && (u->h.flags & CADRE_P2P_DEVICE)) {
#if HAVE_CUDA
        /* A CUDA IPC descriptor: the message is where it points. */
        struct gpu_ipc_desc d;
        if (u->h.len != sizeof d || !u->data)
            return cadre__error(CADRE_ERR_INTERNAL,
                                "%s: rank %d sent a device-buffer descriptor of %llu bytes", p->fn,
                                u->peer, (unsigned long long)u->h.len);
        memcpy(&d, u->data, sizeof d);
        bytes = d.bytes;
#else
        return cadre__error(CADRE_ERR_UNSUPPORTED,
                            "%s: rank %d sent a device buffer by CUDA IPC to a process without "
                            "CUDA",
                            p->fn, u->peer);
#endif
    }
    size_t es = u->h.dt ? cadre_datatype_size((cadre_datatype_t)(u->h.dt - 1)) : 0;
    *st = (cadre_status_t){.source = (int)u->h.src,
                           .tag = (int)u->h.tag,
                           .count = (size_t)(es > 1 ? bytes / es : bytes),
                           .error = CADRE_SUCCESS};
    return CADRE_SUCCESS;
}

/* What one look found. */
enum { LOOK_NONE, LOOK_FOUND, LOOK_FAILED };

/* One look, lock held: FOUND with p->st filled when a message matches;
 * NONE when none does and a receive would wait; FAILED, with the status in
 * p->rc, when a receive would fail now (a dead or finalized source, a
 * failed member under ANY_SOURCE), with the message cadre__p2p_start_recv
 * gives. */
static int look(struct probe *p)
{
    struct match_ctx *m = ctx_find(p->ctx, 0);
    for (struct unexp *u = m ? m->unexp : NULL; u; u = u->next) {
        if (!takes(p->src, p->tag, &u->h))
            continue;
        p->rc = status_of(p, u, &p->st);
        return p->rc == CADRE_SUCCESS ? LOOK_FOUND : LOOK_FAILED;
    }
    struct cadre_engine *e = &cadre__eng;
    if (p->world >= 0 && p->world != cadre__proc.rank && e->peers[p->world].state != PEER_OK) {
        p->rc = cadre__error(CADRE_ERR_PEER, "%s: peer rank %d %s", p->fn, p->world,
                             e->peers[p->world].why);
        return LOOK_FAILED;
    }
    int q;
    if (p->src == CADRE_ANY_SOURCE && (q = cadre__p2p_comm_dead_member(p->comm)) >= 0) {
        struct cadre_request r = {.op = p->fn};
        char msg[512];
        cadre__p2p_any_source_text(&r, q, cadre__world_rank(p->comm, q), msg, sizeof msg);
        p->rc = cadre__error(CADRE_ERR_PEER, "%s", msg);
        return LOOK_FAILED;
    }
    return LOOK_NONE;
}

/* The blocking probe's condition (cadre__p2p_wait_until), lock not held:
 * looks again only when a message was queued or a peer's state moved. */
static int probe_ready(void *arg)
{
    struct probe *p = arg;
    struct cadre_engine *e = &cadre__eng;
    if (__atomic_load_n(&cadre__p2p_unexp_gen, __ATOMIC_ACQUIRE) == p->gen &&
        __atomic_load_n(&e->ndead, __ATOMIC_RELAXED) == p->ndead &&
        (p->world < 0 || p->world == cadre__proc.rank ||
         __atomic_load_n(&e->peers[p->world].state, __ATOMIC_RELAXED) == PEER_OK))
        return 0;
    eng_lock();
    p->gen = cadre__p2p_unexp_gen;
    p->ndead = e->ndead;
    int k = look(p);
    eng_unlock();
    return k != LOOK_NONE;
}

static double probe_activity(void *arg)
{
    return ((struct probe *)arg)->since;
}

/* The receive a probe stands for in its diagnoses. */
static struct cadre_request probe_as_recv(const struct probe *p)
{
    return (struct cadre_request){.kind = REQ_RECV, .state = RS_POSTED, .op = p->fn,
                                  .comm = p->comm, .ctx = p->ctx, .peer = p->src,
                                  .peer_world = p->world, .tag = p->tag};
}

/* A probe that waited CADRE_STUCK_WARN for nothing: the warning a receive
 * with these arguments gives; the probe waits on. */
static void probe_stuck(void *arg, double secs)
{
    struct probe *p = arg;
    struct cadre_request r = probe_as_recv(p);
    char what[200];
    cadre__p2p_req_what(&r, p->fn, CADRE_WHAT_COMM, what, sizeof what);
    cadre__p2p_diag_stuck(&r, p->fn, what, cadre__p2p_req_stage(&r), secs);
}

/* A probe that waited CADRE_TIMEOUT for nothing: the diagnosis a receive
 * with these arguments gets (p2p_api.c, cadre__p2p_timed_out). */
static int probe_timed_out(struct probe *p)
{
    struct cadre_request r = probe_as_recv(p);
    char what[200], sum[1024];
    cadre__p2p_req_what(&r, p->fn, CADRE_WHAT_COMM, what, sizeof what);
    int shown = cadre__p2p_diagnose(&r, p->fn, what, cadre__p2p_req_stage(&r), sum, sizeof sum);
    int rc = cadre__error(CADRE_ERR_TIMEOUT, "%s", sum);
    if (shown)
        cadre__error_shown();
    return rc;
}

int cadre_iprobe(int src, int tag, cadre_comm_t comm, int *flag, cadre_status_t *status)
{
    const char *fn = "cadre_iprobe";
    if (!flag)
        return cadre__error(CADRE_ERR_ARG, "%s: flag is NULL", fn);
    struct probe p;
    CADRE_CHECK(check_args(fn, src, tag, comm, &p));
    cadre__p2p_progress();
    eng_lock();
    int k = look(&p);
    eng_unlock();
    if (k == LOOK_FAILED)
        return p.rc;
    *flag = k == LOOK_FOUND;
    if (*flag && status)
        *status = p.st;
    return CADRE_SUCCESS;
}

int cadre_probe(int src, int tag, cadre_comm_t comm, cadre_status_t *status)
{
    const char *fn = "cadre_probe";
    struct probe p;
    CADRE_CHECK(check_args(fn, src, tag, comm, &p));
    cadre__p2p_progress();
    eng_lock();
    p.gen = cadre__p2p_unexp_gen;
    p.ndead = cadre__eng.ndead;
    int k = look(&p);
    eng_unlock();
    if (k == LOOK_FAILED)
        return p.rc;
    if (k == LOOK_NONE) {
        p.since = cadre__now();
        cadre__state_enter(fn, NULL, p.ctx, 0, src, tag);
        struct cadre_p2p_wait w = {.ready = probe_ready, .activity = probe_activity, .arg = &p,
                                   .peer_world = p.world, .stuck = probe_stuck};
        int rc = cadre__p2p_wait_until(&w, 0, 1);
        rc = rc != CADRE_SUCCESS ? probe_timed_out(&p) : p.rc;
        cadre__state_leave();
        if (rc != CADRE_SUCCESS)
            return rc;
    }
    if (status)
        *status = p.st;
    return CADRE_SUCCESS;
}
