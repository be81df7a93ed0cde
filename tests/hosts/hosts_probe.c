/* hosts_probe: the point-to-point check of the multi-host tests
 * (tests/hosts/hosts-test.sh). Every rank sends one message to every other
 * rank, large enough to go by rendezvous, and receives all of them with
 * CADRE_ANY_SOURCE: each source must come exactly once, its payload built
 * from the source's rank and hostname, its status count right. Then the
 * hostnames are gathered: cadre_local_size must count the ranks that share
 * this rank's hostname and cadre_local_rank must be this rank's place among
 * them (the launcher's and cadre's idea of a host against the hostnames the
 * test bed gives). Prints "hosts_probe: rank R on HOST ok (... s)". */
#include <unistd.h>

#include "tests/ranks/rank_util.h"

#define W CADRE_COMM_WORLD
enum { HOSTLEN = 64, MSG = 200000 };

static void fill(unsigned char *b, int from, const char *host)
{
    size_t hl = strlen(host);
    for (size_t i = 0; i < MSG; i++)
        b[i] = ru_byte(from, 0, 7, i) ^ (unsigned char)host[i % hl];
}

int main(int argc, char **argv)
{
    double t0 = ru_now();
    if (cadre_init(&argc, &argv) != CADRE_SUCCESS) {
        fprintf(stderr, "hosts_probe: cadre_init: %s\n", cadre_last_error());
        return 1;
    }
    int me, np;
    cadre_comm_rank(W, &me);
    cadre_comm_size(W, &np);
    ru_rank = me;
    char host[HOSTLEN] = "";
    gethostname(host, sizeof host - 1);
    char *hosts = calloc((size_t)np, HOSTLEN);
    OK(cadre_allgather(host, hosts, HOSTLEN, CADRE_UINT8, W));
    double t_init = ru_now() - t0;

    /* Every pair, both ways, received by ANY_SOURCE. */
    double t1 = ru_now();
    unsigned char *out = malloc(MSG), *in = malloc((size_t)np * MSG), *want = malloc(MSG);
    cadre_request_t *sreq = calloc((size_t)np, sizeof *sreq);
    cadre_request_t *rreq = calloc((size_t)np, sizeof *rreq);
    cadre_status_t *st = calloc((size_t)np, sizeof *st);
    fill(out, me, host);
    int n = 0;
    for (int i = 0; i < np - 1; i++)
        OK(cadre_irecv(in + (size_t)i * MSG, MSG, CADRE_UINT8, CADRE_ANY_SOURCE, 7, W, &rreq[n++]));
    for (int d = 1; d < np; d++)
        OK(cadre_isend(out, MSG, CADRE_UINT8, (me + d) % np, 7, W, &sreq[d - 1]));
    OK(cadre_waitall(np - 1, sreq, NULL));
    OK(cadre_waitall(n, rreq, st));
    int *seen = calloc((size_t)np, sizeof *seen);
    for (int i = 0; i < n; i++) {
        int s = st[i].source;
        EXPECT(s >= 0 && s < np && s != me, "receive %d: source %d", i, s);
        if (s < 0 || s >= np || s == me)
            continue;
        EXPECT(seen[s]++ == 0, "a second message from rank %d", s);
        EXPECT(st[i].count == MSG, "from rank %d: count %zu", s, (size_t)st[i].count);
        fill(want, s, hosts + (size_t)s * HOSTLEN);
        size_t bad = 0;
        for (size_t j = 0; j < MSG; j++)
            bad += in[(size_t)i * MSG + j] != want[j];
        EXPECT(bad == 0, "from rank %d (%s): %zu bytes of %d wrong", s, hosts + (size_t)s * HOSTLEN,
               bad, MSG);
    }
    double t_p2p = ru_now() - t1;

    /* The hostnames against cadre's local rank and size. */
    int lr = -1, ls = -1, same = 0, before = 0;
    OK(cadre_local_rank(&lr));
    OK(cadre_local_size(&ls));
    for (int r = 0; r < np; r++)
        if (!strcmp(hosts + (size_t)r * HOSTLEN, host)) {
            same++;
            before += r < me;
        }
    EXPECT(ls == same && lr == before, "on %s: local rank %d of %d, but %d ranks share the hostname, %d before me",
           host, lr, ls, same, before);

    long long sum = me, total = 0;
    OK(cadre_allreduce(&sum, &total, 1, CADRE_INT64, CADRE_SUM, W));
    EXPECT(total == (long long)np * (np - 1) / 2, "allreduce: %lld", total);
    OK(cadre_finalize());
    if (!ru_failures)
        printf("hosts_probe: rank %d on %s ok (init %.2f s, all pairs %.2f s)\n", me, host, t_init,
               t_p2p);
    free(seen);
    free(st);
    free(rreq);
    free(sreq);
    free(want);
    free(in);
    free(out);
    free(hosts);
    return ru_failures ? 1 : 0;
}
