/* Many large messages in flight (issue 17's windowed bandwidth: osu_bw's
 * window), every element checked: mixed sizes around the eager limit and
 * CADRE_SHM_CMA_MIN into distinct buffers, receives posted before and after
 * the sends, both directions at once; a window into one receive buffer; a
 * truncated large message followed by a good one; CADRE_ANY_SOURCE from
 * every other rank with each source's order kept; blocking receives posted
 * after a window arrived (each must move its message itself, at once); and,
 * with CADRE_TIMEOUT
 * of 5 s or less, a large send given up (its wait timed out) whose buffer is
 * rewritten before the receive is posted: that receive must fail, never
 * succeed with the rewritten data. Any number of ranks; pairs (0,1), (2,3)...
 * run the pair tests. Prints "window_test: rank r ok".
 * WINDOW_KILL=1 (2 ranks, cadrerun --keep-going): rank 1 posts a window of
 * large sends to rank 0 and kills itself; every receive of rank 0 either
 * holds the right data or fails with CADRE_ERR_PEER naming rank 1, within
 * 5 s; rank 0 prints "window_test: kill ok".
 * WINDOW_STOP=1 (2 ranks, CADRE_TIMEOUT=2): rank 1 posts a window of two
 * large sends and stops (SIGSTOP; a child of it sends SIGCONT 4 s later);
 * rank 0's wait for the second, which rank 1 is to write half of into rank
 * 0's buffer, times out; the buffer must then be rank 0's alone: rank 1,
 * once it runs again, must not write into it (the wait returns only after
 * rank 1 answered).
 * WINDOW_EFAULT=1 (2 ranks, shared memory with the single copy): rank 1
 * sends a window of four 256 KiB messages whose third has its first page
 * unmapped once sent (a buffer gone bad under the library); rank 0 receives
 * them after they all arrived, so that the reads of the last three share
 * one system call: the third must fail, the others arrive whole (a failed
 * read in a batch fails its message only); rank 0 prints "window_test:
 * efault ok". */
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rank_util.h"

#define W CADRE_COMM_WORLD

static int me, np;

/* Sizes around the eager limit (4096 B in shared memory; 4032 B, a slot's
 * first page, before), the single-copy threshold (64 KiB) and the
 * pipeline's fragment (128 KiB). */
static const size_t sizes[] = {70001, 4097,   65536, 1 << 20, 3 * (1 << 20) + 7, 131077, 100,
                               65535, 262144, 0,     4096,    524289,            1,      4033};
#define NSIZES (sizeof sizes / sizeof sizes[0])
#define WIN 26

static void window_many(int partner, int late, uint64_t base)
{
    unsigned char *sb[WIN], *rb[WIN];
    cadre_request_t rq[2 * WIN];
    cadre_status_t st[2 * WIN];
    for (int k = 0; k < WIN; k++) {
        size_t n = sizes[k % NSIZES];
        sb[k] = malloc(n + 1);
        rb[k] = malloc(n + 1);
        ru_fill(sb[k], n, me, partner, base + (uint64_t)k);
        memset(rb[k], 0xA5, n + 1);
    }
    int nr = 0;
    if (!late)
        for (int k = 0; k < WIN; k++)
            OK(cadre_irecv(rb[k], sizes[k % NSIZES], CADRE_UINT8, partner, 5, W, &rq[nr++]));
    /* Late: the partner's messages arrive before our receives. */
    for (int k = 0; k < WIN; k++)
        OK(cadre_isend(sb[k], sizes[k % NSIZES], CADRE_UINT8, partner, 5, W, &rq[nr++]));
    if (late) {
        unsigned char z = 0, y;
        OK(cadre_sendrecv(&z, 1, partner, 6, &y, 1, partner, 6, CADRE_UINT8, W,
                          CADRE_STATUS_IGNORE));
        usleep(20000);
        for (int k = 0; k < WIN; k++)
            OK(cadre_irecv(rb[k], sizes[k % NSIZES], CADRE_UINT8, partner, 5, W, &rq[nr++]));
    }
    OK(cadre_waitall(nr, rq, st));
    for (int k = 0; k < WIN; k++) {
        size_t n = sizes[k % NSIZES];
        int ri = late ? WIN + k : k;
        size_t bad = ru_check(rb[k], n, partner, me, base + (uint64_t)k);
        EXPECT(bad == n, "window (late %d) message %d of %zu bytes: byte %zu wrong", late, k, n,
               bad);
        EXPECT(rb[k][n] == 0xA5, "window message %d: written past its %zu bytes", k, n);
        EXPECT(st[ri].error == CADRE_SUCCESS && st[ri].count == n && st[ri].source == partner,
               "window message %d: status error %d count %zu source %d", k, st[ri].error,
               (size_t)st[ri].count, st[ri].source);
        free(sb[k]);
        free(rb[k]);
    }
}

/* osu_bw's loop: the window from one buffer into one buffer. */
static void window_one(int partner, int sender)
{
    const size_t n = (1 << 20) - 3;
    unsigned char *b = malloc(n + 1);
    cadre_request_t rq[WIN];
    cadre_status_t st[WIN];
    if (sender)
        ru_fill(b, n, me, partner, 4242);
    else
        memset(b, 0, n + 1);
    for (int k = 0; k < WIN; k++) {
        if (sender)
            OK(cadre_isend(b, n, CADRE_UINT8, partner, 7, W, &rq[k]));
        else
            OK(cadre_irecv(b, n, CADRE_UINT8, partner, 7, W, &rq[k]));
    }
    OK(cadre_waitall(WIN, rq, st));
    if (!sender) {
        size_t bad = ru_check(b, n, partner, me, 4242);
        EXPECT(bad == n, "one-buffer window: byte %zu wrong", bad);
        EXPECT(b[n] == 0, "one-buffer window: written past the buffer");
        for (int k = 0; k < WIN; k++)
            EXPECT(st[k].error == CADRE_SUCCESS && st[k].count == n, "one-buffer message %d", k);
    }
    free(b);
}

/* A window's messages received one by one with blocking receives posted
 * after they all arrived: each but the first moves in one copy, matched
 * when its receive is posted, its read queued (p2p_cma.c) with no
 * nonblocking request of the receiver outstanding: the receive's own wait
 * must move it (a wait that left the read queued hung here). */
static void blocking_late(int partner, int sender)
{
    enum { NB = 8 };
    const size_t n = 262147;
    unsigned char *b[NB];
    cadre_request_t rq[NB];
    for (int k = 0; k < NB; k++) {
        b[k] = malloc(n + 1);
        if (sender)
            ru_fill(b[k], n, me, partner, 300 + (uint64_t)k);
        else
            memset(b[k], 0, n + 1);
    }
    double t0 = ru_now();
    unsigned char z = 0, y;
    if (sender)
        for (int k = 0; k < NB; k++)
            OK(cadre_isend(b[k], n, CADRE_UINT8, partner, 13, W, &rq[k]));
    /* Behind the RTS in the ring: they have all arrived when this has. */
    OK(cadre_sendrecv(&z, 1, partner, 14, &y, 1, partner, 14, CADRE_UINT8, W, CADRE_STATUS_IGNORE));
    if (sender) {
        OK(cadre_waitall(NB, rq, NULL));
    } else {
        for (int k = 0; k < NB; k++) {
            cadre_status_t st;
            OK(cadre_recv(b[k], n, CADRE_UINT8, partner, 13, W, &st));
            size_t bad = ru_check(b[k], n, partner, me, 300 + (uint64_t)k);
            EXPECT(bad == n && st.count == n, "blocking receive %d: byte %zu wrong", k, bad);
            EXPECT(b[k][n] == 0, "blocking receive %d: written past the buffer", k);
        }
    }
    double el = ru_now() - t0;
    EXPECT(el < 10.0, "blocking receives of a window took %.2f s", el);
    for (int k = 0; k < NB; k++)
        free(b[k]);
}

/* Three large messages in flight, the middle one longer than its receive. */
static void truncate_then_good(int partner, int sender)
{
    const size_t n = 1 << 20, room = 300001;
    unsigned char *b[3];
    for (int k = 0; k < 3; k++)
        b[k] = malloc(n + 16);
    if (sender) {
        cadre_request_t rq[3];
        for (int k = 0; k < 3; k++) {
            ru_fill(b[k], n, me, partner, 76 + (uint64_t)k);
            OK(cadre_isend(b[k], n, CADRE_UINT8, partner, 8, W, &rq[k]));
        }
        OK(cadre_waitall(3, rq, NULL));
    } else {
        cadre_status_t st;
        for (int k = 0; k < 3; k++)
            memset(b[k], 0x5C, n + 16);
        OK(cadre_recv(b[0], n, CADRE_UINT8, partner, 8, W, &st));
        size_t bad = ru_check(b[0], n, partner, me, 76);
        EXPECT(bad == n && st.count == n, "message before the truncated one: byte %zu wrong", bad);
        FAILS(cadre_recv(b[1], room, CADRE_UINT8, partner, 8, W, &st), CADRE_ERR_TRUNCATE,
              "longer than the receive buffer");
        bad = ru_check(b[1], room, partner, me, 77);
        EXPECT(bad == room, "truncated message: byte %zu wrong", bad);
        EXPECT(b[1][room] == 0x5C, "truncated message written past the receive buffer");
        OK(cadre_recv(b[2], n, CADRE_UINT8, partner, 8, W, &st));
        bad = ru_check(b[2], n, partner, me, 78);
        EXPECT(bad == n && st.count == n, "message after the truncated one: byte %zu wrong", bad);
    }
    for (int k = 0; k < 3; k++)
        free(b[k]);
}

/* Every rank but 0 sends 3 large messages to rank 0, which takes them from
 * any source: each source's messages must come in order. */
static void any_source(void)
{
    const int per = 3;
    const size_t cap = 400000;
    if (me != 0) {
        unsigned char *b = malloc(cap);
        for (int i = 0; i < per; i++) {
            size_t n = 150000 + (size_t)me * 1000 + (size_t)i * 70000;
            ru_fill(b, n, me, 0, (uint64_t)i);
            OK(cadre_send(b, n, CADRE_UINT8, 0, 9 + i % 2, W));
        }
        free(b);
        return;
    }
    int total = per * (np - 1), *next = calloc((size_t)np, sizeof *next);
    unsigned char **bufs = malloc((size_t)total * sizeof *bufs);
    cadre_request_t *rq = malloc((size_t)total * sizeof *rq);
    cadre_status_t *st = malloc((size_t)total * sizeof *st);
    for (int k = 0; k < total; k++) {
        bufs[k] = malloc(cap);
        OK(cadre_irecv(bufs[k], cap, CADRE_UINT8, CADRE_ANY_SOURCE, CADRE_ANY_TAG, W, &rq[k]));
    }
    OK(cadre_waitall(total, rq, st));
    for (int k = 0; k < total; k++) {
        int s = st[k].source;
        EXPECT(s > 0 && s < np, "any-source message %d: source %d", k, s);
        if (s <= 0 || s >= np)
            continue;
        int i = next[s]++;
        size_t n = 150000 + (size_t)s * 1000 + (size_t)i * 70000;
        EXPECT(st[k].count == n && st[k].tag == 9 + i % 2,
               "any-source message %d from rank %d: count %zu tag %d, expected %zu tag %d", k, s,
               (size_t)st[k].count, st[k].tag, n, 9 + i % 2);
        size_t bad = ru_check(bufs[k], n, s, 0, (uint64_t)i);
        EXPECT(bad == n, "any-source message %d (number %d from rank %d): byte %zu wrong", k, i, s,
               bad);
        free(bufs[k]);
    }
    free(bufs);
    free(rq);
    free(st);
    free(next);
}

/* A blocking send that times out is given up, behind a nonblocking one still
 * in flight (so that it offers its buffer to be read in place); its buffer
 * is then rewritten, and only after that does the receiver post. */
static void given_up(int partner, int sender)
{
    const char *t = getenv("CADRE_TIMEOUT");
    if (!t || atof(t) > 5)
        return;
    const size_t n = (1 << 20) - 5;
    unsigned char *a = malloc(n), *b = malloc(n);
    int x = 0;
    if (sender) {
        cadre_request_t ra;
        ru_fill(a, n, me, partner, 98);
        ru_fill(b, n, me, partner, 99);
        OK(cadre_isend(a, n, CADRE_UINT8, partner, 10, W, &ra));
        FAILS(cadre_send(b, n, CADRE_UINT8, partner, 11, W), CADRE_ERR_TIMEOUT, "made no progress");
        memset(b, 0xEE, n); /* the user's buffer is the user's again */
        OK(cadre_wait_timeout(&ra, 60, CADRE_STATUS_IGNORE));
        OK(cadre_recv(&x, 1, CADRE_INT32, partner, 12, W, CADRE_STATUS_IGNORE));
    } else {
        usleep((useconds_t)((atof(t) + 1.0) * 1e6)); /* away until the send gave up */
        memset(a, 0, n);
        memset(b, 0, n);
        OK(cadre_recv(a, n, CADRE_UINT8, partner, 10, W, CADRE_STATUS_IGNORE));
        size_t bad = ru_check(a, n, partner, me, 98);
        EXPECT(bad == n, "the message before the given-up one: byte %zu wrong", bad);
        int rc = cadre_recv(b, n, CADRE_UINT8, partner, 11, W, CADRE_STATUS_IGNORE);
        EXPECT(rc == CADRE_ERR_TIMEOUT && strstr(cadre_last_error(), "gave up"),
               "receive of a given-up send -> %s (%s); first byte %#x", cadre_error_string(rc),
               cadre_last_error(), b[0]);
        OK(cadre_send(&x, 1, CADRE_INT32, partner, 12, W));
    }
    free(a);
    free(b);
}

static int window_killed(void)
{
    const size_t n = (1 << 20) - 1;
    enum { K = 8 };
    unsigned char *b[K];
    cadre_request_t rq[K];
    cadre_status_t st[K];
    for (int k = 0; k < K; k++) {
        b[k] = malloc(n);
        if (me == 1)
            ru_fill(b[k], n, 1, 0, 500 + (uint64_t)k);
    }
    int x = 0;
    if (me == 1) {
        OK(cadre_recv(&x, 1, CADRE_INT32, 0, 1, W, CADRE_STATUS_IGNORE)); /* rank 0 posted */
        for (int k = 0; k < K; k++)
            OK(cadre_isend(b[k], n, CADRE_UINT8, 0, 2, W, &rq[k]));
        raise(SIGKILL);
    }
    for (int k = 0; k < K; k++)
        OK(cadre_irecv(b[k], n, CADRE_UINT8, 1, 2, W, &rq[k]));
    OK(cadre_send(&x, 1, CADRE_INT32, 1, 1, W));
    double t0 = ru_now();
    int rc = cadre_waitall(K, rq, st);
    double el = ru_now() - t0;
    EXPECT(rc == CADRE_ERR_PEER, "waitall of a killed sender's window -> %s: %s",
           cadre_error_string(rc), cadre_last_error());
    EXPECT(el < 5, "the window's receives failed after %.1f s", el);
    for (int k = 0; k < K; k++) {
        if (st[k].error == CADRE_SUCCESS) {
            size_t bad = ru_check(b[k], n, 1, 0, 500 + (uint64_t)k);
            EXPECT(bad == n && st[k].count == n, "receive %d succeeded with byte %zu wrong", k, bad);
        } else {
            EXPECT(st[k].error == CADRE_ERR_PEER, "receive %d -> %s", k,
                   cadre_error_string(st[k].error));
        }
        free(b[k]);
    }
    if (ru_failures == 0)
        printf("window_test: kill ok\n");
    return ru_failures ? 1 : 0;
}

static int window_stopped(void)
{
    const size_t n = (1 << 20) - 9;
    unsigned char *a = malloc(n), *b = malloc(n);
    cadre_request_t rq[2];
    int x = 0;
    if (me == 1) {
        ru_fill(a, n, 1, 0, 600);
        ru_fill(b, n, 1, 0, 601);
        OK(cadre_recv(&x, 1, CADRE_INT32, 0, 1, W, CADRE_STATUS_IGNORE));
        OK(cadre_isend(a, n, CADRE_UINT8, 0, 10, W, &rq[0]));
        OK(cadre_isend(b, n, CADRE_UINT8, 0, 11, W, &rq[1]));
        pid_t parent = getpid(), kid = fork();
        if (kid == 0) {
            usleep(4000000);
            kill(parent, SIGCONT);
            _exit(0);
        }
        raise(SIGSTOP);
        waitpid(kid, NULL, 0);
        /* Rank 0 is away for seconds: waits with no CADRE_TIMEOUT. */
        OK(cadre_wait_timeout(&rq[0], 60, CADRE_STATUS_IGNORE));
        cadre_wait_timeout(&rq[1], 60, CADRE_STATUS_IGNORE); /* rank 0 gave it up */
        cadre_request_t r;
        OK(cadre_irecv(&x, 1, CADRE_INT32, 0, 2, W, &r));
        OK(cadre_wait_timeout(&r, 60, CADRE_STATUS_IGNORE));
    } else {
        OK(cadre_send(&x, 1, CADRE_INT32, 1, 1, W));
        usleep(300000); /* rank 1 stopped */
        OK(cadre_irecv(b, n, CADRE_UINT8, 1, 11, W, &rq[1]));
        int rc = cadre_wait(&rq[1], CADRE_STATUS_IGNORE);
        EXPECT(rc == CADRE_ERR_TIMEOUT, "wait for a stopped sender -> %s", cadre_error_string(rc));
        memset(b, 0x3C, n); /* ours again */
        usleep(5000000);    /* rank 1 runs again meanwhile */
        size_t bad = n;
        for (size_t i = 0; i < n && bad == n; i++)
            if (b[i] != 0x3C)
                bad = i;
        EXPECT(bad == n, "a given-up receive's buffer was written at byte %zu after the wait "
                         "returned",
               bad);
        OK(cadre_recv(a, n, CADRE_UINT8, 1, 10, W, CADRE_STATUS_IGNORE));
        bad = ru_check(a, n, 1, 0, 600);
        EXPECT(bad == n, "the message before the given-up one: byte %zu wrong", bad);
        OK(cadre_send(&x, 1, CADRE_INT32, 1, 2, W));
    }
    free(a);
    free(b);
    if (me == 0 && ru_failures == 0)
        printf("window_test: stop ok\n");
    return ru_failures ? 1 : 0;
}

static int window_efault(void)
{
    enum { NM = 4, BAD = 2 };
    const size_t n = 262144;
    unsigned char *b[NM];
    cadre_request_t rq[NM];
    cadre_status_t st[NM];
    for (int k = 0; k < NM; k++) {
        b[k] = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (b[k] == MAP_FAILED) {
            perror("window_test: mmap");
            return 1;
        }
        if (me == 1)
            ru_fill(b[k], n, 1, 0, 700 + (uint64_t)k);
        else
            memset(b[k], 0, n);
    }
    unsigned char z = 0, y;
    if (me == 1) {
        for (int k = 0; k < NM; k++)
            OK(cadre_isend(b[k], n, CADRE_UINT8, 0, 13, W, &rq[k]));
        /* Rank 0 reads the lower half; the sender writes the upper one. */
        munmap(b[BAD], 4096);
        OK(cadre_sendrecv(&z, 1, 0, 14, &y, 1, 0, 14, CADRE_UINT8, W, CADRE_STATUS_IGNORE));
        cadre_waitall(NM, rq, st);
        for (int k = 0; k < NM; k++)
            if (k != BAD)
                EXPECT(st[k].error == CADRE_SUCCESS, "send %d: %s", k,
                       cadre_error_string(st[k].error));
    } else {
        OK(cadre_sendrecv(&z, 1, 1, 14, &y, 1, 1, 14, CADRE_UINT8, W, CADRE_STATUS_IGNORE));
        for (int k = 0; k < NM; k++)
            OK(cadre_irecv(b[k], n, CADRE_UINT8, 1, 13, W, &rq[k]));
        int rc = cadre_waitall(NM, rq, st);
        EXPECT(rc != CADRE_SUCCESS, "a window with an unreadable message succeeded");
        for (int k = 0; k < NM; k++) {
            if (k == BAD) {
                EXPECT(st[k].error != CADRE_SUCCESS,
                       "the message whose sender's buffer is unmapped succeeded");
                continue;
            }
            size_t bad = ru_check(b[k], n, 1, 0, 700 + (uint64_t)k);
            EXPECT(st[k].error == CADRE_SUCCESS && bad == n, "message %d: %s, byte %zu wrong", k,
                   cadre_error_string(st[k].error), bad);
        }
    }
    OK(cadre_barrier(W));
    for (int k = 0; k < NM; k++)
        munmap(me == 1 && k == BAD ? b[k] + 4096 : b[k], me == 1 && k == BAD ? n - 4096 : n);
    if (me == 0 && ru_failures == 0)
        printf("window_test: efault ok\n");
    return ru_failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (cadre_init(&argc, &argv) != CADRE_SUCCESS) {
        fprintf(stderr, "window_test: cadre_init: %s\n", cadre_last_error());
        return 1;
    }
    cadre_comm_rank(W, &me);
    cadre_comm_size(W, &np);
    ru_rank = me;
    if (getenv("WINDOW_STOP") && np == 2) {
        int rc = window_stopped();
        cadre_finalize();
        return rc;
    }
    if (getenv("WINDOW_EFAULT") && np == 2) {
        int rc = window_efault();
        cadre_finalize();
        return rc;
    }
    if (getenv("WINDOW_KILL") && np == 2) {
        int rc = window_killed();
        cadre_finalize();
        return rc;
    }
    int partner = me ^ 1, paired = partner < np;
    if (paired) {
        window_many(partner, 0, 1000);
        window_many(partner, 1, 2000);
        window_one(partner, me < partner);
        window_one(partner, me > partner);
        blocking_late(partner, me < partner);
        truncate_then_good(partner, me < partner);
        given_up(partner, me < partner);
    }
    OK(cadre_barrier(W));
    any_source();
    OK(cadre_barrier(W));
    int fails = ru_failures;
    OK(cadre_allreduce(CADRE_IN_PLACE, &fails, 1, CADRE_INT32, CADRE_SUM, W));
    if (fails == 0)
        printf("window_test: rank %d ok\n", me);
    cadre_finalize();
    return fails ? 1 : 0;
}
