/* cadre_waitany, cadre_testany and cadre_testall: the completion calls over
 * arrays beside cadre_waitall (p2p_api.c, whose request helpers they use).
 * A request completed here is released as cadre_wait releases it (its
 * handle set to CADRE_REQUEST_NULL); a failed one is reported as
 * cadre_waitall reports it ("fn: reqs[i]: what failed"). Requests of
 * device operations count as complete once finished on the device, as for
 * cadre_test; cadre_waitany, like cadre_wait, does not block the host for
 * them (it picks one and makes the communicator's stream wait for it).
 * Also what becomes of a request whose wait gave up (cadre__p2p_abandon).
 * May call: this folder's engine and requests, runtime/ (the device path's
 * table of runtime_device.h among it). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/runtime_device.h"
#include "p2p_engine.h"

static void empty_status(cadre_status_t *status)
{
    if (status)
        *status = (cadre_status_t){.source = CADRE_ANY_SOURCE, .tag = CADRE_ANY_TAG};
}

/* The checks every one of these calls makes: n, reqs, the output pointer
 * named `out` (NULL: none), then every handle, looked up into rs (NULL for
 * CADRE_REQUEST_NULL) before any request is touched. *live: how many are
 * not CADRE_REQUEST_NULL. */
static int check_all(const char *fn, int n, cadre_request_t reqs[], const void *out,
                     const char *out_name, struct cadre_request **rs, int *live)
{
    if (n < 0)
        return cadre__error(CADRE_ERR_ARG, "%s: n %d is negative", fn, n);
    if (n > 0 && !reqs)
        return cadre__error(CADRE_ERR_ARG, "%s: reqs is NULL with n %d", fn, n);
    if (out_name && !out)
        return cadre__error(CADRE_ERR_ARG, "%s: %s is NULL", fn, out_name);
    CADRE_CHECK(cadre__check_initialized(fn));
    cadre__app_active();
    *live = 0;
    for (int i = 0; i < n; i++) {
        CADRE_CHECK(cadre__p2p_req_of(fn, reqs[i], i, &rs[i]));
        *live += rs[i] != NULL;
    }
    return CADRE_SUCCESS;
}

/* The lookups of a call: on the stack for the usual few requests. */
#define RS_STACK 32
static struct cadre_request **rs_get(const char *fn, int n, struct cadre_request **stack, int *rc)
{
    *rc = CADRE_SUCCESS;
    if (n <= RS_STACK)
        return stack;
    struct cadre_request **rs = malloc((size_t)n * sizeof *rs);
    if (!rs)
        *rc = cadre__error(CADRE_ERR_NOMEM, "%s: no memory for %d requests", fn, n);
    return rs;
}

static void rs_put(struct cadre_request **rs, struct cadre_request **stack)
{
    if (rs != stack)
        free(rs);
}

static int is_done(const struct cadre_request *r)
{
    return r && atomic_load_explicit(&r->done, memory_order_acquire);
}

/* The lowest index whose request is complete, or -1. */
static int first_done(int n, struct cadre_request **rs)
{
    for (int i = 0; i < n; i++)
        if (is_done(rs[i]))
            return i;
    return -1;
}

/* Completes reqs[i] (request rs[i]) as cadre_wait does; its failure is
 * reported as cadre_waitall reports one. */
static int complete_one(const char *fn, cadre_request_t reqs[], int i, struct cadre_request *r,
                        cadre_status_t *status)
{
    int rc = cadre__p2p_wait_found(fn, &reqs[i], r, status);
    if (rc != CADRE_SUCCESS) {
        int shown = cadre__error_was_shown();
        char msg[512];
        cadre__p2p_name_failure(fn, i, msg, sizeof msg);
        cadre__error(rc, "%s", msg);
        /* Its diagnosis block is out already: the same event. */
        if (shown)
            cadre__error_shown();
    }
    return rc;
}

int cadre_testany(int n, cadre_request_t reqs[], int *index, int *flag, cadre_status_t *status)
{
    const char *fn = "cadre_testany";
    if (!flag)
        return cadre__error(CADRE_ERR_ARG, "%s: flag is NULL", fn);
    struct cadre_request *stack[RS_STACK], **rs;
    int rc, live;
    if (!(rs = rs_get(fn, n, stack, &rc)))
        return rc;
    rc = check_all(fn, n, reqs, index, "index", rs, &live);
    if (rc != CADRE_SUCCESS || !live) {
        if (rc == CADRE_SUCCESS) {
            *index = CADRE_UNDEFINED;
            *flag = 1;
            empty_status(status);
        }
        rs_put(rs, stack);
        return rc;
    }
    int i = first_done(n, rs);
    if (i < 0) {
        cadre__p2p_progress();
        i = first_done(n, rs);
    }
    if (i < 0) {
        *index = CADRE_UNDEFINED;
        *flag = 0;
        rs_put(rs, stack);
        return CADRE_SUCCESS;
    }
    struct cadre_request *r = rs[i];
    rs_put(rs, stack);
    *index = i;
    *flag = 1;
    return complete_one(fn, reqs, i, r, status);
}

int cadre_testall(int n, cadre_request_t reqs[], int *flag, cadre_status_t statuses[])
{
    const char *fn = "cadre_testall";
    if (!flag)
        return cadre__error(CADRE_ERR_ARG, "%s: flag is NULL", fn);
    struct cadre_request *stack[RS_STACK], **rs;
    int rc, live;
    if (!(rs = rs_get(fn, n, stack, &rc)))
        return rc;
    rc = check_all(fn, n, reqs, NULL, NULL, rs, &live);
    if (rc != CADRE_SUCCESS) {
        rs_put(rs, stack);
        return rc;
    }
    int all = 1;
    for (int pass = 0; pass < 2; pass++) {
        all = 1;
        for (int i = 0; i < n && all; i++)
            all = !rs[i] || is_done(rs[i]);
        if (all || pass)
            break;
        cadre__p2p_progress();
    }
    rs_put(rs, stack);
    if (!all) {
        *flag = 0;
        return CADRE_SUCCESS;
    }
    *flag = 1;
    /* Every one is complete: waitall's loop waits for none of them. */
    return cadre__p2p_complete_all(fn, n, reqs, statuses);
}

/* cadre_waitany's condition (cadre__p2p_wait_until), lock not held. */
struct any_wait {
    int n;
    struct cadre_request **rs;
};

static int any_ready(void *arg)
{
    const struct any_wait *a = arg;
    return first_done(a->n, a->rs) >= 0;
}

/* The latest time any of the requests moved: waitany fails for CADRE_TIMEOUT
 * only when none of them has moved for that long. */
static double any_activity(void *arg)
{
    const struct any_wait *a = arg;
    double t = 0;
    for (int i = 0; i < a->n; i++)
        if (a->rs[i] && a->rs[i]->last_activity > t)
            t = a->rs[i]->last_activity;
    return t;
}

/* None of them moved for CADRE_STUCK_WARN: the warning of the first one
 * (the request CADRE_TIMEOUT would fail), as cadre_wait on it gives. */
static void any_stuck(void *arg, double secs)
{
    const struct any_wait *a = arg;
    for (int i = 0; i < a->n; i++) {
        if (a->rs[i]) {
            cadre__p2p_stuck(a->rs[i], secs);
            return;
        }
    }
}

int cadre_waitany(int n, cadre_request_t reqs[], int *index, cadre_status_t *status)
{
    const char *fn = "cadre_waitany";
    struct cadre_request *stack[RS_STACK], **rs;
    int rc, live;
    if (!(rs = rs_get(fn, n, stack, &rc)))
        return rc;
    rc = check_all(fn, n, reqs, index, "index", rs, &live);
    if (rc != CADRE_SUCCESS || !live) {
        if (rc == CADRE_SUCCESS) {
            *index = CADRE_UNDEFINED;
            empty_status(status);
        }
        rs_put(rs, stack);
        return rc;
    }
    int i = first_done(n, rs);
    if (i < 0) {
        cadre__p2p_progress();
        i = first_done(n, rs);
    }
    /* A device operation: cadre_wait does not block the host for it, nor
     * does this (the first one in the array, as nothing is complete). */
    if (cadre__gpu_enabled()) {
        for (int k = 0; i < 0 && k < n; k++)
            if (rs[k] && cadre__gpu.is_device_req(rs[k]))
                i = k;
    }
    if (i < 0) {
        int first = 0;
        while (!rs[first])
            first++;
        double now = cadre__now();
        for (int k = 0; k < n; k++)
            if (rs[k] && rs[k]->last_activity == 0)
                rs[k]->last_activity = now;
        struct any_wait a = {n, rs};
        struct cadre_p2p_wait w = {.ready = any_ready, .activity = any_activity, .arg = &a,
                                   .peer_world = live == 1 ? rs[first]->peer_world : -1,
                                   .stuck = any_stuck};
        cadre__p2p_enter(rs[first], fn);
        rc = cadre__p2p_wait_until(&w, 0, 1);
        cadre__state_leave();
        i = first_done(n, rs);
        if (rc != CADRE_SUCCESS && i < 0) {
            /* None moved for CADRE_TIMEOUT: the first one fails, as
             * cadre_wait fails it (diagnosed, abandoned, released). */
            struct cadre_request *r = rs[first];
            rs_put(rs, stack);
            reqs[first] = CADRE_REQUEST_NULL;
            cadre__req_handle_end(r);
            if (status)
                *status = (cadre_status_t){.source = r->peer, .tag = r->tag,
                                           .error = CADRE_ERR_TIMEOUT};
            *index = first;
            cadre__p2p_timed_out(r, fn);
            int shown = cadre__error_was_shown();
            char msg[512];
            cadre__p2p_name_failure(fn, first, msg, sizeof msg);
            cadre__error(CADRE_ERR_TIMEOUT, "%s", msg);
            /* Its diagnosis block is out already: the same event. */
            if (shown)
                cadre__error_shown();
            return CADRE_ERR_TIMEOUT;
        }
    }
    struct cadre_request *r = rs[i];
    rs_put(rs, stack);
    *index = i;
    return complete_one(fn, reqs, i, r, status);
}

/* ---- abandoning a request whose wait timed out ---------------------------------- */

static void drop_outq_entries(struct cadre_request *r)
{
    if (r->peer_world < 0 || r->peer_world == cadre__proc.rank)
        return;
    struct cadre_peer *p = &cadre__eng.peers[r->peer_world];
    struct outq_entry **pp = &p->outq, *last = NULL;
    while (*pp) {
        struct outq_entry *q = *pp;
        if (q->req == r) {
            *pp = q->next;
            eng_outstanding_add(-1);
            free(q);
        } else {
            last = q;
            pp = &q->next;
        }
    }
    p->outq_tail = last;
}

void cadre__p2p_abandon(struct cadre_request *r)
{
    /* Whatever becomes of it, the user no longer holds it. */
    cadre__req_handle_end(r);
    /* Not while its sender may still write into the buffer (p2p_cma.c). */
    cadre__p2p_cma_settle(r);
    /* A send whose data its transport carried with the RTS, which no
     * receive took yet: withdrawn (NACK, rreq 0), so that the receiver's
     * transport drops it and this one stops reading the buffer (p2p.h). */
    if (r->kind == REQ_SEND && r->state == RS_WAIT_CTS && r->later) {
        struct cadre_p2p_hdr n = {.type = CADRE_P2P_NACK, .ctx = r->ctx, .sreq = r->id};
        cadre__p2p_post(r->peer_world, &n, NULL, NULL);
    }
    /* Nor while a transport reads its buffer (CADRE_P2P_LATER). */
    cadre__p2p_later_settle(r);
    if (atomic_load(&r->done)) {
        cadre__req_free(r);
        return;
    }
    if (r->user)
        eng_outstanding_add(-1);
    r->user = 0;
    if (r->cancel) {
        r->cancel(r);
        cadre__req_free(r);
        return;
    }
    switch (r->state) {
    case RS_WAIT_CTS:
        /* The RTS is out: answer a late CTS with NACK, then free. */
        r->abandoned = 1;
        return;
    case RS_STREAM: {
        drop_outq_entries(r);
        struct cadre_p2p_hdr n = {.type = CADRE_P2P_NACK, .sreq = r->id, .rreq = r->remote};
        cadre__p2p_post(r->peer_world, &n, NULL, NULL);
        break;
    }
    case RS_POSTED: cadre__p2p_unpost(r); break;
    default: drop_outq_entries(r); break;
    }
    cadre__req_free(r);
}
