/* A send whose buffer this rank cannot read, over TCP: the kernel refuses
 * the payload (EFAULT), part of the message may be out, so the connection
 * to the peer is lost; the send must fail with a message that names the
 * call, the peer and the cause. Run with 2 ranks and CADRE_TRANSPORT=tcp.
 *
 * The first message to rank 1 waits for the connection, in the output
 * queue, and the progress thread sends it: before the fix the failure's
 * text was that thread's last error (none), and cadre_send failed with
 * CADRE_ERR_PEER and the text "cadre_send: " alone (issue 40).
 *
 * Rank 0: cadre_send from a page it may not read fails with CADRE_ERR_PEER
 * naming peer rank 1 and the unreadable buffer; a later isend to rank 1
 * fails at once, naming it too. Rank 1: its receive fails with
 * CADRE_ERR_PEER when the connection closes. Both finalize with success
 * and print "tcp_badbuf: rank r ok". */
#include <sys/mman.h>

#include "rank_util.h"

#define W CADRE_COMM_WORLD

int main(int argc, char **argv)
{
    if (cadre_init(&argc, &argv) != CADRE_SUCCESS) {
        fprintf(stderr, "tcp_badbuf: cadre_init: %s\n", cadre_last_error());
        return 1;
    }
    int me, np;
    cadre_comm_rank(W, &me);
    cadre_comm_size(W, &np);
    ru_rank = me;
    if (np != 2) {
        fprintf(stderr, "tcp_badbuf: run with 2 ranks\n");
        return 1;
    }
    if (me == 0) {
        void *page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        EXPECT(page != MAP_FAILED, "mmap");
        FAILS(cadre_send(page, 64, CADRE_UINT8, 1, 1, W), CADRE_ERR_PEER, "cadre_send: peer rank 1 ");
        FAILS(cadre_send(page, 64, CADRE_UINT8, 1, 1, W), CADRE_ERR_PEER, "not readable memory");
        unsigned char ok[8] = {0};
        cadre_request_t r = CADRE_REQUEST_NULL;
        FAILS(cadre_isend(ok, 8, CADRE_UINT8, 1, 2, W, &r), CADRE_ERR_PEER,
              "cadre_isend: peer rank 1 ");
        EXPECT(r == CADRE_REQUEST_NULL, "a failed isend wrote a request");
        munmap(page, 4096);
    } else {
        unsigned char b[64];
        FAILS(cadre_recv(b, 64, CADRE_UINT8, 0, 1, W, NULL), CADRE_ERR_PEER, "peer rank 0 ");
    }
    int rc = cadre_finalize();
    EXPECT(rc == CADRE_SUCCESS, "finalize: %s", cadre_last_error());
    if (!ru_failures)
        printf("tcp_badbuf: rank %d ok\n", me);
    return ru_failures ? 1 : 0;
}
