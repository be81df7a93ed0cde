/* The paths of the small-message rate (issue 17), checked: windows of
 * nonblocking sends that the transport takes at once (p2p_api.c send_now,
 * done before cadre_isend returns) mixed with sends that must queue behind
 * them (a window past the shared-memory ring's slots, rendezvous sizes),
 * receives posted before the messages come and after (the unexpected
 * queue), CADRE_ANY_TAG and CADRE_ANY_SOURCE, the statuses cadre_waitall
 * writes for requests that were done before it looked, handles used after
 * their request ended, and the inlined argument checks at their bounds.
 * Every byte is checked against the pattern of its (from, to, seq). Run at
 * 2 to 5 ranks over shared memory and TCP (ranks.list). */
#include <unistd.h>

#include "rank_util.h"

#define W CADRE_COMM_WORLD

static int me, np;

/* Messages of a window: zero, small (inline in a slot), a slot's worth,
 * and one past the eager sizes of both transports (rendezvous). */
static size_t len_of(int k, int big)
{
    static const size_t small[] = {8, 0, 1, 16, 17, 8, 100, 4096};
    if (big && k % 50 == 49)
        return 150000 + (size_t)k;
    return small[k % 8];
}

/* One window from `from` to `to`: WIN messages, each from its own buffer
 * into its own buffer; the receive takes every third with CADRE_ANY_TAG.
 * late: the receiver posts only after the sender's word that all were
 * started, so the eager ones wait in the unexpected queue. */
static void window(int from, int to, int win, int big, int late, uint64_t seq0)
{
    size_t total = 0;
    for (int k = 0; k < win; k++)
        total += len_of(k, big);
    unsigned char *buf = malloc(total + 1);
    cadre_request_t *reqs = calloc((size_t)win, sizeof *reqs);
    cadre_status_t *st = calloc((size_t)win, sizeof *st);
    EXPECT(buf && reqs && st, "malloc");
    char word = 0;
    if (me == from) {
        size_t off = 0;
        for (int k = 0; k < win; k++) {
            size_t n = len_of(k, big);
            ru_fill(buf + off, n, from, to, seq0 + (uint64_t)k);
            OK(cadre_isend(buf + off, n, CADRE_UINT8, to, k, W, &reqs[k]));
            off += n;
        }
        if (late)
            OK(cadre_send(&word, 1, CADRE_UINT8, to, 100000, W));
        OK(cadre_waitall(win, reqs, st));
        for (int k = 0; k < win; k++) {
            EXPECT(reqs[k] == CADRE_REQUEST_NULL, "send %d: handle not cleared", k);
            EXPECT(st[k].error == CADRE_SUCCESS, "send %d: status error %d", k, st[k].error);
        }
    } else if (me == to) {
        if (late)
            OK(cadre_recv(&word, 1, CADRE_UINT8, from, 100000, W, CADRE_STATUS_IGNORE));
        memset(buf, 0xEE, total);
        size_t off = 0;
        for (int k = 0; k < win; k++) {
            size_t n = len_of(k, big);
            OK(cadre_irecv(buf + off, n, CADRE_UINT8, from, k % 3 ? k : CADRE_ANY_TAG, W, &reqs[k]));
            off += n;
        }
        OK(cadre_waitall(win, reqs, st));
        off = 0;
        int bad = 0;
        for (int k = 0; k < win && bad < 3; k++) {
            size_t n = len_of(k, big);
            size_t at = ru_check(buf + off, n, from, to, seq0 + (uint64_t)k);
            if (at != n || st[k].source != from || st[k].tag != k || st[k].count != n ||
                st[k].error != CADRE_SUCCESS || reqs[k] != CADRE_REQUEST_NULL) {
                bad++;
                EXPECT(0, "window %d->%d (win %d, late %d) message %d of %zu bytes: wrong at %zu, "
                       "status %d/%d/%zu/%d", from, to, win, late, k, n, at, st[k].source,
                       st[k].tag, st[k].count, st[k].error);
            }
            off += n;
        }
    }
    free(buf);
    free(reqs);
    free(st);
}

/* osu_mbw_mr's pairs: rank i < np/2 streams to rank i + np/2 (an odd np's
 * last rank idles), windows inside the ring's 64 slots and past them. */
static void test_pairs(void)
{
    int pairs = np / 2;
    uint64_t seq = 0;
    static const int wins[] = {1, 64, 200};
    for (int late = 0; late < 2; late++)
        for (size_t w = 0; w < sizeof wins / sizeof wins[0]; w++)
            for (int big = 0; big < 2; big++, seq += 1000)
                for (int i = 0; i < pairs; i++)
                    window(i, i + pairs, wins[w], big, late, seq);
}

/* Every other rank streams 8-byte windows to rank 0, which takes them with
 * CADRE_ANY_SOURCE and CADRE_ANY_TAG: each sender's messages in its order. */
static void test_any_source(void)
{
    enum { WIN = 100 };
    if (np < 2)
        return;
    if (me == 0) {
        int total = (np - 1) * WIN;
        uint64_t *in = calloc((size_t)total, sizeof *in);
        cadre_request_t *reqs = calloc((size_t)total, sizeof *reqs);
        cadre_status_t *st = calloc((size_t)total, sizeof *st);
        int *next = calloc((size_t)np, sizeof *next);
        for (int k = 0; k < total; k++)
            OK(cadre_irecv(&in[k], 1, CADRE_UINT64, CADRE_ANY_SOURCE, CADRE_ANY_TAG, W, &reqs[k]));
        OK(cadre_waitall(total, reqs, st));
        for (int k = 0; k < total; k++) {
            int s = st[k].source;
            EXPECT(s >= 1 && s < np && st[k].tag == s && st[k].count == 1,
                   "message %d: status %d/%d/%zu", k, s, st[k].tag, st[k].count);
            if (s < 1 || s >= np)
                continue;
            EXPECT(in[k] == ((uint64_t)s << 32 | (uint64_t)next[s]),
                   "message %d from %d: %llx, expected sequence %d", k, s,
                   (unsigned long long)in[k], next[s]);
            next[s]++;
        }
        free(in);
        free(reqs);
        free(st);
        free(next);
    } else {
        uint64_t out[WIN];
        cadre_request_t reqs[WIN];
        for (int k = 0; k < WIN; k++) {
            out[k] = (uint64_t)me << 32 | (uint64_t)k;
            OK(cadre_isend(&out[k], 1, CADRE_UINT64, 0, me, W, &reqs[k]));
        }
        OK(cadre_waitall(WIN, reqs, NULL));
    }
}

/* A send done when cadre_isend returned still hands out a handle that ends
 * once: cadre_test or cadre_waitall ends it, and a copy of it is stale
 * afterwards, also as the second of two places in one cadre_waitall. */
static void test_handles(void)
{
    if (np < 2 || me > 1)
        return;
    int peer = 1 - me;
    uint64_t v[3] = {11, 22, 33}, got[3] = {0};
    if (me == 0) {
        cadre_request_t h, copy;
        OK(cadre_isend(&v[0], 1, CADRE_UINT64, peer, 1, W, &h));
        copy = h;
        int done = 0;
        for (int i = 0; i < 1000000 && !done; i++)
            OK(cadre_test(&h, &done, NULL));
        EXPECT(done && h == CADRE_REQUEST_NULL, "cadre_test: done %d", done);
        FAILS(cadre_wait(&copy, NULL), CADRE_ERR_STATE, "stale");
        cadre_request_t two[3];
        OK(cadre_isend(&v[1], 1, CADRE_UINT64, peer, 2, W, &two[0]));
        two[1] = two[0];
        two[2] = CADRE_REQUEST_NULL;
        cadre_status_t st[3];
        FAILS(cadre_waitall(3, two, st), CADRE_ERR_STATE, "reqs[1]");
        EXPECT(two[0] == CADRE_REQUEST_NULL && st[0].error == CADRE_SUCCESS,
               "the first place completes");
        EXPECT(st[2].source == CADRE_ANY_SOURCE && st[2].tag == CADRE_ANY_TAG,
               "CADRE_REQUEST_NULL's status %d/%d", st[2].source, st[2].tag);
        OK(cadre_send(&v[2], 1, CADRE_UINT64, peer, 3, W));
    } else {
        for (int t = 1; t <= 3; t++)
            OK(cadre_recv(&got[t - 1], 1, CADRE_UINT64, peer, t, W, CADRE_STATUS_IGNORE));
        EXPECT(got[0] == 11 && got[1] == 22 && got[2] == 33, "got %llu %llu %llu",
               (unsigned long long)got[0], (unsigned long long)got[1], (unsigned long long)got[2]);
    }
}

/* The argument checks inlined into the calls, at their bounds: the
 * largest count they take without the full check and a buffer that ends
 * past the address space, a NULL buffer, an unknown datatype. None sends a
 * message or writes a request. */
static void test_arg_bounds(void)
{
    static int64_t b[4];
    int peer = (me + 1) % np;
#if UINTPTR_MAX > 0xffffffffu
    size_t n = ((size_t)1 << 56) / 8; /* 2^56 bytes: no buffer at a real address ends in range */
#else
    size_t n = (size_t)PTRDIFF_MAX / 8;
#endif
    cadre_request_t req = CADRE_REQUEST_NULL;
    FAILS(cadre_isend(b, n, CADRE_INT64, peer, 1, W, &req), CADRE_ERR_ARG, "address space");
    FAILS(cadre_irecv(b, n, CADRE_INT64, peer, 1, W, &req), CADRE_ERR_ARG, "address space");
    FAILS(cadre_send(b, n, CADRE_INT64, peer, 1, W), CADRE_ERR_ARG, "address space");
    FAILS(cadre_isend(NULL, 1, CADRE_INT64, peer, 1, W, &req), CADRE_ERR_ARG, "NULL");
    FAILS(cadre_irecv(b, 1, (cadre_datatype_t)99, peer, 1, W, &req), CADRE_ERR_ARG,
          "unknown datatype");
    EXPECT(req == CADRE_REQUEST_NULL, "a failed call wrote a request");
}

int main(int argc, char **argv)
{
    OK(cadre_init(&argc, &argv));
    cadre_comm_rank(W, &me);
    cadre_comm_size(W, &np);
    ru_rank = me;
    test_arg_bounds();
    OK(cadre_barrier(W));
    test_pairs();
    OK(cadre_barrier(W));
    test_any_source();
    OK(cadre_barrier(W));
    test_handles();
    OK(cadre_barrier(W));
    int all = 0;
    OK(cadre_allreduce(&ru_failures, &all, 1, CADRE_INT32, CADRE_SUM, W));
    if (me == 0)
        printf("msgrate_test: %d ranks: %s\n", np, all ? "FAILED" : "ok");
    cadre_finalize();
    return ru_failures ? 1 : 0;
}
