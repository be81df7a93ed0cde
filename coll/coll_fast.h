/* Shared-memory collectives for small buffers (coll_fast.c). Blocking calls
 * only; a communicator has them when c->fast is set (cadre__fast_get). */
#ifndef CADRE_COLL_FAST_H
#define CADRE_COLL_FAST_H

#include "coll_algos.h"
#include "coll_share.h"

/* Bytes one rank may contribute to one call: the size of a slot. The
 * thresholds of the calls that take the slots are in coll_select.c's
 * tables, at most this (tests/unit/test_select.c checks). */
#define FAST_BYTES ((size_t)1 << 20)

struct coll_fast;
/* Slots free in this process (bit i: slot i), 0 without shared memory. */
uint64_t cadre__fast_free_mask(void);
/* The slot of a communicator being made: the lowest of `agreed` (the AND of
 * its members' free masks), reserved in this process. -1: none (agreed is
 * 0); -2: another thread of this process took it since the mask was read
 * (the members must agree again). */
int cadre__fast_reserve(uint64_t agreed);
void cadre__fast_unreserve(int slot);
/* Gives comm the slot it reserved (-1: none), when every member is reached
 * through shared memory; gives the slot back otherwise. Sets c->fast or
 * leaves it NULL. */
int cadre__fast_setup(struct cadre_comm *c, int slot);
void cadre__fast_release(struct cadre_comm *c);
/* A scheduled collective starts on c: its next slot call looks at the
 * messages that came meanwhile before it returns (coll_fast.c,
 * cadre__fast_end). */
void cadre__fast_note_messages(struct cadre_comm *c);
/* c->fast, set up on first use for the world. */
struct coll_fast *cadre__fast_get(struct cadre_comm *c);

/* Pacing counters of the direct algorithms (coll_direct.c), one pair per
 * process in its shm segment: values are call key | chunk count. NULL when
 * world rank w has no segment mapped here. */
struct direct_flags {
    _Atomic uint64_t prod;
    char pad1[56];
    _Atomic uint64_t cons;
    char pad2[56];
    /* The windows of the direct algorithms that write into peers
     * (coll_direct_window.c): `open`, the key of the call whose buffers
     * this process lets its peers write into (0: none); `writing`, the call
     * key | 1 + the world rank of the process this one writes into now (0:
     * none). A rank that leaves the call closes its window and waits for a
     * write in flight: no write of that call lands in its memory after it
     * returned. */
    _Atomic uint64_t open;
    char pad3[56];
    _Atomic uint64_t writing;
    char pad4[56];
};
struct direct_flags *cadre__direct_flags(int w);
/* ... and the ring of chunk buffers that the two-rank allreduce streams
 * its halves through (DIRECT_RING_BYTES), readable by the peers. */
#define DIRECT_RING_BYTES ((size_t)512 << 10)
unsigned char *cadre__direct_ring(int w);
/* Lock held. The status of fn for cadre__cma's (p2p_engine.h) error err with rank `rank` of
 * c: CADRE_ERR_PEER (c poisoned) when the process is gone, else
 * CADRE_ERR_INTERNAL. */
int cadre__cma_failed(struct cadre_comm *c, const char *fn, int rank, int err, size_t n, int write);

/* The split allreduce (coll_fast_reduce.c): blocking calls on three ranks
 * or more where a rank's share (coll_share.h) fits its slot (coll_select.c
 * chooses). */
int cadre__fast_allreduce_split(struct cadre_comm *c, const char *fn, uint64_t sig,
                                const void *sbuf, void *rbuf, size_t count, cadre_datatype_t dt,
                                cadre_op_t op);
/* The same into the root's output only (reduce). */
int cadre__fast_reduce_split(struct cadre_comm *c, const char *fn, uint64_t sig,
                             const void *sbuf, void *rbuf, size_t count, cadre_datatype_t dt,
                             cadre_op_t op, int root);
int cadre__fast_allreduce(struct cadre_comm *c, const char *fn, uint64_t sig, const void *sbuf,
                          void *rbuf, size_t count, cadre_datatype_t dt, cadre_op_t op);
int cadre__fast_reduce(struct cadre_comm *c, const char *fn, uint64_t sig, const void *sbuf,
                       void *rbuf, size_t count, cadre_datatype_t dt, cadre_op_t op, int root);
int cadre__fast_bcast(struct cadre_comm *c, const char *fn, uint64_t sig, void *buf, size_t bytes,
                      int root);
int cadre__fast_barrier(struct cadre_comm *c, const char *fn, uint64_t sig);
int cadre__fast_exchange(struct cadre_comm *c, const char *fn, uint64_t sig, const void *in,
                         size_t len, int reader, int only_from,
                         void (*take)(void *arg, int q, const unsigned char *data), void *arg);
/* cadre__fast_exchange where fill(arg, dst) writes this rank's part into
 * its slot buffer (FAST_BYTES at most); *tag gets the call's collective
 * number (also when it fails), for messages of the same call. */
int cadre__fast_exchange_fill(struct cadre_comm *c, const char *fn, uint64_t sig,
                              void (*fill)(void *arg, unsigned char *dst), int reader,
                              int only_from,
                              void (*take)(void *arg, int q, const unsigned char *data),
                              void *arg, int32_t *tag);
/* cadre__fast_exchange_fill where only rank `from` writes, what it
 * publishes names its own memory and every rank reads it (take(from, ...)):
 * `from` returns once every peer finished the call, so nobody reads its
 * memory after it returned (the direct scatter, coll_direct_scatter.c). */
int cadre__fast_exchange_hold(struct cadre_comm *c, const char *fn, uint64_t sig,
                              void (*fill)(void *arg, unsigned char *dst), int from,
                              void (*take)(void *arg, int q, const unsigned char *data),
                              void *arg);
/* Inside a slot call on c: whether rank q has finished it (its `done`
 * word). Before a writer of cadre__fast_exchange_hold has seen every
 * reader finish, only a failed wait of its can have let it leave. */
int cadre__fast_left(struct cadre_comm *c, int q);

/* The v-variants through the slots (coll_fast_v.c): blocking calls, host
 * memory, a communicator with slots; in place and the checks of the
 * arguments resolved by the caller (coll_api_*.c). es: the element size;
 * kind_max: the most bytes the equal-count call keeps in the slots
 * (cadre__coll_slots_max). */
int cadre__fast_gatherv(struct cadre_comm *c, const char *fn, uint64_t sig, const void *sbuf,
                        size_t sendcount, void *rbuf, const size_t *counts, const size_t *displs,
                        size_t es, int root, size_t kind_max);
int cadre__fast_scatterv(struct cadre_comm *c, const char *fn, uint64_t sig, const void *sbuf,
                         const size_t *counts, const size_t *displs, void *rbuf,
                         size_t recvcount, size_t es, int root, size_t kind_max);
/* The direct scatter(v) of blocking calls (coll_direct_scatter.c): every
 * rank reads its block from the root's sendbuf; for communicators of at
 * most FAST_BYTES / 16 ranks (the root's table of addresses). */
int cadre__fast_scatterv_direct(struct cadre_comm *c, const char *fn, uint64_t sig,
                                const void *sbuf, const size_t *counts, const size_t *displs,
                                void *rbuf, size_t recvcount, size_t es, int root);
int cadre__fast_alltoallv(struct cadre_comm *c, const char *fn, uint64_t sig, const void *sbuf,
                          const size_t *scounts, const size_t *sdispls, void *rbuf,
                          const size_t *rcounts, const size_t *rdispls, size_t es,
                          size_t kind_max);

#endif
