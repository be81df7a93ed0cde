/*
 * p2p_gpu_proxy.c - collectives and point-to-point on CUDA device buffers, with
 * the stream semantics of torch.distributed over NCCL (API.md, "Host and
 * device buffers").
 *
 * Design (first version: correct everywhere, staged through host memory).
 * Two paths step around staging where they apply, on the ops and the proxy
 * of this file: p2p/p2p_gpu.c (the point-to-point calls) sends device buffers to
 * another process of the node by CUDA IPC (op->ipc), and coll/coll_gpu_direct.c runs
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
 *   (cudaStreamWaitEvent).
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
 */
#include "config.h"

#if HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll/coll.h"
#include "p2p/p2p_gpu.h"
#include "p2p/p2p_engine.h"

/* ---- driver entry points (no link against libcuda: it is absent where no
 *      driver is installed, and libcadre must load there) ------------------ */
typedef CUresult (*pfn_ptr_attrs)(unsigned, CUpointer_attribute *, void **, CUdeviceptr);
typedef CUresult (*pfn_wait32)(CUstream, CUdeviceptr, cuuint32_t, unsigned);
static pfn_ptr_attrs p_ptr_attrs;
static pfn_wait32 p_wait32;
static int wait_mode; /* 1 = stream memory op, 0 = spin kernel */
static pthread_once_t sym_once = PTHREAD_ONCE_INIT;

static void load_syms(void)
{
    enum cudaDriverEntryPointQueryResult q;
    void *f = NULL;
    if (cudaGetDriverEntryPointByVersion("cuPointerGetAttributes", &f, 12000, cudaEnableDefault,
                                         &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
        p_ptr_attrs = (pfn_ptr_attrs)f;
    f = NULL;
    if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &f, 12000, cudaEnableDefault,
                                         &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
        p_wait32 = (pfn_wait32)f;
    cudaGetLastError();
    const char *m = cadre__config_str(CADRE_CFG_GPU_WAIT);
    wait_mode = p_wait32 && strcmp(m, "kernel") != 0;
    CADRE_INFO(DEVICE, "device streams wait with %s", wait_mode ? "cuStreamWaitValue32" :
                                                                  "a spin kernel");
}

/* ---- memory kinds ----------------------------------------------------------------- */
/* 1 for device or managed memory, with the allocation's range; 0 for host
 * memory (pageable or pinned). */
int cadre__gpu_classify(const void *p, char **base, size_t *size)
{
    pthread_once(&sym_once, load_syms);
    if (p_ptr_attrs) {
        CUpointer_attribute at[4] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                     CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                     CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                     CU_POINTER_ATTRIBUTE_RANGE_SIZE};
        unsigned int mtype = 0, managed = 0;
        CUdeviceptr start = 0;
        size_t sz = 0;
        void *data[4] = {&mtype, &managed, &start, &sz};
        if (p_ptr_attrs(4, at, data, (CUdeviceptr)(uintptr_t)p) != CUDA_SUCCESS)
            return 0;
        if (mtype != CU_MEMORYTYPE_DEVICE && !managed)
            return 0;
        *base = (char *)(uintptr_t)start;
        *size = sz ? sz : SIZE_MAX - (uintptr_t)p;
        return 1;
    }
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
        return 0;
    *base = (char *)(uintptr_t)p;
    *size = SIZE_MAX - (uintptr_t)p;
    return 1;
}

int cadre__gpu_cuda_fail(cudaError_t e, const char *fn, const char *what)
{
    cudaGetLastError();
    return cadre__error(CADRE_ERR_DEVICE, "%s: %s failed: %s", fn, what, cudaGetErrorString(e));
}

/* ---- pools: pinned staging, flags, events ----------------------------------------------- */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

static struct stage *stage_free;
static struct stage *stage_all[4096];
static int nstage_all;

struct stage *cadre__gpu_stage_get(size_t bytes, const char *fn, int *rc)
{
    size_t cap = 4096;
    while (cap < bytes)
        cap <<= 1;
    pthread_mutex_lock(&pool_lock);
    for (struct stage **pp = &stage_free; *pp; pp = &(*pp)->next) {
        if ((*pp)->cap == cap) {
            struct stage *s = *pp;
            *pp = s->next;
            pthread_mutex_unlock(&pool_lock);
            return s;
        }
    }
    struct stage *s = NULL;
    if (nstage_all < (int)(sizeof stage_all / sizeof *stage_all))
        s = calloc(1, sizeof *s);
    if (!s) {
        pthread_mutex_unlock(&pool_lock);
        *rc = cadre__error(CADRE_ERR_NOMEM, "%s: no memory for a staging buffer", fn);
        return NULL;
    }
    /* Mapped: the copy kernel of a CUDA IPC-capable receive reads it. */
    cudaError_t e =
        cudaHostAlloc((void **)&s->p, cap, cudaHostAllocMapped | cudaHostAllocPortable);
    if (e != cudaSuccess) {
        pthread_mutex_unlock(&pool_lock);
        free(s);
        *rc = cadre__gpu_cuda_fail(e, fn, "cudaHostAlloc of a staging buffer");
        return NULL;
    }
    s->cap = cap;
    stage_all[nstage_all++] = s;
    pthread_mutex_unlock(&pool_lock);
    return s;
}

void cadre__gpu_stage_put(struct stage *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&pool_lock);
    s->next = stage_free;
    stage_free = s;
    pthread_mutex_unlock(&pool_lock);
}

#define FLAGS_PER_BLOCK 1024
static struct flag *flag_free;
static void *flag_blocks[64];
static int nflag_blocks;

static struct flag *flag_get(const char *fn, int *rc)
{
    pthread_mutex_lock(&pool_lock);
    if (!flag_free) {
        unsigned int *words = NULL;
        struct flag *f = calloc(FLAGS_PER_BLOCK, sizeof *f);
        cudaError_t e = cudaErrorMemoryAllocation;
        if (f && nflag_blocks < 64)
            e = cudaHostAlloc((void **)&words, FLAGS_PER_BLOCK * sizeof *words,
                              cudaHostAllocMapped | cudaHostAllocPortable);
        if (e != cudaSuccess) {
            pthread_mutex_unlock(&pool_lock);
            free(f);
            *rc = cadre__gpu_cuda_fail(e, fn, "cudaHostAlloc of completion flags");
            return NULL;
        }
        flag_blocks[nflag_blocks++] = words;
        for (int i = 0; i < FLAGS_PER_BLOCK; i++) {
            f[i].host = &words[i];
            f[i].next = flag_free;
            flag_free = &f[i];
        }
    }
    struct flag *f = flag_free;
    flag_free = f->next;
    pthread_mutex_unlock(&pool_lock);
    *f->host = 0;
    return f;
}

void cadre__gpu_flag_put(struct flag *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&pool_lock);
    f->next = flag_free;
    flag_free = f;
    pthread_mutex_unlock(&pool_lock);
}

static cudaEvent_t ev_free[256];
static int nev_free;

static int ev_get(cudaEvent_t *ev, const char *fn)
{
    pthread_mutex_lock(&pool_lock);
    if (nev_free) {
        *ev = ev_free[--nev_free];
        pthread_mutex_unlock(&pool_lock);
        return CADRE_SUCCESS;
    }
    pthread_mutex_unlock(&pool_lock);
    cudaError_t e = cudaEventCreateWithFlags(ev, cudaEventDisableTiming);
    return e == cudaSuccess ? CADRE_SUCCESS : cadre__gpu_cuda_fail(e, fn, "cudaEventCreate");
}

static void ev_put(cudaEvent_t ev)
{
    if (!ev)
        return;
    pthread_mutex_lock(&pool_lock);
    if (nev_free < 256) {
        ev_free[nev_free++] = ev;
        ev = NULL;
    }
    pthread_mutex_unlock(&pool_lock);
    if (ev)
        cudaEventDestroy(ev);
}

/* ---- operations -------------------------------------------------------------------- */

void cadre__gpu_op_unref(struct gpu_op *op)
{
    if (atomic_fetch_sub(&op->refs, 1) != 1)
        return;
    ev_put(op->ready);
    ev_put(op->done);
    free(op);
}

cadre_comm_t cadre__gpu_handle_of(struct cadre_comm *c)
{
    return cadre__comm_handle(c);
}

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
        rc = cadre__sched_start(op->s, &op->hreq);
        free(op->s);
        op->s = NULL;
    } else if (op->ipc) {
        /* CUDA IPC: the data is ready in the user's buffer; the receiver
         * copies it from there and answers once its copy has finished. */
        eng_lock();
        rc = cadre__gpu_ipc_post_answer_recv(op->peer_world, op->desc.id, &op->ack, &op->ctl);
        if (rc == CADRE_SUCCESS) {
            rc = cadre__gpu_ipc_post_desc(op->comm, op->peer_world, op->tag, &op->desc);
            if (rc != CADRE_SUCCESS) {
                cadre__p2p_unpost(op->ctl);
                eng_unlock();
                cadre__req_free(op->ctl);
                op->ctl = NULL;
                return rc;
            }
        }
        eng_unlock();
    } else {
        rc = cadre_isend(op->stage->p, op->count, op->dt, op->peer, op->tag,
                         cadre__gpu_handle_of(op->comm), &op->hreq);
    }
    return rc;
}

/* A receive that could take a descriptor, its host part over: what the copy
 * kernel on its stream is to copy. */
static void fill_slot(struct gpu_op *op, int rc, const cadre_status_t *st)
{
    const void *src = NULL;
    size_t n = 0;
    cadre__gpu_ipc_unwatch(op->stage->p);
    if (atomic_load(&op->got_desc)) {
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
            if (e == cudaSuccess) {
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
            } else {
                rc = cadre_test(&op->hreq, &done, &st);
            }
            if (done || rc != CADRE_SUCCESS) {
                moved = 1;
                op->status = st;
                if (rc != CADRE_SUCCESS)
                    cadre__gpu_record_failure(op, rc, cadre_last_error());
                if (op->ipc == 2)
                    fill_slot(op, rc, &st);
                release_stream(op);
            }
        }
        if (op->state == ST_WAIT_DEVICE) {
            cudaError_t e = op->done ? cudaEventQuery(op->done) : cudaSuccess;
            if (e == cudaSuccess || e != cudaErrorNotReady) {
                if (e != cudaSuccess) {
                    cudaGetLastError();
                    if (!op->error)
                        cadre__gpu_record_failure(op, CADRE_ERR_DEVICE, cudaGetErrorString(e));
                }
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

static void *proxy_main(void *arg)
{
    (void)arg;
    cudaSetDevice(cadre__proc.device);
    struct gpu_op *list = NULL, **tail = &list;
    unsigned idle = 0;
    for (;;) {
        pthread_mutex_lock(&q_lock);
        while (!list && !q_head && !proxy_stop)
            pthread_cond_wait(&q_cond, &q_lock);
        if (q_head) {
            *tail = q_head;
            q_head = q_tail = NULL;
        }
        int stop = proxy_stop;
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
        for (int i = 0; i < nstage_all; i++) {
            cudaFreeHost(stage_all[i]->p);
            free(stage_all[i]);
        }
        nstage_all = 0;
        stage_free = NULL;
        while (nev_free)
            cudaEventDestroy(ev_free[--nev_free]);
        if (copy_stream)
            cudaStreamDestroy(copy_stream);
        copy_stream = NULL;
    }
    /* No op is left that could use a mapping: the world's workspace and
     * the CUDA IPC mappings go (other communicators' went at their free). */
    if (atomic_load(&q_live) == 0) {
        if (cadre__comm_world.gpu)
            cadre__gpu_direct_free(cadre__comm_world.gpu);
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
    atomic_fetch_add(&cadre__eng.outstanding, 1);
    r->next = cadre__eng.generic;
    if (r->next)
        r->next->prev = r;
    cadre__eng.generic = r;
    eng_unlock();
    cadre__p2p_kick();
    *req = h;
    return CADRE_SUCCESS;
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
    cudaError_t e = cudaStreamWaitEvent((cudaStream_t)gc->stream, op->done, 0);
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
    /* The proxy's ops point at the communicator: let them finish. */
    while (atomic_load(&g->pending) > 0) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    cadre__gpu_direct_free(g);
    if (g->internal)
        cudaStreamDestroy((cudaStream_t)g->internal);
    if (g->internal_recv)
        cudaStreamDestroy((cudaStream_t)g->internal_recv);
    free(g);
    c->gpu = NULL;
}

/* ---- making an op -------------------------------------------------------------------- */
/* The common part: comm state, sticky error, events, flag, the stream. */
int cadre__gpu_op_new(const char *fn, struct cadre_comm *comm, int nonblocking, int recv_stream,
                      struct gpu_op **out, cudaStream_t *stream)
{
    struct gpu_comm *gc = cadre__gpu_comm(comm);
    if (!gc)
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", fn);
    int ae = atomic_load(&gc->async_error);
    if (ae > 0)
        return cadre__error(ae, "%s: %s", fn, gc->async_msg);
    struct gpu_op *op = calloc(1, sizeof *op);
    if (!op)
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", fn);
    op->fn = fn;
    op->comm = comm;
    op->gc = gc;
    atomic_init(&op->refs, 1);
    int rc;
    if ((rc = ev_get(&op->ready, fn)) != CADRE_SUCCESS ||
        (rc = ev_get(&op->done, fn)) != CADRE_SUCCESS ||
        !(op->flag = flag_get(fn, &rc)))
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
    if (op->s) {
        cadre__sched_free(op->s);
        free(op->s);
    }
    cadre__gpu_op_unref(op);
}

int cadre__gpu_enqueue_wait(struct gpu_op *op, cudaStream_t st)
{
    if (wait_mode) {
        CUresult r = p_wait32((CUstream)st, (CUdeviceptr)(uintptr_t)op->flag->host, 1,
                              CU_STREAM_WAIT_VALUE_GEQ);
        if (r == CUDA_SUCCESS)
            return CADRE_SUCCESS;
        CADRE_INFO(DEVICE, "cuStreamWaitValue32 failed (%d): streams wait with a spin kernel",
                   (int)r);
        wait_mode = 0;
    }
    int e = cadre__gpu_spin_wait(op->flag->host, 1, st);
    return e == 0 ? CADRE_SUCCESS
                  : cadre__gpu_cuda_fail((cudaError_t)e, op->fn, "the stream wait kernel");
}

/* ---- collectives ---------------------------------------------------------------------- */
struct rng {
    char *lo, *hi;
    int rd, wr;
};

static int rng_cmp(const void *a, const void *b)
{
    const struct rng *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int add_rng(struct rng **v, int *n, int *cap, const void *p, size_t bytes, int rd, int wr)
{
    if (!bytes || !p)
        return CADRE_SUCCESS;
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 32;
        struct rng *nv = realloc(*v, (size_t)nc * sizeof *nv);
        if (!nv)
            return CADRE_ERR_NOMEM;
        *v = nv;
        *cap = nc;
    }
    (*v)[(*n)++] = (struct rng){(char *)p, (char *)p + bytes, rd, wr};
    return CADRE_SUCCESS;
}

static int in_tmp(const struct coll_sched *s, const char *lo, const char *hi)
{
    for (int i = 0; i < s->ntmp; i++) {
        const char *t = s->tmp[i];
        if (lo >= t && hi <= t + malloc_usable_size(s->tmp[i]))
            return 1;
    }
    return 0;
}

/* Device intervals of a schedule, each with its place in staging. */
struct dint {
    char *lo, *hi;
    int in, out; /* copy in before (D2H), out after (H2D) */
    size_t off;
};

static char *remap(const struct dint *d, int nd, const void *p, char *stage)
{
    const char *c = p;
    for (int i = 0; i < nd; i++)
        if (c >= d[i].lo && c < d[i].hi)
            return stage + d[i].off + (size_t)(c - d[i].lo);
    return (char *)p;
}

int cadre__gpu_sched(struct coll_sched *s, cadre_request_t *req)
{
    const char *fn = s->op_name;
    struct rng *v = NULL;
    int n = 0, cap = 0, rc = CADRE_SUCCESS;
    for (int i = 0; i < s->nsteps && rc == CADRE_SUCCESS; i++) {
        struct coll_step *st = &s->steps[i];
        switch (st->kind) {
        case CS_SEND: rc = add_rng(&v, &n, &cap, st->src, st->n, 1, 0); break;
        case CS_RECV: rc = add_rng(&v, &n, &cap, st->dst, st->n, 0, 1); break;
        case CS_REDUCE:
            rc = add_rng(&v, &n, &cap, st->dst, st->n * s->elsize, 1, 1);
            if (rc == CADRE_SUCCESS)
                rc = add_rng(&v, &n, &cap, st->src, st->n * s->elsize, 1, 0);
            break;
        case CS_COPY:
            rc = add_rng(&v, &n, &cap, st->dst, st->n, 0, 1);
            if (rc == CADRE_SUCCESS)
                rc = add_rng(&v, &n, &cap, st->src, st->n, 1, 0);
            break;
        }
    }
    if (rc == CADRE_SUCCESS && s->scale_buf)
        rc = add_rng(&v, &n, &cap, s->scale_buf, s->scale_n * s->elsize, 1, 1);
    if (rc != CADRE_SUCCESS) {
        free(v);
        return CADRE__GPU_NOT_MINE; /* the host path reports ENOMEM as it must */
    }
    qsort(v, (size_t)n, sizeof *v, rng_cmp);

    /* Merge into intervals; classify each (splitting at allocation ends). */
    struct dint *d = NULL;
    int nd = 0, host_user = 0;
    size_t total = 0;
    for (int i = 0; i < n;) {
        char *lo = v[i].lo, *hi = v[i].hi, *wfront = lo;
        int rd = 0;
        int j = i;
        for (; j < n && v[j].lo <= hi; j++) {
            if (v[j].hi > hi)
                hi = v[j].hi;
            rd |= v[j].rd;
            if (v[j].wr && v[j].lo <= wfront && v[j].hi > wfront)
                wfront = v[j].hi;
        }
        int wr = 0;
        for (int k = i; k < j; k++)
            wr |= v[k].wr;
        i = j;
        if (in_tmp(s, lo, hi))
            continue;
        while (lo < hi) {
            char *base;
            size_t size;
            if (!cadre__gpu_classify(lo, &base, &size)) {
                host_user = 1;
                break;
            }
            char *end = (size_t)(hi - base) > size ? base + size : hi;
            if (end <= lo)
                end = hi;
            struct dint *nd2 = realloc(d, (size_t)(nd + 1) * sizeof *d);
            if (!nd2) {
                free(v);
                free(d);
                cadre__sched_free(s);
                return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", fn);
            }
            d = nd2;
            d[nd] = (struct dint){lo, end, rd || wfront < end || end != hi, wr, total};
            total += ((size_t)(end - lo) + 255) & ~(size_t)255;
            nd++;
            lo = end;
        }
    }
    free(v);
    if (!nd) {
        free(d);
        return CADRE__GPU_NOT_MINE;
    }
    if (host_user) {
        free(d);
        cadre__sched_free(s);
        return cadre__error(CADRE_ERR_ARG,
                            "%s: rank %d passed a host buffer and a device buffer; one call takes "
                            "buffers of one kind",
                            fn, s->comm->rank);
    }

    struct gpu_op *op;
    cudaStream_t X;
    rc = cadre__gpu_op_new(fn, s->comm, req != NULL, 0, &op, &X);
    if (rc != CADRE_SUCCESS) {
        free(d);
        cadre__sched_free(s);
        return rc;
    }
    op->kind = OP_SCHED;
    op->peer = -1;
    op->tag = s->tag;
    if (!(op->stage = cadre__gpu_stage_get(total, fn, &rc)) || !(op->s = malloc(sizeof *op->s))) {
        if (rc == CADRE_SUCCESS)
            rc = cadre__error(CADRE_ERR_NOMEM, "%s: no memory", fn);
        free(d);
        cadre__sched_free(s);
        cadre__gpu_op_discard(op);
        return rc;
    }
    char *stg = op->stage->p;
    for (int i = 0; i < s->nsteps; i++) {
        struct coll_step *st = &s->steps[i];
        st->dst = remap(d, nd, st->dst, stg);
        st->src = remap(d, nd, st->src, stg);
    }
    if (s->scale_buf)
        s->scale_buf = remap(d, nd, s->scale_buf, stg);
    *op->s = *s;
    memset(s, 0, sizeof *s);

    cudaError_t e = cudaSuccess;
    for (int i = 0; i < nd && e == cudaSuccess; i++)
        if (d[i].in)
            e = cudaMemcpyAsync(stg + d[i].off, d[i].lo, (size_t)(d[i].hi - d[i].lo),
                                cudaMemcpyDeviceToHost, X);
    if (e == cudaSuccess)
        e = cudaEventRecord(op->ready, X);
    if (e != cudaSuccess) {
        free(d);
        rc = cadre__gpu_cuda_fail(e, fn, "enqueueing the copies to staging");
        cadre__gpu_op_discard(op);
        return rc;
    }
    /* From here the stream holds our wait: the op must reach the proxy. */
    rc = cadre__gpu_enqueue_wait(op, X);
    for (int i = 0; i < nd && e == cudaSuccess && rc == CADRE_SUCCESS; i++)
        if (d[i].out)
            e = cudaMemcpyAsync(d[i].lo, stg + d[i].off, (size_t)(d[i].hi - d[i].lo),
                                cudaMemcpyHostToDevice, X);
    free(d);
    if (e == cudaSuccess && rc == CADRE_SUCCESS)
        e = cudaEventRecord(op->done, X);
    if (rc == CADRE_SUCCESS && e != cudaSuccess)
        rc = cadre__gpu_cuda_fail(e, fn, "enqueueing the copies from staging");
    if (rc != CADRE_SUCCESS) {
        cadre__gpu_op_discard(op);
        return rc;
    }
    if (req && (rc = cadre__gpu_attach_request(op, req)) != CADRE_SUCCESS) {
        cadre__gpu_op_discard(op);
        return rc;
    }
    rc = cadre__gpu_submit(op);
    return rc;
}

#endif /* HAVE_CUDA */
