/*
 * device_op.c - the device operations of device_proxy.c's design: making
 * one (its events, flag and stream), the stream's wait for the proxy, the
 * user request of a nonblocking device call and cadre_wait on it, and the
 * release of a communicator's device state. device_p2p.c (point-to-point) and
 * the collectives' device executor (device_coll.c, device_direct_call.c) make ops here
 * and hand them to the proxy (cadre__gpu_submit).
 *
 * May call: this folder, p2p/ (the engine and requests), runtime/.
 */
#include "config.h"

#if HAVE_CUDA
#include <cuda_runtime.h>
#include <stdlib.h>
#include <time.h>

#include "device/device_op.h"
#include "p2p/p2p_engine.h"

/* ---- operations -------------------------------------------------------------------- */

void cadre__gpu_op_unref(struct gpu_op *op)
{
    if (atomic_fetch_sub(&op->refs, 1) != 1)
        return;
    cadre__gpu_ev_put(op->ready);
    cadre__gpu_ev_put(op->done);
    if (op->watch_free)
        op->watch_free(op->watch_arg);
    free(op);
}

cadre_comm_t cadre__gpu_handle_of(struct cadre_comm *c)
{
    return cadre__comm_handle(c);
}

/* ---- the user request of a nonblocking device call ------------------------------- */
static int ureq_poll(struct cadre_request *r)
{
    struct gpu_op *op = r->priv;
    if (!atomic_load_explicit(&op->dev_done, memory_order_acquire))
        return 0;
    cadre__req_unlink_generic(r);
    op->status.error = op->error;
    r->status = op->status;
    if (op->error)
        cadre__req_complete(r, op->error, "%s", op->errmsg);
    else
        cadre__req_complete(r, CADRE_SUCCESS, NULL);
    return 1;
}

static void ureq_cancel(struct cadre_request *r)
{
    cadre__req_unlink_generic(r);
}

static void ureq_release(struct cadre_request *r)
{
    if (r->priv)
        cadre__gpu_op_unref(r->priv);
    r->priv = NULL;
}

int cadre__gpu_attach_request(struct gpu_op *op, cadre_request_t *req)
{
    struct cadre_request *r = cadre__req_new(REQ_GENERIC, op->fn);
    if (!r)
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory for a request", op->fn);
    cadre_request_t h;
    if (cadre__req_handle(r, &h) != CADRE_SUCCESS) {
        cadre__req_free(r);
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory for a request handle", op->fn);
    }
    r->comm = op->comm;
    r->peer = op->peer;
    r->tag = op->tag;
    r->priv = op;
    atomic_fetch_add(&op->refs, 1);
    r->poll = ureq_poll;
    r->cancel = ureq_cancel;
    r->release = ureq_release;
    r->last_activity = cadre__now();
    eng_lock();
    r->user = 1;
    eng_outstanding_add(1);
    cadre__req_wants_pt(r);
    r->next = cadre__eng.generic;
    if (r->next)
        r->next->prev = r;
    cadre__eng.generic = r;
    eng_unlock();
    cadre__p2p_kick();
    *req = h;
    return CADRE_SUCCESS;
}

int cadre__gpu_is_device_req(const struct cadre_request *r)
{
    return r->poll == ureq_poll;
}

int cadre__gpu_wait(struct cadre_request *r, cadre_status_t *status)
{
    if (r->poll != ureq_poll)
        return CADRE__GPU_NOT_MINE;
    struct gpu_op *op = r->priv;
    if (atomic_load(&r->done)) {
        int rc = r->error;
        if (status)
            *status = r->status;
        if (rc != CADRE_SUCCESS)
            cadre__error(rc, "%s", r->errmsg);
        cadre__req_free(r);
        return rc;
    }
    struct gpu_comm *gc = op->gc;
    cudaStream_t us = (cudaStream_t)gc->stream;
    cudaError_t e = cudaSuccess;
    int open = LAZY_OPEN;
    if (atomic_load(&op->lazy) &&
        atomic_compare_exchange_strong(&op->lazy, &open, LAZY_ENQUEUING)) {
        /* A CUDA IPC send nobody has ended: the stream waits for the
         * receiver's answer here (the flag stays the op's until `done`). */
        int wr = cadre__gpu_enqueue_wait(op, us);
        if (wr == CADRE_SUCCESS)
            e = cudaEventRecord(op->done, us);
        atomic_store(&op->lazy, LAZY_WAITER);
        if (wr != CADRE_SUCCESS) {
            eng_lock();
            cadre__p2p_abandon(r);
            eng_unlock();
            return wr;
        }
    } else if (open != LAZY_PROXY) {
        e = cudaStreamWaitEvent(us, op->done, 0);
    }
    if (status)
        *status = (cadre_status_t){.source = op->kind == OP_SEND ? -1 : op->peer,
                                   .tag = op->tag, .count = op->count};
    /* The proxy finishes the operation; a failure from now on becomes the
     * communicator's sticky error. */
    eng_lock();
    cadre__p2p_abandon(r);
    eng_unlock();
    if (e != cudaSuccess)
        return cadre__gpu_cuda_fail(e, "cadre_wait",
                                    "cudaStreamWaitEvent on the communicator's stream");
    return CADRE_SUCCESS;
}

void cadre__gpu_comm_free(struct cadre_comm *c)
{
    struct gpu_comm *g = c->gpu;
    if (!g)
        return;
    /* The proxy's ops point at the communicator: let them finish, for as
     * long as an operation may make no progress (CADRE_TIMEOUT, as
     * cadre_finalize's drain). Past that the communicator goes without
     * them: its device state stays theirs (leaked), and the proxy starts
     * none of them (g->orphaned). */
    double t0 = cadre__now(), limit = cadre__config_dbl(CADRE_CFG_TIMEOUT);
    while (atomic_load(&g->pending) > 0) {
        if (cadre__now() - t0 > limit) {
            char what[1024];
            atomic_store(&g->orphaned, 1);
            cadre__gpu_proxy_describe(g, what, sizeof what);
            CADRE_WARN(DEVICE,
                       "cadre_comm_free: communicator %p (context %u, rank %d of %d) still has "
                       "%d device operations pending after %g s (CADRE_TIMEOUT); freed without "
                       "them, its device state left to them: %s",
                       (void *)cadre__comm_handle(c), (unsigned)c->context_id, c->rank,
                       c->size, atomic_load(&g->pending), limit, what);
            c->gpu = NULL;
            return;
        }
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    if (g->direct_free)
        g->direct_free(g);
    if (g->internal)
        cudaStreamDestroy((cudaStream_t)g->internal);
    if (g->internal_recv)
        cudaStreamDestroy((cudaStream_t)g->internal_recv);
    free(g);
    c->gpu = NULL;
}

void cadre__gpu_world_free(void)
{
    struct gpu_comm *g = cadre__comm_world.gpu;
    /* Pending operations after cadre_finalize's drain (which warned): they
     * keep it. */
    if (g && atomic_load(&g->pending) == 0)
        cadre__gpu_comm_free(&cadre__comm_world);
}

/* ---- making an op -------------------------------------------------------------------- */
int cadre__gpu_comm_ready(const char *fn, struct cadre_comm *comm, struct gpu_comm **out)
{
    struct gpu_comm *gc = cadre__gpu_comm(comm);
    if (!gc)
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", fn);
    int ae = atomic_load(&gc->async_error);
    if (ae > 0)
        return cadre__error(ae, "%s: %s", fn, gc->async_msg);
    *out = gc;
    return CADRE_SUCCESS;
}

/* The common part: comm state, sticky error, events, flag, the stream. */
int cadre__gpu_op_new(const char *fn, struct cadre_comm *comm, int nonblocking, int recv_stream,
                      struct gpu_op **out, cudaStream_t *stream)
{
    struct gpu_comm *gc;
    CADRE_CHECK(cadre__gpu_comm_ready(fn, comm, &gc));
    struct gpu_op *op = calloc(1, sizeof *op);
    if (!op)
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", fn);
    op->fn = fn;
    op->comm = comm;
    op->gc = gc;
    atomic_init(&op->refs, 1);
    int rc;
    if ((rc = cadre__gpu_ev_get(&op->ready, fn)) != CADRE_SUCCESS ||
        (rc = cadre__gpu_ev_get(&op->done, fn)) != CADRE_SUCCESS ||
        !(op->flag = cadre__gpu_flag_get(fn, &rc)))
        goto fail;
    cudaStream_t us = (cudaStream_t)gc->stream;
    if (!nonblocking) {
        *stream = us;
    } else {
        void **is = recv_stream ? &gc->internal_recv : &gc->internal;
        if (!*is) {
            cudaStream_t ns;
            cudaError_t e = cudaStreamCreateWithFlags(&ns, cudaStreamNonBlocking);
            if (e != cudaSuccess) {
                rc = cadre__gpu_cuda_fail(e, fn, "cudaStreamCreate of the internal stream");
                goto fail;
            }
            *is = ns;
        }
        /* The internal stream starts after what is on the user's stream:
         * `done` serves as the order point until it is recorded for real. */
        cudaError_t e = cudaEventRecord(op->done, us);
        if (e == cudaSuccess)
            e = cudaStreamWaitEvent((cudaStream_t)*is, op->done, 0);
        if (e != cudaSuccess) {
            rc = cadre__gpu_cuda_fail(e, fn, "ordering after the communicator's stream");
            goto fail;
        }
        *stream = (cudaStream_t)*is;
    }
    *out = op;
    return CADRE_SUCCESS;
fail:
    cadre__gpu_flag_put(op->flag);
    cadre__gpu_op_unref(op);
    return rc;
}

void cadre__gpu_op_discard(struct gpu_op *op)
{
    cadre__gpu_stage_put(op->stage);
    cadre__gpu_flag_put(op->flag);
    if (op->work)
        op->work_drop(op->work);
    cadre__gpu_op_unref(op);
}

int cadre__gpu_enqueue_wait(struct gpu_op *op, cudaStream_t st)
{
    return cadre__gpu_stream_wait(op->flag->host, st, op->fn);
}

#else /* !HAVE_CUDA */
#include <stdlib.h>

#include "device/device_op.h"
#include "p2p/p2p_engine.h"

/* Without CUDA the hooks are compiled out (cadre__gpu_enabled() is 0), but
 * the comm layer still frees what set_stream made. */
void cadre__gpu_comm_free(struct cadre_comm *c)
{
    free(c->gpu);
    c->gpu = NULL;
}

void cadre__gpu_world_free(void)
{
    cadre__gpu_comm_free(&cadre__comm_world);
}

/* No peer sends this process a device-buffer descriptor: it publishes no GPU. */
void cadre__gpu_deliver(struct cadre_request *r, const struct cadre_p2p_hdr *h, int peer,
                        const void *data)
{
    (void)h;
    (void)data;
    cadre__req_complete(r, CADRE_ERR_UNSUPPORTED,
                        "%s: rank %d sent a device buffer by CUDA IPC to a process without CUDA",
                        r->op, peer);
}
#endif /* HAVE_CUDA */
