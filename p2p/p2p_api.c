/* Public point-to-point and request functions: argument checks, then the
 * engine. Every failure names the function and the argument. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "p2p_engine.h"
#include "runtime/runtime_device.h"

struct p2p_args {
    struct cadre_comm *comm;
    size_t bytes, elsize;
    int world; /* the peer's world rank; -1 for ANY_SOURCE */
    uint8_t dt; /* the wire header's: the datatype + 1 (cadre_probe counts by it) */
};

/* sr: the send (is_recv 0) or receive half of cadre_sendrecv, whose
 * arguments have their own names. Inlined into each call, where is_recv and
 * sr are constants: the checks of an 8-byte message cost about as much as
 * its transfer. */
static inline __attribute__((always_inline)) int
check_args(const char *fn, const void *buf, size_t count, cadre_datatype_t dt, int peer, int tag,
           cadre_comm_t comm, int is_recv, int sr, struct p2p_args *a)
{
    CADRE_CHECK(cadre__check_initialized(fn));
    cadre__app_active();
    int st;
    a->comm = cadre__comm_get(comm, fn, &st);
    if (!a->comm)
        return st;
    a->elsize = cadre_datatype_size(dt);
    if (!a->elsize)
        return cadre__error(CADRE_ERR_ARG, "%s: unknown datatype %d", fn, (int)dt);
    /* A message has a buffer of its own: the sentinel is no address (its
     * bytes would be read or written at 0x1). */
    CADRE_CHECK(cadre__check_not_in_place(fn, !sr ? "buf" : is_recv ? "recvbuf" : "sendbuf", buf));
    a->dt = (uint8_t)(dt + 1);
    /* cadre__check_span's success, without the call: an element is at most
     * 8 bytes, so a count up to CADRE__MAX_BYTES / 8 neither overflows nor
     * passes CADRE__MAX_BYTES; the buffer must still end at or below
     * CADRE__ADDR_END. Anything else takes the full check, which writes the
     * message. */
    size_t b = count * a->elsize;
    if (__builtin_expect(count <= CADRE__MAX_BYTES / 8 && (uintptr_t)buf <= CADRE__ADDR_END - b, 1))
        a->bytes = b;
    else
        CADRE_CHECK(cadre__check_span(fn, !sr ? "count" : is_recv ? "recvcount" : "sendcount",
                                      count, 1, dt, !sr ? "buf" : is_recv ? "recvbuf" : "sendbuf",
                                      buf, &a->bytes));
    if (!buf && count > 0)
        return cadre__error(CADRE_ERR_ARG, "%s: buffer is NULL with count %zu", fn, count);
    const char *what = is_recv ? "src" : "dst";
    if (!(is_recv && peer == CADRE_ANY_SOURCE) && (peer < 0 || peer >= a->comm->size))
        return cadre__error(CADRE_ERR_ARG, "%s: %s %d out of range [0,%d)", fn, what, peer,
                            a->comm->size);
    if (tag < 0 && !(is_recv && tag == CADRE_ANY_TAG))
        return cadre__error(CADRE_ERR_ARG, "%s: tag %d is negative", fn, tag);
    a->world = peer == CADRE_ANY_SOURCE ? -1 : cadre__world_rank(a->comm, peer);
    return CADRE_SUCCESS;
}

static struct cadre_request *make_req(int kind, const char *fn, const void *buf,
                                      const struct p2p_args *a, int peer, int tag)
{
    struct cadre_request *r = cadre__req_new(kind, fn);
    if (!r)
        return NULL;
    r->comm = a->comm;
    r->ctx = a->comm->context_id;
    r->peer = peer;
    r->peer_world = a->world;
    r->tag = tag;
    r->elsize = a->elsize;
    r->dt = a->dt;
    r->buf = (char *)buf;
    r->bytes = a->bytes;
    return r;
}

/* Whether a request just started needs the progress thread while the caller
 * computes: a send that is not out yet (queued, or waiting for its
 * receiver), and a receive that may get a message by rendezvous, whose data
 * moves only when some thread answers. A smaller receive's message waits
 * whole in the transport until the caller's wait or test, or the progress
 * thread's next tick (0.1 s): waking the thread for it would cost a system
 * call and, where it shares the caller's core, two context switches for
 * every batch of receives. */
static int wants_progress(const struct cadre_request *r)
{
    const struct cadre_engine *e = &cadre__eng;
    if (r->kind != REQ_RECV || r->peer_world == cadre__proc.rank)
        return r->kind != REQ_RECV;
    size_t eager = r->peer_world < 0 ? e->eager_min : e->peers[r->peer_world].eager;
    return r->bytes > eager;
}

/* A small message to another rank that the transport takes whole now
 * (nothing queued ahead of it to that peer, so the order of messages
 * holds): returns 1 when sent, 0 when it must take the general path, or the
 * error of a failed peer (recorded, naming fn and the peer). */
static int send_now(const char *fn, const void *buf, const struct p2p_args *a, int tag)
{
    if (a->world == cadre__proc.rank)
        return 0;
    struct cadre_engine *e = &cadre__eng;
    int sent = 0;
    eng_lock();
    struct cadre_peer *p = &e->peers[a->world];
    if (p->state == PEER_OK && !p->outq && a->bytes <= p->eager) {
        struct cadre_p2p_hdr h = {.type = CADRE_P2P_EAGER,
                                  .dt = a->dt,
                                  .ctx = a->comm->context_id,
                                  .src = a->comm->rank,
                                  .tag = tag,
                                  .len = a->bytes,
                                  .seq = p->send_seq + 1};
        int rc = p->tp->send(a->world, &h, buf);
        if (rc == CADRE_P2P_SENT) {
            p->send_seq++;
            sent = 1;
        } else if (rc != CADRE_P2P_BUSY) {
            sent = cadre__error(rc, "%s: peer rank %d %s", fn, a->world, p->why);
        }
    }
    eng_unlock();
    return sent;
}

/* Starts a request under the engine lock; on failure frees it. */
static int start(struct cadre_request *r, int user)
{
    eng_lock();
    r->user = (uint8_t)user;
    if (user)
        eng_outstanding_add(1);
    int rc = r->kind == REQ_SEND ? cadre__p2p_start_send(r) : cadre__p2p_start_recv(r);
    if (rc != CADRE_SUCCESS && !atomic_load(&r->done)) {
        if (user)
            eng_outstanding_add(-1);
        r->user = 0;
        eng_unlock();
        cadre__req_free(r);
        return rc;
    }
    /* Counted under the lock, so that its completion (complete_tail, also
     * under the lock) finds it counted. */
    int kick = user && !atomic_load(&r->done) && wants_progress(r);
    if (kick)
        cadre__req_wants_pt(r);
    eng_unlock();
    if (kick)
        cadre__p2p_kick();
    return CADRE_SUCCESS;
}

/* The end of a wait: the request's outcome becomes the caller's. */
static int finish(struct cadre_request *r, cadre_status_t *status)
{
    int rc = r->error;
    if (status) {
        *status = r->status;
        status->error = rc;
    }
    if (rc != CADRE_SUCCESS)
        cadre__error(rc, "%s", r->errmsg[0] ? r->errmsg : cadre_error_string(rc));
    cadre__req_free(r);
    return rc;
}

/* What r is, for the diagnosis: "cadre_recv from rank 1 (tag 5) on WORLD"
 * (p2p_describe.c), and where it stands (point-to-point; NULL for a
 * collective). */
static const char *describe_wait(const struct cadre_request *r, const char *fn, char *what,
                                 size_t len)
{
    cadre__p2p_req_what(r, fn, CADRE_WHAT_COMM, what, len);
    return cadre__p2p_req_stage(r);
}

int cadre__p2p_timed_out(struct cadre_request *r, const char *fn)
{
    char what[200], sum[1024];
    const char *stage = describe_wait(r, fn, what, sizeof what);
    int shown = cadre__p2p_diagnose(r, fn, what, stage, sum, sizeof sum);
    int rc = cadre__error(CADRE_ERR_TIMEOUT, "%s", sum);
    if (shown)
        cadre__error_shown();
    eng_lock();
    cadre__p2p_abandon(r);
    eng_unlock();
    return rc;
}

void cadre__p2p_stuck(struct cadre_request *r, double secs)
{
    /* The call the program waits in: the state record has it. */
    struct cadre_op_snapshot s;
    cadre__state_snapshot(&s);
    char fn[32], what[200];
    snprintf(fn, sizeof fn, "%s", s.in_cadre && s.via[0] ? s.via : r->op);
    const char *stage = describe_wait(r, fn, what, sizeof what);
    cadre__p2p_diag_stuck(r, fn, what, stage, secs);
}

/* The operation state a peer sees while this thread waits on r in fn. */
static void enter(struct cadre_request *r, const char *fn)
{
    int coll = r->kind == REQ_GENERIC;
    cadre__state_enter(r->op, fn != r->op && strcmp(fn, r->op) ? fn : NULL, r->comm ? r->comm->context_id : 0,
                       coll ? (uint32_t)r->tag + 1 : 0, coll ? -1 : r->peer, coll ? -1 : r->tag);
}

static int wait_and_finish(struct cadre_request *r, const char *fn, cadre_status_t *status)
{
    /* Done already (most requests of a window): no wait for a peer's
     * diagnosis to see. */
    if (atomic_load_explicit(&r->done, memory_order_acquire))
        return finish(r, status);
    enter(r, fn);
    int rc;
    if (cadre__req_wait(r, 0, 1) != CADRE_SUCCESS) {
        if (status)
            *status = (cadre_status_t){.source = r->peer, .tag = r->tag, .error = CADRE_ERR_TIMEOUT};
        rc = cadre__p2p_timed_out(r, fn);
    } else {
        rc = finish(r, status);
    }
    cadre__state_leave();
    return rc;
}

int cadre_send(const void *buf, size_t count, cadre_datatype_t dt, int dst, int tag,
               cadre_comm_t comm)
{
    struct p2p_args a;
    CADRE_CHECK(check_args("cadre_send", buf, count, dt, dst, tag, comm, 0, 0, &a));
    if (cadre__gpu_enabled()) { int g = cadre__gpu.send(buf, count, dt, dst, tag, a.comm, NULL); if (g != CADRE__GPU_NOT_MINE) return g; }
    /* Fast path: a small message that the transport takes at once needs no
     * request at all. */
    int sent = send_now("cadre_send", buf, &a, tag);
    if (sent != 0)
        return sent > 0 ? CADRE_SUCCESS : sent;
    struct cadre_request *r = make_req(REQ_SEND, "cadre_send", buf, &a, dst, tag);
    if (!r)
        return cadre__error(CADRE_ERR_NOMEM, "cadre_send: no memory for a request");
    CADRE_CHECK(start(r, 0));
    return wait_and_finish(r, "cadre_send", NULL);
}

int cadre_recv(void *buf, size_t count, cadre_datatype_t dt, int src, int tag, cadre_comm_t comm,
               cadre_status_t *status)
{
    struct p2p_args a;
    CADRE_CHECK(check_args("cadre_recv", buf, count, dt, src, tag, comm, 1, 0, &a));
    if (cadre__gpu_enabled()) { int g = cadre__gpu.recv(buf, count, dt, src, tag, a.comm, NULL, status); if (g != CADRE__GPU_NOT_MINE) return g; }
    if (a.world >= 0 && a.world != cadre__proc.rank) {
        struct cadre_p2p_direct d = {a.comm->context_id, a.world, src, tag, buf, a.bytes, a.elsize};
        if (cadre__p2p_recv_direct(&d, status))
            return CADRE_SUCCESS;
    }
    struct cadre_request *r = make_req(REQ_RECV, "cadre_recv", buf, &a, src, tag);
    if (!r)
        return cadre__error(CADRE_ERR_NOMEM, "cadre_recv: no memory for a request");
    CADRE_CHECK(start(r, 0));
    return wait_and_finish(r, "cadre_recv", status);
}

/* Inlined into cadre_isend and cadre_irecv, where kind is a constant. */
static inline __attribute__((always_inline)) int post_nb(int kind, const char *fn, const void *buf, size_t count, cadre_datatype_t dt,
                   int peer, int tag, cadre_comm_t comm, cadre_request_t *req)
{
    if (!req)
        return cadre__error(CADRE_ERR_ARG, "%s: req is NULL", fn);
    struct p2p_args a;
    CADRE_CHECK(check_args(fn, buf, count, dt, peer, tag, comm, kind == REQ_RECV, 0, &a));
    if (cadre__gpu_enabled()) { int g = kind == REQ_SEND ? cadre__gpu.send(buf, count, dt, peer, tag, a.comm, req) : cadre__gpu.recv((void *)buf, count, dt, peer, tag, a.comm, req, NULL); if (g != CADRE__GPU_NOT_MINE) return g; }
    struct cadre_request *r = make_req(kind, fn, buf, &a, peer, tag);
    if (!r)
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory for a request", fn);
    cadre_request_t h;
    if (cadre__req_handle(r, &h) != CADRE_SUCCESS) {
        cadre__req_free(r);
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory for a request handle", fn);
    }
    /* A small send the transport takes at once is done before the call
     * returns (as the general path completes it when cadre__p2p_post sends
     * at once): no matching, no outstanding count, no completion under the
     * lock. The request and handle come first, so that no message leaves
     * when the call fails. */
    int sent = kind == REQ_SEND ? send_now(fn, buf, &a, tag) : 0;
    if (sent < 0) {
        cadre__req_free(r);
        return sent;
    }
    if (sent) {
        r->state = RS_DONE;
        atomic_store_explicit(&r->done, 1, memory_order_relaxed);
        *req = h;
        return CADRE_SUCCESS;
    }
    CADRE_CHECK(start(r, 1));
    *req = h;
    return CADRE_SUCCESS;
}

int cadre_isend(const void *buf, size_t count, cadre_datatype_t dt, int dst, int tag,
                cadre_comm_t comm, cadre_request_t *req)
{
    return post_nb(REQ_SEND, "cadre_isend", buf, count, dt, dst, tag, comm, req);
}

int cadre__p2p_isend_device(const void *buf, size_t count, cadre_datatype_t dt, int dst, int tag,
                            cadre_comm_t comm, cadre_request_t *req)
{
    const char *fn = "cadre_isend";
    struct p2p_args a;
    CADRE_CHECK(check_args(fn, buf, count, dt, dst, tag, comm, 0, 0, &a));
    struct cadre_request *r = make_req(REQ_SEND, fn, buf, &a, dst, tag);
    if (!r)
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory for a request", fn);
    r->dev_mem = 1;
    if (cadre__req_handle(r, req) != CADRE_SUCCESS) {
        cadre__req_free(r);
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory for a request handle", fn);
    }
    return start(r, 1);
}

int cadre_irecv(void *buf, size_t count, cadre_datatype_t dt, int src, int tag, cadre_comm_t comm,
                cadre_request_t *req)
{
    return post_nb(REQ_RECV, "cadre_irecv", buf, count, dt, src, tag, comm, req);
}

int cadre_sendrecv(const void *sendbuf, size_t sendcount, int dst, int sendtag, void *recvbuf,
                   size_t recvcount, int src, int recvtag, cadre_datatype_t dt, cadre_comm_t comm,
                   cadre_status_t *status)
{
    const char *fn = "cadre_sendrecv";
    struct p2p_args sa, ra;
    CADRE_CHECK(check_args(fn, sendbuf, sendcount, dt, dst, sendtag, comm, 0, 1, &sa));
    CADRE_CHECK(check_args(fn, recvbuf, recvcount, dt, src, recvtag, comm, 1, 1, &ra));
    /* The receive may land while the send still reads: overlapping
     * buffers would send what was received (MPI forbids them too). */
    CADRE_CHECK(cadre__check_overlap(fn, sendbuf, sa.bytes, recvbuf, ra.bytes,
                                     "the two buffers of cadre_sendrecv must not overlap"));
    if (cadre__gpu_enabled()) { int g = cadre__gpu.sendrecv(sendbuf, sendcount, dst, sendtag, recvbuf, recvcount, src, recvtag, dt, sa.comm, status); if (g != CADRE__GPU_NOT_MINE) return g; }
    struct cadre_request *rr = make_req(REQ_RECV, fn, recvbuf, &ra, src, recvtag);
    struct cadre_request *sr = make_req(REQ_SEND, fn, sendbuf, &sa, dst, sendtag);
    if (!rr || !sr) {
        cadre__req_free(rr);
        cadre__req_free(sr);
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory for requests", fn);
    }
    int rc = start(rr, 0);
    if (rc != CADRE_SUCCESS) {
        cadre__req_free(sr);
        return rc;
    }
    rc = start(sr, 0);
    if (rc != CADRE_SUCCESS) {
        /* The receive is posted: it must not outlive the call. */
        if (cadre__req_wait(rr, cadre__now() + 0.0, 0) != CADRE_SUCCESS) {
            eng_lock();
            cadre__p2p_abandon(rr);
            eng_unlock();
        } else {
            cadre__req_free(rr);
        }
        return cadre__error(rc, "%s", cadre_last_error());
    }
    enter(sr, fn);
    int rs = cadre__req_wait(sr, 0, 1) != CADRE_SUCCESS ? cadre__p2p_timed_out(sr, fn) : finish(sr, NULL);
    cadre__state_leave();
    if (rs != CADRE_SUCCESS) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", cadre_last_error());
        if (cadre__req_wait(rr, cadre__now() + 1.0, 0) == CADRE_SUCCESS)
            cadre__req_free(rr);
        else {
            eng_lock();
            cadre__p2p_abandon(rr);
            eng_unlock();
        }
        return cadre__error(rs, "%s", msg);
    }
    return wait_and_finish(rr, fn, status);
}

/* ---- requests ------------------------------------------------------------------ */

/* The request *req names, NULL for CADRE_REQUEST_NULL; an error for a
 * stale or bad handle, whose message names reqs[idx] (idx >= 0) or req. */
/* The error of find_req: message names reqs[idx] (idx >= 0) or req. */
static __attribute__((noinline, cold)) int bad_req(const char *fn, cadre_request_t h, int idx)
{
    char arg[32] = "req";
    if (idx >= 0)
        snprintf(arg, sizeof arg, "reqs[%d]", idx);
    int st;
    cadre__req_get(h, fn, arg, &st);
    return st;
}

/* The request of handle h, NULL for CADRE_REQUEST_NULL; an error for a
 * stale or bad handle. The lookup never dereferences the value: a stale
 * copy of a handle, or garbage, is refused whatever now lives at that
 * address. */
static inline int find_req(const char *fn, cadre_request_t h, int idx, struct cadre_request **out)
{
    *out = NULL;
    if (!h || (*out = cadre__req_find(h)))
        return CADRE_SUCCESS;
    return bad_req(fn, h, idx);
}

/* The entry checks of cadre_wait, cadre_test and cadre_wait_timeout. */
static int check_req(const char *fn, cadre_request_t *req, struct cadre_request **out)
{
    if (!req)
        return cadre__error(CADRE_ERR_ARG, "%s: req is NULL", fn);
    CADRE_CHECK(cadre__check_initialized(fn));
    cadre__app_active();
    return find_req(fn, *req, -1, out);
}

static void empty_status(cadre_status_t *status)
{
    if (status)
        *status = (cadre_status_t){.source = CADRE_ANY_SOURCE, .tag = CADRE_ANY_TAG};
}

/* Waits for r, the request of handle *req, in fn (r NULL: *req is
 * CADRE_REQUEST_NULL). */
static int wait_found(const char *fn, cadre_request_t *req, struct cadre_request *r,
                      cadre_status_t *status)
{
    if (!r) {
        empty_status(status);
        return CADRE_SUCCESS;
    }
    /* The user's part ends here: a copy of the handle is stale from now on,
     * even while the wait goes on. */
    *req = CADRE_REQUEST_NULL;
    cadre__req_handle_end(r);
    if (cadre__gpu_enabled()) { int g = cadre__gpu.wait(r, status); if (g != CADRE__GPU_NOT_MINE) return g; }
    return wait_and_finish(r, fn, status);
}

int cadre_wait(cadre_request_t *req, cadre_status_t *status)
{
    struct cadre_request *r;
    CADRE_CHECK(check_req("cadre_wait", req, &r));
    return wait_found("cadre_wait", req, r, status);
}

int cadre_wait_timeout(cadre_request_t *req, double seconds, cadre_status_t *status)
{
    struct cadre_request *r;
    CADRE_CHECK(check_req("cadre_wait_timeout", req, &r));
    if (!(seconds >= 0))
        return cadre__error(CADRE_ERR_ARG, "cadre_wait_timeout: seconds %g is negative or NaN",
                            seconds);
    if (!r) {
        empty_status(status);
        return CADRE_SUCCESS;
    }
    enter(r, "cadre_wait_timeout");
    int done = cadre__req_wait(r, cadre__now() + seconds, 0) == CADRE_SUCCESS;
    cadre__state_leave();
    if (!done)
        return cadre__error(CADRE_ERR_TIMEOUT, "cadre_wait_timeout: %s not complete after %g s",
                            r->op, seconds);
    *req = CADRE_REQUEST_NULL;
    cadre__req_handle_end(r);
    return finish(r, status);
}

int cadre_test(cadre_request_t *req, int *done, cadre_status_t *status)
{
    if (!done)
        return cadre__error(CADRE_ERR_ARG, "cadre_test: done is NULL");
    struct cadre_request *r;
    CADRE_CHECK(check_req("cadre_test", req, &r));
    if (!r) {
        empty_status(status);
        *done = 1;
        return CADRE_SUCCESS;
    }
    if (!atomic_load_explicit(&r->done, memory_order_acquire))
        cadre__p2p_progress();
    if (!atomic_load_explicit(&r->done, memory_order_acquire)) {
        *done = 0;
        return CADRE_SUCCESS;
    }
    *done = 1;
    *req = CADRE_REQUEST_NULL;
    cadre__req_handle_end(r);
    return finish(r, status);
}

int cadre__p2p_complete_all(const char *fn, int n, cadre_request_t reqs[],
                            cadre_status_t statuses[])
{
    struct cadre_request *r;
    int first = CADRE_SUCCESS, shown = 0;
    char msg[512];
    msg[0] = '\0'; /* not = "": that zeroes all 512 bytes on every call */
    for (int i = 0; i < n; i++) {
        /* Looked up again: a handle given twice is stale at its second place. */
        int rc = find_req(fn, reqs[i], i, &r);
        cadre_status_t *st = statuses ? &statuses[i] : NULL;
        if (rc == CADRE_SUCCESS && r && atomic_load_explicit(&r->done, memory_order_acquire) &&
            !cadre__gpu_enabled()) {
            /* Done already (most of a window): wait_found without the wait. */
            reqs[i] = CADRE_REQUEST_NULL;
            cadre__req_handle_end(r);
            rc = finish(r, st);
        } else if (rc == CADRE_SUCCESS) {
            rc = wait_found(fn, &reqs[i], r, st);
        }
        if (rc != CADRE_SUCCESS && first == CADRE_SUCCESS) {
            first = rc;
            shown = cadre__error_was_shown();
            cadre__p2p_name_failure(fn, i, msg, sizeof msg);
        }
    }
    if (first != CADRE_SUCCESS) {
        cadre__error(first, "%s", msg);
        /* Its diagnosis block is out already: the same event. */
        if (shown)
            cadre__error_shown();
        return first;
    }
    return CADRE_SUCCESS;
}

void cadre__p2p_name_failure(const char *fn, int i, char *msg, size_t len)
{
    /* The request's own text, without the name of the call twice. */
    const char *why = cadre_last_error();
    size_t fnlen = strlen(fn);
    if (!strncmp(why, fn, fnlen) && !strncmp(why + fnlen, ": ", 2))
        why += fnlen + 2;
    char arg[32];
    int k = snprintf(arg, sizeof arg, "reqs[%d]", i);
    if (!strncmp(why, arg, (size_t)k)) /* a handle given twice: named already */
        snprintf(msg, len, "%s: %s", fn, why);
    else
        snprintf(msg, len, "%s: %s: %s", fn, arg, why);
}

int cadre_waitall(int n, cadre_request_t reqs[], cadre_status_t statuses[])
{
    if (n < 0)
        return cadre__error(CADRE_ERR_ARG, "cadre_waitall: n %d is negative", n);
    if (n > 0 && !reqs)
        return cadre__error(CADRE_ERR_ARG, "cadre_waitall: reqs is NULL with n %d", n);
    CADRE_CHECK(cadre__check_initialized("cadre_waitall"));
    /* Every handle is checked before any is waited on, so a bad one leaves
     * the others to the caller. */
    cadre__app_active();
    struct cadre_request *r;
    for (int i = 0; i < n; i++)
        CADRE_CHECK(find_req("cadre_waitall", reqs[i], i, &r));
    return cadre__p2p_complete_all("cadre_waitall", n, reqs, statuses);
}

/* For the other completion calls (p2p_wait.c). */
int cadre__p2p_req_of(const char *fn, cadre_request_t h, int idx, struct cadre_request **out)
{
    return find_req(fn, h, idx, out);
}

int cadre__p2p_wait_found(const char *fn, cadre_request_t *req, struct cadre_request *r,
                          cadre_status_t *status)
{
    return wait_found(fn, req, r, status);
}

void cadre__p2p_enter(struct cadre_request *r, const char *fn)
{
    enter(r, fn);
}
