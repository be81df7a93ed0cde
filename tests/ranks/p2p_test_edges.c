/* p2p_test's cases at the edges (main is in p2p_test.c): blocking receives
 * that must let other messages or receives go first, threads that make
 * requests and end, progress in the background, wait_timeout and
 * CADRE_TIMEOUT, and bad arguments to every point-to-point call. Calls only
 * cadre.h and rank_util.h (through p2p_test.h). */
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "p2p_test.h"

/* Blocking receives whose message is already there, among others that must
 * take precedence. A blocking receive reads the next message of a
 * shared-memory peer straight into its buffer when nothing else may take it
 * first; each step below puts in front of it one thing that must: a message
 * of another tag or communicator first in line, a queued message that
 * matches, a receive posted earlier, a message too long. Every rank sends
 * to the next and receives from the previous one; `arrived` lets the
 * previous rank's messages land first. */
static int bo_next, bo_prev;
static void bo_send(int v, int tag, int words, cadre_comm_t c)
{
    uint32_t out[32];
    for (int k = 0; k < 32; k++)
        out[k] = (uint32_t)(me << 20 | v << 8 | k);
    OK(cadre_send(out, (size_t)words, CADRE_UINT32, bo_next, tag, c));
}
static void bo_check(int v, const uint32_t *in, const cadre_status_t *st, int tag, int words, int err)
{
    EXPECT(st->source == bo_prev && st->tag == tag && st->count == (size_t)words && st->error == err,
           "message %d: status %d/%d/%zu/%d, expected %d/%d/%d/%d", v, st->source, st->tag,
           st->count, st->error, bo_prev, tag, words, err);
    for (int k = 0; k < 32; k++) {
        uint32_t want = k < words ? (uint32_t)(bo_prev << 20 | v << 8 | k) : 0xEEEEEEEEu;
        if (in[k] != want) {
            EXPECT(0, "message %d word %d: %#x, expected %#x", v, k, in[k], want);
            break;
        }
    }
}
static void bo_recv(int v, int tag, int want_tag, int words, cadre_comm_t c)
{
    uint32_t in[32];
    cadre_status_t st;
    memset(in, 0xEE, sizeof in);
    OK(cadre_recv(in, 32, CADRE_UINT32, bo_prev, tag, c, &st));
    bo_check(v, in, &st, want_tag, words, 0);
}
static void arrived(void)
{
    usleep(20000);
}
/* Tells the previous rank that what it sent so far is taken in; waits for the next's word. */
static void bo_handshake(void)
{
    char c = 0;
    OK(cadre_send(&c, 1, CADRE_UINT8, bo_prev, 99, W));
    OK(cadre_recv(&c, 1, CADRE_UINT8, bo_next, 99, W, CADRE_STATUS_IGNORE));
}

void test_blocking_order(void)
{
    if (np < 2)
        return;
    bo_next = (me + 1) % np, bo_prev = (me + np - 1) % np;
    cadre_comm_t d;
    OK(cadre_comm_dup(W, &d));
    /* Another communicator's message first in line, then another tag's. */
    bo_send(0, 1, 10, d);
    bo_send(1, 1, 25, W);
    arrived();
    bo_recv(1, 1, 1, 25, W);
    bo_recv(0, 1, 1, 10, d);
    bo_handshake();
    bo_send(2, 2, 3, W);
    bo_send(3, 1, 2, W);
    arrived();
    bo_recv(3, 1, 1, 2, W);
    bo_handshake();
    /* Message 2 waits in the queue: it goes before 8, which is first in line. */
    bo_send(8, 2, 5, W);
    arrived();
    bo_recv(2, 2, 2, 3, W);
    bo_recv(8, CADRE_ANY_TAG, 2, 5, W);
    bo_handshake();
    /* A receive posted before takes the first message. */
    bo_send(4, 5, 1, W);
    bo_send(5, 5, 4, W);
    arrived();
    uint32_t early[32];
    memset(early, 0xEE, sizeof early);
    cadre_request_t r;
    cadre_status_t st;
    OK(cadre_irecv(early, 32, CADRE_UINT32, bo_prev, 5, W, &r));
    bo_recv(5, 5, 5, 4, W);
    OK(cadre_wait(&r, &st));
    bo_check(4, early, &st, 5, 1, 0);
    bo_handshake();
    /* Too long for the buffer; then an empty one. */
    bo_send(6, 7, 20, W);
    bo_send(7, 8, 0, W);
    arrived();
    uint32_t in[32];
    memset(in, 0xEE, sizeof in);
    FAILS(cadre_recv(in, 8, CADRE_UINT32, bo_prev, 7, W, &st), CADRE_ERR_TRUNCATE,
          "is longer than the receive buffer");
    bo_check(6, in, &st, 7, 8, CADRE_ERR_TRUNCATE);
    bo_recv(7, 8, 8, 0, W);
    OK(cadre_comm_free(&d));
}

/* Threads that make requests and end: each sends messages to its own rank
 * (a receive posted, then the send) and checks them. A thread keeps freed
 * requests for reuse; they are freed when it ends (a sanitizer build's leak
 * check sees the ones that are not). */
enum { TH_N = 4, TH_MSGS = 300 };
static int th_bad[TH_N];
static void *th_main(void *arg)
{
    int t = (int)(intptr_t)arg;
    for (int k = 0; k < TH_MSGS; k++) {
        int out[3] = {me, t, k}, in[3] = {-1, -1, -1};
        cadre_request_t r[2];
        if (cadre_irecv(in, 3, CADRE_INT32, me, 500 + t, W, &r[0]) != CADRE_SUCCESS ||
            cadre_isend(out, 3, CADRE_INT32, me, 500 + t, W, &r[1]) != CADRE_SUCCESS ||
            cadre_waitall(2, r, NULL) != CADRE_SUCCESS || memcmp(in, out, sizeof in)) {
            th_bad[t] = k + 1;
            break;
        }
    }
    return NULL;
}

void test_threads(void)
{
    pthread_t th[TH_N];
    for (int t = 0; t < TH_N; t++)
        EXPECT(pthread_create(&th[t], NULL, th_main, (void *)(intptr_t)t) == 0, "pthread_create");
    for (int t = 0; t < TH_N; t++) {
        pthread_join(th[t], NULL);
        EXPECT(th_bad[t] == 0, "thread %d: message %d wrong or failed: %s", t, th_bad[t] - 1,
               cadre_last_error());
    }
}

/* A receive posted before 200 ms of computation with no cadre calls is
 * complete when the computation ends: the progress thread moved it. The
 * receiver proves it without timing the wait: it watches its own buffer,
 * making no cadre call, until every byte has landed (only the progress
 * thread can have put them there). */
void test_background(void)
{
    if (np < 2 || me > 1)
        return;
    size_t n = 32u << 20;
    unsigned char *b = malloc(n);
    cadre_request_t r;
    if (me == 0)
        ru_fill(b, n, 0, 1, 60);
    else
        memset(b, 0, n);
    if (me == 0)
        OK(cadre_isend(b, n, CADRE_UINT8, 1, 60, W, &r));
    else
        OK(cadre_irecv(b, n, CADRE_UINT8, 0, 60, W, &r));
    double t0 = ru_now();
    volatile double x = 1;
    while (ru_now() - t0 < 0.2)
        x = x * 1.0000001 + 1e-9;
    if (me == 1) {
        int landed = 0;
        double t1 = ru_now();
        while (!landed && ru_now() - t1 < 3.0) {
            landed = ru_check(b, n, 0, 1, 60) == n;
            if (!landed)
                usleep(5000);
        }
        EXPECT(landed, "the data did not arrive without cadre calls (%.2f s after 200 ms of "
                       "computation): no background progress",
               ru_now() - t1);
    }
    double t2 = ru_now();
    OK(cadre_wait(&r, NULL));
    /* Only the receiver knows the data is there: the sender's wait also
     * covers the rest of the transfer, which under load may take seconds. */
    if (me == 1)
        EXPECT(ru_now() - t2 < 1.0, "wait took %.3f s once the data was there", ru_now() - t2);
    if (me == 1)
        EXPECT(ru_check(b, n, 0, 1, 60) == n, "background transfer data");
    free(b);
}

void test_wait_timeout(void)
{
    if (np < 2 || me > 1)
        return;
    int x = 0;
    if (me == 1) {
        cadre_request_t r;
        OK(cadre_irecv(&x, 1, CADRE_INT32, 0, 70, W, &r));
        double t0 = ru_now();
        FAILS(cadre_wait_timeout(&r, 0.1, NULL), CADRE_ERR_TIMEOUT, "not complete");
        double t = ru_now() - t0;
        EXPECT(t >= 0.09 && t < 2, "wait_timeout(0.1) took %.3f s", t);
        EXPECT(r != CADRE_REQUEST_NULL, "request must stay valid after a timeout");
        int go = 1, done = 1;
        OK(cadre_test(&r, &done, NULL));
        EXPECT(done == 0, "test before the message");
        OK(cadre_send(&go, 1, CADRE_INT32, 0, 71, W));
        OK(cadre_wait_timeout(&r, 30, NULL));
        EXPECT(x == 99 && r == CADRE_REQUEST_NULL, "message after timeout: %d", x);
    } else {
        int go;
        OK(cadre_recv(&go, 1, CADRE_INT32, 1, 71, W, CADRE_STATUS_IGNORE));
        x = 99;
        OK(cadre_send(&x, 1, CADRE_INT32, 1, 70, W));
    }
}

/* With a small CADRE_TIMEOUT, a receive nobody answers fails with a diagnosis. */
void test_no_progress_timeout(void)
{
    const char *t = getenv("CADRE_TIMEOUT");
    if (!t || atof(t) > 5 || np < 2)
        return;
    if (me == 0) {
        int x;
        double t0 = ru_now();
        FAILS(cadre_recv(&x, 1, CADRE_INT32, 1, 777, W, CADRE_STATUS_IGNORE), CADRE_ERR_TIMEOUT,
              "made no progress");
        double el = ru_now() - t0;
        EXPECT(el >= atof(t) * 0.9 && el < atof(t) + 3, "timed out after %.2f s", el);
        EXPECT(strstr(cadre_last_error(), "from rank 1") != NULL, "diagnosis: %s",
               cadre_last_error());
    } else {
        /* Busy outside cadre meanwhile: a wait of ours would time out too. */
        usleep((useconds_t)((atof(t) + 0.5) * 1e6));
    }
}

void test_bad_input(void)
{
    int x = 0;
    cadre_request_t r = CADRE_REQUEST_NULL;
    cadre_status_t st;
    char garbage[256];
    memset(garbage, 0x5A, sizeof garbage);
    cadre_comm_t bad = (cadre_comm_t)(void *)garbage;
    const char *fns[] = {"cadre_send", "cadre_recv", "cadre_isend", "cadre_irecv", "cadre_sendrecv"};
    for (int f = 0; f < 5; f++) {
        for (int kind = 0; kind < 8; kind++) {
            const void *buf = &x;
            size_t count = 1;
            cadre_datatype_t dt = CADRE_INT32;
            int peer = 0, tag = 0;
            cadre_comm_t comm = W;
            int want = CADRE_ERR_ARG;
            const char *text = "";
            switch (kind) {
            case 0: buf = NULL; text = "NULL"; break;
            case 1: peer = np; text = "out of range"; break;
            case 2: peer = -5; text = "out of range"; break;
            case 3: tag = -3; text = "negative"; break;
            case 4: dt = (cadre_datatype_t)77; text = "datatype"; break;
            case 5: comm = CADRE_COMM_NULL; want = CADRE_ERR_STATE; text = "CADRE_COMM_NULL"; break;
            case 6: comm = bad; text = "not a communicator"; break;
            case 7: count = SIZE_MAX / 2; text = "overflow"; break;
            }
            int rc;
            switch (f) {
            case 0: rc = cadre_send(buf, count, dt, peer, tag, comm); break;
            case 1: rc = cadre_recv((void *)buf, count, dt, peer, tag, comm, &st); break;
            case 2: rc = cadre_isend(buf, count, dt, peer, tag, comm, &r); break;
            case 3: rc = cadre_irecv((void *)buf, count, dt, peer, tag, comm, &r); break;
            default:
                rc = cadre_sendrecv(buf, count, peer, tag, (void *)buf, count, peer, tag, dt, comm, &st);
            }
            EXPECT(rc == want, "%s with bad argument #%d returned %s", fns[f], kind,
                   cadre_error_string(rc));
            EXPECT(strstr(cadre_last_error(), fns[f]) && strstr(cadre_last_error(), text),
                   "%s bad argument #%d: message \"%s\" lacks \"%s\"", fns[f], kind,
                   cadre_last_error(), text);
            EXPECT(r == CADRE_REQUEST_NULL, "%s wrote a request on failure", fns[f]);
        }
    }
    FAILS(cadre_send(&x, 1, CADRE_INT32, np + 4, 0, W), CADRE_ERR_ARG, "dst");
    FAILS(cadre_recv(&x, 1, CADRE_INT32, 0, -7, W, &st), CADRE_ERR_ARG, "tag -7");
    FAILS(cadre_isend(&x, 1, CADRE_INT32, 0, 0, W, NULL), CADRE_ERR_ARG, "req is NULL");
    FAILS(cadre_irecv(&x, 1, CADRE_INT32, 0, 0, W, NULL), CADRE_ERR_ARG, "req is NULL");
    FAILS(cadre_wait(NULL, &st), CADRE_ERR_ARG, "req is NULL");
    FAILS(cadre_test(NULL, &x, &st), CADRE_ERR_ARG, "req is NULL");
    FAILS(cadre_test(&r, NULL, &st), CADRE_ERR_ARG, "done is NULL");
    FAILS(cadre_wait_timeout(NULL, 1, &st), CADRE_ERR_ARG, "req is NULL");
    FAILS(cadre_wait_timeout(&r, -1, &st), CADRE_ERR_ARG, "negative");
    FAILS(cadre_waitall(-1, &r, NULL), CADRE_ERR_ARG, "negative");
    FAILS(cadre_waitall(2, NULL, NULL), CADRE_ERR_ARG, "reqs is NULL");
    cadre_request_t fake = (cadre_request_t)(void *)garbage;
    FAILS(cadre_wait(&fake, &st), CADRE_ERR_ARG, "not a request");
    FAILS(cadre_test(&fake, &x, &st), CADRE_ERR_ARG, "not a request");
    FAILS(cadre_waitall(1, &fake, NULL), CADRE_ERR_ARG, "not a request");
    /* A NULL request completes at once with an empty status. */
    r = CADRE_REQUEST_NULL;
    OK(cadre_wait(&r, &st));
    EXPECT(st.source == CADRE_ANY_SOURCE, "empty status");
    int done = 0;
    OK(cadre_test(&r, &done, NULL));
    EXPECT(done == 1, "test of a NULL request");
    OK(cadre_waitall(0, NULL, NULL));
    /* ANY_SOURCE/ANY_TAG are valid for receives only. */
    FAILS(cadre_send(&x, 1, CADRE_INT32, CADRE_ANY_SOURCE, 0, W), CADRE_ERR_ARG, "out of range");
    FAILS(cadre_send(&x, 1, CADRE_INT32, 0, CADRE_ANY_TAG, W), CADRE_ERR_ARG, "negative");
    /* Zero-count messages with NULL buffers are fine. */
    if (np >= 1) {
        cadre_request_t rr;
        OK(cadre_irecv(NULL, 0, CADRE_INT32, me, 90, W, &rr));
        OK(cadre_send(NULL, 0, CADRE_INT32, me, 90, W));
        OK(cadre_wait(&rr, &st));
        EXPECT(st.count == 0 && st.tag == 90, "zero-byte message");
    }
}

/* Small messages of every size around the shared-memory transport's lanes
 * (a plain message of at most 8 bytes takes the tiny lane, a larger one or
 * one that finds the tiny lane full the eager lane; the receiver merges them
 * by sequence number), many laps of each: receives posted before the sends,
 * after them (the lanes fill and the rest queue), and blocking receives (the
 * direct path's peek and take). Every message is checked: its size, tag and
 * bytes, and that it came in order. */
void test_small_lanes(void)
{
    static const size_t sizes[] = {0, 1, 2, 7, 8, 9, 15, 16, 17, 64, 4095, 4096};
    enum { M = 1200, NS = sizeof sizes / sizeof sizes[0], MAXB = 4096 };
    int next = (me + 1) % np, prev = (me + np - 1) % np;
    unsigned char *out = malloc((size_t)M * MAXB), *in = malloc((size_t)M * MAXB);
    cadre_request_t *sreq = calloc(M, sizeof *sreq), *rreq = calloc(M, sizeof *rreq);
    cadre_status_t *st = calloc(M, sizeof *st);
    for (int i = 0; i < M; i++)
        ru_fill(out + (size_t)i * MAXB, sizes[i % NS], me, next, (uint64_t)i);
    for (int phase = 0; phase < 3; phase++) {
        memset(in, 0xEE, (size_t)M * MAXB);
        if (phase == 0)
            for (int i = 0; i < M; i++)
                OK(cadre_irecv(in + (size_t)i * MAXB, MAXB, CADRE_UINT8, prev, CADRE_ANY_TAG, W,
                               &rreq[i]));
        OK(cadre_barrier(W));
        for (int i = 0; i < M; i++)
            OK(cadre_isend(out + (size_t)i * MAXB, sizes[i % NS], CADRE_UINT8, next, i % 7, W,
                           &sreq[i]));
        if (phase == 1) {
            OK(cadre_barrier(W)); /* the messages wait in the lanes and the queue */
            for (int i = 0; i < M; i++)
                OK(cadre_irecv(in + (size_t)i * MAXB, MAXB, CADRE_UINT8, prev, CADRE_ANY_TAG, W,
                               &rreq[i]));
        }
        if (phase == 2) {
            for (int i = 0; i < M; i++)
                OK(cadre_recv(in + (size_t)i * MAXB, MAXB, CADRE_UINT8, prev, CADRE_ANY_TAG, W,
                              &st[i]));
        } else {
            OK(cadre_waitall(M, rreq, st));
        }
        OK(cadre_waitall(M, sreq, NULL));
        int bad = 0;
        for (int i = 0; i < M && bad < 5; i++) {
            size_t n = sizes[i % NS];
            size_t b = ru_check(in + (size_t)i * MAXB, n, prev, me, (uint64_t)i);
            if (st[i].count != n || st[i].tag != i % 7 || st[i].source != prev || b != n ||
                (n < MAXB && in[(size_t)i * MAXB + n] != 0xEE)) {
                bad++;
                EXPECT(0, "phase %d message %d: %zu bytes, tag %d from %d (want %zu, %d, %d), "
                       "first wrong byte %zu",
                       phase, i, st[i].count, st[i].tag, st[i].source, n, i % 7, prev, b);
            }
        }
    }
    free(out);
    free(in);
    free(sreq);
    free(rreq);
    free(st);
}
