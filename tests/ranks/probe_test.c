/* cadre_probe, cadre_iprobe, cadre_waitany, cadre_testany, cadre_testall
 * (issue 43, items 3 and 4), at 2 to 4 ranks over shared memory and TCP:
 *  - probes with a given and a wildcard source and tag, of eager and
 *    rendezvous messages (past every transport's eager limit), of every
 *    datatype: the count is in the sender's elements, a probe consumes
 *    nothing, and the next receive (wildcards too) gets exactly the probed
 *    message, checked element by element; from this rank itself; on a
 *    communicator of its own; from two threads at once;
 *  - iprobe's flag 0 when nothing matches, its flag 1 once the message is in;
 *  - waitany, testany and testall over null, complete and pending requests:
 *    index, flag, statuses, the requests released, truncation reported as
 *    cadre_waitall reports it; argument errors that leave everything as it
 *    was; waits that sleep rather than burn the core.
 * PROBE_TESTS=no_progress (with CADRE_TIMEOUT of a few seconds): a probe and
 * a waitany that nothing answers fail with the diagnosis. PROBE_TESTS=peerfail
 * (2 ranks, cadrerun --keep-going; unit/test_ranks.c): rank 1 is killed while
 * rank 0 probes for it, which fails with CADRE_ERR_PEER. */
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include "rank_util.h"

#define W CADRE_COMM_WORLD
#define NTYPES 10
/* Past the eager limit of every transport (TCP's is 1 MiB). */
#define BIG_BYTES (((size_t)1 << 20) + 64)

static int me, np;

static const cadre_datatype_t types[NTYPES] = {CADRE_INT8,    CADRE_UINT8,    CADRE_INT32,
                                               CADRE_UINT32,  CADRE_INT64,    CADRE_UINT64,
                                               CADRE_FLOAT16, CADRE_BFLOAT16, CADRE_FLOAT32,
                                               CADRE_FLOAT64};

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static size_t big_count(cadre_datatype_t dt)
{
    return BIG_BYTES / cadre_datatype_size(dt) + 1;
}

static const cadre_status_t SENTINEL = {.source = 12345, .tag = 54321, .count = 999, .error = 77};

static int same_status(const cadre_status_t *a, const cadre_status_t *b)
{
    return a->source == b->source && a->tag == b->tag && a->count == b->count &&
           a->error == b->error;
}

static int is_empty(const cadre_status_t *s)
{
    return s->source == CADRE_ANY_SOURCE && s->tag == CADRE_ANY_TAG && s->count == 0 &&
           s->error == CADRE_SUCCESS;
}

/* ---- probes with a given source and tag -------------------------------------- */

/* Every rank sends every datatype at counts 0, 1, 7, 1000 and past the eager
 * limit to the next rank; that rank probes them in the reverse order, each
 * twice, and receives each after its probe. */
static const size_t small_counts[4] = {0, 1, 7, 1000};

static size_t count_of(int dti, int ci)
{
    return ci < 4 ? small_counts[ci] : big_count(types[dti]);
}

static void test_specific(void)
{
    int dst = (me + 1) % np, src = (me + np - 1) % np;
    enum { N = NTYPES * 5 };
    cadre_request_t reqs[N];
    unsigned char *out[N];
    for (int k = 0; k < N; k++) {
        int dti = k / 5, ci = k % 5;
        size_t bytes = count_of(dti, ci) * cadre_datatype_size(types[dti]);
        out[k] = malloc(bytes + 1);
        ru_fill(out[k], bytes, me, dst, (uint64_t)k);
        OK(cadre_isend(out[k], count_of(dti, ci), types[dti], dst, k, W, &reqs[k]));
    }
    for (int k = N - 1; k >= 0; k--) {
        int dti = k / 5, ci = k % 5;
        size_t n = count_of(dti, ci), es = cadre_datatype_size(types[dti]);
        cadre_status_t st = SENTINEL, st2 = SENTINEL;
        OK(cadre_probe(src, k, W, &st));
        EXPECT(st.source == src && st.tag == k && st.count == n && st.error == CADRE_SUCCESS,
               "probe(%d, %d) of %zu x type %d: source %d tag %d count %zu error %d", src, k, n,
               (int)types[dti], st.source, st.tag, st.count, st.error);
        OK(cadre_probe(src, k, W, &st2)); /* nothing consumed */
        EXPECT(same_status(&st, &st2), "second probe(%d, %d): count %zu", src, k, st2.count);
        int flag = 0;
        OK(cadre_iprobe(src, k, W, &flag, &st2));
        EXPECT(flag == 1 && same_status(&st, &st2), "iprobe(%d, %d): flag %d count %zu", src, k,
               flag, st2.count);
        OK(cadre_probe(src, k, W, CADRE_STATUS_IGNORE));
        unsigned char *in = malloc(n * es + 1);
        memset(in, 0xEE, n * es + 1);
        cadre_status_t rs;
        OK(cadre_recv(in, n, types[dti], src, k, W, &rs));
        EXPECT(rs.source == src && rs.tag == k && rs.count == n, "recv(%d, %d): count %zu", src,
               k, rs.count);
        size_t bad = ru_check(in, n * es, src, me, (uint64_t)k);
        EXPECT(bad == n * es, "message %d from %d: byte %zu of %zu wrong", k, src, bad, n * es);
        EXPECT(in[n * es] == 0xEE, "message %d: written past its end", k);
        free(in);
    }
    OK(cadre_waitall(N, reqs, CADRE_STATUS_IGNORE));
    for (int k = 0; k < N; k++)
        free(out[k]);
    /* Nothing is left: a probe of anything finds nothing. */
    int flag = 7;
    cadre_status_t st = SENTINEL;
    OK(cadre_iprobe(CADRE_ANY_SOURCE, CADRE_ANY_TAG, W, &flag, &st));
    EXPECT(flag == 0 && same_status(&st, &SENTINEL), "iprobe after all: flag %d source %d tag %d",
           flag, st.source, st.tag);
    OK(cadre_barrier(W));
}

/* ---- wildcards ---------------------------------------------------------------- */

/* Every rank but 0 sends rank 0 K messages, message i of rank s with tag
 * 100 + i, datatype types[(i + s) % NTYPES], every fourth one large. Rank 0
 * takes them in four ways by turns, each a probe and then a receive with the
 * same arguments, received as bytes: the receive must get the probed
 * message, whose count the probe gave in the sender's elements. */
#define K 12

static cadre_datatype_t wild_dt(int s, int i)
{
    return types[(i + s) % NTYPES];
}

static size_t wild_count(int s, int i)
{
    static const size_t small[3] = {0, 5, 999};
    return i % 4 == 3 ? big_count(wild_dt(s, i)) : small[(i + s) % 3];
}

static void test_wildcards(void)
{
    if (me != 0) {
        cadre_request_t reqs[K];
        unsigned char *out[K];
        for (int i = 0; i < K; i++) {
            size_t bytes = wild_count(me, i) * cadre_datatype_size(wild_dt(me, i));
            out[i] = malloc(bytes + 1);
            ru_fill(out[i], bytes, me, 0, 1000 + (uint64_t)i);
            OK(cadre_isend(out[i], wild_count(me, i), wild_dt(me, i), 0, 100 + i, W, &reqs[i]));
        }
        OK(cadre_waitall(K, reqs, CADRE_STATUS_IGNORE));
        for (int i = 0; i < K; i++)
            free(out[i]);
        OK(cadre_barrier(W));
        return;
    }
    int total = (np - 1) * K, got[4][K];
    memset(got, 0, sizeof got);
    /* Nothing has a tag this high. */
    int flag = 5;
    cadre_status_t st = SENTINEL;
    OK(cadre_iprobe(CADRE_ANY_SOURCE, 99, W, &flag, &st));
    EXPECT(flag == 0 && same_status(&st, &SENTINEL), "iprobe(ANY, 99): flag %d", flag);
    unsigned char *in = malloc(BIG_BYTES + 64);
    for (int j = 0; j < total; j++) {
        int mode = j % 4, src = CADRE_ANY_SOURCE, tag = CADRE_ANY_TAG;
        if (mode == 1) { /* a source that has messages left, any tag */
            for (int s = 1 + j % (np - 1), tries = 0; tries < np - 1;
                 tries++, s = s % (np - 1) + 1) {
                int left = 0;
                for (int i = 0; i < K; i++)
                    left += !got[s][i];
                if (left) {
                    src = s;
                    break;
                }
            }
        } else if (mode == 3) { /* a tag that some rank has left, any source */
            for (int i = 0; i < K && tag < 0; i++)
                for (int s = 1; s < np; s++)
                    if (!got[s][(i + j) % K])
                        tag = 100 + (i + j) % K;
        }
        st = SENTINEL;
        if (mode == 2) {
            flag = 0;
            double t0 = ru_now();
            while (!flag && ru_now() - t0 < 120) {
                OK(cadre_iprobe(src, tag, W, &flag, &st));
                if (!flag)
                    EXPECT(same_status(&st, &SENTINEL), "iprobe flag 0 wrote the status");
            }
            EXPECT(flag == 1, "iprobe(ANY, ANY) found nothing in 120 s");
        } else {
            OK(cadre_probe(src, tag, W, &st));
        }
        int s = st.source, i = st.tag - 100;
        if (s < 1 || s >= np || i < 0 || i >= K || got[s][i]) {
            EXPECT(0, "probe(%d, %d) gave source %d tag %d (seen: %d)", src, tag, s, st.tag,
                   s >= 1 && s < np && i >= 0 && i < K ? got[s][i] : -1);
            break;
        }
        EXPECT((src < 0 || s == src) && (tag < 0 || st.tag == tag),
               "probe(%d, %d) matched source %d tag %d", src, tag, s, st.tag);
        size_t n = wild_count(s, i), es = cadre_datatype_size(wild_dt(s, i));
        EXPECT(st.count == n && st.error == CADRE_SUCCESS,
               "probe(%d, %d): message %d of rank %d: count %zu, sent %zu of type %d", src, tag, i,
               s, st.count, n, (int)wild_dt(s, i));
        memset(in, 0xEE, n * es + 1);
        cadre_status_t rs;
        OK(cadre_recv(in, BIG_BYTES + 64, CADRE_UINT8, src, tag, W, &rs));
        EXPECT(rs.source == s && rs.tag == st.tag && rs.count == n * es,
               "recv(%d, %d) after the probe of rank %d tag %d got rank %d tag %d, %zu bytes", src,
               tag, s, st.tag, rs.source, rs.tag, rs.count);
        size_t bad = ru_check(in, n * es, s, 0, 1000 + (uint64_t)i);
        EXPECT(bad == n * es, "message %d of rank %d: byte %zu of %zu wrong", i, s, bad, n * es);
        got[s][i] = 1;
    }
    free(in);
    OK(cadre_barrier(W));
}

/* ---- iprobe sees what has arrived; a communicator of its own; self ---------------- */

static void test_arrived_and_comms(void)
{
    cadre_comm_t dup;
    OK(cadre_comm_dup(W, &dup));
    if (me == 1) {
        int a[3] = {1, 2, 3}, b[5] = {4, 5, 6, 7, 8}, sync = 0;
        OK(cadre_send(a, 3, CADRE_INT32, 0, 7, dup));
        OK(cadre_send(b, 5, CADRE_INT32, 0, 7, W));
        OK(cadre_send(&sync, 1, CADRE_INT32, 0, 8, W));
    } else if (me == 0) {
        int sync, flag = 0;
        /* Sent after the two others: once it is in, they are. */
        OK(cadre_recv(&sync, 1, CADRE_INT32, 1, 8, W, CADRE_STATUS_IGNORE));
        cadre_status_t st = SENTINEL;
        OK(cadre_iprobe(CADRE_ANY_SOURCE, CADRE_ANY_TAG, dup, &flag, &st));
        EXPECT(flag == 1 && st.source == 1 && st.tag == 7 && st.count == 3,
               "iprobe on the dup: flag %d source %d tag %d count %zu", flag, st.source, st.tag,
               st.count);
        flag = 0;
        OK(cadre_iprobe(1, 7, W, &flag, &st));
        EXPECT(flag == 1 && st.count == 5, "iprobe on WORLD: flag %d count %zu", flag, st.count);
        flag = 1;
        OK(cadre_iprobe(1, 8, W, &flag, CADRE_STATUS_IGNORE));
        EXPECT(flag == 0, "iprobe of the received sync: flag %d", flag);
        int x[5] = {0};
        OK(cadre_recv(x, 5, CADRE_INT32, 1, 7, W, &st));
        EXPECT(st.count == 5 && x[0] == 4 && x[4] == 8, "WORLD message: %d..%d", x[0], x[4]);
        OK(cadre_recv(x, 5, CADRE_INT32, CADRE_ANY_SOURCE, CADRE_ANY_TAG, dup, &st));
        EXPECT(st.count == 3 && x[0] == 1 && x[2] == 3, "dup message: %d..%d", x[0], x[2]);
    }
    /* From this rank itself: small (eager) and large (waits for the receive). */
    size_t nbig = big_count(CADRE_FLOAT32);
    float *big = malloc(nbig * sizeof *big), *back = malloc(nbig * sizeof *back);
    for (size_t i = 0; i < nbig; i++)
        big[i] = (float)i * 0.5f + (float)me;
    int16_t small[3] = {-1, 2, -3}, sback[3];
    cadre_request_t r[2];
    OK(cadre_isend(big, nbig, CADRE_FLOAT32, me, 60, dup, &r[0]));
    OK(cadre_isend(small, 3, CADRE_FLOAT16, me, 61, dup, &r[1]));
    cadre_status_t st;
    OK(cadre_probe(me, CADRE_ANY_TAG, dup, &st));
    EXPECT(st.source == me && st.tag == 60 && st.count == nbig, "self probe: tag %d count %zu",
           st.tag, st.count);
    OK(cadre_probe(CADRE_ANY_SOURCE, 61, dup, &st));
    EXPECT(st.source == me && st.tag == 61 && st.count == 3, "self probe 61: count %zu", st.count);
    OK(cadre_recv(sback, 6, CADRE_UINT8, me, 61, dup, &st));
    EXPECT(st.count == 6 && sback[0] == -1 && sback[1] == 2 && sback[2] == -3,
           "self small: %zu bytes", st.count);
    OK(cadre_recv(back, nbig, CADRE_FLOAT32, me, 60, dup, &st));
    size_t i = 0;
    while (i < nbig && back[i] == big[i])
        i++;
    EXPECT(st.count == nbig && i == nbig, "self large: element %zu of %zu wrong", i, nbig);
    OK(cadre_waitall(2, r, CADRE_STATUS_IGNORE));
    free(big);
    free(back);
    OK(cadre_comm_free(&dup));
    OK(cadre_barrier(W));
}

/* ---- two threads probing at once, each its own tags ------------------------------ */

#define TMSG 40
struct thr {
    int t;
    int failures;
};

static void *prober(void *arg)
{
    struct thr *a = arg;
    int total = (np - 1) * TMSG;
    for (int j = 0; j < total; j++) {
        cadre_status_t st, rs;
        int tag = 500 + a->t * 100 + j % TMSG;
        /* A tag of this thread's, from any rank (ANY_TAG would race the
         * other thread). */
        if (cadre_probe(CADRE_ANY_SOURCE, tag, W, &st) != CADRE_SUCCESS) {
            a->failures++;
            continue;
        }
        uint64_t v[64];
        if (cadre_recv(v, 64, CADRE_UINT64, CADRE_ANY_SOURCE, tag, W, &rs) != CADRE_SUCCESS ||
            rs.source != st.source || rs.count != st.count || st.count != (size_t)(1 + tag % 50) ||
            v[0] != (uint64_t)st.source * 1000 + (uint64_t)tag) {
            fprintf(stderr, "[rank %d] thread %d: tag %d: probe %d/%zu, recv %d/%zu, v %llu\n",
                    me, a->t, tag, st.source, st.count, rs.source, rs.count,
                    (unsigned long long)v[0]);
            a->failures++;
        }
    }
    return NULL;
}

static void test_threads(void)
{
    if (me != 0) {
        for (int j = 0; j < TMSG; j++) {
            for (int t = 0; t < 2; t++) {
                int tag = 500 + t * 100 + j;
                uint64_t v[64];
                for (int i = 0; i < 64; i++)
                    v[i] = (uint64_t)me * 1000 + (uint64_t)tag;
                OK(cadre_send(v, (size_t)(1 + tag % 50), CADRE_UINT64, 0, tag, W));
            }
        }
    } else {
        pthread_t th[2];
        struct thr a[2] = {{0, 0}, {1, 0}};
        for (int t = 0; t < 2; t++)
            pthread_create(&th[t], NULL, prober, &a[t]);
        for (int t = 0; t < 2; t++) {
            pthread_join(th[t], NULL);
            EXPECT(a[t].failures == 0, "thread %d: %d failures", t, a[t].failures);
        }
    }
    OK(cadre_barrier(W));
}

/* ---- argument errors ---------------------------------------------------------------- */

static void test_probe_args(void)
{
    cadre_status_t st = SENTINEL;
    int flag = 9;
    FAILS(cadre_probe(np, 0, W, &st), CADRE_ERR_ARG, "cadre_probe: src");
    EXPECT(strstr(cadre_last_error(), "out of range") != NULL, "%s", cadre_last_error());
    FAILS(cadre_probe(-2, 0, W, &st), CADRE_ERR_ARG, "src -2 out of range");
    FAILS(cadre_probe(0, -5, W, &st), CADRE_ERR_ARG, "cadre_probe: tag -5 is negative");
    FAILS(cadre_iprobe(np, 0, W, &flag, &st), CADRE_ERR_ARG, "cadre_iprobe: src");
    FAILS(cadre_iprobe(0, -7, W, &flag, &st), CADRE_ERR_ARG, "tag -7 is negative");
    FAILS(cadre_iprobe(0, 0, W, NULL, &st), CADRE_ERR_ARG, "cadre_iprobe: flag is NULL");
    FAILS(cadre_probe(0, 0, CADRE_COMM_NULL, &st), CADRE_ERR_STATE, "cadre_probe");
    FAILS(cadre_iprobe(0, 0, CADRE_COMM_NULL, &flag, &st), CADRE_ERR_STATE, "cadre_iprobe");
    cadre_comm_t dup, stale;
    OK(cadre_comm_dup(W, &dup));
    stale = dup;
    OK(cadre_comm_free(&dup));
    FAILS(cadre_iprobe(0, 0, stale, &flag, &st), CADRE_ERR_STATE, "cadre_iprobe");
    EXPECT(flag == 9 && same_status(&st, &SENTINEL), "a failed probe wrote its outputs");
}

/* ---- waitany, testany, testall --------------------------------------------------------- */

static void test_any_null(void)
{
    int idx = 77, flag = 77;
    cadre_status_t st = SENTINEL, sts[3] = {SENTINEL, SENTINEL, SENTINEL};
    cadre_request_t nul[3] = {CADRE_REQUEST_NULL, CADRE_REQUEST_NULL, CADRE_REQUEST_NULL};
    OK(cadre_waitany(0, NULL, &idx, &st));
    EXPECT(idx == CADRE_UNDEFINED && is_empty(&st), "waitany(0): index %d", idx);
    idx = 77, st = SENTINEL;
    OK(cadre_waitany(3, nul, &idx, &st));
    EXPECT(idx == CADRE_UNDEFINED && is_empty(&st), "waitany(all null): index %d", idx);
    OK(cadre_waitany(3, nul, &idx, CADRE_STATUS_IGNORE));
    idx = 77, st = SENTINEL;
    OK(cadre_testany(3, nul, &idx, &flag, &st));
    EXPECT(idx == CADRE_UNDEFINED && flag == 1 && is_empty(&st), "testany(all null): %d %d", idx,
           flag);
    flag = 77;
    OK(cadre_testall(3, nul, &flag, sts));
    EXPECT(flag == 1 && is_empty(&sts[0]) && is_empty(&sts[2]), "testall(all null): flag %d",
           flag);
    flag = 77;
    OK(cadre_testall(0, NULL, &flag, CADRE_STATUS_IGNORE));
    EXPECT(flag == 1, "testall(0): flag %d", flag);
}

static void test_any_args(void)
{
    int idx = 77, flag = 77, x = 0;
    cadre_status_t st = SENTINEL;
    cadre_request_t reqs[2];
    /* A pending receive: the failed calls must leave it as it is. */
    OK(cadre_irecv(&x, 1, CADRE_INT32, me, 90, W, &reqs[0]));
    reqs[1] = (cadre_request_t)(uintptr_t)0x1234;
    FAILS(cadre_waitany(-1, reqs, &idx, &st), CADRE_ERR_ARG, "cadre_waitany: n -1 is negative");
    FAILS(cadre_waitany(2, NULL, &idx, &st), CADRE_ERR_ARG, "cadre_waitany: reqs is NULL with n 2");
    FAILS(cadre_waitany(1, reqs, NULL, &st), CADRE_ERR_ARG, "cadre_waitany: index is NULL");
    FAILS(cadre_waitany(2, reqs, &idx, &st), CADRE_ERR_ARG, "reqs[1]");
    FAILS(cadre_testany(1, reqs, &idx, NULL, &st), CADRE_ERR_ARG, "cadre_testany: flag is NULL");
    FAILS(cadre_testany(1, reqs, NULL, &flag, &st), CADRE_ERR_ARG, "cadre_testany: index is NULL");
    FAILS(cadre_testany(-3, reqs, &idx, &flag, &st), CADRE_ERR_ARG, "n -3 is negative");
    FAILS(cadre_testany(2, reqs, &idx, &flag, &st), CADRE_ERR_ARG, "not a request handle");
    FAILS(cadre_testall(1, reqs, NULL, &st), CADRE_ERR_ARG, "cadre_testall: flag is NULL");
    FAILS(cadre_testall(2, NULL, &flag, &st), CADRE_ERR_ARG, "cadre_testall: reqs is NULL");
    FAILS(cadre_testall(2, reqs, &flag, &st), CADRE_ERR_ARG, "cadre_testall: reqs[1]");
    EXPECT(idx == 77 && flag == 77 && same_status(&st, &SENTINEL),
           "failed calls wrote outputs: index %d flag %d", idx, flag);
    /* A stale copy of a released request. */
    int y = 5;
    cadre_request_t s, copy;
    OK(cadre_isend(&y, 1, CADRE_INT32, me, 90, W, &s));
    copy = s;
    OK(cadre_wait(&s, CADRE_STATUS_IGNORE));
    reqs[1] = copy;
    FAILS(cadre_waitany(2, reqs, &idx, &st), CADRE_ERR_STATE, "cadre_waitany: reqs[1] is a stale");
    FAILS(cadre_testany(2, reqs, &idx, &flag, &st), CADRE_ERR_STATE, "reqs[1] is a stale");
    FAILS(cadre_testall(2, reqs, &flag, &st), CADRE_ERR_STATE, "reqs[1] is a stale");
    EXPECT(idx == 77 && flag == 77 && same_status(&st, &SENTINEL), "failed calls wrote outputs");
    /* The receive was left alone: the send above completes it. */
    OK(cadre_waitany(1, reqs, &idx, &st));
    EXPECT(idx == 0 && st.source == me && st.tag == 90 && st.count == 1 && x == 5,
           "waitany of the self receive: index %d count %zu x %d", idx, st.count, x);
    EXPECT(reqs[0] == CADRE_REQUEST_NULL, "waitany left reqs[0] set");
}

/* Ranks 0 and 1: rank 1 sends what rank 0's requests wait for, and holds
 * back some until rank 0 says go (tag 13), so that they are pending. */
static void go(int to)
{
    int g = 1;
    OK(cadre_send(&g, 1, CADRE_INT32, to, 13, W));
}

static void wait_go(int from)
{
    int g;
    OK(cadre_recv(&g, 1, CADRE_INT32, from, 13, W, CADRE_STATUS_IGNORE));
}

static void test_any_mix(void)
{
    if (me == 1) {
        double d[3] = {1.5, -2.25, 3.125};
        int v[4] = {10, 20, 30, 40}, u;
        OK(cadre_send(d, 3, CADRE_FLOAT64, 0, 12, W));
        wait_go(0);
        OK(cadre_send(v, 4, CADRE_INT32, 0, 11, W));
        /* the lowest complete index */
        OK(cadre_recv(&u, 1, CADRE_INT32, 0, 22, W, CADRE_STATUS_IGNORE));
        OK(cadre_recv(&u, 1, CADRE_INT32, 0, 23, W, CADRE_STATUS_IGNORE));
        wait_go(0);
        u = 2121;
        OK(cadre_send(&u, 1, CADRE_INT32, 0, 21, W));
        return;
    }
    if (me != 0)
        return;
    double d[3] = {0};
    int v[4] = {0}, idx = 77, flag = 77;
    cadre_status_t st = SENTINEL, sts[4];
    cadre_request_t reqs[4] = {CADRE_REQUEST_NULL, CADRE_REQUEST_NULL, CADRE_REQUEST_NULL,
                               CADRE_REQUEST_NULL};
    OK(cadre_irecv(v, 4, CADRE_INT32, 1, 11, W, &reqs[1]));
    OK(cadre_irecv(d, 3, CADRE_FLOAT64, 1, 12, W, &reqs[3]));
    OK(cadre_waitany(4, reqs, &idx, &st));
    EXPECT(idx == 3 && st.source == 1 && st.tag == 12 && st.count == 3 &&
               st.error == CADRE_SUCCESS && d[0] == 1.5 && d[1] == -2.25 && d[2] == 3.125,
           "waitany: index %d source %d tag %d count %zu d %g %g %g", idx, st.source, st.tag,
           st.count, d[0], d[1], d[2]);
    EXPECT(reqs[3] == CADRE_REQUEST_NULL && reqs[1] != CADRE_REQUEST_NULL, "waitany's requests");
    /* Tag 11 is not sent before go: nothing is complete. */
    st = SENTINEL;
    OK(cadre_testany(4, reqs, &idx, &flag, &st));
    EXPECT(flag == 0 && idx == CADRE_UNDEFINED && same_status(&st, &SENTINEL) &&
               reqs[1] != CADRE_REQUEST_NULL,
           "testany before go: flag %d index %d", flag, idx);
    for (int i = 0; i < 4; i++)
        sts[i] = SENTINEL;
    flag = 77;
    OK(cadre_testall(4, reqs, &flag, sts));
    EXPECT(flag == 0 && same_status(&sts[1], &SENTINEL) && reqs[1] != CADRE_REQUEST_NULL,
           "testall before go: flag %d", flag);
    go(1);
    flag = 0;
    double t0 = ru_now();
    while (!flag && ru_now() - t0 < 120)
        OK(cadre_testany(4, reqs, &idx, &flag, &st));
    EXPECT(flag == 1 && idx == 1 && st.source == 1 && st.tag == 11 && st.count == 4 &&
               v[0] == 10 && v[3] == 40,
           "testany after go: flag %d index %d count %zu v %d..%d", flag, idx, st.count, v[0],
           v[3]);
    OK(cadre_waitany(4, reqs, &idx, &st));
    EXPECT(idx == CADRE_UNDEFINED && is_empty(&st), "waitany of none left: index %d", idx);

    /* Complete requests are taken lowest index first; a pending one waits. */
    int a = 1, b = 2, c = 0;
    OK(cadre_irecv(&c, 1, CADRE_INT32, 1, 21, W, &reqs[0]));
    OK(cadre_isend(&a, 1, CADRE_INT32, 1, 22, W, &reqs[1]));
    OK(cadre_isend(&b, 1, CADRE_INT32, 1, 23, W, &reqs[2]));
    OK(cadre_waitany(3, reqs, &idx, &st));
    EXPECT(idx == 1 && st.error == CADRE_SUCCESS, "waitany of two sends: index %d", idx);
    OK(cadre_waitany(3, reqs, &idx, &st));
    EXPECT(idx == 2, "waitany of the second send: index %d", idx);
    EXPECT(reqs[0] != CADRE_REQUEST_NULL, "the receive was released");
    go(1);
    OK(cadre_waitany(3, reqs, &idx, &st));
    EXPECT(idx == 0 && c == 2121 && st.tag == 21, "waitany of the receive: index %d c %d", idx, c);
}

/* A truncated receive in each call: reported as cadre_waitall reports it. */
static void test_any_errors(void)
{
    if (me == 1) {
        int v[5] = {1, 2, 3, 4, 5};
        OK(cadre_send(v, 5, CADRE_INT32, 0, 31, W));
        OK(cadre_send(v, 3, CADRE_INT32, 0, 32, W));
        OK(cadre_send(v, 4, CADRE_INT32, 0, 33, W));
        OK(cadre_send(v, 2, CADRE_INT32, 0, 34, W));
        return;
    }
    if (me != 0)
        return;
    int v[5] = {0}, w[4] = {0}, idx = 77, flag = 0;
    cadre_status_t st = SENTINEL, sts[2];
    cadre_request_t reqs[2] = {CADRE_REQUEST_NULL, CADRE_REQUEST_NULL};
    OK(cadre_irecv(v, 2, CADRE_INT32, 1, 31, W, &reqs[1]));
    FAILS(cadre_waitany(2, reqs, &idx, &st), CADRE_ERR_TRUNCATE, "cadre_waitany: reqs[1]: ");
    EXPECT(strstr(cadre_last_error(), "longer than the receive buffer") != NULL, "%s",
           cadre_last_error());
    EXPECT(idx == 1 && st.error == CADRE_ERR_TRUNCATE && st.source == 1 && st.tag == 31 &&
               st.count == 2 && reqs[1] == CADRE_REQUEST_NULL && v[0] == 1 && v[1] == 2,
           "truncated waitany: index %d error %d count %zu", idx, st.error, st.count);

    OK(cadre_irecv(v, 1, CADRE_INT32, 1, 32, W, &reqs[0]));
    int rc = CADRE_SUCCESS;
    double t0 = ru_now();
    while (!flag && rc == CADRE_SUCCESS && ru_now() - t0 < 120)
        rc = cadre_testany(2, reqs, &idx, &flag, &st);
    EXPECT(rc == CADRE_ERR_TRUNCATE && flag == 1 && idx == 0 && st.error == CADRE_ERR_TRUNCATE &&
               reqs[0] == CADRE_REQUEST_NULL,
           "truncated testany: %s flag %d index %d", cadre_error_string(rc), flag, idx);
    EXPECT(strstr(cadre_last_error(), "cadre_testany: reqs[0]: ") != NULL, "%s",
           cadre_last_error());

    OK(cadre_irecv(w, 4, CADRE_INT32, 1, 33, W, &reqs[0]));
    OK(cadre_irecv(v, 1, CADRE_INT32, 1, 34, W, &reqs[1]));
    flag = 0, rc = CADRE_SUCCESS;
    t0 = ru_now();
    while (!flag && rc == CADRE_SUCCESS && ru_now() - t0 < 120)
        rc = cadre_testall(2, reqs, &flag, sts);
    EXPECT(rc == CADRE_ERR_TRUNCATE && flag == 1, "truncated testall: %s flag %d",
           cadre_error_string(rc), flag);
    EXPECT(strstr(cadre_last_error(), "cadre_testall: reqs[1]: ") != NULL, "%s",
           cadre_last_error());
    EXPECT(sts[0].error == CADRE_SUCCESS && sts[0].count == 4 && w[3] == 4 &&
               sts[1].error == CADRE_ERR_TRUNCATE && sts[1].count == 1 &&
               reqs[0] == CADRE_REQUEST_NULL && reqs[1] == CADRE_REQUEST_NULL,
           "testall statuses: %d/%zu %d/%zu", sts[0].error, sts[0].count, sts[1].error,
           sts[1].count);
}

/* A probe and a waitany that wait on a rank computing outside cadre for a
 * second and a half sleep instead of spinning: they use a small part of
 * the core (the bound holds the more, the busier the machine). */
static void test_no_spin(void)
{
    if (me == 1) {
        int x = 42;
        for (int k = 0; k < 2; k++) {
            wait_go(0);
            usleep(1500 * 1000);
            OK(cadre_send(&x, 1, CADRE_INT32, 0, 41 + k, W));
        }
        return;
    }
    if (me != 0)
        return;
    int x = 0, idx;
    cadre_request_t reqs[2] = {CADRE_REQUEST_NULL, CADRE_REQUEST_NULL};
    OK(cadre_irecv(&x, 1, CADRE_INT32, 1, 41, W, &reqs[1]));
    go(1);
    double c0 = cpu_now(), t0 = ru_now();
    OK(cadre_waitany(2, reqs, &idx, CADRE_STATUS_IGNORE));
    double cpu = cpu_now() - c0, wall = ru_now() - t0;
    EXPECT(idx == 1 && x == 42, "waitany: index %d x %d", idx, x);
    EXPECT(cpu < 0.5 * wall, "waitany used %.3f s of CPU in %.3f s", cpu, wall);
    go(1);
    cadre_status_t st;
    c0 = cpu_now(), t0 = ru_now();
    OK(cadre_probe(1, 42, W, &st));
    cpu = cpu_now() - c0, wall = ru_now() - t0;
    EXPECT(st.count == 1, "probe: count %zu", st.count);
    EXPECT(cpu < 0.5 * wall, "probe used %.3f s of CPU in %.3f s", cpu, wall);
    OK(cadre_recv(&x, 1, CADRE_INT32, 1, 42, W, CADRE_STATUS_IGNORE));
}

/* ---- failures: no progress, a dead peer ----------------------------------------------------- */

static void test_no_progress(void)
{
    const char *t = getenv("CADRE_TIMEOUT");
    if (!t || atof(t) > 5) {
        EXPECT(0, "PROBE_TESTS=no_progress needs CADRE_TIMEOUT of 5 s or less");
        return;
    }
    if (me == 0) {
        cadre_status_t st = SENTINEL;
        double t0 = ru_now();
        FAILS(cadre_probe(1, 777, W, &st), CADRE_ERR_TIMEOUT, "made no progress");
        EXPECT(ru_now() - t0 >= atof(t) * 0.9, "timed out after %.2f s", ru_now() - t0);
        EXPECT(strstr(cadre_last_error(), "cadre_probe from rank 1 (tag 777) on WORLD") != NULL, "%s",
               cadre_last_error());
        EXPECT(same_status(&st, &SENTINEL), "a failed probe wrote the status");
        int x, idx = 77;
        cadre_request_t reqs[2] = {CADRE_REQUEST_NULL, CADRE_REQUEST_NULL};
        OK(cadre_irecv(&x, 1, CADRE_INT32, 1, 778, W, &reqs[1]));
        FAILS(cadre_waitany(2, reqs, &idx, &st), CADRE_ERR_TIMEOUT,
              "cadre_waitany: reqs[1]: cadre_irecv from rank 1 (tag 778) on WORLD made no progress");
        EXPECT(idx == 1 && reqs[1] == CADRE_REQUEST_NULL && st.error == CADRE_ERR_TIMEOUT,
               "waitany's timeout: index %d error %d", idx, st.error);
    } else {
        /* Busy outside cadre meanwhile. */
        usleep((useconds_t)((2 * atof(t) + 1.5) * 1e6));
    }
}

static void test_peerfail(void)
{
    if (np != 2) {
        EXPECT(0, "PROBE_TESTS=peerfail needs 2 ranks");
        return;
    }
    int x = 0;
    if (me == 1) {
        OK(cadre_recv(&x, 1, CADRE_INT32, 0, 1, W, CADRE_STATUS_IGNORE)); /* rank 0 probes */
        usleep(200 * 1000);
        raise(SIGKILL);
    }
    OK(cadre_send(&x, 1, CADRE_INT32, 1, 1, W));
    cadre_status_t st = SENTINEL;
    FAILS(cadre_probe(1, 5, W, &st), CADRE_ERR_PEER, "cadre_probe: peer rank 1");
    int flag = 7;
    FAILS(cadre_iprobe(1, 5, W, &flag, &st), CADRE_ERR_PEER, "cadre_iprobe: peer rank 1");
    FAILS(cadre_iprobe(CADRE_ANY_SOURCE, 5, W, &flag, &st), CADRE_ERR_PEER,
          "from CADRE_ANY_SOURCE while rank 1");
    FAILS(cadre_probe(CADRE_ANY_SOURCE, CADRE_ANY_TAG, W, &st), CADRE_ERR_PEER, "rank 1");
    EXPECT(flag == 7 && same_status(&st, &SENTINEL), "failed probes wrote their outputs");
    /* A message from this rank itself is still found. */
    OK(cadre_send(&x, 1, CADRE_INT32, 0, 6, W));
    OK(cadre_probe(CADRE_ANY_SOURCE, 6, W, &st));
    EXPECT(st.source == 0 && st.count == 1, "self message: source %d", st.source);
    OK(cadre_finalize());
    if (!ru_failures)
        printf("probe peerfail: ok\n");
    else
        fprintf(stderr, "[rank %d] probe_test: %d failures\n", me, ru_failures);
    exit(ru_failures ? 1 : 0);
}

int main(int argc, char **argv)
{
    int provided;
    if (cadre_init_thread(&argc, &argv, CADRE_THREAD_MULTIPLE, &provided) != CADRE_SUCCESS) {
        fprintf(stderr, "probe_test: cadre_init: %s\n", cadre_last_error());
        return 1;
    }
    cadre_comm_rank(W, &me);
    cadre_comm_size(W, &np);
    ru_rank = me;
    if (np < 2) {
        fprintf(stderr, "probe_test: needs 2 ranks or more\n");
        return 2;
    }
    const char *only = getenv("PROBE_TESTS");
    if (only && !strcmp(only, "no_progress")) {
        test_no_progress();
    } else if (only && !strcmp(only, "peerfail")) {
        test_peerfail();
    } else {
        test_probe_args();
        test_any_null();
        test_any_args();
        test_specific();
        test_wildcards();
        test_arrived_and_comms();
        test_threads();
        test_any_mix();
        test_any_errors();
        test_no_spin();
    }
    OK(cadre_barrier(W));
    cadre_finalize();
    if (ru_failures)
        fprintf(stderr, "[rank %d] probe_test: %d failures\n", me, ru_failures);
    return ru_failures ? 1 : 0;
}
