/* The two-rank allreduce of a busy machine (coll_direct_pair.c; run with
 * CADRE_WAIT=sleep, which counts the cores as busy): out of place each rank
 * computes the whole result from its input and the peer's, which neither
 * paces; in place each computes its half and writes it into the peer's
 * output (coll_direct.c). Each call makes one rank late (rank 0, rank 1 or
 * neither), at sizes from one chunk to many, odd counts, float32 sum,
 * int32 max and float64 sum, out of place and in place; every element is
 * checked against the result computed here from both ranks' inputs, and out
 * of place the inputs must be left as they were. */
#include <unistd.h>

#include "rank_util.h"

#define W CADRE_COMM_WORLD

static double input(int rank, size_t i, int salt)
{
    return (double)((i * 7 + (size_t)rank * 13 + (size_t)salt * 5) % 1000) - 500;
}

int main(int argc, char **argv)
{
    int me;
    if (!ru_init_np(&argc, &argv, "loose_test", 2, &me))
        return 2;
    static const size_t counts[] = {16384, 16385, 65536 + 3, 262144 + 17, 1048576 + 5, 4194304 + 1};
    static const cadre_datatype_t types[] = {CADRE_FLOAT32, CADRE_INT32, CADRE_FLOAT64};
    int call = 0;
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
        for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
            for (int late = 0; late < 6; late++, call++) {
                int inpl = late >= 3;
                size_t n = counts[c];
                cadre_datatype_t dt = types[t];
                cadre_op_t op = dt == CADRE_INT32 ? CADRE_MAX : CADRE_SUM;
                size_t es = dt == CADRE_FLOAT64 ? 8 : 4;
                unsigned char *in = malloc(n * es), *out = malloc(n * es);
                EXPECT(in && out, "no memory for %zu elements", n);
                if (!in || !out)
                    break;
                for (size_t i = 0; i < n; i++) {
                    double v = input(me, i, call);
                    if (dt == CADRE_FLOAT32)
                        ((float *)in)[i] = (float)v;
                    else if (dt == CADRE_INT32)
                        ((int32_t *)in)[i] = (int32_t)v;
                    else
                        ((double *)in)[i] = v;
                }
                memset(out, 0xa5, n * es);
                if (late % 3 == me + 1)
                    usleep(20000);
                OK(cadre_allreduce(inpl ? CADRE_IN_PLACE : in, inpl ? in : out, n, dt, op, W));
                const unsigned char *res = inpl ? in : out;
                long wrong = 0, changed = 0;
                for (size_t i = 0; i < n; i++) {
                    double a = input(0, i, call), b = input(1, i, call), mine = input(me, i, call);
                    if (dt == CADRE_FLOAT32) {
                        wrong += ((const float *)res)[i] != (float)a + (float)b;
                        changed += !inpl && ((float *)in)[i] != (float)mine;
                    } else if (dt == CADRE_INT32) {
                        wrong += ((const int32_t *)res)[i] != (int32_t)(a > b ? a : b);
                        changed += !inpl && ((int32_t *)in)[i] != (int32_t)mine;
                    } else {
                        wrong += ((const double *)res)[i] != a + b;
                        changed += !inpl && ((double *)in)[i] != mine;
                    }
                }
                EXPECT(wrong == 0 && changed == 0,
                       "count %zu, type %d, %s, late rank %d: %ld wrong elements, %ld input "
                       "elements changed",
                       n, (int)dt, inpl ? "in place" : "out of place", late % 3 - 1, wrong,
                       changed);
                free(in);
                free(out);
            }
        }
    }
    OK(cadre_finalize());
    if (me == 0 && !ru_failures)
        printf("loose_test: %d calls ok\n", call);
    return ru_failures != 0;
}
