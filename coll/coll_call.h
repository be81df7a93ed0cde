/*
 * coll_call.h - what every public collective (coll_api_*.c) does around
 * its algorithm: the argument checks, the choice of algorithm (the tables
 * of coll_select.c, CADRE_ALGO, the COLL log line; coll_call.c) and the
 * start of the schedule on an executor.
 *
 * The checks are static inline: they ran inlined in the calls before the
 * collectives were split over several files, and the small calls pay for
 * every cycle. May call runtime (errors, config, log, the device path's
 * table), p2p (the communicator), coll's schedules.
 */
#ifndef CADRE_COLL_CALL_H
#define CADRE_COLL_CALL_H

#include <stdlib.h>
#include <string.h>

#include "coll_fast.h"
#include "coll_hier.h"
#include "coll_select.h"
#include "coll_sig.h"
#include "runtime/runtime_device.h"

/* ---- argument checks ------------------------------------------------------------------- */
struct call {
    const char *fn;
    struct cadre_comm *comm;
    cadre_datatype_t dt;
    size_t es;
    int n, me;
};

static inline int check_comm_dt(struct call *c, const char *fn, cadre_comm_t comm,
                                cadre_datatype_t dt)
{
    c->fn = fn;
    CADRE_CHECK(cadre__check_initialized(fn));
    int st;
    c->comm = cadre__comm_get(comm, fn, &st);
    if (!c->comm)
        return st;
    c->dt = dt;
    c->es = cadre_datatype_size(dt);
    if (!c->es)
        return cadre__error(CADRE_ERR_ARG, "%s: unknown datatype %d", fn, (int)dt);
    c->n = c->comm->size;
    c->me = c->comm->rank;
    if (cadre__coll_any_poisoned())
        return cadre__coll_poisoned(cadre__coll_ctx(c->comm), fn);
    return CADRE_SUCCESS;
}

static inline int is_float(cadre_datatype_t dt)
{
    return dt == CADRE_FLOAT16 || dt == CADRE_BFLOAT16 || dt == CADRE_FLOAT32 ||
           dt == CADRE_FLOAT64;
}

static inline int check_op(const struct call *c, cadre_datatype_t dt, cadre_op_t op)
{
    if ((int)op < CADRE_SUM || (int)op > CADRE_AVG)
        return cadre__error(CADRE_ERR_ARG, "%s: unknown op %d", c->fn, (int)op);
    if (op == CADRE_AVG && !is_float(dt))
        return cadre__error(CADRE_ERR_ARG,
                            "%s: CADRE_AVG is valid for floating-point datatypes only, not %s",
                            c->fn, cadre__datatype_name(dt));
    return CADRE_SUCCESS;
}

/* `count` elements, times `mult` ranks, at buf (the buffer `name`; NULL
 * where only the count is known) fit in the address space; *bytes gets
 * their size. */
static inline int check_span(const struct call *c, const char *what, size_t count, size_t mult,
                      const char *name, const void *buf, size_t *bytes)
{
    return cadre__check_span(c->fn, what, count, mult, c->dt, name,
                             buf == CADRE_IN_PLACE ? NULL : buf, bytes);
}

/* The send and receive bytes of this rank share none: a collective's
 * receives may land before its sends have read (or, in the shared-memory
 * slots, after they copied only part), so overlapping buffers would give
 * wrong data. A sendbuf at `same` (NULL: nowhere) is the very place
 * CADRE_IN_PLACE reads from and writes to, in the calls where the in-place
 * input and result start at the same address on every rank, and is taken as
 * CADRE_IN_PLACE (cadre(7)). */
static inline int check_apart(const struct call *c, const void *sbuf, size_t sbytes,
                              const void *rbuf, size_t rbytes, const void *same)
{
    if (same && sbuf == same)
        return CADRE_SUCCESS;
    return cadre__check_overlap(c->fn, sbuf, sbytes, rbuf, rbytes,
                                "use CADRE_IN_PLACE (see cadre(7))");
}

static inline int check_buf(const struct call *c, const char *name, const void *buf, size_t bytes)
{
    CADRE_CHECK(cadre__check_not_in_place(c->fn, name, buf));
    if (!buf && bytes)
        return cadre__error(CADRE_ERR_ARG, "%s: %s is NULL with %zu bytes to move", c->fn, name,
                            bytes);
    return CADRE_SUCCESS;
}

static inline int check_root(const struct call *c, int root)
{
    if (root < 0 || root >= c->n)
        return cadre__error(CADRE_ERR_ARG, "%s: root %d out of range [0,%d)", c->fn, root, c->n);
    return CADRE_SUCCESS;
}

static inline int check_vec(const struct call *c, const char *name, const size_t *v)
{
    if (!v)
        return cadre__error(CADRE_ERR_ARG, "%s: %s is NULL", c->fn, name);
    return CADRE_SUCCESS;
}

/* The counts and displacements of a v-collective's buffer `name`: present,
 * each block in the address space. *lo and *hi get the bytes from buf that
 * the nonempty blocks span (equal when nothing moves). */
static inline int check_layout(const struct call *c, const char *name, const void *buf,
                        const char *counts_name, const size_t *counts, const char *displs_name,
                        const size_t *displs, size_t *lo, size_t *hi)
{
    CADRE_CHECK(check_vec(c, counts_name, counts));
    CADRE_CHECK(check_vec(c, displs_name, displs));
    CADRE_CHECK(cadre__check_layout(c->fn, name, buf == CADRE_IN_PLACE ? NULL : buf, counts_name,
                                    counts, displs_name, displs, c->n, c->dt, lo, hi));
    *lo *= c->es;
    *hi *= c->es;
    return CADRE_SUCCESS;
}

/* The nonempty receive blocks of a v-collective (counts, displs in
 * elements) share no element: where two overlap, the peers' data would land
 * on each other and one rank's block come out wrong, with success (MPI calls
 * such a call erroneous). Blocks in increasing order (the usual layout, and
 * every equal-count call) cost one pass; others are sorted. */
struct vblock {
    size_t d, n;
    int i;
};
static inline int vblock_cmp(const void *a, const void *b)
{
    const struct vblock *x = a, *y = b;
    return x->d < y->d ? -1 : x->d > y->d ? 1 : x->i - y->i;
}
static inline int check_disjoint(const struct call *c, const char *name, const char *counts_name,
                                 const size_t *counts, const char *displs_name,
                                 const size_t *displs)
{
    size_t end = 0;
    int prev = -1, sorted = 1;
    for (int i = 0; i < c->n && sorted; i++) {
        if (!counts[i])
            continue;
        if (prev >= 0 && displs[i] < end)
            sorted = 0;
        else
            end = displs[i] + counts[i], prev = i;
    }
    if (sorted)
        return CADRE_SUCCESS;
    struct vblock *b = malloc((size_t)c->n * sizeof *b);
    if (!b)
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", c->fn);
    int m = 0;
    for (int i = 0; i < c->n; i++)
        if (counts[i])
            b[m++] = (struct vblock){displs[i], counts[i], i};
    qsort(b, (size_t)m, sizeof *b, vblock_cmp);
    for (int k = 1; k < m; k++) {
        if (b[k].d < b[k - 1].d + b[k - 1].n) {
            const struct vblock x = b[k - 1], y = b[k];
            free(b);
            int lo = x.i < y.i ? 0 : 1;
            const struct vblock *f = lo ? &y : &x, *g = lo ? &x : &y;
            return cadre__error(CADRE_ERR_ARG,
                                "%s: the blocks of %s overlap: %s[%d] %zu + %s[%d] %zu and "
                                "%s[%d] %zu + %s[%d] %zu share elements",
                                c->fn, name, displs_name, f->i, f->d, counts_name, f->i, f->n,
                                displs_name, g->i, g->d, counts_name, g->i, g->n);
        }
    }
    free(b);
    return CADRE_SUCCESS;
}

/* gatherv_impl and scatterv_impl also serve the equal-count calls: the
 * signature tells them apart by the public name ("cadre_igatherv"). */
static inline int vector_variant(const char *fn)
{
    size_t n = strlen(fn);
    return n && fn[n - 1] == 'v';
}

/* gather and its friends with equal counts make the vectors they need; the
 * vectors must outlive a nonblocking call, so they live in the schedule. */
static inline int equal_vectors(const struct call *c, size_t count, size_t **counts,
                                size_t **displs)
{
    *counts = malloc((size_t)c->n * sizeof **counts);
    *displs = malloc((size_t)c->n * sizeof **displs);
    if (!*counts || !*displs) {
        free(*counts);
        free(*displs);
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", c->fn);
    }
    for (int i = 0; i < c->n; i++) {
        (*counts)[i] = count;
        (*displs)[i] = (size_t)i * count;
    }
    return CADRE_SUCCESS;
}

/* ---- running -------------------------------------------------------------------------- */
static inline int begin(struct coll_sched *s, const struct call *c, cadre_datatype_t dt,
                        cadre_op_t op)
{
    cadre__sched_init(s, c->comm, c->fn, dt, op == CADRE_AVG ? CADRE_SUM : op);
    return CADRE_SUCCESS;
}

/* Runs (req NULL) or starts (req given) a built schedule; frees it on error. */
static inline int finish(struct coll_sched *s, int build_rc, cadre_request_t *req)
{
    if (build_rc != CADRE_SUCCESS) {
        cadre__sched_free(s);
        return build_rc;
    }
    if (cadre__gpu_enabled()) { int g = cadre__gpu.sched(s, req); if (g != CADRE__GPU_NOT_MINE) return g; }
    return req ? cadre__sched_start(s, req) : cadre__sched_run(s);
}

static inline void avg_after(struct coll_sched *s, cadre_op_t op, void *buf, size_t count)
{
    if (op == CADRE_AVG && count) {
        s->scale_buf = buf;
        s->scale_n = count;
        s->scale_div = s->comm->size;
    }
}

#define REQ_CHECK(fn, req)                                                        \
    do {                                                                          \
        if (nb && !(req))                                                         \
            return cadre__error(CADRE_ERR_ARG, "%s: req is NULL", fn);            \
    } while (0)

/* ---- the choice of algorithm (coll_call.c) -------------------------------------------- */
/* Fills in's communicator facts (ranks, hosts, memory kind), applies the
 * table with CADRE_ALGO and logs the first choice of each (collective,
 * algorithm, size class) on the communicator. The caller set kind, nb,
 * bytes and what its table reads (equal, block, count, elsize). */
void cadre__coll_choose(const struct call *c, struct coll_in *in, struct coll_choice *ch);
/* The COLL INFO line of a choice, once per (communicator, collective,
 * algorithm, size class); also for the device stage (device/device_direct_call.c). */
void cadre__coll_log_choice(struct cadre_comm *comm, enum coll_kind k, enum coll_algo a,
                            size_t bytes, int hosts, const char *why);
/* The algorithm's number in the signature (coll_sig.h). */
/* The coll_hier.h number of a two-level algorithm of the table. */
static inline int hier_algo(enum coll_algo a)
{
    return a == COLL_ALGO_HIER_LEADER ? HA_LEADER : a == COLL_ALGO_HIER_SPLIT ? HA_SPLIT : HA_RING;
}
static inline int is_hier(enum coll_algo a)
{
    return a == COLL_ALGO_HIER_LEADER || a == COLL_ALGO_HIER_SPLIT || a == COLL_ALGO_HIER_RING;
}

/* Takers of the shared-memory exchange (cadre__fast_exchange). gather_take:
 * rank q's block to its place in rbuf (allgather(v), gather); scatter_take:
 * this rank's block (at displs[me]) of the root's published buffer to rbuf
 * (scatter). */
struct block_take {
    char *rbuf;
    const size_t *counts, *displs; /* allgatherv, gather, scatter */
    size_t es, off, bytes;         /* alltoall: block `off` of each rank to q*bytes */
    int me;                        /* scatter */
};
static inline void gather_take(void *arg, int q, const unsigned char *d)
{
    struct block_take *t = arg;
    char *dst = t->rbuf + t->displs[q] * t->es;
    if (t->counts[q] && (const unsigned char *)dst != d)
        memmove(dst, d, t->counts[q] * t->es);
}
static inline void scatter_take(void *arg, int q, const unsigned char *d)
{
    struct block_take *t = arg;
    (void)q;
    const unsigned char *src = d + t->displs[t->me] * t->es;
    if (t->counts[t->me] && (const unsigned char *)t->rbuf != src)
        memmove(t->rbuf, src, t->counts[t->me] * t->es);
}

static inline int algo_code(const struct coll_in *in, const struct coll_choice *ch)
{
    return cadre__coll_algo_code(in->kind, ch->algo);
}

#endif
