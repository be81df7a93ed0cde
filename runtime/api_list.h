/*
 * Every public function that returns a status, once, for the wrappers of
 * lifecycle/lifecycle_api.c: each cadre_X there calls the layers' cadre__impl_X and, when
 * it fails, hands the status to cadre__api_fail, which applies the error
 * mode (CADRE_ERRORS, cadre_comm_set_errors). The layers are compiled with
 * runtime/api_names.h, which renames each of these functions to its
 * cadre__impl_ name, so a call from inside the library (a collective's
 * point-to-point, cadre_init's steps) reaches the implementation directly
 * and is never reported. Adding a public function: a line here and one in
 * api_names.h (the man suite checks both against cadre.h).
 *
 * CADRE__API(kind, name, (parameters), (arguments), communicator)
 *   kind     PLAIN    every failure is reported;
 *            NEWCOMM  on success, *newcomm starts with the mode comm has;
 *            TIMEOUT  CADRE_ERR_TIMEOUT is an answer, not a failure
 *                     (cadre_wait_timeout); the others are reported;
 *            INIT     on success, reads CADRE_ERRORS (a bad value is
 *                     reported at start, not at the first failure).
 *   communicator  whose mode applies; CADRE_COMM_NULL: CADRE_COMM_WORLD's
 *            (calls without one, and requests: a failed wait has freed its
 *            request, and reading a handle before the call would cost the
 *            hot path a load).
 *
 * Not here (no status to report): cadre_error_string, cadre_last_error,
 * cadre_datatype_size. Included with CADRE__API defined; no include guard.
 */
/* clang-format off */
CADRE__API(INIT, init, (int *argc, char ***argv), (argc, argv), CADRE_COMM_NULL)
CADRE__API(PLAIN, finalize, (void), (), CADRE_COMM_NULL)
CADRE__API(PLAIN, initialized, (int *flag), (flag), CADRE_COMM_NULL)
CADRE__API(PLAIN, abort, (cadre_comm_t comm, int errorcode), (comm, errorcode), comm)
CADRE__API(PLAIN, local_rank, (int *rank), (rank), CADRE_COMM_NULL)
CADRE__API(PLAIN, local_size, (int *size), (size), CADRE_COMM_NULL)
CADRE__API(PLAIN, device, (int *device), (device), CADRE_COMM_NULL)
CADRE__API(PLAIN, version, (int *major, int *minor, int *patch), (major, minor, patch), CADRE_COMM_NULL)

CADRE__API(PLAIN, comm_rank, (cadre_comm_t comm, int *rank), (comm, rank), comm)
CADRE__API(PLAIN, comm_size, (cadre_comm_t comm, int *size), (comm, size), comm)
CADRE__API(NEWCOMM, comm_split, (cadre_comm_t comm, int color, int key, cadre_comm_t *newcomm), (comm, color, key, newcomm), comm)
CADRE__API(NEWCOMM, comm_create, (cadre_comm_t comm, int n, const int ranks[], cadre_comm_t *newcomm), (comm, n, ranks, newcomm), comm)
CADRE__API(NEWCOMM, comm_create_group, (cadre_comm_t comm, int n, const int ranks[], int tag, cadre_comm_t *newcomm), (comm, n, ranks, tag, newcomm), comm)
CADRE__API(NEWCOMM, comm_dup, (cadre_comm_t comm, cadre_comm_t *newcomm), (comm, newcomm), comm)
CADRE__API(PLAIN, comm_free, (cadre_comm_t *comm), (comm), comm ? *comm : CADRE_COMM_NULL)
CADRE__API(PLAIN, comm_world_rank, (cadre_comm_t comm, int rank, int *world_rank), (comm, rank, world_rank), comm)
CADRE__API(PLAIN, comm_set_stream, (cadre_comm_t comm, void *stream), (comm, stream), comm)
CADRE__API(PLAIN, comm_get_stream, (cadre_comm_t comm, void **stream), (comm, stream), comm)
CADRE__API(PLAIN, comm_set_errors, (cadre_comm_t comm, int mode), (comm, mode), comm)
CADRE__API(PLAIN, comm_get_errors, (cadre_comm_t comm, int *mode), (comm, mode), comm)

CADRE__API(PLAIN, send, (const void *buf, size_t count, cadre_datatype_t dt, int dst, int tag, cadre_comm_t comm), (buf, count, dt, dst, tag, comm), comm)
CADRE__API(PLAIN, recv, (void *buf, size_t count, cadre_datatype_t dt, int src, int tag, cadre_comm_t comm, cadre_status_t *status), (buf, count, dt, src, tag, comm, status), comm)
CADRE__API(PLAIN, isend, (const void *buf, size_t count, cadre_datatype_t dt, int dst, int tag, cadre_comm_t comm, cadre_request_t *req), (buf, count, dt, dst, tag, comm, req), comm)
CADRE__API(PLAIN, irecv, (void *buf, size_t count, cadre_datatype_t dt, int src, int tag, cadre_comm_t comm, cadre_request_t *req), (buf, count, dt, src, tag, comm, req), comm)
CADRE__API(PLAIN, sendrecv, (const void *sendbuf, size_t sendcount, int dst, int sendtag, void *recvbuf, size_t recvcount, int src, int recvtag, cadre_datatype_t dt, cadre_comm_t comm, cadre_status_t *status), (sendbuf, sendcount, dst, sendtag, recvbuf, recvcount, src, recvtag, dt, comm, status), comm)
CADRE__API(PLAIN, probe, (int src, int tag, cadre_comm_t comm, cadre_status_t *status), (src, tag, comm, status), comm)
CADRE__API(PLAIN, iprobe, (int src, int tag, cadre_comm_t comm, int *flag, cadre_status_t *status), (src, tag, comm, flag, status), comm)

CADRE__API(PLAIN, wait, (cadre_request_t *req, cadre_status_t *status), (req, status), CADRE_COMM_NULL)
CADRE__API(PLAIN, test, (cadre_request_t *req, int *done, cadre_status_t *status), (req, done, status), CADRE_COMM_NULL)
CADRE__API(TIMEOUT, wait_timeout, (cadre_request_t *req, double seconds, cadre_status_t *status), (req, seconds, status), CADRE_COMM_NULL)
CADRE__API(PLAIN, waitall, (int n, cadre_request_t reqs[], cadre_status_t statuses[]), (n, reqs, statuses), CADRE_COMM_NULL)
CADRE__API(PLAIN, waitany, (int n, cadre_request_t reqs[], int *index, cadre_status_t *status), (n, reqs, index, status), CADRE_COMM_NULL)
CADRE__API(PLAIN, testany, (int n, cadre_request_t reqs[], int *index, int *flag, cadre_status_t *status), (n, reqs, index, flag, status), CADRE_COMM_NULL)
CADRE__API(PLAIN, testall, (int n, cadre_request_t reqs[], int *flag, cadre_status_t statuses[]), (n, reqs, flag, statuses), CADRE_COMM_NULL)

CADRE__API(PLAIN, barrier, (cadre_comm_t comm), (comm), comm)
CADRE__API(PLAIN, bcast, (void *buf, size_t count, cadre_datatype_t dt, int root, cadre_comm_t comm), (buf, count, dt, root, comm), comm)
CADRE__API(PLAIN, reduce, (const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt, cadre_op_t op, int root, cadre_comm_t comm), (sendbuf, recvbuf, count, dt, op, root, comm), comm)
CADRE__API(PLAIN, allreduce, (const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt, cadre_op_t op, cadre_comm_t comm), (sendbuf, recvbuf, count, dt, op, comm), comm)
CADRE__API(PLAIN, gather, (const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt, int root, cadre_comm_t comm), (sendbuf, recvbuf, count, dt, root, comm), comm)
CADRE__API(PLAIN, gatherv, (const void *sendbuf, size_t sendcount, void *recvbuf, const size_t recvcounts[], const size_t displs[], cadre_datatype_t dt, int root, cadre_comm_t comm), (sendbuf, sendcount, recvbuf, recvcounts, displs, dt, root, comm), comm)
CADRE__API(PLAIN, allgather, (const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt, cadre_comm_t comm), (sendbuf, recvbuf, count, dt, comm), comm)
CADRE__API(PLAIN, allgatherv, (const void *sendbuf, size_t sendcount, void *recvbuf, const size_t recvcounts[], const size_t displs[], cadre_datatype_t dt, cadre_comm_t comm), (sendbuf, sendcount, recvbuf, recvcounts, displs, dt, comm), comm)
CADRE__API(PLAIN, scatter, (const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt, int root, cadre_comm_t comm), (sendbuf, recvbuf, count, dt, root, comm), comm)
CADRE__API(PLAIN, scatterv, (const void *sendbuf, const size_t sendcounts[], const size_t displs[], void *recvbuf, size_t recvcount, cadre_datatype_t dt, int root, cadre_comm_t comm), (sendbuf, sendcounts, displs, recvbuf, recvcount, dt, root, comm), comm)
CADRE__API(PLAIN, reduce_scatter, (const void *sendbuf, void *recvbuf, size_t recvcount, cadre_datatype_t dt, cadre_op_t op, cadre_comm_t comm), (sendbuf, recvbuf, recvcount, dt, op, comm), comm)
CADRE__API(PLAIN, alltoall, (const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt, cadre_comm_t comm), (sendbuf, recvbuf, count, dt, comm), comm)
CADRE__API(PLAIN, alltoallv, (const void *sendbuf, const size_t sendcounts[], const size_t sdispls[], void *recvbuf, const size_t recvcounts[], const size_t rdispls[], cadre_datatype_t dt, cadre_comm_t comm), (sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, dt, comm), comm)
CADRE__API(PLAIN, scan, (const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt, cadre_op_t op, cadre_comm_t comm), (sendbuf, recvbuf, count, dt, op, comm), comm)
CADRE__API(PLAIN, exscan, (const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt, cadre_op_t op, cadre_comm_t comm), (sendbuf, recvbuf, count, dt, op, comm), comm)

CADRE__API(PLAIN, ibarrier, (cadre_comm_t comm, cadre_request_t *req), (comm, req), comm)
CADRE__API(PLAIN, ibcast, (void *buf, size_t count, cadre_datatype_t dt, int root, cadre_comm_t comm, cadre_request_t *req), (buf, count, dt, root, comm, req), comm)
CADRE__API(PLAIN, ireduce, (const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt, cadre_op_t op, int root, cadre_comm_t comm, cadre_request_t *req), (sendbuf, recvbuf, count, dt, op, root, comm, req), comm)
CADRE__API(PLAIN, iallreduce, (const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt, cadre_op_t op, cadre_comm_t comm, cadre_request_t *req), (sendbuf, recvbuf, count, dt, op, comm, req), comm)
CADRE__API(PLAIN, igather, (const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt, int root, cadre_comm_t comm, cadre_request_t *req), (sendbuf, recvbuf, count, dt, root, comm, req), comm)
CADRE__API(PLAIN, igatherv, (const void *sendbuf, size_t sendcount, void *recvbuf, const size_t recvcounts[], const size_t displs[], cadre_datatype_t dt, int root, cadre_comm_t comm, cadre_request_t *req), (sendbuf, sendcount, recvbuf, recvcounts, displs, dt, root, comm, req), comm)
CADRE__API(PLAIN, iallgather, (const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt, cadre_comm_t comm, cadre_request_t *req), (sendbuf, recvbuf, count, dt, comm, req), comm)
CADRE__API(PLAIN, iallgatherv, (const void *sendbuf, size_t sendcount, void *recvbuf, const size_t recvcounts[], const size_t displs[], cadre_datatype_t dt, cadre_comm_t comm, cadre_request_t *req), (sendbuf, sendcount, recvbuf, recvcounts, displs, dt, comm, req), comm)
CADRE__API(PLAIN, iscatter, (const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt, int root, cadre_comm_t comm, cadre_request_t *req), (sendbuf, recvbuf, count, dt, root, comm, req), comm)
CADRE__API(PLAIN, iscatterv, (const void *sendbuf, const size_t sendcounts[], const size_t displs[], void *recvbuf, size_t recvcount, cadre_datatype_t dt, int root, cadre_comm_t comm, cadre_request_t *req), (sendbuf, sendcounts, displs, recvbuf, recvcount, dt, root, comm, req), comm)
CADRE__API(PLAIN, ireduce_scatter, (const void *sendbuf, void *recvbuf, size_t recvcount, cadre_datatype_t dt, cadre_op_t op, cadre_comm_t comm, cadre_request_t *req), (sendbuf, recvbuf, recvcount, dt, op, comm, req), comm)
CADRE__API(PLAIN, ialltoall, (const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt, cadre_comm_t comm, cadre_request_t *req), (sendbuf, recvbuf, count, dt, comm, req), comm)
CADRE__API(PLAIN, ialltoallv, (const void *sendbuf, const size_t sendcounts[], const size_t sdispls[], void *recvbuf, const size_t recvcounts[], const size_t rdispls[], cadre_datatype_t dt, cadre_comm_t comm, cadre_request_t *req), (sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, dt, comm, req), comm)
CADRE__API(PLAIN, iscan, (const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt, cadre_op_t op, cadre_comm_t comm, cadre_request_t *req), (sendbuf, recvbuf, count, dt, op, comm, req), comm)
CADRE__API(PLAIN, iexscan, (const void *sendbuf, void *recvbuf, size_t count, cadre_datatype_t dt, cadre_op_t op, cadre_comm_t comm, cadre_request_t *req), (sendbuf, recvbuf, count, dt, op, comm, req), comm)
CADRE__API(INIT, init_thread, (int *argc, char ***argv, int required, int *provided), (argc, argv, required, provided), CADRE_COMM_NULL)
/* clang-format on */
