/* The direct algorithms' shared parts (coll_direct.c, and its two-rank
 * allreduce in coll_direct_pair.c): what each rank tells the others in
 * round 1, the schedule's state, the process_vm copies and the scratch. */
#ifndef CADRE_COLL_DIRECT_H
#define CADRE_COLL_DIRECT_H

#include "coll_algos.h"
#include "coll_fast.h"

/* Bytes reduced at a time: two such buffers stay in a core's 1 MiB L2. */
#define DIRECT_CHUNK ((size_t)256 << 10)
/* Chunks in the ring of allreduce_pair_stream (DIRECT_RING_BYTES in all). */
#define RING_K 4
/* From this size the two-rank allreduce streams its halves (below). */
#define DIRECT_STREAM_MIN ((size_t)64 << 10)
/* ... and writes its output with streaming stores from this size. */
#define DIRECT_NT_MIN ((size_t)8 << 20)

/* Other processes want its node's cores (cadre__cores_busy). */
#define DIRECT_BUSY 1
/* Another direct schedule of its process was alive when this one was
 * built: this call's round 2 must not wait for the peer (build in
 * coll_direct.c). */
#define DIRECT_OVERLAP 2
/* Its window is open: the peer of a two-rank allreduce may write into its
 * output (cadre__direct_pair_open). */
#define DIRECT_WINDOW 4

/* What each rank tells the others in round 1. */
struct direct_addr {
    uint64_t s, r;  /* its send and receive buffer addresses */
    uint64_t busy;  /* DIRECT_BUSY, DIRECT_OVERLAP, DIRECT_WINDOW */
};

struct direct {
    struct direct_addr mine;
    struct direct_addr *peer; /* every rank's, this one's included */
    const void *sbuf;
    void *rbuf;
    size_t count;       /* allreduce: the vector; reduce_scatter: the block; bcast: buf */
    int root;           /* bcast */
    const size_t *counts, *displs; /* allgatherv: copies owned by the schedule */
};

/* Copies n bytes between local memory and rank `rank`'s address space
 * (write 0: reads); the error names the rank and fails a gone peer. */
int cadre__direct_cma(struct coll_sched *s, int rank, void *local, uint64_t remote, size_t n,
                      int write);
/* Two chunk buffers of DIRECT_CHUNK bytes. Local steps run under the engine
 * lock, one at a time, so one pair serves every schedule of the process. */
int cadre__direct_scratch(struct coll_sched *s, unsigned char **acc, unsigned char **tmp);
/* Round 2 of a two-rank allreduce out of place (coll_direct_pair.c): the
 * variant for the machine's state and the size. */
int cadre__direct_pair_allreduce(struct coll_sched *s, struct direct *d);
/* Whether round 2 of this two-rank allreduce, in place or not, takes the
 * variant in which the ranks claim chunks and write them into each other's
 * output (the machine busy, both windows open, the size). */
int cadre__direct_pair_claims(const struct coll_sched *s, const struct direct *d);
/* A two-rank allreduce that no other direct schedule of this process
 * overlaps, at build, before round 1: opens this rank's window for the
 * call (the peer may write into its output) and, on rank 0, the pair's
 * claim word. cadre__direct_gone closes the window
 * (cadre__direct_pair_close). */
void cadre__direct_pair_open(struct coll_sched *s);
void cadre__direct_pair_close(struct coll_sched *s);

#endif
