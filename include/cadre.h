/*
 * cadre.h - the public interface of libcadre.
 *
 * One header, one contract (see cadre(7) and the per-function man pages).
 * Every function returns an int status (CADRE_SUCCESS = 0) unless noted;
 * output parameters are written only on success.
 */
#ifndef CADRE_H
#define CADRE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CADRE_VERSION_MAJOR 0
#define CADRE_VERSION_MINOR 1
#define CADRE_VERSION_PATCH 0

/* ---------------------------------------------------------------------------
 * Status codes: one table builds the enum and the strings (libuv's UV_ERRNO_MAP).
 * ------------------------------------------------------------------------- */
#define CADRE_STATUS_MAP(X)                                                              \
    X(SUCCESS, 0, "success")                                                             \
    X(ERR_ARG, 1, "invalid argument")                                                    \
    X(ERR_STATE, 2, "invalid state: not initialized, finalized, or freed/NULL handle")   \
    X(ERR_NOMEM, 3, "out of memory")                                                     \
    X(ERR_TRUNCATE, 4, "message truncated: larger than the receive buffer")              \
    X(ERR_TIMEOUT, 5, "operation timed out")                                             \
    X(ERR_PEER, 6, "a peer process exited or became unreachable")                        \
    X(ERR_MISMATCH, 7, "ranks called mismatching collectives or arguments")              \
    X(ERR_DEVICE, 8, "a CUDA call failed")                                               \
    X(ERR_BOOTSTRAP, 9, "bootstrap (PMIx or launcher) failure")                          \
    X(ERR_UNSUPPORTED, 10, "operation not supported by this build or buffer kind")       \
    X(ERR_INTERNAL, 11, "internal error")

enum {
#define CADRE__STATUS_ENUM(name, code, text) CADRE_##name = (code),
    CADRE_STATUS_MAP(CADRE__STATUS_ENUM)
#undef CADRE__STATUS_ENUM
};

/* Static text for a status code; never NULL ("unknown status" for unknown codes). */
const char *cadre_error_string(int status);
/* The calling thread's last detailed error message ("" if none). */
const char *cadre_last_error(void);

/* ---------------------------------------------------------------------------
 * Handles and constants
 * ------------------------------------------------------------------------- */
typedef struct cadre_comm *cadre_comm_t;

#define CADRE_COMM_NULL ((cadre_comm_t)0)
/* The world communicator is a reserved handle value valid before cadre_init. */
#define CADRE_COMM_WORLD ((cadre_comm_t)(uintptr_t)1)
#define CADRE_UNDEFINED (-32766)

typedef enum {
    CADRE_INT8,
    CADRE_UINT8,
    CADRE_INT32,
    CADRE_UINT32,
    CADRE_INT64,
    CADRE_UINT64,
    CADRE_FLOAT16,
    CADRE_BFLOAT16,
    CADRE_FLOAT32,
    CADRE_FLOAT64
} cadre_datatype_t;

typedef enum { CADRE_SUM, CADRE_PROD, CADRE_MAX, CADRE_MIN, CADRE_AVG } cadre_op_t;

/* Sentinel send buffer: the collective reads its input from recvbuf (and,
 * for scatter, a sentinel receive buffer at the root), as MPI_IN_PLACE. */
#define CADRE_IN_PLACE ((void *)(uintptr_t)1)

/* Size in bytes of one element of dt; 0 for an unknown datatype. */
size_t cadre_datatype_size(cadre_datatype_t dt);

/* ---------------------------------------------------------------------------
 * Point-to-point and requests
 * ------------------------------------------------------------------------- */
typedef struct cadre_request *cadre_request_t;
#define CADRE_REQUEST_NULL ((cadre_request_t)0)

typedef struct {
    int source;   /* sender's rank in the communicator */
    int tag;
    size_t count; /* elements received */
    int error;    /* status of this operation */
} cadre_status_t;
#define CADRE_STATUS_IGNORE ((cadre_status_t *)0)
#define CADRE_ANY_SOURCE (-1)
#define CADRE_ANY_TAG (-1)

/* ---------------------------------------------------------------------------
 * Lifecycle and process information
 * ------------------------------------------------------------------------- */
/* Bootstraps through PMIx when started by cadrerun, mpirun or srun --mpi=pmix;
 * runs as a world of size 1 when started alone. argc/argv may be NULL. */
int cadre_init(int *argc, char ***argv);
/* Thread support levels, in MPI's order (MPI_THREAD_SINGLE ... MULTIPLE). */
#define CADRE_THREAD_SINGLE 0     /* one thread in the process */
#define CADRE_THREAD_FUNNELED 1   /* only the thread that called cadre_init calls cadre */
#define CADRE_THREAD_SERIALIZED 2 /* any thread, one at a time */
#define CADRE_THREAD_MULTIPLE 3   /* any thread, at any time (see cadre(7), THREADS) */
/* cadre_init, for a program that states the thread support it needs
 * (required, one of the levels above): *provided is set to the level the
 * library gives, always CADRE_THREAD_MULTIPLE. */
int cadre_init_thread(int *argc, char ***argv, int required, int *provided);
int cadre_finalize(void);
/* *flag = 1 between a successful cadre_init and cadre_finalize, else 0.
 * May be called at any time. */
int cadre_initialized(int *flag);
/* Ends every process of the job; the launcher exits with errorcode. Does not
 * return on success. */
int cadre_abort(cadre_comm_t comm, int errorcode);
int cadre_local_rank(int *rank);
int cadre_local_size(int *size);
/* CUDA device bound by cadre_init, -1 when none. */
int cadre_device(int *device);
int cadre_version(int *major, int *minor, int *patch);

/* ---------------------------------------------------------------------------
 * Communicators
 * ------------------------------------------------------------------------- */
int cadre_comm_rank(cadre_comm_t comm, int *rank);
int cadre_comm_size(cadre_comm_t comm, int *size);
/* Collective over comm: ranks with one color form a communicator, ordered by
 * key then by rank in comm; CADRE_UNDEFINED gives CADRE_COMM_NULL. */
int cadre_comm_split(cadre_comm_t comm, int color, int key, cadre_comm_t *newcomm);
/* Collective over comm (every rank passes the same list): members get a
 * communicator ordered as ranks[]; the others get CADRE_COMM_NULL. */
int cadre_comm_create(cadre_comm_t comm, int n, const int ranks[], cadre_comm_t *newcomm);
/* Called by the n listed ranks of comm only, each with the same list and
 * tag (>= 0; MPI_Comm_create_group): they get a communicator ordered as
 * ranks[]. Creations on one comm at the same time (by other ranks) are told
 * apart by their tags, which never meet comm's point-to-point tags; threads
 * of a process may make communicators at once. CADRE_ERR_MISMATCH names a
 * member whose list differs. */
int cadre_comm_create_group(cadre_comm_t comm, int n, const int ranks[], int tag,
                            cadre_comm_t *newcomm);
int cadre_comm_dup(cadre_comm_t comm, cadre_comm_t *newcomm);
/* Frees a communicator and sets *comm = CADRE_COMM_NULL. */
int cadre_comm_free(cadre_comm_t *comm);
/* World rank of `rank` of comm. */
int cadre_comm_world_rank(cadre_comm_t comm, int rank, int *world_rank);
/* The CUDA stream (a cudaStream_t; NULL = the legacy default stream) on which
 * blocking calls with device buffers are enqueued, and after whose work the
 * nonblocking ones start. Local; CADRE_ERR_UNSUPPORTED for a non-NULL stream
 * without CUDA or without a bound device. */
int cadre_comm_set_stream(cadre_comm_t comm, void *stream);
int cadre_comm_get_stream(cadre_comm_t comm, void **stream);
/* What a failing call on comm does besides returning its status (see
 * cadre_comm_set_errors(3)): RETURN is silent, WARN (the default, from
 * CADRE_ERRORS) writes cadre_last_error() to stderr, ABORT writes it and
 * calls cadre_abort. Local; dup, split and create copy the parent's mode;
 * calls without a communicator follow CADRE_COMM_WORLD's. */
#define CADRE_ERRORS_RETURN 0
#define CADRE_ERRORS_WARN 1
#define CADRE_ERRORS_ABORT 2
int cadre_comm_set_errors(cadre_comm_t comm, int mode);
int cadre_comm_get_errors(cadre_comm_t comm, int *mode);

/* ---------------------------------------------------------------------------
 * Point-to-point. Messages between a pair of ranks on one communicator with
 * one tag are received in the order sent. Tags are >= 0.
 * ------------------------------------------------------------------------- */
int cadre_send(const void *buf, size_t count, cadre_datatype_t dt, int dst, int tag,
               cadre_comm_t comm);
int cadre_recv(void *buf, size_t count, cadre_datatype_t dt, int src, int tag, cadre_comm_t comm,
               cadre_status_t *status);
int cadre_isend(const void *buf, size_t count, cadre_datatype_t dt, int dst, int tag,
                cadre_comm_t comm, cadre_request_t *req);
int cadre_irecv(void *buf, size_t count, cadre_datatype_t dt, int src, int tag, cadre_comm_t comm,
                cadre_request_t *req);
int cadre_sendrecv(const void *sendbuf, size_t sendcount, int dst, int sendtag, void *recvbuf,
                   size_t recvcount, int src, int recvtag, cadre_datatype_t dt, cadre_comm_t comm,
                   cadre_status_t *status);
/* The status of the message that a receive with src, tag (wildcards
 * allowed) and comm would take next, left unreceived: source, tag, and
 * count in elements of the datatype its sender used. cadre_probe waits for
 * one (CADRE_TIMEOUT applies, as to cadre_recv); cadre_iprobe does not:
 * *flag = 1 and *status filled when there is one, else *flag = 0. The next
 * receive with the same arguments in this thread gets exactly that
 * message; with CADRE_THREAD_MULTIPLE another thread may receive it first,
 * as with MPI_Probe. */
int cadre_probe(int src, int tag, cadre_comm_t comm, cadre_status_t *status);
int cadre_iprobe(int src, int tag, cadre_comm_t comm, int *flag, cadre_status_t *status);

/* Requests: wait sets *req = CADRE_REQUEST_NULL; a NULL *req completes at once. */
int cadre_wait(cadre_request_t *req, cadre_status_t *status);
int cadre_test(cadre_request_t *req, int *done, cadre_status_t *status);
/* Like cadre_wait, but gives up after `seconds` with CADRE_ERR_TIMEOUT and
 * leaves the request valid, to be waited on or tested again. */
int cadre_wait_timeout(cadre_request_t *req, double seconds, cadre_status_t *status);
/* Waits for all; returns the first failure's status; statuses may be
 * CADRE_STATUS_IGNORE, else statuses[i].error tells each one's status. */
int cadre_waitall(int n, cadre_request_t reqs[], cadre_status_t statuses[]);
/* Waits until one request is complete, completes it as cadre_wait does and
 * sets *index to its place; *index = CADRE_UNDEFINED (empty status) when
 * every request is CADRE_REQUEST_NULL. A failed operation's status is
 * returned, with *index and *status set (its request is released). */
int cadre_waitany(int n, cadre_request_t reqs[], int *index, cadre_status_t *status);
/* cadre_waitany without the wait: *flag = 0 and *index = CADRE_UNDEFINED
 * when none is complete; *flag = 1, *index = CADRE_UNDEFINED when all are
 * CADRE_REQUEST_NULL. */
int cadre_testany(int n, cadre_request_t reqs[], int *index, int *flag, cadre_status_t *status);
/* *flag = 1 and every request completed as by cadre_waitall when all are
 * complete; else *flag = 0 and nothing changes. */
int cadre_testall(int n, cadre_request_t reqs[], int *flag, cadre_status_t statuses[]);

/* ---------------------------------------------------------------------------
 * Collectives. Every rank of comm calls the same collective with matching
 * arguments; counts are per rank. A buffer significant only at the root is
 * neither read nor written elsewhere. Each has a nonblocking twin with a
 * trailing request, completed by cadre_wait / cadre_test.
 * ------------------------------------------------------------------------- */
int cadre_barrier(cadre_comm_t comm);
int cadre_bcast(void *buf, size_t count, cadre_datatype_t dt, int root, cadre_comm_t comm);
int cadre_reduce(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt,
                 cadre_op_t op, int root, cadre_comm_t comm);
int cadre_allreduce(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt,
                    cadre_op_t op, cadre_comm_t comm);
int cadre_gather(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt, int root,
                 cadre_comm_t comm);
int cadre_gatherv(const void *sendbuf, size_t sendcount, void *recvbuf, const size_t recvcounts[],
                  const size_t displs[], cadre_datatype_t dt, int root, cadre_comm_t comm);
int cadre_allgather(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt,
                    cadre_comm_t comm);
int cadre_allgatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                     const size_t recvcounts[], const size_t displs[], cadre_datatype_t dt,
                     cadre_comm_t comm);
int cadre_scatter(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt, int root,
                  cadre_comm_t comm);
int cadre_scatterv(const void *sendbuf, const size_t sendcounts[], const size_t displs[],
                   void *recvbuf, size_t recvcount, cadre_datatype_t dt, int root,
                   cadre_comm_t comm);
int cadre_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, cadre_datatype_t dt,
                         cadre_op_t op, cadre_comm_t comm);
int cadre_alltoall(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt,
                   cadre_comm_t comm);
int cadre_alltoallv(const void *sendbuf, const size_t sendcounts[], const size_t sdispls[],
                    void *recvbuf, const size_t recvcounts[], const size_t rdispls[],
                    cadre_datatype_t dt, cadre_comm_t comm);
/* Prefix reductions: rank r gets the reduction of the sendbufs of ranks
 * 0..r (scan) or 0..r-1 (exscan, whose recvbuf at rank 0 is neither read
 * nor written). CADRE_AVG gives the mean over those ranks. CADRE_IN_PLACE:
 * the input is recvbuf. The order of the reductions is fixed by the
 * algorithm and the ranks (repeated calls give the same bits); see
 * cadre_scan(3). */
int cadre_scan(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt,
               cadre_op_t op, cadre_comm_t comm);
int cadre_exscan(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt,
                 cadre_op_t op, cadre_comm_t comm);

int cadre_ibarrier(cadre_comm_t comm, cadre_request_t *req);
int cadre_ibcast(void *buf, size_t count, cadre_datatype_t dt, int root, cadre_comm_t comm,
                 cadre_request_t *req);
int cadre_ireduce(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt,
                  cadre_op_t op, int root, cadre_comm_t comm, cadre_request_t *req);
int cadre_iallreduce(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt,
                     cadre_op_t op, cadre_comm_t comm, cadre_request_t *req);
int cadre_igather(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt, int root,
                  cadre_comm_t comm, cadre_request_t *req);
int cadre_igatherv(const void *sendbuf, size_t sendcount, void *recvbuf, const size_t recvcounts[],
                   const size_t displs[], cadre_datatype_t dt, int root, cadre_comm_t comm,
                   cadre_request_t *req);
int cadre_iallgather(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt,
                     cadre_comm_t comm, cadre_request_t *req);
int cadre_iallgatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                      const size_t recvcounts[], const size_t displs[], cadre_datatype_t dt,
                      cadre_comm_t comm, cadre_request_t *req);
int cadre_iscatter(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt, int root,
                   cadre_comm_t comm, cadre_request_t *req);
int cadre_iscatterv(const void *sendbuf, const size_t sendcounts[], const size_t displs[],
                    void *recvbuf, size_t recvcount, cadre_datatype_t dt, int root,
                    cadre_comm_t comm, cadre_request_t *req);
int cadre_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                          cadre_datatype_t dt, cadre_op_t op, cadre_comm_t comm,
                          cadre_request_t *req);
int cadre_ialltoall(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt,
                    cadre_comm_t comm, cadre_request_t *req);
int cadre_ialltoallv(const void *sendbuf, const size_t sendcounts[], const size_t sdispls[],
                     void *recvbuf, const size_t recvcounts[], const size_t rdispls[],
                     cadre_datatype_t dt, cadre_comm_t comm, cadre_request_t *req);
int cadre_iscan(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt,
                cadre_op_t op, cadre_comm_t comm, cadre_request_t *req);
int cadre_iexscan(const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt,
                  cadre_op_t op, cadre_comm_t comm, cadre_request_t *req);

#ifdef __cplusplus
}
#endif

#endif /* CADRE_H */
