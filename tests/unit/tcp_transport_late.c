/* tcp_transport_test's scenario of a BYE that comes after the reset it
 * preceded: a rank that finalizes closes our connection with our bytes
 * unread (a reset) just after it sent its BYE on its own connection to us;
 * when its process moves to another core in between, the reset can arrive
 * first (each core's loopback queue is its own). A send that meets the
 * reset must read the peer's connection until it ends before it fails the
 * peer: the BYE then says the rank finalized, where the reset alone made
 * it a failure, and cadre blamed that rank for a failure elsewhere (the
 * fault soak of make check, under load). Calls only what
 * tcp_transport_test.h declares, the transport (T) and the C library. */
#include "tcp_transport_test.h"

/* The fake rank 0, in a child: takes rank 1's connection and message,
 * connects to rank 1 and sends it one message (`ready` is written once
 * rank 1 may have it), then resets rank 1's connection, tells `reset`,
 * and only LATE_BYE_DELAY seconds later sends its BYE and closes. */
#define LATE_BYE_DELAY 0.3
static void late_rank0(int l, int ready, int reset)
{
    me.rank = 0;
    struct pollfd pf = {l, POLLIN, 0};
    CHECK(poll(&pf, 1, 10000) == 1, "no connection from rank 1");
    int in = accept(l, NULL, NULL);
    CHECK(in >= 0, "accept: %s", strerror(errno));
    struct hello hi;
    io_all(in, &hi, sizeof hi, 0);
    CHECK(hi.magic == TCP_MAGIC && hi.from == 1 && hi.to == 0 && hi.cookie == COOKIE);
    raw_hello(in, TCP_MAGIC, 0, 1, COOKIE);
    struct cadre_p2p_hdr m;
    char payload[4];
    io_all(in, &m, sizeof m, 0);
    CHECK(m.type == CADRE_P2P_EAGER && m.len == sizeof payload, "type %u len %llu", m.type,
          (unsigned long long)m.len);
    io_all(in, payload, sizeof payload, 0);
    /* Our own connection to rank 1, and a message on it. */
    int out = raw_connect(1);
    raw_hello(out, TCP_MAGIC, 0, 1, COOKIE);
    io_all(out, &hi, sizeof hi, 0);
    CHECK(hi.magic == TCP_MAGIC && hi.from == 1 && hi.to == 0, "rank 1's answer");
    struct cadre_p2p_hdr h = {.type = CADRE_P2P_EAGER, .src = 0, .tag = 7, .len = sizeof payload,
                              .seq = 1};
    raw_write(out, &h, sizeof h);
    raw_write(out, payload, sizeof payload);
    io_all(ready, "r", 1, 1);
    /* Rank 1's next message stays unread: closing now resets its connection. */
    struct linger lg = {1, 0};
    setsockopt(in, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(in);
    io_all(reset, "x", 1, 1);
    struct timespec ts = {0, (long)(LATE_BYE_DELAY * 1e9)};
    nanosleep(&ts, NULL);
    struct cadre_p2p_hdr bye = {.type = CADRE_P2P_BYE, .src = 0, .seq = 2};
    raw_write(out, &bye, sizeof bye);
    close(out);
    exit(0);
}

int s_late_bye(void)
{
    uint8_t fake[BLOB_HDR + BLOB_ENT];
    int l = fake_rank0(fake, 1, 30);
    int ready[2], reset[2];
    CHECK(pipe(ready) == 0 && pipe(reset) == 0);
    pid_t child = fork();
    CHECK(child >= 0, "fork: %s", strerror(errno));
    if (child == 0)
        late_rank0(l, ready[1], reset[1]);
    close(l);
    char payload[4] = "abc";
    struct cadre_p2p_hdr h = {.type = CADRE_P2P_EAGER, .src = 1, .tag = 7, .len = sizeof payload};
    int rc;
    while ((rc = T->send(0, &h, payload)) == CADRE_P2P_BUSY)
        progress_once();
    CHECK(rc == CADRE_P2P_SENT, "first send: %d", rc);
    char c;
    pipe_read(ready[0], &c, 1);
    wait_rx(0, 1);
    pipe_read(reset[0], &c, 1);
    /* Sends until one meets the reset. */
    double t0 = now();
    do {
        h.seq++;
        while ((rc = T->send(0, &h, payload)) == CADRE_P2P_BUSY)
            progress_once();
    } while (rc == CADRE_P2P_SENT && now() < deadline);
    double dt = now() - t0;
    CHECK(rc == CADRE_ERR_PEER && eng.failed[0], "send: %d", rc);
    printf("late_bye: the send failed %.0f ms after the reset, rank 0's BYE %s: %s\n", dt * 1e3,
           eng.bye[0] ? "read first" : "not read", eng.why[0]);
    CHECK(eng.bye[0], "rank 0 was failed (%s) before its BYE, sent %.1f s after the reset, was read",
          eng.why[0], LATE_BYE_DELAY);
    int st;
    CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "the fake rank 0 ended with status %#x", st);
    blob[0] = NULL;
    T->finalize();
    return 0;
}
