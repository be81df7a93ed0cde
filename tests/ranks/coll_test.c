/* Collectives on host memory: every collective, every datatype, every op,
 * counts {0, 1, 7, 1000, big}, every root, blocking and nonblocking, in place
 * and not, checked element by element against a reference each rank computes
 * serially from the inputs it can regenerate for every rank.
 *
 * COLL_BIG sets the large count (default 1M+3); CADRE_ALGO picks algorithms;
 * FAKE_HOSTS places the ranks on fake hosts (fake_hosts.h); COLL_TESTS picks
 * test families by name.
 *
 * This file: main, the reductions, the data movers, barrier, overlapping
 * calls and bad arguments; coll_test_v.c holds the v-variants (vvariants,
 * vslots). Both share coll_test.h. */
#include <math.h>

#include "fake_hosts.h"
#include "coll_test.h"

int ru_rank = -1, ru_failures;
int me, np;
size_t big_count = (1u << 20) + 3;

static double expected_reduce(size_t i, cadre_datatype_t dt, int op)
{
    double acc = input(0, i, dt, op);
    for (int r = 1; r < np; r++)
        acc = combine(acc, input(r, i, dt, op), op);
    if (op == CADRE_AVG)
        acc /= np;
    return acc;
}

size_t counts[5];
int ncounts;

void *alloc(size_t n, size_t es)
{
    void *p = malloc(n * es + 16);
    if (!p) {
        fprintf(stderr, "coll_test: cannot allocate %zu bytes\n", n * es + 16);
        exit(1);
    }
    memset(p, 0xA5, n * es + 16);
    return p;
}

/* Whether all `bytes` at p still hold alloc's fill. */
static int untouched(const void *p, size_t bytes)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < bytes; i++)
        if (c[i] != 0xA5)
            return 0;
    return 1;
}

int ok_call(int rc, const char *what)
{
    EXPECT(rc == CADRE_SUCCESS, "%s: %s", what, cadre_last_error());
    return rc == CADRE_SUCCESS;
}

/* The ring algorithms send and reduce straight from a reduction's input
 * instead of copying it to the output first: it must be as it was. */
static void input_intact(const char *call, const char *in, size_t n, size_t di, int op,
                         const double *mine)
{
    char label[64];
    snprintf(label, sizeof label, "%s's sendbuf afterwards", call);
    COMPARE(label, in, mine[i_ % INPUT_PERIOD], dts[di], op);
}

static void test_reductions(int nb)
{
    for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++) {
        cadre_datatype_t dt = dts[di];
        size_t es = cadre_datatype_size(dt);
        int isf = dt == CADRE_FLOAT16 || dt == CADRE_BFLOAT16 || dt == CADRE_FLOAT32 ||
                  dt == CADRE_FLOAT64;
        for (int op = 0; op <= CADRE_AVG; op++) {
            if (op == CADRE_AVG && !isf)
                continue;
            for (int ci = 0; ci < ncounts; ci++) {
                size_t n = counts[ci];
                /* The big count on a subset of types keeps the run short. */
                if (n == big_count && !(dt == CADRE_FLOAT32 || dt == CADRE_INT64 || dt == CADRE_BFLOAT16))
                    continue;
                char *in = alloc(n, es), *out = alloc(n, es);
                /* This rank's input and the reference (element i of the
                 * result), over one period of input() (coll_data.h): they
                 * repeat every INPUT_PERIOD elements. Reducing every rank's
                 * input for each element (2 x np x 1M input() calls per
                 * datatype and op) was most of this program's time, which
                 * on a loaded machine is its run time. ref_at(i) is the
                 * reference of element i, rs_at(i) that of element i of
                 * this rank's reduce_scatter block. */
                double mine[INPUT_PERIOD], ref[INPUT_PERIOD];
                for (size_t k = 0; k < INPUT_PERIOD; k++) {
                    mine[k] = input(me, k, dt, op);
                    ref[k] = expected_reduce(k, dt, op);
                }
                size_t rs_off = ((size_t)me * n) % INPUT_PERIOD;
#define ref_at(i) ref[(i) % INPUT_PERIOD]
#define rs_at(i) ref[(rs_off + (i) % INPUT_PERIOD) % INPUT_PERIOD]
                for (size_t i = 0; i < n; i++)
                    set(in, dt, i, mine[i % INPUT_PERIOD]);
                /* allreduce, out of place then in place */
                RUN(cadre_allreduce(in, out, n, dt, op, W),
                    cadre_iallreduce(in, out, n, dt, op, W, &rq_));
                COMPARE("allreduce", out, ref_at(i_), dt, op);
                input_intact("allreduce", in, n, di, op, mine);
                memcpy(out, in, n * es);
                RUN(cadre_allreduce(CADRE_IN_PLACE, out, n, dt, op, W),
                    cadre_iallreduce(CADRE_IN_PLACE, out, n, dt, op, W, &rq_));
                COMPARE("allreduce in place", out, ref_at(i_), dt, op);
                /* reduce to every root */
                for (int root = 0; root < np; root++) {
                    memset(out, 0xA5, n * es);
                    RUN(cadre_reduce(in, out, n, dt, op, root, W),
                        cadre_ireduce(in, out, n, dt, op, root, W, &rq_));
                    if (me == root)
                        COMPARE("reduce", out, ref_at(i_), dt, op);
                    else
                        EXPECT((unsigned char)out[0] == 0xA5 || n == 0,
                               "reduce wrote recvbuf on a non-root");
                    /* in place at the root; NULL recvbuf elsewhere (not
                     * the call's: never looked at) */
                    memcpy(out, in, n * es);
                    RUN(cadre_reduce(me == root ? CADRE_IN_PLACE : in, me == root ? out : NULL,
                                     n, dt, op, root, W),
                        cadre_ireduce(me == root ? CADRE_IN_PLACE : in, me == root ? out : NULL,
                                      n, dt, op, root, W, &rq_));
                    if (me == root)
                        COMPARE("reduce in place", out, ref_at(i_), dt, op);
                    input_intact("reduce", in, n, di, op, mine);
                }
                /* reduce_scatter: block r of every rank's n*np input */
                char *rin = alloc(n * (size_t)np, es);
                for (size_t i = 0; i < n * (size_t)np; i++)
                    set(rin, dt, i, mine[i % INPUT_PERIOD]);
                RUN(cadre_reduce_scatter(rin, out, n, dt, op, W),
                    cadre_ireduce_scatter(rin, out, n, dt, op, W, &rq_));
                COMPARE("reduce_scatter", out, rs_at(i_), dt, op);
                input_intact("reduce_scatter", rin, n * (size_t)np, di, op, mine);
                RUN(cadre_reduce_scatter(CADRE_IN_PLACE, rin, n, dt, op, W),
                    cadre_ireduce_scatter(CADRE_IN_PLACE, rin, n, dt, op, W, &rq_));
                COMPARE("reduce_scatter in place", rin, rs_at(i_), dt, op);
#undef ref_at
#undef rs_at
                free(rin);
                free(in);
                free(out);
            }
        }
    }
}

/* Data movers: the value says who sent it and where it belongs. */
double tagval(int from, size_t i, int to)
{
    return (double)((from * 37 + (int)(i % 101) * 3 + to * 11) % 120);
}

static void test_movers(int nb)
{
    for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++) {
        cadre_datatype_t dt = dts[di];
        size_t es = cadre_datatype_size(dt);
        int op = -1;
        for (int ci = 0; ci < ncounts; ci++) {
            size_t n = counts[ci];
            if (n == big_count && dt != CADRE_FLOAT32 && dt != CADRE_UINT8)
                continue;
            size_t all = n * (size_t)np;
            char *a = alloc(all, es), *b = alloc(all, es);
            for (int root = 0; root < np; root++) {
                /* bcast */
                for (size_t i = 0; i < n; i++)
                    set(a, dt, i, me == root ? tagval(root, i, 0) : 0);
                RUN(cadre_bcast(a, n, dt, root, W), cadre_ibcast(a, n, dt, root, W, &rq_));
                COMPARE("bcast", a, tagval(root, i_, 0), dt, op);
                /* gather */
                for (size_t i = 0; i < n; i++)
                    set(a, dt, i, tagval(me, i, root));
                memset(b, 0xA5, all * es);
                RUN(cadre_gather(a, b, n, dt, root, W), cadre_igather(a, b, n, dt, root, W, &rq_));
                if (me == root)
                    for (int r = 0; r < np; r++)
                        COMPARE("gather", b + (size_t)r * n * es, tagval(r, i_, root), dt, op);
                else
                    EXPECT(untouched(b, all * es + 16), "gather wrote into a non-root's recvbuf "
                           "(%s n=%zu root %d)", dt_names[di], n, root);
                /* gather in place at the root */
                if (me == root)
                    for (size_t i = 0; i < n; i++)
                        set(b + (size_t)me * n * es, dt, i, tagval(me, i, root));
                RUN(cadre_gather(me == root ? CADRE_IN_PLACE : a, b, n, dt, root, W),
                    cadre_igather(me == root ? CADRE_IN_PLACE : a, b, n, dt, root, W, &rq_));
                if (me == root)
                    for (int r = 0; r < np; r++)
                        COMPARE("gather in place", b + (size_t)r * n * es, tagval(r, i_, root), dt,
                                op);
                /* scatter */
                if (me == root)
                    for (int r = 0; r < np; r++)
                        for (size_t i = 0; i < n; i++)
                            set(a, dt, (size_t)r * n + i, tagval(root, i, r));
                memset(b, 0, n * es);
                RUN(cadre_scatter(a, b, n, dt, root, W), cadre_iscatter(a, b, n, dt, root, W, &rq_));
                COMPARE("scatter", b, tagval(root, i_, me), dt, op);
                /* scatter in place at the root: its own block stays in sendbuf,
                 * the others' blocks too */
                memset(b, 0, n * es);
                RUN(cadre_scatter(a, me == root ? CADRE_IN_PLACE : b, n, dt, root, W),
                    cadre_iscatter(a, me == root ? CADRE_IN_PLACE : b, n, dt, root, W, &rq_));
                if (me == root)
                    for (int r = 0; r < np; r++)
                        COMPARE("scatter in place (root's sendbuf)", a + (size_t)r * n * es,
                                tagval(root, i_, r), dt, op);
                else
                    COMPARE("scatter in place", b, tagval(root, i_, me), dt, op);
            }
            /* allgather, out of place and in place */
            for (size_t i = 0; i < n; i++)
                set(a, dt, i, tagval(me, i, 0));
            memset(b, 0xA5, all * es);
            RUN(cadre_allgather(a, b, n, dt, W), cadre_iallgather(a, b, n, dt, W, &rq_));
            for (int r = 0; r < np; r++)
                COMPARE("allgather", b + (size_t)r * n * es, tagval(r, i_, 0), dt, op);
            memset(b, 0xA5, all * es);
            for (size_t i = 0; i < n; i++)
                set(b + (size_t)me * n * es, dt, i, tagval(me, i, 0));
            RUN(cadre_allgather(CADRE_IN_PLACE, b, n, dt, W),
                cadre_iallgather(CADRE_IN_PLACE, b, n, dt, W, &rq_));
            for (int r = 0; r < np; r++)
                COMPARE("allgather in place", b + (size_t)r * n * es, tagval(r, i_, 0), dt, op);
            /* alltoall */
            for (int r = 0; r < np; r++)
                for (size_t i = 0; i < n; i++)
                    set(a, dt, (size_t)r * n + i, tagval(me, i, r));
            RUN(cadre_alltoall(a, b, n, dt, W), cadre_ialltoall(a, b, n, dt, W, &rq_));
            for (int r = 0; r < np; r++)
                COMPARE("alltoall", b + (size_t)r * n * es, tagval(r, i_, me), dt, op);
            RUN(cadre_alltoall(CADRE_IN_PLACE, a, n, dt, W),
                cadre_ialltoall(CADRE_IN_PLACE, a, n, dt, W, &rq_));
            for (int r = 0; r < np; r++)
                COMPARE("alltoall in place", a + (size_t)r * n * es, tagval(r, i_, me), dt, op);
            free(a);
            free(b);
        }
    }
}

static void test_barrier(void)
{
    for (int i = 0; i < 20; i++)
        OK(cadre_barrier(W));
    cadre_request_t r;
    OK(cadre_ibarrier(W, &r));
    OK(cadre_wait(&r, NULL));
}

/* Several nonblocking collectives in flight at once, completed out of order. */
static void test_overlap(void)
{
    enum { K = 6 };
    int32_t in[K][64], out[K][64];
    cadre_request_t reqs[K];
    if (np < 1)
        return;
    for (int k = 0; k < K; k++) {
        for (int i = 0; i < 64; i++)
            in[k][i] = me * 1000 + k * 64 + i;
        OK(cadre_iallreduce(in[k], out[k], 64, CADRE_INT32, CADRE_SUM, W, &reqs[k]));
    }
    for (int k = K - 1; k >= 0; k--)
        OK(cadre_wait(&reqs[k], NULL));
    for (int k = 0; k < K; k++)
        for (int i = 0; i < 64; i++) {
            int32_t want = 0;
            for (int r = 0; r < np; r++)
                want += r * 1000 + k * 64 + i;
            if (out[k][i] != want) {
                EXPECT(0, "overlapped allreduce %d element %d: %d, expected %d", k, i, out[k][i], want);
                break;
            }
        }
}

static void test_bad_input(void)
{
    int x = 1, y = 0;
    cadre_request_t r = CADRE_REQUEST_NULL;
    FAILS(cadre_allreduce(&x, &y, 1, (cadre_datatype_t)42, CADRE_SUM, W), CADRE_ERR_ARG, "datatype");
    FAILS(cadre_allreduce(&x, &y, 1, CADRE_INT32, (cadre_op_t)9, W), CADRE_ERR_ARG, "op");
    FAILS(cadre_allreduce(&x, &y, 1, CADRE_INT32, CADRE_AVG, W), CADRE_ERR_ARG, "CADRE_AVG");
    FAILS(cadre_allreduce(NULL, &y, 1, CADRE_INT32, CADRE_SUM, W), CADRE_ERR_ARG, "sendbuf");
    FAILS(cadre_allreduce(&x, NULL, 1, CADRE_INT32, CADRE_SUM, W), CADRE_ERR_ARG, "recvbuf");
    FAILS(cadre_allreduce(&x, &y, 1, CADRE_INT32, CADRE_SUM, CADRE_COMM_NULL), CADRE_ERR_STATE,
          "CADRE_COMM_NULL");
    FAILS(cadre_allreduce(&x, &y, SIZE_MAX / 2, CADRE_INT32, CADRE_SUM, W), CADRE_ERR_ARG, "overflow");
    FAILS(cadre_bcast(&x, 1, CADRE_INT32, np, W), CADRE_ERR_ARG, "root");
    FAILS(cadre_bcast(&x, 1, CADRE_INT32, -1, W), CADRE_ERR_ARG, "root");
    FAILS(cadre_reduce(&x, &y, 1, CADRE_INT32, CADRE_SUM, np + 3, W), CADRE_ERR_ARG, "root");
    FAILS(cadre_gather(&x, &y, 1, CADRE_INT32, 99, W), CADRE_ERR_ARG, "root");
    FAILS(cadre_scatter(&x, &y, 1, CADRE_INT32, -4, W), CADRE_ERR_ARG, "root");
    FAILS(cadre_iallreduce(&x, &y, 1, CADRE_INT32, CADRE_SUM, W, NULL), CADRE_ERR_ARG, "req");
    FAILS(cadre_ibarrier(W, NULL), CADRE_ERR_ARG, "req");
    FAILS(cadre_allgatherv(&x, 1, &y, NULL, NULL, CADRE_INT32, W), CADRE_ERR_ARG, "recvcounts");
    FAILS(cadre_alltoallv(&x, NULL, NULL, &y, NULL, NULL, CADRE_INT32, W), CADRE_ERR_ARG, "counts");
    FAILS(cadre_bcast(CADRE_IN_PLACE, 1, CADRE_INT32, 0, W), CADRE_ERR_ARG, "CADRE_IN_PLACE");
    FAILS(cadre_allreduce(&x, CADRE_IN_PLACE, 1, CADRE_INT32, CADRE_SUM, W), CADRE_ERR_ARG,
          "CADRE_IN_PLACE");
    EXPECT(r == CADRE_REQUEST_NULL, "no request written on failure");
    /* Everyone is still in step: a collective works afterwards. */
    OK(cadre_allreduce(&x, &y, 1, CADRE_INT32, CADRE_SUM, W));
    EXPECT(y == np, "allreduce after bad calls: %d", y);
}

int main(int argc, char **argv)
{
    fake_hosts_setenv(); /* FAKE_HOSTS: ranks on several hosts of this machine */
    if (cadre_init(&argc, &argv) != CADRE_SUCCESS) {
        fprintf(stderr, "coll_test: cadre_init: %s\n", cadre_last_error());
        return 1;
    }
    cadre_comm_rank(W, &me);
    cadre_comm_size(W, &np);
    if (np < 1 || np > 4096)
        return 1;
    ru_rank = me;
    const char *b = getenv("COLL_BIG");
    if (b)
        big_count = strtoull(b, NULL, 0);
    size_t cs[] = {0, 1, 7, 1000, big_count};
    for (size_t i = 0; i < 5; i++)
        if (cs[i] <= big_count)
            counts[ncounts++] = cs[i];
    struct {
        const char *name;
        void (*fn)(int);
        int nb;
    } tests[] = {{"reductions", test_reductions, 0}, {"reductions-nb", test_reductions, 1},
                 {"movers", test_movers, 0},         {"movers-nb", test_movers, 1},
                 {"vvariants", test_vvariants, 0},   {"vvariants-nb", test_vvariants, 1},
                 {"vslots", test_vslots, 0},         {"vslots-nb", test_vslots, 1}};
    const char *only = getenv("COLL_TESTS");
    EXPECT(input_periodic(me, big_count), "input() does not repeat every %d elements: "
           "coll_test's references (one period of it) would be wrong", INPUT_PERIOD);
    test_bad_input();
    test_barrier();
    test_overlap();
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        if (only && !strstr(only, tests[i].name))
            continue;
        int before = ru_failures;
        double t0 = ru_now();
        tests[i].fn(tests[i].nb);
        OK(cadre_barrier(W));
        if (me == 0)
            printf("coll_test %-14s %s (%.2f s)\n", tests[i].name,
                   ru_failures == before ? "ok" : "FAILED", ru_now() - t0);
        fflush(stdout);
    }
    int rc = cadre_finalize();
    EXPECT(rc == CADRE_SUCCESS, "finalize: %s", cadre_last_error());
    if (ru_failures)
        fprintf(stderr, "[rank %d] %d check(s) failed\n", me, ru_failures);
    return ru_failures ? 1 : 0;
}
