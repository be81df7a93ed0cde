/*
 * device_proxy.c - the proxy thread of the device-buffer path, which runs
 * collectives and point-to-point on CUDA device buffers with the stream semantics of torch.distributed over NCCL (API.md, "Host and
 * device buffers").
 *
 * Design (first version: correct everywhere, staged through host memory).
 * Two paths step around staging where they apply, on the ops and the proxy
 * of this file: device_p2p.c (the point-to-point calls) sends device buffers to
 * another process of the node by CUDA IPC (op->ipc), and device_direct_call.c runs
 * allreduce on one node with direct kernels (OP_DEVICE: all its work is on
 * the stream, the proxy only sees it end).
 *
 *   A device-buffer call never waits on the host for the device. It enqueues
 *   on a stream X (the communicator's stream for a blocking call; for a
 *   nonblocking call the communicator's internal stream, which first waits
 *   for an event recorded on the communicator's stream):
 *
 *       D2H copies of the device data the operation reads -> pinned staging
 *       event `ready`
 *       wait until flag == 1   (cuStreamWaitValue32 on a host-mapped word;
 *                               a one-thread spin kernel where stream memory
 *                               operations are unavailable, CADRE_GPU_WAIT)
 *       H2D copies of what the operation wrote <- pinned staging
 *       event `done`
 *
 *   and hands an op to the proxy, one thread per process. The proxy sees
 *   `ready` complete (cudaEventQuery, never a blocking CUDA call), runs the
 *   host operation on the staging buffers with the host engine (the very
 *   schedules and p2p protocols the host tests exercise), then stores 1 in
 *   the flag, which releases X; it sees `done` complete and recycles the
 *   staging memory, the flag and the events. Later work on X is ordered after
 *   the H2D copies, so it sees the result; the host never waited.
 *
 *   Ordering between ranks: a collective's schedule is built, and its tag
 *   (the communicator's collective sequence number) taken, in the calling
 *   thread at call time, so collectives match across ranks in program order
 *   however late the proxy starts them. A device receive is posted to the
 *   host engine at call time too (into staging: the engine never touches the
 *   user's buffer), so it matches in posting order. A device send can only be
 *   posted once its data has reached staging; the proxy posts device sends in
 *   call order (a send whose data is not ready holds back the later ones), so
 *   device sends keep their order among themselves. Limitation: a host-buffer
 *   send issued after a device-buffer send to the same rank with the same tag
 *   and communicator may overtake it.
 *
 *   Nonblocking calls return a generic request (polled by the engine) that
 *   completes when `done` has completed, so cadre_test reports completion on
 *   the device and cadre_wait_timeout blocks the host until then. cadre_wait
 *   only makes the communicator's stream wait for `done`
 *   (cudaStreamWaitEvent); for a nonblocking CUDA IPC send, which puts no
 *   wait on its stream (device_p2p.c), it enqueues the wait for the flag and
 *   `done` itself, unless the proxy ended the send first (op->lazy).
 *
 *   Deadlock: the proxy only polls; it never blocks on the device or on the
 *   calling threads, and the calling threads never block on the device
 *   (staging memory, flags and events come from pools grown on demand; the
 *   pools are freed at cadre_finalize only, since cudaFreeHost synchronizes
 *   the device). A stream blocked on a flag occupies no SM with
 *   cuStreamWaitValue32, so ranks sharing a GPU (cadrerun --ranks-per-gpu)
 *   each progress: what releases one rank's stream is that rank's proxy and
 *   the host engine, never another stream of the GPU. With the spin-kernel
 *   fallback each blocked stream holds one thread block; time slicing
 *   between the processes' contexts (or MPS) keeps the others running.
 *   Internal streams are created non-blocking so that they never wait for
 *   the legacy default stream; nonblocking receives have an internal stream
 *   of their own (a CUDA IPC isend waits for the peer's receive). As with
 *   NCCL, operations must be issued in the same order on every rank, and a
 *   receive enqueued before a send on the same stream waits for it on both
 *   sides (use the nonblocking calls); so does a CUDA IPC send enqueued
 *   before a receive.
 *
 *   Errors: a failure of the host operation still stores the flag (the
 *   stream must not hang; the receive buffers are then undefined), is logged
 *   once, completes the request with its status, and becomes the
 *   communicator's sticky error: the next device-buffer call on it returns
 *   that status with the message.
 *
 * Where the parts are: this file holds the proxy thread (it starts the host
 * operation of each op once its `ready` event has completed, releases the
 * stream, recycles the op at `done`); device_op.c makes ops, their user
 * requests and cadre_wait on them; device_p2p.c the point-to-point calls;
 * device_coll.c the collectives' schedules on staging (an op's work,
 * started through op->work_start); device_mem.c the memory kinds, pools and
 * stream waits.
 *
 * May call: this folder (CUDA IPC, the pools), p2p/ (the engine and
 * requests), runtime/.
 */
#include "config.h"

#if HAVE_CUDA
#include <cuda_runtime.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device/device_op.h"
#include "p2p/p2p_engine.h"


/* ---- the proxy thread ------------------------------------------------------------- */
static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cond = PTHREAD_COND_INITIALIZER;
static struct gpu_op *q_head, *q_tail; /* handed over, not yet seen by the proxy */
static _Atomic int q_live;             /* ops not yet recycled */
static int proxy_running, proxy_stop;
static pthread_t proxy_tid;

void cadre__gpu_record_failure(struct gpu_op *op, int rc, const char *msg)
{
    op->error = rc;
    snprintf(op->errmsg, sizeof op->errmsg, "%s", msg);
    CADRE_WARN(DEVICE, "%s on device buffers failed: %s", op->fn, msg);
    int zero = 0;
    if (atomic_compare_exchange_strong(&op->gc->async_error, &zero, -1)) {
        snprintf(op->gc->async_msg, sizeof op->gc->async_msg, "an earlier %s failed: %s", op->fn,
                 msg);
        atomic_store(&op->gc->async_error, rc);
    }
}

static void release_stream(struct gpu_op *op)
{
    if (op->flag)
        __atomic_store_n(op->flag->host, 1u, __ATOMIC_RELEASE);
    op->state = ST_WAIT_DEVICE;
}

static int start_host_op(struct gpu_op *op)
{
    int rc;
    if (op->kind == OP_SCHED) {
        rc = op->work_start(op->work, &op->hreq);
        op->work = NULL;
    } else if (op->ipc) {
        /* CUDA IPC: the data is ready in the user's buffer; the receiver
         * copies it from there and answers once its copy has finished. */
        eng_lock();
        rc = cadre__gpu_ipc_post_answer_recv(op->peer_world, op->desc.id, &op->ack, &op->ctl);
        if (rc == CADRE_SUCCESS) {
            rc = cadre__gpu_ipc_post_desc(op->comm, op->peer_world, op->tag, op->dt,
                                          &op->desc);
            if (rc != CADRE_SUCCESS) {
                cadre__p2p_unpost(op->ctl);
                eng_unlock();
                cadre__req_free(op->ctl);
                op->ctl = NULL;
                return rc;
            }
        }
        eng_unlock();
    } else if (op->gdr == 1) {
        /* Its stream has reached it: UCX reads the user's buffer itself
         * (device_p2p.c); the stream waits until UCX has. */
        rc = cadre__p2p_isend_device(op->dbuf, op->count, op->dt, op->peer, op->tag,
                                     cadre__gpu_handle_of(op->comm), &op->hreq);
    } else {
        rc = cadre_isend(op->stage->p, op->count, op->dt, op->peer, op->tag,
                         cadre__gpu_handle_of(op->comm), &op->hreq);
    }
    return rc;
}

/* A receive that could take a descriptor or a pulled message into the
 * user's buffer, its host part over: what the copy kernel on its stream is
 * to copy. */
static void fill_slot(struct gpu_op *op, int rc, const cadre_status_t *st)
{
    const void *src = NULL;
    size_t n = 0;
    if (op->ipc == 2)
        cadre__gpu_ipc_unwatch(op->stage->p);
    if (op->landed) {
        /* In the user's buffer already (op->gdr): nothing to copy. */
    } else if (op->ipc == 2 && atomic_load(&op->got_desc)) {
        void *p = NULL;
        int mr = rc == CADRE_SUCCESS ? cadre__gpu_ipc_map(op->peer_world, &op->desc, op->fn, &p)
                                     : rc;
        if (mr == CADRE_SUCCESS) {
            src = (const char *)p + op->desc.offset;
            n = op->desc.bytes < op->cap ? op->desc.bytes : op->cap;
        } else if (rc == CADRE_SUCCESS) {
            cadre__gpu_record_failure(op, mr, cadre_last_error());
        }
        op->ack = mr;
    } else if (rc == CADRE_SUCCESS) {
        src = op->stage->p;
        n = st->count * cadre_datatype_size(op->dt);
    }
    op->slot->src = src;
    op->slot->n = n;
}

static cudaStream_t copy_stream; /* the proxy's own, for OP_HOSTRECV */

/* OP_HOSTRECV: copies the sender's data into the user's host buffer (on the
 * proxy's own stream, which waits for nothing else), completes the receive
 * and answers the sender. */
static void host_recv_run(struct gpu_op *op)
{
    struct cadre_request *r = op->host_r;
    size_t n = op->desc.bytes < r->bytes ? op->desc.bytes : r->bytes;
    void *p = NULL;
    int rc = cadre__gpu_ipc_map(op->peer_world, &op->desc, r->op, &p);
    cudaError_t e = cudaSuccess;
    if (rc == CADRE_SUCCESS && n) {
        if (!copy_stream)
            e = cudaStreamCreateWithFlags(&copy_stream, cudaStreamNonBlocking);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(r->buf, (char *)p + op->desc.offset, n, cudaMemcpyDeviceToHost,
                                copy_stream);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(copy_stream);
        if (e != cudaSuccess)
            rc = cadre__gpu_cuda_fail(e, r->op, "the copy from the sender's device buffer");
    }
    char msg[256] = "";
    if (rc != CADRE_SUCCESS)
        snprintf(msg, sizeof msg, "%s", cadre_last_error());
    op->ack = rc;
    eng_lock();
    if (rc != CADRE_SUCCESS)
        cadre__req_complete(r, rc, "%s", msg);
    else if (op->desc.bytes > r->bytes) {
        char got[64], room[64];
        cadre__elements_text(got, sizeof got, (size_t)op->desc.bytes, r->elsize);
        cadre__elements_text(room, sizeof room, r->bytes, r->elsize);
        cadre__req_complete(r, CADRE_ERR_TRUNCATE,
                            "%s: message of %s from rank %d tag %d is longer than the receive "
                            "buffer of %s",
                            r->op, got, r->status.source, r->status.tag, room);
    } else
        cadre__req_complete(r, CADRE_SUCCESS, NULL);
    op->host_r = NULL;
    rc = cadre__gpu_ipc_post_answer(op->peer_world, op->desc.id, &op->ack, &op->ctl);
    eng_unlock();
    cadre__p2p_kick(); /* a waiter may be asleep on its doorbell */
    if (rc != CADRE_SUCCESS)
        CADRE_WARN(DEVICE, "cannot answer rank %d's CUDA IPC send: %s", op->peer_world,
                   cadre_last_error());
    op->state = rc == CADRE_SUCCESS ? ST_ACK : ST_WAIT_DEVICE;
}

/* Recycles an op whose work is over; unlinks it (*pp = next). */
static void recycle(struct gpu_op **pp, struct gpu_op *op)
{
    *pp = op->next;
    cadre__gpu_stage_put(op->stage);
    cadre__gpu_flag_put(op->flag);
    op->stage = NULL;
    op->flag = NULL;
    atomic_fetch_sub(&op->gc->pending, 1);
    atomic_fetch_sub(&q_live, 1);
    atomic_store_explicit(&op->dev_done, 1, memory_order_release);
    cadre__gpu_op_unref(op);
}

/* One pass over the ops; returns whether anything moved. */
static int proxy_pass(struct gpu_op **list)
{
    int moved = 0, send_blocked = 0;
    for (struct gpu_op **pp = list; *pp;) {
        struct gpu_op *op = *pp;
        if (op->state == ST_WAIT_READY && !(op->kind == OP_SEND && send_blocked)) {
            cudaError_t e = cudaEventQuery(op->ready);
            if (e == cudaSuccess && atomic_load(&op->gc->orphaned)) {
                /* Its communicator was freed while it waited: the host
                 * operation would use it. */
                moved = 1;
                if (op->work) {
                    op->work_drop(op->work);
                    op->work = NULL;
                }
                cadre__gpu_record_failure(op, CADRE_ERR_ARG,
                                          "its communicator was freed before the operation "
                                          "could start");
                release_stream(op);
            } else if (e == cudaSuccess) {
                moved = 1;
                int rc = start_host_op(op);
                if (rc != CADRE_SUCCESS) {
                    cadre__gpu_record_failure(op, rc, cadre_last_error());
                    release_stream(op);
                } else {
                    op->state = ST_RUNNING;
                }
            } else if (e != cudaErrorNotReady) {
                cudaGetLastError();
                char m[200];
                snprintf(m, sizeof m, "the stream failed before the operation: %s",
                         cudaGetErrorString(e));
                cadre__gpu_record_failure(op, CADRE_ERR_DEVICE, m);
                release_stream(op);
            } else if (op->kind == OP_SEND) {
                send_blocked = 1;
            }
        }
        if (op->state == ST_RUNNING && op->kind == OP_HOSTRECV) {
            moved = 1;
            host_recv_run(op);
        } else if (op->state == ST_RUNNING) {
            int done = 0, rc = CADRE_SUCCESS;
            cadre_status_t st = {0};
            if (op->ipc == 1) {
                cadre__p2p_progress();
                if (atomic_load_explicit(&op->ctl->done, memory_order_acquire)) {
                    done = 1;
                    rc = op->ctl->error;
                    if (rc == CADRE_SUCCESS && op->ack != CADRE_SUCCESS)
                        rc = cadre__error(op->ack, "%s: rank %d could not take the data from this "
                                                   "device buffer (CUDA IPC; see its log)",
                                          op->fn, op->peer_world);
                    else if (rc != CADRE_SUCCESS)
                        cadre__error(rc, "%s", op->ctl->errmsg);
                    cadre__req_free(op->ctl);
                    op->ctl = NULL;
                }
            } else if (op->gdr == 2) {
                done = cadre__gpu_gdr_recv_test(op, &rc, &st);
            } else {
                rc = cadre_test(&op->hreq, &done, &st);
            }
            if (done || rc != CADRE_SUCCESS) {
                moved = 1;
                op->status = st;
                if (rc != CADRE_SUCCESS)
                    cadre__gpu_record_failure(op, rc, cadre_last_error());
                if (op->ipc == 2 || op->gdr == 2)
                    fill_slot(op, rc, &st);
                release_stream(op);
            }
        }
        if (op->state == ST_WAIT_DEVICE) {
            /* A nonblocking CUDA IPC send, answered: `done` counts only once
             * cadre_wait enqueued its wait (LAZY_WAITER). */
            int lazy = atomic_load(&op->lazy), open = LAZY_OPEN;
            cudaError_t e;
            if (lazy && atomic_compare_exchange_strong(&op->lazy, &open, LAZY_PROXY))
                e = cudaSuccess; /* nothing of it waits on the device */
            else if (lazy && open == LAZY_ENQUEUING)
                e = cudaErrorNotReady; /* cadre_wait is recording `done` */
            else
                e = op->done ? cudaEventQuery(op->done) : cudaSuccess;
            if (e == cudaErrorNotReady && op->watch && !op->error && op->watch(op, 0))
                moved = 1; /* failed: its waits are released, `done` follows */
            if (e == cudaSuccess || e != cudaErrorNotReady) {
                if (e != cudaSuccess) {
                    cudaGetLastError();
                    if (!op->error)
                        cadre__gpu_record_failure(op, CADRE_ERR_DEVICE, cudaGetErrorString(e));
                }
                if (op->watch && !op->error)
                    op->watch(op, 1);
                moved = 1;
                if (op->ipc == 2 && atomic_load(&op->got_desc)) {
                    /* The copy is over: the sender may go on. */
                    if (op->ack == CADRE_SUCCESS && e != cudaSuccess)
                        op->ack = CADRE_ERR_DEVICE;
                    eng_lock();
                    int rc = cadre__gpu_ipc_post_answer(op->peer_world, op->desc.id, &op->ack,
                                                        &op->ctl);
                    eng_unlock();
                    if (rc == CADRE_SUCCESS) {
                        op->state = ST_ACK;
                        pp = &op->next;
                        continue;
                    }
                    CADRE_WARN(DEVICE, "%s: cannot answer rank %d's CUDA IPC send: %s", op->fn,
                               op->peer_world, cadre_last_error());
                }
                recycle(pp, op);
                continue;
            }
        }
        if (op->state == ST_ACK) {
            cadre__p2p_progress();
            if (atomic_load_explicit(&op->ctl->done, memory_order_acquire)) {
                moved = 1;
                cadre__req_free(op->ctl);
                op->ctl = NULL;
                recycle(pp, op);
                continue;
            }
        }
        pp = &op->next;
    }
    return moved;
}

__thread int cadre__gpu_in_proxy;

/* cadre__gpu_proxy_describe's question (under q_lock) and answer. */
static pthread_mutex_t ask_lock = PTHREAD_MUTEX_INITIALIZER; /* one asker at a time */
static pthread_cond_t ask_cond = PTHREAD_COND_INITIALIZER;
static struct gpu_comm *ask_gc;
static int ask_answered;
static char ask_text[1024];

static const char *kind_name(int k)
{
    static const char *const names[] = {"collective schedule", "send", "receive",
                                        "host receive by CUDA IPC", "direct collective"};
    return k >= 0 && k < (int)(sizeof names / sizeof *names) ? names[k] : "?";
}

static const char *state_name(int s)
{
    static const char *const names[] = {
        "its data not yet ready on the stream", "its host operation running",
        "waiting for the device to finish", "waiting for the CUDA IPC answer to be sent"};
    return s >= 0 && s < (int)(sizeof names / sizeof *names) ? names[s] : "?";
}

/* The proxy's answer, q_lock held: the ops of ask_gc in list and q_head. */
static void answer(struct gpu_op *list)
{
    size_t at = 0, cap = sizeof ask_text;
    int n = 0, shown = 0;
    ask_text[0] = 0;
    for (int pass = 0; pass < 2; pass++)
        for (struct gpu_op *op = pass ? q_head : list; op; op = op->next) {
            if (op->gc != ask_gc)
                continue;
            n++;
            if (shown == 8 || at >= cap - 1)
                continue;
            int w = snprintf(ask_text + at, cap - at, "%s%s: %s (peer %d, tag %d), %s",
                             shown ? "; " : "", op->fn, kind_name(op->kind), op->peer, op->tag,
                             pass ? "not yet seen by the proxy" : state_name(op->state));
            at = w < 0 ? at : at + (size_t)w < cap ? at + (size_t)w : cap - 1;
            shown++;
        }
    if (n > shown && at < cap - 1)
        snprintf(ask_text + at, cap - at, "; and %d more", n - shown);
    if (!n)
        snprintf(ask_text, cap, "none left with the proxy");
    ask_answered = 1;
    ask_gc = NULL;
    pthread_cond_broadcast(&ask_cond);
}

void cadre__gpu_proxy_describe(struct gpu_comm *g, char *buf, size_t n)
{
    pthread_mutex_lock(&ask_lock);
    pthread_mutex_lock(&q_lock);
    if (!proxy_running) {
        snprintf(buf, n, "no proxy thread runs");
    } else {
        ask_gc = g;
        ask_answered = 0;
        pthread_cond_signal(&q_cond);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 1;
        while (!ask_answered &&
               pthread_cond_timedwait(&ask_cond, &q_lock, &until) == 0)
            ;
        if (ask_answered)
            snprintf(buf, n, "%s", ask_text);
        else
            snprintf(buf, n, "the proxy thread did not answer within 1 s (blocked in a call)");
        ask_gc = NULL;
    }
    pthread_mutex_unlock(&q_lock);
    pthread_mutex_unlock(&ask_lock);
}

static void *proxy_main(void *arg)
{
    (void)arg;
    cadre__gpu_in_proxy = 1;
    cudaSetDevice(cadre__proc.device);
    struct gpu_op *list = NULL, **tail = &list;
    unsigned idle = 0;
    for (;;) {
        pthread_mutex_lock(&q_lock);
        while (!list && !q_head && !proxy_stop && !ask_gc)
            pthread_cond_wait(&q_cond, &q_lock);
        if (q_head) {
            *tail = q_head;
            q_head = q_tail = NULL;
        }
        int stop = proxy_stop;
        if (ask_gc)
            answer(list);
        pthread_mutex_unlock(&q_lock);
        if (!list && stop)
            break;
        if (proxy_pass(&list)) {
            idle = 0;
        } else if (++idle > 64) {
            /* Nothing moved for a while (a long kernel ahead of the
             * operation): back off to 50 us between looks. */
            struct timespec ts = {0, idle > 1000 ? 50000 : 2000};
            nanosleep(&ts, NULL);
        } else {
            sched_yield();
        }
        tail = &list;
        while (*tail)
            tail = &(*tail)->next;
    }
    return NULL;
}

static void drain(void)
{
    double t0 = cadre__now(), limit = cadre__config_dbl(CADRE_CFG_TIMEOUT);
    while (atomic_load(&q_live) > 0) {
        if (cadre__now() - t0 > limit) {
            CADRE_WARN(DEVICE, "cadre_finalize: %d device operations still pending after %g s",
                       atomic_load(&q_live), limit);
            return;
        }
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

static void gpu_finalize(void)
{
    drain();
    pthread_mutex_lock(&q_lock);
    int running = proxy_running;
    proxy_stop = 1;
    pthread_cond_signal(&q_cond);
    pthread_mutex_unlock(&q_lock);
    if (running && atomic_load(&q_live) == 0) {
        pthread_join(proxy_tid, NULL);
        proxy_running = 0;
        cadre__gpu_pools_free();
        if (copy_stream)
            cudaStreamDestroy(copy_stream);
        copy_stream = NULL;
    }
    /* No op is left that could use a mapping: the world's device state (its
     * workspace, internal streams) and the CUDA IPC mappings go (other
     * communicators' went at their free). */
    if (atomic_load(&q_live) == 0) {
        cadre__gpu_comm_free(&cadre__comm_world);
        cadre__gpu_ipc_finalize();
    }
}

int cadre__gpu_submit(struct gpu_op *op)
{
    pthread_mutex_lock(&q_lock);
    if (!proxy_running) {
        proxy_stop = 0;
        if (pthread_create(&proxy_tid, NULL, proxy_main, NULL) != 0) {
            pthread_mutex_unlock(&q_lock);
            return cadre__error(CADRE_ERR_INTERNAL, "%s: cannot start the device proxy thread",
                                op->fn);
        }
        proxy_running = 1;
        cadre__at_finalize(gpu_finalize);
    }
    atomic_fetch_add(&q_live, 1);
    atomic_fetch_add(&op->gc->pending, 1);
    op->next = NULL;
    if (q_tail)
        q_tail->next = op;
    else
        q_head = op;
    q_tail = op;
    pthread_cond_signal(&q_cond);
    pthread_mutex_unlock(&q_lock);
    return CADRE_SUCCESS;
}

#endif /* HAVE_CUDA */
