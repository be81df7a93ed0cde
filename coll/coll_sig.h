/*
 * Call signatures: what a rank called, in 64 bits, so that ranks can compare
 * their collectives (mismatch detection) and name each other's call in the
 * error. They travel in the shared-memory slots of coll_fast.c and in the
 * header of every collective message (struct cadre_p2p_hdr, field `off` of
 * EAGER and RTS). 0 means "not checked" (CADRE_CHECK=0, or user p2p).
 *
 *   bits  0-3   collective (enum coll_sig_kind)
 *   bits  4-7   datatype + 1 (0: none)
 *   bits  8-10  op + 1 (0: none)
 *   bits 11-13  algorithm (0: none)
 *   bits 14-30  root + 1 (0: none; 0x1ffff: root >= 131070)
 *   bit  31     count does not fit 32 bits (bits 32-63 then hold its low half)
 *   bits 32-63  count
 */
#ifndef CADRE_COLL_SIG_H
#define CADRE_COLL_SIG_H

#include <stddef.h>
#include <stdint.h>

#include "cadre.h"

enum coll_sig_kind {
    SIG_BARRIER = 1, SIG_BCAST, SIG_REDUCE, SIG_ALLREDUCE, SIG_GATHER, SIG_GATHERV,
    SIG_ALLGATHER, SIG_ALLGATHERV, SIG_SCATTER, SIG_SCATTERV, SIG_REDUCE_SCATTER, SIG_ALLTOALL,
    SIG_ALLTOALLV, SIG_SCAN, SIG_EXSCAN /* 15: the last that bits 0-3 hold */
};
#define SIG_NO_DT (-1)
#define SIG_NO_OP (-1)
#define SIG_NO_ROOT (-1)

/* Whether signatures are checked (CADRE_CHECK, read once). */
int cadre__sig_enabled(void);

static inline uint64_t cadre__sig(int kind, int dt, int op, int algo, int root, size_t count)
{
    if (!cadre__sig_enabled())
        return 0;
    uint64_t r = root < 0 ? 0 : root >= 0x1fffe ? 0x1ffff : (uint64_t)root + 1;
    uint64_t big = (uint64_t)count >> 32 ? 1 : 0;
    return (uint64_t)kind | (uint64_t)(dt + 1) << 4 | (uint64_t)(op + 1) << 8 |
           (uint64_t)(algo & 7) << 11 | r << 14 | big << 31 | (uint64_t)(uint32_t)count << 32;
}

/* The count field of an allgatherv's signature: a 32-bit hash of
 * recvcounts, which every rank passes whole, so that ranks whose vectors
 * differ find it (instead of reading each other's blocks with the wrong
 * lengths). 0 where signatures are off. */
static inline size_t cadre__sig_counts(const size_t *counts, int n)
{
    if (!cadre__sig_enabled())
        return 0;
    uint32_t h = 2166136261u;
    for (int i = 0; i < n; i++)
        for (int b = 0; b < 8; b++)
            h = (h ^ (uint8_t)(counts[i] >> (8 * b))) * 16777619u;
    return h;
}

/* "allreduce(count=1000, float32, sum)"; "allgatherv(recvcounts #1a2b3c4d,
 * int32)" */
void cadre__sig_describe(uint64_t sig, char *buf, size_t len);
/* Records and returns CADRE_ERR_MISMATCH: rank `peer` called `theirs`,
 * this rank (`me`) called `mine`. */
int cadre__sig_mismatch(const char *fn, int peer, uint64_t theirs, int me, uint64_t mine);

#endif
