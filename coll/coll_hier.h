/* Two-level (host-aware) collectives: a communicator's members grouped by
 * host (p2p/p2p_host.c), the choice between the flat algorithms and these
 * (cadre__hier_pick), and their schedule builders (coll_hier_algos.c). */
#ifndef CADRE_COLL_HIER_H
#define CADRE_COLL_HIER_H

#include "coll_algos.h"

enum hier_kind {
    HK_BARRIER, HK_BCAST, HK_REDUCE, HK_ALLREDUCE, HK_ALLGATHER, HK_REDUCE_SCATTER, HK_COUNT
};
enum hier_algo {
    HA_NONE = 0, /* the flat choice of coll_api.c */
    HA_LEADER,   /* within the host to one rank, between those ranks, within again */
    HA_SPLIT,    /* allreduce: each rank of a host carries 1/L of the vector across hosts */
    HA_RING,     /* one ring (or chain) over the members in host order */
    HA_COUNT
};

/* A communicator's members by host; made on first use, freed with it. */
struct coll_hier {
    int nh;           /* hosts among the members */
    int *host;        /* by rank of the communicator: host index, numbered by lowest rank */
    int *order;       /* ranks by host, then rank */
    int *start;       /* host h holds order[start[h] .. start[h+1]) */
    int myh, myl;     /* this rank's host and its index there */
    int minl, maxl;   /* fewest and most ranks on one host */
    uint64_t logged[HK_COUNT][HA_COUNT]; /* size classes whose choice was logged */
};

/* c's host grouping (NULL on ENOMEM, error recorded). */
struct coll_hier *cadre__hier_get(struct cadre_comm *c);
void cadre__hier_release(struct cadre_comm *c);

/* The two-level algorithm for this call, or HA_NONE. flat_forced: CADRE_ALGO
 * forces a flat algorithm for this collective (then HA_NONE, unless it forces
 * a hier_* one). Logs the choice (COLL, INFO) the first time per size class. */
int cadre__hier_pick(struct cadre_comm *c, int kind, size_t bytes, int flat_forced);
/* The signature's algorithm field for a two-level algorithm. */
static inline int cadre__hier_sig_algo(int a)
{
    return a == HA_LEADER ? 5 : 6;
}

/* Schedule builders (coll_hier_algos.c); buffers resolved as for coll_algos.h. */
int cadre__hier_barrier(struct coll_sched *s, int a);
int cadre__hier_bcast(struct coll_sched *s, int a, void *buf, size_t count, int root);
int cadre__hier_reduce(struct coll_sched *s, int a, const void *sbuf, void *rbuf, size_t count,
                       int root);
int cadre__hier_allreduce(struct coll_sched *s, int a, const void *sbuf, void *rbuf, size_t count);
int cadre__hier_allgatherv(struct coll_sched *s, int a, const void *sbuf, void *rbuf,
                           const size_t *counts, const size_t *displs);
int cadre__hier_reduce_scatter(struct coll_sched *s, int a, const void *sbuf, void *rbuf,
                               size_t recvcount);

#endif
