/* cadre-perf: benchmarks in the column format of nccl-tests.
 *
 *   cadrerun -n 2 cadre-perf sendrecv -b 8 -e 64M -f 2
 *
 * Modes: sendrecv (ping-pong between ranks 0 and 1: one-way latency and its
 * bandwidth), stream (rank 0 streams a window of isends to rank 1, which
 * answers once per window: the osu_bw pattern). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cadre.h"

struct opts {
    const char *mode;
    size_t minb, maxb;
    double factor;
    size_t stepb;
    int iters, warmup, check, window;
    cadre_datatype_t dt;
};

static int me, np;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
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

static void usage(FILE *f)
{
    fprintf(f,
            "usage: cadre-perf MODE [options]\n"
            "modes: sendrecv (ping-pong latency), stream (windowed bandwidth, like osu_bw)\n"
            "  -b SIZE   smallest message in bytes (K, M, G suffixes) [8]\n"
            "  -e SIZE   largest message [64M]\n"
            "  -f F      multiply the size by F each step [2]\n"
            "  -i BYTES  add BYTES each step instead of multiplying\n"
            "  -n N      timed iterations per size [auto: fewer for large sizes]\n"
            "  -w N      warm-up iterations per size [auto]\n"
            "  -c 0|1    check every received byte of every iteration [1]\n"
            "  -W N      window of messages in flight for stream mode [64]\n");
}

static int parse(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.mode = NULL, .minb = 8, .maxb = 64u << 20, .factor = 2, .iters = -1,
                       .warmup = -1, .check = 1, .window = 64, .dt = CADRE_UINT8};
    if (argc < 2)
        return -1;
    o->mode = argv[1];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v || a[0] != '-' || a[2]) {
            fprintf(stderr, "cadre-perf: bad option '%s'\n", a);
            return -1;
        }
        int bad = 0;
        switch (a[1]) {
        case 'b': bad = parse_size(v, &o->minb); break;
        case 'e': bad = parse_size(v, &o->maxb); break;
        case 'i': bad = parse_size(v, &o->stepb); break;
        case 'f': o->factor = atof(v); bad = !(o->factor > 1); break;
        case 'n': o->iters = atoi(v); bad = o->iters < 1; break;
        case 'w': o->warmup = atoi(v); bad = o->warmup < 0; break;
        case 'c': o->check = atoi(v); break;
        case 'W': o->window = atoi(v); bad = o->window < 1 || o->window > 4096; break;
        default: bad = 1;
        }
        if (bad) {
            fprintf(stderr, "cadre-perf: bad value '%s' for %s\n", v, a);
            return -1;
        }
        i++;
    }
    if (strcmp(o->mode, "sendrecv") && strcmp(o->mode, "stream")) {
        fprintf(stderr, "cadre-perf: unknown mode '%s'\n", o->mode);
        return -1;
    }
    if (o->minb > o->maxb) {
        fprintf(stderr, "cadre-perf: -b is larger than -e\n");
        return -1;
    }
    return 0;
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

static int default_iters(size_t bytes)
{
    if (bytes <= 65536)
        return 10000;
    if (bytes <= (1u << 20))
        return 1000;
    if (bytes <= (16u << 20))
        return 100;
    return 20;
}

#define CK(call)                                                                          \
    do {                                                                                  \
        int ck_rc_ = (call);                                                              \
        if (ck_rc_ != CADRE_SUCCESS) {                                                    \
            fprintf(stderr, "cadre-perf: rank %d: %s failed: %s\n", me, #call,            \
                    cadre_last_error());                                                  \
            cadre_abort(CADRE_COMM_WORLD, 1);                                             \
        }                                                                                 \
    } while (0)

/* One size: returns one-way seconds per message; *nwrong counts bad bytes. */
static double run_sendrecv(const struct opts *o, unsigned char *buf, size_t n, long *nwrong)
{
    int iters = o->iters > 0 ? o->iters : default_iters(n);
    int warm = o->warmup >= 0 ? o->warmup : iters / 10 + 1;
    double t0 = 0;
    for (int it = -warm; it < iters; it++) {
        if (it == 0)
            t0 = now();
        if (me == 0) {
            if (o->check)
                fill(buf, n, it, 0);
            CK(cadre_send(buf, n, CADRE_UINT8, 1, 1, CADRE_COMM_WORLD));
            CK(cadre_recv(buf, n, CADRE_UINT8, 1, 1, CADRE_COMM_WORLD, CADRE_STATUS_IGNORE));
            if (o->check)
                *nwrong += wrong(buf, n, it, 1);
        } else if (me == 1) {
            CK(cadre_recv(buf, n, CADRE_UINT8, 0, 1, CADRE_COMM_WORLD, CADRE_STATUS_IGNORE));
            if (o->check) {
                *nwrong += wrong(buf, n, it, 0);
                fill(buf, n, it, 1);
            }
            CK(cadre_send(buf, n, CADRE_UINT8, 0, 1, CADRE_COMM_WORLD));
        }
    }
    /* With checking on, the fills and checks are inside the loop, as in
     * nccl-tests' -c 1; time without them with -c 0. */
    return (now() - t0) / iters / 2;
}

static double run_stream(const struct opts *o, unsigned char *buf, size_t n, long *nwrong)
{
    int iters = o->iters > 0 ? o->iters : default_iters(n) / 10 + 1;
    int warm = o->warmup >= 0 ? o->warmup : 2;
    int win = o->window;
    cadre_request_t *reqs = malloc((size_t)win * sizeof *reqs);
    unsigned char *bufs = malloc(n * (size_t)win + 1);
    if (!reqs || !bufs) {
        fprintf(stderr, "cadre-perf: rank %d: no memory for a window of %d messages of %zu bytes "
                        "(use a smaller -W or -e)\n", me, win, n);
        cadre_abort(CADRE_COMM_WORLD, 1);
    }
    char ack = 0;
    double t0 = 0;
    for (int it = -warm; it < iters; it++) {
        if (it == 0)
            t0 = now();
        if (me == 0) {
            for (int k = 0; k < win; k++) {
                if (o->check)
                    fill(bufs + n * (size_t)k, n, it * win + k, 0);
                CK(cadre_isend(bufs + n * (size_t)k, n, CADRE_UINT8, 1, 2, CADRE_COMM_WORLD, &reqs[k]));
            }
            CK(cadre_waitall(win, reqs, NULL));
            CK(cadre_recv(&ack, 1, CADRE_UINT8, 1, 3, CADRE_COMM_WORLD, CADRE_STATUS_IGNORE));
        } else if (me == 1) {
            for (int k = 0; k < win; k++)
                CK(cadre_irecv(bufs + n * (size_t)k, n, CADRE_UINT8, 0, 2, CADRE_COMM_WORLD, &reqs[k]));
            CK(cadre_waitall(win, reqs, NULL));
            if (o->check)
                for (int k = 0; k < win; k++)
                    *nwrong += wrong(bufs + n * (size_t)k, n, it * win + k, 0);
            CK(cadre_send(&ack, 1, CADRE_UINT8, 0, 3, CADRE_COMM_WORLD));
        }
    }
    double t = (now() - t0) / iters / win;
    (void)buf;
    free(reqs);
    free(bufs);
    return t;
}

int main(int argc, char **argv)
{
    struct opts o;
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
    cadre_comm_rank(CADRE_COMM_WORLD, &me);
    cadre_comm_size(CADRE_COMM_WORLD, &np);
    if (np < 2) {
        if (me == 0)
            fprintf(stderr, "cadre-perf: %s needs at least 2 ranks (cadrerun -n 2 cadre-perf ...)\n",
                    o.mode);
        cadre_finalize();
        return 2;
    }
    unsigned char *buf = malloc(o.maxb ? o.maxb : 1);
    if (!buf) {
        fprintf(stderr, "cadre-perf: no memory for %zu bytes\n", o.maxb);
        return 1;
    }
    int stream = !strcmp(o.mode, "stream");
    if (me == 0) {
        printf("# cadre-perf %s: %d ranks (ranks 0 and 1 communicate), check %s\n", o.mode, np,
               o.check ? "on" : "off");
        printf("# %10s %12s %8s %6s %6s %10s %9s %9s %8s\n", "size", "count", "type", "redop", "root",
               "time(us)", "algbw", "busbw", "#wrong");
        printf("# %10s %12s %8s %6s %6s %10s %9s %9s %8s\n", "(B)", "(elements)", "", "", "", "",
               "(GB/s)", "(GB/s)", "");
    }
    long total_wrong = 0;
    for (size_t n = o.minb;;) {
        long nwrong = 0;
        double t = stream ? run_stream(&o, buf, n, &nwrong) : run_sendrecv(&o, buf, n, &nwrong);
        long all_wrong = nwrong;
        if (me == 1)
            CK(cadre_send(&nwrong, 1, CADRE_INT64, 0, 9, CADRE_COMM_WORLD));
        if (me == 0) {
            long w1;
            CK(cadre_recv(&w1, 1, CADRE_INT64, 1, 9, CADRE_COMM_WORLD, CADRE_STATUS_IGNORE));
            all_wrong += w1;
            double algbw = t > 0 ? (double)n / t / 1e9 : 0;
            printf("  %10zu %12zu %8s %6s %6s %10.3f %9.2f %9.2f %8ld\n", n, n, "uint8", "none", "-1",
                   t * 1e6, algbw, algbw, o.check ? all_wrong : -1L);
            fflush(stdout);
        }
        total_wrong += all_wrong;
        if (n >= o.maxb)
            break;
        size_t next = o.stepb ? n + o.stepb : (size_t)((double)(n ? n : 1) * o.factor);
        if (next <= n) /* small sizes times a small factor: always advance */
            next = n + 1;
        n = next > o.maxb ? o.maxb : next;
    }
    free(buf);
    cadre_finalize();
    return total_wrong ? 1 : 0;
}
