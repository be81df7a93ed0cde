/* Argument checks that must hold before any communication: counts that no
 * address space holds, and the wording of the datatype and truncation
 * messages. Every rank passes the same bad arguments (or, in rooted calls,
 * the root alone, where only the root's buffers are looked at), so every
 * rank that fails has failed before sending anything; then a correct call
 * must work, checked element by element.
 *
 * ARG_TESTS picks sections by name: messages, huge. */
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
    } tests[] = {{"messages", test_messages}, {"huge", test_huge}};
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
