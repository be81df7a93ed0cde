/*
 * p2p_gpu_ipc.c - CUDA IPC between the processes of one node: which peers can
 * take it, the handles of this process's allocations (exported once per
 * allocation), the mappings of the peers' (opened once per sender and
 * allocation, closed at cadre_finalize), and the small control messages of
 * p2p/p2p_gpu.c's protocol.
 *
 * Cache keys are the allocation's start address and its buffer id
 * (CU_POINTER_ATTRIBUTE_BUFFER_ID, unique over the life of the process): an
 * allocation freed and another made at the same address is a new key, so a
 * stale handle or mapping is never used for it. cudaIpcOpenMemHandle works
 * between processes on one GPU as well as across GPUs with peer access; it
 * fails inside one process, which never sends itself a descriptor.
 *
 * May call: this folder's engine and requests, device/, bootstrap/, runtime/.
 */
#include "config.h"

#if HAVE_CUDA
#include <cuda.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "p2p/p2p_gpu.h"

static pthread_mutex_t ipc_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- which peers ------------------------------------------------------------------ */
static signed char *peer_state; /* per world rank: 0 not asked yet, 1 yes, -1 no */

static int probe(int w)
{
    if (!cadre__config_bool(CADRE_CFG_GPU_IPC) || !cadre__eng.peers || cadre__proc.device < 0)
        return 0;
    const struct cadre_peer *p = &cadre__eng.peers[w];
    if (p->tp != &cadre__p2p_shm || p->state != PEER_OK)
        return 0;
    void *data = NULL;
    size_t len = 0;
    if (cadre__bootstrap_get(w, CADRE_DEVICE_PUB_KEY, &data, &len) != CADRE_SUCCESS) {
        cadre__clear_error();
        return 0;
    }
    struct cadre_device_pub pub;
    int ok = len == sizeof pub;
    if (ok)
        memcpy(&pub, data, sizeof pub);
    free(data);
    if (!ok || !pub.gpu_on)
        return 0;
    pub.busid[sizeof pub.busid - 1] = 0;
    int d = -1, me = cadre__proc.device;
    if (cudaDeviceGetByPCIBusId(&d, pub.busid) != cudaSuccess) {
        cudaGetLastError(); /* its GPU is not visible here */
        return 0;
    }
    if (d != me) {
        int a = 0, b = 0;
        if (cudaDeviceCanAccessPeer(&a, me, d) != cudaSuccess ||
            cudaDeviceCanAccessPeer(&b, d, me) != cudaSuccess || !a || !b) {
            cudaGetLastError();
            return 0;
        }
    }
    return 1;
}

int cadre__gpu_ipc_peer_ok(int w)
{
    if (w < 0 || w >= cadre__proc.size || w == cadre__proc.rank)
        return 0;
    pthread_mutex_lock(&ipc_lock);
    if (!peer_state)
        peer_state = calloc((size_t)cadre__proc.size, 1);
    int s = peer_state ? peer_state[w] : -1;
    if (!s) {
        s = probe(w) ? 1 : -1;
        peer_state[w] = (signed char)s;
        CADRE_INFO(DEVICE, "device buffers to rank %d: %s", w,
                   s > 0 ? "CUDA IPC" : "staged through host memory");
    }
    pthread_mutex_unlock(&ipc_lock);
    return s > 0;
}

/* ---- this process's allocations ----------------------------------------------------- */
typedef CUresult (*pfn_attrs)(unsigned, CUpointer_attribute *, void **, CUdeviceptr);
static pfn_attrs p_attrs;
static pthread_once_t attrs_once = PTHREAD_ONCE_INIT;

static void load_attrs(void)
{
    enum cudaDriverEntryPointQueryResult q;
    void *f = NULL;
    if (cudaGetDriverEntryPointByVersion("cuPointerGetAttributes", &f, 12000, cudaEnableDefault,
                                         &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
        p_attrs = (pfn_attrs)f;
    cudaGetLastError();
}

#define NEXPORT 64
static struct {
    uint64_t base, bufid;
    cudaIpcMemHandle_t h;
} exported[NEXPORT];
static int nexported, next_export;

int cadre__gpu_ipc_export(const void *buf, struct gpu_ipc_desc *d)
{
    pthread_once(&attrs_once, load_attrs);
    if (!p_attrs)
        return CADRE__GPU_NOT_MINE;
    CUpointer_attribute at[5] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                 CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                 CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                 CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE};
    unsigned int mtype = 0, managed = 0, legacy = 0;
    CUdeviceptr start = 0;
    unsigned long long bufid = 0;
    void *data[5] = {&mtype, &managed, &start, &bufid, &legacy};
    if (p_attrs(5, at, data, (CUdeviceptr)(uintptr_t)buf) != CUDA_SUCCESS)
        return CADRE__GPU_NOT_MINE;
    /* Managed, stream-ordered pool and VMM memory have no legacy handle. */
    if (mtype != CU_MEMORYTYPE_DEVICE || managed || !legacy || !start)
        return CADRE__GPU_NOT_MINE;
    pthread_mutex_lock(&ipc_lock);
    int i = 0;
    while (i < nexported && !(exported[i].base == start && exported[i].bufid == bufid))
        i++;
    if (i == nexported) {
        cudaIpcMemHandle_t h;
        cudaError_t e = cudaIpcGetMemHandle(&h, (void *)(uintptr_t)start);
        if (e != cudaSuccess) {
            cudaGetLastError();
            pthread_mutex_unlock(&ipc_lock);
            CADRE_INFO(DEVICE, "no CUDA IPC handle for the allocation at %p (%s): staged",
                       (void *)(uintptr_t)start, cudaGetErrorString(e));
            return CADRE__GPU_NOT_MINE;
        }
        if (nexported < NEXPORT) {
            i = nexported++;
        } else {
            i = next_export;
            next_export = (next_export + 1) % NEXPORT;
        }
        exported[i].base = start;
        exported[i].bufid = bufid;
        exported[i].h = h;
    }
    memset(d, 0, sizeof *d);
    d->magic = CADRE_GPU_IPC_MAGIC;
    d->base = start;
    d->bufid = bufid;
    d->offset = (uint64_t)((uintptr_t)buf - (uintptr_t)start);
    d->mem = exported[i].h;
    pthread_mutex_unlock(&ipc_lock);
    return CADRE_SUCCESS;
}

/* ---- the peers' allocations ------------------------------------------------------------- */
struct import {
    int w;
    uint64_t base, bufid;
    void *p;
    struct import *next;
};
static struct import *imports;

int cadre__gpu_ipc_map(int src_world, const struct gpu_ipc_desc *d, const char *fn, void **ptr)
{
    if (d->magic != CADRE_GPU_IPC_MAGIC)
        return cadre__error(CADRE_ERR_INTERNAL, "%s: rank %d sent a malformed device-buffer "
                                                "descriptor", fn, src_world);
    pthread_mutex_lock(&ipc_lock);
    for (struct import **pp = &imports; *pp; pp = &(*pp)->next) {
        struct import *m = *pp;
        if (m->w != src_world || m->base != d->base)
            continue;
        if (m->bufid == d->bufid) {
            *ptr = m->p;
            pthread_mutex_unlock(&ipc_lock);
            return CADRE_SUCCESS;
        }
        /* Freed there and allocated again at the same address: every copy
         * from the old one has finished (the sender waited for it). */
        cudaIpcCloseMemHandle(m->p);
        cudaGetLastError();
        *pp = m->next;
        free(m);
        break;
    }
    struct import *m = calloc(1, sizeof *m);
    void *p = NULL;
    cudaError_t e = m ? cudaIpcOpenMemHandle(&p, d->mem, cudaIpcMemLazyEnablePeerAccess)
                      : cudaErrorMemoryAllocation;
    if (e != cudaSuccess) {
        pthread_mutex_unlock(&ipc_lock);
        free(m);
        cudaGetLastError();
        return cadre__error(CADRE_ERR_DEVICE,
                            "%s: cannot map rank %d's device buffer (cudaIpcOpenMemHandle: %s)",
                            fn, src_world, cudaGetErrorString(e));
    }
    m->w = src_world;
    m->base = d->base;
    m->bufid = d->bufid;
    m->p = p;
    m->next = imports;
    imports = m;
    pthread_mutex_unlock(&ipc_lock);
    *ptr = p;
    return CADRE_SUCCESS;
}

void cadre__gpu_ipc_finalize(void)
{
    pthread_mutex_lock(&ipc_lock);
    while (imports) {
        struct import *m = imports;
        imports = m->next;
        cudaIpcCloseMemHandle(m->p);
        free(m);
    }
    cudaGetLastError();
    nexported = next_export = 0;
    free(peer_state);
    peer_state = NULL;
    pthread_mutex_unlock(&ipc_lock);
}

/* ---- control messages (engine lock held) ----------------------------------------------- */
static _Atomic uint32_t next_id;

uint32_t cadre__gpu_ipc_next_id(void)
{
    return (atomic_fetch_add(&next_id, 1) + 1) & 0x3fffffffu;
}

static struct cadre_request *ctl_req(int kind, int w, uint32_t id, void *buf)
{
    struct cadre_request *r = cadre__req_new(kind, "a device-buffer transfer's answer");
    if (!r)
        return NULL;
    r->comm = &cadre__comm_world;
    r->ctx = CADRE_GPU_CTX;
    r->peer = w;
    r->peer_world = w;
    r->tag = (int)id;
    r->elsize = 1;
    r->buf = buf;
    r->bytes = sizeof(int32_t);
    return r;
}

static int ctl_start(struct cadre_request *r, struct cadre_request **out)
{
    if (!r)
        return cadre__error(CADRE_ERR_NOMEM, "no memory for a device-buffer transfer's answer");
    int rc = r->kind == REQ_SEND ? cadre__p2p_start_send(r) : cadre__p2p_start_recv(r);
    if (rc != CADRE_SUCCESS && !atomic_load(&r->done)) {
        cadre__req_free(r);
        return rc;
    }
    *out = r;
    return CADRE_SUCCESS;
}

int cadre__gpu_ipc_post_answer_recv(int w, uint32_t id, int32_t *status,
                                    struct cadre_request **out)
{
    return ctl_start(ctl_req(REQ_RECV, w, id, status), out);
}

int cadre__gpu_ipc_post_answer(int w, uint32_t id, const int32_t *status,
                               struct cadre_request **out)
{
    return ctl_start(ctl_req(REQ_SEND, w, id, (void *)status), out);
}

int cadre__gpu_ipc_post_desc(struct cadre_comm *comm, int w, int tag,
                             const struct gpu_ipc_desc *d)
{
    struct cadre_p2p_hdr h = {.type = CADRE_P2P_EAGER,
                              .flags = CADRE_P2P_DEVICE,
                              .ctx = comm->context_id,
                              .src = comm->rank,
                              .tag = tag,
                              .len = sizeof *d};
    return cadre__p2p_post(w, &h, d, NULL);
}

/* ---- receives that may take a descriptor ---------------------------------------------- */
static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    const void *stage;
    struct gpu_op *op;
} *watched;
static int nwatched, capwatched;

int cadre__gpu_ipc_watch(const void *stage, struct gpu_op *op)
{
    pthread_mutex_lock(&watch_lock);
    if (nwatched == capwatched) {
        int nc = capwatched ? capwatched * 2 : 64;
        void *nw = realloc(watched, (size_t)nc * sizeof *watched);
        if (!nw) {
            pthread_mutex_unlock(&watch_lock);
            return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", op->fn);
        }
        watched = nw;
        capwatched = nc;
    }
    watched[nwatched].stage = stage;
    watched[nwatched].op = op;
    nwatched++;
    pthread_mutex_unlock(&watch_lock);
    return CADRE_SUCCESS;
}

void cadre__gpu_ipc_unwatch(const void *stage)
{
    pthread_mutex_lock(&watch_lock);
    for (int i = 0; i < nwatched; i++)
        if (watched[i].stage == stage) {
            watched[i] = watched[--nwatched];
            break;
        }
    pthread_mutex_unlock(&watch_lock);
}

struct gpu_op *cadre__gpu_ipc_watched(const void *stage)
{
    struct gpu_op *op = NULL;
    pthread_mutex_lock(&watch_lock);
    for (int i = 0; i < nwatched && !op; i++)
        if (watched[i].stage == stage)
            op = watched[i].op;
    pthread_mutex_unlock(&watch_lock);
    return op;
}
#endif /* HAVE_CUDA */
