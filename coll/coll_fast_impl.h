/* The shared-memory slots' layout, a communicator's view of its slot and
 * the steps of one slot call: shared by coll_fast.c (the calls),
 * coll_fast_reduce.c (the reductions) and coll_fast_slots.c (giving slots
 * to communicators). Nothing else includes it. */
#ifndef CADRE_COLL_FAST_IMPL_H
#define CADRE_COLL_FAST_IMPL_H

#include <stdatomic.h>
#include <stdint.h>

#include "coll_fast.h"

#define FAST_NSLOTS 8

struct fast_buf {
    _Atomic uint64_t seq; /* ctx << 32 | call number, once data is in place */
    uint64_t sig;
    uint64_t prev_sig;    /* the call before, for calls that nobody read (a bcast's roots) */
    _Atomic uint64_t aseq; /* split allreduce: ctx << 32 | call number, once addr is set */
    uint64_t addr;         /* ... the send buffer's address in the owner's process */
    /* An input of FAST_PIECES_MIN bytes or more published in pieces
     * (coll_fast_reduce.c, reduce_common): call number << 32 | pieces in place. */
    _Atomic uint64_t fill;
    unsigned char data[FAST_BYTES] __attribute__((aligned(64)));
} __attribute__((aligned(64)));

struct fast_slot {
    _Atomic uint64_t done; /* ctx << 32 | last call this rank finished */
    char pad[56];
    struct fast_buf buf[2];
};

struct coll_fast {
    int slot, n, me;
    uint64_t ctx;  /* context id, shifted into the high half */
    uint32_t seq;  /* calls made */
    int drain;         /* a scheduled collective ran since the last call here */
    int napping;       /* waits napped: one series (cadre__fast_idle), ended by cadre__fast_end */
    const char *fn;    /* the call running, */
    int32_t tag;       /* ... and its collective number */
    uint64_t last_sig; /* signature of the call before */
    uint64_t cur_sig;  /* ... and of this one */
    struct fast_slot **peer; /* each member's slot, this rank's too */
    int *world;
    uint32_t *seen_done;
    unsigned char *tmp; /* split allreduce, on first use: FAST_SPLIT_CHUNK bytes, */
    uint64_t *addr;     /* ... and each member's send buffer address */
};

/* ---- one call (coll_fast.c, where each step is described) ---------------------------- */
struct waiter {
    const char *fn;
    struct cadre_comm *comm;
    uint64_t sig;
    int32_t tag; /* this call's collective number on comm, less 1 */
    int spins;
    double nap, since;
    int rc; /* cadre__fast_begin: a peer's message of this call differs */
    int stuck_said; /* warned of CADRE_STUCK_WARN */
};

/* A call's waiter; sig: the caller's. */
#define WAITER(fn_) {.fn = (fn_), .nap = 50e-6, .sig = sig}

int cadre__fast_idle(struct coll_fast *F, struct waiter *w, int q, const char *what);
uint32_t cadre__fast_begin(struct cadre_comm *c, struct coll_fast *F, struct waiter *w);
int cadre__fast_wait_free(struct coll_fast *F, uint32_t f, struct waiter *w);
void cadre__fast_announce(struct coll_fast *F, uint32_t f, uint64_t sig, int addr);
/* Rings every other member's doorbell (its waits may nap). */
void cadre__fast_wake_peers(struct coll_fast *F);
int cadre__fast_await_word(struct coll_fast *F, uint32_t f, int q, uint64_t sig,
                           struct waiter *w, int addr, struct fast_buf **out);
int cadre__fast_end(struct coll_fast *F, struct cadre_comm *c, uint32_t f, int rc);

static inline void cadre__fast_publish(struct coll_fast *F, uint32_t f, uint64_t sig,
                                       const void *data, size_t len)
{
    if (len)
        cadre__copy(F->peer[F->me]->buf[f & 1].data, data, len);
    cadre__fast_announce(F, f, sig, 0);
}

/* Rank q's data of call f, once published. */
static inline int cadre__fast_fetch(struct coll_fast *F, uint32_t f, int q, uint64_t sig,
                                    struct waiter *w, const unsigned char **data)
{
    struct fast_buf *b;
    CADRE_CHECK(cadre__fast_await_word(F, f, q, sig, w, 0, &b));
    *data = b->data;
    return CADRE_SUCCESS;
}

#endif
