/*
 * The reducing collectives: reduce, allreduce, reduce_scatter, scan, exscan, blocking and
 * nonblocking. Each checks its arguments, resolves CADRE_IN_PLACE, offers
 * device buffers to the device path (device/, through runtime_device.h), lets cadre__coll_choose pick the algorithm
 * (coll_select.c) and runs it: the shared-memory slots and the split
 * allreduce (coll_fast_reduce.c), or a schedule (coll_algos.c, coll_direct.c) on an
 * executor. May call runtime, p2p (the communicator), coll and the device path's table.
 */
#include "coll_call.h"

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
    struct coll_in in = {.kind = COLL_REDUCE, .nb = nb, .bytes = bytes, .count = count,
                         .elsize = c.es};
    struct coll_choice ch;
    cadre__coll_choose(&c, &in, &ch);
    int code = algo_code(&in, &ch);
    if (ch.algo == COLL_ALGO_SLOTS)
        return cadre__fast_reduce(c.comm, fn, cadre__sig(SIG_REDUCE, dt, op, code, root, count),
                                  sbuf, rbuf, count, dt, op, root);
    if (ch.algo == COLL_ALGO_SPLIT)
        return cadre__fast_reduce_split(c.comm, fn,
                                        cadre__sig(SIG_REDUCE, dt, op, code, root, count), sbuf,
                                        rbuf, count, dt, op, root);
    struct coll_sched s;
    begin(&s, &c, dt, op);
    int rc = is_hier(ch.algo) ? cadre__hier_reduce(&s, hier_algo(ch.algo), sbuf, rbuf, count, root)
             : ch.algo == COLL_ALGO_DIRECT ? cadre__algo_reduce_direct(&s, sbuf, rbuf, count, root)
                                           : cadre__algo_reduce_binomial(&s, sbuf, rbuf, count, root);
    if (c.me == root)
        avg_after(&s, op, rbuf, count);
    s.sig = cadre__sig(SIG_REDUCE, dt, op, code, root, count);
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
    if (cadre__gpu_enabled()) { int g = cadre__gpu.allreduce(fn, sbuf, rbuf, count, dt, op, c.comm, req); if (g != CADRE__GPU_NOT_MINE) return g; }
    struct coll_in in = {.kind = COLL_ALLREDUCE, .nb = nb, .bytes = bytes, .count = count,
                         .elsize = c.es};
    struct coll_choice ch;
    cadre__coll_choose(&c, &in, &ch);
    int code = algo_code(&in, &ch);
    if (ch.algo == COLL_ALGO_SPLIT)
        return cadre__fast_allreduce_split(c.comm, fn,
                                           cadre__sig(SIG_ALLREDUCE, dt, op, code, SIG_NO_ROOT,
                                                      count),
                                           sbuf, rbuf, count, dt, op);
    if (ch.algo == COLL_ALGO_SLOTS)
        return cadre__fast_allreduce(c.comm, fn,
                                     cadre__sig(SIG_ALLREDUCE, dt, op, code, SIG_NO_ROOT, count),
                                     sbuf, rbuf, count, dt, op);
    struct coll_sched s;
    begin(&s, &c, dt, op);
    int rc = is_hier(ch.algo) ? cadre__hier_allreduce(&s, hier_algo(ch.algo), sbuf, rbuf, count)
             : ch.algo == COLL_ALGO_RD   ? cadre__algo_allreduce_rd(&s, sbuf, rbuf, count)
             : ch.algo == COLL_ALGO_RING ? cadre__algo_allreduce_ring(&s, sbuf, rbuf, count)
                                         : cadre__algo_allreduce_direct(&s, sbuf, rbuf, count);
    avg_after(&s, op, rbuf, count);
    s.sig = cadre__sig(SIG_ALLREDUCE, dt, op, code, SIG_NO_ROOT, count);
    return finish(&s, rc, req);
}
int cadre_allreduce(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt,
                    cadre_op_t op, cadre_comm_t comm)
{
    return allreduce_impl("cadre_allreduce", sendbuf, recvbuf, count, dt, op, comm, NULL, 0);
}
int cadre__allreduce_as(const char *fn, const void *sendbuf, void *recvbuf, size_t count,
                        cadre_datatype_t dt, cadre_op_t op, cadre_comm_t comm)
{
    return allreduce_impl(fn, sendbuf, recvbuf, count, dt, op, comm, NULL, 0);
}
int cadre_iallreduce(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt,
                     cadre_op_t op, cadre_comm_t comm, cadre_request_t *req)
{
    return allreduce_impl("cadre_iallreduce", sendbuf, recvbuf, count, dt, op, comm, req, 1);
}

/* ---- reduce_scatter's taker of the shared-memory exchange (coll_fast.c) ------------------ */
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
    if (cadre__gpu_enabled()) { int g = cadre__gpu.reduce_scatter(fn, sbuf, rbuf, recvcount, dt, op, c.comm, req); if (g != CADRE__GPU_NOT_MINE) return g; }
    struct coll_in in = {.kind = COLL_REDUCE_SCATTER, .nb = nb, .bytes = all};
    struct coll_choice ch;
    cadre__coll_choose(&c, &in, &ch);
    int code = algo_code(&in, &ch);
    if (ch.algo == COLL_ALGO_SLOTS) {
        struct rs_take t = {rbuf, bytes * (size_t)c.me, recvcount, dt, op == CADRE_AVG ? CADRE_SUM : op};
        int rc = cadre__fast_exchange(c.comm, fn, cadre__sig(SIG_REDUCE_SCATTER, dt, op, code,
                                                             SIG_NO_ROOT, recvcount),
                                      sbuf, all, 1, -1, rs_take, &t);
        if (rc == CADRE_SUCCESS && op == CADRE_AVG)
            cadre__coll_scale(rbuf, recvcount, dt, c.n);
        return rc;
    }
    struct coll_sched s;
    begin(&s, &c, dt, op);
    int rc = is_hier(ch.algo)
                 ? cadre__hier_reduce_scatter(&s, hier_algo(ch.algo), sbuf, rbuf, recvcount)
             : ch.algo == COLL_ALGO_DIRECT
                 ? cadre__algo_reduce_scatter_direct(&s, sbuf, rbuf, recvcount)
                 : cadre__algo_reduce_scatter_ring(&s, sbuf, rbuf, recvcount);
    avg_after(&s, op, rbuf, recvcount);
    s.sig = cadre__sig(SIG_REDUCE_SCATTER, dt, op, code, SIG_NO_ROOT, recvcount);
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


/* ---- scan, exscan ------------------------------------------------------------------------ */
/* CADRE_AVG of a prefix is its mean: the sum over ranks 0..me divided by
 * me+1 (scan), over ranks 0..me-1 by me (exscan). Exscan leaves rank 0's
 * recvbuf as it was (API.md), also in place. */
static int scan_impl(const char *fn, const void *sbuf, void *rbuf, size_t count,
                     cadre_datatype_t dt, cadre_op_t op, cadre_comm_t comm,
                     cadre_request_t *req, int nb, int exclusive)
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
    enum coll_kind k = exclusive ? COLL_EXSCAN : COLL_SCAN;
    struct coll_in in = {.kind = k, .nb = nb, .bytes = bytes, .count = count, .elsize = c.es};
    struct coll_choice ch;
    cadre__coll_choose(&c, &in, &ch);
    int code = algo_code(&in, &ch);
    struct coll_sched s;
    begin(&s, &c, dt, op);
    int rc = ch.algo == COLL_ALGO_LINEAR ? cadre__algo_scan_linear(&s, sbuf, rbuf, count, exclusive)
                                         : cadre__algo_scan_rd(&s, sbuf, rbuf, count, exclusive);
    int div = exclusive ? c.me : c.me + 1;
    if (op == CADRE_AVG && count && div > 0) {
        s.scale_buf = rbuf;
        s.scale_n = count;
        s.scale_div = div;
    }
    s.sig = cadre__sig(exclusive ? SIG_EXSCAN : SIG_SCAN, dt, op, code, SIG_NO_ROOT, count);
    return finish(&s, rc, req);
}
int cadre_scan(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt,
               cadre_op_t op, cadre_comm_t comm)
{
    return scan_impl("cadre_scan", sendbuf, recvbuf, count, dt, op, comm, NULL, 0, 0);
}
int cadre_iscan(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt,
                cadre_op_t op, cadre_comm_t comm, cadre_request_t *req)
{
    return scan_impl("cadre_iscan", sendbuf, recvbuf, count, dt, op, comm, req, 1, 0);
}
int cadre_exscan(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt,
                 cadre_op_t op, cadre_comm_t comm)
{
    return scan_impl("cadre_exscan", sendbuf, recvbuf, count, dt, op, comm, NULL, 0, 1);
}
int cadre_iexscan(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt,
                  cadre_op_t op, cadre_comm_t comm, cadre_request_t *req)
{
    return scan_impl("cadre_iexscan", sendbuf, recvbuf, count, dt, op, comm, req, 1, 1);
}
