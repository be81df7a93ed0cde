/* The host executor of schedules (coll_sched.c builds them): posts each
 * round's messages, waits for them, runs its local steps, and fails the
 * schedule on a mismatch, a dead peer or a poisoned communicator. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_fast.h"
#include "coll_sig.h"

/* ---- executor ------------------------------------------------------------------ */

static int post_round(struct coll_sched *s)
{
    int from = s->round ? s->round_end[s->round - 1] : 0, to = s->round_end[s->round];
    s->nreqs = 0;
    for (int i = from; i < to; i++) {
        struct coll_step *st = &s->steps[i];
        if (st->kind != CS_SEND && st->kind != CS_RECV)
            continue;
        if (s->nreqs == s->reqcap) {
            int ncap = s->reqcap ? s->reqcap * 2 : 8;
            struct cadre_request **n = realloc(s->reqs, (size_t)ncap * sizeof *n);
            if (!n)
                return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", s->op_name);
            s->reqs = n;
            s->reqcap = ncap;
        }
        int kind = st->kind == CS_SEND ? REQ_SEND : REQ_RECV;
        struct cadre_request *r = cadre__req_new(kind, s->op_name);
        if (!r)
            return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", s->op_name);
        r->comm = s->comm;
        r->ctx = s->ctx;
        r->peer = st->peer;
        r->peer_world = cadre__world_rank(s->comm, st->peer);
        r->tag = s->tag;
        r->sig = s->sig;
        r->elsize = 1;
        r->buf = st->kind == CS_SEND ? (char *)st->src : st->dst;
        r->bytes = st->n;
        r->nt = s->out_bytes >= cadre__copy_out_min;
        int rc = kind == REQ_SEND ? cadre__p2p_start_send(r) : cadre__p2p_start_recv(r);
        if (rc != CADRE_SUCCESS && !atomic_load(&r->done)) {
            cadre__req_free(r);
            return rc;
        }
        s->reqs[s->nreqs++] = r;
    }
    s->posted = 1;
    s->waited_since = 0;
    return CADRE_SUCCESS;
}

/* A round that waits long on its receives asks their senders whether they
 * made this call: where ranks disagree so that nobody sends (two roots of a
 * reduce, each waiting for the other), the sender finds the difference and
 * poisons the communicator, instead of both waiting CADRE_TIMEOUT. After
 * 0.2 s, then at doubling intervals up to 2 s (a slow peer that has not
 * made the call yet is asked again); a matching call costs nothing. */
static void ask_stalled(struct coll_sched *s)
{
    if (!s->sig)
        return;
    double now = cadre__now();
    if (!s->waited_since) {
        s->waited_since = now;
        s->ask_after = 0.2;
        return;
    }
    if (now - s->waited_since < s->ask_after)
        return;
    s->waited_since = now;
    if (s->ask_after < 2)
        s->ask_after *= 2;
    for (int i = 0; i < s->nreqs; i++) {
        struct cadre_request *r = s->reqs[i];
        if (r->kind == REQ_RECV && !atomic_load_explicit(&r->done, memory_order_acquire))
            cadre__coll_sigq_send_locked(s->comm, r->peer, s->tag, s->sig);
    }
}

/* a op b into dst (another buffer than a and b): a copied and b reduced into
 * it piece by piece, each piece still in the first-level cache when it is
 * reduced. Copying a whole large input to the output first wrote it to
 * memory and read it back (a 16 MiB allreduce over TCP spent 12% of its
 * time in that copy). */
#define REDUCE_TO_PIECE 16384

void cadre__coll_reduce_to(void *dst, const void *a, const void *b, size_t n,
                           cadre_datatype_t dt, cadre_op_t op)
{
    size_t es = cadre_datatype_size(dt), piece = REDUCE_TO_PIECE / es;
    char *d = dst;
    const char *x = a, *y = b;
    for (size_t i = 0; i < n; i += piece) {
        size_t m = n - i < piece ? n - i : piece;
        memcpy(d + i * es, x + i * es, m * es);
        cadre__coll_reduce(d + i * es, y + i * es, m, dt, op);
    }
}

/* The round's local steps, in order; stops at the first that fails. */
static int run_local(struct coll_sched *s)
{
    int from = s->round ? s->round_end[s->round - 1] : 0, to = s->round_end[s->round];
    for (int i = from; i < to; i++) {
        struct coll_step *st = &s->steps[i];
        if (st->kind == CS_REDUCE) {
            if (st->src2)
                cadre__coll_reduce_to(st->dst, st->src2, st->src, st->n, s->dt, s->op);
            else
                cadre__coll_reduce(st->dst, st->src, st->n, s->dt, s->op);
        } else if (st->kind == CS_COPY) {
            const char *d = st->dst, *from = st->src;
            if (d + st->n <= from || from + st->n <= d)
                cadre__copy_out(st->dst, st->src, st->n,
                                st->n > s->out_bytes ? st->n : s->out_bytes);
            else
                memmove(st->dst, st->src, st->n);
        } else if (st->kind == CS_CALL) {
            int rc = st->call(s, st);
            if (rc != CADRE_SUCCESS) {
                s->error = rc;
                snprintf(s->errmsg, sizeof s->errmsg, "%s", cadre_last_error());
                return rc;
            }
        }
    }
    return CADRE_SUCCESS;
}

static void drop_reqs(struct coll_sched *s)
{
    for (int i = 0; i < s->nreqs; i++) {
        if (atomic_load(&s->reqs[i]->done))
            cadre__req_free(s->reqs[i]);
        else
            cadre__p2p_abandon(s->reqs[i]);
    }
    s->nreqs = 0;
}

/* s failed with CADRE_ERR_PEER on rank `peer` of its communicator (-1: not
 * known), whose text is msg: names the member to blame (cadre__coll_blame)
 * and tells the live ranks. Lock held. */
static void peer_failure(struct coll_sched *s, int peer, const char *msg)
{
    int dead = cadre__coll_blame(s->comm, peer);
    if (dead >= 0 && dead != peer) {
        const char *host =
            cadre__p2p_host(cadre__world_rank(s->comm, dead));
        snprintf(s->errmsg, sizeof s->errmsg,
                 "%s: rank %d%s%s%s failed (a rank that finalized after it went first)",
                 s->op_name, dead, host ? " (host " : "", host ? host : "", host ? ")" : "");
    }
    else
        snprintf(s->errmsg, sizeof s->errmsg, "%s", msg);
    if (dead >= 0)
        cadre__coll_poison_peer_locked(s->comm, dead);
}

/* Whether s's communicator is poisoned; if so, s fails with that status
 * and text. A rank that finds a mismatch tells the others before it
 * finalizes, so a peer that left after such news is not the cause. */
static int poisoned(struct coll_sched *s)
{
    int prc;
    if (!cadre__coll_any_poisoned() ||
        (prc = cadre__coll_poisoned(s->ctx, s->op_name)) == CADRE_SUCCESS)
        return 0;
    /* A later call was found at fault: this one matched everywhere, and the
     * ranks that found the fault had finished it (a rank whose last message
     * of a barrier is still on its way must not fail that barrier). */
    if (cadre__coll_fault_after(s->ctx, s->tag))
        return 0;
    s->error = prc;
    snprintf(s->errmsg, sizeof s->errmsg, "%s", cadre_last_error());
    return 1;
}

/* Advances as far as possible; returns events. Sets *finished with the
 * status in s->error. Lock held. */
static int advance(struct coll_sched *s, int *finished)
{
    int events = 0;
    *finished = 0;
    if (poisoned(s)) {
        drop_reqs(s);
        *finished = 1;
        return 1;
    }
    while (s->round < s->nrounds) {
        if (!s->posted) {
            int rc = post_round(s);
            events++;
            if (rc != CADRE_SUCCESS) {
                s->error = rc;
                snprintf(s->errmsg, sizeof s->errmsg, "%s", cadre_last_error());
                if (rc == CADRE_ERR_PEER && !poisoned(s))
                    peer_failure(s, -1, cadre_last_error());
                drop_reqs(s);
                *finished = 1;
                return events;
            }
        }
        /* The round ends when all its requests are done, or at the first
         * that failed: its partners may never come (a mismatch, a dead peer). */
        int pending = 0, failed = 0;
        for (int i = 0; i < s->nreqs; i++) {
            if (!atomic_load_explicit(&s->reqs[i]->done, memory_order_acquire))
                pending = 1;
            else if (s->reqs[i]->error != CADRE_SUCCESS &&
                     s->reqs[i]->error != CADRE_ERR_TRUNCATE)
                failed = 1;
        }
        if (pending && !failed) {
            ask_stalled(s);
            return events;
        }
        /* The round's steps that made requests, in the order of reqs. */
        const struct coll_step *st = &s->steps[s->round ? s->round_end[s->round - 1] : 0];
        for (int i = 0; i < s->nreqs; i++, st++) {
            struct cadre_request *r = s->reqs[i];
            while (st->kind != CS_SEND && st->kind != CS_RECV)
                st++;
            if (!atomic_load_explicit(&r->done, memory_order_acquire))
                continue;
            /* A schedule posts each receive for exactly what its partner
             * sends when the ranks agree on the counts: a shorter message
             * would leave part of the result stale, a longer one is cut. */
            if (r->kind == REQ_RECV && !s->count_error &&
                ((r->error == CADRE_SUCCESS && r->msg_len < r->bytes && !st->upto) ||
                 r->error == CADRE_ERR_TRUNCATE)) {
                s->count_error = CADRE_ERR_MISMATCH;
                if (r->error == CADRE_ERR_TRUNCATE)
                    snprintf(s->count_msg, sizeof s->count_msg,
                             "%s: rank %d sent more data than this rank expects (do the ranks "
                             "agree on count and datatype?)",
                             s->op_name, r->status.source);
                else
                    snprintf(s->count_msg, sizeof s->count_msg,
                             "%s: rank %d sent %zu bytes where this rank expects %zu (do the "
                             "ranks agree on count and datatype?)",
                             s->op_name, r->status.source, (size_t)r->msg_len, r->bytes);
            }
            if (r->error != CADRE_SUCCESS && r->error != CADRE_ERR_TRUNCATE && !s->error) {
                s->error = r->error;
                if (r->error == CADRE_ERR_MISMATCH && r->peer_sig) {
                    cadre__sig_mismatch(s->op_name, r->status.source, r->peer_sig,
                                        s->comm->rank, s->sig);
                    snprintf(s->errmsg, sizeof s->errmsg, "%s", cadre_last_error());
                    cadre__coll_poison_locked(s->comm, s->tag, r->status.source, r->peer_sig,
                                              s->sig);
                } else if (r->error == CADRE_ERR_PEER && poisoned(s)) {
                    /* The peer left after it told why: that is the error. */
                } else if (r->error == CADRE_ERR_PEER && r->peer >= 0) {
                    peer_failure(s, r->peer, r->errmsg);
                } else
                    snprintf(s->errmsg, sizeof s->errmsg, "%s", r->errmsg);
            }
        }
        drop_reqs(s);
        if (s->error) {
            *finished = 1;
            return events;
        }
        if (run_local(s) != CADRE_SUCCESS) {
            *finished = 1;
            return events;
        }
        s->round++;
        s->posted = 0;
        events++;
    }
    if (s->scale_buf) {
        cadre__coll_scale(s->scale_buf, s->scale_n, s->dt, s->scale_div);
        s->scale_buf = NULL;
    }
    if (s->count_error && !s->error) {
        s->error = s->count_error;
        snprintf(s->errmsg, sizeof s->errmsg, "%s", s->count_msg);
    }
    *finished = 1;
    return events;
}

static int sched_poll(struct cadre_request *r)
{
    struct coll_sched *s = r->priv;
    int finished;
    int events = advance(s, &finished);
    if (events)
        r->last_activity = cadre__now();
    if (finished) {
        /* Past its rounds it waits for nobody: later calls need not give
         * way to it (coll_direct.c, build), though the user may free its
         * request much later. */
        if (s->direct_live)
            cadre__direct_gone(s);
        cadre__req_unlink_generic(r);
        if (s->error)
            cadre__req_complete(r, s->error, "%s", s->errmsg);
        else
            cadre__req_complete(r, CADRE_SUCCESS, NULL);
    }
    return events;
}

static void sched_cancel(struct cadre_request *r)
{
    struct coll_sched *s = r->priv;
    cadre__req_unlink_generic(r);
    drop_reqs(s);
}

static void sched_release(struct cadre_request *r)
{
    struct coll_sched *s = r->priv;
    if (s) {
        cadre__sched_free(s);
        free(s);
    }
    r->priv = NULL;
}

/* Starts s as a request: *out for the library's own wait, or, for a
 * nonblocking call (handle not NULL), the user's handle in *handle. */
static int start(struct coll_sched *s, struct cadre_request **out, cadre_request_t *handle)
{
    int user = handle != NULL;
    /* A trailing round without a barrier call still counts. */
    int rc = cadre__sched_barrier(s);
    if (rc != CADRE_SUCCESS) {
        cadre__sched_free(s);
        free(s);
        return rc;
    }
    struct cadre_request *r = cadre__req_new(REQ_GENERIC, s->op_name);
    if (!r) {
        const char *name = s->op_name;
        cadre__sched_free(s);
        free(s);
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory for a request", name);
    }
    cadre_request_t h = CADRE_REQUEST_NULL;
    if (user && cadre__req_handle(r, &h) != CADRE_SUCCESS) {
        const char *name = s->op_name;
        cadre__req_free(r);
        cadre__sched_free(s);
        free(s);
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory for a request handle", name);
    }
    r->comm = s->comm;
    r->tag = s->tag; /* for a timeout's diagnosis */
    r->priv = s;
    r->poll = sched_poll;
    r->cancel = sched_cancel;
    r->release = sched_release;
    eng_lock();
    r->user = (uint8_t)user;
    if (user)
        eng_outstanding_add(1);
    r->next = cadre__eng.generic;
    if (r->next)
        r->next->prev = r;
    cadre__eng.generic = r;
    if (s->comm->fast)
        cadre__fast_note_messages(s->comm);
    if (s->sig) {
        /* A peer's message of another call that came before this one
         * poisons the communicator here; advance then fails the call. */
        cadre__coll_sig_record(s->comm, s->tag, s->sig);
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        (void)cadre__coll_strays_locked(s->comm, s->tag, s->op_name);
    }
    sched_poll(r);
    int kick = user && !atomic_load(&r->done);
    if (kick)
        cadre__req_wants_pt(r);
    eng_unlock();
    if (kick)
        cadre__p2p_kick();
    if (user)
        *handle = h;
    else
        *out = r;
    return CADRE_SUCCESS;
}

int cadre__sched_start(struct coll_sched *s, cadre_request_t *req)
{
    struct coll_sched *h = malloc(sizeof *h);
    if (!h) {
        cadre__sched_free(s);
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", s->op_name);
    }
    *h = *s;
    memset(s, 0, sizeof *s);
    return start(h, NULL, req);
}

int cadre__sched_run(struct coll_sched *s)
{
    struct coll_sched *h = malloc(sizeof *h);
    if (!h) {
        cadre__sched_free(s);
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", s->op_name);
    }
    *h = *s;
    memset(s, 0, sizeof *s);
    const char *name = h->op_name;
    struct cadre_request *r = NULL;
    cadre__state_enter(name, NULL, h->comm->context_id, (uint32_t)h->tag + 1, -1, -1);
    int rc = start(h, &r, NULL);
    if (rc == CADRE_SUCCESS && cadre__req_wait(r, 0, 1) != CADRE_SUCCESS)
        rc = cadre__p2p_timed_out(r, name), r = NULL;
    cadre__state_leave();
    if (!r)
        return rc;
    rc = r->error;
    if (rc != CADRE_SUCCESS)
        cadre__error(rc, "%s", r->errmsg);
    cadre__req_free(r);
    return rc;
}
