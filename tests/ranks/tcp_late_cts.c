/* A send given up before its receiver answered, whose NACK then finds the
 * peer gone. Run with 2 ranks and CADRE_TRANSPORT=tcp CADRE_TIMEOUT=1.
 *
 * Rank 0 starts a 4 MiB send (rendezvous) that rank 1 does not receive yet;
 * its cadre_wait times out after CADRE_TIMEOUT and gives the send up (the
 * engine frees it when the receiver's CTS comes, answering NACK). Rank 0
 * then tells rank 1 to go on, and makes the next NACK it sends fail as a
 * closed connection does: this program's sendmsg, which libcadre calls,
 * returns EPIPE for it. Rank 1 posts the receive; its CTS reaches rank 0,
 * whose NACK fails, and the failure fails every request for rank 1, the
 * abandoned send among them.
 *
 * Before the fix the send was freed twice (by that failure, then by the CTS
 * handler that had posted the NACK), and rank 0 aborted in cadre_finalize
 * with "double free detected" (CI on 485b3e0, coll_peerfail over TCP).
 *
 * Rank 0 checks: its wait for rank 1's next message fails with
 * CADRE_ERR_PEER naming the broken pipe, exactly one NACK was failed, a
 * later send to rank 1 fails at once, and cadre_finalize returns success.
 * Rank 1's receive fails with CADRE_ERR_PEER when rank 0 leaves without a
 * word. Each rank prints "tcp_late_cts: rank r ok". */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "p2p/p2p.h"
#include "rank_util.h"

#define W CADRE_COMM_WORLD
#define BIG ((size_t)4 << 20)
#define PATIENT 60.0

/* Set by the main thread, read by whichever thread sends. */
static atomic_int armed, nacks_failed;

/* libcadre's TCP transport sends every message with one sendmsg (header,
 * then payload): while armed, the first NACK fails as on a closed socket. */
ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
    if (armed && m->msg_iovlen >= 1 && m->msg_iov[0].iov_len == sizeof(struct cadre_p2p_hdr) &&
        ((const struct cadre_p2p_hdr *)m->msg_iov[0].iov_base)->type == CADRE_P2P_NACK) {
        atomic_store(&armed, 0);
        atomic_fetch_add(&nacks_failed, 1);
        errno = EPIPE;
        return -1;
    }
    return syscall(SYS_sendmsg, fd, m, flags);
}

static void rank0(unsigned char *b)
{
    cadre_request_t r = CADRE_REQUEST_NULL;
    int go = 1, v = 0;
    OK(cadre_isend(b, BIG, CADRE_UINT8, 1, 1, W, &r));
    /* Rank 1 waits for our word: the send times out (CADRE_TIMEOUT=1). */
    FAILS(cadre_wait(&r, NULL), CADRE_ERR_TIMEOUT, "rank 1");
    r = CADRE_REQUEST_NULL;
    OK(cadre_isend(&go, 1, CADRE_INT32, 1, 2, W, &r));
    OK(cadre_wait_timeout(&r, PATIENT, NULL));
    atomic_store(&armed, 1);
    /* Rank 1 never sends this: the wait ends when its CTS comes and the
     * NACK fails. */
    r = CADRE_REQUEST_NULL;
    OK(cadre_irecv(&v, 1, CADRE_INT32, 1, 3, W, &r));
    int rc = cadre_wait_timeout(&r, PATIENT, NULL);
    EXPECT(rc == CADRE_ERR_PEER, "wait for rank 1 -> %s: %s", cadre_error_string(rc),
           cadre_last_error());
    EXPECT(strstr(cadre_last_error(), "rank 1") && strstr(cadre_last_error(), "Broken pipe"),
           "message: %s", cadre_last_error());
    EXPECT(atomic_load(&nacks_failed) == 1, "%d NACKs failed, expected 1 (armed still: %d)",
           atomic_load(&nacks_failed), atomic_load(&armed));
    FAILS(cadre_send(&go, 1, CADRE_INT32, 1, 4, W), CADRE_ERR_PEER, "rank 1");
}

static void rank1(unsigned char *b)
{
    cadre_request_t r = CADRE_REQUEST_NULL;
    int go = 0;
    OK(cadre_irecv(&go, 1, CADRE_INT32, 0, 2, W, &r));
    OK(cadre_wait_timeout(&r, PATIENT, NULL));
    EXPECT(go == 1, "go = %d", go);
    r = CADRE_REQUEST_NULL;
    OK(cadre_irecv(b, BIG, CADRE_UINT8, 0, 1, W, &r));
    /* No NACK and no data come: rank 0 took us for gone and leaves. */
    int rc = cadre_wait_timeout(&r, PATIENT, NULL);
    EXPECT(rc == CADRE_ERR_PEER, "receive -> %s: %s", cadre_error_string(rc), cadre_last_error());
}

int main(int argc, char **argv)
{
    int me;
    if (!ru_init_np(&argc, &argv, "tcp_late_cts", 2, &me))
        return 2;
    unsigned char *b = malloc(BIG);
    EXPECT(b, "%zu bytes", BIG);
    if (b) {
        ru_fill(b, BIG, 0, 1, 1);
        if (me == 0)
            rank0(b);
        else
            rank1(b);
    }
    OK(cadre_finalize());
    free(b);
    if (!ru_failures)
        printf("tcp_late_cts: rank %d ok\n", me);
    return ru_failures ? 1 : 0;
}
