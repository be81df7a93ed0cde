/* cadre-perf's collective modes, as nccl-tests runs them.
 *
 * Sizes: allreduce, reduce and bcast take count = size / typesize; the
 * others take the whole buffer, count per rank = size / typesize / ranks, and
 * print that buffer's size (count * ranks * typesize), as nccl-tests does.
 * The v-variants (gatherv scatterv allgatherv alltoallv) spread about that
 * many elements unevenly over the ranks, with free elements between the
 * blocks (perf_coll.h), and print the sum of their counts times typesize.
 *
 * Each size runs out of place, then in place (CADRE_IN_PLACE as MPI places
 * it: the root's block for gather and scatter), and both go on one line.
 *
 * Timing: -w warm-ups, then -n timed iterations. By default (-t loop) the
 * timed calls run back to back after a barrier, as in nccl-tests: each rank
 * takes the mean time of one call and the line shows the largest over the
 * ranks. With -t barrier each call is timed on its own with a barrier after
 * it, as the OSU micro-benchmarks and IMB time collectives: each rank's mean,
 * averaged over the ranks. Either way the timed calls neither fill nor check:
 * with -c 1 (the default) one more call, untimed, gets fresh inputs and its
 * result is checked, as nccl-tests checks outside its timed loop.
 *
 * Checking: element by element against references computed from the known
 * inputs (perf_data.c, perf_call.c).
 *
 * -G: the calls get device twins of the two buffers (perf_dev.c); inputs and
 * poison are prepared in the host buffers and copied up, results copied down
 * before the check, and the clock stops only after the stream has drained
 * (calls on device buffers return once enqueued). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf_coll.h"

#define W CADRE_COMM_WORLD

static const struct perf_mode modes[] = {
    /* name, kind, reduces, rooted, whole, v */
    {"allreduce", ALLREDUCE, 1, 0, 0, 0},           {"reduce", REDUCE, 1, 1, 0, 0},
    {"bcast", BCAST, 0, 1, 0, 0},                   {"allgather", ALLGATHER, 0, 0, 1, 0},
    {"reduce_scatter", REDUCE_SCATTER, 1, 0, 1, 0}, {"alltoall", ALLTOALL, 0, 0, 1, 0},
    {"gather", GATHER, 0, 1, 1, 0},                 {"scatter", SCATTER, 0, 1, 1, 0},
    {"barrier", BARRIER, 0, 0, 0, 0},               {"gatherv", GATHERV, 0, 1, 1, 1},
    {"scatterv", SCATTERV, 0, 1, 1, 1},             {"allgatherv", ALLGATHERV, 0, 0, 1, 1},
    {"alltoallv", ALLTOALLV, 0, 0, 1, 1},
};

static const struct perf_mode *find(const char *name)
{
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (!strcmp(modes[i].name, name))
            return &modes[i];
    return NULL;
}

int perf_coll_known(const char *mode)
{
    return find(mode) != NULL;
}

int perf_coll_needs_op(const char *mode)
{
    const struct perf_mode *m = find(mode);
    return m && m->reduces;
}

/* busbw = algbw * factor. The factors of nccl-tests' doc/PERFORMANCE.md:
 * AllReduce 2(n-1)/n; ReduceScatter, AllGather, AlltoAll (n-1)/n; Broadcast
 * and Reduce 1. Gather and Scatter are not on that page: nccl-tests'
 * src/gather.cu and src/scatter.cu (GatherGetBw, ScatterGetBw) use (n-1)/n. */
static double bus_factor(enum perf_kind k, int n)
{
    switch (k) {
    case ALLREDUCE: return 2.0 * (n - 1) / n;
    case REDUCE_SCATTER:
    case ALLGATHER:
    case ALLTOALL:
    case GATHER:
    case SCATTER:
    case GATHERV:
    case SCATTERV:
    case ALLGATHERV:
    case ALLTOALLV: return (double)(n - 1) / n;
    case BCAST:
    case REDUCE: return 1;
    case BARRIER: return 0;
    }
    return 0;
}

/* -T: runs of `iters` calls, doubling (or more, by the last run's pace)
 * until one takes mintime on the slowest rank; its mean. */
static double time_for(const struct perf_run *R, int iters, double mintime)
{
    for (;;) {
        PERF_CK(cadre_barrier(W));
        double t0 = perf_now();
        for (int k = 0; k < iters; k++)
            perf_call(R);
        perf_dev_sync();
        double dt = perf_now() - t0;
        PERF_CK(cadre_allreduce(CADRE_IN_PLACE, &dt, 1, CADRE_FLOAT64, CADRE_MAX, W));
        if (dt >= mintime || iters >= 1 << 30)
            return dt / iters;
        double want = dt > 0 ? (double)iters * mintime * 1.2 / dt : (double)iters * 64;
        if (want > (double)iters * 64)
            want = (double)iters * 64;
        iters = want > (double)(1 << 30) ? 1 << 30 : want > 2.0 * iters ? (int)want : 2 * iters;
    }
}

/* -t barrier: each call timed on its own, a barrier after each (outside the
 * time), as the OSU micro-benchmarks and IMB time collectives: every call
 * starts from ranks that have all left the one before. This rank's mean;
 * *iter, the mean of a whole iteration, the call and its barrier: a wait
 * that one library's barrier holds its ranks in and another's leaves to
 * the call shows in the calls' times, not in this one. */
static double time_each(const struct perf_run *R, int iters, double *iter)
{
    double total = 0, start = perf_now();
    for (int k = 0; k < iters; k++) {
        double t0 = perf_now();
        perf_call(R);
        perf_dev_sync();
        total += perf_now() - t0;
        PERF_CK(cadre_barrier(W));
    }
    *iter = (perf_now() - start) / iters;
    return total / iters;
}

/* One call of fresh inputs (iteration `it`), untimed, its result checked:
 * this rank's wrong elements. The barrier keeps one rank's preparation out
 * of nobody's time, only the order of the ranks' arrival. */
static long checked_call(const struct perf_run *R, uint32_t it)
{
    perf_call_prepare(R, it);
    perf_call_upload(R);
    perf_dev_sync();
    PERF_CK(cadre_barrier(W));
    perf_call(R);
    perf_dev_sync();
    perf_call_download(R);
    perf_corrupt(R->rbuf, perf_call_used(R));
    return perf_call_check(R, it);
}

/* One size: the mean seconds of one call on this rank, timed as -t and -T
 * say, after warm warm-ups (-t barrier: *iter, an iteration's); then, with
 * -c 1, one checked call (*wrong: this rank's wrong elements). The timed calls run on the inputs of iteration 0
 * (in place, on what the calls before left), like nccl-tests' timed loop; its
 * -c 1 checks outside that loop too. */
static double time_size(const struct perf_run *R, int iters, int warm, long *wrong, double *iter)
{
    double t;
    perf_call_prepare(R, 0);
    perf_call_upload(R);
    for (int k = 0; k < warm; k++)
        perf_call(R);
    perf_dev_sync();
    if (R->mintime > 0) {
        t = time_for(R, iters, R->mintime);
    } else if (R->each) {
        PERF_CK(cadre_barrier(W));
        t = time_each(R, iters, iter);
    } else {
        PERF_CK(cadre_barrier(W));
        double t0 = perf_now();
        for (int k = 0; k < iters; k++)
            perf_call(R);
        perf_dev_sync();
        t = (perf_now() - t0) / iters;
    }
    if (R->check)
        *wrong += checked_call(R, 1);
    return t;
}

long perf_coll_run(const struct perf_opts *o)
{
    const struct perf_mode *m = find(o->mode);
    struct perf_run R = {.m = m, .dt = o->dt, .ts = cadre_datatype_size(o->dt), .op = o->op,
                         .root = m->rooted ? o->root : -1, .check = o->check,
                         .me = perf_me, .n = perf_np, .mintime = o->mintime,
                         .each = o->each};
    R.sgn = o->dt != CADRE_UINT8 && o->dt != CADRE_UINT32 && o->dt != CADRE_UINT64;
    R.range = o->dt == CADRE_INT8 || o->dt == CADRE_UINT8 || o->dt == CADRE_BFLOAT16 ? 200
              : o->dt == CADRE_FLOAT16                                               ? 2000
                                                                                     : 1000000;
    if (!m->reduces)
        R.op = CADRE_SUM; /* unused; gen() ignores it */
    int barrier = m->kind == BARRIER;
    /* the v-variants: a free element before each block and after the last */
    size_t bufsize = barrier ? 1 : o->maxb + R.ts * (m->v ? (size_t)perf_np + 2 : 1);
    R.sbuf = malloc(bufsize);
    R.rbuf = malloc(bufsize);
    R.vc = calloc(2 * (size_t)perf_np, sizeof *R.vc);
    R.vd = R.vc + perf_np;
    if (!R.sbuf || !R.rbuf || !R.vc) {
        fprintf(stderr, "cadre-perf: rank %d: no memory for 2 x %zu bytes\n", perf_me, bufsize);
        cadre_abort(W, 1);
    }
    memset(R.sbuf, 0, bufsize); /* fault the pages in before timing */
    memset(R.rbuf, 0, bufsize);
    R.dsbuf = R.sbuf;
    R.drbuf = R.rbuf;
    if (perf_dev) {
        R.dsbuf = perf_dev_alloc(bufsize);
        R.drbuf = perf_dev_alloc(bufsize);
        if (!R.dsbuf || !R.drbuf) {
            fprintf(stderr, "cadre-perf: rank %d: -G: no device memory for 2 x %zu bytes\n",
                    perf_me, bufsize);
            cadre_abort(W, 1);
        }
    }
    const char *type = barrier ? "none" : perf_type_name(o->dt);
    const char *redop = m->reduces ? perf_op_name(o->op) : "none";
    char what[160];
    int len = snprintf(what, sizeof what, "%s: %d ranks, %s", m->name, perf_np, type);
    if (m->reduces)
        len += snprintf(what + len, sizeof what - (size_t)len, " %s", redop);
    if (m->rooted)
        len += snprintf(what + len, sizeof what - (size_t)len, ", root %d", R.root);
    snprintf(what + len, sizeof what - (size_t)len, "; time: %s",
             R.each ? "mean of one call on each rank, a barrier after each call, averaged over "
                      "the ranks (-t barrier)"
                    : "mean of one call, calls back to back, largest over the ranks");
    perf_print_header(o, what);
    long total = 0;
    size_t size = barrier ? 0 : o->minb;
    do {
        size_t count = 0, bytes = 0;
        if (m->whole) {
            count = size / R.ts / (size_t)perf_np;
            bytes = count * (size_t)perf_np * R.ts;
        } else if (!barrier) {
            count = size / R.ts;
            bytes = count * R.ts;
        }
        R.c = count;
        if (m->v) {
            R.vspan = perf_data_layout(&R, m->kind == ALLTOALLV ? perf_me : -1, R.vc, R.vd);
            bytes = perf_data_vbytes(&R);
        }
        int iters = o->iters > 0 ? o->iters : o->mintime > 0 ? 1 : perf_default_iters(bytes);
        int warm = o->warmup >= 0 ? o->warmup : iters / 10 + 1;
        struct perf_result res[2];
        double iter[2] = {0, 0};
        for (int inpl = 0; inpl < 2; inpl++) {
            R.inpl = inpl;
            long wrong = 0;
            double tt[2] = {0, 0};
            tt[0] = time_size(&R, iters, warm, &wrong, &tt[1]);
            int64_t w = wrong;
            PERF_CK(cadre_allreduce(CADRE_IN_PLACE, tt, 2, CADRE_FLOAT64, R.each ? CADRE_SUM : CADRE_MAX,
                                    W));
            double t = R.each ? tt[0] / perf_np : tt[0];
            iter[inpl] = tt[1] / perf_np;
            PERF_CK(cadre_allreduce(CADRE_IN_PLACE, &w, 1, CADRE_INT64, CADRE_SUM, W));
            double algbw = t > 0 ? (double)bytes / t / 1e9 : 0;
            res[inpl] = (struct perf_result){t, algbw, algbw * bus_factor(m->kind, perf_np),
                                             o->check ? (long)w : -1L};
            total += (long)w;
        }
        if (perf_me == 0) {
            perf_print_line(bytes, count, type, redop, R.root, res);
            if (R.each && !R.mintime)
                printf("# iteration  size %zu  out-of-place %.3f  in-place %.3f  us: the call and "
                       "the barrier after it, mean over the ranks\n", bytes, iter[0] * 1e6,
                       iter[1] * 1e6);
            fflush(stdout);
        }
    } while (!barrier && perf_next_size(o, &size));
    if (perf_me == 0)
        perf_print_footer();
    if (perf_dev) {
        perf_dev_free(R.dsbuf);
        perf_dev_free(R.drbuf);
    }
    free(R.sbuf);
    free(R.rbuf);
    free(R.vc);
    return total;
}
