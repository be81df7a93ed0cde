/* Nonblocking allreduces in flight together on communicators that share a
 * pair of processes, started in opposite orders by the two: the two-rank
 * allreduce's variants that wait in round 2 for the peer (coll_direct_pair.c)
 * once held each other up until CADRE_TIMEOUT, one process inside each.
 * With 2 ranks, two duplicates of the world; with 3, the three pairs, each
 * rank starting its two pairs' calls in an order that would close a cycle
 * (pair r, r+1 first at rank r); with 2 ranks, also four in flight on one
 * communicator. Sizes from 64 KiB (the paced stream) to 16 MiB
 * (with CADRE_WAIT=sleep, the unpaced whole result), float32 sum; every
 * element is checked against the sum of the pair's inputs computed here.
 * Then calls in flight together on the world whose windows are closed
 * (closed_windows; its reduces and scatters direct where CADRE_ALGO says). */
#include <math.h>

#include "rank_util.h"

#define ROUNDS 12

static float input(int rank, size_t i, int call)
{
    return (float)(int)((i * 3 + (size_t)rank * 11 + (size_t)call * 7) % 512);
}

/* k input and k output buffers of n floats; 0 (reported) when memory ran out. */
static int alloc_bufs(float **in, float **out, int k, size_t n)
{
    for (int i = 0; i < k; i++) {
        in[i] = malloc(n * sizeof(float));
        out[i] = malloc(n * sizeof(float));
        EXPECT(in[i] && out[i], "no memory for %zu elements", n);
        if (!in[i] || !out[i])
            return 0;
    }
    return 1;
}

/* Calls in flight together on the world, in the same order on every rank:
 * the first takes the variants that write into the peers' buffers, the
 * others (their windows closed: build in coll_direct.c) each rank's whole
 * result, reading its peers' inputs and writing into nobody; in place,
 * through a scratch copied after round 3. K allreduces in place (float32
 * sum of whole numbers, exact), K out of place (int32 max), K in place of
 * float32 sums that depend on the order of the additions (within 1e-5 of
 * the sum in double, and the same bits on every rank: the ranks' checksums
 * compared), and K bcasts from each root; 1 MiB and up (the direct
 * algorithms of nonblocking calls; bcast from 8 MiB). */
static void closed_windows(int me, int np)
{
    enum { K = 3 };
    const size_t n = ((size_t)1 << 21) + 11; /* 8 MiB of float32 and a bit */
    float *f[K];
    int32_t *a[K], *b[K];
    cadre_request_t q[K];
    for (int k = 0; k < K; k++) {
        f[k] = malloc(n * sizeof *f[k]);
        a[k] = malloc(n * sizeof *a[k]);
        b[k] = malloc(n * sizeof *b[k]);
        EXPECT(f[k] && a[k] && b[k], "no memory");
        if (!f[k] || !a[k] || !b[k])
            return;
    }
    long wrong = 0;
    for (int k = 0; k < K; k++)
        for (size_t i = 0; i < n; i++)
            f[k][i] = input(me, i, 100 + k);
    for (int k = 0; k < K; k++)
        OK(cadre_iallreduce(CADRE_IN_PLACE, f[k], n, CADRE_FLOAT32, CADRE_SUM, CADRE_COMM_WORLD,
                            &q[k]));
    OK(cadre_waitall(K, q, NULL));
    for (int k = 0; k < K; k++)
        for (size_t i = 0; i < n; i++) {
            float want = 0;
            for (int r = 0; r < np; r++)
                want += input(r, i, 100 + k);
            wrong += f[k][i] != want;
        }
    EXPECT(wrong == 0, "%d allreduces in place in flight: %ld wrong", K, wrong);
    wrong = 0;
    for (int k = 0; k < K; k++)
        for (size_t i = 0; i < n; i++) {
            a[k][i] = (int32_t)((i * 7 + (size_t)me * 5 + (size_t)k) % 1000) - 500;
            b[k][i] = INT32_MIN;
        }
    for (int k = 0; k < K; k++)
        OK(cadre_iallreduce(a[k], b[k], n, CADRE_INT32, CADRE_MAX, CADRE_COMM_WORLD, &q[k]));
    OK(cadre_waitall(K, q, NULL));
    for (int k = 0; k < K; k++)
        for (size_t i = 0; i < n; i++) {
            int32_t want = INT32_MIN;
            for (int r = 0; r < np; r++) {
                int32_t v = (int32_t)((i * 7 + (size_t)r * 5 + (size_t)k) % 1000) - 500;
                want = v > want ? v : want;
            }
            wrong += b[k][i] != want || a[k][i] != (int32_t)((i * 7 + (size_t)me * 5 + (size_t)k) %
                                                             1000) - 500;
        }
    EXPECT(wrong == 0, "%d allreduces out of place in flight: %ld wrong", K, wrong);
    wrong = 0;
    for (int k = 0; k < K; k++)
        for (size_t i = 0; i < n; i++)
            f[k][i] = 1.0f / (float)(i % 977 + 1) + (float)(me * 1000 + k);
    for (int k = 0; k < K; k++)
        OK(cadre_iallreduce(CADRE_IN_PLACE, f[k], n, CADRE_FLOAT32, CADRE_SUM, CADRE_COMM_WORLD,
                            &q[k]));
    OK(cadre_waitall(K, q, NULL));
    uint64_t sum[K], lo[K], hi[K];
    for (int k = 0; k < K; k++) {
        sum[k] = 0;
        for (size_t i = 0; i < n; i++) {
            double want = 0;
            for (int r = 0; r < np; r++)
                want += (double)(1.0f / (float)(i % 977 + 1) + (float)(r * 1000 + k));
            wrong += fabs(f[k][i] - want) > 1e-5 * fabs(want);
            uint32_t bits;
            memcpy(&bits, &f[k][i], sizeof bits);
            sum[k] = sum[k] * 1000003 + bits;
        }
    }
    EXPECT(wrong == 0, "%d allreduces in place of inexact sums in flight: %ld wrong", K, wrong);
    OK(cadre_allreduce(sum, lo, K, CADRE_UINT64, CADRE_MIN, CADRE_COMM_WORLD));
    OK(cadre_allreduce(sum, hi, K, CADRE_UINT64, CADRE_MAX, CADRE_COMM_WORLD));
    for (int k = 0; k < K; k++)
        EXPECT(lo[k] == hi[k], "call %d in flight: the ranks' results differ in their bits", k);
    for (int root = 0; root < np; root++) {
        wrong = 0;
        for (int k = 0; k < K; k++)
            for (size_t i = 0; i < n; i++)
                a[k][i] = me == root ? (int32_t)(i * 13 + (size_t)k * 7 + (size_t)root) : -1;
        for (int k = 0; k < K; k++)
            OK(cadre_ibcast(a[k], n, CADRE_INT32, root, CADRE_COMM_WORLD, &q[k]));
        OK(cadre_waitall(K, q, NULL));
        for (int k = 0; k < K; k++)
            for (size_t i = 0; i < n; i++)
                wrong += a[k][i] != (int32_t)(i * 13 + (size_t)k * 7 + (size_t)root);
        EXPECT(wrong == 0, "%d bcasts from rank %d in flight: %ld wrong", K, root, wrong);
    }
    /* K reduces to each root (float32 sums of whole numbers, exact; in
     * place at the root, recvbuf NULL elsewhere), then K scatters from each
     * root: direct where forced (CADRE_ALGO=reduce=direct,scatter=direct),
     * the first call writing the slices into the root, the others' roots
     * computing the whole result (their windows closed). */
    size_t per = n / (size_t)np;
    for (int root = 0; root < np; root++) {
        wrong = 0;
        for (int k = 0; k < K; k++)
            for (size_t i = 0; i < n; i++)
                f[k][i] = input(me, i, 200 + k + 3 * root);
        for (int k = 0; k < K; k++)
            OK(cadre_ireduce(me == root ? CADRE_IN_PLACE : f[k], me == root ? f[k] : NULL, n,
                             CADRE_FLOAT32, CADRE_SUM, root, CADRE_COMM_WORLD, &q[k]));
        OK(cadre_waitall(K, q, NULL));
        for (int k = 0; k < K; k++)
            for (size_t i = 0; i < n; i++) {
                float want = 0;
                for (int r = 0; r < np; r++)
                    want += me == root || r == me ? input(r, i, 200 + k + 3 * root) : 0;
                wrong += f[k][i] != want;
            }
        EXPECT(wrong == 0, "%d reduces to rank %d in flight: %ld wrong", K, root, wrong);
        wrong = 0;
        for (int k = 0; k < K; k++)
            for (size_t i = 0; i < n; i++) {
                a[k][i] = me == root ? (int32_t)(i * 5 + (size_t)k + (size_t)root * 3) : -1;
                b[k][i] = -1;
            }
        for (int k = 0; k < K; k++)
            OK(cadre_iscatter(a[k], b[k], per, CADRE_INT32, root, CADRE_COMM_WORLD, &q[k]));
        OK(cadre_waitall(K, q, NULL));
        for (int k = 0; k < K; k++)
            for (size_t i = 0; i < per; i++)
                wrong += b[k][i] != (int32_t)(((size_t)me * per + i) * 5 + (size_t)k +
                                              (size_t)root * 3);
        EXPECT(wrong == 0, "%d scatters from rank %d in flight: %ld wrong", K, root, wrong);
    }
    for (int k = 0; k < K; k++)
        free(f[k]), free(a[k]), free(b[k]);
}

/* The communicator of world ranks a and b (a split over the world). */
static cadre_comm_t pair_of(int me, int a, int b)
{
    cadre_comm_t c = CADRE_COMM_NULL;
    int in = me == a || me == b;
    OK(cadre_comm_split(CADRE_COMM_WORLD, in ? 0 : CADRE_UNDEFINED, me, &c));
    return c;
}

int main(int argc, char **argv)
{
    int me, np = 0;
    OK(cadre_init(&argc, &argv));
    OK(cadre_comm_rank(CADRE_COMM_WORLD, &me));
    OK(cadre_comm_size(CADRE_COMM_WORLD, &np));
    ru_rank = me;
    if (np != 2 && np != 3) {
        if (me == 0)
            fprintf(stderr, "overlap_test: needs 2 or 3 ranks, has %d\n", np);
        cadre_finalize();
        return 2;
    }
    /* c[0] is started first, c[1] second; peer[k]: the other rank on c[k]
     * (world rank). */
    cadre_comm_t c[2], all[3] = {CADRE_COMM_NULL, CADRE_COMM_NULL, CADRE_COMM_NULL};
    int peer[2], idx[2]; /* idx[k]: c[k] is all[idx[k]] */
    if (np == 2) {
        cadre_comm_t d[2];
        OK(cadre_comm_dup(CADRE_COMM_WORLD, &d[0]));
        OK(cadre_comm_dup(CADRE_COMM_WORLD, &d[1]));
        idx[0] = me;
        idx[1] = !me;
        c[0] = d[me];
        c[1] = d[!me];
        peer[0] = peer[1] = !me;
        all[0] = d[0], all[1] = d[1];
    } else {
        for (int k = 0; k < 3; k++)
            all[k] = pair_of(me, k, (k + 1) % 3);
        idx[0] = me;
        idx[1] = (me + 2) % 3;
        c[0] = all[idx[0]];
        c[1] = all[idx[1]];
        peer[0] = (me + 1) % 3;
        peer[1] = (me + 2) % 3;
    }
    static const size_t counts[] = {16384 + 1, 262144 + 3, 1048576 + 7, 4194304 + 9};
    int call = 0;
    for (size_t z = 0; z < sizeof counts / sizeof *counts; z++) {
        size_t n = counts[z];
        float *in[2], *out[2];
        if (!alloc_bufs(in, out, 2, n))
            return 1;
        for (int r = 0; r < ROUNDS; r++, call++) {
            cadre_request_t q[2];
            for (int k = 0; k < 2; k++) {
                for (size_t i = 0; i < n; i++)
                    in[k][i] = input(me, i, call * 3 + idx[k]);
                memset(out[k], 0xa5, n * sizeof(float));
            }
            for (int k = 0; k < 2; k++)
                OK(cadre_iallreduce(in[k], out[k], n, CADRE_FLOAT32, CADRE_SUM, c[k], &q[k]));
            OK(cadre_waitall(2, q, NULL));
            for (int k = 0; k < 2; k++) {
                int salt = call * 3 + idx[k];
                long wrong = 0;
                for (size_t i = 0; i < n; i++)
                    wrong += out[k][i] != input(me, i, salt) + input(peer[k], i, salt);
                EXPECT(wrong == 0, "%zu elements, round %d, with rank %d: %ld wrong", n, r,
                       peer[k], wrong);
            }
        }
        for (int k = 0; k < 2; k++)
            free(in[k]), free(out[k]);
    }
    /* With 2 ranks, also SAME allreduces in flight together on one
     * communicator, started in the same order by both (each takes its turn
     * in both processes' progress, in an order of its own). Four of 1 MiB
     * in flight twice timed out in 50 rounds out of 50. */
    enum { SAME = 4 };
    if (np == 2) {
        size_t n = 262144 + 5;
        float *sin[SAME], *sout[SAME];
        if (!alloc_bufs(sin, sout, SAME, n))
            return 1;
        for (int r = 0; r < ROUNDS; r++, call++) {
            cadre_request_t q[SAME];
            for (int k = 0; k < SAME; k++) {
                for (size_t i = 0; i < n; i++)
                    sin[k][i] = input(me, i, call * 8 + k);
                memset(sout[k], 0xa5, n * sizeof(float));
                OK(cadre_iallreduce(sin[k], sout[k], n, CADRE_FLOAT32, CADRE_SUM, all[0], &q[k]));
            }
            OK(cadre_waitall(SAME, q, NULL));
            for (int k = 0; k < SAME; k++) {
                long wrong = 0;
                for (size_t i = 0; i < n; i++)
                    wrong += sout[k][i] != input(0, i, call * 8 + k) + input(1, i, call * 8 + k);
                EXPECT(wrong == 0, "%d in flight on one communicator, round %d, call %d: %ld wrong",
                       SAME, r, k, wrong);
            }
        }
        for (int k = 0; k < SAME; k++)
            free(sin[k]), free(sout[k]);
    }
    closed_windows(me, np);
    for (int k = 0; k < 3; k++)
        if (all[k] != CADRE_COMM_NULL)
            OK(cadre_comm_free(&all[k]));
    OK(cadre_finalize());
    if (ru_failures)
        fprintf(stderr, "[rank %d] overlap_test: %d checks failed\n", me, ru_failures);
    return ru_failures != 0;
}
