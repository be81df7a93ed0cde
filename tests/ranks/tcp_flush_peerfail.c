/* Regression test for a double free (fixed): over TCP, a send that fails
 * inside flush_peer (sendmsg gets EPIPE because the peer died, or the last
 * connect is refused) made the transport fail every queued entry of that
 * peer, the one being sent among them, which flush_peer then freed again.
 * Ranks 1..n-1 stream 64 MiB each to rank 0, which kills itself part-way;
 * every sender must get CADRE_ERR_PEER and print "tcp_flush_peerfail: rank r
 * ok". Run with cadrerun --keep-going: n-1 "ok" lines and exit 137. */
#include <signal.h>
#include <unistd.h>

#include "rank_util.h"

#define W CADRE_COMM_WORLD

int main(int argc, char **argv)
{
    if (cadre_init(&argc, &argv) != CADRE_SUCCESS) {
        fprintf(stderr, "tcp_flush_peerfail: cadre_init: %s\n", cadre_last_error());
        return 1;
    }
    int me, np;
    cadre_comm_rank(W, &me);
    cadre_comm_size(W, &np);
    ru_rank = me;
    if (np < 2) {
        fprintf(stderr, "tcp_flush_peerfail: needs 2 ranks or more\n");
        return 2;
    }
    const size_t n = (size_t)64 << 20;
    unsigned char *buf = calloc(1, n * (me == 0 ? (size_t)np : 1));
    if (me == 0) {
        cadre_request_t r;
        for (int p = 1; p < np; p++)
            OK(cadre_irecv(buf + (size_t)p * n, n, CADRE_UINT8, p, 0, W, &r));
        usleep(20 * 1000); /* the senders are streaming meanwhile */
        raise(SIGKILL);
    }
    FAILS(cadre_send(buf, n, CADRE_UINT8, 0, 0, W), CADRE_ERR_PEER, "rank 0");
    if (!ru_failures)
        printf("tcp_flush_peerfail: rank %d ok\n", me);
    free(buf);
    cadre_finalize();
    return ru_failures ? 1 : 0;
}
