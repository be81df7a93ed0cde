/* What tcp_transport_test's files share: tcp_transport_test.c (the mocks
 * of the engine, bootstrap and process info; the helpers below; main and
 * the single-process scenario), tcp_transport_traffic.c (EAGER, DATA,
 * claimed payloads, ping-pong) and tcp_transport_peers.c (bad and killed
 * peers, strangers' connections, retried and decoy addresses). They call
 * the transport (T), p2p/p2p.h, bootstrap/bootstrap.h and the C library. */
#ifndef CADRE_TCP_TRANSPORT_TEST_H
#define CADRE_TCP_TRANSPORT_TEST_H

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
#define TCP_VERSION 2u /* 2: a connection carries both ways */
struct hello {
    uint32_t magic, version;
    int32_t from, to;
    uint64_t cookie;
};

/* This process: rank 0 holds pipes to every child, a child one pair to rank 0. */
struct tt_me {
    int rank, nprocs;
    int wr[MAXR], rd[MAXR];
    pid_t child[MAXR];
};
extern struct tt_me me;

extern size_t maxp; /* the transport's max_payload */

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

/* The engine as the mock plays it: what each scenario sets to see messages
 * and give destinations, and what the transport told it. */
struct tt_eng {
    void (*on_msg)(int peer, const struct cadre_p2p_hdr *h, const void *payload);
    void *(*dest)(int peer, const struct cadre_p2p_hdr *h);
    void *(*edest)(int peer, const struct cadre_p2p_hdr *h);
    int failed[MAXR];
    char why[MAXR][256];
    uint64_t rx[MAXR]; /* messages delivered per peer */
    int bye[MAXR];
    int farewells; /* what cadre__p2p_farewells answers */
};
extern struct tt_eng eng;

/* The endpoint blobs, as put and got through the mock bootstrap. */
extern void *blob[MAXR];
extern size_t blob_len[MAXR];

/* The endpoint blob (p2p_tcp.h): magic, version, port at 6, naddr at 8,
 * netns at 16, host at 24, then per address 4 bytes of address and 16 of
 * interface name. */
#define BLOB_HDR 88
#define BLOB_ENT 20

extern double deadline; /* progress_once fails the check past it */
extern int sleepy;      /* sleep in poll(pollfds) when progress found nothing */
extern long n_busy;     /* BUSY answers send_msg waited out */

double now(void);
uint8_t pat(uint64_t seq, size_t i);
void fill(void *buf, size_t len, uint64_t seq);
void check_pattern(const void *buf, size_t len, uint64_t seq, int peer);
/* All n bytes to (wr) or from fd, a pipe or a socket; EOF or an error fails the check. */
void io_all(int fd, void *p, size_t n, int wr);
void blob_one(uint8_t *out, const uint8_t *like, uint16_t port, uint32_t addr);
int nlisten(int r);
void progress_once(void);
void send_msg(int peer, const struct cadre_p2p_hdr *h, const void *payload);
void send_eager(int peer, uint64_t seq, const void *buf, size_t len);
void send_type(int peer, int type, uint64_t seq);
void wait_rx(int peer, uint64_t n);
void pipe_read(int fd, void *p, size_t n);
long exchange(long v);
int start(int nprocs, int size, double seconds);
int start_pair(int size, double seconds);
int end_pair(void);

/* tcp_transport_traffic.c: EAGER traffic (also used by the peers' scenarios) */
extern size_t (*size_of)(uint64_t seq);
void check_eager(int peer, const struct cadre_p2p_hdr *h, const void *payload);
void eager_both_ways(uint64_t n);
size_t eager_size(uint64_t seq);
size_t burst_size(uint64_t seq);

/* tcp_transport_peers.c: a raw peer's side of the protocol, and a fake rank 0
 * (this process as rank 1 of 2, rank 0 published at the returned socket of
 * ours: listening, or only bound). */
int raw_connect(int rank);
void raw_write(int fd, const void *p, size_t n);
void raw_hello(int fd, uint32_t magic, int from, int to, uint64_t cookie);
int fake_rank0(uint8_t fake[BLOB_HDR + BLOB_ENT], int listening, double secs);
/* The scenarios. */
int s_basic(void);
int s_eager(void);
int s_fifo(void);
int s_burst(void);
int s_stall(void);
int s_many(void);
int s_sleepy(void);
int s_data(void);
int s_claim(void);
int s_pingpong(size_t maxsize);
int s_badconn(void);
int s_corrupt(void);
int s_kill_recv(void);
int s_kill_send(void);
int s_bye(void);
int s_crowd(void);
int s_late_bye(void);
int s_duplex(void);
int s_retry(void);
int s_decoy(void);
int s_farewell(void);

#endif
