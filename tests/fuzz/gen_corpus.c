/*
 * gen_corpus DIR - writes the seed corpus of fuzz_hdr into DIR: valid
 * headers of every type for each checked path, and TCP streams (with and
 * without the handshake) carrying one message of every type. Built from the
 * real structs, so `make fuzz-corpus` rewrites tests/fuzz/corpus after a
 * change of the wire header.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "p2p/p2p_tcp.h"
#include "tests/fuzz/fuzz_common.h"

static const char *dir;

static void put(const char *name, const void *data, size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

static unsigned char buf[1 << 15];
static size_t blen;

static void add(const void *p, size_t n)
{
    if (blen + n > sizeof buf)
        exit(1);
    memcpy(buf + blen, p, n);
    blen += n;
}

/* One message of each type, as a sender emits them (seq from 1). */
static size_t messages(struct cadre_p2p_hdr *m, size_t *plen)
{
    size_t n = 0;
    m[n] = (struct cadre_p2p_hdr){.type = CADRE_P2P_EAGER, .ctx = 0, .src = 1, .tag = 7, .len = 5};
    plen[n++] = 5;
    m[n] = (struct cadre_p2p_hdr){.type = CADRE_P2P_RTS, .ctx = 2, .src = 1, .tag = 0,
                                  .len = 1 << 20, .sreq = 0x100000001ull};
    plen[n++] = 0;
    m[n] = (struct cadre_p2p_hdr){.type = CADRE_P2P_CTS, .len = 1 << 20, .sreq = 0x100000001ull,
                                  .rreq = 1};
    plen[n++] = 0;
    /* DATA into the receive's buffer (rreq 1), then one to buffer (unknown
     * rreq), larger than the socket buffer of the machine */
    m[n] = (struct cadre_p2p_hdr){.type = CADRE_P2P_DATA, .len = 300, .rreq = 1, .off = 4096};
    plen[n++] = 300;
    m[n] = (struct cadre_p2p_hdr){.type = CADRE_P2P_DATA, .len = TCP_RBUF + 100, .rreq = 9};
    plen[n++] = TCP_RBUF + 100;
    m[n] = (struct cadre_p2p_hdr){.type = CADRE_P2P_NACK, .sreq = 3, .rreq = 4};
    plen[n++] = 0;
    m[n] = (struct cadre_p2p_hdr){.type = CADRE_P2P_BYE};
    plen[n++] = 0;
    uint64_t seq = 0;
    for (size_t i = 0; i < n; i++)
        if (m[i].type != CADRE_P2P_DATA)
            m[i].seq = ++seq;
    return n;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_corpus DIR\n");
        return 2;
    }
    dir = argv[1];
    struct cadre_p2p_hdr m[16];
    size_t plen[16];
    size_t n = messages(m, plen);
    char name[64];

    /* Mode "check": [0][path][header]. */
    for (size_t i = 0; i < n; i++) {
        unsigned t = m[i].type;
        unsigned paths[] = {FUZZ_PATH_TCP, FUZZ_PATH_ENGINE,
                            t == CADRE_P2P_DATA ? FUZZ_PATH_SHM_BULK : FUZZ_PATH_SHM_EAGER};
        for (size_t k = 0; k < 3; k++) {
            struct cadre_p2p_hdr h = m[i];
            if (paths[k] == FUZZ_PATH_ENGINE)
                h.reserved = 4; /* 5 ranks, in sequence */
            if (paths[k] == FUZZ_PATH_SHM_BULK && h.len > FUZZ_SHM_FRAG)
                h.len = FUZZ_SHM_FRAG;
            if (paths[k] == FUZZ_PATH_SHM_EAGER && t == CADRE_P2P_EAGER)
                h.flags |= CADRE_P2P_INLINE;
            blen = 0;
            unsigned char head[2] = {FUZZ_MODE_CHECK, (unsigned char)paths[k]};
            add(head, 2);
            add(&h, sizeof h);
            snprintf(name, sizeof name, "check-type%u-path%u", t, paths[k]);
            put(name, buf, blen);
        }
    }

    /* Mode "tcp": every message in one stream, with and without the
     * handshake, read in chunks of 7 bytes (mode bits 2.. = 1) and whole. */
    static unsigned char payload[TCP_RBUF + 100];
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (unsigned char)(i * 31);
    for (int hello = 0; hello < 2; hello++) {
        for (int chunk = 1; chunk <= 5; chunk += 4) {
            blen = 0;
            unsigned char mode = (unsigned char)((hello ? FUZZ_MODE_TCP_HELLO : FUZZ_MODE_TCP) |
                                                 (chunk << 2));
            add(&mode, 1);
            if (hello) {
                struct tcp_hello h = {TCP_MAGIC, TCP_VERSION, 1, 0, FUZZ_COOKIE};
                add(&h, sizeof h);
            }
            for (size_t i = 0; i < n; i++) {
                add(&m[i], sizeof m[i]);
                add(payload, plen[i]);
            }
            snprintf(name, sizeof name, "tcp-%s-chunk%d", hello ? "hello" : "up", chunk);
            put(name, buf, blen);
        }
    }
    /* A handshake with the wrong cookie; one message per file, small. */
    blen = 0;
    unsigned char mode = FUZZ_MODE_TCP_HELLO;
    add(&mode, 1);
    struct tcp_hello bad = {TCP_MAGIC, TCP_VERSION, 2, 0, FUZZ_COOKIE ^ 1};
    add(&bad, sizeof bad);
    put("tcp-hello-wrong-cookie", buf, blen);
    for (size_t i = 0; i < n; i++) {
        if (plen[i] > 1000)
            continue;
        blen = 0;
        mode = FUZZ_MODE_TCP;
        add(&mode, 1);
        add(&m[i], sizeof m[i]);
        add(payload, plen[i]);
        snprintf(name, sizeof name, "tcp-up-type%u", m[i].type);
        put(name, buf, blen);
    }
    return 0;
}
