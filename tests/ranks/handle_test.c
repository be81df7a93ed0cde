/* Stale and garbage handles (issue 14). A copy of a request handle kept
 * after the request was waited on, and a copy of a freed communicator's
 * handle, must be refused (CADRE_ERR_STATE, "stale") even when a new request
 * or communicator has taken the old one's memory; values that never were
 * handles (0x1234, -1, pointers to a heap block or to the stack, a handle of
 * the other kind) must give CADRE_ERR_ARG in every function that takes one,
 * never a crash, and the process stays usable: the data of the requests
 * and collectives around them is checked byte by byte.
 * HANDLE_TESTS=a,b runs the parts whose names contain a or b. */
#include "rank_util.h"

#define W CADRE_COMM_WORLD
#define N 64

static int me, np;

/* A message to this rank itself, through a request, checked; returns the
 * (now stale) handle the request had. */
static cadre_request_t self_roundtrip(int tag, uint64_t seq)
{
    unsigned char out[N], in[N];
    cadre_request_t r = CADRE_REQUEST_NULL;
    cadre_status_t st;
    ru_fill(out, N, me, me, seq);
    memset(in, 0, N);
    OK(cadre_irecv(in, N, CADRE_UINT8, me, tag, W, &r));
    cadre_request_t copy = r;
    OK(cadre_send(out, N, CADRE_UINT8, me, tag, W));
    OK(cadre_wait(&r, &st));
    EXPECT(r == CADRE_REQUEST_NULL, "wait did not clear the handle");
    EXPECT(ru_check(in, N, me, me, seq) == N, "self message %llu wrong", (unsigned long long)seq);
    return copy;
}

/* Every function that takes a request, on a stale copy: CADRE_ERR_STATE
 * naming the argument, and nothing written. */
static void expect_stale_req(cadre_request_t stale, const char *what)
{
    cadre_request_t h = stale;
    cadre_status_t st = {.source = -77};
    int done = -5;
    int rc = cadre_test(&h, &done, &st);
    EXPECT(rc == CADRE_ERR_STATE, "%s: cadre_test on a stale handle -> %s", what,
           cadre_error_string(rc));
    EXPECT(strstr(cadre_last_error(), "cadre_test: req is a stale handle"),
           "%s: message \"%s\"", what, cadre_last_error());
    EXPECT(done == -5 && h == stale && st.source == -77, "%s: cadre_test wrote its outputs", what);
    rc = cadre_wait_timeout(&h, 0.01, &st);
    EXPECT(rc == CADRE_ERR_STATE, "%s: cadre_wait_timeout on a stale handle -> %s", what,
           cadre_error_string(rc));
    EXPECT(strstr(cadre_last_error(), "cadre_wait_timeout: req is a stale handle"),
           "%s: message \"%s\"", what, cadre_last_error());
    EXPECT(h == stale, "%s: cadre_wait_timeout changed the handle", what);
    rc = cadre_wait(&h, &st);
    EXPECT(rc == CADRE_ERR_STATE, "%s: cadre_wait on a stale handle -> %s", what,
           cadre_error_string(rc));
    EXPECT(strstr(cadre_last_error(), "cadre_wait: req is a stale handle"),
           "%s: message \"%s\"", what, cadre_last_error());
    EXPECT(h == stale && st.source == -77, "%s: cadre_wait wrote its outputs", what);
    cadre_request_t three[3] = {CADRE_REQUEST_NULL, stale, CADRE_REQUEST_NULL};
    rc = cadre_waitall(3, three, NULL);
    EXPECT(rc == CADRE_ERR_STATE, "%s: cadre_waitall on a stale handle -> %s", what,
           cadre_error_string(rc));
    EXPECT(strstr(cadre_last_error(), "cadre_waitall: reqs[1] is a stale handle"),
           "%s: message \"%s\"", what, cadre_last_error());
    EXPECT(three[1] == stale, "%s: cadre_waitall changed the handle", what);
}

static void stale_requests(void)
{
    cadre_status_t st;
    /* A receive waited on, then a new one, which the allocator may well put
     * in the same memory: the old copy must not reach the new request. */
    unsigned char b[N], sb[N];
    cadre_request_t stale = self_roundtrip(11, 1);
    cadre_request_t r2 = CADRE_REQUEST_NULL;
    memset(b, 0, N);
    OK(cadre_irecv(b, N, CADRE_UINT8, me, 12, W, &r2));
    EXPECT(r2 != stale, "a new request got the handle of a freed one");
    expect_stale_req(stale, "receive waited on");
    /* r2 is untouched: its message arrives now, and it completes once. */
    ru_fill(sb, N, me, me, 2);
    OK(cadre_send(sb, N, CADRE_UINT8, me, 12, W));
    expect_stale_req(stale, "receive waited on, new one complete");
    OK(cadre_wait(&r2, &st));
    EXPECT(ru_check(b, N, me, me, 2) == N, "the new request's data is wrong");
    EXPECT(st.source == me && st.tag == 12 && st.count == N, "status %d %d %zu", st.source,
           st.tag, st.count);

    /* Completed by cadre_test and by cadre_wait_timeout. */
    cadre_request_t r = CADRE_REQUEST_NULL;
    memset(b, 0, N);
    OK(cadre_irecv(b, N, CADRE_UINT8, me, 13, W, &r));
    cadre_request_t copy = r;
    ru_fill(sb, N, me, me, 3);
    OK(cadre_send(sb, N, CADRE_UINT8, me, 13, W));
    int done = 0;
    for (int i = 0; i < 1000000 && !done; i++)
        OK(cadre_test(&r, &done, &st));
    EXPECT(done && r == CADRE_REQUEST_NULL, "test never completed");
    EXPECT(ru_check(b, N, me, me, 3) == N, "data of the tested request");
    expect_stale_req(copy, "receive completed by cadre_test");
    memset(b, 0, N);
    OK(cadre_irecv(b, N, CADRE_UINT8, me, 14, W, &r));
    copy = r;
    ru_fill(sb, N, me, me, 4);
    OK(cadre_send(sb, N, CADRE_UINT8, me, 14, W));
    OK(cadre_wait_timeout(&r, 60, &st));
    EXPECT(r == CADRE_REQUEST_NULL, "wait_timeout did not clear the handle");
    EXPECT(ru_check(b, N, me, me, 4) == N, "data of the request of wait_timeout");
    expect_stale_req(copy, "receive completed by cadre_wait_timeout");

    /* A handle given twice to cadre_waitall: the second is stale once the
     * first is done. */
    memset(b, 0, N);
    OK(cadre_irecv(b, N, CADRE_UINT8, me, 15, W, &r));
    cadre_request_t twice[2] = {r, r};
    ru_fill(sb, N, me, me, 5);
    OK(cadre_send(sb, N, CADRE_UINT8, me, 15, W));
    int rc = cadre_waitall(2, twice, NULL);
    EXPECT(rc == CADRE_ERR_STATE, "waitall with one handle twice -> %s", cadre_error_string(rc));
    EXPECT(strstr(cadre_last_error(), "reqs[1] is a stale handle"), "message \"%s\"",
           cadre_last_error());
    EXPECT(twice[0] == CADRE_REQUEST_NULL, "waitall did not clear reqs[0]");
    EXPECT(ru_check(b, N, me, me, 5) == N, "data of the request given twice");

    /* Sends to the next rank and a nonblocking collective. */
    int next = (me + 1) % np, prev = (me + np - 1) % np;
    unsigned char in[N], out[N];
    ru_fill(out, N, me, next, 6);
    memset(in, 0, N);
    cadre_request_t q[2];
    OK(cadre_irecv(in, N, CADRE_UINT8, prev, 16, W, &q[0]));
    OK(cadre_isend(out, N, CADRE_UINT8, next, 16, W, &q[1]));
    cadre_request_t qcopy[2] = {q[0], q[1]};
    OK(cadre_waitall(2, q, NULL));
    EXPECT(ru_check(in, N, prev, me, 6) == N, "ring message wrong");
    expect_stale_req(qcopy[0], "irecv waited on by cadre_waitall");
    expect_stale_req(qcopy[1], "isend waited on by cadre_waitall");
    int32_t v[7];
    for (int i = 0; i < 7; i++)
        v[i] = me == np - 1 ? 1000 + i : -1;
    OK(cadre_ibcast(v, 7, CADRE_INT32, np - 1, W, &r));
    copy = r;
    OK(cadre_wait(&r, NULL));
    for (int i = 0; i < 7; i++)
        EXPECT(v[i] == 1000 + i, "ibcast v[%d] = %d", i, (int)v[i]);
    expect_stale_req(copy, "ibcast waited on");

    /* Many generations: every old handle stays refused, and no two are
     * equal, however the memory is reused. */
    enum { GENS = 300 };
    cadre_request_t *old = malloc(GENS * sizeof *old);
    for (int i = 0; i < GENS; i++)
        old[i] = self_roundtrip(20, 100 + (uint64_t)i);
    for (int i = 0; i < GENS; i++) {
        for (int j = 0; j < i; j++)
            EXPECT(old[i] != old[j], "generations %d and %d have one handle", j, i);
        cadre_request_t h = old[i];
        done = -5;
        rc = cadre_test(&h, &done, NULL);
        EXPECT(rc == CADRE_ERR_STATE && done == -5, "old handle %d: cadre_test -> %s", i,
               cadre_error_string(rc));
    }
    free(old);

    /* Windows wider than the library's per-thread cache of requests (whose
     * memory then goes back to the allocator, and whose handle slots are
     * reused by the next window): every handle of a window differs from
     * every handle of the one before, which stays refused, and the data of
     * each message is right. */
    enum { WIN = 200 };
    cadre_request_t *win = malloc(2 * WIN * sizeof *win), *prev_win = win + WIN;
    unsigned char *wb = malloc((size_t)WIN * 8), *ws = malloc((size_t)WIN * 8);
    for (int round = 0; round < 3; round++) {
        memset(wb, 0, (size_t)WIN * 8);
        for (int i = 0; i < WIN; i++)
            OK(cadre_irecv(wb + 8 * i, 8, CADRE_UINT8, me, 1000 + i, W, &win[i]));
        for (int i = 0; i < WIN && round > 0; i++)
            for (int j = 0; j < WIN; j++)
                EXPECT(win[i] != prev_win[j], "round %d: request %d has the handle of %d of the "
                       "round before", round, i, j);
        cadre_request_t *keep = malloc(WIN * sizeof *keep);
        memcpy(keep, win, WIN * sizeof *keep);
        for (int i = 0; i < WIN; i++) {
            ru_fill(ws + 8 * i, 8, me, me, 500 + (uint64_t)(round * WIN + i));
            OK(cadre_send(ws + 8 * i, 8, CADRE_UINT8, me, 1000 + i, W));
        }
        OK(cadre_waitall(WIN, win, NULL));
        for (int i = 0; i < WIN; i++) {
            EXPECT(ru_check(wb + 8 * i, 8, me, me, 500 + (uint64_t)(round * WIN + i)) == 8,
                   "round %d: message %d wrong", round, i);
            cadre_request_t h = keep[i];
            done = -5;
            rc = cadre_test(&h, &done, NULL);
            EXPECT(rc == CADRE_ERR_STATE && done == -5, "round %d: old handle %d: cadre_test -> %s",
                   round, i, cadre_error_string(rc));
        }
        memcpy(prev_win, keep, WIN * sizeof *keep);
        free(keep);
    }
    free(win);
    free(wb);
    free(ws);
}

/* Every function that takes a communicator, on a bad one: want and a
 * message naming the function, the argument and `text`; nothing written. */
static void expect_bad_comm(cadre_comm_t bad, int want, const char *text, const char *what)
{
    int x = -5;
    int32_t buf[4] = {1, 2, 3, 4};
    cadre_comm_t out = (cadre_comm_t)(uintptr_t)0x77;
    cadre_request_t r = CADRE_REQUEST_NULL;
    void *stream = (void *)0x99;
    int ranks[1] = {0};
    const char *fn = "";
    for (int k = 0; k < 19; k++) {
        int rc = CADRE_SUCCESS;
        switch (k) {
        case 0: fn = "cadre_comm_rank"; rc = cadre_comm_rank(bad, &x); break;
        case 1: fn = "cadre_comm_size"; rc = cadre_comm_size(bad, &x); break;
        case 2: fn = "cadre_barrier"; rc = cadre_barrier(bad); break;
        case 3: fn = "cadre_bcast"; rc = cadre_bcast(buf, 4, CADRE_INT32, 0, bad); break;
        case 4: fn = "cadre_send"; rc = cadre_send(buf, 1, CADRE_INT32, 0, 0, bad); break;
        case 5: fn = "cadre_recv"; rc = cadre_recv(buf, 1, CADRE_INT32, 0, 0, bad, NULL); break;
        case 6: fn = "cadre_isend"; rc = cadre_isend(buf, 1, CADRE_INT32, 0, 0, bad, &r); break;
        case 7: fn = "cadre_irecv"; rc = cadre_irecv(buf, 1, CADRE_INT32, 0, 0, bad, &r); break;
        case 8: fn = "cadre_comm_dup"; rc = cadre_comm_dup(bad, &out); break;
        case 9: fn = "cadre_comm_split"; rc = cadre_comm_split(bad, 0, 0, &out); break;
        case 10: fn = "cadre_comm_create"; rc = cadre_comm_create(bad, 1, ranks, &out); break;
        case 11: fn = "cadre_comm_world_rank"; rc = cadre_comm_world_rank(bad, 0, &x); break;
        case 12: fn = "cadre_allreduce";
            rc = cadre_allreduce(buf, buf + 2, 2, CADRE_INT32, CADRE_SUM, bad);
            break;
        case 13: fn = "cadre_ibarrier"; rc = cadre_ibarrier(bad, &r); break;
        case 14: fn = "cadre_comm_get_stream"; rc = cadre_comm_get_stream(bad, &stream); break;
        case 15: fn = "cadre_comm_set_stream"; rc = cadre_comm_set_stream(bad, NULL); break;
        case 16: fn = "cadre_sendrecv";
            rc = cadre_sendrecv(buf, 1, 0, 0, buf + 1, 1, 0, 0, CADRE_INT32, bad, NULL);
            break;
        case 17: {
            fn = "cadre_comm_free";
            cadre_comm_t c = bad;
            rc = cadre_comm_free(&c);
            EXPECT(c == bad, "%s: cadre_comm_free changed the handle", what);
            break;
        }
        case 18: fn = "cadre_abort"; rc = cadre_abort(bad, 3); break;
        }
        EXPECT(rc == want, "%s: %s -> %s, expected %s", what, fn, cadre_error_string(rc),
               cadre_error_string(want));
        const char *m = cadre_last_error();
        EXPECT(strstr(m, fn) && strstr(m, ": comm ") && strstr(m, text),
               "%s: %s: message \"%s\" lacks the function, \"comm\" or \"%s\"", what, fn, m,
               text);
    }
    EXPECT(x == -5 && out == (cadre_comm_t)(uintptr_t)0x77 && r == CADRE_REQUEST_NULL &&
               stream == (void *)0x99 && buf[0] == 1 && buf[1] == 2 && buf[2] == 3 && buf[3] == 4,
           "%s: an output was written on failure", what);
}

static void world_still_works(const char *after, uint64_t seq)
{
    /* A collective and a ring exchange, every element checked. */
    enum { M = 1001 };
    int64_t *a = malloc(M * sizeof *a), *s = malloc(M * sizeof *s);
    for (int i = 0; i < M; i++)
        a[i] = (int64_t)me * 1000003 + i + (int64_t)seq;
    OK(cadre_allreduce(a, s, M, CADRE_INT64, CADRE_SUM, W));
    int64_t ranks = (int64_t)np * (np - 1) / 2;
    for (int i = 0; i < M; i++) {
        int64_t want = ranks * 1000003 + (int64_t)np * (i + (int64_t)seq);
        if (s[i] != want) {
            EXPECT(s[i] == want, "after %s: allreduce [%d] = %lld, expected %lld", after, i,
                   (long long)s[i], (long long)want);
            break;
        }
    }
    free(a);
    free(s);
    int next = (me + 1) % np, prev = (me + np - 1) % np;
    unsigned char in[N], out[N];
    ru_fill(out, N, me, next, seq);
    memset(in, 0, N);
    OK(cadre_sendrecv(out, N, next, 3, in, N, prev, 3, CADRE_UINT8, W, NULL));
    EXPECT(ru_check(in, N, prev, me, seq) == N, "after %s: ring data wrong", after);
}

static void freed_comms(void)
{
    /* Enough communicators that their memory goes past the allocator's
     * per-thread caches (glibc's calloc takes a freed block back from the
     * fast bins, not from its tcache): with pointers for handles, a new
     * communicator then had a freed one's address. */
    enum { OLD = 12, NEW = 12 };
    cadre_comm_t d[OLD], stale[OLD], d2[NEW];
    for (int k = 0; k < OLD; k++) {
        d[k] = CADRE_COMM_NULL;
        OK(cadre_comm_dup(W, &d[k]));
        stale[k] = d[k];
    }
    for (int k = 0; k < OLD; k++) {
        OK(cadre_comm_free(&d[k]));
        EXPECT(d[k] == CADRE_COMM_NULL, "cadre_comm_free did not clear the handle");
    }
    for (int k = 0; k < NEW; k++) {
        d2[k] = CADRE_COMM_NULL;
        OK(cadre_comm_dup(W, &d2[k]));
        for (int j = 0; j < OLD; j++)
            EXPECT(d2[k] != stale[j], "new communicator %d got the handle of freed one %d", k, j);
    }
    for (int j = 0; j < OLD; j++)
        expect_bad_comm(stale[j], CADRE_ERR_STATE, "stale handle (communicator already freed)",
                        "freed communicator");
    /* The new ones are untouched and work. */
    for (int k = 0; k < NEW; k++) {
        int x = -1;
        OK(cadre_comm_rank(d2[k], &x));
        EXPECT(x == me, "rank in new communicator %d: %d", k, x);
        int32_t v[5];
        for (int i = 0; i < 5; i++)
            v[i] = me == k % np ? 7 * i + k : 0;
        OK(cadre_bcast(v, 5, CADRE_INT32, k % np, d2[k]));
        for (int i = 0; i < 5; i++)
            EXPECT(v[i] == 7 * i + k, "bcast on new communicator %d: v[%d] = %d", k, i, (int)v[i]);
        OK(cadre_comm_free(&d2[k]));
    }
    expect_bad_comm(stale[0], CADRE_ERR_STATE, "stale handle", "freed communicator, again");
    world_still_works("freed communicators", 41);
}

static void garbage(void)
{
    /* Random bytes in a heap block and on the stack (seeded per rank). */
    unsigned char *heap = malloc(512);
    unsigned char stack[512];
    srand(12345u + (unsigned)me);
    for (int i = 0; i < 512; i++) {
        heap[i] = (unsigned char)rand();
        stack[i] = (unsigned char)rand();
    }
    /* A live request, whose handle is no communicator, and a live
     * communicator, whose handle is no request. */
    int32_t pin = -1, pout = 4242;
    cadre_request_t live = CADRE_REQUEST_NULL;
    OK(cadre_irecv(&pin, 1, CADRE_INT32, me, 30, W, &live));
    cadre_comm_t dup = CADRE_COMM_NULL;
    OK(cadre_comm_dup(W, &dup));

    cadre_comm_t bad_comms[] = {(cadre_comm_t)(uintptr_t)0x1234, (cadre_comm_t)(intptr_t)-1,
                                (cadre_comm_t)(void *)heap, (cadre_comm_t)(void *)stack,
                                (cadre_comm_t)(void *)(stack + 5), (cadre_comm_t)(void *)live};
    const char *comm_names[] = {"0x1234", "(void *)-1", "a heap block", "a stack address",
                                "an odd stack address", "a request handle"};
    for (int i = 0; i < 6; i++)
        expect_bad_comm(bad_comms[i], CADRE_ERR_ARG, "is not a communicator handle",
                        comm_names[i]);

    cadre_request_t bad_reqs[] = {(cadre_request_t)(uintptr_t)0x1234, (cadre_request_t)(intptr_t)-1,
                                  (cadre_request_t)(void *)heap, (cadre_request_t)(void *)stack,
                                  (cadre_request_t)(void *)(stack + 11),
                                  (cadre_request_t)(void *)dup,
                                  (cadre_request_t)(void *)W};
    const char *req_names[] = {"0x1234", "(void *)-1", "a heap block", "a stack address",
                               "an odd stack address", "a communicator handle",
                               "CADRE_COMM_WORLD"};
    for (int i = 0; i < 7; i++) {
        cadre_request_t h = bad_reqs[i];
        cadre_status_t st = {.source = -77};
        int done = -5;
        int rc = cadre_wait(&h, &st);
        EXPECT(rc == CADRE_ERR_ARG && strstr(cadre_last_error(), "cadre_wait: req ") &&
                   strstr(cadre_last_error(), "is not a request handle"),
               "%s: cadre_wait -> %s \"%s\"", req_names[i], cadre_error_string(rc),
               cadre_last_error());
        rc = cadre_test(&h, &done, &st);
        EXPECT(rc == CADRE_ERR_ARG && strstr(cadre_last_error(), "cadre_test: req ") &&
                   strstr(cadre_last_error(), "is not a request handle"),
               "%s: cadre_test -> %s \"%s\"", req_names[i], cadre_error_string(rc),
               cadre_last_error());
        rc = cadre_wait_timeout(&h, 0.01, &st);
        EXPECT(rc == CADRE_ERR_ARG && strstr(cadre_last_error(), "cadre_wait_timeout: req ") &&
                   strstr(cadre_last_error(), "is not a request handle"),
               "%s: cadre_wait_timeout -> %s \"%s\"", req_names[i], cadre_error_string(rc),
               cadre_last_error());
        /* The bad one between a NULL and the live receive: nothing is waited on. */
        cadre_request_t three[3] = {CADRE_REQUEST_NULL, h, live};
        rc = cadre_waitall(3, three, NULL);
        EXPECT(rc == CADRE_ERR_ARG && strstr(cadre_last_error(), "cadre_waitall: reqs[1] ") &&
                   strstr(cadre_last_error(), "is not a request handle"),
               "%s: cadre_waitall -> %s \"%s\"", req_names[i], cadre_error_string(rc),
               cadre_last_error());
        EXPECT(h == bad_reqs[i] && three[1] == h && three[2] == live && done == -5 &&
                   st.source == -77,
               "%s: an output was written on failure", req_names[i]);
    }
    /* The live receive and communicator were never disturbed. */
    int done = 0;
    OK(cadre_test(&live, &done, NULL));
    EXPECT(!done && pin == -1, "the live receive completed without a message");
    OK(cadre_send(&pout, 1, CADRE_INT32, me, 30, W));
    OK(cadre_wait(&live, NULL));
    EXPECT(pin == 4242, "the live receive got %d", (int)pin);
    int x = -1;
    OK(cadre_comm_size(dup, &x));
    EXPECT(x == np, "size of the dup %d", x);
    OK(cadre_barrier(dup));
    OK(cadre_comm_free(&dup));
    free(heap);
    world_still_works("garbage handles", 57);
}

static int wanted(const char *name)
{
    const char *only = getenv("HANDLE_TESTS");
    if (!only || !*only)
        return 1;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", only);
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ","))
        if (strstr(name, t))
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    if (cadre_init(&argc, &argv) != CADRE_SUCCESS) {
        fprintf(stderr, "handle_test: cadre_init: %s\n", cadre_last_error());
        return 1;
    }
    cadre_comm_rank(W, &me);
    cadre_comm_size(W, &np);
    ru_rank = me;
    if (wanted("stale_requests"))
        stale_requests();
    if (wanted("freed_comms"))
        freed_comms();
    if (wanted("garbage"))
        garbage();
    world_still_works("the tests", 99);
    int total = 0;
    OK(cadre_allreduce(&ru_failures, &total, 1, CADRE_INT32, CADRE_SUM, W));
    cadre_finalize();
    if (me == 0)
        printf("handle_test: %d ranks, %d failures\n", np, total);
    return ru_failures ? 1 : 0;
}
