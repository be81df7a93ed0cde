/*
 * coll_gpu_direct.c - allreduce (one-shot and two-shot), reduce_scatter and
 * allgather on device buffers by direct kernels (device/device_direct.cu) for a
 * communicator whose ranks all run on this node with GPUs that reach each
 * other (the same GPU, or peer access).
 *
 * Selection, the same at every rank: CADRE_GPU_ALGO (auto, staged, oneshot,
 * twoshot); the communicator has 2 to 8 ranks, every peer reached through
 * shared memory; both buffers of the call are device memory; and the
 * workspace set-up succeeded at every rank (agreed at set-up). Else the
 * staged path (p2p/p2p_gpu_proxy.c) runs the host algorithms. Which kernel
 * (one-shot up to CADRE_GPU_ONESHOT_MAX bytes, two-shot above; the
 * reduce_scatter and allgather kernels unless staged is set) is the device
 * stage of coll_select.c, and logged as the other choices are.
 *
 * Set-up, at the first such call on the communicator: each rank allocates
 * its workspace (device/device_direct.h), and in two host collectives on the
 * communicator the ranks exchange their GPU's PCI bus id and the IPC handle
 * of their workspace, map every peer's, and agree whether all succeeded.
 * This is the only time the host waits for the peers; a call afterwards
 * only enqueues kernels. The input is first copied into the rank's scratch
 * (the kernel does it): peers then read a buffer whose mapping is known in
 * advance, with no exchange of addresses per call, and in-place calls are
 * safe; the cost is one more read and write of the input in device memory.
 *
 * Ordering: a communicator's direct kernels run one after the other on the
 * device (each call's stream waits for the previous call's end event, since
 * blocking calls go on the communicator's stream and nonblocking ones on an
 * internal stream); device/device_direct.cu relies on it.
 *
 * Limitations: every rank must pass device buffers (a rank passing host
 * buffers runs the host algorithm: CADRE_ERR_MISMATCH where CADRE_CHECK is
 * on, else a hang); the ranks' count, datatype and op are not compared.
 *
 * May call: this folder's host collectives, p2p/ (the proxy's ops, CUDA
 * IPC), device/ (the kernels of device_direct.cu), runtime/.
 */
#include "config.h"

#if HAVE_CUDA
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll/coll_call.h"
#include "coll/coll_gpu.h"
#include "device/device_direct.h"
#include "p2p/p2p_gpu.h"

struct gpu_direct {
    int state; /* 1 usable, -1 not for this communicator */
    int n, me, maxb;
    char *ws;                         /* this rank's workspace */
    char *peer_ws[GPU_DIRECT_MAXR];   /* everyone's, mapped (ours at me) */
    size_t half;
    uint32_t seq;
    uint32_t bseq[GPU_DIRECT_MAXB];   /* the last call that ran block b */
    cudaEvent_t last;                 /* the end of the last direct call */
    int have_last;
    cudaStream_t aux;                 /* set-up and the check at free */
    pthread_mutex_t lock;
};

struct ws_info {
    int32_t ok;
    int32_t pad;
    char busid[32];
    cudaIpcMemHandle_t h;
};

static int world_of(const struct cadre_comm *c, int r)
{
    return c->world_ranks ? c->world_ranks[r] : r;
}

static int all_on_node(const struct cadre_comm *c)
{
    if (!cadre__eng.peers)
        return 0;
    for (int i = 0; i < c->size; i++) {
        if (i == c->rank)
            continue;
        const struct cadre_peer *p = &cadre__eng.peers[world_of(c, i)];
        if (p->tp != &cadre__p2p_shm || p->state != PEER_OK)
            return 0;
    }
    return 1;
}

static void unmap(struct gpu_direct *d)
{
    for (int q = 0; q < d->n; q++)
        if (q != d->me && d->peer_ws[q])
            cudaIpcCloseMemHandle(d->peer_ws[q]);
    memset(d->peer_ws, 0, sizeof d->peer_ws);
    cudaGetLastError();
}

/* Allocates, exchanges and maps; every rank of c calls it at the same call. */
static int setup(struct gpu_comm *g, struct cadre_comm *c, const char *fn)
{
    struct gpu_direct *d = calloc(1, sizeof *d);
    if (!d)
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", fn);
    pthread_mutex_init(&d->lock, NULL);
    d->state = -1;
    d->n = c->size;
    d->me = c->rank;
    g->direct = d;
    g->direct_free = cadre__gpu_direct_free;
    if (c->size < 2 || c->size > GPU_DIRECT_MAXR || !all_on_node(c))
        return CADRE_SUCCESS;

    long want = cadre__config_int(CADRE_CFG_GPU_DIRECT_BYTES);
    size_t half = want < (64 << 10) ? (64 << 10) : (size_t)want;
    d->half = (half + 4095) & ~(size_t)4095;
    struct ws_info mine = {.ok = 1}, *all = calloc((size_t)c->size, sizeof *all);
    if (!all)
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", fn);
    cudaError_t e = cudaStreamCreateWithFlags(&d->aux, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&d->last, cudaEventDisableTiming);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&d->ws, GPU_DIRECT_FLAG_BYTES + 2 * d->half);
    if (e == cudaSuccess)
        e = cudaMemsetAsync(d->ws, 0, GPU_DIRECT_FLAG_BYTES, d->aux);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(d->aux);
    if (e == cudaSuccess)
        e = cudaIpcGetMemHandle(&mine.h, d->ws);
    if (e == cudaSuccess)
        e = cudaDeviceGetPCIBusId(mine.busid, (int)sizeof mine.busid, cadre__proc.device);
    if (e != cudaSuccess) {
        CADRE_INFO(DEVICE, "%s: no CUDA IPC workspace (%s): device buffers staged", fn,
                   cudaGetErrorString(e));
        cudaGetLastError();
        mine.ok = 0;
    }
    cadre_comm_t h = cadre__gpu_handle_of(c);
    int rc = cadre_allgather(&mine, all, sizeof mine, CADRE_UINT8, h);
    int32_t ok = mine.ok, allok = 0;
    int per_dev = 1;
    for (int q = 0; rc == CADRE_SUCCESS && ok && q < c->size; q++) {
        if (q == c->rank) {
            d->peer_ws[q] = d->ws;
            continue;
        }
        all[q].busid[sizeof all[q].busid - 1] = 0;
        int dev = -1, a = 0, b = 0;
        ok = all[q].ok && cudaDeviceGetByPCIBusId(&dev, all[q].busid) == cudaSuccess;
        if (ok && dev != cadre__proc.device)
            ok = cudaDeviceCanAccessPeer(&a, cadre__proc.device, dev) == cudaSuccess &&
                 cudaDeviceCanAccessPeer(&b, dev, cadre__proc.device) == cudaSuccess && a && b;
        if (ok)
            per_dev += dev == cadre__proc.device;
        void *p = NULL;
        if (ok && (e = cudaIpcOpenMemHandle(&p, all[q].h, cudaIpcMemLazyEnablePeerAccess)) !=
                      cudaSuccess) {
            CADRE_INFO(DEVICE, "%s: cannot map rank %d's workspace (%s): device buffers staged",
                       fn, q, cudaGetErrorString(e));
            ok = 0;
        }
        d->peer_ws[q] = p;
        cudaGetLastError();
    }
    free(all);
    if (rc == CADRE_SUCCESS)
        rc = cadre_allreduce(&ok, &allok, 1, CADRE_INT32, CADRE_MIN, h);
    /* The largest number of ranks on one GPU decides the grid: all of them
     * must fit on it at once (the blocks wait for each other). */
    int32_t most = per_dev, maxdev = 1;
    if (rc == CADRE_SUCCESS)
        rc = cadre_allreduce(&most, &maxdev, 1, CADRE_INT32, CADRE_MAX, h);
    if (rc != CADRE_SUCCESS || !allok) {
        unmap(d);
        if (d->ws)
            cudaFree(d->ws);
        d->ws = NULL;
        cudaGetLastError();
        return rc;
    }
    d->maxb = 256 / maxdev;
    if (d->maxb > GPU_DIRECT_MAXB)
        d->maxb = GPU_DIRECT_MAXB;
    if (d->maxb < 1)
        d->maxb = 1;
    d->state = 1;
    CADRE_INFO(DEVICE, "%s: direct allreduce kernels on %d ranks (%d per GPU at most)", fn,
               c->size, (int)maxdev);
    return CADRE_SUCCESS;
}

static int blocks_for(const struct gpu_direct *d, size_t units, int slices)
{
    size_t b = units / ((size_t)slices * 1024);
    return b < 1 ? 1 : b > (size_t)d->maxb ? d->maxb : (int)b;
}

/* 0 auto, 1 staged, 2 oneshot, 3 twoshot */
static int algo(void)
{
    static _Atomic int warned;
    const char *s = cadre__config_str(CADRE_CFG_GPU_ALGO);
    if (!*s || !strcmp(s, "auto"))
        return 0;
    if (!strcmp(s, "staged"))
        return 1;
    if (!strcmp(s, "oneshot"))
        return 2;
    if (!strcmp(s, "twoshot"))
        return 3;
    if (!atomic_exchange(&warned, 1))
        CADRE_WARN(DEVICE, "CADRE_GPU_ALGO=%s: not auto, staged, oneshot or twoshot; auto used",
                   s);
    return 0;
}

/* The device stage's choice (coll_select.c holds the rule). */
static enum coll_algo choose(enum coll_kind k, size_t bytes, const char **why)
{
    return cadre__coll_select_device(k, bytes, algo(),
                                     (size_t)cadre__config_int(CADRE_CFG_GPU_ONESHOT_MAX), why);
}

static int is_device(const void *p, size_t bytes)
{
    char *base;
    size_t size;
    return cadre__gpu_classify(p, &base, &size) &&
           (size_t)((const char *)p - base) + bytes <= size;
}

/* The communicator's usable workspace (set up on first use), or NULL: the
 * call is not for the direct kernels. */
static struct gpu_direct *usable(const char *fn, struct cadre_comm *comm, int *rc)
{
    *rc = CADRE_SUCCESS;
    if (comm->size < 2)
        return NULL;
    struct gpu_comm *g = cadre__gpu_comm(comm);
    if (!g)
        return NULL;
    if (!g->direct && (*rc = setup(g, comm, fn)) != CADRE_SUCCESS)
        return NULL;
    return g->direct->state == 1 ? g->direct : NULL;
}

/* Enqueues the kernels of one call, chunk by chunk, and hands the op over.
 * count: elements per rank's block (allreduce: the vector). */
static int run(const char *fn, struct cadre_comm *comm, struct gpu_direct *d, int mode, int two,
               const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt,
               cadre_op_t op, cadre_request_t *req)
{
    size_t es = cadre_datatype_size(dt);
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

    /* Chunks that fit a scratch half, whole 16-byte units (a reduce-scatter
     * puts every rank's slice of the chunk there). */
    size_t half = mode == GPU_DIRECT_REDUCE_SCATTER ? d->half / (size_t)d->n : d->half;
    size_t per = (half / 16) * (16 / es);
    struct gpu_direct_args args;
    memset(&args, 0, sizeof args);
    args.nranks = d->n;
    args.me = d->me;
    args.dt = dt;
    args.op = op == CADRE_AVG ? CADRE_SUM : op;
    args.divisor = op == CADRE_AVG ? d->n : 0;
    args.mode = mode;
    args.two_shot = two;
    args.in_stride = args.out_stride = count * es;
    pthread_mutex_lock(&d->lock);
    cudaError_t e = d->have_last ? cudaStreamWaitEvent(X, d->last, 0) : cudaSuccess;
    for (size_t off = 0; off < count && e == cudaSuccess; off += per) {
        size_t n = count - off < per ? count - off : per;
        args.seq = ++d->seq;
        if (!args.seq) /* 0 is the flags' initial value */
            args.seq = ++d->seq;
        for (int q = 0; q < d->n; q++) {
            args.flags[q] = (unsigned int *)d->peer_ws[q];
            args.scratch[q] = d->peer_ws[q] + GPU_DIRECT_FLAG_BYTES + (args.seq & 1) * d->half;
        }
        args.in = (const char *)sendbuf + off * es;
        args.out = (char *)recvbuf + off * es;
        args.n = n;
        args.sstride = (n * es + 15) & ~(size_t)15;
        args.blocks = blocks_for(d, (n * es + 15) / 16, two ? d->n : 1);
        for (int b = 0; b < args.blocks; b++)
            d->bseq[b] = args.seq;
        e = (cudaError_t)cadre__gpu_direct_launch(&args, X);
    }
    if (e == cudaSuccess)
        e = cudaEventRecord(d->last, X);
    if (e == cudaSuccess)
        d->have_last = 1;
    pthread_mutex_unlock(&d->lock);
    if (e == cudaSuccess)
        e = cudaEventRecord(gop->done, X);
    int rc = e == cudaSuccess ? CADRE_SUCCESS : cadre__gpu_cuda_fail(e, fn, "the direct kernel");
    /* A failed launch leaves the peers waiting for us: the communicator's
     * next device call reports it, as for any asynchronous failure. */
    if (rc == CADRE_SUCCESS && req)
        rc = cadre__gpu_attach_request(gop, req);
    if (rc != CADRE_SUCCESS) {
        cadre__gpu_op_discard(gop);
        return rc;
    }
    return cadre__gpu_submit(gop);
}

int cadre__gpu_allreduce(const char *fn, const void *sendbuf, void *recvbuf, size_t count,
                         cadre_datatype_t dt, cadre_op_t op, struct cadre_comm *comm,
                         cadre_request_t *req)
{
    size_t bytes = count * cadre_datatype_size(dt);
    if (!count || !is_device(recvbuf, bytes) || !is_device(sendbuf, bytes))
        return CADRE__GPU_NOT_MINE;
    int rc;
    const char *why;
    enum coll_algo a = choose(COLL_ALLREDUCE, bytes, &why);
    if (a == COLL_ALGO_NONE)
        return CADRE__GPU_NOT_MINE;
    struct gpu_direct *d = usable(fn, comm, &rc);
    if (!d)
        return rc == CADRE_SUCCESS ? CADRE__GPU_NOT_MINE : rc;
    cadre__coll_log_choice(comm, COLL_ALLREDUCE, a, bytes, 1, why);
    return run(fn, comm, d, GPU_DIRECT_ALLREDUCE, a == COLL_ALGO_GPU_TWOSHOT, sendbuf, recvbuf,
               count, dt, op, req);
}

int cadre__gpu_reduce_scatter(const char *fn, const void *sendbuf, void *recvbuf,
                              size_t recvcount, cadre_datatype_t dt, cadre_op_t op,
                              struct cadre_comm *comm, cadre_request_t *req)
{
    size_t bytes = recvcount * cadre_datatype_size(dt);
    if (!recvcount || !is_device(recvbuf, bytes) ||
        !is_device(sendbuf, bytes * (size_t)comm->size))
        return CADRE__GPU_NOT_MINE;
    int rc;
    const char *why;
    enum coll_algo a = choose(COLL_REDUCE_SCATTER, bytes * (size_t)comm->size, &why);
    if (a == COLL_ALGO_NONE)
        return CADRE__GPU_NOT_MINE;
    struct gpu_direct *d = usable(fn, comm, &rc);
    if (!d)
        return rc == CADRE_SUCCESS ? CADRE__GPU_NOT_MINE : rc;
    cadre__coll_log_choice(comm, COLL_REDUCE_SCATTER, a, bytes * (size_t)comm->size, 1, why);
    return run(fn, comm, d, GPU_DIRECT_REDUCE_SCATTER, 0, sendbuf, recvbuf, recvcount, dt, op,
               req);
}

int cadre__gpu_allgather(const char *fn, const void *sendbuf, void *recvbuf, size_t count,
                         cadre_datatype_t dt, struct cadre_comm *comm, cadre_request_t *req)
{
    size_t bytes = count * cadre_datatype_size(dt);
    if (sendbuf == CADRE_IN_PLACE)
        sendbuf = (const char *)recvbuf + (size_t)comm->rank * bytes;
    if (!count || !is_device(recvbuf, bytes * (size_t)comm->size) || !is_device(sendbuf, bytes))
        return CADRE__GPU_NOT_MINE;
    int rc;
    const char *why;
    enum coll_algo a = choose(COLL_ALLGATHER, bytes * (size_t)comm->size, &why);
    if (a == COLL_ALGO_NONE)
        return CADRE__GPU_NOT_MINE;
    struct gpu_direct *d = usable(fn, comm, &rc);
    if (!d)
        return rc == CADRE_SUCCESS ? CADRE__GPU_NOT_MINE : rc;
    cadre__coll_log_choice(comm, COLL_ALLGATHER, a, bytes * (size_t)comm->size, 1, why);
    return run(fn, comm, d, GPU_DIRECT_ALLGATHER, 0, sendbuf, recvbuf, count, dt, CADRE_SUM,
               req);
}

/* Whether every peer has left every call that used our workspace. */
static int peers_done(struct gpu_direct *d)
{
    unsigned int f[3 * GPU_DIRECT_MAXB * GPU_DIRECT_MAXR];
    if (cudaMemcpyAsync(f, d->ws, sizeof f, cudaMemcpyDeviceToHost, d->aux) != cudaSuccess ||
        cudaStreamSynchronize(d->aux) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    for (int b = 0; b < GPU_DIRECT_MAXB; b++)
        for (int q = 0; q < d->n; q++)
            if (d->bseq[b] && q != d->me &&
                (int)(f[GPU_DIRECT_FLAG(2, b, q)] - d->bseq[b]) < 0)
                return 0;
    return 1;
}

void cadre__gpu_direct_free(struct gpu_comm *g)
{
    struct gpu_direct *d = g->direct;
    if (!d)
        return;
    g->direct = NULL;
    if (d->state == 1) {
        if (d->have_last)
            cudaEventSynchronize(d->last);
        /* A peer may still read our scratch after our kernel ended. */
        double t0 = cadre__now(), limit = cadre__config_dbl(CADRE_CFG_TIMEOUT);
        int ok;
        while (!(ok = peers_done(d)) && cadre__now() - t0 < limit) {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
        unmap(d);
        if (ok == 1)
            cudaFree(d->ws);
        else
            CADRE_WARN(DEVICE, "a peer never finished its direct allreduce; its workspace is "
                               "left allocated");
    }
    if (d->last)
        cudaEventDestroy(d->last);
    if (d->aux)
        cudaStreamDestroy(d->aux);
    cudaGetLastError();
    pthread_mutex_destroy(&d->lock);
    free(d);
}
#endif /* HAVE_CUDA */
