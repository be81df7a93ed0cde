/* Public collectives: argument checks, CADRE_IN_PLACE, the choice of
 * algorithm (by size and rank count, or CADRE_ALGO), then the executor.
 * Each blocking call has a nonblocking twin with a trailing request. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_fast.h"
#include "coll_hier.h"
#include "coll_sig.h"
#include "gpu/gpu.h"

/* ---- CADRE_ALGO ------------------------------------------------------------------ */
enum coll_kind {
    K_BARRIER, K_BCAST, K_REDUCE, K_ALLREDUCE, K_GATHER, K_ALLGATHER, K_SCATTER,
    K_REDUCE_SCATTER, K_ALLTOALL, K_COUNT
};
static const char *const kind_names[K_COUNT] = {"barrier", "bcast", "reduce", "allreduce",
                                                "gather", "allgather", "scatter",
                                                "reduce_scatter", "alltoall"};
/* The algorithms each collective has; the first is the name "auto" picks from. */
static const char *const algos[K_COUNT][4] = {
    [K_BARRIER] = {"dissemination"},
    [K_BCAST] = {"binomial", "pipeline", "direct"},
    [K_REDUCE] = {"binomial"},
    [K_ALLREDUCE] = {"recursive_doubling", "ring", "direct", "split"},
    [K_GATHER] = {"linear"},
    [K_ALLGATHER] = {"ring", "recursive_doubling", "direct"},
    [K_SCATTER] = {"linear"},
    [K_REDUCE_SCATTER] = {"ring", "direct"},
    [K_ALLTOALL] = {"pairwise"},
};
static int forced[K_COUNT]; /* index+1 into algos[k], 0 = choose by size */
static pthread_once_t algo_once = PTHREAD_ONCE_INIT;

static void parse_algo(void)
{
    const char *v = cadre__config_str(CADRE_CFG_ALGO);
    if (!*v)
        return;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", v);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        int ok = 0;
        if (eq && !strncmp(eq + 1, "hier_", 5))
            continue; /* the two-level algorithms' (coll_hier.c) */
        if (eq) {
            *eq = '\0';
            for (int k = 0; k < K_COUNT; k++) {
                if (strcmp(tok, kind_names[k]))
                    continue;
                for (int a = 0; a < 4 && algos[k][a]; a++)
                    if (!strcmp(eq + 1, algos[k][a]) || (!strcmp(eq + 1, "rd") &&
                                                         !strcmp(algos[k][a], "recursive_doubling")))
                        forced[k] = a + 1, ok = 1;
                if (!strcmp(eq + 1, "auto"))
                    ok = 1;
            }
        }
        if (!ok)
            CADRE_WARN(COLL, "CADRE_ALGO: ignoring \"%s%s%s\" (collective=algorithm; see cadre(7))",
                       tok, eq ? "=" : "", eq ? eq + 1 : "");
    }
}

static int algo_forced(int kind)
{
    pthread_once(&algo_once, parse_algo);
    return forced[kind];
}

/* The shared-memory slots serve this call. Not in a process with a GPU
 * bound: its buffers may be device memory, which the device path (gpu/)
 * stages from the schedules; the slots and the direct algorithms copy with
 * the CPU. */
static int shm_ok(struct cadre_comm *c)
{
    return !cadre__gpu_enabled() && cadre__fast_get(c);
}

/* Whether the direct algorithms (coll_direct.c) may run on c: every member
 * on this node through shm, and no GPU bound (see coll_fast.c). */
static int direct_ok(struct cadre_comm *c)
{
    return !cadre__gpu_enabled() && cadre__direct_usable(c);
}

/* ---- argument checks ------------------------------------------------------------------- */
struct call {
    const char *fn;
    struct cadre_comm *comm;
    cadre_datatype_t dt;
    size_t es;
    int n, me;
};

static int check_comm_dt(struct call *c, const char *fn, cadre_comm_t comm, cadre_datatype_t dt)
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

static int is_float(cadre_datatype_t dt)
{
    return dt == CADRE_FLOAT16 || dt == CADRE_BFLOAT16 || dt == CADRE_FLOAT32 || dt == CADRE_FLOAT64;
}

static int check_op(const struct call *c, cadre_datatype_t dt, cadre_op_t op)
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
static int check_span(const struct call *c, const char *what, size_t count, size_t mult,
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
static int check_apart(const struct call *c, const void *sbuf, size_t sbytes, const void *rbuf,
                       size_t rbytes, const void *same)
{
    if (same && sbuf == same)
        return CADRE_SUCCESS;
    return cadre__check_overlap(c->fn, sbuf, sbytes, rbuf, rbytes,
                                "use CADRE_IN_PLACE (see cadre(7))");
}

static int check_buf(const struct call *c, const char *name, const void *buf, size_t bytes)
{
    if (buf == CADRE_IN_PLACE)
        return cadre__error(CADRE_ERR_ARG, "%s: CADRE_IN_PLACE is not valid for %s here", c->fn,
                            name);
    if (!buf && bytes)
        return cadre__error(CADRE_ERR_ARG, "%s: %s is NULL with %zu bytes to move", c->fn, name,
                            bytes);
    return CADRE_SUCCESS;
}

static int check_root(const struct call *c, int root)
{
    if (root < 0 || root >= c->n)
        return cadre__error(CADRE_ERR_ARG, "%s: root %d out of range [0,%d)", c->fn, root, c->n);
    return CADRE_SUCCESS;
}

static int check_vec(const struct call *c, const char *name, const size_t *v)
{
    if (!v)
        return cadre__error(CADRE_ERR_ARG, "%s: %s is NULL", c->fn, name);
    return CADRE_SUCCESS;
}

/* The counts and displacements of a v-collective's buffer `name`: present,
 * each block in the address space. *lo and *hi get the bytes from buf that
 * the nonempty blocks span (equal when nothing moves). */
static int check_layout(const struct call *c, const char *name, const void *buf,
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

/* gatherv_impl and scatterv_impl also serve the equal-count calls: the
 * signature tells them apart by the public name ("cadre_igatherv"). */
static int vector_variant(const char *fn)
{
    size_t n = strlen(fn);
    return n && fn[n - 1] == 'v';
}

/* ---- running -------------------------------------------------------------------------- */
static int begin(struct coll_sched *s, const struct call *c, cadre_datatype_t dt, cadre_op_t op)
{
    cadre__sched_init(s, c->comm, c->fn, dt, op == CADRE_AVG ? CADRE_SUM : op);
    return CADRE_SUCCESS;
}

/* Runs (req NULL) or starts (req given) a built schedule; frees it on error. */
static int finish(struct coll_sched *s, int build_rc, cadre_request_t *req)
{
    if (build_rc != CADRE_SUCCESS) {
        cadre__sched_free(s);
        return build_rc;
    }
    if (cadre__gpu_enabled()) { int g = cadre__gpu_sched(s, req); if (g != CADRE__GPU_NOT_MINE) return g; }
    return req ? cadre__sched_start(s, req) : cadre__sched_run(s);
}

static void avg_after(struct coll_sched *s, cadre_op_t op, void *buf, size_t count)
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

/* ---- barrier --------------------------------------------------------------------------- */
static int barrier_impl(const char *fn, cadre_comm_t comm, cadre_request_t *req, int nb)
{
    REQ_CHECK(fn, req);
    struct call c;
    CADRE_CHECK(check_comm_dt(&c, fn, comm, CADRE_UINT8));
    if (!nb && shm_ok(c.comm))
        return cadre__fast_barrier(c.comm, fn, cadre__sig(SIG_BARRIER, SIG_NO_DT, SIG_NO_OP, 7,
                                                         SIG_NO_ROOT, 0));
    struct coll_sched s;
    begin(&s, &c, CADRE_UINT8, CADRE_SUM);
    int h = cadre__hier_pick(c.comm, HK_BARRIER, 0, algo_forced(K_BARRIER));
    if (h) {
        s.sig = cadre__sig(SIG_BARRIER, SIG_NO_DT, SIG_NO_OP, cadre__hier_sig_algo(h), SIG_NO_ROOT, 0);
        return finish(&s, cadre__hier_barrier(&s, h), req);
    }
    s.sig = cadre__sig(SIG_BARRIER, SIG_NO_DT, SIG_NO_OP, 1, SIG_NO_ROOT, 0);
    return finish(&s, cadre__algo_barrier_dissemination(&s), req);
}
int cadre_barrier(cadre_comm_t comm)
{
    return barrier_impl("cadre_barrier", comm, NULL, 0);
}
int cadre_ibarrier(cadre_comm_t comm, cadre_request_t *req)
{
    return barrier_impl("cadre_ibarrier", comm, req, 1);
}

/* ---- bcast ------------------------------------------------------------------------------ */
static int bcast_impl(const char *fn, void *buf, size_t count, cadre_datatype_t dt, int root,
                      cadre_comm_t comm, cadre_request_t *req, int nb)
{
    REQ_CHECK(fn, req);
    struct call c;
    CADRE_CHECK(check_comm_dt(&c, fn, comm, dt));
    CADRE_CHECK(check_root(&c, root));
    size_t nbytes;
    CADRE_CHECK(check_span(&c, "count", count, 1, "buf", buf, &nbytes));
    CADRE_CHECK(check_buf(&c, "buf", buf, nbytes));
    int a = algo_forced(K_BCAST);
    if (!nb && !a && count * c.es <= cadre__fast_limit(c.n) && shm_ok(c.comm))
        return cadre__fast_bcast(c.comm, fn, cadre__sig(SIG_BCAST, dt, SIG_NO_OP, 7, root, count),
                                 buf, count * c.es, root);
    struct coll_sched s;
    begin(&s, &c, dt, CADRE_SUM);
    size_t bytes = count * c.es;
    int h = cadre__hier_pick(c.comm, HK_BCAST, bytes, a);
    if (h) {
        s.out_bytes = bytes;
        int rc = cadre__hier_bcast(&s, h, buf, count, root);
        s.sig = cadre__sig(SIG_BCAST, dt, SIG_NO_OP, cadre__hier_sig_algo(h), root, count);
        return finish(&s, rc, req);
    }
    int direct = direct_ok(c.comm);
    if (a == 3 && !direct)
        a = 0;
    if (!a)
        a = direct && bytes >= DIRECT_MIN_BCAST ? 3
            : bytes <= ((size_t)256 << 10) || c.n <= 2 ? 1 : 2;
    s.out_bytes = bytes;
    int rc = a == 1   ? cadre__algo_bcast_binomial(&s, buf, count, root)
             : a == 2 ? cadre__algo_bcast_pipeline(&s, buf, count, root)
                      : cadre__algo_bcast_direct(&s, buf, count, root);
    s.sig = cadre__sig(SIG_BCAST, dt, SIG_NO_OP, a, root, count);
    return finish(&s, rc, req);
}
int cadre_bcast(void *buf, size_t count, cadre_datatype_t dt, int root, cadre_comm_t comm)
{
    return bcast_impl("cadre_bcast", buf, count, dt, root, comm, NULL, 0);
}
int cadre_ibcast(void *buf, size_t count, cadre_datatype_t dt, int root, cadre_comm_t comm,
                 cadre_request_t *req)
{
    return bcast_impl("cadre_ibcast", buf, count, dt, root, comm, req, 1);
}

/* ---- reduce ------------------------------------------------------------------------------ */
static int reduce_impl(const char *fn, const void *sbuf, void *rbuf, size_t count,
                       cadre_datatype_t dt, cadre_op_t op, int root, cadre_comm_t comm,
                       cadre_request_t *req, int nb)
{
    REQ_CHECK(fn, req);
    struct call c;
    CADRE_CHECK(check_comm_dt(&c, fn, comm, dt));
    CADRE_CHECK(check_op(&c, dt, op));
    CADRE_CHECK(check_root(&c, root));
    size_t bytes;
    if (c.me == root) {
        CADRE_CHECK(check_span(&c, "count", count, 1, "recvbuf", rbuf, &bytes));
        CADRE_CHECK(check_buf(&c, "recvbuf", rbuf, bytes));
        if (sbuf == CADRE_IN_PLACE)
            sbuf = rbuf;
    }
    CADRE_CHECK(check_span(&c, "count", count, 1, "sendbuf", sbuf, &bytes));
    CADRE_CHECK(check_buf(&c, "sendbuf", sbuf, bytes));
    if (c.me == root)
        CADRE_CHECK(check_apart(&c, sbuf, bytes, rbuf, bytes, rbuf));
    if (!nb && !algo_forced(K_REDUCE) && bytes <= cadre__fast_limit(c.n) && shm_ok(c.comm))
        return cadre__fast_reduce(c.comm, fn, cadre__sig(SIG_REDUCE, dt, op, 7, root, count), sbuf,
                                  rbuf, count, dt, op, root);
    struct coll_sched s;
    begin(&s, &c, dt, op);
    int h = cadre__hier_pick(c.comm, HK_REDUCE, bytes, algo_forced(K_REDUCE));
    int rc = h ? cadre__hier_reduce(&s, h, sbuf, rbuf, count, root)
               : cadre__algo_reduce_binomial(&s, sbuf, rbuf, count, root);
    if (c.me == root)
        avg_after(&s, op, rbuf, count);
    s.sig = cadre__sig(SIG_REDUCE, dt, op, h ? cadre__hier_sig_algo(h) : 1, root, count);
    return finish(&s, rc, req);
}
int cadre_reduce(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt,
                 cadre_op_t op, int root, cadre_comm_t comm)
{
    return reduce_impl("cadre_reduce", sendbuf, recvbuf, count, dt, op, root, comm, NULL, 0);
}
int cadre_ireduce(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt,
                  cadre_op_t op, int root, cadre_comm_t comm, cadre_request_t *req)
{
    return reduce_impl("cadre_ireduce", sendbuf, recvbuf, count, dt, op, root, comm, req, 1);
}

/* ---- allreduce --------------------------------------------------------------------------- */
static int allreduce_impl(const char *fn, const void *sbuf, void *rbuf, size_t count,
                          cadre_datatype_t dt, cadre_op_t op, cadre_comm_t comm,
                          cadre_request_t *req, int nb)
{
    REQ_CHECK(fn, req);
    struct call c;
    CADRE_CHECK(check_comm_dt(&c, fn, comm, dt));
    CADRE_CHECK(check_op(&c, dt, op));
    size_t bytes;
    CADRE_CHECK(check_span(&c, "count", count, 1, "recvbuf", rbuf, &bytes));
    CADRE_CHECK(check_buf(&c, "recvbuf", rbuf, bytes));
    if (sbuf == CADRE_IN_PLACE)
        sbuf = rbuf;
    CADRE_CHECK(check_span(&c, "count", count, 1, "sendbuf", sbuf, &bytes));
    CADRE_CHECK(check_buf(&c, "sendbuf", sbuf, bytes));
    CADRE_CHECK(check_apart(&c, sbuf, bytes, rbuf, bytes, rbuf));
    if (cadre__gpu_enabled()) { int g = cadre__gpu_allreduce(fn, sbuf, rbuf, count, dt, op, c.comm, req); if (g != CADRE__GPU_NOT_MINE) return g; }
    int a = algo_forced(K_ALLREDUCE);
    /* Blocking calls on one node: the slots for small buffers; on three
     * ranks or more the split allreduce from FAST_SPLIT_MIN while a rank's
     * share fits its slot (the slots are what make the direct algorithm's
     * messages unnecessary; both need every member on this node). */
    if (!nb && (!a || a == 4) && shm_ok(c.comm)) {
        if ((a == 4 || bytes >= FAST_SPLIT_MIN) && cadre__fast_split_fits(c.n, count, c.es))
            return cadre__fast_allreduce_split(c.comm, fn,
                                               cadre__sig(SIG_ALLREDUCE, dt, op, 4, SIG_NO_ROOT,
                                                          count),
                                               sbuf, rbuf, count, dt, op);
        if (!a && bytes <= cadre__fast_limit(c.n))
            return cadre__fast_allreduce(c.comm, fn,
                                         cadre__sig(SIG_ALLREDUCE, dt, op, 7, SIG_NO_ROOT, count),
                                         sbuf, rbuf, count, dt, op);
    }
    struct coll_sched s;
    begin(&s, &c, dt, op);
    int h = cadre__hier_pick(c.comm, HK_ALLREDUCE, bytes, a);
    if (h) {
        int rc = cadre__hier_allreduce(&s, h, sbuf, rbuf, count);
        avg_after(&s, op, rbuf, count);
        s.sig = cadre__sig(SIG_ALLREDUCE, dt, op, cadre__hier_sig_algo(h), SIG_NO_ROOT, count);
        return finish(&s, rc, req);
    }
    int direct = direct_ok(c.comm);
    if ((a == 3 && !direct) || a == 4)
        a = 0;
    if (!a)
        a = direct && bytes >= (c.n == 2 ? DIRECT_MIN_ALLREDUCE : DIRECT_MIN_ALLREDUCE_N) ? 3
            : bytes <= (c.n > 2 ? RD_MAX_ALLREDUCE_N : RD_MAX_ALLREDUCE) || count < (size_t)c.n ? 1
                                                                  : 2;
    int rc = a == 1   ? cadre__algo_allreduce_rd(&s, sbuf, rbuf, count)
             : a == 2 ? cadre__algo_allreduce_ring(&s, sbuf, rbuf, count)
                      : cadre__algo_allreduce_direct(&s, sbuf, rbuf, count);
    avg_after(&s, op, rbuf, count);
    s.sig = cadre__sig(SIG_ALLREDUCE, dt, op, a, SIG_NO_ROOT, count);
    return finish(&s, rc, req);
}
int cadre_allreduce(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt,
                    cadre_op_t op, cadre_comm_t comm)
{
    return allreduce_impl("cadre_allreduce", sendbuf, recvbuf, count, dt, op, comm, NULL, 0);
}
int cadre_iallreduce(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt,
                     cadre_op_t op, cadre_comm_t comm, cadre_request_t *req)
{
    return allreduce_impl("cadre_iallreduce", sendbuf, recvbuf, count, dt, op, comm, req, 1);
}

/* ---- takers of the shared-memory exchange (coll_fast.c) --------------------------------- */
struct rs_take {
    void *rbuf;
    size_t off, count;
    cadre_datatype_t dt;
    cadre_op_t op;
};
static void rs_take(void *arg, int q, const unsigned char *d)
{
    struct rs_take *t = arg;
    if (q == 0) {
        if (t->count)
            cadre__copy(t->rbuf, d + t->off, t->count * cadre_datatype_size(t->dt));
    }
    else
        cadre__coll_reduce(t->rbuf, d + t->off, t->count, t->dt, t->op);
}

struct block_take {
    char *rbuf;
    const size_t *counts, *displs; /* allgatherv */
    size_t es, off, bytes;         /* alltoall: block `off` of each rank to q*bytes */
};
static void gather_take(void *arg, int q, const unsigned char *d)
{
    struct block_take *t = arg;
    char *dst = t->rbuf + t->displs[q] * t->es;
    if (t->counts[q] && (const unsigned char *)dst != d)
        memmove(dst, d, t->counts[q] * t->es);
}
static void alltoall_take(void *arg, int q, const unsigned char *d)
{
    struct block_take *t = arg;
    if (t->bytes)
        cadre__copy(t->rbuf + (size_t)q * t->bytes, d + t->off, t->bytes);
}

/* ---- reduce_scatter ------------------------------------------------------------------------ */
static int reduce_scatter_impl(const char *fn, const void *sbuf, void *rbuf, size_t recvcount,
                               cadre_datatype_t dt, cadre_op_t op, cadre_comm_t comm,
                               cadre_request_t *req, int nb)
{
    REQ_CHECK(fn, req);
    struct call c;
    CADRE_CHECK(check_comm_dt(&c, fn, comm, dt));
    CADRE_CHECK(check_op(&c, dt, op));
    size_t bytes, all;
    CADRE_CHECK(check_span(&c, "recvcount", recvcount, 1, "recvbuf", rbuf, &bytes));
    /* In place the input is recvbuf, size*recvcount long; the result is its
     * first block. */
    int in_place = sbuf == CADRE_IN_PLACE;
    if (in_place)
        sbuf = rbuf;
    const char *sname = in_place ? "recvbuf" : "sendbuf";
    CADRE_CHECK(check_span(&c, "recvcount", recvcount, (size_t)c.n, sname, sbuf, &all));
    CADRE_CHECK(check_buf(&c, sname, sbuf, all));
    CADRE_CHECK(check_buf(&c, "recvbuf", rbuf, bytes));
    CADRE_CHECK(check_apart(&c, sbuf, all, rbuf, bytes, rbuf));
    if (cadre__gpu_enabled()) { int g = cadre__gpu_reduce_scatter(fn, sbuf, rbuf, recvcount, dt, op, c.comm, req); if (g != CADRE__GPU_NOT_MINE) return g; }
    int a = algo_forced(K_REDUCE_SCATTER);
    if (!nb && !a && bytes * (size_t)c.n <= cadre__fast_limit(c.n) && shm_ok(c.comm)) {
        struct rs_take t = {rbuf, bytes * (size_t)c.me, recvcount, dt, op == CADRE_AVG ? CADRE_SUM : op};
        int rc = cadre__fast_exchange(c.comm, fn, cadre__sig(SIG_REDUCE_SCATTER, dt, op, 7,
                                                             SIG_NO_ROOT, recvcount),
                                      sbuf, bytes * (size_t)c.n, 1, -1, rs_take, &t);
        if (rc == CADRE_SUCCESS && op == CADRE_AVG)
            cadre__coll_scale(rbuf, recvcount, dt, c.n);
        return rc;
    }
    struct coll_sched s;
    begin(&s, &c, dt, op);
    int h = cadre__hier_pick(c.comm, HK_REDUCE_SCATTER, bytes * (size_t)c.n, a);
    if (h) {
        int rc = cadre__hier_reduce_scatter(&s, h, sbuf, rbuf, recvcount);
        avg_after(&s, op, rbuf, recvcount);
        s.sig = cadre__sig(SIG_REDUCE_SCATTER, dt, op, cadre__hier_sig_algo(h), SIG_NO_ROOT,
                           recvcount);
        return finish(&s, rc, req);
    }
    int direct = direct_ok(c.comm);
    if (a == 2 && !direct)
        a = 0;
    if (!a)
        a = direct && bytes * (size_t)c.n >= DIRECT_MIN_REDUCE_SCATTER ? 2 : 1;
    int rc = a == 2 ? cadre__algo_reduce_scatter_direct(&s, sbuf, rbuf, recvcount)
                    : cadre__algo_reduce_scatter_ring(&s, sbuf, rbuf, recvcount);
    avg_after(&s, op, rbuf, recvcount);
    s.sig = cadre__sig(SIG_REDUCE_SCATTER, dt, op, a, SIG_NO_ROOT, recvcount);
    return finish(&s, rc, req);
}
int cadre_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, cadre_datatype_t dt,
                         cadre_op_t op, cadre_comm_t comm)
{
    return reduce_scatter_impl("cadre_reduce_scatter", sendbuf, recvbuf, recvcount, dt, op, comm,
                               NULL, 0);
}
int cadre_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                          cadre_datatype_t dt, cadre_op_t op, cadre_comm_t comm,
                          cadre_request_t *req)
{
    return reduce_scatter_impl("cadre_ireduce_scatter", sendbuf, recvbuf, recvcount, dt, op, comm,
                               req, 1);
}

/* ---- gather(v) ------------------------------------------------------------------------------- */
static int gatherv_impl(const char *fn, const void *sbuf, size_t sendcount, void *rbuf,
                        const size_t *counts, const size_t *displs, cadre_datatype_t dt, int root,
                        cadre_comm_t comm, cadre_request_t *req, int nb)
{
    REQ_CHECK(fn, req);
    struct call c;
    CADRE_CHECK(check_comm_dt(&c, fn, comm, dt));
    CADRE_CHECK(check_root(&c, root));
    size_t lo = 0, hi = 0, sbytes;
    int in_place = sbuf == CADRE_IN_PLACE;
    if (c.me == root) {
        CADRE_CHECK(check_layout(&c, "recvbuf", rbuf, "recvcounts", counts, "displs", displs, &lo,
                                 &hi));
        CADRE_CHECK(check_buf(&c, "recvbuf", rbuf, hi - lo));
        if (in_place) {
            sbuf = (char *)rbuf + displs[c.me] * c.es;
            sendcount = counts[c.me];
        } else if (sendcount != counts[c.me]) {
            return cadre__error(CADRE_ERR_ARG, "%s: the root sends %zu elements but expects %zu "
                                               "from itself",
                                fn, sendcount, counts[c.me]);
        }
    }
    CADRE_CHECK(check_span(&c, "sendcount", sendcount, 1, "sendbuf", sbuf, &sbytes));
    CADRE_CHECK(check_buf(&c, "sendbuf", sbuf, sbytes));
    if (c.me == root && !in_place)
        CADRE_CHECK(check_apart(&c, sbuf, sbytes, (char *)rbuf + lo, hi - lo, NULL));
    struct coll_sched s;
    begin(&s, &c, dt, CADRE_SUM);
    int rc = cadre__algo_gatherv_linear(&s, sbuf, sendcount, rbuf, counts, displs, root);
    int v = vector_variant(fn);
    s.sig = cadre__sig(v ? SIG_GATHERV : SIG_GATHER, dt, SIG_NO_OP, 1, root, v ? 0 : sendcount);
    return finish(&s, rc, req);
}

/* gather and its friends with equal counts make the vectors they need; the
 * vectors must outlive a nonblocking call, so they live in the schedule. */
static int equal_vectors(const struct call *c, size_t count, size_t **counts, size_t **displs)
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

int cadre_gatherv(const void *sendbuf, size_t sendcount, void *recvbuf, const size_t recvcounts[],
                  const size_t displs[], cadre_datatype_t dt, int root, cadre_comm_t comm)
{
    return gatherv_impl("cadre_gatherv", sendbuf, sendcount, recvbuf, recvcounts, displs, dt, root,
                        comm, NULL, 0);
}
int cadre_igatherv(const void *sendbuf, size_t sendcount, void *recvbuf, const size_t recvcounts[],
                   const size_t displs[], cadre_datatype_t dt, int root, cadre_comm_t comm,
                   cadre_request_t *req)
{
    return gatherv_impl("cadre_igatherv", sendbuf, sendcount, recvbuf, recvcounts, displs, dt, root,
                        comm, req, 1);
}

static int gather_impl(const char *fn, const void *sbuf, void *rbuf, size_t count,
                       cadre_datatype_t dt, int root, cadre_comm_t comm, cadre_request_t *req,
                       int nb)
{
    REQ_CHECK(fn, req);
    struct call c;
    CADRE_CHECK(check_comm_dt(&c, fn, comm, dt));
    size_t all;
    CADRE_CHECK(check_span(&c, "count", count, (size_t)c.n, "recvbuf", NULL, &all));
    size_t *counts, *displs;
    CADRE_CHECK(equal_vectors(&c, count, &counts, &displs));
    int rc = gatherv_impl(fn, sbuf, count, rbuf, counts, displs, dt, root, comm, req, nb);
    /* The schedule copied nothing from the vectors: they are only read while
     * it is built. */
    free(counts);
    free(displs);
    return rc;
}
int cadre_gather(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt, int root,
                 cadre_comm_t comm)
{
    return gather_impl("cadre_gather", sendbuf, recvbuf, count, dt, root, comm, NULL, 0);
}
int cadre_igather(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt, int root,
                  cadre_comm_t comm, cadre_request_t *req)
{
    return gather_impl("cadre_igather", sendbuf, recvbuf, count, dt, root, comm, req, 1);
}

/* ---- scatter(v) --------------------------------------------------------------------------- */
static int scatterv_impl(const char *fn, const void *sbuf, const size_t *counts,
                         const size_t *displs, void *rbuf, size_t recvcount, cadre_datatype_t dt,
                         int root, cadre_comm_t comm, cadre_request_t *req, int nb)
{
    REQ_CHECK(fn, req);
    struct call c;
    CADRE_CHECK(check_comm_dt(&c, fn, comm, dt));
    CADRE_CHECK(check_root(&c, root));
    size_t lo = 0, hi = 0, rbytes;
    int in_place = rbuf == CADRE_IN_PLACE;
    if (c.me == root) {
        CADRE_CHECK(check_layout(&c, "sendbuf", sbuf, "sendcounts", counts, "displs", displs, &lo,
                                 &hi));
        CADRE_CHECK(check_buf(&c, "sendbuf", sbuf, hi - lo));
        if (in_place) {
            rbuf = (char *)sbuf + displs[c.me] * c.es;
            recvcount = counts[c.me];
        } else if (recvcount != counts[c.me]) {
            return cadre__error(CADRE_ERR_ARG, "%s: the root sends itself %zu elements but "
                                               "receives %zu",
                                fn, counts[c.me], recvcount);
        }
    }
    CADRE_CHECK(check_span(&c, "recvcount", recvcount, 1, "recvbuf", rbuf, &rbytes));
    CADRE_CHECK(check_buf(&c, "recvbuf", rbuf, rbytes));
    if (c.me == root && !in_place)
        CADRE_CHECK(check_apart(&c, (const char *)sbuf + lo, hi - lo, rbuf, rbytes, NULL));
    struct coll_sched s;
    begin(&s, &c, dt, CADRE_SUM);
    int rc = cadre__algo_scatterv_linear(&s, sbuf, counts, displs, rbuf, recvcount, root);
    int v = vector_variant(fn);
    s.sig = cadre__sig(v ? SIG_SCATTERV : SIG_SCATTER, dt, SIG_NO_OP, 1, root, v ? 0 : recvcount);
    return finish(&s, rc, req);
}
int cadre_scatterv(const void *sendbuf, const size_t sendcounts[], const size_t displs[],
                   void *recvbuf, size_t recvcount, cadre_datatype_t dt, int root,
                   cadre_comm_t comm)
{
    return scatterv_impl("cadre_scatterv", sendbuf, sendcounts, displs, recvbuf, recvcount, dt,
                         root, comm, NULL, 0);
}
int cadre_iscatterv(const void *sendbuf, const size_t sendcounts[], const size_t displs[],
                    void *recvbuf, size_t recvcount, cadre_datatype_t dt, int root,
                    cadre_comm_t comm, cadre_request_t *req)
{
    return scatterv_impl("cadre_iscatterv", sendbuf, sendcounts, displs, recvbuf, recvcount, dt,
                         root, comm, req, 1);
}

static int scatter_impl(const char *fn, const void *sbuf, void *rbuf, size_t count,
                        cadre_datatype_t dt, int root, cadre_comm_t comm, cadre_request_t *req,
                        int nb)
{
    REQ_CHECK(fn, req);
    struct call c;
    CADRE_CHECK(check_comm_dt(&c, fn, comm, dt));
    size_t all;
    CADRE_CHECK(check_span(&c, "count", count, (size_t)c.n, "sendbuf", NULL, &all));
    size_t *counts, *displs;
    CADRE_CHECK(equal_vectors(&c, count, &counts, &displs));
    int rc = scatterv_impl(fn, sbuf, counts, displs, rbuf, count, dt, root, comm, req, nb);
    free(counts);
    free(displs);
    return rc;
}
int cadre_scatter(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt, int root,
                  cadre_comm_t comm)
{
    return scatter_impl("cadre_scatter", sendbuf, recvbuf, count, dt, root, comm, NULL, 0);
}
int cadre_iscatter(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt, int root,
                   cadre_comm_t comm, cadre_request_t *req)
{
    return scatter_impl("cadre_iscatter", sendbuf, recvbuf, count, dt, root, comm, req, 1);
}

/* ---- allgather(v) ------------------------------------------------------------------------- */
static int allgatherv_impl(const char *fn, const void *sbuf, size_t sendcount, void *rbuf,
                           const size_t *counts, const size_t *displs, cadre_datatype_t dt,
                           cadre_comm_t comm, cadre_request_t *req, int nb, int equal)
{
    REQ_CHECK(fn, req);
    struct call c;
    CADRE_CHECK(check_comm_dt(&c, fn, comm, dt));
    size_t lo, hi, sbytes;
    CADRE_CHECK(check_layout(&c, "recvbuf", rbuf, "recvcounts", counts, "displs", displs, &lo,
                             &hi));
    CADRE_CHECK(check_buf(&c, "recvbuf", rbuf, hi - lo));
    int in_place = sbuf == CADRE_IN_PLACE;
    if (in_place) {
        sbuf = (char *)rbuf + displs[c.me] * c.es;
        sendcount = counts[c.me];
    } else if (sendcount != counts[c.me]) {
        return cadre__error(CADRE_ERR_ARG, "%s: rank %d sends %zu elements but recvcounts[%d] is %zu",
                            fn, c.me, sendcount, c.me, counts[c.me]);
    }
    CADRE_CHECK(check_span(&c, "sendcount", sendcount, 1, "sendbuf", sbuf, &sbytes));
    CADRE_CHECK(check_buf(&c, "sendbuf", sbuf, sbytes));
    /* No equal pointer is in place here: the in-place block is the rank's own. */
    if (!in_place)
        CADRE_CHECK(check_apart(&c, sbuf, sbytes, (char *)rbuf + lo, hi - lo, NULL));
    if (equal && cadre__gpu_enabled()) {
        int g = cadre__gpu_allgather(fn, sbuf, rbuf, sendcount, dt, c.comm, req);
        if (g != CADRE__GPU_NOT_MINE)
            return g;
    }
    int a = algo_forced(K_ALLGATHER);
    size_t most = 0;
    for (int i = 0; i < c.n; i++)
        most = counts[i] > most ? counts[i] : most;
    if (!nb && !a && most * c.es <= cadre__fast_limit(c.n) && shm_ok(c.comm)) {
        struct block_take t = {.rbuf = rbuf, .counts = counts, .displs = displs, .es = c.es};
        return cadre__fast_exchange(c.comm, fn,
                                    cadre__sig(equal ? SIG_ALLGATHER : SIG_ALLGATHERV, dt, SIG_NO_OP,
                                               7, SIG_NO_ROOT, equal ? sendcount : 0),
                                    sbuf, sendcount * c.es, 1, -1, gather_take, &t);
    }
    struct coll_sched s;
    begin(&s, &c, dt, CADRE_SUM);
    int pow2 = (c.n & (c.n - 1)) == 0;
    int direct = direct_ok(c.comm);
    size_t total = 0;
    for (int i = 0; i < c.n; i++)
        total += counts[i] * c.es;
    int h = cadre__hier_pick(c.comm, HK_ALLGATHER, total, a);
    if (h) {
        s.out_bytes = total;
        int rc = cadre__hier_allgatherv(&s, h, sbuf, rbuf, counts, displs);
        s.sig = cadre__sig(equal ? SIG_ALLGATHER : SIG_ALLGATHERV, dt, SIG_NO_OP,
                           cadre__hier_sig_algo(h), SIG_NO_ROOT, equal ? sendcount : 0);
        return finish(&s, rc, req);
    }
    if (a == 3 && !direct)
        a = 0;
    if (!a)
        a = direct && c.n == 2 && total >= DIRECT_MIN_ALLGATHER                         ? 3
            : equal && pow2 && sendcount * c.es * (size_t)c.n <= ((size_t)64 << 10) ? 2
                                                                                      : 1;
    s.out_bytes = total;
    int rc = a == 3                    ? cadre__algo_allgatherv_direct(&s, sbuf, rbuf, counts, displs)
             : a == 2 && equal && pow2 ? cadre__algo_allgather_rd(&s, sbuf, rbuf, sendcount)
                                       : cadre__algo_allgatherv_ring(&s, sbuf, sendcount, rbuf,
                                                                     counts, displs);
    s.sig = cadre__sig(equal ? SIG_ALLGATHER : SIG_ALLGATHERV, dt, SIG_NO_OP, a, SIG_NO_ROOT,
                       equal ? sendcount : 0);
    return finish(&s, rc, req);
}
int cadre_allgatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                     const size_t recvcounts[], const size_t displs[], cadre_datatype_t dt,
                     cadre_comm_t comm)
{
    return allgatherv_impl("cadre_allgatherv", sendbuf, sendcount, recvbuf, recvcounts, displs, dt,
                           comm, NULL, 0, 0);
}
int cadre_iallgatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                      const size_t recvcounts[], const size_t displs[], cadre_datatype_t dt,
                      cadre_comm_t comm, cadre_request_t *req)
{
    return allgatherv_impl("cadre_iallgatherv", sendbuf, sendcount, recvbuf, recvcounts, displs,
                           dt, comm, req, 1, 0);
}

static int allgather_impl(const char *fn, const void *sbuf, void *rbuf, size_t count,
                          cadre_datatype_t dt, cadre_comm_t comm, cadre_request_t *req, int nb)
{
    REQ_CHECK(fn, req);
    struct call c;
    CADRE_CHECK(check_comm_dt(&c, fn, comm, dt));
    size_t all;
    CADRE_CHECK(check_span(&c, "count", count, (size_t)c.n, "recvbuf", rbuf, &all));
    /* The device path runs from allgatherv_impl, once the buffers are checked. */
    size_t *counts, *displs;
    CADRE_CHECK(equal_vectors(&c, count, &counts, &displs));
    int rc = allgatherv_impl(fn, sbuf, count, rbuf, counts, displs, dt, comm, req, nb, 1);
    free(counts);
    free(displs);
    return rc;
}
int cadre_allgather(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt,
                    cadre_comm_t comm)
{
    return allgather_impl("cadre_allgather", sendbuf, recvbuf, count, dt, comm, NULL, 0);
}
int cadre_iallgather(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt,
                     cadre_comm_t comm, cadre_request_t *req)
{
    return allgather_impl("cadre_iallgather", sendbuf, recvbuf, count, dt, comm, req, 1);
}

/* ---- alltoall(v) ------------------------------------------------------------------------- */
static int alltoallv_impl(const char *fn, const void *sbuf, const size_t *scounts,
                          const size_t *sdispls, void *rbuf, const size_t *rcounts,
                          const size_t *rdispls, cadre_datatype_t dt, cadre_comm_t comm,
                          cadre_request_t *req, int nb)
{
    REQ_CHECK(fn, req);
    struct call c;
    CADRE_CHECK(check_comm_dt(&c, fn, comm, dt));
    size_t rlo, rhi, slo, shi;
    CADRE_CHECK(check_layout(&c, "recvbuf", rbuf, "recvcounts", rcounts, "rdispls", rdispls, &rlo,
                             &rhi));
    int in_place = sbuf == CADRE_IN_PLACE;
    if (!in_place) {
        CADRE_CHECK(check_layout(&c, "sendbuf", sbuf, "sendcounts", scounts, "sdispls", sdispls,
                                 &slo, &shi));
        /* The same buffer with the same layout both ways is CADRE_IN_PLACE. */
        if (sbuf == rbuf) {
            in_place = 1;
            for (int i = 0; i < c.n && in_place; i++)
                in_place = scounts[i] == rcounts[i] && (!scounts[i] || sdispls[i] == rdispls[i]);
        }
    }
    if (in_place) {
        scounts = rcounts;
        sdispls = rdispls;
        slo = rlo;
        shi = rhi;
    }
    if (scounts[c.me] != rcounts[c.me])
        return cadre__error(CADRE_ERR_ARG, "%s: rank %d sends itself %zu elements but receives %zu",
                            fn, c.me, scounts[c.me], rcounts[c.me]);
    CADRE_CHECK(check_buf(&c, "recvbuf", rbuf, rhi - rlo));
    if (!in_place) {
        CADRE_CHECK(check_buf(&c, "sendbuf", sbuf, shi - slo));
        CADRE_CHECK(check_apart(&c, (const char *)sbuf + slo, shi - slo, (char *)rbuf + rlo,
                                rhi - rlo, NULL));
    }
    struct coll_sched s;
    begin(&s, &c, dt, CADRE_SUM);
    if (in_place) {
        /* Sends read the old contents while receives overwrite them: send from a copy. */
        void *copy = cadre__sched_alloc(&s, shi);
        if (!copy) {
            cadre__sched_free(&s);
            return cadre__error(CADRE_ERR_NOMEM, "%s: no memory for the in-place copy", fn);
        }
        /* A first round of its own, so that the device path can stage it. */
        if (cadre__sched_copy(&s, copy, rbuf, shi) || cadre__sched_barrier(&s)) {
            cadre__sched_free(&s);
            return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", fn);
        }
        sbuf = copy;
    }
    /* The vectors are read at build time only. */
    int rc = cadre__algo_alltoallv_pairwise(&s, sbuf, scounts, sdispls, rbuf, rcounts, rdispls);
    s.sig = cadre__sig(SIG_ALLTOALLV, dt, SIG_NO_OP, 1, SIG_NO_ROOT, 0);
    return finish(&s, rc, req);
}
int cadre_alltoallv(const void *sendbuf, const size_t sendcounts[], const size_t sdispls[],
                    void *recvbuf, const size_t recvcounts[], const size_t rdispls[],
                    cadre_datatype_t dt, cadre_comm_t comm)
{
    return alltoallv_impl("cadre_alltoallv", sendbuf, sendcounts, sdispls, recvbuf, recvcounts,
                          rdispls, dt, comm, NULL, 0);
}
int cadre_ialltoallv(const void *sendbuf, const size_t sendcounts[], const size_t sdispls[],
                     void *recvbuf, const size_t recvcounts[], const size_t rdispls[],
                     cadre_datatype_t dt, cadre_comm_t comm, cadre_request_t *req)
{
    return alltoallv_impl("cadre_ialltoallv", sendbuf, sendcounts, sdispls, recvbuf, recvcounts,
                          rdispls, dt, comm, req, 1);
}

static int alltoall_impl(const char *fn, const void *sbuf, void *rbuf, size_t count,
                         cadre_datatype_t dt, cadre_comm_t comm, cadre_request_t *req, int nb)
{
    REQ_CHECK(fn, req);
    struct call c;
    CADRE_CHECK(check_comm_dt(&c, fn, comm, dt));
    size_t all;
    CADRE_CHECK(check_span(&c, "count", count, (size_t)c.n, "recvbuf", rbuf, &all));
    CADRE_CHECK(check_buf(&c, "recvbuf", rbuf, all));
    if (sbuf != CADRE_IN_PLACE) {
        CADRE_CHECK(check_span(&c, "count", count, (size_t)c.n, "sendbuf", sbuf, &all));
        CADRE_CHECK(check_buf(&c, "sendbuf", sbuf, all));
        CADRE_CHECK(check_apart(&c, sbuf, all, rbuf, all, rbuf));
        /* The same buffer both ways: the library sends from a copy. */
        if (sbuf == rbuf)
            sbuf = CADRE_IN_PLACE;
    }
    size_t bytes = count * c.es;
    if (!nb && !algo_forced(K_ALLTOALL) && bytes * (size_t)c.n <= cadre__fast_limit(c.n) &&
        shm_ok(c.comm)) {
        if (sbuf == CADRE_IN_PLACE)
            sbuf = rbuf;
        struct block_take t = {.rbuf = rbuf, .off = bytes * (size_t)c.me, .bytes = bytes};
        return cadre__fast_exchange(c.comm, fn, cadre__sig(SIG_ALLTOALL, dt, SIG_NO_OP, 7,
                                                           SIG_NO_ROOT, count),
                                    sbuf, bytes * (size_t)c.n, 1, -1, alltoall_take, &t);
    }
    size_t *counts, *displs;
    CADRE_CHECK(equal_vectors(&c, count, &counts, &displs));
    int rc = alltoallv_impl(fn, sbuf, counts, displs, rbuf, counts, displs, dt, comm, req, nb);
    free(counts);
    free(displs);
    return rc;
}
int cadre_alltoall(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt,
                   cadre_comm_t comm)
{
    return alltoall_impl("cadre_alltoall", sendbuf, recvbuf, count, dt, comm, NULL, 0);
}
int cadre_ialltoall(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt,
                    cadre_comm_t comm, cadre_request_t *req)
{
    return alltoall_impl("cadre_ialltoall", sendbuf, recvbuf, count, dt, comm, req, 1);
}
