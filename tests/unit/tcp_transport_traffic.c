/* tcp_transport_test's scenarios of traffic between processes: EAGER both
 * ways (sizes, FIFO, one connection carrying both ways, bursts, a stalled
 * reader, six processes, sleeping in poll), DATA into the engine's destination, payloads read into a claimed
 * receive and released part-way, and the ping-pong table. The mocks,
 * helpers and main are in tcp_transport_test.c; calls only what
 * tcp_transport_test.h declares, the transport (T) and the C library. */
#include "tcp_transport_test.h"

/* ---- EAGER traffic both ways: sizes, FIFO, bursts ------------------------------- */

size_t (*size_of)(uint64_t seq);

void check_eager(int peer, const struct cadre_p2p_hdr *h, const void *payload)
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
void eager_both_ways(uint64_t n)
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

size_t eager_size(uint64_t seq)
{
    const size_t sizes[] = {0, 1, 7, 4096, 8192 - 80, 8192, 100000, maxp, maxp - 1};
    return sizes[seq % (sizeof sizes / sizeof sizes[0])];
}

int s_eager(void)
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

int s_fifo(void)
{
    start_pair(2, 60);
    size_of = fifo_size;
    eager_both_ways(10000);
    exchange(0);
    return end_pair();
}

size_t burst_size(uint64_t seq)
{
    return seq % 4 == 3 ? (seq * 13) % 5000 : maxp;
}

/* This process's connected TCP sockets (listeners and other kinds left out). */
static int connected_sockets(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    CHECK(d != NULL, "/proc/self/fd: %s", strerror(errno));
    for (struct dirent *e; (e = readdir(d));) {
        int fd = atoi(e->d_name), v = 0;
        socklen_t l = sizeof v;
        struct sockaddr_in sa;
        socklen_t sl = sizeof sa;
        if (e->d_name[0] == '.' || fd == dirfd(d) ||
            getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &l) || v != AF_INET)
            continue;
        l = sizeof v;
        if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &l) || v)
            continue;
        if (getpeername(fd, (struct sockaddr *)&sa, &sl) == 0)
            n++;
    }
    closedir(d);
    return n;
}

/* Rank 0 speaks first; rank 1, which had no connection to rank 0, answers
 * on rank 0's: one connection for the pair, on each side, that then carries
 * both ways at once, in order (every size of fifo_size, both sending
 * together), and stays the only one. */
int s_duplex(void)
{
    start_pair(2, 60);
    size_of = fifo_size;
    eng.on_msg = check_eager;
    int peer = 1 - me.rank;
    uint64_t n = 10000, seq = 0;
    char *buf = malloc(maxp);
    CHECK(buf != NULL);
    if (me.rank == 0) {
        fill(buf, size_of(0), 0);
        send_eager(peer, seq++, buf, size_of(0));
    } else {
        wait_rx(peer, 1);
    }
    exchange(0);
    int first = connected_sockets();
    CHECK(first == 1, "%d connections with rank %d after its first message, expected 1", first,
          peer);
    for (; seq < n; seq++) {
        size_t len = size_of(seq);
        fill(buf, len, seq);
        send_eager(peer, seq, buf, len);
    }
    wait_rx(peer, n);
    exchange(0);
    int after = connected_sockets();
    CHECK(after == 1, "%d connections with rank %d after %llu messages each way, expected 1", after,
          peer, (unsigned long long)n);
    free(buf);
    return end_pair();
}

int s_burst(void)
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
int s_stall(void)
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
int s_many(void)
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
int s_sleepy(void)
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

int s_data(void)
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

int s_claim(void)
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

int s_pingpong(size_t maxsize)
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
