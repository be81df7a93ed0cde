/* Receives given up in the middle of a TCP payload. Run with 2 ranks and
 * CADRE_TRANSPORT=tcp CADRE_TCP_BUFFER=4096 CADRE_TIMEOUT=1: through 4 KiB
 * socket buffers a message crosses in many pieces.
 *
 * Rank 0 posts a receive and watches its buffer (cadre_test) until the first
 * bytes of the payload are in it, then stops rank 1 (SIGSTOP) and waits until
 * it is stopped: the receive now holds a payload half read, the rest staged
 * on rank 1, and nothing more can come. Its wait times out (CADRE_ERR_TIMEOUT,
 * "the transfer stalled"). Rank 0 then makes that buffer inaccessible (a
 * write from the kernel would fail with EFAULT and fail the peer, one from
 * the library would crash), wakes rank 1 (SIGCONT) and checks:
 *   - eager (1 MiB, read straight into the receive it matched): the message
 *     is not lost with the receive; the next receive gets it whole;
 *   - rendezvous (4 MiB, DATA read into place): the sender's send
 *     completes, the rest of its data is dropped, and the next message
 *     (32 MiB) arrives intact; while it streams, rank 1's
 *     cadre_wait_timeout(0.002) calls each return near their deadline.
 * Rank 0 stops rank 1 itself, once its own buffer shows that data moved,
 * because on a loaded machine no sleep or deadline on rank 1's side says
 * when that has happened. Every other wait is cadre_wait_timeout with a
 * generous bound (PATIENT), not subject to CADRE_TIMEOUT=1: the 32 MiB
 * message takes over a second to arrive on an idle machine, and the dropped
 * rest of a message crosses before the next one, however long that takes.
 * Prints "tcp_abandon: rank r ok". */
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rank_util.h"

#define W CADRE_COMM_WORLD
#define EAGER_N ((size_t)1 << 20)
#define RNDV_N ((size_t)4 << 20)  /* the rendezvous message given up */
#define BIG_N ((size_t)32 << 20)  /* the one after it */
#define PATIENT 60.0 /* s; the harness allows 90 for 2 ranks */
#define WATCHED 64   /* payload bytes rank 0 waits to see in its buffer */

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

/* A wait bounded by PATIENT alone. */
static int patient(cadre_request_t *r, cadre_status_t *st)
{
    return cadre_wait_timeout(r, PATIENT, st);
}

static void send_int(int v, int dst, int tag)
{
    cadre_request_t r = CADRE_REQUEST_NULL;
    OK(cadre_isend(&v, 1, CADRE_INT32, dst, tag, W, &r));
    OK(patient(&r, NULL));
}

static void recv_int(int *v, int src, int tag)
{
    cadre_request_t r = CADRE_REQUEST_NULL;
    OK(cadre_irecv(v, 1, CADRE_INT32, src, tag, W, &r));
    OK(patient(&r, NULL));
}

/* The state letter of process pid (/proc/pid/stat: "pid (comm) S ..."). */
static char proc_state(pid_t pid)
{
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(line, 1, sizeof line - 1, f) : 0;
    if (f)
        fclose(f);
    line[n] = '\0';
    char *p = strrchr(line, ')');
    return p && p[1] == ' ' ? p[2] : '?';
}

/* Polls the receive r into b (progressing it) until the first WATCHED bytes
 * of message `tag` are in b, then stops rank 1 and waits until it is
 * stopped. Returns 0 when that did not happen within PATIENT s. */
static int stop_mid_payload(cadre_request_t *r, const volatile unsigned char *b, int tag,
                            pid_t peer)
{
    double t0 = ru_now();
    for (;;) {
        int done = 0, seen = 1, rc = cadre_test(r, &done, NULL);
        OK(rc);
        EXPECT(!done || rc != CADRE_SUCCESS,
               "tag %d: the message arrived whole before rank 1 was stopped", tag);
        if (done || rc != CADRE_SUCCESS)
            return 0;
        for (size_t i = 0; i < WATCHED && seen; i++)
            seen = b[i] == ru_byte(1, 0, (uint64_t)tag, i);
        if (seen)
            break;
        if (ru_now() - t0 > PATIENT) {
            EXPECT(0, "tag %d: no payload in the receive buffer after %.0f s", tag, PATIENT);
            return 0;
        }
        usleep(100);
    }
    EXPECT(kill(peer, SIGSTOP) == 0, "SIGSTOP to rank 1");
    while (proc_state(peer) != 'T') {
        if (ru_now() - t0 > PATIENT) {
            EXPECT(0, "rank 1 (pid %d) not stopped after %.0f s: state %c", (int)peer, PATIENT,
                   proc_state(peer));
            return 0;
        }
        usleep(1000);
    }
    return 1;
}

/* Rank 0: a receive of n bytes with tag `tag` that times out part-way, then
 * the message of m bytes with tag `again` received whole. */
static void receiver(pid_t peer, size_t n, int tag, size_t m, int again, int go_tag)
{
    unsigned char *dead = map(n), *live = map(m);
    if (!dead || !live)
        return;
    cadre_request_t r = CADRE_REQUEST_NULL;
    cadre_status_t st;
    OK(cadre_irecv(dead, n, CADRE_UINT8, 1, tag, W, &r));
    send_int(1, 1, go_tag);
    if (!stop_mid_payload(&r, dead, tag, peer)) {
        kill(peer, SIGCONT);
        return;
    }
    double t0 = ru_now();
    FAILS(cadre_wait(&r, &st), CADRE_ERR_TIMEOUT, "rank 1");
    EXPECT(strstr(cadre_last_error(), "the transfer stalled"),
           "tag %d: the receive did not time out part-way: %s", tag, cadre_last_error());
    EXPECT(ru_now() - t0 < 10, "the receive took %.1f s to time out", ru_now() - t0);
    EXPECT(mprotect(dead, n, PROT_NONE) == 0, "mprotect");
    EXPECT(kill(peer, SIGCONT) == 0, "SIGCONT to rank 1");
    OK(cadre_irecv(live, m, CADRE_UINT8, 1, again, W, &r));
    send_int(1, 1, go_tag + 1);
    int rc = patient(&r, &st);
    OK(rc);
    if (rc != CADRE_SUCCESS)
        return; /* live is still the receive's */
    EXPECT(st.count == m && st.source == 1 && st.tag == again, "status: count %zu source %d tag %d",
           (size_t)st.count, st.source, st.tag);
    check_msg(live, m, again);
    munmap(dead, n);
    munmap(live, m);
}

/* Rank 1: the message of n bytes rank 0 watches for (and stops this process
 * in the middle of), then, on rank 0's word, the one of m bytes with tag
 * `again` it receives whole: for eager, again == tag, the first message
 * itself. */
static void sender(unsigned char *b, size_t n, int tag, size_t m, int again, int go_tag)
{
    cadre_request_t r = CADRE_REQUEST_NULL;
    int go;
    recv_int(&go, 0, go_tag);
    for (size_t i = 0; i < n; i++)
        b[i] = ru_byte(1, 0, (uint64_t)tag, i);
    OK(cadre_isend(b, n, CADRE_UINT8, 0, tag, W, &r));
    OK(patient(&r, NULL)); /* stopped and woken in here */
    recv_int(&go, 0, go_tag + 1);
    if (again == tag)
        return;
    for (size_t i = 0; i < m; i++)
        b[i] = ru_byte(1, 0, (uint64_t)again, i);
    OK(cadre_isend(b, m, CADRE_UINT8, 0, again, W, &r));
    if (m > EAGER_N) {
        /* Through 4 KiB buffers 32 MiB take over a second: each 2 ms wait
         * ends near its deadline though progress never stops. The first
         * cannot see the message out. */
        for (int k = 0; k < 50 && r != CADRE_REQUEST_NULL; k++) {
            double t0 = ru_now();
            int rc = cadre_wait_timeout(&r, 0.002, NULL);
            EXPECT(rc == CADRE_ERR_TIMEOUT || (k > 0 && rc == CADRE_SUCCESS),
                   "cadre_wait_timeout(0.002) #%d -> %s: %s", k, cadre_error_string(rc),
                   cadre_last_error());
            EXPECT(ru_now() - t0 < 0.5, "cadre_wait_timeout(0.002) #%d returned after %.3f s", k,
                   ru_now() - t0);
        }
    }
    OK(patient(&r, NULL));
}

int main(int argc, char **argv)
{
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
    int pid = (int)getpid();
    if (me == 0) {
        recv_int(&pid, 1, 1);
        /* eager: the same message is received after the timeout */
        receiver((pid_t)pid, EAGER_N, 10, EAGER_N, 10, 2);
        /* rendezvous: the timed-out message is gone; the next one is whole */
        receiver((pid_t)pid, RNDV_N, 20, BIG_N, 21, 4);
    } else {
        send_int(pid, 0, 1);
        unsigned char *b = map(BIG_N);
        if (!b)
            return 1;
        sender(b, EAGER_N, 10, EAGER_N, 10, 2);
        sender(b, RNDV_N, 20, BIG_N, 21, 4);
        munmap(b, BIG_N);
    }
    cadre_request_t r = CADRE_REQUEST_NULL;
    OK(cadre_ibarrier(W, &r));
    OK(patient(&r, NULL));
    if (!ru_failures)
        printf("tcp_abandon: rank %d ok\n", me);
    cadre_finalize();
    return ru_failures ? 1 : 0;
}
