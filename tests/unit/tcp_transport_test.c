/*
 * tcp_transport_test - the TCP transport (p2p/p2p_tcp.c) on its own, without
 * the engine: this file defines the engine entry points, the bootstrap
 * put/get and the process info the transport uses. Each scenario forks the
 * ranks it needs; they init, exchange their endpoint blobs through pipes (the
 * "fence"), and talk through the transport. Run by suite_tcp (test_tcp.c):
 *
 *   tcp_transport_test SCENARIO     exit 0 when every check held
 *   tcp_transport_test pingpong [MAXBYTES]   latency/bandwidth table
 *
 * Checks print "rank R: file:line: what" and exit 1.
 */
#include "config.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "p2p/p2p.h"

#define COOKIE 0x5eed5eedc0ffee11ull
#define MAXR 8
#define TCP_MAX_ADDRS_TEST 16
#define T (&cadre__p2p_tcp)

/* What the transport puts on the wire (duplicated on purpose: the test
 * speaks the protocol itself to play bad peers). */
#define TCP_MAGIC 0x43445443u
struct hello {
    uint32_t magic, version;
    int32_t from, to;
    uint64_t cookie;
};

/* This process: rank 0 holds pipes to every child, a child one pair to rank 0. */
static struct {
    int rank, nprocs;
    int wr[MAXR], rd[MAXR];
    pid_t child[MAXR];
} me = {.rank = -1};

static size_t maxp;

#define CHECK(cond, ...)                                                              \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s:", me.rank, __FILE__, \
                    __LINE__, #cond);                                                 \
            fprintf(stderr, " " __VA_ARGS__);                                         \
            fprintf(stderr, "\n");                                                    \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- mocks: process info, bootstrap, engine --------------------------------- */

struct cadre_proc_info cadre__proc = {.device = -1};
struct cadre_p2p_engine_info cadre__p2p_info;

static void *blob[MAXR];
static size_t blob_len[MAXR];

int cadre__bootstrap_put(const char *key, const void *data, size_t len)
{
    CHECK(strcmp(key, "tcp") == 0, "key %s", key);
    free(blob[cadre__proc.rank]);
    blob[cadre__proc.rank] = malloc(len);
    memcpy(blob[cadre__proc.rank], data, len);
    blob_len[cadre__proc.rank] = len;
    return CADRE_SUCCESS;
}

int cadre__bootstrap_get(int rank, const char *key, void **data, size_t *len)
{
    if (rank < 0 || rank >= MAXR || !blob[rank] || strcmp(key, "tcp"))
        return cadre__error(CADRE_ERR_BOOTSTRAP, "no %s for rank %d", key, rank);
    *data = malloc(blob_len[rank]);
    memcpy(*data, blob[rank], blob_len[rank]);
    *len = blob_len[rank];
    return CADRE_SUCCESS;
}

static struct {
    void (*on_msg)(int peer, const struct cadre_p2p_hdr *h, const void *payload);
    void *(*dest)(int peer, const struct cadre_p2p_hdr *h);
    void *(*edest)(int peer, const struct cadre_p2p_hdr *h);
    int failed[MAXR];
    char why[MAXR][256];
    uint64_t rx[MAXR]; /* messages delivered per peer */
    int bye[MAXR];
} eng;

void cadre__p2p_incoming(int peer, const struct cadre_p2p_hdr *h, const void *payload)
{
    CHECK(peer >= 0 && peer < MAXR && peer != me.rank, "peer %d", peer);
    CHECK(!eng.bye[peer], "message type %u from rank %d after its BYE", h->type, peer);
    if (h->type == CADRE_P2P_BYE)
        eng.bye[peer] = 1;
    else if (eng.on_msg)
        eng.on_msg(peer, h, payload);
    eng.rx[peer]++;
}

void *cadre__p2p_data_dest(int peer, const struct cadre_p2p_hdr *h)
{
    return eng.dest ? eng.dest(peer, h) : NULL;
}

void *cadre__p2p_eager_dest(int peer, const struct cadre_p2p_hdr *h)
{
    return eng.edest ? eng.edest(peer, h) : NULL;
}

void cadre__p2p_peer_failed(int peer, const char *why)
{
    CHECK(peer >= 0 && peer < MAXR, "peer %d", peer);
    CHECK(!eng.failed[peer], "rank %d reported failed twice (%s, then %s)", peer, eng.why[peer],
          why);
    eng.failed[peer] = 1;
    snprintf(eng.why[peer], sizeof eng.why[peer], "%s", why);
}

void cadre__p2p_peer_finalized(int peer)
{
    (void)peer;
}

/* ---- helpers ---------------------------------------------------------------- */

static uint8_t pat(uint64_t seq, size_t i)
{
    return (uint8_t)(seq * 131u + i * 7u + (i >> 9) * 13u + 1u);
}

static void fill(void *buf, size_t len, uint64_t seq)
{
    for (size_t i = 0; i < len; i++)
        ((uint8_t *)buf)[i] = pat(seq, i);
}

static void check_pattern(const void *buf, size_t len, uint64_t seq, int peer)
{
    for (size_t i = 0; i < len; i++)
        CHECK(((const uint8_t *)buf)[i] == pat(seq, i),
              "message %llu (%zu bytes) from rank %d: byte %zu is %u, expected %u",
              (unsigned long long)seq, len, peer, i, ((const uint8_t *)buf)[i], pat(seq, i));
}

static void io_all(int fd, void *p, size_t n, int wr)
{
    while (n > 0) {
        ssize_t k = wr ? write(fd, p, n) : read(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        CHECK(k > 0, "pipe %s: %s", wr ? "write" : "read", k ? strerror(errno) : "EOF");
        p = (char *)p + k;
        n -= (size_t)k;
    }
}

/* The endpoint blob (p2p_tcp.h): magic, version, port at 6, naddr at 8,
 * netns at 16, host at 24, then per address 4 bytes of address and 16 of
 * interface name. */
#define BLOB_HDR 88
#define BLOB_ENT 20

/* A blob like `like` (its netns: loopback is for this namespace) with one
 * address, the given port and address, into out[BLOB_HDR + BLOB_ENT]. */
static void blob_one(uint8_t *out, const uint8_t *like, uint16_t port, uint32_t addr)
{
    uint32_t one = 1;
    memset(out, 0, BLOB_HDR + BLOB_ENT);
    memcpy(out, like, BLOB_HDR);
    memcpy(out + 6, &port, 2);
    memcpy(out + 8, &one, 4);
    memcpy(out + BLOB_HDR, &addr, 4);
    memcpy(out + BLOB_HDR + 4, "lo", 3);
}

/* The listeners of rank r: one per address its blob publishes. */
static int nlisten(int r)
{
    uint32_t naddr;
    memcpy(&naddr, (const uint8_t *)blob[r] + 8, 4);
    return (int)naddr;
}

static double deadline;
static int sleepy; /* sleep in poll(pollfds) when progress found nothing */

static void progress_once(void)
{
    CHECK(now() < deadline, "timed out (delivered %llu from rank 0, %llu from rank 1)",
          (unsigned long long)eng.rx[0], (unsigned long long)eng.rx[1]);
    int n = T->progress();
    CHECK(n >= 0, "progress returned %d", n);
    if (sleepy && n == 0) {
        /* As the engine's progress thread does when idle; a wakeup that
         * pollfds fails to ask for shows as a 2-second sleep. */
        struct pollfd fds[64];
        int nf = T->pollfds(fds, 64);
        CHECK(nf >= 1 && nf <= 64);
        CHECK(poll(fds, (nfds_t)nf, 2000) > 0, "slept 2 s in poll with work pending");
    }
}

static long n_busy;

static void send_msg(int peer, const struct cadre_p2p_hdr *h, const void *payload)
{
    for (;;) {
        int rc = T->send(peer, h, payload);
        if (rc == CADRE_P2P_SENT)
            return;
        CHECK(rc == CADRE_P2P_BUSY, "send to rank %d: %d (%s)", peer, rc, cadre_last_error());
        n_busy++;
        progress_once();
    }
}

static void send_eager(int peer, uint64_t seq, const void *buf, size_t len)
{
    struct cadre_p2p_hdr h = {.type = CADRE_P2P_EAGER, .ctx = 42, .src = me.rank,
                              .tag = (int32_t)seq, .len = len, .seq = seq};
    send_msg(peer, &h, buf);
}

static void send_type(int peer, int type, uint64_t seq)
{
    struct cadre_p2p_hdr h = {.type = (uint8_t)type, .src = me.rank, .seq = seq};
    send_msg(peer, &h, NULL);
}

static void wait_rx(int peer, uint64_t n)
{
    while (eng.rx[peer] < n)
        progress_once();
}

/* Reads from a pipe, progressing the transport until it has data. */
static void pipe_read(int fd, void *p, size_t n)
{
    for (;;) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, 0) > 0)
            break;
        int was = sleepy;
        sleepy = 0;
        progress_once();
        sleepy = was;
    }
    io_all(fd, p, n, 0);
}

/* A barrier through rank 0 that sums v over the processes. */
static long exchange(long v)
{
    if (me.rank != 0) {
        io_all(me.wr[0], &v, sizeof v, 1);
        pipe_read(me.rd[0], &v, sizeof v);
        return v;
    }
    for (int r = 1; r < me.nprocs; r++) {
        long x;
        pipe_read(me.rd[r], &x, sizeof x);
        v += x;
    }
    for (int r = 1; r < me.nprocs; r++)
        io_all(me.wr[r], &v, sizeof v, 1);
    return v;
}

/* Rank 0 is this process, ranks 1..nprocs-1 children, in a world of `size`;
 * all init, then exchange their blobs through rank 0 (the "fence"). */
static int start(int nprocs, int size, double seconds)
{
    me.rank = 0;
    me.nprocs = nprocs;
    for (int r = 1; r < nprocs; r++) {
        int a[2], b[2];
        CHECK(pipe(a) == 0 && pipe(b) == 0);
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            for (int q = 1; q < r; q++)
                close(me.wr[q]), close(me.rd[q]);
            me.rank = r, me.wr[0] = b[1], me.rd[0] = a[0];
            close(a[1]), close(b[0]);
            break;
        }
        me.wr[r] = a[1], me.rd[r] = b[0], me.child[r] = pid;
        close(a[0]), close(b[1]);
    }
    deadline = now() + seconds;
    cadre__proc.rank = me.rank;
    cadre__proc.size = size;
    cadre__p2p_info.job_cookie = COOKIE;
    CHECK(T->init() == CADRE_SUCCESS, "%s", cadre_last_error());
    if (me.rank != 0) {
        io_all(me.wr[0], &blob_len[me.rank], sizeof(size_t), 1);
        io_all(me.wr[0], blob[me.rank], blob_len[me.rank], 1);
        for (int r = 0; r < nprocs; r++) {
            void *b = NULL;
            size_t len;
            io_all(me.rd[0], &len, sizeof len, 0);
            b = malloc(len);
            io_all(me.rd[0], b, len, 0);
            if (r != me.rank)
                blob[r] = b, blob_len[r] = len;
            else
                free(b);
        }
    } else {
        for (int r = 1; r < nprocs; r++) {
            io_all(me.rd[r], &blob_len[r], sizeof(size_t), 0);
            blob[r] = malloc(blob_len[r]);
            io_all(me.rd[r], blob[r], blob_len[r], 0);
        }
        for (int c = 1; c < nprocs; c++)
            for (int r = 0; r < nprocs; r++) {
                io_all(me.wr[c], &blob_len[r], sizeof(size_t), 1);
                io_all(me.wr[c], blob[r], blob_len[r], 1);
            }
    }
    CHECK(T->wireup() == CADRE_SUCCESS);
    return me.rank;
}

static int start_pair(int size, double seconds)
{
    return start(2, size, seconds);
}

/* Ends a scenario: children exit, rank 0 checks that they exited 0. */
static int end_pair(void)
{
    T->finalize();
    if (me.rank != 0)
        exit(0);
    for (int r = 1; r < me.nprocs; r++) {
        int st;
        CHECK(waitpid(me.child[r], &st, 0) == me.child[r]);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d ended with status %#x", r, st);
    }
    return 0;
}

/* ---- EAGER traffic both ways: sizes, FIFO, bursts ------------------------------- */

static size_t (*size_of)(uint64_t seq);

static void check_eager(int peer, const struct cadre_p2p_hdr *h, const void *payload)
{
    uint64_t seq = eng.rx[peer];
    CHECK(h->type == CADRE_P2P_EAGER, "type %u", h->type);
    CHECK(h->seq == seq, "message %llu from rank %d arrived as number %llu",
          (unsigned long long)h->seq, peer, (unsigned long long)seq);
    CHECK(h->ctx == 42 && h->src == peer && h->tag == (int32_t)seq, "header fields");
    CHECK(h->len == size_of(seq), "length %llu, expected %zu", (unsigned long long)h->len,
          size_of(seq));
    CHECK(payload != NULL || h->len == 0);
    check_pattern(payload, h->len, seq, peer);
}

/* Every process sends n messages to every other at once, then waits for
 * theirs. */
static void eager_both_ways(uint64_t n)
{
    char *buf = malloc(maxp);
    eng.on_msg = check_eager;
    for (uint64_t seq = 0; seq < n; seq++) {
        size_t len = size_of(seq);
        for (int peer = 0; peer < me.nprocs; peer++) {
            if (peer == me.rank)
                continue;
            fill(buf, len, seq);
            send_eager(peer, seq, buf, len);
            memset(buf, 0xee, len); /* SENT: the transport no longer needs it */
        }
    }
    for (int peer = 0; peer < me.nprocs; peer++)
        if (peer != me.rank)
            wait_rx(peer, n);
    free(buf);
}

static size_t eager_size(uint64_t seq)
{
    const size_t sizes[] = {0, 1, 7, 4096, 8192 - 80, 8192, 100000, maxp, maxp - 1};
    return sizes[seq % (sizeof sizes / sizeof sizes[0])];
}

static int s_eager(void)
{
    start_pair(2, 30);
    size_of = eager_size;
    eager_both_ways(9 * 5);
    exchange(0);
    return end_pair();
}

static size_t fifo_size(uint64_t seq)
{
    return seq % 997 == 0 ? maxp : seq % 101 == 0 ? 20000 + seq : (seq * 37) % 300;
}

static int s_fifo(void)
{
    start_pair(2, 60);
    size_of = fifo_size;
    eager_both_ways(10000);
    exchange(0);
    return end_pair();
}

static size_t burst_size(uint64_t seq)
{
    return seq % 4 == 3 ? (seq * 13) % 5000 : maxp;
}

static int s_burst(void)
{
    start_pair(2, 60);
    size_of = burst_size;
    eager_both_ways(400); /* 75 MiB each way, no progress but when BUSY */
    long all = exchange(n_busy);
    if (me.rank == 0)
        printf("burst: send returned BUSY %ld times here, %ld times on rank 1\n", n_busy,
               all - n_busy);
    CHECK(all > 0, "the burst never filled the sockets");
    return end_pair();
}

static size_t stall_size(uint64_t seq)
{
    return seq == 0 ? 1 : maxp - (seq * 4099) % 70000;
}

/* Rank 1 stops reading for a while: rank 0's sends must stage the rest of a
 * message and then say BUSY, each call returning at once, and everything
 * must arrive intact when rank 1 reads again. */
static int s_stall(void)
{
    start_pair(2, 60);
    size_of = stall_size;
    eng.on_msg = check_eager;
    const uint64_t n = 200; /* ~45 MiB: more than the socket buffers hold */
    if (me.rank == 1) {
        wait_rx(0, 1); /* connected */
        usleep(500000);
        wait_rx(0, n);
        exchange(0);
        return end_pair();
    }
    char *buf = malloc(maxp);
    double worst = 0;
    long busy_before = 0;
    sleepy = 1; /* BUSY, then sleep until pollfds says the socket drains */
    for (uint64_t seq = 0; seq < n; seq++) {
        size_t len = size_of(seq);
        fill(buf, len, seq);
        struct cadre_p2p_hdr h = {.type = CADRE_P2P_EAGER, .ctx = 42, .src = 0,
                                  .tag = (int32_t)seq, .len = len, .seq = seq};
        for (;;) {
            double t0 = now();
            int rc = T->send(1, &h, buf);
            worst = now() - t0 > worst ? now() - t0 : worst;
            if (rc == CADRE_P2P_SENT)
                break;
            CHECK(rc == CADRE_P2P_BUSY, "send: %d", rc);
            n_busy++;
            progress_once();
        }
        memset(buf, 0xee, len);
        if (seq == 0)
            busy_before = n_busy;
    }
    printf("stall: %ld BUSY while rank 1 slept; the longest send call took %.2f ms\n",
           n_busy - busy_before, worst * 1e3);
    CHECK(n_busy > busy_before, "never BUSY with a sleeping reader");
    /* Blocking for the reader would take most of its 500 ms sleep. */
    CHECK(worst < 0.25, "a send call blocked for %.1f ms", worst * 1e3);
    free(buf);
    exchange(0);
    return end_pair();
}

/* Six processes, all to all, sleeping in poll when idle: more
 * inbound sockets than are read without polling, and every wakeup must come
 * from pollfds. */
static int s_many(void)
{
    start(6, 6, 60);
    sleepy = 1;
    size_of = fifo_size;
    eager_both_ways(1000);
    size_of = burst_size;
    memset(eng.rx, 0, sizeof eng.rx);
    exchange(0);
    eager_both_ways(40);
    exchange(0);
    return end_pair();
}

/* A pair sleeping in poll: connecting, full sockets, staged data. */
static int s_sleepy(void)
{
    start_pair(2, 60);
    sleepy = 1;
    size_of = burst_size;
    eager_both_ways(200);
    exchange(0);
    return end_pair();
}

/* ---- DATA into the engine's destination, headers without payload ------------------ */

#define DATA_LEN (4 * (1024u << 10) + 123) /* four whole fragments (TCP_MAX_PAYLOAD) and a piece */
static uint8_t *data_dest_buf;

struct step {
    int type;
    uint64_t rreq, off, len;
};
static struct step steps[32];
static int nsteps, rounds_done;

static void build_steps(void)
{
    nsteps = 0;
    steps[nsteps++] = (struct step){CADRE_P2P_RTS, 0, 0, 1ull << 40};
    for (uint64_t off = 0; off < DATA_LEN; off += maxp) {
        uint64_t len = DATA_LEN - off < maxp ? DATA_LEN - off : maxp;
        steps[nsteps++] = (struct step){CADRE_P2P_DATA, 7, off, len};
        if (off == maxp) /* buffered DATA between zero-copy fragments */
            steps[nsteps++] = (struct step){CADRE_P2P_DATA, 8, 0, maxp};
        if (off == 2 * maxp)
            steps[nsteps++] = (struct step){CADRE_P2P_CTS, 9, 0, 999999};
    }
    steps[nsteps++] = (struct step){CADRE_P2P_DATA, 8, 0, 5000};
    steps[nsteps++] = (struct step){CADRE_P2P_DATA, 8, 0, 0};
    steps[nsteps++] = (struct step){CADRE_P2P_NACK, 3, 0, 77};
    steps[nsteps++] = (struct step){CADRE_P2P_EAGER, 0, 0, 33};
}

static void *data_dest(int peer, const struct cadre_p2p_hdr *h)
{
    (void)peer;
    CHECK(h->type == CADRE_P2P_DATA);
    return h->rreq == 7 ? data_dest_buf + h->off : NULL;
}

static void check_data(int peer, const struct cadre_p2p_hdr *h, const void *payload)
{
    uint64_t seq = eng.rx[peer];
    const struct step *s = &steps[seq % (uint64_t)nsteps];
    CHECK(h->seq == seq && h->type == s->type && h->len == s->len, "message %llu: type %u len %llu",
          (unsigned long long)seq, h->type, (unsigned long long)h->len);
    if (h->type == CADRE_P2P_DATA) {
        CHECK(h->rreq == s->rreq && h->off == s->off);
        if (h->rreq == 7)
            CHECK(payload == data_dest_buf + h->off, "DATA not delivered in place");
        else
            check_pattern(payload, h->len, seq, peer);
    } else if (h->type == CADRE_P2P_EAGER) {
        check_pattern(payload, h->len, seq, peer);
        /* The last message of a round: the whole DATA message has landed. */
        for (size_t i = 0; i < DATA_LEN; i++)
            CHECK(data_dest_buf[i] == pat(7, i), "DATA byte %zu", i);
        memset(data_dest_buf, 0, DATA_LEN);
        rounds_done++;
    } else {
        CHECK(h->rreq == s->rreq || h->sreq == s->rreq);
    }
}

static int s_data(void)
{
    start_pair(2, 30);
    build_steps();
    int peer = 1 - me.rank, rounds = 3;
    uint8_t *src = malloc(DATA_LEN), *buf = malloc(maxp);
    data_dest_buf = calloc(1, DATA_LEN);
    fill(src, DATA_LEN, 7);
    eng.on_msg = check_data;
    eng.dest = data_dest;
    uint64_t seq = 0;
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < nsteps; i++, seq++) {
            struct step *s = &steps[i];
            struct cadre_p2p_hdr h = {.type = (uint8_t)s->type, .src = me.rank, .len = s->len,
                                      .rreq = s->rreq, .sreq = s->rreq, .off = s->off, .seq = seq};
            const void *payload = NULL;
            if (s->type == CADRE_P2P_DATA && s->rreq == 7) {
                payload = src + s->off;
            } else if (s->type == CADRE_P2P_DATA || s->type == CADRE_P2P_EAGER) {
                fill(buf, s->len, seq);
                payload = buf;
            }
            send_msg(peer, &h, payload);
        }
    }
    wait_rx(peer, seq);
    CHECK(rounds_done == rounds);
    free(src), free(buf), free(data_dest_buf);
    exchange(0);
    return end_pair();
}

/* ---- payloads read into a receive, and the receive given up part-way ---------------- */

/* Rank 1 sends three 1 MiB messages through 4 KiB socket buffers; each send
 * writes what the socket takes within TCP_SEND_WAIT and stages the rest,
 * which rank 1 does not flush until rank 0 says so. Rank 0 thus holds each
 * payload half read:
 *   0: an EAGER read into the receive it claimed (eager_dest), which is then
 *      released: the rest goes to the staging buffer, what was read is kept,
 *      and the message arrives whole, no longer in the receive's buffer;
 *   1: the same, kept: delivered in the claimed buffer without a copy;
 *   2: DATA read into its destination, released: delivered from staging
 *      (the engine drops it), the destination untouched after the release. */
#define CLAIM_N 3
static uint8_t *claim_buf;
static int claims;

static void *claim_dest(int peer, const struct cadre_p2p_hdr *h)
{
    CHECK(peer == 1 && h->type == CADRE_P2P_EAGER && h->len == maxp, "claim of type %u", h->type);
    claims++;
    return claim_buf;
}

static void *claim_data_dest(int peer, const struct cadre_p2p_hdr *h)
{
    (void)peer;
    claims++;
    return h->rreq == 5 ? claim_buf : NULL;
}

static void check_claimed(int peer, const struct cadre_p2p_hdr *h, const void *payload)
{
    uint64_t seq = h->seq;
    if (h->type == CADRE_P2P_CTS)
        return;
    CHECK(h->len == maxp && seq < CLAIM_N, "message %llu", (unsigned long long)seq);
    if (h->type == CADRE_P2P_EAGER) /* DATA for a receive that is gone is not kept */
        check_pattern(payload, maxp, seq, peer);
    if (seq == 1) {
        CHECK(payload == claim_buf, "a claimed payload was not delivered in place");
        return;
    }
    CHECK(payload != claim_buf, "message %llu delivered in a released buffer",
          (unsigned long long)seq);
    for (size_t i = 0; i < maxp; i++)
        CHECK(claim_buf[i] == 0xee, "byte %zu of a released buffer written after the release", i);
}

static int s_claim(void)
{
    setenv("CADRE_TCP_BUFFER", "4096", 1);
    start_pair(2, 60);
    char token = 0;
    if (me.rank == 1) {
        uint8_t *buf = malloc(maxp);
        for (uint64_t seq = 0; seq < CLAIM_N; seq++) {
            pipe_read(me.rd[0], &token, 1); /* rank 0 is ready for this one */
            fill(buf, maxp, seq);
            struct cadre_p2p_hdr h = {.type = seq == 2 ? CADRE_P2P_DATA : CADRE_P2P_EAGER,
                                      .ctx = 42, .src = 1, .tag = 1, .len = maxp, .seq = seq,
                                      .rreq = 5};
            send_msg(0, &h, buf);
            memset(buf, 0xee, maxp);
            io_all(me.rd[0], &token, 1, 0); /* no progress: the staged rest waits */
            /* A header behind the staged rest: once sent, all of it went. */
            send_type(0, CADRE_P2P_CTS, seq);
        }
        free(buf);
        exchange(0);
        return end_pair();
    }
    claim_buf = malloc(maxp);
    eng.on_msg = check_claimed;
    uint64_t ctss = 0;
    for (uint64_t seq = 0; seq < CLAIM_N; seq++) {
        eng.edest = seq < 2 ? claim_dest : NULL;
        eng.dest = seq == 2 ? claim_data_dest : NULL;
        claims = 0;
        uint64_t rx = eng.rx[1];
        io_all(me.wr[1], &token, 1, 1);
        while (!claims)
            progress_once();
        /* Read what comes for 20 ms; the message cannot be whole. */
        for (double t = now(); now() < t + 0.02;)
            progress_once();
        CHECK(eng.rx[1] == rx, "message %llu arrived whole before rank 1 flushed it",
              (unsigned long long)seq);
        if (seq != 1) {
            T->release_dest(1, (const char *)claim_buf, maxp);
            memset(claim_buf, 0xee, maxp);
        }
        io_all(me.wr[1], &token, 1, 1);
        wait_rx(1, rx + 2); /* the message and the CTS behind it */
        ctss++;
        T->release_dest(1, (const char *)claim_buf, maxp); /* nothing in flight: no effect */
    }
    CHECK(ctss == CLAIM_N);
    free(claim_buf);
    exchange(0);
    return end_pair();
}

/* ---- refused connections ------------------------------------------------------------ */

static int raw_connect(int rank)
{
    const uint8_t *b = blob[rank];
    uint16_t port;
    memcpy(&port, b + 6, 2);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = port,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "%s", strerror(errno));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static void raw_write(int fd, const void *p, size_t n)
{
    CHECK(send(fd, p, n, MSG_NOSIGNAL) == (ssize_t)n, "%s", strerror(errno));
}

/* The transport must close fd (EOF or reset) within 3 seconds. */
static void expect_closed(int fd, const char *what)
{
    struct pollfd pf = {fd, POLLIN, 0};
    CHECK(poll(&pf, 1, 3000) == 1, "%s: still open after 3 s", what);
    char c;
    ssize_t n = recv(fd, &c, 1, 0);
    CHECK(n == 0 || (n < 0 && errno == ECONNRESET), "%s: answered (%zd)", what, n);
    close(fd);
}

static void raw_hello(int fd, uint32_t magic, int from, int to, uint64_t cookie)
{
    struct hello h = {magic, 1, from, to, cookie};
    raw_write(fd, &h, sizeof h);
}

/* Plays bad peers against rank 0, then a good rank 2 whose handshake and
 * first message arrive in pieces. `connected` gives a byte once rank 0 has
 * rank 1's connection (a pong came back): only then is a second hello
 * claiming rank 1, with the job's secret, a duplicate to refuse (before,
 * it would be taken for rank 1's own, however long the attacker slept). */
static void attacker(int connected)
{
    me.rank = 2;
    int fd = raw_connect(0);
    raw_hello(fd, TCP_MAGIC, 1, 0, COOKIE ^ 1);
    expect_closed(fd, "wrong cookie");
    fd = raw_connect(0);
    char junk[64];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (char)(i * 97 + 5);
    raw_write(fd, junk, sizeof junk);
    expect_closed(fd, "garbage");
    fd = raw_connect(0);
    raw_hello(fd, TCP_MAGIC, 2, 1, COOKIE);
    expect_closed(fd, "hello meant for rank 1");
    fd = raw_connect(0);
    raw_hello(fd, TCP_MAGIC, 7, 0, COOKIE);
    expect_closed(fd, "rank out of range");
    fd = raw_connect(0);
    raw_hello(fd, TCP_MAGIC, 0, 0, COOKIE);
    expect_closed(fd, "rank 0 claiming to be itself");
    fd = raw_connect(0);
    raw_write(fd, junk, 10);
    close(fd); /* half a handshake, then gone */
    int idle = raw_connect(0); /* says nothing until the end */

    char one;
    CHECK(read(connected, &one, 1) == 1, "rank 0 never had rank 1's connection");
    fd = raw_connect(0);
    raw_hello(fd, TCP_MAGIC, 1, 0, COOKIE);
    expect_closed(fd, "a second connection from rank 1");

    fd = raw_connect(0);
    struct hello h = {TCP_MAGIC, 1, 2, 0, COOKIE}, ack;
    for (size_t i = 0; i < sizeof h; i++) {
        raw_write(fd, (char *)&h + i, 1);
        usleep(1000);
    }
    struct pollfd pf = {fd, POLLIN, 0};
    CHECK(poll(&pf, 1, 3000) == 1 && recv(fd, &ack, sizeof ack, MSG_WAITALL) == sizeof ack,
          "no handshake answer");
    CHECK(ack.magic == TCP_MAGIC && ack.from == 0 && ack.to == 2 && ack.cookie == COOKIE);
    char payload[100];
    fill(payload, sizeof payload, 0);
    struct cadre_p2p_hdr m = {.type = CADRE_P2P_EAGER, .tag = 77, .src = 2, .len = sizeof payload};
    raw_write(fd, &m, 10);
    usleep(2000);
    raw_write(fd, (char *)&m + 10, sizeof m - 10);
    raw_write(fd, payload, sizeof payload);
    struct cadre_p2p_hdr bye = {.type = CADRE_P2P_BYE, .src = 2, .seq = 1};
    raw_write(fd, &bye, sizeof bye);
    usleep(100000);
    close(fd);
    close(idle);
    exit(0);
}

static int pings_pending, stop;

static void on_ping(int peer, const struct cadre_p2p_hdr *h, const void *payload)
{
    if (peer == 2) { /* the good raw peer */
        CHECK(h->type == CADRE_P2P_EAGER && h->tag == 77 && h->len == 100);
        check_pattern(payload, 100, 0, 2);
        return;
    }
    CHECK(peer == 1 - me.rank && h->type == CADRE_P2P_EAGER && h->len == 8);
    CHECK(h->seq == eng.rx[peer]);
    if (h->tag < 0)
        stop = 1;
    else
        pings_pending++;
}

static int s_badconn(void)
{
    start_pair(3, 40);
    eng.on_msg = on_ping;
    int peer = 1 - me.rank;
    uint64_t v = 0, seq = 0;
    pid_t att = -1;
    int connected[2] = {-1, -1};
    if (me.rank == 0) {
        CHECK(pipe(connected) == 0);
        signal(SIGPIPE, SIG_IGN); /* an attacker that failed early: its status says why */
        fflush(NULL);
        att = fork();
        CHECK(att >= 0);
        if (att == 0) {
            close(connected[1]);
            attacker(connected[0]);
        }
        close(connected[0]);
    }
    for (;;) {
        if (me.rank == 0) { /* ping rank 1 while the attacker runs */
            send_eager(peer, seq++, &v, 8);
            wait_rx(peer, seq);
            if (connected[1] >= 0) {
                CHECK(write(connected[1], "c", 1) == 1);
                close(connected[1]);
                connected[1] = -1;
            }
            int st;
            if (waitpid(att, &st, WNOHANG) == att) {
                CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the attacker failed (%#x)", st);
                break;
            }
        } else {
            progress_once();
            for (; pings_pending > 0; pings_pending--)
                send_eager(peer, seq++, &v, 8);
            if (stop)
                break;
        }
    }
    if (me.rank == 0) {
        struct cadre_p2p_hdr h = {.type = CADRE_P2P_EAGER, .tag = -1, .len = 8, .seq = seq};
        send_msg(peer, &h, &v);
        while (!eng.bye[2])
            progress_once();
        CHECK(eng.rx[2] == 2, "rank 2's message and BYE: %llu", (unsigned long long)eng.rx[2]);
        printf("badconn: %llu ping-pongs with rank 1 while refusing 6 bad connections\n",
               (unsigned long long)seq);
    }
    /* Before the barrier: after it, the other process finalizes, closing
     * its sockets without a BYE (no engine here), which a rank still
     * progressing in the barrier may rightly see as a failure. */
    for (int r = 0; r < 3; r++)
        CHECK(!eng.failed[r], "rank %d reported failed: %s", r, eng.why[r]);
    exchange(0);
    return end_pair();
}

/* A peer that passes the handshake and then sends a corrupt header. */
static int s_corrupt(void)
{
    start_pair(3, 20);
    if (me.rank == 1) {
        me.rank = 2; /* the real rank 1 stays quiet; "rank 2" is a raw socket */
        for (int bad = 0; bad < 2; bad++) {
            int fd = raw_connect(0);
            raw_hello(fd, TCP_MAGIC, bad ? 2 : 1, 0, COOKIE);
            struct hello ack;
            CHECK(recv(fd, &ack, sizeof ack, MSG_WAITALL) == sizeof ack && ack.to == (bad ? 2 : 1));
            char payload[16] = "good message";
            struct cadre_p2p_hdr m = {.type = CADRE_P2P_EAGER, .len = sizeof payload};
            raw_write(fd, &m, sizeof m);
            raw_write(fd, payload, sizeof payload);
            if (bad == 0)
                m.type = 99;
            else
                m.len = maxp + 1; /* one byte over what the transport carries */
            raw_write(fd, &m, sizeof m);
            raw_write(fd, payload, sizeof payload);
            expect_closed(fd, "corrupt header");
        }
        me.rank = 1;
        exchange(0);
        return end_pair();
    }
    while (!(eng.failed[1] && eng.failed[2]))
        progress_once();
    CHECK(eng.rx[1] == 1 && eng.rx[2] == 1, "messages before the corrupt ones: %llu %llu",
          (unsigned long long)eng.rx[1], (unsigned long long)eng.rx[2]);
    CHECK(strstr(eng.why[1], "corrupt") && strstr(eng.why[2], "corrupt"), "%s / %s", eng.why[1],
          eng.why[2]);
    printf("corrupt: %s\n", eng.why[1]);
    exchange(0);
    return end_pair();
}

/* ---- failures and orderly ends ---------------------------------------------------------- */

static void on_any(int peer, const struct cadre_p2p_hdr *h, const void *payload)
{
    (void)peer, (void)h, (void)payload;
}

/* Rank 1 streams to rank 0 and is killed; rank 0 must notice. */
static int s_kill_recv(void)
{
    start_pair(2, 30);
    size_of = burst_size;
    eng.on_msg = check_eager;
    if (me.rank == 1) {
        char *buf = malloc(maxp);
        for (uint64_t seq = 0;; seq++) {
            fill(buf, size_of(seq), seq);
            send_eager(0, seq, buf, size_of(seq));
        }
    }
    wait_rx(1, 300);
    kill(me.child[1], SIGKILL);
    double t0 = now();
    while (!eng.failed[1])
        progress_once();
    double dt = now() - t0;
    printf("kill_recv: failure seen %.1f ms after the kill (%llu messages before): %s\n", dt * 1e3,
           (unsigned long long)eng.rx[1], eng.why[1]);
    CHECK(dt < 1.0, "took %.2f s", dt);
    char c = 0;
    struct cadre_p2p_hdr h = {.type = CADRE_P2P_EAGER, .len = 1};
    CHECK(T->send(1, &h, &c) == CADRE_ERR_PEER);
    int st;
    CHECK(waitpid(me.child[1], &st, 0) == me.child[1] && WIFSIGNALED(st));
    T->finalize();
    return 0;
}

/* Rank 0 only sends; rank 1 is killed: send must fail, not raise SIGPIPE. */
static int s_kill_send(void)
{
    start_pair(2, 30);
    eng.on_msg = on_any;
    char *buf = calloc(1, maxp);
    if (me.rank == 1) {
        for (;;)
            progress_once();
    }
    double t0 = 0;
    for (uint64_t seq = 0;; seq++) {
        if (seq == 200) {
            kill(me.child[1], SIGKILL);
            t0 = now();
        }
        struct cadre_p2p_hdr h = {.type = CADRE_P2P_EAGER, .len = maxp / 2, .seq = seq};
        int rc;
        while ((rc = T->send(1, &h, buf)) == CADRE_P2P_BUSY)
            progress_once();
        if (rc == CADRE_ERR_PEER)
            break;
        CHECK(rc == CADRE_P2P_SENT, "send: %d", rc);
        CHECK(now() < deadline);
    }
    double dt = now() - t0;
    CHECK(t0 > 0 && eng.failed[1], "failed before the kill?");
    printf("kill_send: send failed %.1f ms after the kill: %s\n", dt * 1e3, eng.why[1]);
    CHECK(dt < 1.0, "took %.2f s", dt);
    int st;
    CHECK(waitpid(me.child[1], &st, 0) == me.child[1] && WIFSIGNALED(st));
    T->finalize();
    free(buf);
    return 0;
}

/* Rank 1 sends, then BYE, finalizes and exits: EOF after BYE is no failure. */
static int s_bye(void)
{
    start_pair(2, 30);
    size_of = burst_size;
    eng.on_msg = check_eager;
    const uint64_t n = 100;
    if (me.rank == 1) {
        char *buf = malloc(maxp);
        for (uint64_t seq = 0; seq < n; seq++) {
            fill(buf, size_of(seq), seq);
            send_eager(0, seq, buf, size_of(seq));
        }
        send_type(0, CADRE_P2P_BYE, n);
        T->finalize(); /* what is still staged goes out first */
        exit(0);
    }
    while (!eng.bye[1])
        progress_once();
    CHECK(eng.rx[1] == n + 1);
    double until = now() + 0.3;
    while (now() < until)
        progress_once();
    CHECK(!eng.failed[1], "EOF after BYE reported as a failure: %s", eng.why[1]);
    struct pollfd fds[8];
    CHECK(T->pollfds(fds, 8) == nlisten(0), "rank 1's socket is still open");
    return end_pair();
}

/* ---- single process: the blob, reachable, failing connects, no fd leak ------------------ */

static int count_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static int s_basic(void)
{
    me.rank = 2;
    deadline = now() + 20;
    int fds0 = count_fds();
    cadre__proc.rank = 2;
    cadre__proc.size = 4;
    CHECK(T->init() == CADRE_SUCCESS, "%s", cadre_last_error());
    const uint8_t *b = blob[2];
    uint16_t port;
    uint32_t magic, naddr, last;
    memcpy(&magic, b, 4);
    memcpy(&port, b + 6, 2);
    memcpy(&naddr, b + 8, 4);
    CHECK(magic == TCP_MAGIC && port != 0 && naddr >= 1 &&
          blob_len[2] == BLOB_HDR + BLOB_ENT * naddr);
    memcpy(&last, b + BLOB_HDR + BLOB_ENT * (naddr - 1), 4);
    CHECK(last == htonl(INADDR_LOOPBACK), "loopback comes last");
    CHECK(T->reachable(0) && T->reachable(3) && !T->reachable(2) && !T->reachable(4) &&
          !T->reachable(-1));
    CHECK(T->max_payload(0) == maxp && maxp >= 65536);
    struct pollfd fds[TCP_MAX_ADDRS_TEST];
    CHECK(T->pollfds(fds, TCP_MAX_ADDRS_TEST) == (int)naddr);
    for (uint32_t i = 0; i < naddr; i++) {
        /* a listener of its own on each published address, not the wildcard */
        struct sockaddr_in la;
        socklen_t ll = sizeof la;
        uint32_t want;
        memcpy(&want, b + BLOB_HDR + BLOB_ENT * i, 4);
        CHECK(fds[i].events == POLLIN && getsockname(fds[i].fd, (struct sockaddr *)&la, &ll) == 0 &&
                  la.sin_addr.s_addr == want && la.sin_port == port,
              "listener %u", i);
    }
    CHECK(T->wireup() == CADRE_SUCCESS && T->progress() == 0);

    /* Rank 3 published nothing; rank 0's port refuses connections. */
    char c = 1;
    struct cadre_p2p_hdr h = {.type = CADRE_P2P_EAGER, .len = 1};
    CHECK(T->send(3, &h, &c) == CADRE_ERR_PEER && eng.failed[3], "%s", eng.why[3]);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    CHECK(bind(s, (struct sockaddr *)&sa, sizeof sa) == 0 &&
          getsockname(s, (struct sockaddr *)&sa, &sl) == 0);
    close(s);
    uint8_t dead[BLOB_HDR + BLOB_ENT];
    blob_one(dead, b, sa.sin_port, sa.sin_addr.s_addr);
    blob[0] = dead;
    blob_len[0] = sizeof dead;
    int rc;
    while ((rc = T->send(0, &h, &c)) == CADRE_P2P_BUSY)
        progress_once();
    CHECK(rc == CADRE_ERR_PEER && eng.failed[0] && strstr(eng.why[0], "cannot connect"), "%s",
          eng.why[0]);
    printf("basic: %s\n", eng.why[0]);
    blob[0] = NULL;
    T->finalize();
    CHECK(count_fds() == fds0, "file descriptors leaked: %d before, %d after", fds0, count_fds());
    /* init again after finalize works */
    CHECK(T->init() == CADRE_SUCCESS);
    T->finalize();
    CHECK(count_fds() == fds0);
    return 0;
}

/* ---- strangers' connections never keep a peer out ------------------------------------- */

#define CROWD_SILENT 300 /* more than the transport keeps in their handshake */
#define CROWD_HALF 40

/* Rank 1 opens CROWD_SILENT connections to rank 0 that say nothing and
 * CROWD_HALF that send half a hello, all before the two talk; rank 0 takes
 * them while it waits in a barrier. Then the two exchange messages both
 * ways (rank 1's connection to rank 0 must get through the crowd), and
 * every stranger's connection must be closed by rank 0 within 10 s (its
 * handshake deadline is 2 s; it was 30), unanswered. */
static int s_crowd(void)
{
    start_pair(2, 60);
    int n = CROWD_SILENT + CROWD_HALF, *fds = NULL;
    if (me.rank == 1) {
        fds = malloc((size_t)n * sizeof *fds);
        for (int i = 0; i < n; i++) {
            fds[i] = raw_connect(0);
            if (i >= CROWD_SILENT)
                raw_write(fds[i], "\x43\x54\x44\x43\x01\x00\x00\x00", 8);
        }
    }
    double t0 = now();
    exchange(0);
    size_of = eager_size;
    eager_both_ways(9 * 3);
    if (me.rank == 1) {
        int open = n, answered = 0;
        double until = t0 + 10;
        while (open > 0 && now() < until) {
            for (int i = 0; i < n; i++) {
                if (fds[i] < 0)
                    continue;
                char c[32];
                ssize_t r = recv(fds[i], c, sizeof c, MSG_DONTWAIT);
                if (r > 0)
                    answered++;
                if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
                    close(fds[i]);
                    fds[i] = -1;
                    open--;
                }
            }
            usleep(10000);
        }
        CHECK(open == 0, "%d of %d strangers' connections still open %.1f s after they were made",
              open, n, now() - t0);
        CHECK(answered == 0, "rank 0 answered %d strangers' connections", answered);
        printf("crowd: %d strangers' connections all closed within %.2f s; 27 messages each way\n",
               n, now() - t0);
        free(fds);
    }
    exchange(0); /* rank 0 progresses here while rank 1 watches them close */
    for (int r = 0; r < 2; r++)
        CHECK(!eng.failed[r], "rank %d reported failed: %s", r, eng.why[r]);
    exchange(0);
    return end_pair();
}

/* A listener that resets our first two connections (as one crowded by
 * strangers' connections does) and takes the third: the send gets through,
 * connecting again after each reset instead of failing the peer. */
static int s_retry(void)
{
    me.rank = 1;
    deadline = now() + 30;
    cadre__proc.rank = 1;
    cadre__proc.size = 2;
    cadre__p2p_info.job_cookie = COOKIE;
    CHECK(T->init() == CADRE_SUCCESS, "%s", cadre_last_error());
    int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    CHECK(l >= 0 && bind(l, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(l, 8) == 0 &&
          getsockname(l, (struct sockaddr *)&sa, &sl) == 0);
    uint8_t fake[BLOB_HDR + BLOB_ENT];
    blob_one(fake, blob[1], sa.sin_port, sa.sin_addr.s_addr);
    blob[0] = fake;
    blob_len[0] = sizeof fake;
    char payload[5] = "ping";
    struct cadre_p2p_hdr h = {.type = CADRE_P2P_EAGER, .src = 1, .tag = 9, .len = sizeof payload};
    int accepted = 0, fd = -1, rc;
    struct hello hi;
    size_t got = 0;
    while ((rc = T->send(0, &h, payload)) == CADRE_P2P_BUSY) {
        progress_once();
        int a = accept(l, NULL, NULL);
        if (a >= 0 && ++accepted <= 2) {
            struct linger lg = {1, 0}; /* close with a reset */
            setsockopt(a, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
            close(a);
        } else if (a >= 0) {
            CHECK(fd < 0, "a fourth connection");
            fd = a;
        }
        if (fd >= 0 && got < sizeof hi) {
            ssize_t r = recv(fd, (char *)&hi + got, sizeof hi - got, MSG_DONTWAIT);
            if (r > 0 && (got += (size_t)r) == sizeof hi) {
                CHECK(hi.magic == TCP_MAGIC && hi.from == 1 && hi.to == 0 && hi.cookie == COOKIE);
                struct hello ack = {TCP_MAGIC, 1, 0, 1, COOKIE};
                raw_write(fd, &ack, sizeof ack);
            }
        }
    }
    CHECK(rc == CADRE_P2P_SENT && accepted == 3 && !eng.failed[0], "send: %d after %d connects: %s",
          rc, accepted, eng.failed[0] ? eng.why[0] : "");
    struct cadre_p2p_hdr m;
    char back[sizeof payload];
    CHECK(recv(fd, &m, sizeof m, MSG_WAITALL) == sizeof m && m.tag == 9 && m.len == sizeof payload);
    CHECK(recv(fd, back, sizeof back, MSG_WAITALL) == sizeof back && !memcmp(back, payload, 5));
    printf("retry: sent after %d connects (2 reset)\n", accepted);
    close(fd);
    close(l);
    blob[0] = NULL;
    T->finalize();
    return 0;
}

/* ---- ping-pong through the transport (what the engine will do) --------------------------- */

static uint8_t *pp_buf;
static int pp_done, pp_cts, pp_rts;
static uint64_t pp_seq;

static void *pp_dest(int peer, const struct cadre_p2p_hdr *h)
{
    (void)peer;
    return pp_buf + h->off;
}

static void pp_msg(int peer, const struct cadre_p2p_hdr *h, const void *payload)
{
    (void)peer;
    switch (h->type) {
    case CADRE_P2P_EAGER: memcpy(pp_buf, payload, h->len); pp_done = 1; break;
    case CADRE_P2P_RTS: pp_rts = 1; break;
    case CADRE_P2P_CTS: pp_cts = 1; break;
    case CADRE_P2P_DATA:
        if (h->off + h->len == h->sreq) /* sreq carries the total here */
            pp_done = 1;
        break;
    }
}

static void pp_send(int peer, size_t size)
{
    struct cadre_p2p_hdr h = {.src = me.rank, .seq = pp_seq++};
    if (size <= maxp) {
        h.type = CADRE_P2P_EAGER;
        h.len = size;
        send_msg(peer, &h, pp_buf);
        return;
    }
    h.type = CADRE_P2P_RTS;
    h.len = size;
    send_msg(peer, &h, NULL);
    while (!pp_cts)
        progress_once();
    pp_cts = 0;
    for (size_t off = 0; off < size; off += maxp) {
        struct cadre_p2p_hdr d = {.type = CADRE_P2P_DATA, .src = me.rank, .off = off,
                                  .len = size - off < maxp ? size - off : maxp, .sreq = size,
                                  .seq = pp_seq++};
        send_msg(peer, &d, pp_buf + off);
    }
}

static void pp_recv(int peer, size_t size)
{
    if (size > maxp) {
        while (!pp_rts)
            progress_once();
        pp_rts = 0;
        send_type(peer, CADRE_P2P_CTS, pp_seq++);
    }
    while (!pp_done)
        progress_once();
    pp_done = 0;
}

static int s_pingpong(size_t maxsize)
{
    start_pair(2, 600);
    int peer = 1 - me.rank;
    pp_buf = malloc(maxsize);
    memset(pp_buf, 0x5a, maxsize);
    eng.on_msg = pp_msg;
    eng.dest = pp_dest;
    if (me.rank == 0) {
        printf("# ping-pong through the tcp transport (busy-polling progress, "
               "%zu-byte fragments)\n", maxp);
        printf("%10s %8s %12s %10s\n", "bytes", "iters", "latency_us", "GB/s");
    }
    for (size_t size = 8; size <= maxsize; size *= 2) {
        double rt = 20e-6 + 2.0 * (double)size / 4e9;
        long n = (long)(0.3 / rt), warm = 10;
        n = n < 10 ? 10 : n > 20000 ? 20000 : n;
        double t0 = 0;
        for (long i = 0; i < n + warm; i++) {
            if (i == warm)
                t0 = now();
            if (me.rank == 0) {
                pp_send(peer, size);
                pp_recv(peer, size);
            } else {
                pp_recv(peer, size);
                pp_send(peer, size);
            }
        }
        double oneway = (now() - t0) / (2.0 * (double)n);
        if (me.rank == 0) {
            printf("%10zu %8ld %12.2f %10.3f\n", size, n, oneway * 1e6,
                   (double)size / oneway / 1e9);
            fflush(stdout);
        }
    }
    exchange(0);
    return end_pair();
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*fn)(void);
    } scen[] = {{"basic", s_basic},         {"eager", s_eager},         {"fifo", s_fifo},
                {"data", s_data},           {"burst", s_burst},         {"badconn", s_badconn},
                {"corrupt", s_corrupt},     {"kill_recv", s_kill_recv}, {"kill_send", s_kill_send},
                {"bye", s_bye},           {"many", s_many},           {"sleepy", s_sleepy},
                {"stall", s_stall},         {"claim", s_claim},         {"crowd", s_crowd},
                {"retry", s_retry}};
    alarm(120); /* a hang is a failure, even outside the checked loops */
    maxp = T->max_payload(0);
    if (argc >= 2 && !strcmp(argv[1], "pingpong"))
        return s_pingpong(argc > 2 ? strtoul(argv[2], NULL, 0) : 4u << 20);
    for (size_t i = 0; argc == 2 && i < sizeof scen / sizeof scen[0]; i++)
        if (!strcmp(argv[1], scen[i].name))
            return scen[i].fn();
    fprintf(stderr, "usage: %s SCENARIO | pingpong [MAXBYTES]\nscenarios:", argv[0]);
    for (size_t i = 0; i < sizeof scen / sizeof scen[0]; i++)
        fprintf(stderr, " %s", scen[i].name);
    fprintf(stderr, "\n");
    return 2;
}
