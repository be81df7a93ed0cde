/*
 * The collectives with a root, and the barrier: barrier, bcast, gather(v),
 * scatter(v), blocking and nonblocking. Each checks its arguments, resolves
 * CADRE_IN_PLACE, lets cadre__coll_choose pick the algorithm
 * (coll_select.c) and runs it: the shared-memory slots (coll_fast.c) or a
 * schedule (coll_algos.c, coll_direct.c) on an executor. May call runtime,
 * p2p (the communicator), coll and gpu's hooks.
 */
#include "coll_call.h"

/* ---- barrier --------------------------------------------------------------------------- */
static int barrier_impl(const char *fn, cadre_comm_t comm, cadre_request_t *req, int nb)
{
    REQ_CHECK(fn, req);
    struct call c;
    CADRE_CHECK(check_comm_dt(&c, fn, comm, CADRE_UINT8));
    struct coll_in in = {.kind = COLL_BARRIER, .nb = nb};
    struct coll_choice ch;
    cadre__coll_choose(&c, &in, &ch);
    int code = algo_code(&in, &ch);
    if (ch.algo == COLL_ALGO_SLOTS)
        return cadre__fast_barrier(c.comm, fn, cadre__sig(SIG_BARRIER, SIG_NO_DT, SIG_NO_OP, code,
                                                         SIG_NO_ROOT, 0));
    struct coll_sched s;
    begin(&s, &c, CADRE_UINT8, CADRE_SUM);
    s.sig = cadre__sig(SIG_BARRIER, SIG_NO_DT, SIG_NO_OP, code, SIG_NO_ROOT, 0);
    return finish(&s,
                  is_hier(ch.algo) ? cadre__hier_barrier(&s, hier_algo(ch.algo))
                                   : cadre__algo_barrier_dissemination(&s),
                  req);
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
    size_t bytes = count * c.es;
    struct coll_in in = {.kind = COLL_BCAST, .nb = nb, .bytes = bytes};
    struct coll_choice ch;
    cadre__coll_choose(&c, &in, &ch);
    int code = algo_code(&in, &ch);
    if (ch.algo == COLL_ALGO_SLOTS)
        return cadre__fast_bcast(c.comm, fn,
                                 cadre__sig(SIG_BCAST, dt, SIG_NO_OP, code, root, count), buf,
                                 bytes, root);
    struct coll_sched s;
    begin(&s, &c, dt, CADRE_SUM);
    s.out_bytes = bytes;
    int rc = is_hier(ch.algo) ? cadre__hier_bcast(&s, hier_algo(ch.algo), buf, count, root)
             : ch.algo == COLL_ALGO_BINOMIAL ? cadre__algo_bcast_binomial(&s, buf, count, root)
             : ch.algo == COLL_ALGO_PIPELINE ? cadre__algo_bcast_pipeline(&s, buf, count, root)
                                             : cadre__algo_bcast_direct(&s, buf, count, root);
    s.sig = cadre__sig(SIG_BCAST, dt, SIG_NO_OP, code, root, count);
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
        CADRE_CHECK(check_disjoint(&c, "recvbuf", "recvcounts", counts, "displs", displs));
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
    int v = vector_variant(fn);
    /* Only gather's counts are known alike on every rank: gatherv's rule
     * for the slots asks no size, and each rank's size decides only how
     * its block moves (coll_fast_v.c). */
    struct coll_in in = {.kind = COLL_GATHER, .nb = nb, .equal = !v, .bytes = sbytes};
    struct coll_choice ch;
    cadre__coll_choose(&c, &in, &ch);
    uint64_t sig = cadre__sig(v ? SIG_GATHERV : SIG_GATHER, dt, SIG_NO_OP, algo_code(&in, &ch),
                              root, v ? 0 : sendcount);
    if (ch.algo == COLL_ALGO_SLOTS && v)
        return cadre__fast_gatherv(c.comm, fn, sig, sbuf, sendcount, rbuf, counts, displs, c.es,
                                   root, cadre__coll_slots_max(COLL_GATHER, c.n));
    if (ch.algo == COLL_ALGO_SLOTS) {
        /* Every rank publishes its block; the root alone reads them. */
        struct block_take t = {.rbuf = rbuf, .counts = counts, .displs = displs, .es = c.es};
        return cadre__fast_exchange(c.comm, fn, sig, sbuf, sbytes, c.me == root, -1, gather_take,
                                    &t);
    }
    struct coll_sched s;
    begin(&s, &c, dt, CADRE_SUM);
    int rc = cadre__algo_gatherv_linear(&s, sbuf, sendcount, rbuf, counts, displs, root);
    s.sig = sig;
    return finish(&s, rc, req);
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
    int v = vector_variant(fn);
    /* As for gather: scatter's rule reads the size of the root's buffer,
     * which every rank knows (`bytes`); scatterv's asks none. */
    struct coll_in in = {.kind = COLL_SCATTER, .nb = nb, .equal = !v,
                         .bytes = rbytes * (size_t)c.n};
    struct coll_choice ch;
    cadre__coll_choose(&c, &in, &ch);
    /* The direct algorithm of a blocking call with slots moves no message
     * (coll_direct_scatter.c), under its own number. */
    int slot_direct = ch.algo == COLL_ALGO_DIRECT && !nb && cadre__fast_get(c.comm) &&
                      (size_t)c.n <= FAST_BYTES / 16;
    uint64_t sig = cadre__sig(v ? SIG_SCATTERV : SIG_SCATTER, dt, SIG_NO_OP,
                              slot_direct ? SCATTER_DIRECT_SLOTS_CODE : algo_code(&in, &ch), root,
                              v ? 0 : recvcount);
    if (slot_direct)
        return cadre__fast_scatterv_direct(c.comm, fn, sig, sbuf, counts, displs, rbuf, recvcount,
                                           c.es, root);
    if (ch.algo == COLL_ALGO_SLOTS && v)
        return cadre__fast_scatterv(c.comm, fn, sig, sbuf, counts, displs, rbuf, recvcount, c.es,
                                    root, cadre__coll_slots_max(COLL_SCATTER, c.n));
    if (ch.algo == COLL_ALGO_SLOTS) {
        /* The root publishes its whole buffer (equal counts: block i at
         * displs[i] = i * count); every rank copies its block. */
        struct block_take t = {.rbuf = rbuf, .counts = counts, .displs = displs, .es = c.es,
                               .me = c.me};
        return cadre__fast_exchange(c.comm, fn, sig, sbuf, in.bytes, 1, root, scatter_take, &t);
    }
    struct coll_sched s;
    begin(&s, &c, dt, CADRE_SUM);
    int rc = ch.algo == COLL_ALGO_DIRECT
                 ? cadre__algo_scatterv_direct(&s, sbuf, counts, displs, rbuf, recvcount, root)
                 : cadre__algo_scatterv_linear(&s, sbuf, counts, displs, rbuf, recvcount, root);
    s.sig = sig;
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

