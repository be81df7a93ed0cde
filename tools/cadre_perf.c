/* cadre-perf: benchmarks in the layout of nccl-tests (perf_print.c).
 *
 *   cadrerun -n 2 cadre-perf allreduce -b 8 -e 64M -f 2
 *   cadrerun -n 2 cadre-perf sendrecv -b 8 -e 64M -f 2
 *
 * Modes: the collectives (allreduce reduce bcast allgather reduce_scatter
 * alltoall gather scatter barrier: perf_coll.c), sendrecv (ping-pong between
 * ranks 0 and 1: one-way latency and its bandwidth) and stream (rank i of
 * the first half streams a window of isends to rank i + np/2, which answers
 * once per window: osu_bw's pattern on 2 ranks, osu_mbw_mr's on more, with
 * the message rate summed over the pairs). Each size runs out of place, then
 * in place (sendrecv: the reply goes out of the buffer the message came into;
 * stream: the window is sent from one buffer). Options as nccl-tests'; exit
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
            "  -r ROOT   root of reduce, bcast, gather, scatter [0]\n"
            "  -W N      window of messages in flight for stream mode [64]\n"
            "  -R one|many  stream: receive the window into one buffer (osu_bw) or one per\n"
            "            message (osu_mbw_mr) [many]\n"
            "  -G        device buffers (cudaMalloc on the GPU cadre_init bound), on a\n"
            "            stream of cadre-perf's own; times include the wait for that stream\n"
            "            (builds with CUDA only)\n"
            "The size is that of nccl-tests: count*typesize for allreduce, reduce and bcast, the\n"
            "whole buffer (count per rank * ranks * typesize) for the others. Each size runs out\n"
            "of place and in place (CADRE_IN_PLACE), side by side on its line. Times are the\n"
            "mean over -n iterations, the largest over the ranks (-t barrier: averaged).\n");
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

static unsigned char pattern(size_t i, int iter, int from)
{
    return (unsigned char)(i * 131 + (size_t)iter * 7 + (size_t)from * 29 + (i >> 12));
}

static void fill(unsigned char *b, size_t n, int iter, int from)
{
    for (size_t i = 0; i < n; i++)
        b[i] = pattern(i, iter, from);
}

static long wrong(const unsigned char *b, size_t n, int iter, int from)
{
    long w = 0;
    for (size_t i = 0; i < n; i++)
        w += b[i] != pattern(i, iter, from);
    return w;
}

/* Bytes of b that belong to none of the patterns iter0 .. iter0+count-1 at
 * their place (count <= 256). A window received into one buffer (-R one)
 * ends as whatever landed last at each byte: its messages are in flight
 * together, and in one copy each (p2p_cma.c) the halves of one message and
 * the next may land in either order, as MPI allows for receive buffers
 * that overlap. The pattern of message iter0+k differs from iter0's by 7k
 * at every byte, so k is the difference times 183 (7's inverse mod 256);
 * a byte of an earlier window's message (k < 0) comes out as 256+k, out of
 * range for count <= 128. */
static long wrong_any(const unsigned char *b, size_t n, int iter0, int count, int from)
{
    long w = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned k = (unsigned)(unsigned char)(b[i] - pattern(i, iter0, from)) * 183u & 255u;
        w += k >= (unsigned)count;
    }
    return w;
}

/* A rank's send and receive buffers: the host ones the patterns are written
 * and checked in, and those the calls get (the same, or with -G their
 * device twins). In place, s and r are one buffer. */
struct bufs {
    unsigned char *hs, *hr, *ds, *dr;
};

/* One ping-pong of iteration it; with chk, the sender fills its message with
 * the iteration's pattern and the receiver counts the bytes that differ. */
static void sendrecv_once(const struct bufs *b, size_t n, int it, int chk, long *nwrong)
{
    if (perf_me == 0) {
        if (chk) {
            fill(b->hs, n, it, 0);
            perf_dev_put(b->ds, b->hs, n);
        }
        PERF_CK(cadre_send(b->ds, n, CADRE_UINT8, 1, 1, CADRE_COMM_WORLD));
        PERF_CK(cadre_recv(b->dr, n, CADRE_UINT8, 1, 1, CADRE_COMM_WORLD, CADRE_STATUS_IGNORE));
        if (chk) {
            perf_dev_get(b->hr, b->dr, n);
            *nwrong += wrong(perf_corrupt(b->hr, n), n, it, 1);
        }
    } else if (perf_me == 1) {
        PERF_CK(cadre_recv(b->dr, n, CADRE_UINT8, 0, 1, CADRE_COMM_WORLD, CADRE_STATUS_IGNORE));
        if (chk) {
            perf_dev_get(b->hr, b->dr, n);
            *nwrong += wrong(b->hr, n, it, 0);
            fill(b->hs, n, it, 1);
            perf_dev_put(b->ds, b->hs, n);
        }
        PERF_CK(cadre_send(b->ds, n, CADRE_UINT8, 0, 1, CADRE_COMM_WORLD));
    }
}

/* One size: returns one-way seconds per message; *nwrong counts bad bytes.
 * Out of place a rank receives into rbuf and replies from sbuf; in place
 * both are one buffer. The timed ping-pongs move whatever the buffers hold;
 * with -c 1 one more, untimed, carries a fresh pattern both ways and is
 * checked (nccl-tests checks outside its timed loop too). With -G the calls
 * only enqueue: the clock stops after the stream has drained. */
static double run_sendrecv(const struct perf_opts *o, const struct bufs *b, size_t n, long *nwrong)
{
    int iters = o->iters > 0 ? o->iters : perf_default_iters(n);
    int warm = o->warmup >= 0 ? o->warmup : iters / 10 + 1;
    double t0 = 0;
    for (int it = -warm; it < iters; it++) {
        if (it == 0) {
            perf_dev_sync();
            t0 = perf_now();
        }
        sendrecv_once(b, n, it, 0, nwrong);
    }
    perf_dev_sync();
    double t = (perf_now() - t0) / iters / 2;
    if (o->check)
        sendrecv_once(b, n, iters, 1, nwrong);
    return t;
}

/* stream's pairs: with np ranks, rank i < np/2 sends to rank i + np/2 (an
 * odd np's last rank idles). Returns the peer, or -1 for the idle rank. */
static int stream_peer(int *sender)
{
    int pairs = perf_np / 2;
    *sender = perf_me < pairs;
    if (perf_me < pairs)
        return perf_me + pairs;
    return perf_me < 2 * pairs ? perf_me - pairs : -1;
}

/* A stream size's state on one rank (run_stream). */
struct stream {
    const struct perf_opts *o;
    int inpl, sender, peer, win, from;
    size_t n;
    cadre_request_t *reqs;
    unsigned char *bufs, *dbufs; /* host buffers, and what the calls get */
};

/* One window of iteration it; with chk the sender fills its messages with
 * their patterns and the receiver counts the bytes that differ. */
static void stream_window(const struct stream *S, int it, int chk, long *nwrong)
{
    const struct perf_opts *o = S->o;
    size_t n = S->n;
    int win = S->win, inpl = S->inpl;
    char ack = 0;
    if (S->sender) {
        for (int k = 0; k < win; k++) {
            size_t off = inpl ? 0 : n * (size_t)k;
            if (chk && (!inpl || k == 0)) {
                fill(S->bufs + off, n, it * win + (inpl ? 0 : k), S->from);
                perf_dev_put(S->dbufs + off, S->bufs + off, n);
            }
            PERF_CK(cadre_isend(S->dbufs + off, n, CADRE_UINT8, S->peer, 2, CADRE_COMM_WORLD,
                                &S->reqs[k]));
        }
        PERF_CK(cadre_waitall(win, S->reqs, NULL));
        PERF_CK(cadre_recv(&ack, 1, CADRE_UINT8, S->peer, 3, CADRE_COMM_WORLD, CADRE_STATUS_IGNORE));
        return;
    }
    for (int k = 0; k < win; k++)
        PERF_CK(cadre_irecv(S->dbufs + (o->one_rbuf ? 0 : n * (size_t)k), n, CADRE_UINT8, S->peer, 2,
                            CADRE_COMM_WORLD, &S->reqs[k]));
    PERF_CK(cadre_waitall(win, S->reqs, NULL));
    /* On device buffers waitall only orders the stream after the receives:
     * the acknowledgment waits for them to land. */
    perf_dev_sync();
    if (chk) {
        size_t nbufs = o->one_rbuf ? 1 : (size_t)win;
        perf_dev_get(S->bufs, S->dbufs, n * nbufs);
        perf_corrupt(S->bufs, n);
        if (o->one_rbuf && inpl)
            *nwrong += wrong(S->bufs, n, it * win, S->from);
        else if (o->one_rbuf)
            *nwrong += wrong_any(S->bufs, n, it * win, win, S->from);
        else
            for (int k = 0; k < win; k++)
                *nwrong += wrong(S->bufs + n * (size_t)k, n, it * win + (inpl ? 0 : k), S->from);
    }
    PERF_CK(cadre_send(&ack, 1, CADRE_UINT8, S->peer, 3, CADRE_COMM_WORLD));
}

/* One size for this rank: returns its seconds per message (0 for the idle
 * rank). In place the sender sends the whole window from one buffer;
 * out of place each message has its own. The timed windows move whatever
 * the buffers hold; with -c 1 one more, untimed, is filled and checked. With
 * -R one the receiver receives the whole window into one buffer, as osu_bw
 * does, and can check only that each byte left there is one of the window's
 * messages' (wrong_any; in place, all have the same pattern). */
static double run_stream(const struct perf_opts *o, int inpl, size_t n, long *nwrong)
{
    int sender, peer = stream_peer(&sender);
    if (peer < 0)
        return 0;
    int iters = o->iters > 0 ? o->iters : perf_default_iters(n) / 10 + 1;
    int warm = o->warmup >= 0 ? o->warmup : 2;
    int win = o->window;
    size_t nbufs = (sender ? inpl : o->one_rbuf) ? 1 : (size_t)win;
    struct stream S = {.o = o, .inpl = inpl, .sender = sender, .peer = peer, .win = win,
                       /* the sender's rank is part of the pattern */
                       .from = sender ? perf_me : peer, .n = n};
    S.reqs = malloc((size_t)win * sizeof *S.reqs);
    S.bufs = malloc(n * nbufs + 1);
    S.dbufs = perf_dev ? perf_dev_alloc(n * nbufs + 1) : S.bufs;
    if (!S.reqs || !S.bufs || !S.dbufs) {
        fprintf(stderr, "cadre-perf: rank %d: no %smemory for a window of %d messages of %zu bytes "
                        "(use a smaller -W or -e)\n", perf_me, perf_dev && !S.dbufs ? "device " : "",
                win, n);
        cadre_abort(CADRE_COMM_WORLD, 1);
    }
    double t0 = 0;
    for (int it = -warm; it < iters; it++) {
        if (it == 0) {
            perf_dev_sync();
            t0 = perf_now();
        }
        stream_window(&S, it, 0, nwrong);
    }
    perf_dev_sync();
    double t = (perf_now() - t0) / iters / win;
    if (o->check)
        stream_window(&S, iters, 1, nwrong);
    free(S.reqs);
    if (perf_dev)
        perf_dev_free(S.dbufs);
    free(S.bufs);
    return t;
}

/* sendrecv: rank 0 times, rank 1 adds its wrong bytes. stream: the time is
 * the largest over the senders, the rate (messages per second) their sum. */
static struct perf_result gather_result(const struct perf_opts *o, int stream, size_t n, double t,
                                        long nwrong, double *rate)
{
    long all_wrong = nwrong;
    if (stream) {
        int sender;
        double mine[2] = {t, stream_peer(&sender) >= 0 && sender && t > 0 ? 1 / t : 0}, all[2];
        PERF_CK(cadre_reduce(&mine[0], &all[0], 1, CADRE_FLOAT64, CADRE_MAX, 0, CADRE_COMM_WORLD));
        PERF_CK(cadre_reduce(&mine[1], &all[1], 1, CADRE_FLOAT64, CADRE_SUM, 0, CADRE_COMM_WORLD));
        PERF_CK(cadre_reduce(&nwrong, &all_wrong, 1, CADRE_INT64, CADRE_SUM, 0, CADRE_COMM_WORLD));
        t = all[0];
        *rate = all[1];
    } else if (perf_me == 1) {
        PERF_CK(cadre_send(&nwrong, 1, CADRE_INT64, 0, 9, CADRE_COMM_WORLD));
    } else if (perf_me == 0) {
        long w1;
        PERF_CK(cadre_recv(&w1, 1, CADRE_INT64, 1, 9, CADRE_COMM_WORLD, CADRE_STATUS_IGNORE));
        all_wrong += w1;
    }
    double algbw = t > 0 ? (double)n / t / 1e9 : 0;
    return (struct perf_result){t, algbw, algbw, o->check ? all_wrong : -1L};
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
    long total_wrong = 0;
    if (coll) {
        total_wrong = perf_coll_run(&o);
        perf_dev_finish();
        cadre_finalize();
        return total_wrong ? 1 : 0;
    }
    size_t bufsize = o.maxb ? o.maxb : 1;
    unsigned char *sbuf = malloc(bufsize), *rbuf = malloc(bufsize);
    unsigned char *dsbuf = perf_dev ? perf_dev_alloc(bufsize) : sbuf;
    unsigned char *drbuf = perf_dev ? perf_dev_alloc(bufsize) : rbuf;
    if (!sbuf || !rbuf || !dsbuf || !drbuf) {
        fprintf(stderr, "cadre-perf: no %smemory for 2 x %zu bytes\n",
                sbuf && rbuf ? "device " : "", o.maxb);
        cadre_abort(CADRE_COMM_WORLD, 1);
    }
    int stream = !strcmp(o.mode, "stream");
    int pairs = perf_np / 2;
    char what[192];
    if (!stream)
        snprintf(what, sizeof what, "%s: %d ranks (ranks 0 and 1 communicate), uint8", o.mode,
                 perf_np);
    else
        snprintf(what, sizeof what, "%s: %d ranks, %d pair%s (rank i sends to rank i+%d%s), uint8, "
                 "receives into %s", o.mode, perf_np, pairs, pairs > 1 ? "s" : "", pairs,
                 perf_np % 2 ? "; the last rank idles" : "",
                 o.one_rbuf ? "one buffer" : "one buffer per message");
    perf_print_header(&o, what);
    size_t n = o.minb;
    do {
        struct perf_result res[2];
        double rate[2] = {0, 0};
        for (int inpl = 0; inpl < 2; inpl++) {
            long nwrong = 0;
            double t;
            if (stream) {
                /* The pairs start together: their rates add up. */
                PERF_CK(cadre_barrier(CADRE_COMM_WORLD));
                t = run_stream(&o, inpl, n, &nwrong);
            } else {
                struct bufs b = {sbuf, inpl ? sbuf : rbuf, dsbuf, inpl ? dsbuf : drbuf};
                t = run_sendrecv(&o, &b, n, &nwrong);
            }
            res[inpl] = gather_result(&o, stream, n, t, nwrong, &rate[inpl]);
            total_wrong += res[inpl].wrong > 0 ? res[inpl].wrong : 0;
        }
        if (perf_me == 0) {
            perf_print_line(n, n, "uint8", "none", -1, res);
            if (stream)
                printf("# msgrate  size %zu  out-of-place %.0f  in-place %.0f  msg/s summed over "
                       "%d pair%s\n", n, rate[0], rate[1], pairs, pairs > 1 ? "s" : "");
            fflush(stdout);
        }
    } while (perf_next_size(&o, &n));
    if (perf_me == 0)
        perf_print_footer();
    if (perf_dev) {
        perf_dev_free(dsbuf);
        perf_dev_free(drbuf);
    }
    free(sbuf);
    free(rbuf);
    perf_dev_finish();
    cadre_finalize();
    return total_wrong ? 1 : 0;
}
