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
/* Its window is open: the peers may write into its buffers
 * (cadre__direct_window_open). */
#define DIRECT_WINDOW 4

/* What each rank tells the others in round 1. */
struct direct_addr {
    uint64_t s, r;  /* its send and receive buffer addresses (scatter: the
                     * root's message to rank q: q's block and its bytes) */
    uint64_t busy;  /* DIRECT_BUSY, DIRECT_OVERLAP, DIRECT_WINDOW */
};

struct direct {
    struct direct_addr mine;
    struct direct_addr *peer; /* every rank's, this one's included */
    const void *sbuf;
    void *rbuf;
    size_t count;       /* allreduce, reduce: the vector; reduce_scatter: the block;
                         * bcast: buf; scatter: this rank's block */
    int root;           /* bcast, reduce, scatter */
    const size_t *counts, *displs; /* allgatherv: copies owned by the schedule */
    void *tmpout; /* allreduce in place with a window closed: the result until round 3 */
    coll_call_fn round2; /* the CS_CALL of round 2 (build) */
};

/* A new struct direct in s's scratch, zeroed (NULL on ENOMEM, the error set). */
struct direct *cadre__direct_new(struct coll_sched *s);
/* At build, before round 1: counts s among the direct schedules alive in
 * this process (until it finishes or is freed: cadre__direct_gone) and
 * opens its window where no other is alive; returns this rank's flags for
 * round 1 (DIRECT_BUSY, DIRECT_OVERLAP, DIRECT_WINDOW). */
uint64_t cadre__direct_enter(struct coll_sched *s);

/* Copies n bytes between local memory and rank `rank`'s address space
 * (write 0: reads); the error names the rank and fails a gone peer, and,
 * where d (round 1's flags) is given, a peer whose buffer is unmapped
 * after it left the call. */
int cadre__direct_cma(struct coll_sched *s, const struct direct *d, int rank, void *local,
                      uint64_t remote, size_t n, int write);
/* Two chunk buffers of DIRECT_CHUNK bytes. Local steps run under the engine
 * lock, one at a time, so one pair serves every schedule of the process. */
int cadre__direct_scratch(struct coll_sched *s, unsigned char **acc, unsigned char **tmp);
/* Round 2 of a two-rank allreduce out of place (coll_direct_pair.c): the
 * variant for the machine's state and the size. */
int cadre__direct_pair_allreduce(struct coll_sched *s, struct direct *d);
/* The two-rank reduce (coll_direct_pair.c): whether it streams the other
 * rank's half to the root (both ranks reduce), and that stream. */
int cadre__direct_pair_reduce_streams(const struct coll_sched *s, const struct direct *d);
int cadre__direct_pair_reduce(struct coll_sched *s, struct direct *d);

/* The windows (coll_direct_window.c). The call's key: the top 32 bits of
 * the pacing counters, `open` and `writing`; 0 for a few
 * calls, which then open no window. */
uint64_t cadre__direct_key(const struct coll_sched *s);
/* At build, before round 1, in a schedule no other direct schedule of this
 * process overlaps: the peers may write into this rank's buffers during
 * the call (s->direct_window, DIRECT_WINDOW in round 1), where every rank's
 * flags are mapped here and the key is not 0. */
void cadre__direct_window_open(struct coll_sched *s);
/* When the schedule finishes or is freed (cadre__direct_gone): closes the
 * window, then waits for a peer's write into this rank's buffers still in
 * flight, which only a failed call can leave. */
void cadre__direct_window_close(struct coll_sched *s);
/* After round 2, which read the peers' buffers with process_vm_readv: an
 * error naming a peer that opened its window for the call (round 1's
 * flags) and has closed it since. It left the call (a wait of its failed)
 * and its caller may have changed its buffers while this rank read them;
 * it cannot have finished the call, which waits for this rank's round 3.
 * Peers without a window (the call overlaps another in their process) go
 * unchecked. */
int cadre__direct_peers_stayed(struct coll_sched *s, const struct direct *d);
/* Whether rank q opened its window for the call (round 1's flags) and has
 * closed it since: it left the call. */
int cadre__direct_peer_left(const struct coll_sched *s, const struct direct *d, int q);
/* Whether every rank opened its window (round 1's flags): only then does
 * anyone write into a peer. */
int cadre__direct_windows(const struct coll_sched *s, const struct direct *d);
/* process_vm_writev of n bytes into rank's memory at remote, unless rank
 * left the call (its window closed): CADRE_ERR_PEER naming it. */
int cadre__direct_write(struct coll_sched *s, int rank, const void *local, uint64_t remote,
                        size_t n);

#endif
