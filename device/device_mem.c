/*
 * device_mem.c - the CUDA services of the device-buffer path: which memory
 * a pointer is (cadre__gpu_classify), CUDA failures as statuses, the pools
 * of pinned staging buffers, host-mapped completion flags and events (grown
 * on demand, freed at cadre_finalize only, since cudaFreeHost synchronizes
 * the device), and the stream wait on a flag (cuStreamWaitValue32, or a
 * spin kernel). See device_proxy.c for the design they serve.
 *
 * May call: runtime/ (errors, logging, config) and the kernels of this
 * folder; nothing above.
 */
#include "config.h"

#if HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device_mem.h"
#include "runtime/runtime.h"

/* ---- driver entry points (no link against libcuda: it is absent where no
 *      driver is installed, and libcadre must load there) ------------------ */
typedef CUresult (*pfn_ptr_attrs)(unsigned, CUpointer_attribute *, void **, CUdeviceptr);
typedef CUresult (*pfn_mem32)(CUstream, CUdeviceptr, cuuint32_t, unsigned);
static pfn_ptr_attrs p_ptr_attrs;
static pfn_mem32 p_wait32, p_write32;
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
        p_wait32 = (pfn_mem32)f;
    f = NULL;
    if (cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &f, 12000, cudaEnableDefault,
                                         &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
        p_write32 = (pfn_mem32)f;
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
    int room = nstage_all < (int)(sizeof stage_all / sizeof *stage_all);
    pthread_mutex_unlock(&pool_lock);
    /* cudaHostAlloc may wait for the device: never under pool_lock, which
     * the proxy takes to recycle before it releases a waiting stream. */
    struct stage *s = room ? calloc(1, sizeof *s) : NULL;
    if (!s) {
        *rc = cadre__error(CADRE_ERR_NOMEM, "%s: no memory for a staging buffer", fn);
        return NULL;
    }
    /* Mapped: the copy kernel of a CUDA IPC-capable receive reads it. */
    cudaError_t e =
        cudaHostAlloc((void **)&s->p, cap, cudaHostAllocMapped | cudaHostAllocPortable);
    if (e != cudaSuccess) {
        free(s);
        *rc = cadre__gpu_cuda_fail(e, fn, "cudaHostAlloc of a staging buffer");
        return NULL;
    }
    s->cap = cap;
    pthread_mutex_lock(&pool_lock);
    room = nstage_all < (int)(sizeof stage_all / sizeof *stage_all);
    if (room)
        stage_all[nstage_all++] = s;
    pthread_mutex_unlock(&pool_lock);
    if (!room) { /* the table filled meanwhile */
        cudaFreeHost(s->p);
        free(s);
        *rc = cadre__error(CADRE_ERR_NOMEM, "%s: no room for another staging buffer", fn);
        return NULL;
    }
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

struct flag *cadre__gpu_flag_get(const char *fn, int *rc)
{
    pthread_mutex_lock(&pool_lock);
    while (!flag_free) {
        int room = nflag_blocks < 64;
        pthread_mutex_unlock(&pool_lock);
        /* cudaHostAlloc may wait for the device: not under pool_lock (see
         * cadre__gpu_stage_get) */
        unsigned int *words = NULL;
        struct flag *f = room ? calloc(FLAGS_PER_BLOCK, sizeof *f) : NULL;
        cudaError_t e = cudaErrorMemoryAllocation;
        if (f)
            e = cudaHostAlloc((void **)&words, FLAGS_PER_BLOCK * sizeof *words,
                              cudaHostAllocMapped | cudaHostAllocPortable);
        if (e != cudaSuccess) {
            free(f);
            *rc = cadre__gpu_cuda_fail(e, fn, "cudaHostAlloc of completion flags");
            return NULL;
        }
        pthread_mutex_lock(&pool_lock);
        if (nflag_blocks >= 64) {
            pthread_mutex_unlock(&pool_lock);
            cudaFreeHost(words);
            free(f);
            *rc = cadre__gpu_cuda_fail(cudaErrorMemoryAllocation, fn,
                                       "cudaHostAlloc of completion flags (64 blocks in use)");
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

int cadre__gpu_ev_get(cudaEvent_t *ev, const char *fn)
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

void cadre__gpu_ev_put(cudaEvent_t ev)
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

void cadre__gpu_pools_free(void)
{
    for (int i = 0; i < nstage_all; i++) {
        cudaFreeHost(stage_all[i]->p);
        free(stage_all[i]);
    }
    nstage_all = 0;
    stage_free = NULL;
    while (nev_free)
        cudaEventDestroy(ev_free[--nev_free]);
}

int cadre__gpu_stream_memops(void)
{
    pthread_once(&sym_once, load_syms);
    return p_wait32 && p_write32;
}

cudaError_t cadre__gpu_stream_wait_geq(const void *addr, uint32_t v, cudaStream_t st)
{
    CUresult r = p_wait32((CUstream)st, (CUdeviceptr)(uintptr_t)addr, v,
                          CU_STREAM_WAIT_VALUE_GEQ);
    return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorUnknown;
}

cudaError_t cadre__gpu_stream_write(void *addr, uint32_t v, cudaStream_t st)
{
    CUresult r = p_write32((CUstream)st, (CUdeviceptr)(uintptr_t)addr, v,
                           CU_STREAM_WRITE_VALUE_DEFAULT);
    return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorUnknown;
}

int cadre__gpu_stream_wait(volatile unsigned int *flag, cudaStream_t st, const char *fn)
{
    if (wait_mode) {
        if (cadre__gpu_stream_wait_geq((const void *)flag, 1, st) == cudaSuccess)
            return CADRE_SUCCESS;
        CADRE_INFO(DEVICE, "cuStreamWaitValue32 failed: streams wait with a spin kernel");
        wait_mode = 0;
    }
    int e = cadre__gpu_spin_wait(flag, 1, st);
    return e == 0 ? CADRE_SUCCESS
                  : cadre__gpu_cuda_fail((cudaError_t)e, fn, "the stream wait kernel");
}

#endif /* HAVE_CUDA */
