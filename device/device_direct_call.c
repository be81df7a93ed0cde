/*
 * device_direct_call.c - a call of allreduce, reduce_scatter or allgather on
 * device buffers (the communicator's workspace, its pages and the proxy's
 * watch are device_direct_comm.c's, what both share device_direct_comm.h's),
 * for a communicator whose ranks all run on this node with GPUs that
 * reach each other (the same GPU, or peer access): one kernel per GPU, run
 * by the GPU's leader process, reads every rank's input and writes every
 * rank's output through CUDA IPC (device/device_direct.cu). With one GPU,
 * each byte is read once and written once: the floor. A communicator of one
 * rank copies on its stream.
 *
 * Why a leader: without MPS the contexts of processes sharing a GPU are
 * time-sliced. A kernel in each rank's context costs a context switch per
 * rank and call (about 75 us each on an H200, RESULTS.md), and a kernel
 * that waits for another process's kernel can wait for whole time slices, or
 * for ever if that process died. Here nothing in a kernel waits: the ranks
 * synchronise with stream memory operations on flags in host memory
 * (cuStreamWriteValue32 / cuStreamWaitValue32), which a context waits on
 * without holding the GPU, and which the host can read (diagnosis) and
 * write (release after a failure).
 *
 * Call s (the communicator's direct calls are numbered alike everywhere):
 *   every rank's host    publishes its buffers (IPC handle, offset) and
 *                        call in its page, ring slot s % RING;
 *   every rank's stream  writes ready = s (its earlier work is done);
 *   a leader's host      waits for every rank's slot s (the host blocks
 *                        until every rank has made the call, as for a host
 *                        collective; never on any stream), checks that the
 *                        calls agree, maps the buffers, sets taken = s;
 *   a leader's stream    waits for every ready >= s, runs the kernel on
 *                        its share of the elements, writes done = s;
 *   every rank's stream  waits for every leader's done >= s.
 * A rank reuses ring slot s % RING once every leader has taken s - RING.
 * The direct calls of a communicator are ordered on the device (each waits
 * for the previous one's end event), so a flag only grows.
 *
 * Pages: each rank's is a page of a memfd, mapped and registered with the
 * device by every rank (p2p_shm.c's fd passing); it outlives its owner.
 *
 * Failures: a rank whose call fails on the host (a peer died, a timeout,
 * calls that disagree, a buffer that cannot be exported) records the call
 * in its page's `failed` and sets its flags far ahead, so that no stream
 * waits for it. While a call's stream work is pending, the device proxy asks
 * watch(): a dead member's flags are set ahead the same way, and after
 * CADRE_TIMEOUT every flag is, with a diagnosis of who had not arrived. A
 * call that completes while any page records a failure at or before it fails
 * (the proxy records it for the request, or for the communicator's next
 * call), so no result of a broken call is ever reported as a success; the
 * communicator's later direct calls fail at once.
 *
 * Limits: buffers must have a legacy CUDA IPC handle (cudaMalloc; not
 * cudaMallocAsync pools, managed or VMM memory): such a call fails, naming
 * the rank. The first call on a communicator sets up (host collectives,
 * cudaHostRegister), and the first call with a new buffer maps it
 * (cudaIpcOpenMemHandle): both may wait for the device.
 *
 * May call: this folder (the proxy's ops, CUDA IPC, the kernels of
 * device_direct.cu), coll/ (the host collectives, the selection table),
 * p2p/ (the engine, fd passing), runtime/.
 */
#include "config.h"

#if HAVE_CUDA
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll/coll_call.h"
#include "device/device_coll.h"
#include "device/device_direct_comm.h"

/* Waits on the host until arrived(d, q, s) for every rank q in `who`
 * (nwho of them): a status naming the rank that failed, died or never came. */
static int host_wait(struct gpu_direct *d, const char *fn, uint32_t s, const int *who, int nwho,
                     int (*arrived)(const struct gpu_direct *, int, uint32_t), const char *what)
{
    double t0 = 0, limit = timeout_s();
    unsigned spins = 0;
    for (int k = 0; k < nwho; k++) {
        int q = who[k];
        while (!arrived(d, q, s)) {
            uint32_t at;
            int f = failed_rank(d, s, &at);
            if (f >= 0 && f != d->me)
                return cadre__error(CADRE_ERR_PEER, "%s: rank %d's direct device collective "
                                                    "#%u failed", fn, f, at);
            if (++spins < 64) {
                continue;
            } else if (spins < 1024) {
                sched_yield();
                continue;
            }
            if (!t0)
                t0 = cadre__now();
            if ((spins & 63) == 0) {
                cadre__p2p_progress();
                int dq = dead_rank(d);
                if (dq >= 0)
                    return cadre__error(CADRE_ERR_PEER, "%s: rank %d died; rank %d had not "
                                        "%s", fn, dq, q, what);
            }
            if (cadre__now() - t0 > limit)
                return cadre__error(CADRE_ERR_TIMEOUT, "%s: rank %d has not %s after %g s",
                                    fn, q, what, limit);
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
    return CADRE_SUCCESS;
}

static int slot_free(const struct gpu_direct *d, int q, uint32_t s)
{
    return cyc_ge(atomic_load(&d->page[q]->taken), s - RING);
}

static int published(const struct gpu_direct *d, int q, uint32_t s)
{
    return atomic_load_explicit(&d->page[q]->ring[s % RING].seq, memory_order_acquire) == s;
}

/* ---- a call ------------------------------------------------------------------------- */
/* CADRE_GPU_ALGO: staged, or auto (the direct path where it can run). */
static enum coll_algo choose_device(enum coll_kind k, size_t bytes, const char **why)
{
    static _Atomic int warned;
    const char *s = cadre__config_str(CADRE_CFG_GPU_ALGO);
    int staged = !strcmp(s, "staged");
    if (!staged && *s && strcmp(s, "auto") && !atomic_exchange(&warned, 1))
        CADRE_WARN(DEVICE, "CADRE_GPU_ALGO=%s: not auto or staged; auto used", s);
    return cadre__coll_select_device(k, bytes, staged, why);
}

static int is_device(const void *p, size_t bytes)
{
    char *base;
    size_t size;
    return cadre__gpu_classify(p, &base, &size) &&
           (size_t)((const char *)p - base) + bytes <= size;
}

#define OFF_READY 0
#define OFF_DONE 64
#define OFF_FAILED offsetof(struct gd_page, failed)
#define GATE_DIRECT_BLOCKS 2

/* The leader's host part: every rank's call, checked and mapped, into a. */
static int gather_calls(struct gpu_direct *d, const char *fn, uint32_t s,
                        const struct gd_call *mine, struct gpu_direct_args *a)
{
    int who[GPU_DIRECT_MAXR];
    for (int q = 0; q < d->n; q++)
        who[q] = q;
    int rc = host_wait(d, fn, s, who, d->n, published, "made this call");
    for (int q = 0; q < d->n && rc == CADRE_SUCCESS; q++) {
        const struct gd_call *c = &d->page[q]->ring[s % RING];
        if (c->mode != mine->mode || c->dt != mine->dt || c->op != mine->op ||
            c->count != mine->count) {
            rc = cadre__error(CADRE_ERR_MISMATCH, "%s: rank %d's direct device call #%u "
                              "differs (operation, datatype, op or count) from rank %d's", fn, q,
                              s, d->me);
            break;
        }
        void *pin = NULL, *pout = NULL;
        if (q == d->me) {
            pin = (void *)(uintptr_t)(c->in.base + c->in.offset);
            pout = (void *)(uintptr_t)(c->out.base + c->out.offset);
        } else if ((rc = cadre__gpu_ipc_map(d->world[q], &c->in, fn, &pin)) != CADRE_SUCCESS ||
                   (rc = cadre__gpu_ipc_map(d->world[q], &c->out, fn, &pout)) != CADRE_SUCCESS) {
            break;
        } else {
            /* mapping out may have closed in's mapping (cadre__gpu_ipc_map):
             * once more, and then out must still stand */
            if (cadre__gpu_ipc_mapped(d->world[q], &c->in) != pin &&
                (rc = cadre__gpu_ipc_map(d->world[q], &c->in, fn, &pin)) == CADRE_SUCCESS &&
                cadre__gpu_ipc_mapped(d->world[q], &c->out) != pout)
                rc = cadre__error(CADRE_ERR_DEVICE, "%s: rank %d's input and output buffers "
                                  "cannot be mapped here at once (CUDA IPC: one of them is "
                                  "already mapped)", fn, q);
            if (rc != CADRE_SUCCESS)
                break;
            pin = (char *)pin + c->in.offset;
            pout = (char *)pout + c->out.offset;
        }
        a->in[q] = pin;
        a->out[q] = pout;
    }
    if (rc == CADRE_SUCCESS)
        atomic_store(&d->page[d->me]->taken, s);
    return rc;
}

/* This GPU's share [lo, hi) of an index space of N elements, cut at whole
 * 16-byte units. */
static void share(const struct gpu_direct *d, unsigned long long N, size_t es,
                  unsigned long long *lo, unsigned long long *hi)
{
    unsigned long long V = 16 / es, units = (N + V - 1) / V;
    unsigned long long per = (units + (unsigned long long)d->ngpu - 1) / (unsigned long long)d->ngpu;
    unsigned long long l = per * (unsigned long long)d->mygpu * V, h = l + per * V;
    *lo = l < N ? l : N;
    *hi = h < N ? h : N;
}

static int aligned16(const void *p)
{
    return ((uintptr_t)p & 15) == 0;
}

/* The leader's stream part of call s: wait for every rank's stream, run
 * this GPU's share (a: the buffers, from gather_calls), mark it done. */
static cudaError_t enqueue_kernel(struct gpu_direct *d, cudaStream_t X, uint32_t s,
                                  struct gpu_direct_args *a, int mode, size_t count,
                                  cadre_datatype_t dt, cadre_op_t op)
{
    size_t es = cadre_datatype_size(dt);
    cudaError_t e = cudaSuccess;
    /* A rank whose mark the host already sees needs no wait on the stream
     * (a rank that handed its call over from the host marked it before it
     * published the call: host_done). */
    for (int q = 0; q < d->n && e == cudaSuccess; q++)
        if (q != d->me && !cyc_ge(atomic_load(&d->page[q]->ready), s))
            e = cadre__gpu_stream_wait_geq(d->dev[q] + OFF_READY, s, X);
    a->nranks = d->n;
    a->dt = dt;
    a->op = op == CADRE_AVG ? CADRE_SUM : op;
    a->divisor = op == CADRE_AVG ? d->n : 0;
    a->mode = mode;
    a->n = count;
    a->seq = s;
    share(d, mode == GPU_DIRECT_ALLGATHER ? count * (size_t)d->n : count, es, &a->lo, &a->hi);
    a->vec = mode == GPU_DIRECT_ALLREDUCE || (count * es) % 16 == 0;
    for (int q = 0; q < d->n; q++)
        a->vec &= aligned16(a->in[q]) && aligned16(a->out[q]);
    unsigned long long units = (a->hi - a->lo) * es / 16 + 1;
    unsigned long long b = units / (GPU_DIRECT_THREADS * 2ull) + 1;
    a->blocks = b > (unsigned long long)d->blocks_max ? d->blocks_max : (int)b;
    /* The kernel's failure check: up to GATE_DIRECT_BLOCKS blocks read the
     * leader's `failed` word in host memory themselves (about 1 us each);
     * more read a device copy made on the stream, which costs the host
     * about 7 us per call (cudaMemcpyAsync; 4 ranks, 8 KiB on an H200:
     * 13.7 us of enqueueing against 6.5 without it). */
    if (a->blocks <= GATE_DIRECT_BLOCKS) {
        a->failed = (const volatile unsigned int *)(d->dev[d->me] + OFF_FAILED);
    } else {
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(d->gate, &d->page[d->me]->failed, sizeof *d->gate,
                                cudaMemcpyHostToDevice, X);
        a->failed = d->gate;
    }
    if (e == cudaSuccess && a->hi > a->lo)
        e = (cudaError_t)cadre__gpu_direct_launch(a, X);
    if (e == cudaSuccess)
        e = cadre__gpu_stream_write(d->dev[d->me] + OFF_DONE, s, X);
    return e;
}

/* ---- a small blocking call of a rank that is not a leader, from the host ------------- */
/* Without MPS each process's context is time-sliced on a shared GPU: a rank
 * whose stream marks its call and waits for the leaders' marks costs a switch
 * to its context and back, about 10 us per rank and call (36 us for 8 KiB at
 * 4 ranks on an H200, RESULTS.md), while the leader's kernel takes 2-3 us. A
 * rank that is not a leader, in a blocking call of at most CADRE_GPU_HOST_DONE
 * bytes, whose stream is idle (its earlier work, so its input, is complete),
 * marks its call from the host and waits on the host for the leaders' marks,
 * at most HOST_SPIN_S: then nothing of the call runs in its context, and
 * later work on its stream, enqueued after the call returns, follows the
 * leader's kernel. A leader late past HOST_SPIN_S: the rank's stream waits
 * as in any other call, and the call returns. */
#define HOST_SPIN_S 200e-6

static int host_done_ok(const struct gpu_direct *d, cudaStream_t X, size_t bytes, int blocking)
{
    if (!blocking || d->lead || !bytes)
        return 0;
    if (d->host_done_max <= 0 || bytes > (unsigned long long)d->host_done_max)
        return 0;
    if (d->have_last && cudaEventQuery(d->last) != cudaSuccess)
        return 0;
    cudaError_t e = cudaStreamQuery(X);
    if (e != cudaSuccess) {
        if (e != cudaErrorNotReady)
            cudaGetLastError(); /* the stream part reports it */
        return 0;
    }
    return 1;
}

/* Waits on the host for every leader's mark of call s (*over 1), at most
 * HOST_SPIN_S (*over 0): a failure status if the call broke at a rank. */
static int host_done_wait(struct gpu_direct *d, const char *fn, uint32_t s, int *over)
{
    double t0 = cadre__now();
    *over = 0;
    for (unsigned spins = 0;; spins++) {
        int all = 1;
        for (int k = 0; k < d->ngpu && all; k++)
            all = cyc_ge(atomic_load_explicit(&d->page[d->leader[k]]->done,
                                              memory_order_acquire), s);
        uint32_t at;
        int f = failed_rank(d, s, &at);
        if (f >= 0)
            return cadre__error(CADRE_ERR_PEER, "%s: rank %d's direct device collective #%u "
                                                "failed", fn, f, at);
        if (all) {
            *over = 1;
            return CADRE_SUCCESS;
        }
        if ((spins & 15) == 15 && cadre__now() - t0 > HOST_SPIN_S)
            return CADRE_SUCCESS;
    }
}

/* Enqueues call s and hands the op over. count: elements of a rank's block
 * (allreduce: the vector). */
static int run(const char *fn, struct cadre_comm *comm, struct gpu_direct *d, int mode,
               const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt,
               cadre_op_t op, cadre_request_t *req)
{
    size_t es = cadre_datatype_size(dt), K = (size_t)comm->size;
    size_t in_bytes = count * es * (mode == GPU_DIRECT_REDUCE_SCATTER ? K : 1);
    size_t out_bytes = count * es * (mode == GPU_DIRECT_ALLGATHER ? K : 1);
    /* Events, streams and launches go to the calling thread's current device:
     * make it cadre's for this call, and put the thread's back after. */
    int cur = -1;
    if (cudaGetDevice(&cur) == cudaSuccess && cur != cadre__proc.device) {
        cudaError_t se = cudaSetDevice(cadre__proc.device);
        if (se != cudaSuccess)
            return cadre__gpu_cuda_fail(se, fn, "cudaSetDevice to the rank's device");
        int rc = run(fn, comm, d, mode, sendbuf, recvbuf, count, dt, op, req);
        cudaSetDevice(cur);
        return rc;
    }
    if (!d && !req) {
        /* One rank, blocking: a copy on the stream (in place nothing), with
         * no op, event or proxy behind it (NCCL's 1-rank allreduce of 8 KiB
         * took 6.3 us out of place and 1.7 in place on an H200, cadre's with
         * an op 8.5 and 2.6). The communicator's sticky error still comes
         * first. */
        struct gpu_comm *gc;
        CADRE_CHECK(cadre__gpu_comm_ready(fn, comm, &gc));
        if (sendbuf == recvbuf)
            return CADRE_SUCCESS;
        cudaError_t ce = cudaMemcpyAsync(recvbuf, sendbuf, out_bytes, cudaMemcpyDeviceToDevice,
                                         (cudaStream_t)gc->stream);
        return ce == cudaSuccess ? CADRE_SUCCESS : cadre__gpu_cuda_fail(ce, fn, "the copy");
    }
    struct gpu_op *gop;
    cudaStream_t X;
    CADRE_CHECK(cadre__gpu_op_new(fn, comm, req != NULL, 0, &gop, &X));
    gop->kind = OP_DEVICE;
    gop->state = ST_WAIT_DEVICE;
    gop->count = count;
    gop->dt = dt;
    gop->peer = -1;
    cadre__gpu_flag_put(gop->flag); /* nothing for the proxy to release */
    gop->flag = NULL;
    cudaError_t e = cudaSuccess;
    int rc = CADRE_SUCCESS;

    if (!d) { /* one rank, nonblocking: a copy on the stream */
        if (sendbuf != recvbuf)
            e = cudaMemcpyAsync(recvbuf, sendbuf, out_bytes, cudaMemcpyDeviceToDevice, X);
        if (e == cudaSuccess)
            e = cudaEventRecord(gop->done, X);
        rc = e == cudaSuccess ? CADRE_SUCCESS : cadre__gpu_cuda_fail(e, fn, "the copy");
        goto submit;
    }

    struct gd_call mine = {.mode = mode, .dt = dt, .op = op, .count = count};
    struct watch *w = calloc(1, sizeof *w);
    if (!w) {
        rc = cadre__error(CADRE_ERR_NOMEM, "%s: no memory", fn);
        goto out;
    }
    pthread_mutex_lock(&d->lock);
    uint32_t s = ++d->seq;
    if (!s) /* 0 is the flags' initial value */
        s = ++d->seq;
    uint32_t at;
    int f = failed_rank(d, s, &at);
    if (f >= 0) {
        rc = cadre__error(CADRE_ERR_PEER, "%s: the direct device collectives of this "
                          "communicator stopped after rank %d's call #%u failed", fn, f, at);
        goto unlock;
    }
    if ((rc = cadre__gpu_ipc_export(sendbuf, &mine.in)) != CADRE_SUCCESS ||
        (rc = cadre__gpu_ipc_export(recvbuf, &mine.out)) != CADRE_SUCCESS) {
        rc = cadre__error(CADRE_ERR_DEVICE, "%s: rank %d's device buffer has no CUDA IPC "
                          "handle (cudaMallocAsync pool, managed or VMM memory?); the direct "
                          "device collectives need cudaMalloc memory", fn, d->me);
        goto unlock;
    }
    mine.in.bytes = in_bytes;
    mine.out.bytes = out_bytes;
    rc = host_wait(d, fn, s, d->leader, d->ngpu, slot_free,
                   "read this rank's call of 8 calls ago (its ring slot)");
    if (rc != CADRE_SUCCESS)
        goto unlock;
    int from_host = host_done_ok(d, X, in_bytes > out_bytes ? in_bytes : out_bytes, !req);
    if (from_host) /* before the call is published: the leader's host sees it */
        atomic_store_explicit(&d->page[d->me]->ready, s, memory_order_release);
    struct gd_call *slot = &d->page[d->me]->ring[s % RING];
    slot->mode = mine.mode;
    slot->dt = mine.dt;
    slot->op = mine.op;
    slot->count = mine.count;
    slot->in = mine.in;
    slot->out = mine.out;
    atomic_store_explicit(&slot->seq, s, memory_order_release);

    struct gpu_direct_args a;
    memset(&a, 0, sizeof a);
    if (d->lead && (rc = gather_calls(d, fn, s, &mine, &a)) != CADRE_SUCCESS)
        goto unlock;

    if (from_host) {
        /* Over (1: nothing on the stream, nothing to watch), or failed at
         * another rank (whose page says so): this rank's page says so too,
         * with that rank as the cause, as on every other failure. */
        int over;
        int hr = host_done_wait(d, fn, s, &over);
        if (hr != CADRE_SUCCESS) {
            int cf = failed_rank(d, s, &at);
            mark_failed(d, d->me, s, cf >= 0 ? cf : d->me);
        }
        if (hr != CADRE_SUCCESS || over) {
            pthread_mutex_unlock(&d->lock);
            free(w);
            cadre__gpu_op_discard(gop);
            return hr;
        }
    }
    if (d->have_last && !from_host)
        e = cudaStreamWaitEvent(X, d->last, 0);
    if (e == cudaSuccess && !from_host)
        e = cadre__gpu_stream_write(d->dev[d->me] + OFF_READY, s, X);
    if (d->lead && e == cudaSuccess)
        e = enqueue_kernel(d, X, s, &a, mode, count, dt, op);
    for (int k = 0; k < d->ngpu && e == cudaSuccess; k++)
        if (d->leader[k] != d->me)
            e = cadre__gpu_stream_wait_geq(d->dev[d->leader[k]] + OFF_DONE, s, X);
    if (e == cudaSuccess)
        e = cudaEventRecord(d->last, X);
    if (e == cudaSuccess)
        d->have_last = 1;
    if (e == cudaSuccess)
        e = cudaEventRecord(gop->done, X);
    if (e != cudaSuccess)
        rc = cadre__gpu_cuda_fail(e, fn, "enqueuing the direct collective");
unlock:
    if (rc != CADRE_SUCCESS)
        mark_failed(d, d->me, s, d->me); /* no rank waits for this one */
    pthread_mutex_unlock(&d->lock);
    if (rc == CADRE_SUCCESS) {
        w->d = d;
        w->s = s;
        w->t0 = cadre__now();
        w->next = w->t0 + 0.005;
        gop->watch = cadre__gpu_direct_watch;
        gop->watch_arg = w;
        gop->watch_free = free;
        w = NULL;
    }
    free(w);
submit:
    if (rc == CADRE_SUCCESS && req)
        rc = cadre__gpu_attach_request(gop, req);
out:
    if (rc != CADRE_SUCCESS) {
        cadre__gpu_op_discard(gop);
        return rc;
    }
    return cadre__gpu_submit(gop);
}

/* The direct state for comm, NULL for one rank; NOT_MINE in *rc when the
 * call is not for this path. */
static int take(const char *fn, struct cadre_comm *comm, enum coll_kind k, size_t bytes,
                struct gpu_direct **d)
{
    const char *why;
    enum coll_algo a = choose_device(k, bytes, &why);
    if (a == COLL_ALGO_NONE)
        return CADRE__GPU_NOT_MINE;
    *d = NULL;
    if (comm->size > 1) {
        int rc;
        if (!(*d = cadre__gpu_direct_usable(fn, comm, &rc)))
            return rc == CADRE_SUCCESS ? CADRE__GPU_NOT_MINE : rc;
    }
    cadre__coll_log_choice(comm, k, a, bytes, 1, why);
    return CADRE_SUCCESS;
}

int cadre__gpu_allreduce(const char *fn, const void *sendbuf, void *recvbuf, size_t count,
                         cadre_datatype_t dt, cadre_op_t op, struct cadre_comm *comm,
                         cadre_request_t *req)
{
    size_t bytes = count * cadre_datatype_size(dt);
    if (!count || !is_device(recvbuf, bytes) || !is_device(sendbuf, bytes))
        return CADRE__GPU_NOT_MINE;
    struct gpu_direct *d;
    int rc = take(fn, comm, COLL_ALLREDUCE, bytes, &d);
    if (rc != CADRE_SUCCESS)
        return rc;
    return run(fn, comm, d, GPU_DIRECT_ALLREDUCE, sendbuf, recvbuf, count, dt, op, req);
}

int cadre__gpu_reduce_scatter(const char *fn, const void *sendbuf, void *recvbuf,
                              size_t recvcount, cadre_datatype_t dt, cadre_op_t op,
                              struct cadre_comm *comm, cadre_request_t *req)
{
    size_t bytes = recvcount * cadre_datatype_size(dt);
    if (!recvcount || !is_device(recvbuf, bytes) ||
        !is_device(sendbuf, bytes * (size_t)comm->size))
        return CADRE__GPU_NOT_MINE;
    struct gpu_direct *d;
    int rc = take(fn, comm, COLL_REDUCE_SCATTER, bytes * (size_t)comm->size, &d);
    if (rc != CADRE_SUCCESS)
        return rc;
    return run(fn, comm, d, GPU_DIRECT_REDUCE_SCATTER, sendbuf, recvbuf, recvcount, dt, op, req);
}

int cadre__gpu_allgather(const char *fn, const void *sendbuf, void *recvbuf, size_t count,
                         cadre_datatype_t dt, struct cadre_comm *comm, cadre_request_t *req)
{
    size_t bytes = count * cadre_datatype_size(dt);
    if (sendbuf == CADRE_IN_PLACE)
        sendbuf = (const char *)recvbuf + (size_t)comm->rank * bytes;
    if (!count || !is_device(recvbuf, bytes * (size_t)comm->size) || !is_device(sendbuf, bytes))
        return CADRE__GPU_NOT_MINE;
    struct gpu_direct *d;
    int rc = take(fn, comm, COLL_ALLGATHER, bytes * (size_t)comm->size, &d);
    if (rc != CADRE_SUCCESS)
        return rc;
    return run(fn, comm, d, GPU_DIRECT_ALLGATHER, sendbuf, recvbuf, count, dt, CADRE_SUM, req);
}
#endif /* HAVE_CUDA */
