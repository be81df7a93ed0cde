/* cadre-perf's collective modes, as nccl-tests runs them.
 *
 * Sizes: allreduce, reduce and bcast take count = size / typesize; the
 * others take the whole buffer, count per rank = size / typesize / ranks, and
 * print that buffer's size (count * ranks * typesize), as nccl-tests does.
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
 * Checking: every input element is a small integer that depends on the rank,
 * the element's index and the iteration, chosen so that every result is
 * exact in the datatype (sums of values in [-3,4]; products of 2, 1 and -1;
 * averages of values whose sum is a multiple of the rank count). The
 * reference is computed from the same formula, and a result element counts
 * as wrong unless its bits equal the reference's. Integer sums and products
 * wrap modulo 2^bits, as the library's do; float16 products overflow past
 * 15 ranks.
 *
 * -G: the calls get device twins of the two buffers (perf_dev.c); inputs and
 * poison are prepared in the host buffers and copied up, results copied down
 * before the check, and the clock stops only after the stream has drained
 * (calls on device buffers return once enqueued). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf.h"

#define W CADRE_COMM_WORLD

enum kind { ALLREDUCE, REDUCE, BCAST, ALLGATHER, REDUCE_SCATTER, ALLTOALL, GATHER, SCATTER, BARRIER };

static const struct mode {
    const char *name;
    enum kind kind;
    int reduces; /* takes -o */
    int rooted;  /* takes -r */
    int whole;   /* the size is the whole buffer: count per rank * ranks * typesize */
} modes[] = {
    {"allreduce", ALLREDUCE, 1, 0, 0},   {"reduce", REDUCE, 1, 1, 0},
    {"bcast", BCAST, 0, 1, 0},           {"allgather", ALLGATHER, 0, 0, 1},
    {"reduce_scatter", REDUCE_SCATTER, 1, 0, 1}, {"alltoall", ALLTOALL, 0, 0, 1},
    {"gather", GATHER, 0, 1, 1},         {"scatter", SCATTER, 0, 1, 1},
    {"barrier", BARRIER, 0, 0, 0},
};

static const struct mode *find(const char *name)
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
    const struct mode *m = find(mode);
    return m && m->reduces;
}

/* busbw = algbw * factor. The factors of nccl-tests' doc/PERFORMANCE.md:
 * AllReduce 2(n-1)/n; ReduceScatter, AllGather, AlltoAll (n-1)/n; Broadcast
 * and Reduce 1. Gather and Scatter are not on that page: nccl-tests'
 * src/gather.cu and src/scatter.cu (GatherGetBw, ScatterGetBw) use (n-1)/n. */
static double bus_factor(enum kind k, int n)
{
    switch (k) {
    case ALLREDUCE: return 2.0 * (n - 1) / n;
    case REDUCE_SCATTER:
    case ALLGATHER:
    case ALLTOALL:
    case GATHER:
    case SCATTER: return (double)(n - 1) / n;
    case BCAST:
    case REDUCE: return 1;
    case BARRIER: return 0;
    }
    return 0;
}

struct run {
    const struct mode *m;
    cadre_datatype_t dt;
    size_t ts; /* bytes per element */
    cadre_op_t op;
    int root, inpl, check, me, n;
    size_t c;                /* count per rank */
    unsigned char *sbuf, *rbuf; /* host: prepared and checked here */
    unsigned char *dsbuf, *drbuf; /* what the calls get: sbuf and rbuf, or their device twins */
    int64_t range;           /* inputs of max, min and the data-moving modes: range values */
    int sgn;                 /* signed or floating: inputs may be negative */
    double mintime;          /* -T */
    int each;                /* -t barrier: time_each, the mean over the ranks */
};

/* ---- inputs and their references ------------------------------------------------------- */
static uint32_t mix(int rank, size_t i, uint32_t it)
{
    uint32_t x = (uint32_t)i * 0x9e3779b1u ^ (uint32_t)((uint64_t)i >> 32) * 0x27d4eb2fu;
    x += (uint32_t)(rank + 1) * 0x85ebca77u + it * 0xc2b2ae3du;
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

/* AVG: rank r > 0 gives m + k_r, rank 0 gives m - (k_1 + ... + k_{n-1}): the
 * sum is n*m and the average m, exactly. */
static int64_t avg_mean(size_t i, uint32_t it)
{
    return (int64_t)(mix(-1, i, it) % 8) - 3;
}

/* Element i of rank `rank`'s input at iteration it. */
static int64_t gen(const struct run *R, int rank, size_t i, uint32_t it)
{
    uint32_t h = mix(rank, i, it);
    if (R->m->reduces) {
        switch (R->op) {
        case CADRE_SUM: return R->sgn ? (int64_t)(h % 8) - 3 : (int64_t)(h % 8);
        case CADRE_PROD: h %= 3; return h == 0 ? 2 : h == 1 && R->sgn ? -1 : 1;
        case CADRE_AVG:
            if (rank > 0)
                return avg_mean(i, it) + (h & 1);
            int64_t v = avg_mean(i, it);
            for (int r = 1; r < R->n; r++)
                v -= mix(r, i, it) & 1;
            return v;
        default: break; /* MAX, MIN: below */
        }
    }
    return (int64_t)(h % (uint32_t)R->range) - (R->sgn ? R->range / 2 : 0);
}

/* Element i of the reduction over every rank's input. */
static int64_t ref(const struct run *R, size_t i, uint32_t it)
{
    if (R->op == CADRE_AVG)
        return avg_mean(i, it);
    int64_t a = gen(R, 0, i, it);
    for (int r = 1; r < R->n; r++) {
        int64_t b = gen(R, r, i, it);
        switch (R->op) {
        case CADRE_SUM: a = (int64_t)((uint64_t)a + (uint64_t)b); break;
        case CADRE_PROD: a = (int64_t)((uint64_t)a * (uint64_t)b); break;
        case CADRE_MAX: a = b > a ? b : a; break;
        case CADRE_MIN: a = b < a ? b : a; break;
        default: break;
        }
    }
    return a;
}

/* v in a 16-bit IEEE format with `man` mantissa bits and exponent bias `bias`
 * (float16: 10, 15; bfloat16: 7, 127), rounded to nearest even; infinity
 * beyond the largest finite value. */
static uint16_t int_to_f16(int64_t v, int man, int bias)
{
    uint16_t sign = v < 0 ? 0x8000 : 0;
    uint64_t a = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    if (!a)
        return sign;
    int e = 63 - __builtin_clzll(a);
    uint64_t m;
    if (e <= man) {
        m = a << (man - e);
    } else {
        int sh = e - man;
        uint64_t rem = a & ((1ull << sh) - 1), half = 1ull << (sh - 1);
        m = a >> sh;
        if (rem > half || (rem == half && (m & 1)))
            m++;
        if (m >> (man + 1)) {
            m >>= 1;
            e++;
        }
    }
    int emax = (1 << (15 - man)) - 1; /* all ones: infinity */
    if (e + bias >= emax)
        return (uint16_t)(sign | emax << man);
    return (uint16_t)(sign | (e + bias) << man | (m & ((1u << man) - 1)));
}

/* v as one element of dt, at p. */
static void put(cadre_datatype_t dt, void *p, int64_t v)
{
    switch (dt) {
    case CADRE_INT8:
    case CADRE_UINT8: *(uint8_t *)p = (uint8_t)v; break;
    case CADRE_INT32:
    case CADRE_UINT32: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
    case CADRE_INT64:
    case CADRE_UINT64: { uint64_t x = (uint64_t)v; memcpy(p, &x, 8); break; }
    case CADRE_FLOAT16: { uint16_t x = int_to_f16(v, 10, 15); memcpy(p, &x, 2); break; }
    case CADRE_BFLOAT16: { uint16_t x = int_to_f16(v, 7, 127); memcpy(p, &x, 2); break; }
    case CADRE_FLOAT32: { float x = (float)v; memcpy(p, &x, 4); break; }
    case CADRE_FLOAT64: { double x = (double)v; memcpy(p, &x, 8); break; }
    }
}

static unsigned char *el(const struct run *R, unsigned char *buf, size_t i)
{
    return buf + i * R->ts;
}

/* Fills n elements at buf with rank's inputs from index `first` on. */
static void fill_from(const struct run *R, unsigned char *buf, int rank, size_t first, size_t n,
                      uint32_t it)
{
    for (size_t i = 0; i < n; i++)
        put(R->dt, el(R, buf, i), gen(R, rank, first + i, it));
}

/* Wrong elements among n at buf: element i must be gen(rank, first + i), or
 * with rank < 0 the reduction ref(first + i). */
static long count_wrong(const struct run *R, unsigned char *buf, int rank, size_t first, size_t n,
                        uint32_t it)
{
    long w = 0;
    unsigned char want[8];
    for (size_t i = 0; i < n; i++) {
        put(R->dt, want, rank < 0 ? ref(R, first + i, it) : gen(R, rank, first + i, it));
        w += memcmp(want, el(R, buf, i), R->ts) != 0;
    }
    return w;
}

/* Before iteration it: this rank's inputs, and with checking on, outputs
 * overwritten (all ones: NaN in the floating types) so that a result that
 * never arrives does not pass for one. */
static void prepare(const struct run *R, uint32_t it)
{
    size_t c = R->c, nc = c * (size_t)R->n, ts = R->ts;
    int me = R->me, root = R->root, inpl = R->inpl, poison = R->check;
    unsigned char *s = R->sbuf, *r = R->rbuf;
    switch (R->m->kind) {
    case ALLREDUCE:
    case REDUCE:
        if (poison && !inpl)
            memset(r, 0xff, c * ts);
        fill_from(R, inpl ? r : s, me, 0, c, it);
        break;
    case REDUCE_SCATTER:
        if (poison && !inpl)
            memset(r, 0xff, c * ts);
        fill_from(R, inpl ? r : s, me, 0, nc, it);
        break;
    case ALLTOALL:
        if (poison && !inpl)
            memset(r, 0xff, nc * ts);
        fill_from(R, inpl ? r : s, me, 0, nc, it);
        break;
    case BCAST:
        if (me == root)
            fill_from(R, r, root, 0, c, it);
        else if (poison)
            memset(r, 0xff, c * ts);
        break;
    case ALLGATHER:
    case GATHER:
        if (poison && (R->m->kind == ALLGATHER || me == root))
            memset(r, 0xff, nc * ts);
        if (inpl && (R->m->kind == ALLGATHER || me == root))
            fill_from(R, el(R, r, (size_t)me * c), me, 0, c, it);
        else
            fill_from(R, s, me, 0, c, it);
        break;
    case SCATTER:
        if (me == root)
            fill_from(R, s, root, 0, nc, it);
        if (poison && !(inpl && me == root))
            memset(r, 0xff, c * ts);
        break;
    case BARRIER: break;
    }
}

/* Bytes of either buffer the calls of this size read or write: a whole
 * buffer of count per rank * ranks elements, or count elements. */
static size_t used(const struct run *R)
{
    return (R->m->whole ? R->c * (size_t)R->n : R->c) * R->ts;
}

/* -G: the prepared buffers up to the device (enqueued on the stream the calls
 * use, so ordered before them). */
static void upload(const struct run *R)
{
    perf_dev_put(R->dsbuf, R->sbuf, used(R));
    perf_dev_put(R->drbuf, R->rbuf, used(R));
}

/* -G: the results down to the host buffers, after the calls. */
static void download(const struct run *R)
{
    perf_dev_get(R->sbuf, R->dsbuf, used(R));
    perf_dev_get(R->rbuf, R->drbuf, used(R));
}

static void call(const struct run *R)
{
    size_t c = R->c;
    cadre_datatype_t dt = R->dt;
    int root = R->root, at_root = R->me == root, inpl = R->inpl;
    void *s = R->dsbuf, *r = R->drbuf;
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
    }
}

/* Wrong elements of this rank's result of iteration it. */
static long check(const struct run *R, uint32_t it)
{
    size_t c = R->c;
    int me = R->me, root = R->root;
    unsigned char *r = R->rbuf;
    long w = 0;
    switch (R->m->kind) {
    case ALLREDUCE: return count_wrong(R, r, -1, 0, c, it);
    case REDUCE: return me == root ? count_wrong(R, r, -1, 0, c, it) : 0;
    case REDUCE_SCATTER: return count_wrong(R, r, -1, (size_t)me * c, c, it);
    case BCAST: return count_wrong(R, r, root, 0, c, it);
    case ALLGATHER:
    case GATHER:
        if (R->m->kind == GATHER && me != root)
            return 0;
        for (int k = 0; k < R->n; k++)
            w += count_wrong(R, el(R, r, (size_t)k * c), k, 0, c, it);
        return w;
    case ALLTOALL:
        for (int k = 0; k < R->n; k++)
            w += count_wrong(R, el(R, r, (size_t)k * c), k, (size_t)me * c, c, it);
        return w;
    case SCATTER:
        /* In place, the root's block stays where it was in sendbuf. */
        return count_wrong(R, R->inpl && me == root ? el(R, R->sbuf, (size_t)me * c) : r, root,
                           (size_t)me * c, c, it);
    case BARRIER: return 0;
    }
    return 0;
}

/* -T: runs of `iters` calls, doubling (or more, by the last run's pace)
 * until one takes mintime on the slowest rank; its mean. */
static double time_for(const struct run *R, int iters, double mintime)
{
    for (;;) {
        PERF_CK(cadre_barrier(W));
        double t0 = perf_now();
        for (int k = 0; k < iters; k++)
            call(R);
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
 * starts from ranks that have all left the one before. This rank's mean. */
static double time_each(const struct run *R, int iters)
{
    double total = 0;
    for (int k = 0; k < iters; k++) {
        double t0 = perf_now();
        call(R);
        perf_dev_sync();
        total += perf_now() - t0;
        PERF_CK(cadre_barrier(W));
    }
    return total / iters;
}

/* One call of fresh inputs (iteration `it`), untimed, its result checked:
 * this rank's wrong elements. The barrier keeps one rank's preparation out
 * of nobody's time, only the order of the ranks' arrival. */
static long checked_call(const struct run *R, uint32_t it)
{
    prepare(R, it);
    upload(R);
    perf_dev_sync();
    PERF_CK(cadre_barrier(W));
    call(R);
    perf_dev_sync();
    download(R);
    perf_corrupt(R->rbuf, used(R));
    return check(R, it);
}

/* One size: the mean seconds of one call on this rank, timed as -t and -T
 * say, after warm warm-ups; then, with -c 1, one checked call (*wrong: this
 * rank's wrong elements). The timed calls run on the inputs of iteration 0
 * (in place, on what the calls before left), like nccl-tests' timed loop; its
 * -c 1 checks outside that loop too. */
static double time_size(const struct run *R, int iters, int warm, long *wrong)
{
    double t;
    prepare(R, 0);
    upload(R);
    for (int k = 0; k < warm; k++)
        call(R);
    perf_dev_sync();
    if (R->mintime > 0) {
        t = time_for(R, iters, R->mintime);
    } else if (R->each) {
        PERF_CK(cadre_barrier(W));
        t = time_each(R, iters);
    } else {
        PERF_CK(cadre_barrier(W));
        double t0 = perf_now();
        for (int k = 0; k < iters; k++)
            call(R);
        perf_dev_sync();
        t = (perf_now() - t0) / iters;
    }
    if (R->check)
        *wrong += checked_call(R, 1);
    return t;
}

long perf_coll_run(const struct perf_opts *o)
{
    const struct mode *m = find(o->mode);
    struct run R = {.m = m, .dt = o->dt, .ts = cadre_datatype_size(o->dt), .op = o->op,
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
    size_t bufsize = barrier ? 1 : o->maxb + R.ts;
    R.sbuf = malloc(bufsize);
    R.rbuf = malloc(bufsize);
    if (!R.sbuf || !R.rbuf) {
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
        int iters = o->iters > 0 ? o->iters : o->mintime > 0 ? 1 : perf_default_iters(bytes);
        int warm = o->warmup >= 0 ? o->warmup : iters / 10 + 1;
        struct perf_result res[2];
        for (int inpl = 0; inpl < 2; inpl++) {
            R.inpl = inpl;
            long wrong = 0;
            double t = time_size(&R, iters, warm, &wrong);
            int64_t w = wrong;
            PERF_CK(cadre_allreduce(CADRE_IN_PLACE, &t, 1, CADRE_FLOAT64, R.each ? CADRE_SUM : CADRE_MAX,
                                    W));
            if (R.each)
                t /= perf_np;
            PERF_CK(cadre_allreduce(CADRE_IN_PLACE, &w, 1, CADRE_INT64, CADRE_SUM, W));
            double algbw = t > 0 ? (double)bytes / t / 1e9 : 0;
            res[inpl] = (struct perf_result){t, algbw, algbw * bus_factor(m->kind, perf_np),
                                             o->check ? (long)w : -1L};
            total += (long)w;
        }
        if (perf_me == 0)
            perf_print_line(bytes, count, type, redop, R.root, res);
    } while (!barrier && perf_next_size(o, &size));
    if (perf_me == 0)
        perf_print_footer();
    if (perf_dev) {
        perf_dev_free(R.dsbuf);
        perf_dev_free(R.drbuf);
    }
    free(R.sbuf);
    free(R.rbuf);
    return total;
}
