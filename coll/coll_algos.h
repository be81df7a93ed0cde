/* The collective algorithms: schedule builders (coll_algos.c). */
#ifndef CADRE_COLL_ALGOS_H
#define CADRE_COLL_ALGOS_H

#include "coll.h"

/* Segment of the pipelined algorithms. */
#define CADRE_COLL_SEGMENT ((size_t)256 << 10)

int cadre__algo_barrier_dissemination(struct coll_sched *s);
int cadre__algo_bcast_binomial(struct coll_sched *s, void *buf, size_t count, int root);
int cadre__algo_bcast_pipeline(struct coll_sched *s, void *buf, size_t count, int root);
int cadre__algo_reduce_binomial(struct coll_sched *s, const void *sbuf, void *rbuf, size_t count,
                                int root);
int cadre__algo_allreduce_rd(struct coll_sched *s, const void *sbuf, void *rbuf, size_t count);
int cadre__algo_allreduce_ring(struct coll_sched *s, const void *sbuf, void *rbuf, size_t count);
int cadre__algo_reduce_scatter_ring(struct coll_sched *s, const void *sbuf, void *rbuf,
                                    size_t recvcount);
int cadre__algo_allgatherv_ring(struct coll_sched *s, const void *sbuf, size_t sendcount,
                                void *rbuf, const size_t *counts, const size_t *displs);
int cadre__algo_allgather_rd(struct coll_sched *s, const void *sbuf, void *rbuf, size_t count);
int cadre__algo_gatherv_linear(struct coll_sched *s, const void *sbuf, size_t sendcount,
                               void *rbuf, const size_t *counts, const size_t *displs, int root);
int cadre__algo_scatterv_linear(struct coll_sched *s, const void *sbuf, const size_t *counts,
                                const size_t *displs, void *rbuf, size_t recvcount, int root);
/* Inclusive (exclusive 0) or exclusive prefix reduction; sbuf == rbuf in
 * place. Exclusive: rank 0's rbuf is neither read nor written. */
int cadre__algo_scan_rd(struct coll_sched *s, const void *sbuf, void *rbuf, size_t count,
                        int exclusive);
int cadre__algo_scan_linear(struct coll_sched *s, const void *sbuf, void *rbuf, size_t count,
                            int exclusive);
int cadre__algo_alltoallv_pairwise(struct coll_sched *s, const void *sbuf, const size_t *scounts,
                                   const size_t *sdispls, void *rbuf, const size_t *rcounts,
                                   const size_t *rdispls);
int cadre__algo_alltoallv_linear(struct coll_sched *s, const void *sbuf, const size_t *scounts,
                                 const size_t *sdispls, void *rbuf, const size_t *rcounts,
                                 const size_t *rdispls);

/* Direct algorithms (coll_direct.c): only where cadre__direct_usable(). */
int cadre__direct_usable(const struct cadre_comm *c);
int cadre__algo_allreduce_direct(struct coll_sched *s, const void *sbuf, void *rbuf, size_t count);
int cadre__algo_reduce_direct(struct coll_sched *s, const void *sbuf, void *rbuf, size_t count,
                              int root);
int cadre__algo_reduce_scatter_direct(struct coll_sched *s, const void *sbuf, void *rbuf,
                                      size_t recvcount);
int cadre__algo_allgatherv_direct(struct coll_sched *s, const void *sbuf, void *rbuf,
                                  const size_t *counts, const size_t *displs);
int cadre__algo_bcast_direct(struct coll_sched *s, void *buf, size_t count, int root);
/* coll_direct_scatter.c */
int cadre__algo_scatterv_direct(struct coll_sched *s, const void *sbuf, const size_t *counts,
                                const size_t *displs, void *rbuf, size_t recvcount, int root);
/* Where each algorithm runs: coll_select.c. */

#endif
