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
 *
 * This file: the mocks, the helpers tcp_transport_test.h declares, the
 * single-process scenario (basic) and main; the scenarios between processes
 * are in tcp_transport_traffic.c and tcp_transport_peers.c.
 */
#include "tcp_transport_test.h"

struct tt_me me = {.rank = -1};

size_t maxp;

double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- mocks: process info, bootstrap, engine --------------------------------- */

struct cadre_proc_info cadre__proc = {.device = -1};
struct cadre_p2p_engine_info cadre__p2p_info;

void *blob[MAXR];
size_t blob_len[MAXR];

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

struct tt_eng eng;

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

/* Whether the engine is in cadre_finalize's farewells: as a scenario says. */
int cadre__p2p_farewells(void)
{
    return eng.farewells;
}

/* ---- helpers ---------------------------------------------------------------- */

uint8_t pat(uint64_t seq, size_t i)
{
    return (uint8_t)(seq * 131u + i * 7u + (i >> 9) * 13u + 1u);
}

void fill(void *buf, size_t len, uint64_t seq)
{
    for (size_t i = 0; i < len; i++)
        ((uint8_t *)buf)[i] = pat(seq, i);
}

void check_pattern(const void *buf, size_t len, uint64_t seq, int peer)
{
    for (size_t i = 0; i < len; i++)
        CHECK(((const uint8_t *)buf)[i] == pat(seq, i),
              "message %llu (%zu bytes) from rank %d: byte %zu is %u, expected %u",
              (unsigned long long)seq, len, peer, i, ((const uint8_t *)buf)[i], pat(seq, i));
}

void io_all(int fd, void *p, size_t n, int wr)
{
    while (n > 0) {
        ssize_t k = wr ? write(fd, p, n) : read(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        CHECK(k > 0, "%s of fd %d: %s", wr ? "write" : "read", fd, k ? strerror(errno) : "EOF");
        p = (char *)p + k;
        n -= (size_t)k;
    }
}


/* A blob like `like` (its netns: loopback is for this namespace) with one
 * address, the given port and address, into out[BLOB_HDR + BLOB_ENT]. */
void blob_one(uint8_t *out, const uint8_t *like, uint16_t port, uint32_t addr)
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
int nlisten(int r)
{
    uint32_t naddr;
    memcpy(&naddr, (const uint8_t *)blob[r] + 8, 4);
    return (int)naddr;
}

double deadline;
int sleepy;

void progress_once(void)
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

long n_busy;

void send_msg(int peer, const struct cadre_p2p_hdr *h, const void *payload)
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

void send_eager(int peer, uint64_t seq, const void *buf, size_t len)
{
    struct cadre_p2p_hdr h = {.type = CADRE_P2P_EAGER, .ctx = 42, .src = me.rank,
                              .tag = (int32_t)seq, .len = len, .seq = seq};
    send_msg(peer, &h, buf);
}

void send_type(int peer, int type, uint64_t seq)
{
    struct cadre_p2p_hdr h = {.type = (uint8_t)type, .src = me.rank, .seq = seq};
    send_msg(peer, &h, NULL);
}

void wait_rx(int peer, uint64_t n)
{
    while (eng.rx[peer] < n)
        progress_once();
}

/* Reads from a pipe, progressing the transport until it has data. */
void pipe_read(int fd, void *p, size_t n)
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
long exchange(long v)
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
int start(int nprocs, int size, double seconds)
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

int start_pair(int size, double seconds)
{
    return start(2, size, seconds);
}

/* Ends a scenario: children exit, rank 0 checks that they exited 0. */
int end_pair(void)
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

int s_basic(void)
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
                {"retry", s_retry}, {"decoy", s_decoy}, {"farewell", s_farewell}, {"late_bye", s_late_bye},
                {"duplex", s_duplex}};
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
