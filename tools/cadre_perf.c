/* cadre-perf: benchmarks in the layout of nccl-tests (perf_print.c).
 *
 *   cadrerun -n 2 cadre-perf allreduce -b 8 -e 64M -f 2
 *   cadrerun -n 2 cadre-perf sendrecv -b 8 -e 64M -f 2
 *
 * Here: the options, the sweep of sizes, main. Modes: the collectives
 * (allreduce reduce bcast allgather reduce_scatter alltoall gather scatter,
 * the v-variants gatherv scatterv allgatherv alltoallv, barrier: perf_coll.c,
 * their calls and checks perf_call.c, their inputs perf_data.c), sendrecv and
 * stream (perf_p2p.c). Each size runs out of place, then in place. Options as
 * nccl-tests'; exit
 * status 2 on a usage error, 1 when any element was wrong. With -G the calls
 * get device buffers (perf_dev.c); the patterns are still written and
 * checked in host memory and copied up and down around the calls. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cadre.h"
#include "perf.h"

int perf_me, perf_np;

double perf_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static const struct {
    const char *name;
    cadre_datatype_t dt;
} types[] = {
    {"int8", CADRE_INT8},       {"uint8", CADRE_UINT8},       {"int32", CADRE_INT32},
    {"uint32", CADRE_UINT32},   {"int64", CADRE_INT64},       {"uint64", CADRE_UINT64},
    {"float16", CADRE_FLOAT16}, {"bfloat16", CADRE_BFLOAT16}, {"float32", CADRE_FLOAT32},
    {"float64", CADRE_FLOAT64},
    /* nccl-tests' names */
    {"half", CADRE_FLOAT16},    {"float", CADRE_FLOAT32},     {"double", CADRE_FLOAT64},
};
static const char *const op_names[] = {"sum", "prod", "max", "min", "avg"};

const char *perf_type_name(cadre_datatype_t dt)
{
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (types[i].dt == dt)
            return types[i].name;
    return "?";
}

const char *perf_op_name(cadre_op_t op)
{
    return (unsigned)op < 5 ? op_names[op] : "?";
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return -1;
    switch (*end) {
    case 'K': case 'k': v *= 1024; end++; break;
    case 'M': case 'm': v *= 1024 * 1024; end++; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; end++; break;
    }
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end)
        return -1;
    *out = (size_t)v;
    return 0;
}

/* A whole decimal integer in [lo, hi]. */
static int parse_int(const char *s, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: cadre-perf MODE [options]\n"
            "modes: allreduce reduce bcast allgather reduce_scatter alltoall gather scatter\n"
            "       gatherv scatterv allgatherv alltoallv (counts varying over the ranks)\n"
            "       barrier, sendrecv (ping-pong latency), stream (windowed bandwidth, like osu_bw)\n"
            "  -b SIZE   smallest size in bytes (K, M, G suffixes) [8]\n"
            "  -e SIZE   largest size [64M]\n"
            "  -f F      multiply the size by F each step [2]\n"
            "  -i BYTES  add BYTES each step instead of multiplying\n"
            "  -n N      timed iterations per size [by size: 10000 up to 64K ... 20 above 16M]\n"
            "  -w N      warm-up iterations per size [n/10+1]\n"
            "  -T SECS   collectives, -t loop: time each size for at least SECS, the iterations\n"
            "            doubling from -n (default 1) until one run of them takes that long\n"
            "  -c 0|1    after the timed calls of each size, one more with fresh inputs whose\n"
            "            result is checked [1]\n"
            "  -t loop|barrier  collectives: time the calls back to back, the largest mean over\n"
            "            the ranks (nccl-tests) [loop], or each call with a barrier after it,\n"
            "            the ranks' means averaged (OSU micro-benchmarks, IMB)\n"
            "  -d TYPE   int8 uint8 int32 uint32 int64 uint64 float16 bfloat16 float32 float64\n"
            "            [float32] (collectives)\n"
            "  -o OP     sum prod max min avg [sum] (reductions; avg: floating types only)\n"
            "  -r ROOT   root of reduce, bcast, gather(v), scatter(v) [0]\n"
            "  -W N      window of messages in flight for stream mode [64]\n"
            "  -R one|many  stream: receive the window into one buffer (osu_bw) or one per\n"
            "            message (osu_mbw_mr) [many]\n"
            "  -G        device buffers (cudaMalloc on the GPU cadre_init bound), on a\n"
            "            stream of cadre-perf's own; times include the wait for that stream\n"
            "            (builds with CUDA only)\n"
            "The size is that of nccl-tests: count*typesize for allreduce, reduce and bcast, the\n"
            "whole buffer (count per rank * ranks * typesize) for the others; the v-variants'\n"
            "rank k has 2*count*(k+1)/(ranks+1) elements, one element free before each block.\n"
            "Each size runs out of place and in place (CADRE_IN_PLACE), side by side on its\n"
            "line. Times are the mean over -n iterations, the largest over the ranks (-t\n"
            "barrier: averaged).\n");
}

static int parse(int argc, char **argv, struct perf_opts *o)
{
    *o = (struct perf_opts){.mode = NULL, .minb = 8, .maxb = 64u << 20, .factor = 2, .iters = -1,
                            .warmup = -1, .check = 1, .window = 64, .dt = CADRE_FLOAT32,
                            .op = CADRE_SUM, .root = 0, .one_rbuf = 0};
    if (argc < 2)
        return -1;
    o->mode = argv[1];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-G")) { /* the one option without a value */
            if (!perf_dev_built()) {
                fprintf(stderr, "cadre-perf: -G: this cadre was built without CUDA "
                                "(configure --with-cuda)\n");
                return -1;
            }
            perf_dev = 1;
            continue;
        }
        if (a[0] != '-' || !a[1] || a[2] || !strchr("befinwcdorWRTt", a[1])) {
            fprintf(stderr, "cadre-perf: unknown option '%s'\n", a);
            return -1;
        }
        if (!v) {
            fprintf(stderr, "cadre-perf: %s needs a value\n", a);
            return -1;
        }
        int bad = 0;
        switch (a[1]) {
        case 'b': bad = parse_size(v, &o->minb); break;
        case 'e': bad = parse_size(v, &o->maxb); break;
        case 'i': bad = parse_size(v, &o->stepb) || !o->stepb; break;
        case 'f': {
            char *end;
            o->factor = strtod(v, &end);
            bad = *end || !(o->factor > 1);
            break;
        }
        case 'n': bad = parse_int(v, 1, 100000000, &o->iters); break;
        case 'w': bad = parse_int(v, 0, 100000000, &o->warmup); break;
        case 'T': {
            char *end;
            o->mintime = strtod(v, &end);
            bad = *end || !(o->mintime > 0 && o->mintime <= 3600);
            break;
        }
        case 'c': bad = parse_int(v, 0, 1, &o->check); break;
        case 't':
            bad = strcmp(v, "loop") && strcmp(v, "barrier");
            o->each = !strcmp(v, "barrier");
            break;
        case 'r': bad = parse_int(v, 0, 1 << 30, &o->root); break;
        case 'W': bad = parse_int(v, 1, 4096, &o->window); break;
        case 'R':
            bad = strcmp(v, "one") && strcmp(v, "many");
            o->one_rbuf = !strcmp(v, "one");
            break;
        case 'd':
            bad = 1;
            for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
                if (!strcmp(v, types[t].name))
                    o->dt = types[t].dt, bad = 0;
            break;
        case 'o':
            bad = 1;
            for (int k = 0; k < 5; k++)
                if (!strcmp(v, op_names[k]))
                    o->op = (cadre_op_t)k, bad = 0;
            break;
        }
        if (bad) {
            fprintf(stderr, "cadre-perf: bad value '%s' for %s\n", v, a);
            return -1;
        }
        i++;
    }
    if (strcmp(o->mode, "sendrecv") && strcmp(o->mode, "stream") && !perf_coll_known(o->mode)) {
        fprintf(stderr, "cadre-perf: unknown mode '%s'\n", o->mode);
        return -1;
    }
    if (o->one_rbuf && o->check && o->window > 128) {
        /* wrong_any tells a window's messages from earlier ones up to 128 */
        fprintf(stderr, "cadre-perf: -R one checks the data only with -W up to 128 (-W %d: "
                        "add -c 0)\n", o->window);
        return -1;
    }
    if (o->mintime > 0 && (o->each || !perf_coll_known(o->mode))) {
        fprintf(stderr, "cadre-perf: -T needs a collective mode and -t loop\n");
        return -1;
    }
    if (o->each && !perf_coll_known(o->mode)) {
        fprintf(stderr, "cadre-perf: -t barrier times collectives only (sendrecv and stream time "
                        "as osu_latency and osu_bw do)\n");
        return -1;
    }
    if (o->minb > o->maxb) {
        fprintf(stderr, "cadre-perf: -b is larger than -e\n");
        return -1;
    }
    if (o->op == CADRE_AVG && o->dt != CADRE_FLOAT16 && o->dt != CADRE_BFLOAT16 &&
        o->dt != CADRE_FLOAT32 && o->dt != CADRE_FLOAT64 && perf_coll_needs_op(o->mode)) {
        fprintf(stderr, "cadre-perf: -o avg needs a floating type (-d)\n");
        return -1;
    }
    return 0;
}

int perf_default_iters(size_t bytes)
{
    if (bytes <= 65536)
        return 10000;
    if (bytes <= (1u << 20))
        return 1000;
    if (bytes <= (16u << 20))
        return 100;
    return 20;
}

int perf_next_size(const struct perf_opts *o, size_t *n)
{
    if (*n >= o->maxb)
        return 0;
    size_t next = o->stepb ? *n + o->stepb : (size_t)((double)(*n ? *n : 1) * o->factor);
    if (next <= *n) /* small sizes times a small factor: always advance */
        next = *n + 1;
    *n = next > o->maxb ? o->maxb : next;
    return 1;
}

unsigned char *perf_corrupt(unsigned char *b, size_t n)
{
    static int on = -1;
    if (on < 0) {
        const char *v = getenv("CADRE_PERF_CORRUPT");
        on = v && !strcmp(v, "1");
    }
    if (on && n)
        b[0] ^= 0x5a;
    return b;
}

int main(int argc, char **argv)
{
    struct perf_opts o;
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        usage(stdout);
        return 0;
    }
    if (parse(argc, argv, &o) != 0) {
        usage(stderr);
        return 2;
    }
    if (cadre_init(&argc, &argv) != CADRE_SUCCESS) {
        fprintf(stderr, "cadre-perf: cadre_init: %s\n", cadre_last_error());
        return 1;
    }
    cadre_comm_rank(CADRE_COMM_WORLD, &perf_me);
    cadre_comm_size(CADRE_COMM_WORLD, &perf_np);
    /* -G: every rank needs its GPU; any rank without one ends the job
     * (each says why), all ranks alike. */
    const char *nodev = perf_dev_setup();
    int any_nodev = nodev != NULL;
    if (perf_dev)
        PERF_CK(cadre_allreduce(CADRE_IN_PLACE, &any_nodev, 1, CADRE_INT32, CADRE_MAX,
                                CADRE_COMM_WORLD));
    if (any_nodev) {
        if (nodev)
            fprintf(stderr, "cadre-perf: -G: %s\n", nodev);
        cadre_barrier(CADRE_COMM_WORLD);
        cadre_finalize();
        return 1;
    }
    int coll = perf_coll_known(o.mode);
    const char *bad = NULL;
    if (!coll && perf_np < 2)
        bad = "needs at least 2 ranks (cadrerun -n 2 cadre-perf ...)";
    else if (coll && o.root >= perf_np)
        bad = "-r: root out of range";
    if (bad) {
        if (perf_me == 0)
            fprintf(stderr, "cadre-perf: %s: %s\n", o.mode, bad);
        /* The others leave after rank 0 has said why: cadrerun stops the
         * job at the first rank that exits 2, and under load that came
         * before rank 0 had written its line (make check's perf suite). */
        cadre_barrier(CADRE_COMM_WORLD);
        cadre_finalize();
        return 2;
    }
    long total_wrong = coll ? perf_coll_run(&o) : perf_p2p_run(&o);
    perf_dev_finish();
    cadre_finalize();
    return total_wrong ? 1 : 0;
}
