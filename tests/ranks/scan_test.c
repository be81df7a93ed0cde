/* Prefix reductions on host memory: cadre_scan, cadre_exscan and their
 * nonblocking twins, every datatype and op, counts {0, 1, 7, 1000, big},
 * in place and not, checked element by element against a reference each
 * rank computes from the inputs of ranks 0..me (CADRE_AVG: their mean);
 * exscan must leave rank 0's recvbuf as it was, and a reduction's sendbuf
 * must be as it was. Then the argument errors, and the same call twice
 * giving the same bits (the order of the reductions is fixed).
 *
 * SCAN_BIG sets the large count (default 100003); CADRE_ALGO=scan=...,
 * exscan=... picks the algorithm (recursive_doubling, linear); FAKE_HOSTS
 * places the ranks on fake hosts (fake_hosts.h). */
#include <stdlib.h>

#include "coll_data.h"
#include "fake_hosts.h"
#include "rank_util.h"

#define W CADRE_COMM_WORLD
static int me, np;

/* The scan of element i over ranks 0..last (none when last < 0). */
static double expected(size_t i, cadre_datatype_t dt, int op, int last)
{
    double acc = input(0, i, dt, op);
    for (int r = 1; r <= last; r++)
        acc = combine(acc, input(r, i, dt, op), op);
    if (op == CADRE_AVG)
        acc /= last + 1;
    return acc;
}

static void *filled(size_t n, cadre_datatype_t dt, int op, int sentinel)
{
    size_t es = cadre_datatype_size(dt);
    unsigned char *p = malloc(n * es + 16);
    memset(p, 0xA5, n * es + 16);
    if (!sentinel) {
        double mine[INPUT_PERIOD];
        for (size_t k = 0; k < INPUT_PERIOD; k++)
            mine[k] = input(me, k, dt, op);
        for (size_t i = 0; i < n; i++)
            set(p, dt, i, mine[i % INPUT_PERIOD]);
    }
    return p;
}

/* The first element of got (n elements) that is not the scan over ranks
 * 0..last, reported; 0xA5 bytes stay past the end. */
static void compare(const char *what, const void *got, size_t n, size_t di, int op, int last)
{
    cadre_datatype_t dt = dts[di];
    /* The references repeat every INPUT_PERIOD elements, as input() does
     * (coll_data.h): one period of them, not a scan per element. */
    double want[INPUT_PERIOD];
    for (size_t k = 0; k < INPUT_PERIOD; k++)
        want[k] = expected(k, dt, op, last);
    for (size_t i = 0; i < n; i++) {
        double g = get(got, dt, i), w = want[i % INPUT_PERIOD];
        if (!close_enough(g, w, dt, op)) {
            EXPECT(0, "%s %s/%s n=%zu: element %zu is %g, expected %g", what, dt_names[di],
                   op_names[op], n, i, g, w);
            return;
        }
    }
    const unsigned char *tail = (const unsigned char *)got + n * cadre_datatype_size(dt);
    for (int k = 0; k < 16; k++)
        if (tail[k] != 0xA5) {
            EXPECT(0, "%s %s/%s n=%zu: byte %d past the end was written", what, dt_names[di],
                   op_names[op], n, k);
            return;
        }
}

/* The input as it was (a sendbuf afterwards). */
static void intact(const char *what, const void *buf, size_t n, size_t di, int op)
{
    double mine[INPUT_PERIOD];
    for (size_t k = 0; k < INPUT_PERIOD; k++)
        mine[k] = input(me, k, dts[di], op);
    for (size_t i = 0; i < n; i++)
        if (get(buf, dts[di], i) != mine[i % INPUT_PERIOD]) {
            EXPECT(0, "%s %s/%s n=%zu: sendbuf element %zu changed", what, dt_names[di],
                   op_names[op], n, i);
            return;
        }
}

static int call(int excl, int nb, const void *s, void *r, size_t n, cadre_datatype_t dt, int op)
{
    int rc;
    if (!nb)
        return excl ? cadre_exscan(s, r, n, dt, (cadre_op_t)op, W)
                    : cadre_scan(s, r, n, dt, (cadre_op_t)op, W);
    cadre_request_t q = CADRE_REQUEST_NULL;
    rc = excl ? cadre_iexscan(s, r, n, dt, (cadre_op_t)op, W, &q)
              : cadre_iscan(s, r, n, dt, (cadre_op_t)op, W, &q);
    if (rc == CADRE_SUCCESS)
        rc = cadre_wait(&q, NULL);
    return rc;
}

static void one(int excl, int nb, int inplace, size_t di, int op, size_t n)
{
    cadre_datatype_t dt = dts[di];
    size_t es = cadre_datatype_size(dt);
    char what[64];
    snprintf(what, sizeof what, "%s%s%s", nb ? "cadre_i" : "cadre_", excl ? "exscan" : "scan",
             inplace ? " in place" : "");
    void *in = filled(n, dt, op, 0), *out = filled(n, dt, op, inplace ? 0 : 1);
    unsigned char *before = malloc(n * es + 16);
    memcpy(before, out, n * es + 16);
    int rc = call(excl, nb, inplace ? CADRE_IN_PLACE : in, out, n, dt, op);
    EXPECT(rc == CADRE_SUCCESS, "%s %s/%s n=%zu: %s: %s", what, dt_names[di], op_names[op], n,
           cadre_error_string(rc), cadre_last_error());
    if (rc == CADRE_SUCCESS) {
        if (excl && me == 0)
            EXPECT(!memcmp(before, out, n * es + 16), "%s %s/%s n=%zu: rank 0's recvbuf changed",
                   what, dt_names[di], op_names[op], n);
        else
            compare(what, out, n, di, op, excl ? me - 1 : me);
        if (!inplace)
            intact(what, in, n, di, op);
    }
    free(in), free(out), free(before);
}

/* The same arguments twice: the same bits (floats, where the grouping of a
 * sum could show; values that are not integers). */
static void same_bits(size_t n)
{
    double *in = malloc(n * sizeof *in), *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    for (size_t i = 0; i < n; i++)
        in[i] = 1.0 / (double)(3 + i % 11 + (size_t)me * 7) + 1e10 * (double)(i % 3);
    OK(cadre_scan(in, a, n, CADRE_FLOAT64, CADRE_SUM, W));
    cadre_request_t q;
    OK(cadre_iscan(in, b, n, CADRE_FLOAT64, CADRE_SUM, W, &q));
    OK(cadre_wait(&q, NULL));
    EXPECT(!memcmp(a, b, n * sizeof *a), "scan of %zu float64 twice: different bits", n);
    free(in), free(a), free(b);
}

static void errors(void)
{
    int32_t x[4] = {0}, y[4] = {0};
    cadre_request_t q;
    FAILS(cadre_scan(x, y, 4, CADRE_INT32, CADRE_AVG, W), CADRE_ERR_ARG,
          "cadre_scan: CADRE_AVG is valid for floating-point datatypes only");
    FAILS(cadre_exscan(x, y, 4, (cadre_datatype_t)42, CADRE_SUM, W), CADRE_ERR_ARG,
          "cadre_exscan: unknown datatype 42");
    FAILS(cadre_iscan(x, y, 4, CADRE_INT32, (cadre_op_t)9, W, &q), CADRE_ERR_ARG,
          "cadre_iscan: unknown op 9");
    FAILS(cadre_iexscan(x, y, 4, CADRE_INT32, CADRE_SUM, W, NULL), CADRE_ERR_ARG,
          "cadre_iexscan: req is NULL");
    FAILS(cadre_scan(x, NULL, 4, CADRE_INT32, CADRE_SUM, W), CADRE_ERR_ARG,
          "cadre_scan: recvbuf is NULL");
    FAILS(cadre_exscan(x, x + 1, 2, CADRE_INT32, CADRE_SUM, W), CADRE_ERR_ARG, "cadre_exscan");
    FAILS(cadre_scan(x, y, 4, CADRE_INT32, CADRE_SUM, CADRE_COMM_NULL), CADRE_ERR_STATE,
          "cadre_scan");
}

int main(int argc, char **argv)
{
    fake_hosts_setenv();
    OK(cadre_init(&argc, &argv));
    OK(cadre_comm_rank(W, &me));
    OK(cadre_comm_size(W, &np));
    ru_rank = me;
    const char *big = getenv("SCAN_BIG");
    size_t counts[] = {0, 1, 7, 1000, big ? strtoull(big, NULL, 10) : 100003};
    EXPECT(input_periodic(me, counts[4]), "input() does not repeat every %d elements: "
           "scan_test's references (one period of it) would be wrong", INPUT_PERIOD);
    for (int excl = 0; excl < 2; excl++)
        for (size_t di = 0; di < sizeof dts / sizeof *dts; di++)
            for (int op = 0; op <= CADRE_AVG; op++) {
                int isf = dts[di] == CADRE_FLOAT16 || dts[di] == CADRE_BFLOAT16 ||
                          dts[di] == CADRE_FLOAT32 || dts[di] == CADRE_FLOAT64;
                if (op == CADRE_AVG && !isf)
                    continue;
                for (int ci = 0; ci < 5; ci++)
                    for (int v = 0; v < 4; v++)
                        one(excl, v & 1, v >> 1, di, op, counts[ci]);
            }
    same_bits(1000);
    same_bits(100003);
    errors();
    OK(cadre_finalize());
    if (ru_failures)
        fprintf(stderr, "[rank %d] scan_test: %d failure(s)\n", me, ru_failures);
    else if (me == 0)
        printf("scan_test: ok\n");
    return ru_failures ? 1 : 0;
}
