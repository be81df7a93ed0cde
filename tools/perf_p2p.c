/* cadre-perf's point-to-point modes: sendrecv (ping-pong between ranks 0
 * and 1: one-way latency and its bandwidth) and stream (rank i of the first
 * half streams a window of isends to rank i + np/2, which answers once per
 * window: osu_bw's pattern on 2 ranks, osu_mbw_mr's on more, with the
 * message rate summed over the pairs). Out of place, then in place (sendrecv:
 * the reply goes out of the buffer the message came into; stream: the window
 * is sent from one buffer). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf.h"

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

long perf_p2p_run(const struct perf_opts *o)
{
    long total_wrong = 0;
    size_t bufsize = o->maxb ? o->maxb : 1;
    unsigned char *sbuf = malloc(bufsize), *rbuf = malloc(bufsize);
    unsigned char *dsbuf = perf_dev ? perf_dev_alloc(bufsize) : sbuf;
    unsigned char *drbuf = perf_dev ? perf_dev_alloc(bufsize) : rbuf;
    if (!sbuf || !rbuf || !dsbuf || !drbuf) {
        fprintf(stderr, "cadre-perf: no %smemory for 2 x %zu bytes\n",
                sbuf && rbuf ? "device " : "", o->maxb);
        cadre_abort(CADRE_COMM_WORLD, 1);
    }
    int stream = !strcmp(o->mode, "stream");
    int pairs = perf_np / 2;
    char what[192];
    if (!stream)
        snprintf(what, sizeof what, "%s: %d ranks (ranks 0 and 1 communicate), uint8", o->mode,
                 perf_np);
    else
        snprintf(what, sizeof what, "%s: %d ranks, %d pair%s (rank i sends to rank i+%d%s), uint8, "
                 "receives into %s", o->mode, perf_np, pairs, pairs > 1 ? "s" : "", pairs,
                 perf_np % 2 ? "; the last rank idles" : "",
                 o->one_rbuf ? "one buffer" : "one buffer per message");
    perf_print_header(o, what);
    size_t n = o->minb;
    do {
        struct perf_result res[2];
        double rate[2] = {0, 0};
        for (int inpl = 0; inpl < 2; inpl++) {
            long nwrong = 0;
            double t;
            if (stream) {
                /* The pairs start together: their rates add up. */
                PERF_CK(cadre_barrier(CADRE_COMM_WORLD));
                t = run_stream(o, inpl, n, &nwrong);
            } else {
                struct bufs b = {sbuf, inpl ? sbuf : rbuf, dsbuf, inpl ? dsbuf : drbuf};
                t = run_sendrecv(o, &b, n, &nwrong);
            }
            res[inpl] = gather_result(o, stream, n, t, nwrong, &rate[inpl]);
            total_wrong += res[inpl].wrong > 0 ? res[inpl].wrong : 0;
        }
        if (perf_me == 0) {
            perf_print_line(n, n, "uint8", "none", -1, res);
            if (stream)
                printf("# msgrate  size %zu  out-of-place %.0f  in-place %.0f  msg/s summed over "
                       "%d pair%s\n", n, rate[0], rate[1], pairs, pairs > 1 ? "s" : "");
            fflush(stdout);
        }
    } while (perf_next_size(o, &n));
    if (perf_me == 0)
        perf_print_footer();
    if (perf_dev) {
        perf_dev_free(dsbuf);
        perf_dev_free(drbuf);
    }
    free(sbuf);
    free(rbuf);
    return total_wrong;
}
