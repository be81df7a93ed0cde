/*
 * device_direct_comm.c - the workspace of a communicator's direct one-node
 * collectives (device_direct_call.c, which holds the design): every rank's
 * flag page, mapped and registered with the device by every rank, the gate
 * word of its kernels, the setup on first use, the proxy's watch of a call,
 * and the release.
 *
 * May call: this folder (the kernels' gates, the pools), p2p/ (the engine,
 * fd passing), runtime/, and the public host collectives at setup.
 */
#include "config.h"

#if HAVE_CUDA
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "device/device_coll.h"
#include "device/device_direct_comm.h"

struct info {
    int32_t ok, pid, fd, pad;
    char busid[32];
};

static int all_on_node(const struct cadre_comm *c)
{
    if (!cadre__eng.peers)
        return 0;
    for (int i = 0; i < c->size; i++) {
        if (i == c->rank)
            continue;
        const struct cadre_peer *p = &cadre__eng.peers[cadre__world_rank(c, i)];
        if (p->tp != &cadre__p2p_shm || p->state != PEER_OK)
            return 0;
    }
    return 1;
}

static void unmap_pages(struct gpu_direct *d)
{
    for (int q = 0; q < d->n; q++) {
        if (!d->page[q])
            continue;
        if (d->dev[q])
            cudaHostUnregister(d->page[q]);
        munmap(d->page[q], 4096);
        d->page[q] = NULL;
        d->dev[q] = NULL;
    }
    cudaGetLastError();
}

/* Maps fd's page (ours or a peer's) at q and registers it; 0 on success. */
static int map_page(struct gpu_direct *d, int q, int fd)
{
    void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return -1;
    d->page[q] = p;
    void *dp = NULL;
    if (cudaHostRegister(p, 4096, cudaHostRegisterMapped | cudaHostRegisterPortable) !=
            cudaSuccess ||
        cudaHostGetDevicePointer(&dp, p, 0) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    d->dev[q] = dp;
    return 0;
}

/* Gate words (device/device_direct.cu), one per communicator in use. */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char gate_used[GPU_DIRECT_GATES];

static void gate_put(int id)
{
    if (id < 0)
        return;
    pthread_mutex_lock(&gate_lock);
    gate_used[id] = 0;
    pthread_mutex_unlock(&gate_lock);
}

static unsigned int *gate_get(int *id)
{
    *id = -1;
    pthread_mutex_lock(&gate_lock);
    for (int i = 0; i < GPU_DIRECT_GATES && *id < 0; i++)
        if (!gate_used[i]) {
            gate_used[i] = 1;
            *id = i;
        }
    pthread_mutex_unlock(&gate_lock);
    unsigned int *g = *id >= 0 ? cadre__gpu_direct_gate(*id) : NULL;
    if (!g && *id >= 0) {
        gate_put(*id);
        *id = -1;
    }
    return g;
}

/* Makes the communicator's state; every rank of c calls it at the same call. */
static int setup(struct gpu_comm *g, struct cadre_comm *c, const char *fn)
{
    struct gpu_direct *d = calloc(1, sizeof *d);
    if (!d)
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", fn);
    pthread_mutex_init(&d->lock, NULL);
    d->state = -1;
    d->gate_id = -1;
    d->comm = c;
    d->n = c->size;
    d->me = c->rank;
    g->direct = d;
    g->direct_free = cadre__gpu_direct_free;
    if (c->size < 2 || c->size > GPU_DIRECT_MAXR || !all_on_node(c))
        return CADRE_SUCCESS;
    struct info mine = {.ok = cadre__gpu_stream_memops(), .pid = (int32_t)getpid(), .fd = -1};
    struct info *all = calloc((size_t)c->size, sizeof *all);
    if (!all)
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", fn);
    int fd = -1;
    if (mine.ok) {
        fd = memfd_create("cadre-gpu-direct", MFD_CLOEXEC);
        mine.ok = fd >= 0 && ftruncate(fd, 4096) == 0 && map_page(d, c->rank, fd) == 0;
        if (d->page[c->rank])
            atomic_store(&d->page[c->rank]->cause, -1);
        mine.fd = fd;
    }
    if (mine.ok && cudaEventCreateWithFlags(&d->last, cudaEventDisableTiming) != cudaSuccess)
        mine.ok = 0;
    if (mine.ok && !(d->gate = gate_get(&d->gate_id))) {
        CADRE_INFO(DEVICE, "%s: all %d gates of the direct device collectives in use", fn,
                   GPU_DIRECT_GATES);
        mine.ok = 0;
    }
    if (mine.ok && cudaDeviceGetPCIBusId(mine.busid, (int)sizeof mine.busid,
                                         cadre__proc.device) != cudaSuccess)
        mine.ok = 0;
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, cadre__proc.device) !=
            cudaSuccess || sms < 1)
        sms = 16;
    d->blocks_max = 4 * sms;
    d->host_done_max = cadre__config_int(CADRE_CFG_GPU_HOST_DONE);
    cudaGetLastError();
    if (!mine.ok)
        CADRE_INFO(DEVICE, "%s: no direct device collectives here (stream memory operations, "
                           "memfd or cudaHostRegister unavailable): device buffers staged", fn);
    cadre_comm_t h = cadre__gpu_handle_of(c);
    int rc = cadre_allgather(&mine, all, sizeof mine, CADRE_UINT8, h);
    int32_t ok = mine.ok, allok = 0;
    int devs[GPU_DIRECT_MAXR];
    for (int q = 0; rc == CADRE_SUCCESS && ok && q < c->size; q++) {
        d->world[q] = cadre__world_rank(c, q);
        all[q].busid[sizeof all[q].busid - 1] = 0;
        int dev = -1, a = 0, b = 0;
        ok = all[q].ok && cudaDeviceGetByPCIBusId(&dev, all[q].busid) == cudaSuccess;
        if (ok && dev != cadre__proc.device)
            ok = cudaDeviceCanAccessPeer(&a, cadre__proc.device, dev) == cudaSuccess &&
                 cudaDeviceCanAccessPeer(&b, dev, cadre__proc.device) == cudaSuccess && a && b;
        devs[q] = dev;
        if (ok && q != c->rank) {
            char why[256] = "";
            int pfd = cadre__shm_grab_fd(all[q].pid, all[q].fd, why, sizeof why);
            ok = pfd >= 0 && map_page(d, q, pfd) == 0;
            if (pfd >= 0)
                close(pfd);
            if (!ok)
                CADRE_INFO(DEVICE, "%s: cannot map rank %d's flag page (%s): device buffers "
                                   "staged", fn, q, why[0] ? why : "mmap or cudaHostRegister");
        }
        cudaGetLastError();
    }
    free(all);
    if (rc == CADRE_SUCCESS)
        rc = cadre_allreduce(&ok, &allok, 1, CADRE_INT32, CADRE_MIN, h);
    if (fd >= 0) /* every peer has taken it (or given up) */
        close(fd);
    if (rc != CADRE_SUCCESS || !allok) {
        unmap_pages(d);
        return rc;
    }
    /* GPUs in order of their lowest rank; the leader is that rank. */
    d->ngpu = 0;
    for (int q = 0; q < c->size; q++) {
        int k = 0;
        while (k < d->ngpu && devs[d->leader[k]] != devs[q])
            k++;
        if (k == d->ngpu)
            d->leader[d->ngpu++] = q;
        d->gpu_of[q] = k;
    }
    d->mygpu = d->gpu_of[d->me];
    d->lead = d->leader[d->mygpu] == d->me;
    d->state = 1;
    CADRE_INFO(DEVICE, "%s: direct device collectives on %d ranks, %d GPU(s); leader of this "
                       "GPU: rank %d", fn, c->size, d->ngpu, d->leader[d->mygpu]);
    return CADRE_SUCCESS;
}

/* ---- the proxy's watch ----------------------------------------------------------------- */
/* While a call's stream work is pending (done 0) and once it completed
 * (done 1): 0, or a status with the failure recorded on op. */
int cadre__gpu_direct_watch(struct gpu_op *op, int done)
{
    struct watch *w = op->watch_arg;
    struct gpu_direct *d = w->d;
    if (done) {
        uint32_t at;
        int f = failed_rank(d, w->s, &at);
        if (f < 0)
            return 0;
        char m[160];
        snprintf(m, sizeof m, "rank %d's direct device collective #%u failed; this call's "
                              "result is not valid", f, at);
        cadre__gpu_record_failure(op, CADRE_ERR_PEER, m);
        return CADRE_ERR_PEER;
    }
    double now = cadre__now();
    if (now < w->next)
        return 0;
    w->next = now + 0.005;
    cadre__p2p_progress();
    int dq = dead_rank(d);
    if (dq >= 0) {
        mark_failed(d, dq, w->s, dq);
        mark_failed(d, d->me, w->s, dq);
        char m[160];
        snprintf(m, sizeof m, "rank %d died during direct device collective #%u", dq, w->s);
        cadre__gpu_record_failure(op, CADRE_ERR_PEER, m);
        return CADRE_ERR_PEER;
    }
    if (now - w->t0 > timeout_s()) {
        char m[200];
        int k = snprintf(m, sizeof m, "direct device collective #%u made no progress in %g s; "
                                      "streams not at it:", w->s, timeout_s());
        int late = -1;
        for (int q = 0; q < d->n; q++) {
            if (cyc_ge(atomic_load(&d->page[q]->ready), w->s))
                continue;
            if (late < 0)
                late = q;
            if (k < (int)sizeof m - 8)
                k += snprintf(m + k, sizeof m - (size_t)k, " rank %d", q);
        }
        for (int q = 0; q < d->n; q++)
            mark_failed(d, q, w->s, late >= 0 ? late : d->me);
        cadre__gpu_record_failure(op, CADRE_ERR_TIMEOUT, m);
        return CADRE_ERR_TIMEOUT;
    }
    return 0;
}

/* The communicator's usable state (set up on first use), or NULL: the call
 * is not for the direct path. */
struct gpu_direct *cadre__gpu_direct_usable(const char *fn, struct cadre_comm *comm, int *rc)
{
    *rc = CADRE_SUCCESS;
    struct gpu_comm *g = cadre__gpu_comm(comm);
    if (!g)
        return NULL;
    if (!g->direct && (*rc = setup(g, comm, fn)) != CADRE_SUCCESS)
        return NULL;
    return g->direct->state == 1 ? g->direct : NULL;
}

void cadre__gpu_direct_free(struct gpu_comm *g)
{
    struct gpu_direct *d = g->direct;
    if (!d)
        return;
    g->direct = NULL;
    /* The pages are the peers' too: each maps and registers its own view,
     * so ours go at once (a peer still waiting on our flags keeps them). */
    if (d->have_last)
        cudaEventSynchronize(d->last);
    unmap_pages(d);
    gate_put(d->gate_id);
    if (d->last)
        cudaEventDestroy(d->last);
    cudaGetLastError();
    pthread_mutex_destroy(&d->lock);
    free(d);
}
#endif /* HAVE_CUDA */
