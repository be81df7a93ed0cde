/* A peer killed mid-transfer: rank 1 streams 512 MiB to rank 0 and kills
 * itself part-way. Rank 0's receive must fail with CADRE_ERR_PEER within 5 s
 * naming rank 1, new operations with rank 1 must fail at once, and rank 0
 * must still talk to rank 2 and finalize. Run with cadrerun --keep-going and
 * 3 ranks; rank 0 prints "peerfail: ok" when every check held. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rank_util.h"

#define W CADRE_COMM_WORLD

int main(int argc, char **argv)
{
    if (cadre_init(&argc, &argv) != CADRE_SUCCESS) {
        fprintf(stderr, "p2p_peerfail: cadre_init: %s\n", cadre_last_error());
        return 1;
    }
    int me, np;
    cadre_comm_rank(W, &me);
    cadre_comm_size(W, &np);
    ru_rank = me;
    if (np < 3) {
        fprintf(stderr, "p2p_peerfail: needs 3 ranks\n");
        return 2;
    }
    const size_t n = (size_t)512 << 20;
    unsigned char *buf = malloc(n);
    memset(buf, me, n);
    int x = 0;
    if (me == 1) {
        cadre_request_t r;
        OK(cadre_recv(&x, 1, CADRE_INT32, 0, 1, W, CADRE_STATUS_IGNORE)); /* rank 0 is ready */
        OK(cadre_isend(buf, n, CADRE_UINT8, 0, 2, W, &r));
        usleep(20 * 1000); /* the progress thread is streaming meanwhile */
        raise(SIGKILL);
    } else if (me == 0) {
        cadre_request_t r;
        OK(cadre_irecv(buf, n, CADRE_UINT8, 1, 2, W, &r));
        OK(cadre_send(&x, 1, CADRE_INT32, 1, 1, W));
        double t0 = ru_now();
        cadre_status_t st;
        FAILS(cadre_wait(&r, &st), CADRE_ERR_PEER, "rank 1");
        double t = ru_now() - t0;
        /* Within the node the death is seen through the peer's pidfd, and
         * the library tells how it ended, as cadrerun does (over TCP the
         * closed connection may be seen first). */
        const char *tp = getenv("CADRE_TRANSPORT");
        if (!tp || !*tp)
            EXPECT(strstr(cadre_last_error(), "rank 1 (pid ") &&
                       strstr(cadre_last_error(), ") killed by SIGKILL"),
                   "message \"%s\" does not say that rank 1 was killed by SIGKILL",
                   cadre_last_error());
        EXPECT(t < 5.0, "CADRE_ERR_PEER after %.2f s", t);
        EXPECT(st.error == CADRE_ERR_PEER, "status.error %d", st.error);
        /* New operations with the dead peer fail at once. */
        t0 = ru_now();
        FAILS(cadre_send(&x, 1, CADRE_INT32, 1, 3, W), CADRE_ERR_PEER, "rank 1");
        FAILS(cadre_recv(&x, 1, CADRE_INT32, 1, 3, W, CADRE_STATUS_IGNORE), CADRE_ERR_PEER,
              "rank 1");
        FAILS(cadre_send(buf, n, CADRE_UINT8, 1, 3, W), CADRE_ERR_PEER, "rank 1");
        EXPECT(ru_now() - t0 < 1.0, "operations with a dead peer took %.2f s", ru_now() - t0);
        /* The rest of the job carries on. */
        int y = 42;
        OK(cadre_send(&y, 1, CADRE_INT32, 2, 4, W));
        OK(cadre_recv(&y, 1, CADRE_INT32, 2, 5, W, CADRE_STATUS_IGNORE));
        EXPECT(y == 43, "rank 2 answered %d", y);
        printf("peerfail: rank 0 saw CADRE_ERR_PEER after %.3f s: %s\n", t, "ok");
    } else if (me == 2) {
        int y;
        OK(cadre_recv(&y, 1, CADRE_INT32, 0, 4, W, CADRE_STATUS_IGNORE));
        y++;
        OK(cadre_send(&y, 1, CADRE_INT32, 0, 5, W));
    }
    free(buf);
    OK(cadre_finalize());
    if (ru_failures)
        fprintf(stderr, "[rank %d] %d check(s) failed\n", me, ru_failures);
    else if (me == 0)
        printf("peerfail: ok\n");
    return ru_failures ? 1 : 0;
}
