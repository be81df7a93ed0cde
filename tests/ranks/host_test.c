/* Ranks on fake hosts (FAKE_HOSTS, tests/ranks/fake_hosts.h): every pair of
 * ranks exchanges messages of a few sizes (shared memory within a fake host,
 * TCP between them), then an allreduce of each size class runs, checked
 * element by element. The unit suite "hier" (tests/unit/test_hier.c) runs it
 * with CADRE_DEBUG=INFO and checks the library's decisions in the log: the
 * host of each rank, the transport of each peer, the algorithm of each
 * collective. HOST_COUNTS overrides the allreduce counts (comma list). */
#include "fake_hosts.h"
#include "rank_util.h"

#define W CADRE_COMM_WORLD

int main(int argc, char **argv)
{
    fake_hosts_setenv();
    if (cadre_init(&argc, &argv) != CADRE_SUCCESS) {
        fprintf(stderr, "host_test: cadre_init: %s\n", cadre_last_error());
        return 1;
    }
    int me, np;
    cadre_comm_rank(W, &me);
    cadre_comm_size(W, &np);
    ru_rank = me;
    /* Every pair, both ways, small (eager) and large (rendezvous). */
    size_t sizes[] = {1, 5000, (size_t)3 << 20};
    for (size_t k = 0; k < 3; k++) {
        unsigned char *out = malloc(sizes[k]), *in = malloc(sizes[k]);
        if (!out || !in)
            return 1;
        for (int d = 1; d < np; d++) {
            int to = (me + d) % np, from = (me - d + np) % np;
            for (size_t i = 0; i < sizes[k]; i++)
                out[i] = ru_byte(me, to, k, i);
            OK(cadre_sendrecv(out, sizes[k], to, 5, in, sizes[k], from, 5, CADRE_UINT8, W,
                              CADRE_STATUS_IGNORE));
            size_t bad = 0;
            for (size_t i = 0; i < sizes[k]; i++)
                bad += in[i] != ru_byte(from, me, k, i);
            EXPECT(bad == 0, "%zu bytes from rank %d wrong (size %zu)", bad, from, sizes[k]);
        }
        free(out);
        free(in);
    }
    size_t counts[16] = {2, 100000, (size_t)1 << 20};
    int ncounts = 3;
    const char *hc = getenv("HOST_COUNTS");
    if (hc) {
        ncounts = 0;
        for (const char *p = hc; *p && ncounts < 16; p += strcspn(p, ","), p += *p == ',')
            counts[ncounts++] = strtoull(p, NULL, 0);
    }
    for (int k = 0; k < ncounts; k++) {
        size_t n = counts[k];
        int32_t *a = malloc((n ? n : 1) * sizeof *a), *b = malloc((n ? n : 1) * sizeof *b);
        if (!a || !b)
            return 1;
        for (size_t i = 0; i < n; i++)
            a[i] = (int32_t)((i * 7 + (size_t)me * 13) % 1000);
        OK(cadre_allreduce(a, b, n, CADRE_INT32, CADRE_SUM, W));
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) {
            int64_t want = 0;
            for (int r = 0; r < np; r++)
                want += (int64_t)((i * 7 + (size_t)r * 13) % 1000);
            bad += b[i] != want;
        }
        EXPECT(bad == 0, "allreduce of %zu: %zu elements wrong", n, bad);
        free(a);
        free(b);
    }
    OK(cadre_barrier(W));
    int rc = cadre_finalize();
    EXPECT(rc == CADRE_SUCCESS, "finalize: %s", cadre_last_error());
    if (!ru_failures)
        printf("host_test: rank %d ok\n", me);
    return ru_failures ? 1 : 0;
}
