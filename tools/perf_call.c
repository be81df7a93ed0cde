/* cadre-perf's collective calls, their inputs and their checks, mode by
 * mode (perf_coll.h).
 *
 * In place, the calls pass CADRE_IN_PLACE where MPI places it: the root's
 * block for gather(v) and scatter(v), every rank for the others. The outputs
 * are poisoned before a checked call (all ones: NaN in the floating types) so
 * that a result that never arrives does not pass for one; the v-variants
 * also check that the free elements between the blocks keep what they held. */
#include <stdlib.h>
#include <string.h>

#include "perf_coll.h"

#define W CADRE_COMM_WORLD

/* Before iteration it: this rank's inputs, and with checking on, outputs
 * overwritten (all ones: NaN in the floating types) so that a result that
 * never arrives does not pass for one. */
static void prepare_equal(const struct perf_run *R, uint32_t it)
{
    size_t c = R->c, nc = c * (size_t)R->n, ts = R->ts;
    int me = R->me, root = R->root, inpl = R->inpl, poison = R->check;
    unsigned char *s = R->sbuf, *r = R->rbuf;
    switch (R->m->kind) {
    case ALLREDUCE:
    case REDUCE:
        if (poison && !inpl)
            memset(r, 0xff, c * ts);
        perf_data_fill(R, inpl ? r : s, me, 0, c, it);
        break;
    case REDUCE_SCATTER:
        if (poison && !inpl)
            memset(r, 0xff, c * ts);
        perf_data_fill(R, inpl ? r : s, me, 0, nc, it);
        break;
    case ALLTOALL:
        if (poison && !inpl)
            memset(r, 0xff, nc * ts);
        perf_data_fill(R, inpl ? r : s, me, 0, nc, it);
        break;
    case BCAST:
        if (me == root)
            perf_data_fill(R, r, root, 0, c, it);
        else if (poison)
            memset(r, 0xff, c * ts);
        break;
    case ALLGATHER:
    case GATHER:
        if (poison && (R->m->kind == ALLGATHER || me == root))
            memset(r, 0xff, nc * ts);
        if (inpl && (R->m->kind == ALLGATHER || me == root))
            perf_data_fill(R, perf_el(R, r, (size_t)me * c), me, 0, c, it);
        else
            perf_data_fill(R, s, me, 0, c, it);
        break;
    case SCATTER:
        if (me == root)
            perf_data_fill(R, s, root, 0, nc, it);
        if (poison && !(inpl && me == root))
            memset(r, 0xff, c * ts);
        break;
    default: break; /* BARRIER; the v-variants: prepare_v */
    }
}

/* A whole buffer of count per rank * ranks elements, or count elements; the
 * v-variants' span. */
size_t perf_call_used(const struct perf_run *R)
{
    if (R->m->v)
        return R->vspan * R->ts;
    return (R->m->whole ? R->c * (size_t)R->n : R->c) * R->ts;
}

/* -G: the prepared buffers up to the device (enqueued on the stream the calls
 * use, so ordered before them). */
void perf_call_upload(const struct perf_run *R)
{
    perf_dev_put(R->dsbuf, R->sbuf, perf_call_used(R));
    perf_dev_put(R->drbuf, R->rbuf, perf_call_used(R));
}

/* -G: the results down to the host buffers, after the calls. */
void perf_call_download(const struct perf_run *R)
{
    perf_dev_get(R->sbuf, R->dsbuf, perf_call_used(R));
    perf_dev_get(R->rbuf, R->drbuf, perf_call_used(R));
}

void perf_call(const struct perf_run *R)
{
    size_t c = R->c;
    cadre_datatype_t dt = R->dt;
    int root = R->root, at_root = R->me == root, inpl = R->inpl;
    void *s = R->dsbuf, *r = R->drbuf;
    const size_t *vc = R->vc, *vd = R->vd;
    switch (R->m->kind) {
    case ALLREDUCE: PERF_CK(cadre_allreduce(inpl ? CADRE_IN_PLACE : s, r, c, dt, R->op, W)); break;
    case REDUCE:
        /* In place, the root passes CADRE_IN_PLACE; the others send from recvbuf. */
        PERF_CK(cadre_reduce(inpl ? at_root ? CADRE_IN_PLACE : r : s, r, c, dt, R->op, root, W));
        break;
    case BCAST: PERF_CK(cadre_bcast(r, c, dt, root, W)); break;
    case ALLGATHER: PERF_CK(cadre_allgather(inpl ? CADRE_IN_PLACE : s, r, c, dt, W)); break;
    case REDUCE_SCATTER:
        PERF_CK(cadre_reduce_scatter(inpl ? CADRE_IN_PLACE : s, r, c, dt, R->op, W));
        break;
    case ALLTOALL: PERF_CK(cadre_alltoall(inpl ? CADRE_IN_PLACE : s, r, c, dt, W)); break;
    case GATHER: PERF_CK(cadre_gather(inpl && at_root ? CADRE_IN_PLACE : s, r, c, dt, root, W)); break;
    case SCATTER: PERF_CK(cadre_scatter(s, inpl && at_root ? CADRE_IN_PLACE : r, c, dt, root, W)); break;
    case BARRIER: PERF_CK(cadre_barrier(W)); break;
    case GATHERV:
        PERF_CK(cadre_gatherv(inpl && at_root ? CADRE_IN_PLACE : s, vc[R->me], r, vc, vd, dt, root, W));
        break;
    case SCATTERV:
        PERF_CK(cadre_scatterv(s, vc, vd, inpl && at_root ? CADRE_IN_PLACE : r, vc[R->me], dt, root, W));
        break;
    case ALLGATHERV:
        PERF_CK(cadre_allgatherv(inpl ? CADRE_IN_PLACE : s, vc[R->me], r, vc, vd, dt, W));
        break;
    case ALLTOALLV:
        /* What k sends this rank equals what it sends k: one pair of arrays. */
        PERF_CK(cadre_alltoallv(inpl ? CADRE_IN_PLACE : s, vc, vd, r, vc, vd, dt, W));
        break;
    }
}

static long check_equal(const struct perf_run *R, uint32_t it)
{
    size_t c = R->c;
    int me = R->me, root = R->root;
    unsigned char *r = R->rbuf;
    long w = 0;
    switch (R->m->kind) {
    case ALLREDUCE: return perf_data_wrong(R, r, -1, 0, c, it);
    case REDUCE: return me == root ? perf_data_wrong(R, r, -1, 0, c, it) : 0;
    case REDUCE_SCATTER: return perf_data_wrong(R, r, -1, (size_t)me * c, c, it);
    case BCAST: return perf_data_wrong(R, r, root, 0, c, it);
    case ALLGATHER:
    case GATHER:
        if (R->m->kind == GATHER && me != root)
            return 0;
        for (int k = 0; k < R->n; k++)
            w += perf_data_wrong(R, perf_el(R, r, (size_t)k * c), k, 0, c, it);
        return w;
    case ALLTOALL:
        for (int k = 0; k < R->n; k++)
            w += perf_data_wrong(R, perf_el(R, r, (size_t)k * c), k, (size_t)me * c, c, it);
        return w;
    case SCATTER:
        /* In place, the root's block stays where it was in sendbuf. */
        return perf_data_wrong(R, R->inpl && me == root ? perf_el(R, R->sbuf, (size_t)me * c) : r, root,
                           (size_t)me * c, c, it);
    default: return 0; /* BARRIER; the v-variants: check_v */
    }
}

/* The v-variants (the layout: perf_coll.h). scatterv's and alltoallv's
 * sendbuf holds the inputs over the whole span, free elements included;
 * a block is then the inputs from its displacement on. */
static void prepare_v(const struct perf_run *R, uint32_t it)
{
    size_t span = R->vspan, ts = R->ts, mine = R->vc[R->me];
    int me = R->me, root = R->root, inpl = R->inpl, poison = R->check;
    int gets = R->m->kind == ALLGATHERV || me == root; /* gatherv, allgatherv */
    unsigned char *s = R->sbuf, *r = R->rbuf;
    switch (R->m->kind) {
    case GATHERV:
    case ALLGATHERV:
        if (poison && gets)
            memset(r, 0xff, span * ts);
        perf_data_fill(R, inpl && gets ? perf_el(R, r, R->vd[me]) : s, me, 0, mine, it);
        break;
    case SCATTERV:
        if (me == root)
            perf_data_fill(R, s, root, 0, span, it);
        if (poison && !(inpl && me == root)) /* the block, and one element after it */
            memset(r, 0xff, (mine + 1) * ts);
        break;
    case ALLTOALLV:
        if (poison && !inpl)
            memset(r, 0xff, span * ts);
        perf_data_fill(R, inpl ? r : s, me, 0, span, it);
        break;
    default: break;
    }
}

void perf_call_prepare(const struct perf_run *R, uint32_t it)
{
    if (R->m->v)
        prepare_v(R, it);
    else
        prepare_equal(R, it);
}

/* The free elements of this rank's recvbuf that changed: the poison, or in
 * place (alltoallv) this rank's own inputs. */
static long free_changed(const struct perf_run *R, unsigned char *r, int filled, uint32_t it)
{
    long w = 0;
    for (int k = 0; k <= R->n; k++) {
        size_t g = k < R->n ? R->vd[k] - 1 : R->vspan - 1;
        w += filled ? perf_data_wrong(R, perf_el(R, r, g), R->me, g, 1, it)
                    : perf_data_unpoisoned(R, perf_el(R, r, g), 1);
    }
    return w;
}

static long check_v(const struct perf_run *R, uint32_t it)
{
    int me = R->me, root = R->root, n = R->n;
    const size_t *vc = R->vc, *vd = R->vd;
    unsigned char *r = R->rbuf;
    long w = 0;
    switch (R->m->kind) {
    case GATHERV:
    case ALLGATHERV:
        if (R->m->kind == GATHERV && me != root)
            return 0;
        for (int k = 0; k < n; k++)
            w += perf_data_wrong(R, perf_el(R, r, vd[k]), k, 0, vc[k], it);
        return w + free_changed(R, r, 0, it);
    case SCATTERV:
        if (R->inpl && me == root) /* the root's block stays in sendbuf */
            return perf_data_wrong(R, perf_el(R, R->sbuf, vd[me]), root, vd[me], vc[me], it);
        return perf_data_wrong(R, r, root, vd[me], vc[me], it) +
               perf_data_unpoisoned(R, perf_el(R, r, vc[me]), 1);
    case ALLTOALLV: {
        /* Block k: rank k's inputs from where k's layout puts this rank's block. */
        size_t *kc = malloc(2 * (size_t)n * sizeof *kc);
        if (!kc) {
            fprintf(stderr, "cadre-perf: rank %d: no memory\n", me);
            cadre_abort(W, 1);
        }
        for (int k = 0; k < n; k++) {
            perf_data_layout(R, k, kc, kc + n);
            w += perf_data_wrong(R, perf_el(R, r, vd[k]), k, kc[n + me], vc[k], it);
        }
        free(kc);
        return w + free_changed(R, r, R->inpl, it);
    }
    default: return 0;
    }
}

/* Wrong elements of this rank's result of iteration it. */
long perf_call_check(const struct perf_run *R, uint32_t it)
{
    return R->m->v ? check_v(R, it) : check_equal(R, it);
}
