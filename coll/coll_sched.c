/* Building schedules: their steps and scratch (coll_sched_run.c runs them). */
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_fast.h"
#include "coll_sig.h"

int32_t cadre__coll_next_tag(struct cadre_comm *c)
{
    return (int32_t)(c->coll_seq++ & 0x3fffffff);
}

int cadre__sched_init(struct coll_sched *s, struct cadre_comm *comm, const char *op_name,
                      cadre_datatype_t dt, cadre_op_t op)
{
    memset(s, 0, sizeof *s);
    s->comm = comm;
    s->op_name = op_name;
    s->dt = dt;
    s->op = op;
    s->elsize = cadre_datatype_size(dt);
    s->ctx = cadre__coll_ctx(comm);
    s->tag = cadre__coll_next_tag(comm);
    return CADRE_SUCCESS;
}

int cadre__sched_init_on(struct coll_sched *s, struct cadre_comm *comm, const char *op_name,
                         uint32_t ctx, int32_t tag)
{
    memset(s, 0, sizeof *s);
    s->comm = comm;
    s->op_name = op_name;
    s->dt = CADRE_UINT8;
    s->op = CADRE_SUM;
    s->elsize = 1;
    s->ctx = ctx;
    s->tag = tag;
    return CADRE_SUCCESS;
}

/* ---- scratch kept between schedules --------------------------------------------- */
/* A large scratch block that went back to malloc went back to the kernel
 * (glibc trims the heap, or unmaps it), and the next call faulted every page
 * in again: a 2-rank 16 MiB allreduce in 8 chunks spent 4% of its cycles in
 * page faults. Blocks of SCRATCH_KEEP_MIN bytes or more are kept for the next
 * schedule instead, at most SCRATCH_KEEP_N of them and SCRATCH_KEEP_MAX bytes
 * in all, and freed at finalize. */
#define SCRATCH_KEEP_MIN ((size_t)64 << 10)
#define SCRATCH_KEEP_MAX ((size_t)64 << 20)
#define SCRATCH_KEEP_N 16

static struct {
    void *p;
    size_t n;
} keep[SCRATCH_KEEP_N];
static int nkeep;
static size_t kept;
static pthread_mutex_t keep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t keep_once = PTHREAD_ONCE_INIT;

static void keep_release(void)
{
    pthread_mutex_lock(&keep_lock);
    for (int i = 0; i < nkeep; i++)
        free(keep[i].p);
    nkeep = 0;
    kept = 0;
    pthread_mutex_unlock(&keep_lock);
}

static void keep_init(void)
{
    cadre__at_finalize(keep_release);
}

/* The smallest kept block of bytes to twice that, or a new one. */
static void *scratch_get(size_t bytes)
{
    if (bytes >= SCRATCH_KEEP_MIN) {
        pthread_mutex_lock(&keep_lock);
        int best = -1;
        for (int i = 0; i < nkeep; i++)
            if (keep[i].n >= bytes && keep[i].n / 2 <= bytes && (best < 0 || keep[i].n < keep[best].n))
                best = i;
        if (best >= 0) {
            void *p = keep[best].p;
            kept -= keep[best].n;
            keep[best] = keep[--nkeep];
            pthread_mutex_unlock(&keep_lock);
            return p;
        }
        pthread_mutex_unlock(&keep_lock);
    }
    return malloc(bytes ? bytes : 1);
}

static void scratch_put(void *p)
{
    size_t n = malloc_usable_size(p);
    if (n >= SCRATCH_KEEP_MIN) {
        pthread_once(&keep_once, keep_init);
        pthread_mutex_lock(&keep_lock);
        if (nkeep < SCRATCH_KEEP_N && kept + n <= SCRATCH_KEEP_MAX) {
            keep[nkeep].p = p;
            keep[nkeep++].n = n;
            kept += n;
            p = NULL;
        }
        pthread_mutex_unlock(&keep_lock);
    }
    free(p);
}

void cadre__sched_free(struct coll_sched *s)
{
    if (s->direct_live)
        cadre__direct_gone(s);
    for (int i = 0; i < s->ntmp; i++)
        scratch_put(s->tmp[i]);
    free(s->tmp);
    free(s->steps);
    free(s->round_end);
    free(s->reqs);
    memset(s, 0, sizeof *s);
}

static int add_step(struct coll_sched *s, struct coll_step st)
{
    if (s->nsteps == s->cap) {
        int ncap = s->cap ? s->cap * 2 : 16;
        struct coll_step *n = realloc(s->steps, (size_t)ncap * sizeof *n);
        if (!n)
            return cadre__error(CADRE_ERR_NOMEM, "%s: no memory for its schedule", s->op_name);
        s->steps = n;
        s->cap = ncap;
    }
    s->steps[s->nsteps++] = st;
    return CADRE_SUCCESS;
}

int cadre__sched_send(struct coll_sched *s, int peer, const void *buf, size_t bytes)
{
    return add_step(s, (struct coll_step){.kind = CS_SEND, .peer = peer, .src = buf, .n = bytes});
}

int cadre__sched_recv(struct coll_sched *s, int peer, void *buf, size_t bytes)
{
    return add_step(s, (struct coll_step){.kind = CS_RECV, .peer = peer, .dst = buf, .n = bytes});
}

int cadre__sched_recv_upto(struct coll_sched *s, int peer, void *buf, size_t bytes)
{
    return add_step(s, (struct coll_step){.kind = CS_RECV, .peer = peer, .dst = buf, .n = bytes,
                                          .upto = 1});
}

int cadre__sched_reduce(struct coll_sched *s, void *dst, const void *src, size_t count)
{
    if (!count)
        return CADRE_SUCCESS;
    return add_step(s, (struct coll_step){.kind = CS_REDUCE, .dst = dst, .src = src, .n = count});
}

int cadre__sched_reduce_to(struct coll_sched *s, void *dst, const void *a, const void *b,
                           size_t count)
{
    if (!count)
        return CADRE_SUCCESS;
    if (dst == a)
        return cadre__sched_reduce(s, dst, b, count);
    return add_step(s, (struct coll_step){.kind = CS_REDUCE, .dst = dst, .src = b, .src2 = a,
                                          .n = count});
}

int cadre__sched_copy(struct coll_sched *s, void *dst, const void *src, size_t bytes)
{
    if (!bytes || dst == src)
        return CADRE_SUCCESS;
    return add_step(s, (struct coll_step){.kind = CS_COPY, .dst = dst, .src = src, .n = bytes});
}

int cadre__sched_call(struct coll_sched *s, coll_call_fn fn, void *arg)
{
    return add_step(s, (struct coll_step){.kind = CS_CALL, .call = fn, .arg = arg});
}

int cadre__sched_barrier(struct coll_sched *s)
{
    int start = s->nrounds ? s->round_end[s->nrounds - 1] : 0;
    if (s->nsteps == start)
        return CADRE_SUCCESS; /* an empty round is no round */
    if (s->nrounds == s->rcap) {
        int ncap = s->rcap ? s->rcap * 2 : 16;
        int *n = realloc(s->round_end, (size_t)ncap * sizeof *n);
        if (!n)
            return cadre__error(CADRE_ERR_NOMEM, "%s: no memory for its schedule", s->op_name);
        s->round_end = n;
        s->rcap = ncap;
    }
    s->round_end[s->nrounds++] = s->nsteps;
    return CADRE_SUCCESS;
}

void *cadre__sched_alloc(struct coll_sched *s, size_t bytes)
{
    if (s->ntmp == s->tcap) {
        int ncap = s->tcap ? s->tcap * 2 : 4;
        void **n = realloc(s->tmp, (size_t)ncap * sizeof *n);
        if (!n)
            return NULL;
        s->tmp = n;
        s->tcap = ncap;
    }
    void *p = scratch_get(bytes);
    if (p)
        s->tmp[s->ntmp++] = p;
    return p;
}
