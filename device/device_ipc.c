/*
 * device_ipc.c - CUDA IPC between the processes of one node: which peers can
 * take it, the handles of this process's allocations (exported once per
 * allocation), the mappings of the peers' (opened once per sender and
 * allocation, closed when found stale or at cadre_finalize), and the small control messages of
 * device_p2p.c's protocol.
 *
 * Cache keys are the allocation's start address and its buffer id
 * (CU_POINTER_ATTRIBUTE_BUFFER_ID, unique over the life of the process): an
 * allocation freed and another made at the same address is a new key, so a
 * stale handle or mapping is never used for it. cudaIpcOpenMemHandle works
 * between processes on one GPU as well as across GPUs with peer access; it
 * fails inside one process, which never sends itself a descriptor.
 *
 * May call: this folder, p2p/ (the engine and requests), bootstrap/, runtime/.
 */
#include "config.h"

#if HAVE_CUDA
#include <cuda.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "device/device_op.h"

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
    pthread_mutex_unlock(&ipc_lock);
    if (s)
        return s > 0;
    /* The first ask: a bootstrap get (a round trip to the PMIx server, which
     * may take seconds) and CUDA queries, outside ipc_lock, which the proxy
     * and every descriptor's delivery (under the engine lock) take. Two
     * threads may both ask; the first answer stored stands. */
    int p = probe(w) ? 1 : -1;
    pthread_mutex_lock(&ipc_lock);
    s = peer_state ? peer_state[w] : p;
    if (!s)
        peer_state[w] = (signed char)p;
    pthread_mutex_unlock(&ipc_lock);
    if (!s)
        CADRE_INFO(DEVICE, "device buffers to rank %d: %s", w,
                   p > 0 ? "CUDA IPC" : "staged through host memory");
    return (s ? s : p) > 0;
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

static void close_stale(void);

int cadre__gpu_ipc_export(const void *buf, struct gpu_ipc_desc *d)
{
    close_stale();
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
/* cudaIpcCloseMemHandle waits for every stream of this process (seen on an
 * H200, tests/gpu/block_probe.cu; cudaIpcOpenMemHandle does not), and the
 * proxy maps in fill_slot while the stream of the very receive it maps for
 * waits on it: the proxy never closes. A mapping found stale (the sender
 * freed the allocation and made another at the same address) goes to
 * `stale`; a calling thread closes the stale ones before it opens (a new
 * allocation at the old address may be the same memory, which cannot be
 * opened while its old mapping stands) and at export. The proxy opens with
 * the old mapping still there; where the driver answers that the memory is
 * already mapped, the old mapping is that memory and is used again. Opens
 * and closes run outside ipc_lock (which the proxy takes), and closes
 * outside open_lock too; open_lock keeps two threads from opening at once. */
struct import {
    int w;
    uint64_t base, bufid;
    void *p;
    struct import *next;
};
static struct import *imports, *stale;
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;

/* Closes the stale mappings, outside ipc_lock; never in the proxy. */
static void close_stale(void)
{
    if (cadre__gpu_in_proxy)
        return;
    pthread_mutex_lock(&ipc_lock);
    struct import *m = stale;
    stale = NULL;
    pthread_mutex_unlock(&ipc_lock);
    while (m) {
        struct import *next = m->next;
        cudaIpcCloseMemHandle(m->p);
        cudaGetLastError();
        free(m);
        m = next;
    }
}

/* The link to the mapping of src_world at d's base in list pp (imports or
 * stale; whichever allocation it was made for), or to the list's end.
 * ipc_lock held. */
static struct import **find(struct import **pp, int src_world, const struct gpu_ipc_desc *d)
{
    while (*pp && ((*pp)->w != src_world || (*pp)->base != d->base))
        pp = &(*pp)->next;
    return pp;
}

/* The cached mapping of (src_world, d), or NULL; a stale one with d's base
 * moves to `stale`. ipc_lock held. */
static void *cached(int src_world, const struct gpu_ipc_desc *d)
{
    struct import **pp = find(&imports, src_world, d), *m = *pp;
    if (!m)
        return NULL;
    if (m->bufid == d->bufid)
        return m->p;
    /* Freed there and allocated again at the same address: every copy
     * from the old one has finished (the sender waited for it). */
    *pp = m->next;
    m->next = stale;
    stale = m;
    return NULL;
}

/* A stale mapping of (src_world, base) taken back as the mapping of d, or
 * NULL. ipc_lock held. */
static struct import *revive(int src_world, const struct gpu_ipc_desc *d)
{
    struct import **pp = find(&stale, src_world, d), *m = *pp;
    if (m) {
        *pp = m->next;
        m->bufid = d->bufid;
    }
    return m;
}

void *cadre__gpu_ipc_mapped(int src_world, const struct gpu_ipc_desc *d)
{
    pthread_mutex_lock(&ipc_lock);
    const struct import *m = *find(&imports, src_world, d);
    void *p = m && m->bufid == d->bufid ? m->p : NULL;
    pthread_mutex_unlock(&ipc_lock);
    return p;
}

int cadre__gpu_ipc_map(int src_world, const struct gpu_ipc_desc *d, const char *fn, void **ptr)
{
    if (d->magic != CADRE_GPU_IPC_MAGIC)
        return cadre__error(CADRE_ERR_INTERNAL, "%s: rank %d sent a malformed device-buffer "
                                                "descriptor", fn, src_world);
    pthread_mutex_lock(&ipc_lock);
    void *p = cached(src_world, d);
    pthread_mutex_unlock(&ipc_lock);
    if (p) {
        *ptr = p;
        return CADRE_SUCCESS;
    }
    close_stale(); /* may wait for the streams: no lock held */
    pthread_mutex_lock(&open_lock);
    pthread_mutex_lock(&ipc_lock);
    p = cached(src_world, d); /* another thread may have opened it meanwhile */
    pthread_mutex_unlock(&ipc_lock);
    if (p) {
        pthread_mutex_unlock(&open_lock);
        *ptr = p;
        return CADRE_SUCCESS;
    }
    struct import *m = calloc(1, sizeof *m);
    cudaError_t e = m ? cudaIpcOpenMemHandle(&p, d->mem, cudaIpcMemLazyEnablePeerAccess)
                      : cudaErrorMemoryAllocation;
    if (e == cudaErrorAlreadyMapped && !cadre__gpu_in_proxy) {
        /* cudaMalloc packs small allocations into one larger one, whose
         * mapping here may stand from a buffer the sender has freed since
         * (seen on an H200: buffers 0x200 bytes apart): every mapping of
         * this sender is closed (when this process's streams are idle) and
         * opened again on demand. */
        cudaGetLastError();
        pthread_mutex_lock(&ipc_lock);
        for (struct import **pp = &imports; *pp;) {
            struct import *o = *pp;
            if (o->w == src_world) {
                *pp = o->next;
                o->next = stale;
                stale = o;
            } else {
                pp = &o->next;
            }
        }
        pthread_mutex_unlock(&ipc_lock);
        pthread_mutex_unlock(&open_lock);
        close_stale();
        pthread_mutex_lock(&open_lock);
        e = cudaIpcOpenMemHandle(&p, d->mem, cudaIpcMemLazyEnablePeerAccess);
    }
    pthread_mutex_lock(&ipc_lock);
    if (e == cudaErrorAlreadyMapped) {
        struct import *old = revive(src_world, d);
        if (old) {
            free(m);
            m = old;
            p = old->p;
            e = cudaSuccess;
        }
    } else if (e == cudaSuccess) {
        m->w = src_world;
        m->base = d->base;
        m->bufid = d->bufid;
        m->p = p;
    }
    if (e == cudaSuccess) {
        m->next = imports;
        imports = m;
    }
    pthread_mutex_unlock(&ipc_lock);
    pthread_mutex_unlock(&open_lock);
    if (e != cudaSuccess) {
        free(m);
        cudaGetLastError();
        return cadre__error(CADRE_ERR_DEVICE,
                            "%s: cannot map rank %d's device buffer (cudaIpcOpenMemHandle: %s)",
                            fn, src_world, cudaGetErrorString(e));
    }
    *ptr = p;
    return CADRE_SUCCESS;
}

void cadre__gpu_ipc_finalize(void)
{
    pthread_mutex_lock(&ipc_lock);
    for (int k = 0; k < 2; k++) {
        struct import **list = k ? &stale : &imports;
        while (*list) {
            struct import *m = *list;
            *list = m->next;
            cudaIpcCloseMemHandle(m->p);
            free(m);
        }
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

int cadre__gpu_ipc_post_desc(struct cadre_comm *comm, int w, int tag, cadre_datatype_t dt,
                             const struct gpu_ipc_desc *d)
{
    struct cadre_p2p_hdr h = {.type = CADRE_P2P_EAGER,
                              .flags = CADRE_P2P_DEVICE,
                              .dt = (uint8_t)(dt + 1),
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
