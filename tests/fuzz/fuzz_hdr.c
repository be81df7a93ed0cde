/*
 * fuzz_hdr - libFuzzer target for what a peer can send us (make fuzz; see
 * README, "Developing"). The first byte of an input picks the mode:
 *
 *   even: cadre__p2p_hdr_check on one header (the rest of the input, zero
 *         padded), under the limits of one receiving path chosen by the
 *         second byte: the TCP framing, the shm eager or bulk lane, or the
 *         engine's stream check. A header it accepts must then be safe to
 *         act on as those paths do: the checks below trap when not.
 *   odd:  the TCP receive state machine (p2p_tcp_recv.c, the real code)
 *         fed the rest of the input as the byte stream of one inbound
 *         connection, through a socketpair, in chunks of a size the first
 *         byte picks; bit 1 says whether the stream starts with the
 *         handshake or after it. The engine is mocked: it touches every
 *         payload byte it is handed, so ASan sees any read out of bounds.
 *
 * tests/fuzz/corpus holds valid headers of every type for both modes
 * (written by gen_corpus.c).
 */
#include "config.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "p2p/p2p_tcp.h"
#include "tests/fuzz/fuzz_common.h"

/* ---- mocks of what p2p_tcp_recv.c calls outside itself ---------------------- */
struct tcp_state cadre__p2p_tcp_state;
struct cadre_p2p_engine_info cadre__p2p_info;
static struct tcp_state *const tcp = &cadre__p2p_tcp_state;

int cadre__log_enabled(int level, int subsys)
{
    (void)level;
    (void)subsys;
    return 0;
}

void cadre__log(int level, int subsys, const char *fmt, ...)
{
    (void)level;
    (void)subsys;
    (void)fmt;
}

int cadre__p2p_tcp_peer_fail(int peer, const char *fmt, ...)
{
    if (peer < 0 || peer >= tcp->size)
        __builtin_trap();
    struct tcp_peer *p = &tcp->peers[peer];
    if (p->in)
        cadre__p2p_tcp_in_close(p->in);
    p->failed = 1;
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return CADRE_ERR_PEER;
}

static unsigned char dest[1 << 16]; /* the "user buffer" of receive request 1 */
static volatile unsigned sink;

void *cadre__p2p_data_dest(int peer, const struct cadre_p2p_hdr *h)
{
    (void)peer;
    if (h->rreq != 1 || h->off > sizeof dest || h->len > sizeof dest - h->off)
        return NULL;
    return dest + h->off;
}

static unsigned char edest[1 << 20]; /* the buffer of a receive that tag 1 matches */

void *cadre__p2p_eager_dest(int peer, const struct cadre_p2p_hdr *h)
{
    (void)peer;
    if (h->type != CADRE_P2P_EAGER || h->tag != 1 || h->len > sizeof edest)
        return NULL;
    return edest;
}

void cadre__p2p_incoming(int peer, const struct cadre_p2p_hdr *h, const void *payload)
{
    if (peer < 0 || peer >= tcp->size || peer == tcp->rank)
        __builtin_trap();
    if (h->type < 1 || h->type > CADRE_P2P_TYPE_MAX)
        __builtin_trap();
    if (cadre__p2p_has_payload(h->type)) {
        if (h->len > TCP_MAX_PAYLOAD || (h->len && !payload))
            __builtin_trap();
        const unsigned char *p = payload;
        unsigned s = 0;
        for (uint64_t i = 0; i < h->len; i++)
            s += p[i];
        sink += s;
    }
}

/* ---- mode 0: the check alone -------------------------------------------------- */
static void check_one(const uint8_t *data, size_t size)
{
    unsigned path = size ? data[0] % 4u : FUZZ_PATH_TCP;
    if (size)
        data++, size--;
    struct cadre_p2p_hdr h;
    memset(&h, 0, sizeof h);
    memcpy(&h, data, size < sizeof h ? size : sizeof h);
    /* The limits the real callers pass (p2p_tcp_recv.c, p2p_shm.c,
     * p2p_match.c), with the shm defaults. */
    struct cadre_p2p_wire w = {0};
    switch (path) {
    case FUZZ_PATH_TCP:
        w.types = CADRE_P2P_TYPES_ALL;
        w.max_payload = TCP_MAX_PAYLOAD;
        break;
    case FUZZ_PATH_SHM_EAGER:
        w.types = CADRE_P2P_TYPES_ALL & ~CADRE_P2P_TYPE_BIT(CADRE_P2P_DATA);
        w.max_payload = FUZZ_SHM_SLOT_DATA;
        w.max_inline = CADRE_P2P_INLINE_MAX;
        break;
    case FUZZ_PATH_SHM_BULK:
        w.types = CADRE_P2P_TYPE_BIT(CADRE_P2P_DATA);
        w.max_payload = FUZZ_SHM_FRAG;
        w.max_inline = CADRE_P2P_INLINE_MAX;
        break;
    default:
        w.types = CADRE_P2P_TYPES_ALL;
        w.max_payload = UINT64_MAX;
        w.nranks = 1 + (int)(h.reserved % 64);
        w.seq = h.seq ^ (h.reserved & 1); /* in sequence or not */
        break;
    }
    char why[160];
    why[0] = '\0';
    int rc = cadre__p2p_hdr_check(&h, &w, why, sizeof why);
    if (rc != CADRE_P2P_HDR_OK) {
        if (rc != CADRE_P2P_HDR_CORRUPT && rc != CADRE_P2P_HDR_IGNORE)
            __builtin_trap();
        if (!why[0] || strlen(why) >= sizeof why)
            __builtin_trap();
        return;
    }
    /* Accepted: what the paths then do must stay in bounds. */
    if (h.type < 1 || h.type > CADRE_P2P_TYPE_MAX || !(w.types & CADRE_P2P_TYPE_BIT(h.type)))
        __builtin_trap();
    uint64_t plen = cadre__p2p_has_payload(h.type) ? h.len : 0;
    if (plen > w.max_payload)
        __builtin_trap();
    if (w.max_inline && (h.flags & CADRE_P2P_INLINE)) {
        /* shm: the payload is read from the header, from sreq on */
        if (plen > sizeof h - offsetof(struct cadre_p2p_hdr, sreq))
            __builtin_trap();
        const unsigned char *p = (const unsigned char *)&h.sreq;
        unsigned s = 0;
        for (uint64_t i = 0; i < plen; i++)
            s += p[i];
        sink += s;
    }
    if (w.nranks && (h.type == CADRE_P2P_EAGER || h.type == CADRE_P2P_RTS) &&
        (h.src < 0 || h.src >= w.nranks || h.tag < 0))
        __builtin_trap();
    if (w.nranks && h.type == CADRE_P2P_DATA && h.off + h.len < h.off)
        __builtin_trap();
    if (w.seq && h.type != CADRE_P2P_DATA && h.seq != w.seq)
        __builtin_trap();
}

/* ---- mode 1: the TCP receive state machine ------------------------------------- */
static void tcp_stream(uint8_t mode, const uint8_t *data, size_t size)
{
    static const size_t chunks[] = {1, 7, 64, 1000, 4096, 65536};
    size_t chunk = chunks[(mode >> 2) % (sizeof chunks / sizeof chunks[0])];
    int hello = mode & 2;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
        return;
    struct tcp_peer peers[4];
    memset(peers, 0, sizeof peers);
    memset(tcp, 0, sizeof *tcp);
    tcp->rank = 0;
    tcp->size = 4;
    tcp->peers = peers;
    cadre__p2p_info.job_cookie = FUZZ_COOKIE;

    struct tcp_in *c = malloc(sizeof *c);
    if (!c) {
        close(sv[0]);
        close(sv[1]);
        return;
    }
    memset(c, 0, offsetof(struct tcp_in, rbuf));
    c->fd = sv[0];
    snprintf(c->from, sizeof c->from, "fuzz");
    if (hello) {
        c->peer = -1;
        c->state = IN_HELLO;
        tcp->npending = 1;
    } else {
        c->peer = 1;
        c->state = IN_HDR;
        peers[1].in = c;
        peers[1].seen_in = 1;
    }
    /* Feed it chunk by chunk, progressing in between, then EOF. */
    size_t off = 0;
    int rounds = 0;
    while (c->fd >= 0 && rounds++ < 100000) {
        if (off < size) {
            size_t n = size - off < chunk ? size - off : chunk;
            ssize_t w = write(sv[1], data + off, n);
            if (w > 0)
                off += (size_t)w;
            if (off == size)
                shutdown(sv[1], SHUT_WR);
        } else if (off == size && size == 0) {
            shutdown(sv[1], SHUT_WR);
        }
        cadre__p2p_tcp_in_progress(c);
    }
    /* The machine must end every stream: EOF closes it, one way or another. */
    if (c->fd >= 0)
        __builtin_trap();
    if (tcp->npending != 0)
        __builtin_trap();
    close(sv[1]);
    free(c->big);
    free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] & FUZZ_MODE_TCP)
        tcp_stream(data[0], data + 1, size - 1);
    else
        check_one(data + 1, size - 1);
    return 0;
}
