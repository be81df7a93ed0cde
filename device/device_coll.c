/*
 * device_coll.c - the device executor of the collectives: a schedule whose
 * buffers are device memory runs, unchanged, on pinned staging copies of
 * them. The device intervals the schedule reads are copied to staging on
 * the stream, the proxy (device_proxy.c) runs the schedule with the
 * host executor once they are there, and the intervals it wrote are copied
 * back; the design is in device_proxy.c.
 *
 * May call: this folder (the device operations of device_op.h), coll/ (the
 * schedule executor, coll_sched_run.c), p2p/, runtime/.
 */
#include "config.h"

#if HAVE_CUDA
#include <cuda_runtime.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "device/device_coll.h"
#include "device/device_op.h"

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

/* Whether a buffer of the schedule is device memory (asked without
 * allocating: the answer on the out-of-memory path). */
static int any_device(const struct coll_sched *s)
{
    char *base;
    size_t size;
    for (int i = 0; i < s->nsteps; i++) {
        const struct coll_step *st = &s->steps[i];
        if ((st->src && cadre__gpu_classify(st->src, &base, &size)) ||
            (st->dst && cadre__gpu_classify(st->dst, &base, &size)) ||
            (st->src2 && cadre__gpu_classify(st->src2, &base, &size)))
            return 1;
    }
    return s->scale_buf && cadre__gpu_classify(s->scale_buf, &base, &size);
}

/* The proxy's calls of an OP_SCHED's work: the schedule, on staging. */
static int work_start(void *work, cadre_request_t *req)
{
    int rc = cadre__sched_start(work, req);
    free(work);
    return rc;
}

static void work_drop(void *work)
{
    cadre__sched_free(work);
    free(work);
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
            rc = add_rng(&v, &n, &cap, st->dst, st->n * s->elsize, !st->src2, 1);
            if (rc == CADRE_SUCCESS)
                rc = add_rng(&v, &n, &cap, st->src, st->n * s->elsize, 1, 0);
            if (rc == CADRE_SUCCESS && st->src2)
                rc = add_rng(&v, &n, &cap, st->src2, st->n * s->elsize, 1, 0);
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
        /* Out of memory before the buffers were classified: the host
         * executor must not run a schedule on device buffers. */
        free(v);
        if (!any_device(s))
            return CADRE__GPU_NOT_MINE;
        cadre__sched_free(s);
        return cadre__error(CADRE_ERR_NOMEM,
                            "%s: no memory for the list of device buffer ranges (rank %d)", fn,
                            s->comm->rank);
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
    struct coll_sched *w = NULL;
    if (!(op->stage = cadre__gpu_stage_get(total, fn, &rc)) || !(w = malloc(sizeof *w))) {
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
        if (st->src2)
            st->src2 = remap(d, nd, st->src2, stg);
    }
    if (s->scale_buf)
        s->scale_buf = remap(d, nd, s->scale_buf, stg);
    *w = *s;
    memset(s, 0, sizeof *s);
    op->work = w;
    op->work_start = work_start;
    op->work_drop = work_drop;

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
