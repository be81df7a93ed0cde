/*
 * bootstrap_rdv.h - the start without PMIx: a rendezvous that rank 0 serves
 * at MASTER_ADDR:MASTER_PORT (torchrun's names; CADRE_MASTER_ADDR and the
 * other CADRE_ names first). bootstrap_pmix.c selects it in
 * cadre__bootstrap_init when no PMIx server is advertised and the four
 * variables are set, and hands it every later call.
 *
 * The wire (bootstrap_rdv_wire.c): rank 0 greets every connection with a
 * challenge (magic, version, a random nonce); a rank answers with a hello
 * (magic, version, world size, rank, its own nonce, its host) and a proof:
 * a keyed hash (SipHash-2-4, two lanes) over both nonces and the hello, the
 * key taken from CADRE_JOB_KEY or TORCHELASTIC_RUN_ID. Rank 0 proves the key
 * back in its ACK. Without a job key the proof is a checksum only, and rank 0
 * relies on checking every field (magic, version, world size, rank range,
 * no rank twice). After every rank joined, framed messages (type, length)
 * carry the fences: each rank sends its puts, rank 0 sends back everyone's.
 */
#ifndef CADRE_BOOTSTRAP_RDV_H
#define CADRE_BOOTSTRAP_RDV_H

#include <stddef.h>
#include <stdint.h>

#include "bootstrap.h"

#define RDV_MAGIC "CADRERV1"
#define RDV_VERSION 1u
#define RDV_NONCE 16
#define RDV_PROOF 16
#define RDV_HOST_LEN 64

/* Frames after the handshake: 8-byte header (type, payload length). */
enum rdv_type {
    RDV_ACK = 1,     /* rank 0 -> rank: the hello is accepted; payload: proof */
    RDV_REJECT,      /* rank 0 -> rank: why not (text); the connection closes */
    RDV_WELCOME,     /* rank 0 -> rank: every rank joined; payload: 4 x u32 */
    RDV_ERROR,       /* rank 0 -> rank: the start or a fence failed (text) */
    RDV_FENCE,       /* rank -> rank 0: its puts; rank 0 -> rank: everyone's */
};

/* Largest payload a rank may send in one fence, and rank 0 in its answer
 * per rank of the job. */
#define RDV_MAX_PUTS (1u << 20)

struct rdv_challenge {
    char magic[8];
    uint32_t version, keyed; /* network order */
    uint8_t nonce[RDV_NONCE];
};

struct rdv_hello {
    char magic[8];
    uint32_t version, size, rank, pid; /* network order */
    uint32_t hostkey[2];
    uint8_t nonce[RDV_NONCE];
    char host[RDV_HOST_LEN]; /* display name of the host */
    uint8_t proof[RDV_PROOF];
};

/* The job as the environment describes it (bootstrap_rdv.c). */
struct rdv_env {
    char addr[256];
    int port, rank, size;
    int local_rank, local_size; /* -1 when not given */
    double timeout;             /* CADRE_TIMEOUT; inf = none */
    uint64_t key[2];            /* from the job key ("" when none) */
    int keyed;
    uint64_t hostkey;
    char host[RDV_HOST_LEN];
};

/* Whether the environment asks for a rendezvous start (no PMIx server). */
int cadre__rdv_wanted(void);

int cadre__rdv_init(struct cadre_bootstrap_info *info);
int cadre__rdv_finalize(void);
int cadre__rdv_put(const char *key, const void *data, size_t len);
int cadre__rdv_fence(void);
int cadre__rdv_get(int rank, const char *key, void **data, size_t *len);

/* ---- bootstrap_rdv_wire.c: keyed hash and socket helpers ---- */
void cadre__rdv_key(const char *secret, uint64_t key[2]);
/* proof = 16 bytes of keyed hash over tag and the given parts. */
void cadre__rdv_mac(const uint64_t key[2], char tag, const void *a, size_t alen, const void *b,
                    size_t blen, uint8_t proof[RDV_PROOF]);
int cadre__rdv_equal(const uint8_t *a, const uint8_t *b, size_t n);
double cadre__rdv_now(void);
/* No libm in libcadre: the smaller of two times. */
static inline double rdv_min(double a, double b)
{
    return a < b ? a : b;
}
/* Reads or writes exactly len bytes before the deadline (inf: none).
 * 0 on success; -1 with errno (ETIMEDOUT, ECONNRESET for an end of file). */
int cadre__rdv_read(int fd, void *buf, size_t len, double deadline);
int cadre__rdv_write(int fd, const void *buf, size_t len, double deadline);
/* One frame: header and payload (payload may be NULL when len is 0). */
int cadre__rdv_send(int fd, uint32_t type, const void *payload, size_t len, double deadline);
/* Reads a frame of at most max payload bytes; *payload malloc'ed (NULL when
 * empty). -1 with errno EPROTO when longer. */
int cadre__rdv_recv(int fd, uint32_t *type, void **payload, size_t *len, size_t max,
                    double deadline);

/* ---- bootstrap_rdv_server.c: rank 0 ---- */
/* Serves the start: binds, admits ranks 1..size-1, gives each its host
 * numbering. On success fds[r] is rank r's connection (fds[0] = -1) and
 * *info's local fields are filled for rank 0. */
int cadre__rdv_serve(const struct rdv_env *env, int *fds, struct cadre_bootstrap_info *info);
/* Rank 0's part of a fence (RDV_FENCE): waits for every rank's message,
 * answers each with everyone's entries (*all, malloc'ed, rank 0's own
 * first), or names the ranks missing or gone. */
int cadre__rdv_serve_fence(const struct rdv_env *env, int *fds, const void *mine, size_t mylen,
                           void **all, size_t *alen);
/* Checks that buf holds whole put entries, all of rank `only` (-1: any rank
 * below size), and with keep stores those of other ranks than this one: 0,
 * -1 malformed, -2 no memory. */
int cadre__rdv_entries(const uint8_t *buf, size_t len, int only, int size, int keep);

#endif
