/* Receives given up in the middle of a TCP payload. Run with 2 ranks and
 * CADRE_TRANSPORT=tcp CADRE_TCP_BUFFER=4096 CADRE_TIMEOUT=1 (rank 1 sets 30 s
 * for itself): through 4 KiB socket buffers a message crosses in many pieces, and a send writes what
 * the socket takes within a millisecond and stages the rest.
 *
 * Rank 1 sends, then stops itself (SIGSTOP) with the rest of the message
 * staged, so rank 0's receive holds a payload half read until it times out
 * (CADRE_ERR_TIMEOUT). Rank 0 then makes that buffer inaccessible (a write
 * from the kernel would fail with EFAULT and fail the peer, one from the
 * library would crash), wakes rank 1 (SIGCONT) and checks:
 *   - eager (1 MiB, read straight into the receive it matched): the message
 *     is not lost with the receive; the next receive gets it whole;
 *   - rendezvous (32 MiB, DATA read into place): the sender's send
 *     completes, the rest of its data is dropped, and the next 32 MiB
 *     message arrives intact.
 * Prints "tcp_abandon: rank r ok". */
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rank_util.h"

#define W CADRE_COMM_WORLD
#define EAGER_N ((size_t)1 << 20)
#define RNDV_N ((size_t)32 << 20)

static unsigned char *map(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT(p != MAP_FAILED, "mmap of %zu bytes", n);
    return p == MAP_FAILED ? NULL : p;
}

static void check_msg(const unsigned char *b, size_t n, int tag)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (b[i] != ru_byte(1, 0, (uint64_t)tag, i) && !bad++)
            first = i;
    EXPECT(bad == 0, "tag %d: %zu of %zu bytes wrong, the first at %zu", tag, bad, n, first);
}

/* Rank 0: a receive of n bytes with tag `tag` that times out part-way, then
 * the message with tag `again` received whole. */
static void receiver(pid_t peer, size_t n, int tag, int again, int go_tag)
{
    unsigned char *dead = map(n), *live = map(n);
    if (!dead || !live)
        return;
    cadre_request_t r;
    cadre_status_t st;
    int go = 1;
    OK(cadre_irecv(dead, n, CADRE_UINT8, 1, tag, W, &r));
    OK(cadre_send(&go, 1, CADRE_INT32, 1, go_tag, W));
    double t0 = ru_now();
    FAILS(cadre_wait(&r, &st), CADRE_ERR_TIMEOUT, "rank 1");
    EXPECT(ru_now() - t0 < 10, "the receive took %.1f s to time out", ru_now() - t0);
    EXPECT(mprotect(dead, n, PROT_NONE) == 0, "mprotect");
    EXPECT(kill(peer, SIGCONT) == 0, "SIGCONT to rank 1");
    OK(cadre_recv(live, n, CADRE_UINT8, 1, again, W, &st));
    EXPECT(st.count == n && st.source == 1 && st.tag == again, "status: count %zu source %d tag %d",
           (size_t)st.count, st.source, st.tag);
    check_msg(live, n, again);
    munmap(dead, n);
    munmap(live, n);
}

int main(int argc, char **argv)
{
    /* Rank 1's clock runs on while it is stopped: its waits would time out
     * as soon as it wakes. */
    const char *rank = getenv("CADRE_RANK");
    if (rank && !strcmp(rank, "1"))
        setenv("CADRE_TIMEOUT", "30", 1);
    if (cadre_init(&argc, &argv) != CADRE_SUCCESS) {
        fprintf(stderr, "tcp_abandon: cadre_init: %s\n", cadre_last_error());
        return 1;
    }
    int me, np;
    cadre_comm_rank(W, &me);
    cadre_comm_size(W, &np);
    ru_rank = me;
    if (np != 2) {
        fprintf(stderr, "tcp_abandon: needs 2 ranks\n");
        return 2;
    }
    int pid = (int)getpid(), go;
    if (me == 0) {
        OK(cadre_recv(&pid, 1, CADRE_INT32, 1, 1, W, NULL));
        /* eager: the same message is received after the timeout */
        receiver((pid_t)pid, EAGER_N, 10, 10, 2);
        /* rendezvous: the timed-out message is gone; the next one is whole */
        receiver((pid_t)pid, RNDV_N, 20, 21, 3);
    } else {
        OK(cadre_send(&pid, 1, CADRE_INT32, 0, 1, W));
        unsigned char *b = map(RNDV_N);
        if (!b)
            return 1;
        OK(cadre_recv(&go, 1, CADRE_INT32, 0, 2, W, NULL));
        for (size_t i = 0; i < EAGER_N; i++)
            b[i] = ru_byte(1, 0, 10, i);
        OK(cadre_send(b, EAGER_N, CADRE_UINT8, 0, 10, W)); /* returns with most of it staged */
        raise(SIGSTOP);

        OK(cadre_recv(&go, 1, CADRE_INT32, 0, 3, W, NULL));
        for (size_t i = 0; i < RNDV_N; i++)
            b[i] = ru_byte(1, 0, 20, i);
        cadre_request_t r;
        OK(cadre_isend(b, RNDV_N, CADRE_UINT8, 0, 20, W, &r));
        /* 2 ms of streaming: through 4 KiB buffers far from all of it. The
         * wait ends near its deadline though progress never stops (the
         * whole transfer takes over a second). */
        double t0 = ru_now();
        FAILS(cadre_wait_timeout(&r, 0.002, NULL), CADRE_ERR_TIMEOUT, "not complete");
        EXPECT(ru_now() - t0 < 0.5, "cadre_wait_timeout(0.002) returned after %.3f s",
               ru_now() - t0);
        raise(SIGSTOP);
        OK(cadre_wait(&r, NULL));
        for (size_t i = 0; i < RNDV_N; i++)
            b[i] = ru_byte(1, 0, 21, i);
        OK(cadre_send(b, RNDV_N, CADRE_UINT8, 0, 21, W));
        munmap(b, RNDV_N);
    }
    OK(cadre_barrier(W));
    if (!ru_failures)
        printf("tcp_abandon: rank %d ok\n", me);
    cadre_finalize();
    return ru_failures ? 1 : 0;
}
