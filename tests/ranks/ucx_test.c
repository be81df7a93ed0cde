/* The ucx transport on fake hosts of this machine (issue 42), run by the
 * ucx suite (unit/test_ucx.c) with CADRE_TRANSPORT=shm,ucx and UCX_TLS=tcp;
 * FAKE_HOSTS gives each rank its CADRE_HOSTID (fake_hosts.h). UCXTEST
 * picks the case:
 *   data (default): every pair exchanges messages of odd sizes, eager and
 *     rendezvous up to 64 MiB + 13, checked byte by byte; then a window of
 *     sends to the next rank at every protocol threshold, received posted
 *     and unexpected; rank 0 then takes
 *     messages from every rank with CADRE_ANY_SOURCE receives mixed with
 *     specific ones (each sender's messages in the order sent; some
 *     large, held by the receiver until taken).
 *   kill, stop: the last rank, alone on its fake host, starts a 64 MiB
 *     send to every other rank and then SIGKILLs (kill) or SIGSTOPs (stop:
 *     nothing closes, only cadre's heartbeats can tell) itself; every
 *     survivor's receive of the message that never comes fails with
 *     CADRE_ERR_PEER naming the rank and its host within 15 s. Rank 0 then
 *     SIGKILLs the stopped rank. Run with cadrerun --keep-going.
 *   bulk: rank 0 sends rank 1 a window of large messages that keeps the
 *     link busy for longer than CADRE_UCX_PEER_TIMEOUT (1 s).
 *   revive: the last rank stops until the others fail it, then continues;
 *     its pending receive must fail soon after (--keep-going).
 *   held: large messages whose data waits with the sender until a receive
 *     takes them (UCX's rendezvous descriptor held by the receiver): every
 *     other rank sends rank 0 several at once, which probes each (size,
 *     source) and then takes them sender by sender, in order; truncated
 *     receives (posted first, and unexpected; one of no room at all) fail
 *     with CADRE_ERR_TRUNCATE holding the first bytes, the senders' sends
 *     succeed, and the pair goes on.
 *   withdraw: (CADRE_TIMEOUT=3) rank 1 sends rank 0 a large message that
 *     rank 0 never receives: the send fails with CADRE_ERR_TIMEOUT naming
 *     the call and rank 0, without a hang; the message is gone from rank
 *     0 (iprobe), and the pair goes on.
 *   killheld: as kill, but the survivors never post the receive of the
 *     64 MiB message: they probe it (held), then a receive of another tag
 *     fails naming the rank and its host within 15 s, and so does the
 *     receive of the held one.
 *   orphan: each rank sends the next a large message never received and
 *     finalizes: no hang, no leak (the sanitizers' build).
 *   nofinalize: each rank sends the next 1 MiB and checks what it gets,
 *     then exits without cadre_finalize, UCX's threads alive: in the
 *     sanitizers' build LeakSanitizer's check at exit must run (it
 *     crashed: p2p_ucx.c, ucx_sanitizer_env).
 * Each rank prints "ucx_test: rank R ok". */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "cadre.h"
#include "fake_hosts.h"
#include "rank_util.h"

#define W CADRE_COMM_WORLD

static const size_t sizes[] = {0, 1, 7, 4095, 32768, 32769, 100003, (size_t)1 << 20,
                               ((size_t)64 << 20) + 13};
#define NSIZES (sizeof sizes / sizeof sizes[0])

/* Every ordered pair, every size; nonblocking both ways at once. */
static void pairs(int me, int np)
{
    size_t big = sizes[NSIZES - 1];
    unsigned char *out = malloc(big), *in = malloc(big);
    for (int d = 1; d < np; d++) {
        int to = (me + d) % np, from = (me - d + np) % np;
        for (size_t k = 0; k < NSIZES; k++) {
            size_t n = sizes[k];
            ru_fill(out, n, me, to, k);
            memset(in, 0xee, n);
            cadre_request_t r[2];
            cadre_status_t st[2];
            OK(cadre_irecv(in, n, CADRE_UINT8, from, (int)k, W, &r[0]));
            OK(cadre_isend(out, n, CADRE_UINT8, to, (int)k, W, &r[1]));
            OK(cadre_waitall(2, r, st));
            size_t bad = ru_check(in, n, from, me, k);
            EXPECT(bad == n, "%zu bytes from rank %d: byte %zu wrong", n, from, bad);
            EXPECT(st[0].source == from && st[0].count == n, "status: source %d count %zu",
                   st[0].source, (size_t)st[0].count);
        }
    }
    free(out);
    free(in);
}

/* A window of messages to the next rank, sizes at and around the protocol
 * thresholds (UCX's short/zero-copy switch near 8 KiB with cadre's header,
 * UCX_EAGER_IMM 16 KiB, UCX's rendezvous near 20 KiB over tcp, cadre's
 * eager limits UCX_TCP_EAGER 128 KiB (over UCX's tcp, unless
 * UCX_RNDV_THRESH is set) and UCX_EAGER 256 KiB, RTS/CTS and DATA above,
 * several DATA
 * rendezvous receives running at once): every send started at once, the
 * receives posted before the sends (round 0) or after (round 1: the
 * messages wait unexpected), each checked byte by byte. */
static void window(int me, int np)
{
    static const size_t ws[] = {8100, 8128, 8192, 8193, 16383, 16384, 16385, 20400,
                                20480, 65536, 131071, 131072, 131073, 262143,
                                262144, 262145, 300000,
                                ((size_t)1 << 20) + 3, (size_t)4 << 20, 262144, 1};
    enum { NW = sizeof ws / sizeof ws[0] };
    int to = (me + 1) % np, from = (me - 1 + np) % np;
    unsigned char *out[NW], *in[NW];
    for (int k = 0; k < NW; k++) {
        out[k] = malloc(ws[k]);
        in[k] = malloc(ws[k]);
    }
    for (int round = 0; round < 2; round++) {
        cadre_request_t r[2 * NW];
        cadre_status_t st[2 * NW];
        for (int k = 0; k < NW; k++) {
            ru_fill(out[k], ws[k], me, to, 100 + 10 * k + round);
            memset(in[k], 0xee, ws[k]);
        }
        if (round == 0)
            for (int k = 0; k < NW; k++)
                OK(cadre_irecv(in[k], ws[k], CADRE_UINT8, from, 50, W, &r[NW + k]));
        OK(cadre_barrier(W));
        for (int k = 0; k < NW; k++)
            OK(cadre_isend(out[k], ws[k], CADRE_UINT8, to, 50, W, &r[k]));
        if (round == 1) {
            OK(cadre_barrier(W)); /* every message sent, or its RTS */
            for (int k = 0; k < NW; k++)
                OK(cadre_irecv(in[k], ws[k], CADRE_UINT8, from, 50, W, &r[NW + k]));
        }
        OK(cadre_waitall(2 * NW, r, st));
        for (int k = 0; k < NW; k++) {
            size_t bad = ru_check(in[k], ws[k], from, me, 100 + 10 * k + round);
            EXPECT(bad == ws[k], "window round %d: message %d (%zu bytes) from rank %d: "
                   "byte %zu wrong", round, k, ws[k], from, bad);
            EXPECT(st[NW + k].count == ws[k], "window round %d: message %d: count %zu, "
                   "expected %zu", round, k, (size_t)st[NW + k].count, ws[k]);
        }
    }
    for (int k = 0; k < NW; k++) {
        free(out[k]);
        free(in[k]);
    }
}

/* Rank 0 takes M messages of every other rank, ANY_SOURCE and specific
 * receives alternating; each sender's arrive in its order (the payload
 * says which). */
static void any_source(int me, int np)
{
    enum { M = 40 };
    if (me != 0) {
        for (int i = 0; i < M; i++) {
            int32_t v[3] = {me, i, me * 1000 + i};
            /* Some by UCX's rendezvous, some held by the receiver. */
            size_t n = i % 5 == 4 ? 20000 : i % 5 == 2 ? 100000 : 3;
            int32_t *b = calloc(n, sizeof *b);
            memcpy(b, v, sizeof v);
            OK(cadre_send(b, n, CADRE_INT32, 0, 9, W));
            free(b);
        }
        return;
    }
    int next[64] = {0};
    int32_t *b = malloc(100000 * sizeof *b);
    for (int k = 0; k < M * (np - 1); k++) {
        cadre_status_t st;
        int src = k % 3 == 1 ? 1 + k % (np - 1) : CADRE_ANY_SOURCE;
        if (src != CADRE_ANY_SOURCE && next[src] == M)
            src = CADRE_ANY_SOURCE;
        OK(cadre_recv(b, 100000, CADRE_INT32, src, 9, W, &st));
        int s = st.source;
        EXPECT(s > 0 && s < np && (src == CADRE_ANY_SOURCE || s == src), "source %d (asked %d)",
               s, src);
        if (s <= 0 || s >= np)
            continue;
        EXPECT(b[0] == s && b[1] == next[s] && b[2] == s * 1000 + next[s],
               "from rank %d: message %d/%d, expected %d", s, b[1], b[2], next[s]);
        EXPECT(st.count == (next[s] % 5 == 4 ? 20000u : next[s] % 5 == 2 ? 100000u : 3u),
               "count %zu", (size_t)st.count);
        next[s]++;
    }
    free(b);
}

/* The held case (see the top). Sizes above every eager limit. */
static void held(int me, int np)
{
    enum { K = 5 };
    size_t big = 700001, cut = 300000;
    unsigned char *b = malloc(big * K);
    if (me != 0) {
        cadre_request_t r[K + 4];
        size_t n[K];
        for (int i = 0; i < K; i++) {
            n[i] = 400000 + 13 * (size_t)me + 1000 * (size_t)i;
            ru_fill(b + big * (size_t)i, n[i], me, 0, 300 + (uint64_t)i);
            OK(cadre_isend(b + big * (size_t)i, n[i], CADRE_UINT8, 0, 20, W, &r[i]));
        }
        OK(cadre_waitall(K, r, NULL));
        OK(cadre_barrier(W));
        /* Truncated at rank 0: tag 21 posted first, 22 unexpected, 23 no room. */
        unsigned char *t = malloc(3 * big);
        for (int i = 0; i < 3; i++) {
            ru_fill(t + big * (size_t)i, big - (size_t)i, me, 0, 400 + (uint64_t)i);
            OK(cadre_isend(t + big * (size_t)i, big - (size_t)i, CADRE_UINT8, 0, 21 + i, W,
                           &r[i]));
        }
        OK(cadre_waitall(3, r, NULL));
        OK(cadre_send(t, big, CADRE_UINT8, 0, 24, W)); /* and the pair goes on */
        free(t);
        free(b);
        return;
    }
    /* Every sender's messages arrive (their sends wait for us: not done
     * before the barrier) and wait held; probe sees each. */
    for (int s = 1; s < np; s++) {
        cadre_status_t st;
        OK(cadre_probe(s, 20, W, &st));
        EXPECT(st.source == s && st.count == 400000 + 13 * (size_t)s,
               "probe of rank %d's held message: source %d count %zu", s, st.source,
               (size_t)st.count);
        int flag = 0;
        OK(cadre_iprobe(s, 20, W, &flag, &st));
        EXPECT(flag && st.source == s, "iprobe of rank %d's held message: %d", s, flag);
    }
    for (int s = np - 1; s >= 1; s--)
        for (int i = 0; i < K; i++) {
            size_t n = 400000 + 13 * (size_t)s + 1000 * (size_t)i;
            cadre_status_t st;
            memset(b, 0xee, big);
            OK(cadre_recv(b, big, CADRE_UINT8, s, 20, W, &st));
            EXPECT(st.count == n && ru_check(b, n, s, 0, 300 + (uint64_t)i) == n,
                   "held message %d of rank %d: count %zu (expected %zu), byte %zu wrong", i, s,
                   (size_t)st.count, n, ru_check(b, n, s, 0, 300 + (uint64_t)i));
        }
    cadre_request_t r[64];
    memset(b, 0xab, big * K);
    for (int s = 1; s < np && s < K; s++)
        OK(cadre_irecv(b + big * (size_t)(s % K), cut, CADRE_UINT8, s, 21, W, &r[s]));
    OK(cadre_barrier(W));
    for (int s = 1; s < np && s < K; s++) {
        for (int i = 0; i < 3; i++) {
            cadre_status_t st;
            unsigned char *d = b + big * (size_t)(s % K);
            int rc;
            if (i == 0) {
                rc = cadre_wait(&r[s], &st);
            } else {
                memset(d, 0xab, cut + 1);
                rc = cadre_recv(d, i == 1 ? cut : 0, CADRE_UINT8, s, 21 + i, W, &st);
            }
            size_t room = i == 2 ? 0 : cut;
            EXPECT(rc == CADRE_ERR_TRUNCATE && strstr(cadre_last_error(), "longer than"),
                   "truncated receive %d from rank %d: %s: %s", i, s, cadre_error_string(rc),
                   cadre_last_error());
            EXPECT(ru_check(d, room, s, 0, 400 + (uint64_t)i) == room && d[room] == 0xab,
                   "truncated receive %d from rank %d: data", i, s);
        }
        cadre_status_t st;
        OK(cadre_recv(b, big, CADRE_UINT8, s, 24, W, &st));
        EXPECT(st.count == big && ru_check(b, big, s, 0, 400) == big, "after truncation");
    }
    free(b);
}

/* The withdraw case (see the top): 2 ranks, CADRE_TIMEOUT=3. */
static void withdraw(int me)
{
    size_t n = (size_t)3 << 20;
    unsigned char *b = malloc(n);
    if (me == 1) {
        ru_fill(b, n, 1, 0, 500);
        double t0 = ru_now();
        int rc = cadre_send(b, n, CADRE_UINT8, 0, 30, W);
        EXPECT(rc == CADRE_ERR_TIMEOUT && strstr(cadre_last_error(), "cadre_send") &&
                   strstr(cadre_last_error(), "rank 0"),
               "send never received: %s: %s", cadre_error_string(rc), cadre_last_error());
        EXPECT(ru_now() - t0 < 15, "send never received: failed after %.1f s", ru_now() - t0);
        memset(b, 0, n); /* the buffer is ours again */
    }
    else
        sleep(4); /* out of cadre while rank 1 times out (its barrier's wait is short) */
    OK(cadre_barrier(W));
    if (me == 0) {
        int flag = 1;
        cadre_status_t st;
        OK(cadre_iprobe(1, 30, W, &flag, &st));
        EXPECT(!flag, "the withdrawn message is still there (%zu bytes)", (size_t)st.count);
    }
    /* The pair goes on. */
    if (me == 1) {
        ru_fill(b, n, 1, 0, 501);
        OK(cadre_send(b, n, CADRE_UINT8, 0, 31, W));
    } else {
        OK(cadre_recv(b, n, CADRE_UINT8, 1, 31, W, CADRE_STATUS_IGNORE));
        EXPECT(ru_check(b, n, 1, 0, 501) == n, "after the withdrawal");
    }
    free(b);
}

/* The orphan case (see the top). */
static void orphan(int me, int np)
{
    static unsigned char b[2 << 20]; /* read until cadre_finalize */
    cadre_request_t r;
    OK(cadre_isend(b, sizeof b, CADRE_UINT8, (me + 1) % np, 40, W, &r));
    OK(cadre_barrier(W));
    (void)r;
}

static void ring(int me, int np)
{
    size_t n = (size_t)1 << 20;
    unsigned char *out = malloc(n), *in = malloc(n);
    int to = (me + 1) % np, from = (me - 1 + np) % np;
    ru_fill(out, n, me, to, 0);
    memset(in, 0xee, n);
    cadre_request_t r[2];
    OK(cadre_irecv(in, n, CADRE_UINT8, from, 41, W, &r[0]));
    OK(cadre_isend(out, n, CADRE_UINT8, to, 41, W, &r[1]));
    OK(cadre_waitall(2, r, CADRE_STATUS_IGNORE));
    size_t bad = ru_check(in, n, from, me, 0);
    EXPECT(bad == n, "%zu bytes from rank %d: byte %zu wrong", n, from, bad);
    free(out);
    free(in);
}

static void lost(int me, int np, int stop, int heldp)
{
    int victim = np - 1;
    size_t n = (size_t)64 << 20;
    unsigned char *buf = calloc(1, n);
    int pid = (int)getpid();
    if (me == victim) {
        cadre_request_t r[64];
        /* Every survivor answers: the pid reached it (a send that
         * returned may still sit in UCX's queue when the process stops). */
        for (int i = 0; i < victim; i++)
            OK(cadre_send(&pid, 1, CADRE_INT32, i, 1, W));
        for (int i = 0, ack; i < victim; i++)
            OK(cadre_recv(&ack, 1, CADRE_INT32, i, 1, W, CADRE_STATUS_IGNORE));
        for (int i = 0; i < victim; i++)
            OK(cadre_isend(buf, n, CADRE_UINT8, i, 2, W, &r[i]));
        usleep(20 * 1000);
        raise(stop ? SIGSTOP : SIGKILL);
        return; /* not reached */
    }
    OK(cadre_recv(&pid, 1, CADRE_INT32, victim, 1, W, CADRE_STATUS_IGNORE));
    OK(cadre_send(&me, 1, CADRE_INT32, victim, 1, W));
    int rc, x = 0;
    double t0 = ru_now();
    if (!heldp) {
        cadre_request_t r;
        OK(cadre_irecv(buf, n, CADRE_UINT8, victim, 2, W, &r));
        rc = cadre_wait(&r, CADRE_STATUS_IGNORE); /* whole, or failed */
        EXPECT(rc == CADRE_SUCCESS || rc == CADRE_ERR_PEER, "64 MiB receive: %s",
               cadre_last_error());
    } else {
        /* Held here, never received: probed (or, killed first, gone). */
        cadre_status_t st;
        rc = cadre_probe(victim, 2, W, &st);
        EXPECT((rc == CADRE_SUCCESS && st.count == n) || rc == CADRE_ERR_PEER,
               "probe of the held 64 MiB: %s, count %zu", cadre_error_string(rc),
               (size_t)st.count);
    }
    rc = cadre_recv(&x, 1, CADRE_INT32, victim, 3, W, CADRE_STATUS_IGNORE);
    double t = ru_now() - t0;
    char want[32];
    snprintf(want, sizeof want, "rank %d", victim);
    EXPECT(rc == CADRE_ERR_PEER && strstr(cadre_last_error(), want) &&
               strstr(cadre_last_error(), "host "),
           "receive from the lost rank: %s: %s", cadre_error_string(rc), cadre_last_error());
    EXPECT(t < 15.0, "CADRE_ERR_PEER after %.1f s", t);
    printf("ucx_test: rank %d saw CADRE_ERR_PEER after %.1f s\n", me, t);
    if (heldp) {
        rc = cadre_recv(buf, n, CADRE_UINT8, victim, 2, W, CADRE_STATUS_IGNORE);
        EXPECT(rc == CADRE_ERR_PEER && strstr(cadre_last_error(), want),
               "receive of the held message of the lost rank: %s: %s", cadre_error_string(rc),
               cadre_last_error());
    }
    /* The others carry on. */
    if (victim > 1) {
        int peer = me == 0 ? 1 : me == 1 ? 0 : -1;
        if (peer >= 0) {
            int y = me;
            OK(cadre_sendrecv(&y, 1, peer, 4, &x, 1, peer, 4, CADRE_INT32, W,
                              CADRE_STATUS_IGNORE));
            EXPECT(x == peer, "rank %d sent %d", peer, x);
        }
    }
    if (stop && me == 0)
        kill((pid_t)pid, SIGKILL);
    free(buf);
}

/* Rank 0 sends rank 1 a window of large messages (UCXBULK of 16 MiB, all
 * at once, 512 MiB by default): with CADRE_UCX_PEER_TIMEOUT=1 the link
 * stays full for longer than that, heartbeats wait behind the data, and
 * the transfers themselves must count as signs of life (before they did,
 * each side declared the other lost): both ends whole, checked. */
static void bulk(int me)
{
    int k = getenv("UCXBULK") ? atoi(getenv("UCXBULK")) : 32;
    size_t n = (size_t)16 << 20;
    if (me > 1 || k < 1 || k > 64)
        return;
    unsigned char *b = malloc(n * (size_t)k);
    cadre_request_t r[64];
    if (me == 0)
        for (int i = 0; i < k; i++)
            ru_fill(b + n * (size_t)i, n, 0, 1, 200 + i);
    else
        memset(b, 0xee, n * (size_t)k);
    for (int i = 0; i < k; i++)
        OK(me == 0 ? cadre_isend(b + n * (size_t)i, n, CADRE_UINT8, 1, 60, W, &r[i])
                   : cadre_irecv(b + n * (size_t)i, n, CADRE_UINT8, 0, 60, W, &r[i]));
    OK(cadre_waitall(k, r, NULL));
    for (int i = 0; me == 1 && i < k; i++) {
        size_t bad = ru_check(b + n * (size_t)i, n, 0, 1, 200 + i);
        EXPECT(bad == n, "bulk message %d: byte %zu wrong", i, bad);
    }
    free(b);
}

/* The last rank stops (SIGSTOP) until the others have failed it (their
 * heartbeats: it is silent), then rank 0 continues it (SIGCONT): alive, it
 * was failed by the others, who no longer talk to it. Its receive posted
 * before it stopped must fail with CADRE_ERR_PEER soon after it resumes,
 * not at CADRE_TIMEOUT (the test runs with a long one). */
static void revive(int me, int np)
{
    int victim = np - 1, pid = (int)getpid(), x = 0;
    if (me == victim) {
        for (int i = 0; i < victim; i++)
            OK(cadre_send(&pid, 1, CADRE_INT32, i, 1, W));
        for (int i = 0, ack; i < victim; i++)
            OK(cadre_recv(&ack, 1, CADRE_INT32, i, 1, W, CADRE_STATUS_IGNORE));
        cadre_request_t r;
        OK(cadre_irecv(&x, 1, CADRE_INT32, 0, 7, W, &r)); /* never sent */
        raise(SIGSTOP);
        double t0 = ru_now(); /* resumed */
        int rc = cadre_wait(&r, CADRE_STATUS_IGNORE);
        double t = ru_now() - t0;
        EXPECT(rc == CADRE_ERR_PEER && strstr(cadre_last_error(), "rank 0"),
               "receive from rank 0 after it failed us: %s: %s", cadre_error_string(rc),
               cadre_last_error());
        EXPECT(t < 15.0, "CADRE_ERR_PEER %.1f s after resuming", t);
        printf("ucx_test: rank %d saw CADRE_ERR_PEER %.1f s after resuming\n", me, t);
        return;
    }
    OK(cadre_recv(&pid, 1, CADRE_INT32, victim, 1, W, CADRE_STATUS_IGNORE));
    OK(cadre_send(&me, 1, CADRE_INT32, victim, 1, W));
    int rc = cadre_recv(&x, 1, CADRE_INT32, victim, 3, W, CADRE_STATUS_IGNORE);
    EXPECT(rc == CADRE_ERR_PEER, "receive from the stopped rank: %s: %s", cadre_error_string(rc),
           cadre_last_error());
    if (me == 0)
        kill((pid_t)pid, SIGCONT);
}

int main(int argc, char **argv)
{
    fake_hosts_setenv();
    int me, np;
    OK(cadre_init(&argc, &argv));
    if (ru_failures)
        return 1;
    OK(cadre_comm_rank(W, &me));
    OK(cadre_comm_size(W, &np));
    ru_rank = me;
    const char *what = getenv("UCXTEST");
    if (!what || !strcmp(what, "data")) {
        pairs(me, np);
        window(me, np);
        any_source(me, np);
        OK(cadre_barrier(W));
    } else if (!strcmp(what, "bulk")) {
        bulk(me);
        OK(cadre_barrier(W));
    } else if (!strcmp(what, "revive")) {
        revive(me, np);
    } else if (!strcmp(what, "kill") || !strcmp(what, "stop") || !strcmp(what, "killheld")) {
        lost(me, np, !strcmp(what, "stop"), !strcmp(what, "killheld"));
    } else if (!strcmp(what, "held")) {
        held(me, np);
        OK(cadre_barrier(W));
    } else if (!strcmp(what, "withdraw")) {
        withdraw(me);
        OK(cadre_barrier(W));
    } else if (!strcmp(what, "orphan")) {
        orphan(me, np);
    } else if (!strcmp(what, "nofinalize")) {
        ring(me, np);
        OK(cadre_barrier(W));
        if (!ru_failures)
            printf("ucx_test: rank %d ok\n", me);
        fflush(stdout);
        return ru_failures ? 1 : 0; /* no cadre_finalize */
    } else {
        fprintf(stderr, "ucx_test: unknown UCXTEST=%s\n", what);
        return 2;
    }
    OK(cadre_finalize());
    if (!ru_failures)
        printf("ucx_test: rank %d ok\n", me);
    return ru_failures ? 1 : 0;
}
