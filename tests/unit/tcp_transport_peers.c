/* tcp_transport_test's scenarios of peers that misbehave or go: bad
 * handshakes and corrupt headers refused, killed peers reported, EOF after
 * BYE, a crowd of strangers' connections, a connect reset and made again,
 * and addresses that drop, answer wrongly or refuse. The mocks, helpers and
 * main are in tcp_transport_test.c; calls only what tcp_transport_test.h
 * declares, the transport (T) and the C library. */
#include "tcp_transport_test.h"

/* ---- refused connections ------------------------------------------------------------ */

int raw_connect(int rank)
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

void raw_write(int fd, const void *p, size_t n)
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

void raw_hello(int fd, uint32_t magic, int from, int to, uint64_t cookie)
{
    struct hello h = {magic, TCP_VERSION, from, to, cookie};
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
    struct hello v1 = {TCP_MAGIC, 1, 2, 0, COOKIE}; /* writes only on its own connections */
    raw_write(fd, &v1, sizeof v1);
    expect_closed(fd, "a handshake of version 1");
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
    struct hello h = {TCP_MAGIC, TCP_VERSION, 2, 0, COOKIE}, ack;
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

int s_badconn(void)
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
        printf("badconn: %llu ping-pongs with rank 1 while refusing 7 bad connections\n",
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
int s_corrupt(void)
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
int s_kill_recv(void)
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
int s_kill_send(void)
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
int s_bye(void)
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

/* ---- strangers' connections never keep a peer out ------------------------------------- */

#define CROWD_SILENT 300 /* more than the transport keeps in their handshake */
#define CROWD_HALF 40

/* Rank 1 opens CROWD_SILENT connections to rank 0 that say nothing and
 * CROWD_HALF that send half a hello, all before the two talk; rank 0 takes
 * them while it waits in a barrier. Then the two exchange messages both
 * ways (rank 1's connection to rank 0 must get through the crowd), and
 * every stranger's connection must be closed by rank 0 within 10 s (its
 * handshake deadline is 2 s; it was 30), unanswered. */
int s_crowd(void)
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

/* This process as rank 1 of 2, its transport up, and rank 0 published at a
 * loopback socket of ours (returned): listening (nonblocking) or only bound,
 * which refuses connects. fake holds rank 0's blob until the scenario ends. */
int fake_rank0(uint8_t fake[BLOB_HDR + BLOB_ENT], int listening, double secs)
{
    me.rank = 1;
    deadline = now() + secs;
    cadre__proc.rank = 1;
    cadre__proc.size = 2;
    cadre__p2p_info.job_cookie = COOKIE;
    CHECK(T->init() == CADRE_SUCCESS, "%s", cadre_last_error());
    int l = socket(AF_INET, SOCK_STREAM | (listening ? SOCK_NONBLOCK : 0), 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    CHECK(l >= 0 && bind(l, (struct sockaddr *)&sa, sizeof sa) == 0 &&
          (!listening || listen(l, 8) == 0) && getsockname(l, (struct sockaddr *)&sa, &sl) == 0);
    blob_one(fake, blob[1], sa.sin_port, sa.sin_addr.s_addr);
    blob[0] = fake;
    blob_len[0] = BLOB_HDR + BLOB_ENT;
    return l;
}

/* A listener that resets our first two connections (as one crowded by
 * strangers' connections does) and takes the third: the send gets through,
 * connecting again after each reset instead of failing the peer. */
int s_retry(void)
{
    uint8_t fake[BLOB_HDR + BLOB_ENT];
    int l = fake_rank0(fake, 1, 30);
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
                struct hello ack = {TCP_MAGIC, TCP_VERSION, 0, 1, COOKIE};
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

/* Rank 0 as published to rank 1: four loopback addresses on one port, the
 * first drops connects (a listener whose queue is full: like a firewall
 * that drops, or a dead link), the second is another process of the job
 * (it answers the handshake as rank 2), the third refuses, the fourth is
 * rank 0. The send goes through at once, although a connect to the first
 * would wait for CADRE_TCP_PEER_TIMEOUT (60 s here): every address is
 * tried at the same time; the other process is closed without a message. */
int s_decoy(void)
{
    me.rank = 1;
    deadline = now() + 40;
    cadre__proc.rank = 1;
    cadre__proc.size = 3;
    cadre__p2p_info.job_cookie = COOKIE;
    setenv("CADRE_TCP_PEER_TIMEOUT", "60", 1);
    CHECK(T->init() == CADRE_SUCCESS, "%s", cadre_last_error());
    const char *ips[4] = {"127.0.0.3", "127.0.0.2", "127.0.0.4", "127.0.0.1"};
    int lfd[4] = {-1, -1, -1, -1}, queued = -1;
    uint16_t port = 0;
    uint8_t fake[BLOB_HDR + 4 * BLOB_ENT];
    blob_one(fake, blob[1], 0, 0);
    for (int k = 3; k >= 0; k--) { /* rank 0's listener first: it picks the port */
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = port};
        socklen_t sl = sizeof sa;
        CHECK(inet_pton(AF_INET, ips[k], &sa.sin_addr) == 1);
        memcpy(fake + BLOB_HDR + k * BLOB_ENT, &sa.sin_addr.s_addr, 4);
        memcpy(fake + BLOB_HDR + k * BLOB_ENT + 4, "lo", 3);
        if (k == 2)
            continue; /* nothing listens: refused */
        lfd[k] = socket(AF_INET, SOCK_STREAM | (k == 0 ? 0 : SOCK_NONBLOCK), 0);
        CHECK(lfd[k] >= 0 && bind(lfd[k], (struct sockaddr *)&sa, sizeof sa) == 0 &&
                  listen(lfd[k], k == 0 ? 0 : 8) == 0 &&
                  getsockname(lfd[k], (struct sockaddr *)&sa, &sl) == 0,
              "%s: %s", ips[k], strerror(errno));
        port = sa.sin_port;
        if (k == 0) { /* fill its queue: later SYNs are dropped */
            queued = socket(AF_INET, SOCK_STREAM, 0);
            CHECK(connect(queued, (struct sockaddr *)&sa, sizeof sa) == 0, "%s", strerror(errno));
        }
    }
    uint32_t four = 4;
    memcpy(fake + 6, &port, 2);
    memcpy(fake + 8, &four, 4);
    blob[0] = fake;
    blob_len[0] = sizeof fake;
    char payload[5] = "ping";
    struct cadre_p2p_hdr h = {.type = CADRE_P2P_EAGER, .src = 1, .tag = 9, .len = sizeof payload};
    int fd[4] = {-1, -1, -1, -1}, rc, decoy_answered = 0;
    size_t got[4] = {0};
    struct hello hi[4];
    double t0 = now();
    while ((rc = T->send(0, &h, payload)) == CADRE_P2P_BUSY) {
        progress_once();
        for (int k = 1; k <= 3; k += 2) {
            int a = fd[k] < 0 ? accept(lfd[k], NULL, NULL) : -1;
            if (a >= 0)
                fd[k] = a;
            if (fd[k] < 0 || got[k] == sizeof hi[k])
                continue;
            ssize_t r = recv(fd[k], (char *)&hi[k] + got[k], sizeof hi[k] - got[k], MSG_DONTWAIT);
            if (r > 0 && (got[k] += (size_t)r) == sizeof hi[k]) {
                CHECK(hi[k].magic == TCP_MAGIC && hi[k].from == 1 && hi[k].to == 0 &&
                      hi[k].cookie == COOKIE);
                /* rank 0 answers as itself; the other process as rank 2 */
                struct hello ack = {TCP_MAGIC, TCP_VERSION, k == 3 ? 0 : 2, 1, COOKIE};
                raw_write(fd[k], &ack, sizeof ack);
                decoy_answered += k == 1;
            }
        }
    }
    double dt = now() - t0;
    CHECK(rc == CADRE_P2P_SENT && !eng.failed[0], "send: %d: %s", rc,
          eng.failed[0] ? eng.why[0] : "");
    CHECK(dt < 30, "connected after %.1f s: the dropping address held it up", dt);
    struct cadre_p2p_hdr m;
    char back[sizeof payload];
    CHECK(recv(fd[3], &m, sizeof m, MSG_WAITALL) == sizeof m && m.tag == 9 &&
          m.len == sizeof payload);
    CHECK(recv(fd[3], back, sizeof back, MSG_WAITALL) == sizeof back && !memcmp(back, payload, 5));
    /* The other process: closed (once it answered), never a message. */
    if (decoy_answered) {
        struct pollfd pf = {fd[1], POLLIN, 0};
        while (poll(&pf, 1, 0) == 0 && now() < deadline)
            progress_once();
        CHECK(recv(fd[1], &m, sizeof m, MSG_DONTWAIT) == 0, "the other process got bytes");
    }
    printf("decoy: sent in %.3f s past a dropping, a wrong (%s) and a refusing address\n", dt,
           decoy_answered ? "answered and closed" : "not reached first");
    for (int k = 0; k < 4; k++) {
        if (fd[k] >= 0)
            close(fd[k]);
        if (lfd[k] >= 0)
            close(lfd[k]);
    }
    close(queued);
    blob[0] = NULL;
    T->finalize();
    unsetenv("CADRE_TCP_PEER_TIMEOUT");
    return 0;
}

/* A farewell (cadre_finalize's BYE) to a peer whose listener is gone: the
 * refused connect fails the peer at once, "1 try", where outside finalize a
 * refused connect is tried again for a second (the peer may only be slow);
 * those retries held every such process's exit for a second. */
int s_farewell(void)
{
    uint8_t fake[BLOB_HDR + BLOB_ENT];
    int l = fake_rank0(fake, 0, 20); /* bound, never listening: refuses */
    eng.farewells = 1;
    struct cadre_p2p_hdr h = {.type = CADRE_P2P_BYE, .src = 1};
    int rc;
    while ((rc = T->send(0, &h, NULL)) == CADRE_P2P_BUSY && !eng.failed[0])
        progress_once();
    CHECK(eng.failed[0] && strstr(eng.why[0], "(1 address, 1 try)"),
          "send: %d; rank 0 %s", rc, eng.failed[0] ? eng.why[0] : "not failed");
    printf("farewell: %s\n", eng.why[0]);
    close(l);
    blob[0] = NULL;
    T->finalize();
    return 0;
}
