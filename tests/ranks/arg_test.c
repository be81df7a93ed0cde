/* Argument checks that must hold before any communication: overlapping send
 * and receive buffers (sendrecv and every collective, blocking and
 * nonblocking), CADRE_IN_PLACE as any point-to-point buffer, counts that no
 * address space holds, and the wording of the datatype and truncation
 * messages. Every rank passes the same bad
 * arguments (or, in rooted calls, the root alone, where only the root's
 * buffers are looked at), so every rank that fails has failed before
 * sending anything; then a correct call must work, checked element by
 * element.
 *
 * ARG_TESTS picks sections by name: messages, sendrecv, in_place, collectives, vlayout, huge. */
#include "rank_util.h"

#define W CADRE_COMM_WORLD
static int me, np;

static int32_t val(int rank, int salt, size_t i)
{
    return (int32_t)(rank * 1000003 + salt * 7919 + (int)(i % 100000) * 3);
}

static void fill(int32_t *b, size_t n, int rank, int salt)
{
    for (size_t i = 0; i < n; i++)
        b[i] = val(rank, salt, i);
}

/* Index of the first element of b[0..n) that is not val(rank, salt, first + i), or n. */
static size_t bad_at(const int32_t *b, size_t n, int rank, int salt, size_t first)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != val(rank, salt, first + i))
            return i;
    return n;
}

/* A collective's outcome: blocking, or nonblocking and waited for. */
static int done(int rc, int nb, cadre_request_t *r)
{
    if (rc == CADRE_SUCCESS && nb)
        rc = cadre_wait(r, CADRE_STATUS_IGNORE);
    return rc;
}
#define COLL(blocking, nonblocking) done(nb ? (nonblocking) : (blocking), nb, &req)

/* CADRE_ERR_ARG whose message names both buffers and the overlap. */
#define OVERLAPS(call, fn)                                                                  \
    do {                                                                                    \
        int rc_ = (call);                                                                   \
        const char *m_ = cadre_last_error();                                                \
        EXPECT(rc_ == CADRE_ERR_ARG, "%s (nb %d): %s, expected CADRE_ERR_ARG", #call, nb,  \
               cadre_error_string(rc_));                                                    \
        EXPECT(strstr(m_, fn) && strstr(m_, "sendbuf [") && strstr(m_, "recvbuf [") &&     \
                   strstr(m_, "overlap"),                                                   \
               "%s: message \"%s\" does not name both buffers", #call, m_);                 \
    } while (0)

/* After an error: the communicator still works. */
static void still_works(const char *after)
{
    int32_t x[3] = {me, 2 * me, -me}, y[3] = {0, 0, 0};
    int rc = cadre_allreduce(x, y, 3, CADRE_INT32, CADRE_SUM, W);
    int32_t s = np * (np - 1) / 2;
    EXPECT(rc == CADRE_SUCCESS && y[0] == s && y[1] == 2 * s && y[2] == -s,
           "allreduce after %s: %s, got %d %d %d", after, cadre_error_string(rc), y[0], y[1], y[2]);
}

/* ---- messages --------------------------------------------------------------------- */
static void test_messages(void)
{
    int32_t x = 1, y = 0;
    FAILS(cadre_allreduce(&x, &y, 1, CADRE_INT32, CADRE_AVG, W), CADRE_ERR_ARG, "CADRE_INT32");
    FAILS(cadre_reduce(&x, &y, 1, CADRE_UINT8, CADRE_AVG, 0, W), CADRE_ERR_ARG, "CADRE_UINT8");
    FAILS(cadre_reduce_scatter(&x, &y, 1, CADRE_INT64, CADRE_AVG, W), CADRE_ERR_ARG,
          "CADRE_INT64");
    FAILS(cadre_allreduce(&x, &y, 1, (cadre_datatype_t)77, CADRE_SUM, W), CADRE_ERR_ARG,
          "unknown datatype 77");
    FAILS(cadre_allreduce(&x, &y, 1, CADRE_INT32, (cadre_op_t)9, W), CADRE_ERR_ARG, "unknown op 9");
    still_works("datatype errors");

    /* A message of 1000 int32 into a buffer of 10, from rank 1 (or itself). */
    int from = np > 1 ? 1 : 0;
    int32_t *big = malloc(1000 * sizeof *big), small[11];
    fill(big, 1000, from, 1);
    cadre_request_t r = CADRE_REQUEST_NULL;
    if (me == from)
        OK(cadre_isend(big, 1000, CADRE_INT32, 0, 7, W, &r));
    if (me == 0) {
        small[10] = -5;
        cadre_status_t st;
        int rc = cadre_recv(small, 10, CADRE_INT32, from, 7, W, &st);
        const char *m = cadre_last_error();
        char want[160];
        snprintf(want, sizeof want, "message of 1000 elements (4000 bytes) from rank %d", from);
        EXPECT(rc == CADRE_ERR_TRUNCATE, "truncating recv: %s", cadre_error_string(rc));
        EXPECT(strstr(m, want) && strstr(m, "tag 7") &&
                   strstr(m, "receive buffer of 10 elements (40 bytes)"),
               "truncation message \"%s\" lacks \"%s\" or the buffer's elements and bytes", m, want);
        EXPECT(bad_at(small, 10, from, 1, 0) == 10 && small[10] == -5, "truncated data");
    }
    if (me == from)
        OK(cadre_wait(&r, CADRE_STATUS_IGNORE));
    free(big);
    still_works("a truncated message");
}

/* ---- sendrecv --------------------------------------------------------------------- */
static void test_sendrecv(void)
{
    int nb = 0; /* for OVERLAPS */
    int right = (me + 1) % np, left = (me + np - 1) % np;
    size_t sizes[] = {1000, 1u << 20};
    for (int k = 0; k < 2; k++) {
        size_t n = sizes[k];
        int32_t *b = malloc((2 * n + 1) * sizeof *b);
        fill(b, 2 * n + 1, me, 10 + k);
        /* The same buffer, then one element apart each way. */
        OVERLAPS(cadre_sendrecv(b, n, right, 3, b, n, left, 3, CADRE_INT32, W, NULL),
                 "cadre_sendrecv");
        OVERLAPS(cadre_sendrecv(b, n, right, 3, b + 1, n, left, 3, CADRE_INT32, W, NULL),
                 "cadre_sendrecv");
        OVERLAPS(cadre_sendrecv(b + 1, n, right, 3, b, n, left, 3, CADRE_INT32, W, NULL),
                 "cadre_sendrecv");
        /* The last element of one is the first of the other. */
        OVERLAPS(cadre_sendrecv(b, n, right, 3, b + n - 1, n, left, 3, CADRE_INT32, W, NULL),
                 "cadre_sendrecv");
        EXPECT(bad_at(b, 2 * n + 1, me, 10 + k, 0) == 2 * n + 1, "a rejected sendrecv wrote");
        still_works("an overlapping sendrecv");
        /* Adjacent halves do not overlap: the data arrives whole. */
        cadre_status_t st;
        OK(cadre_sendrecv(b, n, right, 4, b + n, n, left, 4, CADRE_INT32, W, &st));
        EXPECT(st.count == n && st.source == left, "status count %zu source %d", st.count,
               st.source);
        size_t at = bad_at(b + n, n, left, 10 + k, 0);
        EXPECT(at == n, "adjacent sendrecv of %zu: element %zu wrong", n, at);
        EXPECT(bad_at(b, n, me, 10 + k, 0) == n, "adjacent sendrecv changed its send half");
        /* A count of 0 covers no bytes: no overlap. */
        fill(b, 2 * n + 1, me, 10 + k);
        OK(cadre_sendrecv(b, 0, right, 5, b, n, left, 5, CADRE_INT32, W, &st));
        EXPECT(st.count == 0, "empty message: count %zu", st.count);
        free(b);
    }
}

/* ---- CADRE_IN_PLACE as a message's buffer ----------------------------------------- */
/* CADRE_ERR_ARG naming the call and the argument; a nonblocking call writes
 * no request. */
#define NOT_IN_PLACE(call, fn, arg)                                                         \
    do {                                                                                    \
        cadre_request_t req = CADRE_REQUEST_NULL;                                           \
        int rc_ = (call);                                                                   \
        const char *m_ = cadre_last_error();                                                \
        EXPECT(rc_ == CADRE_ERR_ARG, "%s (count %zu): %s, expected CADRE_ERR_ARG", #call,   \
               n, cadre_error_string(rc_));                                                 \
        EXPECT(strstr(m_, fn ": CADRE_IN_PLACE is not valid for " arg " here"),             \
               "%s (count %zu): message \"%s\" does not name " arg, #call, n, m_);          \
        EXPECT(req == CADRE_REQUEST_NULL, "%s wrote a request", #call);                     \
        if (req)                                                                            \
            cadre_wait(&req, NULL);                                                         \
    } while (0)

/* Every point-to-point call refuses CADRE_IN_PLACE in each buffer position,
 * at counts 0, 1 (eager) and 2^20 (rendezvous), before anything is sent or
 * posted: the exchange on the same tag afterwards gets exactly its own data
 * (a receive posted into the sentinel would take it and write at 0x1; a
 * send from it would read there). */
static void test_in_place(void)
{
    int right = (me + 1) % np, left = (me + np - 1) % np;
    size_t sizes[] = {0, 1, 1u << 20};
    int32_t *b = malloc((1u << 20) * sizeof *b), *o = malloc((1u << 20) * sizeof *o);
    void *ip = CADRE_IN_PLACE;
    for (int k = 0; k < 3; k++) {
        size_t n = sizes[k];
        fill(b, n, me, 90 + k);
        NOT_IN_PLACE(cadre_send(ip, n, CADRE_INT32, right, 9, W), "cadre_send", "buf");
        NOT_IN_PLACE(cadre_isend(ip, n, CADRE_INT32, right, 9, W, &req), "cadre_isend", "buf");
        NOT_IN_PLACE(cadre_recv(ip, n, CADRE_INT32, left, 9, W, NULL), "cadre_recv", "buf");
        NOT_IN_PLACE(cadre_recv(ip, n, CADRE_INT32, CADRE_ANY_SOURCE, CADRE_ANY_TAG, W, NULL),
                     "cadre_recv", "buf");
        NOT_IN_PLACE(cadre_irecv(ip, n, CADRE_INT32, left, 9, W, &req), "cadre_irecv", "buf");
        NOT_IN_PLACE(cadre_irecv(ip, n, CADRE_INT32, CADRE_ANY_SOURCE, 9, W, &req),
                     "cadre_irecv", "buf");
        NOT_IN_PLACE(cadre_sendrecv(ip, n, right, 9, o, n, left, 9, CADRE_INT32, W, NULL),
                     "cadre_sendrecv", "sendbuf");
        NOT_IN_PLACE(cadre_sendrecv(b, n, right, 9, ip, n, left, 9, CADRE_INT32, W, NULL),
                     "cadre_sendrecv", "recvbuf");
        NOT_IN_PLACE(cadre_sendrecv(ip, n, right, 9, ip, n, left, 9, CADRE_INT32, W, NULL),
                     "cadre_sendrecv", "sendbuf");
        /* The same tag, real buffers: only this exchange's data arrives. */
        cadre_status_t st;
        if (n)
            memset(o, 0x5a, n * sizeof *o);
        OK(cadre_sendrecv(b, n, right, 9, o, n, left, 9, CADRE_INT32, W, &st));
        EXPECT(st.source == left && st.tag == 9 && st.count == n,
               "sendrecv after CADRE_IN_PLACE refusals (count %zu): source %d tag %d count %zu",
               n, st.source, st.tag, st.count);
        size_t at = bad_at(o, n, left, 90 + k, 0);
        EXPECT(at == n, "sendrecv after CADRE_IN_PLACE refusals (count %zu): element %zu wrong", n,
               at);
        OK(cadre_barrier(W));
    }
    free(b);
    free(o);
    still_works("CADRE_IN_PLACE refusals");
}

/* ---- collectives ------------------------------------------------------------------- */
static void test_reductions(int nb, size_t c)
{
    cadre_request_t req;
    int32_t *a = malloc((size_t)(np + 1) * c * sizeof *a);
    int32_t *o = malloc((size_t)np * c * sizeof *o);
    /* allreduce: the same buffer is CADRE_IN_PLACE; one element apart overlaps. */
    fill(a, c, me, 20);
    OK(COLL(cadre_allreduce(a, a, c, CADRE_INT32, CADRE_SUM, W),
            cadre_iallreduce(a, a, c, CADRE_INT32, CADRE_SUM, W, &req)));
    for (size_t i = 0; i < c; i++) {
        int32_t s = 0;
        for (int q = 0; q < np; q++)
            s += val(q, 20, i);
        if (a[i] != s) {
            EXPECT(0, "allreduce(a, a) nb %d count %zu element %zu: %d, expected %d", nb, c, i,
                   a[i], s);
            break;
        }
    }
    OVERLAPS(COLL(cadre_allreduce(a, a + 1, c, CADRE_INT32, CADRE_SUM, W),
                  cadre_iallreduce(a, a + 1, c, CADRE_INT32, CADRE_SUM, W, &req)),
             "allreduce");
    OVERLAPS(COLL(cadre_allreduce(a + 1, a, c, CADRE_INT32, CADRE_SUM, W),
                  cadre_iallreduce(a + 1, a, c, CADRE_INT32, CADRE_SUM, W, &req)),
             "allreduce");
    still_works("an overlapping allreduce");
    /* Adjacent: fine. */
    fill(a, c, me, 21);
    OK(COLL(cadre_allreduce(a, a + c, c, CADRE_INT32, CADRE_SUM, W),
            cadre_iallreduce(a, a + c, c, CADRE_INT32, CADRE_SUM, W, &req)));
    EXPECT(bad_at(a, c, me, 21, 0) == c, "adjacent allreduce changed sendbuf");

    /* reduce: only the root's recvbuf counts; the same buffer there is in place. */
    for (int root = 0; root < np; root++) {
        fill(a, c, me, 22 + root);
        if (me == root) {
            OVERLAPS(COLL(cadre_reduce(a, a + 1, c, CADRE_INT32, CADRE_SUM, root, W),
                          cadre_ireduce(a, a + 1, c, CADRE_INT32, CADRE_SUM, root, W, &req)),
                     "reduce");
            OVERLAPS(COLL(cadre_reduce(a + 1, a, c, CADRE_INT32, CADRE_SUM, root, W),
                          cadre_ireduce(a + 1, a, c, CADRE_INT32, CADRE_SUM, root, W, &req)),
                     "reduce");
        }
        /* The others pass an overlapping recvbuf, which they do not use. */
        int32_t *rb = me == root ? a : a + 1;
        OK(COLL(cadre_reduce(a, rb, c, CADRE_INT32, CADRE_SUM, root, W),
                cadre_ireduce(a, rb, c, CADRE_INT32, CADRE_SUM, root, W, &req)));
        if (me == root)
            for (size_t i = 0; i < c; i++) {
                int32_t s = 0;
                for (int q = 0; q < np; q++)
                    s += val(q, 22 + root, i);
                if (a[i] != s) {
                    EXPECT(0, "reduce(a, a) root %d element %zu: %d, expected %d", root, i, a[i], s);
                    break;
                }
            }
        else
            EXPECT(bad_at(a, c, me, 22 + root, 0) == c, "reduce changed a non-root's sendbuf");
    }
    still_works("overlapping reduces");

    /* reduce_scatter: the same buffer is CADRE_IN_PLACE (result in its first block). */
    size_t all = (size_t)np * c;
    fill(a, all, me, 30);
    OK(COLL(cadre_reduce_scatter(a, a, c, CADRE_INT32, CADRE_SUM, W),
            cadre_ireduce_scatter(a, a, c, CADRE_INT32, CADRE_SUM, W, &req)));
    for (size_t i = 0; i < c; i++) {
        int32_t s = 0;
        for (int q = 0; q < np; q++)
            s += val(q, 30, (size_t)me * c + i);
        if (a[i] != s) {
            EXPECT(0, "reduce_scatter(a, a) nb %d element %zu: %d, expected %d", nb, i, a[i], s);
            break;
        }
    }
    OVERLAPS(COLL(cadre_reduce_scatter(a, a + 1, c, CADRE_INT32, CADRE_SUM, W),
                  cadre_ireduce_scatter(a, a + 1, c, CADRE_INT32, CADRE_SUM, W, &req)),
             "reduce_scatter");
    /* recvbuf inside sendbuf's last block. */
    OVERLAPS(COLL(cadre_reduce_scatter(a, a + all - 1, c, CADRE_INT32, CADRE_SUM, W),
                  cadre_ireduce_scatter(a, a + all - 1, c, CADRE_INT32, CADRE_SUM, W, &req)),
             "reduce_scatter");
    still_works("an overlapping reduce_scatter");
    fill(a, all, me, 31);
    OK(COLL(cadre_reduce_scatter(a, o, c, CADRE_INT32, CADRE_SUM, W),
            cadre_ireduce_scatter(a, o, c, CADRE_INT32, CADRE_SUM, W, &req)));
    free(a);
    free(o);
}

static void test_movers(int nb, size_t c)
{
    cadre_request_t req;
    size_t all = (size_t)np * c;
    int32_t *a = malloc((2 * all + c + 1) * sizeof *a);
    size_t *cnt = malloc((size_t)np * sizeof *cnt), *dsp = malloc((size_t)np * sizeof *dsp);
    size_t *cnt2 = malloc((size_t)np * sizeof *cnt2), *dsp2 = malloc((size_t)np * sizeof *dsp2);
    for (int q = 0; q < np; q++) {
        cnt[q] = c;
        dsp[q] = (size_t)q * c;
    }
    /* allgather: no equal pointers are in place (the in-place block is the
     * rank's own); every overlap fails on every rank. */
    fill(a, all + c + 1, me, 40);
    OVERLAPS(COLL(cadre_allgather(a, a, c, CADRE_INT32, W),
                  cadre_iallgather(a, a, c, CADRE_INT32, W, &req)),
             "allgather");
    OVERLAPS(COLL(cadre_allgather(a + (size_t)me * c, a, c, CADRE_INT32, W),
                  cadre_iallgather(a + (size_t)me * c, a, c, CADRE_INT32, W, &req)),
             "allgather");
    OVERLAPS(COLL(cadre_allgather(a + all - 1, a, c, CADRE_INT32, W),
                  cadre_iallgather(a + all - 1, a, c, CADRE_INT32, W, &req)),
             "allgather");
    OVERLAPS(COLL(cadre_allgatherv(a + 1, c, a, cnt, dsp, CADRE_INT32, W),
                  cadre_iallgatherv(a + 1, c, a, cnt, dsp, CADRE_INT32, W, &req)),
             "allgatherv");
    still_works("overlapping allgathers");
    EXPECT(bad_at(a, all + c + 1, me, 40, 0) == all + c + 1, "a rejected allgather wrote");
    /* The send block right after recvbuf, then before it (the v-variant's
     * extent starts at its first displacement). */
    OK(COLL(cadre_allgather(a + all, a, c, CADRE_INT32, W),
            cadre_iallgather(a + all, a, c, CADRE_INT32, W, &req)));
    for (int q = 0; q < np; q++)
        EXPECT(bad_at(a + (size_t)q * c, c, q, 40, all) == c, "allgather block %d", q);
    for (int q = 0; q < np; q++) {
        cnt2[q] = c;
        dsp2[q] = c + (size_t)q * c;
    }
    fill(a, c, me, 41);
    OK(COLL(cadre_allgatherv(a, c, a, cnt2, dsp2, CADRE_INT32, W),
            cadre_iallgatherv(a, c, a, cnt2, dsp2, CADRE_INT32, W, &req)));
    for (int q = 0; q < np; q++)
        EXPECT(bad_at(a + c + (size_t)q * c, c, q, 41, 0) == c, "allgatherv block %d", q);

    /* gather and scatter: the root's buffers only. */
    for (int root = 0; root < np; root++) {
        fill(a, all + c + 1, me, 50 + root);
        if (me == root) {
            OVERLAPS(COLL(cadre_gather(a + (size_t)root * c, a, c, CADRE_INT32, root, W),
                          cadre_igather(a + (size_t)root * c, a, c, CADRE_INT32, root, W, &req)),
                     "gather");
            OVERLAPS(COLL(cadre_gatherv(a + 1, c, a, cnt, dsp, CADRE_INT32, root, W),
                          cadre_igatherv(a + 1, c, a, cnt, dsp, CADRE_INT32, root, W, &req)),
                     "gatherv");
            OVERLAPS(COLL(cadre_scatter(a, a + (size_t)root * c, c, CADRE_INT32, root, W),
                          cadre_iscatter(a, a + (size_t)root * c, c, CADRE_INT32, root, W, &req)),
                     "scatter");
            OVERLAPS(COLL(cadre_scatterv(a, cnt, dsp, a + all - 1, c, CADRE_INT32, root, W),
                          cadre_iscatterv(a, cnt, dsp, a + all - 1, c, CADRE_INT32, root, W, &req)),
                     "scatterv");
            EXPECT(bad_at(a, all + c + 1, me, 50 + root, 0) == all + c + 1,
                   "a rejected gather or scatter wrote");
        }
        still_works("overlapping gathers and scatters");
        /* Non-roots' ignored buffers may overlap; the root's adjacent ones are fine. */
        int32_t *rb = me == root ? a : a + 1, *sb = me == root ? a + all : a;
        OK(COLL(cadre_gather(sb, rb, c, CADRE_INT32, root, W),
                cadre_igather(sb, rb, c, CADRE_INT32, root, W, &req)));
        if (me == root)
            for (int q = 0; q < np; q++)
                EXPECT(bad_at(a + (size_t)q * c, c, q, 50 + root, q == root ? all : 0) == c,
                       "gather root %d block %d", root, q);
        fill(a, all + c, me, 60 + root);
        OK(COLL(cadre_scatter(a, me == root ? a + all : a + 1, c, CADRE_INT32, root, W),
                cadre_iscatter(a, me == root ? a + all : a + 1, c, CADRE_INT32, root, W, &req)));
        int32_t *got = me == root ? a + all : a + 1;
        EXPECT(bad_at(got, c, root, 60 + root, (size_t)me * c) == c, "scatter root %d", root);
    }

    /* alltoall: the same buffer is CADRE_IN_PLACE; one element apart overlaps. */
    fill(a, all, me, 70);
    OK(COLL(cadre_alltoall(a, a, c, CADRE_INT32, W), cadre_ialltoall(a, a, c, CADRE_INT32, W, &req)));
    for (int q = 0; q < np; q++) {
        size_t at = bad_at(a + (size_t)q * c, c, q, 70, (size_t)me * c);
        EXPECT(at == c, "alltoall(a, a) nb %d count %zu block %d element %zu", nb, c, q, at);
    }
    OVERLAPS(COLL(cadre_alltoall(a, a + 1, c, CADRE_INT32, W),
                  cadre_ialltoall(a, a + 1, c, CADRE_INT32, W, &req)),
             "alltoall");
    OVERLAPS(COLL(cadre_alltoall(a + all - 1, a, c, CADRE_INT32, W),
                  cadre_ialltoall(a + all - 1, a, c, CADRE_INT32, W, &req)),
             "alltoall");
    /* alltoallv: the same buffer with the same layout is in place; with another, it overlaps. */
    fill(a, all, me, 71);
    OK(COLL(cadre_alltoallv(a, cnt, dsp, a, cnt, dsp, CADRE_INT32, W),
            cadre_ialltoallv(a, cnt, dsp, a, cnt, dsp, CADRE_INT32, W, &req)));
    for (int q = 0; q < np; q++) {
        size_t at = bad_at(a + (size_t)q * c, c, q, 71, (size_t)me * c);
        EXPECT(at == c, "alltoallv(a, a) nb %d count %zu block %d element %zu", nb, c, q, at);
    }
    for (int q = 0; q < np; q++)
        dsp2[q] = 1 + (size_t)q * c;
    OVERLAPS(COLL(cadre_alltoallv(a, cnt, dsp2, a, cnt, dsp, CADRE_INT32, W),
                  cadre_ialltoallv(a, cnt, dsp2, a, cnt, dsp, CADRE_INT32, W, &req)),
             "alltoallv");
    still_works("overlapping alltoalls");
    fill(a, all, me, 72);
    OK(COLL(cadre_alltoall(a, a + all, c, CADRE_INT32, W),
            cadre_ialltoall(a, a + all, c, CADRE_INT32, W, &req)));
    for (int q = 0; q < np; q++)
        EXPECT(bad_at(a + all + (size_t)q * c, c, q, 72, (size_t)me * c) == c,
               "adjacent alltoall block %d", q);
    free(a);
    free(cnt);
    free(dsp);
    free(cnt2);
    free(dsp2);
}

static void test_collectives(void)
{
    size_t counts[] = {5, 131075};
    for (int nb = 0; nb < 2; nb++)
        for (int k = 0; k < 2; k++) {
            int before = ru_failures;
            test_reductions(nb, counts[k]);
            test_movers(nb, counts[k]);
            if (ru_failures != before)
                fprintf(stderr, "[rank %d] collectives nb %d count %zu failed\n", me, nb,
                        counts[k]);
        }
}

/* ---- counts that no address space holds -------------------------------------------- */
#define HUGE_FAILS(call, text)                                                              \
    do {                                                                                    \
        cadre_request_t req = CADRE_REQUEST_NULL;                                           \
        int rc_ = (call);                                                                   \
        const char *m_ = cadre_last_error();                                                \
        EXPECT(rc_ == CADRE_ERR_ARG, "%s: %s, expected CADRE_ERR_ARG", #call,              \
               cadre_error_string(rc_));                                                    \
        EXPECT(strstr(m_, text) && strstr(m_, "address space"),                            \
               "%s: message \"%s\" lacks \"%s\"", #call, m_, text);                         \
        EXPECT(req == CADRE_REQUEST_NULL, "%s wrote a request", #call);                     \
        if (req)                                                                            \
            cadre_wait(&req, NULL);                                                         \
    } while (0)

static void test_huge(void)
{
    static int32_t b[64], o[64];
    size_t cnt[64], dsp[64], big[64];
    const size_t P62 = (size_t)1 << 62;
    int right = (me + 1) % np, left = (me + np - 1) % np;
    char *top = (char *)(UINTPTR_MAX - 15);
    for (int round = 0; round < 2; round++) {
        size_t n = round ? P62 : SIZE_MAX;
        const char *t = round ? "4611686018427387904" : "18446744073709551615";
        HUGE_FAILS(cadre_send(b, n, CADRE_INT8, right, 1, W), t);
        HUGE_FAILS(cadre_isend(b, n, CADRE_INT8, right, 1, W, &req), t);
        HUGE_FAILS(cadre_recv(b, n, CADRE_INT8, left, 1, W, NULL), t);
        HUGE_FAILS(cadre_irecv(b, n, CADRE_INT8, left, 1, W, &req), t);
        HUGE_FAILS(cadre_sendrecv(b, n, right, 1, o, 1, left, 1, CADRE_INT8, W, NULL), "sendcount");
        HUGE_FAILS(cadre_sendrecv(b, 1, right, 1, o, n, left, 1, CADRE_INT8, W, NULL), "recvcount");
        HUGE_FAILS(cadre_bcast(b, n, CADRE_INT8, 0, W), t);
        HUGE_FAILS(cadre_ibcast(b, n, CADRE_INT8, np - 1, W, &req), t);
        HUGE_FAILS(cadre_allreduce(b, o, n, CADRE_INT8, CADRE_SUM, W), t);
        HUGE_FAILS(cadre_iallreduce(CADRE_IN_PLACE, o, n, CADRE_INT8, CADRE_MAX, W, &req), t);
        HUGE_FAILS(cadre_reduce(b, o, n, CADRE_INT8, CADRE_SUM, 0, W), t);
        HUGE_FAILS(cadre_reduce_scatter(b, o, n, CADRE_INT8, CADRE_SUM, W), t);
        HUGE_FAILS(cadre_allgather(b, o, n, CADRE_INT8, W), t);
        HUGE_FAILS(cadre_iallgather(b, o, n, CADRE_INT8, W, &req), t);
        HUGE_FAILS(cadre_gather(b, o, n, CADRE_INT8, 0, W), t);
        HUGE_FAILS(cadre_scatter(b, o, n, CADRE_INT8, np - 1, W), t);
        HUGE_FAILS(cadre_alltoall(b, o, n, CADRE_INT8, W), t);
        HUGE_FAILS(cadre_ialltoall(b, o, n, CADRE_INT8, W, &req), t);
        /* v-variants: one huge count, or one huge displacement. */
        for (int q = 0; q < np; q++) {
            cnt[q] = 1;
            dsp[q] = (size_t)q;
            big[q] = q == np - 1 ? n : 1;
        }
        HUGE_FAILS(cadre_alltoallv(b, big, dsp, o, cnt, dsp, CADRE_INT8, W), "sendcounts");
        HUGE_FAILS(cadre_alltoallv(b, cnt, dsp, o, big, dsp, CADRE_INT8, W), "recvcounts");
        HUGE_FAILS(cadre_alltoallv(b, cnt, big, o, cnt, dsp, CADRE_INT8, W), "sdispls");
        HUGE_FAILS(cadre_ialltoallv(b, cnt, dsp, o, cnt, big, CADRE_INT8, W, &req), "rdispls");
        HUGE_FAILS(cadre_allgatherv(b, 1, o, cnt, big, CADRE_INT8, W), "displs");
        if (me == 0) {
            HUGE_FAILS(cadre_gatherv(b, 1, o, cnt, big, CADRE_INT8, 0, W), "displs");
            HUGE_FAILS(cadre_scatterv(b, cnt, big, o, 1, CADRE_INT8, 0, W), "displs");
        }
    }
    /* Per rank 2^62 / size fits, the whole receive buffer does not (np > 1). */
    if (np > 1) {
        size_t per = (((size_t)1 << 56) / (size_t)np) + 1;
        HUGE_FAILS(cadre_allgather(b, o, per, CADRE_INT8, W), "recvbuf");
        HUGE_FAILS(cadre_alltoall(b, o, per, CADRE_INT8, W), "buf of");
    }
    /* Counts that fit, at an address where the buffer would wrap. */
    HUGE_FAILS(cadre_send(top, 64, CADRE_INT8, right, 1, W), "buf");
    HUGE_FAILS(cadre_irecv(top, 64, CADRE_INT8, left, 1, W, &req), "buf");
    HUGE_FAILS(cadre_bcast(top, 64, CADRE_INT8, 0, W), "buf");
    HUGE_FAILS(cadre_allreduce(b, top, 64, CADRE_INT8, CADRE_SUM, W), "recvbuf");
    /* Still usable: point-to-point and a collective, element by element. */
    fill(b, 64, me, 80);
    OK(cadre_sendrecv(b, 64, right, 2, o, 64, left, 2, CADRE_INT32, W, NULL));
    EXPECT(bad_at(o, 64, left, 80, 0) == 64, "sendrecv after huge counts");
    OK(cadre_allgather(b, o, 64 / np, CADRE_INT32, W));
    for (int q = 0; q < np; q++)
        EXPECT(bad_at(o + (size_t)q * (64 / np), 64 / np, q, 80, 0) == 64 / (size_t)np,
               "allgather after huge counts, block %d", q);
    still_works("huge counts");
}

/* ---- v-layouts ---------------------------------------------------------------------- */
/* CADRE_ERR_ARG naming the layout's arrays and the overlap, nothing written. */
#define BLOCKS_OVERLAP(call, fn, cname, dname)                                              \
    do {                                                                                    \
        int rc_ = (call);                                                                   \
        const char *m_ = cadre_last_error();                                                \
        EXPECT(rc_ == CADRE_ERR_ARG, "%s (nb %d): %s, expected CADRE_ERR_ARG", #call, nb,  \
               cadre_error_string(rc_));                                                    \
        EXPECT(strstr(m_, fn) && strstr(m_, "blocks of recvbuf overlap") &&                \
                   strstr(m_, cname "[") && strstr(m_, dname "["),                          \
               "%s: message \"%s\" does not name the blocks", #call, m_);                   \
    } while (0)

/* Receive blocks that share elements are refused (the peers' data would land
 * on each other: one block came out wrong, with success), in increasing
 * order and not; disjoint blocks in decreasing order still work, and send
 * blocks may overlap (they are only read). */
static void test_vlayout_nb(int nb, size_t c)
{
    cadre_request_t req;
    size_t un = (size_t)np, all = un * c;
    int32_t *s = malloc((all + 1) * sizeof *s), *r = malloc((all + 1) * sizeof *r);
    size_t *cnt = malloc(un * sizeof *cnt), *up = malloc(un * sizeof *up);
    size_t *down = malloc(un * sizeof *down), *over = malloc(un * sizeof *over);
    size_t *back = malloc(un * sizeof *back), *zero = malloc(un * sizeof *zero);
    for (int q = 0; q < np; q++) {
        cnt[q] = c;
        up[q] = (size_t)q * c;
        down[q] = (size_t)(np - 1 - q) * c;
        over[q] = q ? (size_t)q * c - 1 : 0; /* each block's first element is the last of the one before */
        back[q] = q == np - 1 ? 1 : down[q]; /* decreasing, and the last block one into the next */
        zero[q] = 0;
    }
    const size_t *bad[2] = {over, back};
    for (int k = 0; k < 2; k++) {
        fill(r, all + 1, me, 90);
        BLOCKS_OVERLAP(COLL(cadre_allgatherv(s, c, r, cnt, bad[k], CADRE_INT32, W),
                            cadre_iallgatherv(s, c, r, cnt, bad[k], CADRE_INT32, W, &req)),
                       "allgatherv", "recvcounts", "displs");
        BLOCKS_OVERLAP(COLL(cadre_alltoallv(s, cnt, up, r, cnt, bad[k], CADRE_INT32, W),
                            cadre_ialltoallv(s, cnt, up, r, cnt, bad[k], CADRE_INT32, W, &req)),
                       "alltoallv", "recvcounts", "rdispls");
        if (me == np - 1)
            BLOCKS_OVERLAP(COLL(cadre_gatherv(s, c, r, cnt, bad[k], CADRE_INT32, np - 1, W),
                                cadre_igatherv(s, c, r, cnt, bad[k], CADRE_INT32, np - 1, W, &req)),
                           "gatherv", "recvcounts", "displs");
        EXPECT(bad_at(r, all + 1, me, 90, 0) == all + 1, "a refused v-call wrote (layout %d)", k);
    }
    still_works("overlapping receive blocks");
    /* Decreasing disjoint blocks. */
    fill(s, c, me, 91);
    OK(COLL(cadre_allgatherv(s, c, r, cnt, down, CADRE_INT32, W),
            cadre_iallgatherv(s, c, r, cnt, down, CADRE_INT32, W, &req)));
    for (int q = 0; q < np; q++)
        EXPECT(bad_at(r + down[q], c, q, 91, 0) == c, "allgatherv, decreasing blocks, block %d", q);
    /* Every rank sends all its peers the same block (send blocks overlap). */
    OK(COLL(cadre_alltoallv(s, cnt, zero, r, cnt, down, CADRE_INT32, W),
            cadre_ialltoallv(s, cnt, zero, r, cnt, down, CADRE_INT32, W, &req)));
    for (int q = 0; q < np; q++)
        EXPECT(bad_at(r + down[q], c, q, 91, 0) == c, "alltoallv, one send block, block %d", q);
    fill(s, c, me, 92);
    OK(COLL(cadre_scatterv(s, cnt, zero, r, c, CADRE_INT32, 0, W),
            cadre_iscatterv(s, cnt, zero, r, c, CADRE_INT32, 0, W, &req)));
    EXPECT(bad_at(r, c, 0, 92, 0) == c, "scatterv of one overlapping block");
    free(s), free(r), free(cnt), free(up), free(down), free(over), free(back), free(zero);
}

static void test_vlayout(void)
{
    if (np < 2)
        return;
    size_t counts[] = {5, 131075};
    for (int nb = 0; nb < 2; nb++)
        for (int k = 0; k < 2; k++)
            test_vlayout_nb(nb, counts[k]);
}

int main(int argc, char **argv)
{
    if (cadre_init(&argc, &argv) != CADRE_SUCCESS) {
        fprintf(stderr, "arg_test: cadre_init: %s\n", cadre_last_error());
        return 1;
    }
    cadre_comm_rank(W, &me);
    cadre_comm_size(W, &np);
    if (np < 1 || np > 64)
        return 1;
    ru_rank = me;
    struct {
        const char *name;
        void (*fn)(void);
    } tests[] = {{"messages", test_messages},
                 {"sendrecv", test_sendrecv},
                 {"in_place", test_in_place},
                 {"collectives", test_collectives},
                 {"vlayout", test_vlayout},
                 {"huge", test_huge}};
    const char *only = getenv("ARG_TESTS");
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        if (only && !strstr(only, tests[i].name))
            continue;
        int before = ru_failures;
        double t0 = ru_now();
        tests[i].fn();
        OK(cadre_barrier(W));
        if (me == 0)
            printf("arg_test %-12s %s (%.2f s)\n", tests[i].name,
                   ru_failures == before ? "ok" : "FAILED", ru_now() - t0);
        fflush(stdout);
    }
    int rc = cadre_finalize();
    EXPECT(rc == CADRE_SUCCESS, "finalize: %s", cadre_last_error());
    if (ru_failures)
        fprintf(stderr, "[rank %d] %d check(s) failed\n", me, ru_failures);
    return ru_failures ? 1 : 0;
}
