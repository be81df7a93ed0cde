/*
 * bootstrap.h - how a process learns its rank and its peers' endpoint data.
 * A PMIx client under cadrerun, mpirun or srun --mpi=pmix; a rendezvous at
 * MASTER_ADDR:MASTER_PORT without PMIx (torchrun's variables,
 * bootstrap_rdv.h); a world of one process when started alone.
 */
#ifndef CADRE_BOOTSTRAP_H
#define CADRE_BOOTSTRAP_H

#include <stddef.h>

struct cadre_bootstrap_info {
    int rank, size;
    int local_rank, local_size;
    int node_id;
    int has_node_id; /* PMIX_NODEID or the rendezvous' host numbering (else 0 everywhere) */
    int singleton;
    char nspace[256];
};

/* Fills *info. Fails with CADRE_ERR_BOOTSTRAP and a message when a PMIx
 * server is advertised in the environment but cannot be reached. */
int cadre__bootstrap_init(struct cadre_bootstrap_info *info);
int cadre__bootstrap_finalize(void);

/* Endpoint blobs: put, then commit, then a fence that exchanges them, then
 * get from any rank. Keys are short strings ("p2p.shm", "p2p.tcp"). */
int cadre__bootstrap_put(const char *key, const void *data, size_t len);
int cadre__bootstrap_commit(void);
/* Collective over every rank of the job; collects the committed data. */
int cadre__bootstrap_fence(void);
/* *data is malloc'ed; the caller frees it. CADRE_ERR_BOOTSTRAP when absent. */
int cadre__bootstrap_get(int rank, const char *key, void **data, size_t *len);

/* Calls fn (on libpmix's thread) when the launcher asks every rank for its
 * state (cadrerun --timeout), then tells the launcher it answered. Nothing
 * happens for a singleton or when the server does not support events. */
void cadre__bootstrap_set_state_report(void (*fn)(void));

/* Asks the PMIx server (the launcher) to end the job with code; does not
 * return when it succeeds. A singleton exits. */
void cadre__bootstrap_abort(int code, const char *msg);

#endif
