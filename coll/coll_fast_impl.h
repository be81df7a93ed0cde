/* The shared-memory slots' layout and a communicator's view of its slot:
 * shared by coll_fast.c (the calls) and coll_fast_slots.c (giving slots to
 * communicators). Nothing else includes it. */
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
     * (reduce_common): call number << 32 | pieces in place. */
    _Atomic uint64_t fill;
    unsigned char data[FAST_BYTES];
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
    int napping;       /* the call's waits napped: one series (idle), ended by end() */
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

#endif
