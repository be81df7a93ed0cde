/*
 * The all-to-all exchanges: allgather(v) and alltoall(v), blocking and
 * nonblocking. Each checks its arguments, resolves CADRE_IN_PLACE, offers
 * device buffers to the device path (device/, through runtime_device.h), lets cadre__coll_choose pick the algorithm
 * (coll_select.c) and runs it: the shared-memory slots (coll_fast.c) or a
 * schedule (coll_algos.c, coll_direct.c) on an executor. May call runtime,
 * p2p (the communicator), coll and the device path's table.
 */
#include "coll_call.h"

/* ---- takers of the shared-memory exchange (coll_fast.c); gather_take: coll_call.h ----- */
static void alltoall_take(void *arg, int q, const unsigned char *d)
{
    struct block_take *t = arg;
    if (t->bytes)
        cadre__copy(t->rbuf + (size_t)q * t->bytes, d + t->off, t->bytes);
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
    CADRE_CHECK(check_disjoint(&c, "recvbuf", "recvcounts", counts, "displs", displs));
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
        int g = cadre__gpu.allgather(fn, sbuf, rbuf, sendcount, dt, c.comm, req);
        if (g != CADRE__GPU_NOT_MINE)
            return g;
    }
    size_t most = 0, total = 0;
    for (int i = 0; i < c.n; i++) {
        most = counts[i] > most ? counts[i] : most;
        total += counts[i] * c.es;
    }
    struct coll_in in = {.kind = COLL_ALLGATHER, .nb = nb, .equal = equal, .bytes = total,
                         .block = most * c.es};
    struct coll_choice ch;
    cadre__coll_choose(&c, &in, &ch);
    int code = algo_code(&in, &ch);
    size_t sigcount = equal ? sendcount : cadre__sig_counts(counts, c.n);
    if (ch.algo == COLL_ALGO_SLOTS) {
        struct block_take t = {.rbuf = rbuf, .counts = counts, .displs = displs, .es = c.es};
        return cadre__fast_exchange(c.comm, fn,
                                    cadre__sig(equal ? SIG_ALLGATHER : SIG_ALLGATHERV, dt, SIG_NO_OP,
                                               code, SIG_NO_ROOT, sigcount),
                                    sbuf, sendcount * c.es, 1, -1, gather_take, &t);
    }
    struct coll_sched s;
    begin(&s, &c, dt, CADRE_SUM);
    s.out_bytes = total;
    /* The table gives recursive doubling only to equal counts on a power of two. */
    int rc = is_hier(ch.algo)
                 ? cadre__hier_allgatherv(&s, hier_algo(ch.algo), sbuf, rbuf, counts, displs)
             : ch.algo == COLL_ALGO_DIRECT
                 ? cadre__algo_allgatherv_direct(&s, sbuf, rbuf, counts, displs)
             : ch.algo == COLL_ALGO_RD
                 ? cadre__algo_allgather_rd(&s, sbuf, rbuf, sendcount)
                 : cadre__algo_allgatherv_ring(&s, sbuf, sendcount, rbuf, counts, displs);
    s.sig = cadre__sig(equal ? SIG_ALLGATHER : SIG_ALLGATHERV, dt, SIG_NO_OP, code, SIG_NO_ROOT,
                       sigcount);
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
int cadre__allgather_as(const char *fn, const void *sendbuf, void *recvbuf, size_t count,
                        cadre_datatype_t dt, cadre_comm_t comm)
{
    return allgather_impl(fn, sendbuf, recvbuf, count, dt, comm, NULL, 0);
}

/* ---- alltoall(v) ------------------------------------------------------------------------- */
/* ch: the choice alltoall_impl made (NULL: choose here). */
static int alltoallv_impl(const char *fn, const void *sbuf, const size_t *scounts,
                          const size_t *sdispls, void *rbuf, const size_t *rcounts,
                          const size_t *rdispls, cadre_datatype_t dt, cadre_comm_t comm,
                          cadre_request_t *req, int nb, const struct coll_choice *ch,
                          const size_t *equal_count)
{
    REQ_CHECK(fn, req);
    struct call c;
    CADRE_CHECK(check_comm_dt(&c, fn, comm, dt));
    size_t rlo, rhi, slo, shi;
    CADRE_CHECK(check_layout(&c, "recvbuf", rbuf, "recvcounts", rcounts, "rdispls", rdispls, &rlo,
                             &rhi));
    CADRE_CHECK(check_disjoint(&c, "recvbuf", "recvcounts", rcounts, "rdispls", rdispls));
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
    struct coll_in in = {.kind = COLL_ALLTOALL, .nb = nb, .bytes = rhi - rlo};
    struct coll_choice mine;
    if (!ch) {
        cadre__coll_choose(&c, &in, &mine);
        ch = &mine;
    }
    /* alltoall's schedule is alltoallv's, but signed as alltoall with its
     * count: signed as alltoallv (no count), ranks whose counts differed
     * found it only as a short or long message at the receivers, which did
     * not tell the others, and alltoall against alltoallv passed. */
    uint64_t sig = equal_count ? cadre__sig(SIG_ALLTOALL, dt, SIG_NO_OP, algo_code(&in, ch),
                                            SIG_NO_ROOT, *equal_count)
                               : cadre__sig(SIG_ALLTOALLV, dt, SIG_NO_OP, algo_code(&in, ch),
                                            SIG_NO_ROOT, 0);
    /* The v rule (no size: the ranks do not know each other's counts);
     * each rank's size decides how its blocks move (coll_fast_v.c). */
    if (ch->algo == COLL_ALGO_SLOTS)
        return cadre__fast_alltoallv(c.comm, fn, sig, in_place ? rbuf : sbuf, scounts, sdispls,
                                     rbuf, rcounts, rdispls, c.es,
                                     cadre__coll_slots_max(COLL_ALLTOALL, c.n));
    struct coll_sched s;
    begin(&s, &c, dt, CADRE_SUM);
    /* What it writes here, as allgather says: from cadre__copy_out_min (16
     * MiB) its copies (the own block, the in-place copy) and message
     * receives land with streaming stores. 4 ranks on 2 cores, 16 MiB,
     * adjacent runs: 0.85 of the time without (6 of 7; issue 45, where
     * Open MPI was ahead there). */
    s.out_bytes = rhi - rlo;
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
    int rc = ch->algo == COLL_ALGO_LINEAR
                 ? cadre__algo_alltoallv_linear(&s, sbuf, scounts, sdispls, rbuf, rcounts, rdispls)
                 : cadre__algo_alltoallv_pairwise(&s, sbuf, scounts, sdispls, rbuf, rcounts,
                                                  rdispls);
    s.sig = sig;
    return finish(&s, rc, req);
}
int cadre_alltoallv(const void *sendbuf, const size_t sendcounts[], const size_t sdispls[],
                    void *recvbuf, const size_t recvcounts[], const size_t rdispls[],
                    cadre_datatype_t dt, cadre_comm_t comm)
{
    return alltoallv_impl("cadre_alltoallv", sendbuf, sendcounts, sdispls, recvbuf, recvcounts,
                          rdispls, dt, comm, NULL, 0, NULL, NULL);
}
int cadre_ialltoallv(const void *sendbuf, const size_t sendcounts[], const size_t sdispls[],
                     void *recvbuf, const size_t recvcounts[], const size_t rdispls[],
                     cadre_datatype_t dt, cadre_comm_t comm, cadre_request_t *req)
{
    return alltoallv_impl("cadre_ialltoallv", sendbuf, sendcounts, sdispls, recvbuf, recvcounts,
                          rdispls, dt, comm, req, 1, NULL, NULL);
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
    struct coll_in in = {.kind = COLL_ALLTOALL, .nb = nb, .equal = 1, .bytes = all};
    struct coll_choice ch;
    cadre__coll_choose(&c, &in, &ch);
    if (ch.algo == COLL_ALGO_SLOTS) {
        if (sbuf == CADRE_IN_PLACE)
            sbuf = rbuf;
        struct block_take t = {.rbuf = rbuf, .off = bytes * (size_t)c.me, .bytes = bytes};
        return cadre__fast_exchange(c.comm, fn, cadre__sig(SIG_ALLTOALL, dt, SIG_NO_OP,
                                                           algo_code(&in, &ch), SIG_NO_ROOT,
                                                           count),
                                    sbuf, all, 1, -1, alltoall_take, &t);
    }
    size_t *counts, *displs;
    CADRE_CHECK(equal_vectors(&c, count, &counts, &displs));
    int rc = alltoallv_impl(fn, sbuf, counts, displs, rbuf, counts, displs, dt, comm, req, nb,
                            &ch, &count);
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
