/* Point-to-point on host memory, run with 2, 3 and 4 ranks, over shared
 * memory and again with CADRE_TRANSPORT=tcp. Every received byte is checked
 * against a pattern computed independently by sender and receiver.
 *
 * This file: main (P2P_TESTS picks cases by name), the barrier between
 * cases and the message-moving cases (sizes, order, fan-in, many
 * outstanding, self, ring, 1 GiB, truncation); p2p_test_edges.c holds the
 * rest (blocking-receive order, threads, background progress, timeouts, bad
 * arguments). Both call only cadre.h and rank_util.h (through p2p_test.h). */
#include <signal.h>
#include <stdint.h>
#include <unistd.h>

#include "p2p_test.h"

int ru_rank = -1, ru_failures;
int me, np;

/* A barrier out of point-to-point (the collectives come later). */
static void sync_all(void)
{
    char c = 0;
    if (me == 0) {
        for (int r = 1; r < np; r++)
            OK(cadre_recv(&c, 1, CADRE_UINT8, r, 30000, W, CADRE_STATUS_IGNORE));
        for (int r = 1; r < np; r++)
            OK(cadre_send(&c, 1, CADRE_UINT8, r, 30001, W));
    } else {
        OK(cadre_send(&c, 1, CADRE_UINT8, 0, 30000, W));
        OK(cadre_recv(&c, 1, CADRE_UINT8, 0, 30001, W, CADRE_STATUS_IGNORE));
    }
}

/* Sizes around every protocol boundary: eager slot, fragments, up to 64 MiB. */
static const size_t pp_sizes[] = {0,     1,      7,      8,      100,     4031,     4032,
                                  4033,  4095,   4096,    4097,    8192,   65535,  131071,  131072,  131073,   262145,
                                  1 << 20, (1 << 20) + 3, 4 << 20, 16 << 20, 64 << 20};

static void test_pingpong(void)
{
    size_t max = 64 << 20;
    unsigned char *buf = malloc(max);
    EXPECT(buf != NULL, "malloc");
    uint64_t seq = 0;
    for (int peer = 1; peer < np; peer++) {
        for (size_t i = 0; i < sizeof pp_sizes / sizeof pp_sizes[0]; i++, seq++) {
            size_t n = pp_sizes[i];
            cadre_status_t st;
            if (me == 0) {
                ru_fill(buf, n, 0, peer, seq);
                OK(cadre_send(buf, n, CADRE_UINT8, peer, 7, W));
                memset(buf, 0xEE, n);
                OK(cadre_recv(buf, n, CADRE_UINT8, peer, 8, W, &st));
                size_t bad = ru_check(buf, n, peer, 0, seq);
                EXPECT(bad == n, "pong of %zu bytes from %d wrong at byte %zu", n, peer, bad);
                EXPECT(st.source == peer && st.tag == 8 && st.count == n && st.error == 0,
                       "status %d/%d/%zu/%d for %zu bytes", st.source, st.tag, st.count, st.error, n);
            } else if (me == peer) {
                memset(buf, 0xEE, n);
                OK(cadre_recv(buf, n, CADRE_UINT8, 0, 7, W, &st));
                size_t bad = ru_check(buf, n, 0, peer, seq);
                EXPECT(bad == n, "ping of %zu bytes wrong at byte %zu", n, bad);
                EXPECT(st.source == 0 && st.tag == 7 && st.count == n, "status %d/%d/%zu", st.source,
                       st.tag, st.count);
                ru_fill(buf, n, peer, 0, seq);
                OK(cadre_send(buf, n, CADRE_UINT8, 0, 8, W));
            }
        }
    }
    /* Element counts, not bytes: a float64 message reports elements. */
    if (np > 1 && me <= 1) {
        double d[5] = {1.5, -2, 3.25, 1e300, -0.0};
        double got[5] = {0};
        cadre_status_t st;
        if (me == 0)
            OK(cadre_send(d, 5, CADRE_FLOAT64, 1, 9, W));
        else {
            OK(cadre_recv(got, 5, CADRE_FLOAT64, 0, 9, W, &st));
            EXPECT(!memcmp(d, got, sizeof d) && st.count == 5, "float64 message, count %zu", st.count);
        }
    }
    free(buf);
}

/* 10,000 messages from each rank to the next, some large enough for the
 * rendezvous protocol, received in the order sent. */
static void test_order2(void)
{
    enum { N = 10000 };
    int next = (me + 1) % np, prev = (me + np - 1) % np;
    uint32_t *in = calloc(N, 16 * sizeof(uint32_t));
    unsigned char *bigout = malloc(20000 * (N / 1000)), *bigin = malloc(20000 * (N / 1000));
    cadre_request_t *rreq = calloc(N, sizeof *rreq), *sreq = calloc(N, sizeof *sreq);
    uint32_t *out = calloc(N, 16 * sizeof(uint32_t));
    /* Half the receives are posted before the messages arrive, half after. */
    for (int i = 0; i < N / 2; i++) {
        if (i % 1000 == 999)
            OK(cadre_irecv(bigin + (i / 1000) * 20000, 20000, CADRE_UINT8, prev, 1000 + i, W, &rreq[i]));
        else
            OK(cadre_irecv(in + i * 16, 16, CADRE_UINT32, prev, CADRE_ANY_TAG, W, &rreq[i]));
    }
    for (int i = 0; i < N; i++) {
        if (i % 1000 == 999) {
            /* Nonblocking: a blocking rendezvous send here would wait for a
             * receive the peer posts only after its own sends (a deadlock in
             * MPI's semantics too). */
            unsigned char *o = bigout + (i / 1000) * 20000;
            ru_fill(o, 20000, me, next, (uint64_t)i);
            OK(cadre_isend(o, 20000, CADRE_UINT8, next, 1000 + i, W, &sreq[i]));
        } else {
            for (int k = 0; k < 16; k++)
                out[i * 16 + k] = (uint32_t)(i * 16 + k) ^ (uint32_t)me << 24;
            OK(cadre_isend(out + i * 16, (size_t)(i % 17) % 16 + 1, CADRE_UINT32, next, i % 5, W, &sreq[i]));
        }
    }
    for (int i = N / 2; i < N; i++) {
        if (i % 1000 == 999)
            OK(cadre_irecv(bigin + (i / 1000) * 20000, 20000, CADRE_UINT8, prev, 1000 + i, W, &rreq[i]));
        else
            OK(cadre_irecv(in + i * 16, 16, CADRE_UINT32, prev, CADRE_ANY_TAG, W, &rreq[i]));
    }
    cadre_status_t *st = calloc(N, sizeof *st);
    OK(cadre_waitall(N, rreq, st));
    OK(cadre_waitall(N, sreq, NULL));
    int bad = 0;
    for (int i = 0; i < N && bad < 5; i++) {
        if (i % 1000 == 999) {
            size_t b = ru_check(bigin + (i / 1000) * 20000, 20000, prev, me, (uint64_t)i);
            if (b != 20000) {
                bad++;
                EXPECT(0, "large message %d wrong at byte %zu", i, b);
            }
            continue;
        }
        size_t cnt = (size_t)(i % 17) % 16 + 1;
        if (st[i].count != cnt || st[i].tag != i % 5 || st[i].source != prev) {
            bad++;
            EXPECT(0, "message %d: status count %zu tag %d source %d, expected %zu/%d/%d", i,
                   st[i].count, st[i].tag, st[i].source, cnt, i % 5, prev);
        }
        for (size_t k = 0; k < cnt; k++) {
            if (in[i * 16 + k] != ((uint32_t)(i * 16 + (int)k) ^ (uint32_t)prev << 24)) {
                bad++;
                EXPECT(0, "message %d element %zu out of order or wrong: %u", i, k, in[i * 16 + k]);
                break;
            }
        }
    }
    free(in);
    free(out);
    free(bigout);
    free(bigin);
    free(rreq);
    free(sreq);
    free(st);
}

static void test_fanin(void)
{
    enum { M = 100 };
    if (me == 0) {
        int *next_seq = calloc((size_t)np, sizeof *next_seq);
        for (int i = 0; i < (np - 1) * M; i++) {
            int msg[2];
            cadre_status_t st;
            OK(cadre_recv(msg, 2, CADRE_INT32, CADRE_ANY_SOURCE, CADRE_ANY_TAG, W, &st));
            EXPECT(st.source >= 1 && st.source < np && st.tag == st.source && msg[0] == st.source,
                   "fan-in message from %d tag %d says %d", st.source, st.tag, msg[0]);
            if (st.source >= 1 && st.source < np) {
                EXPECT(msg[1] == next_seq[st.source], "from %d: seq %d, expected %d", st.source,
                       msg[1], next_seq[st.source]);
                next_seq[st.source] = msg[1] + 1;
            }
        }
        free(next_seq);
        /* Release the senders only now: their next messages would match ANY_TAG too. */
        for (int r = 1; r < np; r++)
            OK(cadre_send(NULL, 0, CADRE_INT32, r, 501, W));
    } else {
        for (int i = 0; i < M; i++) {
            int msg[2] = {me, i};
            OK(cadre_send(msg, 2, CADRE_INT32, 0, me, W));
        }
        OK(cadre_recv(NULL, 0, CADRE_INT32, 0, 501, W, CADRE_STATUS_IGNORE));
    }
}

static void test_outstanding(void)
{
    enum { N = 1000 };
    int next = (me + 1) % np, prev = (me + np - 1) % np;
    cadre_request_t reqs[2 * N];
    int64_t *in = calloc(N, sizeof *in), *out = calloc(N, sizeof *out);
    for (int i = 0; i < N; i++)
        OK(cadre_irecv(&in[i], 1, CADRE_INT64, prev, i, W, &reqs[i]));
    for (int i = 0; i < N; i++) {
        out[i] = (int64_t)me * 1000000 + i;
        OK(cadre_isend(&out[i], 1, CADRE_INT64, next, i, W, &reqs[N + i]));
    }
    OK(cadre_waitall(2 * N, reqs, NULL));
    for (int i = 0; i < N; i++) {
        EXPECT(in[i] == (int64_t)prev * 1000000 + i, "request %d got %lld", i, (long long)in[i]);
        EXPECT(reqs[i] == CADRE_REQUEST_NULL, "waitall must clear handles");
    }
    free(in);
    free(out);
}

static void test_self(void)
{
    for (size_t n = 1; n <= (8u << 20); n *= 8) {
        unsigned char *a = malloc(n), *b = malloc(n);
        ru_fill(a, n, me, me, n);
        cadre_request_t r;
        OK(cadre_isend(a, n, CADRE_UINT8, me, 11, W, &r));
        cadre_status_t st;
        OK(cadre_recv(b, n, CADRE_UINT8, me, 11, W, &st));
        OK(cadre_wait(&r, NULL));
        EXPECT(ru_check(b, n, me, me, n) == n && st.source == me && st.count == n, "self %zu", n);
        memset(b, 0, n);
        OK(cadre_sendrecv(a, n, me, 12, b, n, me, 12, CADRE_UINT8, W, &st));
        EXPECT(ru_check(b, n, me, me, n) == n, "self sendrecv %zu", n);
        free(a);
        free(b);
    }
    /* Small blocking send to self completes before the receive is posted. */
    int x = 42, y = 0;
    OK(cadre_send(&x, 1, CADRE_INT32, me, 13, W));
    OK(cadre_recv(&y, 1, CADRE_INT32, me, 13, W, CADRE_STATUS_IGNORE));
    EXPECT(y == 42, "self eager %d", y);
}

static void test_sendrecv_ring(void)
{
    int next = (me + 1) % np, prev = (me + np - 1) % np;
    size_t sizes[] = {0, 100, 5000, 1 << 20};
    for (size_t i = 0; i < 4; i++) {
        size_t n = sizes[i];
        unsigned char *a = malloc(n + 1), *b = malloc(n + 1);
        ru_fill(a, n, me, next, i);
        cadre_status_t st;
        OK(cadre_sendrecv(a, n, next, 21, b, n, prev, 21, CADRE_UINT8, W, &st));
        EXPECT(ru_check(b, n, prev, me, i) == n && st.source == prev && st.count == n,
               "sendrecv ring of %zu bytes", n);
        free(a);
        free(b);
    }
}

static void fill64(uint64_t *p, size_t words, uint64_t seed)
{
    for (size_t i = 0; i < words; i++)
        p[i] = i * 0x9E3779B97F4A7C15ull ^ seed;
}

/* One 1 GiB message; the receiver's memory must not grow while it has not
 * posted the receive. */
static void test_gib(void)
{
    const size_t n = (size_t)1 << 30, words = n / 8;
    if (me == 0) {
        uint64_t *a = malloc(n);
        fill64(a, words, 77);
        long rss0 = ru_rss_kib();
        cadre_request_t r;
        OK(cadre_isend(a, words, CADRE_UINT64, 1, 40, W, &r));
        OK(cadre_wait(&r, NULL));
        long grew = ru_rss_kib() - rss0;
        EXPECT(grew < 64 * 1024, "sender grew by %ld KiB sending 1 GiB", grew);
        free(a);
    } else if (me == 1) {
        long rss0 = ru_rss_kib();
        usleep(300 * 1000); /* the sender is blocked on us meanwhile */
        for (int i = 0; i < 20; i++) {
            int flag;
            cadre_initialized(&flag); /* any cadre calls: still no receive posted */
            usleep(10 * 1000);
        }
        long grew = ru_rss_kib() - rss0;
        EXPECT(grew < 64 * 1024, "receiver grew by %ld KiB before posting the receive", grew);
        uint64_t *b = malloc(n);
        cadre_status_t st;
        OK(cadre_recv(b, words, CADRE_UINT64, 0, 40, W, &st));
        size_t bad = words;
        for (size_t i = 0; i < words; i++)
            if (b[i] != (i * 0x9E3779B97F4A7C15ull ^ 77)) {
                bad = i;
                break;
            }
        EXPECT(bad == words && st.count == words, "1 GiB message wrong at word %zu", bad);
        free(b);
    }
}

static void test_truncate(void)
{
    if (np < 2 || me > 1)
        return;
    size_t sizes[] = {100, 3 << 20};
    for (int i = 0; i < 2; i++) {
        size_t n = sizes[i], cap = n / 2;
        if (me == 0) {
            unsigned char *a = malloc(n);
            ru_fill(a, n, 0, 1, 50 + (uint64_t)i);
            OK(cadre_send(a, n, CADRE_UINT8, 1, 50, W));
            free(a);
        } else {
            unsigned char *b = malloc(n);
            memset(b, 0xAB, n);
            cadre_status_t st;
            FAILS(cadre_recv(b, cap, CADRE_UINT8, 0, 50, W, &st), CADRE_ERR_TRUNCATE,
                  "is longer than the receive buffer");
            EXPECT(st.error == CADRE_ERR_TRUNCATE && st.count == cap, "status %d count %zu",
                   st.error, st.count);
            EXPECT(ru_check(b, cap, 0, 1, 50 + (uint64_t)i) == cap, "truncated data");
            EXPECT(b[cap] == 0xAB, "wrote past the receive buffer");
            free(b);
        }
    }
    /* The pair still works afterwards. */
    int x = 5;
    if (me == 0)
        OK(cadre_send(&x, 1, CADRE_INT32, 1, 51, W));
    else {
        OK(cadre_recv(&x, 1, CADRE_INT32, 0, 51, W, CADRE_STATUS_IGNORE));
        EXPECT(x == 5, "after truncation");
    }
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (cadre_init(&argc, &argv) != CADRE_SUCCESS) {
        fprintf(stderr, "p2p_test: cadre_init: %s\n", cadre_last_error());
        return 1;
    }
    cadre_comm_rank(W, &me);
    cadre_comm_size(W, &np);
    ru_rank = me;
    struct {
        const char *name;
        void (*fn)(void);
    } tests[] = {{"bad_input", test_bad_input},   {"self", test_self},
                 {"pingpong", test_pingpong},     {"order", test_order2},
                 {"fanin", test_fanin},           {"outstanding", test_outstanding},
                 {"sendrecv_ring", test_sendrecv_ring}, {"truncate", test_truncate},
                 {"wait_timeout", test_wait_timeout}, {"background", test_background},
                 {"no_progress_timeout", test_no_progress_timeout}, {"gib", test_gib},
                 {"blocking_order", test_blocking_order}, {"threads", test_threads},
                 {"small_lanes", test_small_lanes}};
    const char *only = getenv("P2P_TESTS");
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        /* P2P_TESTS=a,b runs the tests whose names contain a or b. */
        int want = !only;
        for (const char *o = only; o && *o && !want;) {
            size_t l = strcspn(o, ",");
            char tok[64];
            snprintf(tok, sizeof tok, "%.*s", (int)(l < 63 ? l : 63), o);
            want = l && strstr(tests[i].name, tok) != NULL;
            o += l + (o[l] == ',');
        }
        if (!want)
            continue;
        int before = ru_failures;
        double t0 = ru_now();
        tests[i].fn();
        sync_all();
        if (me == 0)
            printf("p2p_test %-20s %s (%.2f s)\n", tests[i].name,
                   ru_failures == before ? "ok" : "FAILED", ru_now() - t0);
        fflush(stdout);
    }
    int rc = cadre_finalize();
    EXPECT(rc == CADRE_SUCCESS, "finalize: %s", cadre_last_error());
    if (ru_failures)
        fprintf(stderr, "[rank %d] %d check(s) failed\n", me, ru_failures);
    return ru_failures ? 1 : 0;
}
