/*
 * Force-included (-include) into every source of the library's layers:
 * gives each public function of runtime/api_list.h its implementation's name
 * (cadre__impl_X), so the layers define and call the implementations, and
 * lifecycle/lifecycle_api.c, built without this header, defines the public cadre_X as a
 * wrapper that reports failures (CADRE_ERRORS, cadre_comm_set_errors). One
 * line per line of api_list.h; the man suite checks the two against cadre.h.
 */
#ifndef CADRE_API_NAMES_H
#define CADRE_API_NAMES_H
#define cadre_init cadre__impl_init
#define cadre_finalize cadre__impl_finalize
#define cadre_initialized cadre__impl_initialized
#define cadre_abort cadre__impl_abort
#define cadre_local_rank cadre__impl_local_rank
#define cadre_local_size cadre__impl_local_size
#define cadre_device cadre__impl_device
#define cadre_version cadre__impl_version
#define cadre_comm_rank cadre__impl_comm_rank
#define cadre_comm_size cadre__impl_comm_size
#define cadre_comm_split cadre__impl_comm_split
#define cadre_comm_create cadre__impl_comm_create
#define cadre_comm_create_group cadre__impl_comm_create_group
#define cadre_comm_dup cadre__impl_comm_dup
#define cadre_comm_free cadre__impl_comm_free
#define cadre_comm_world_rank cadre__impl_comm_world_rank
#define cadre_comm_set_stream cadre__impl_comm_set_stream
#define cadre_comm_get_stream cadre__impl_comm_get_stream
#define cadre_comm_set_errors cadre__impl_comm_set_errors
#define cadre_comm_get_errors cadre__impl_comm_get_errors
#define cadre_send cadre__impl_send
#define cadre_recv cadre__impl_recv
#define cadre_isend cadre__impl_isend
#define cadre_irecv cadre__impl_irecv
#define cadre_sendrecv cadre__impl_sendrecv
#define cadre_probe cadre__impl_probe
#define cadre_iprobe cadre__impl_iprobe
#define cadre_wait cadre__impl_wait
#define cadre_test cadre__impl_test
#define cadre_wait_timeout cadre__impl_wait_timeout
#define cadre_waitall cadre__impl_waitall
#define cadre_waitany cadre__impl_waitany
#define cadre_testany cadre__impl_testany
#define cadre_testall cadre__impl_testall
#define cadre_barrier cadre__impl_barrier
#define cadre_bcast cadre__impl_bcast
#define cadre_reduce cadre__impl_reduce
#define cadre_allreduce cadre__impl_allreduce
#define cadre_gather cadre__impl_gather
#define cadre_gatherv cadre__impl_gatherv
#define cadre_allgather cadre__impl_allgather
#define cadre_allgatherv cadre__impl_allgatherv
#define cadre_scatter cadre__impl_scatter
#define cadre_scatterv cadre__impl_scatterv
#define cadre_reduce_scatter cadre__impl_reduce_scatter
#define cadre_alltoall cadre__impl_alltoall
#define cadre_alltoallv cadre__impl_alltoallv
#define cadre_scan cadre__impl_scan
#define cadre_exscan cadre__impl_exscan
#define cadre_ibarrier cadre__impl_ibarrier
#define cadre_ibcast cadre__impl_ibcast
#define cadre_ireduce cadre__impl_ireduce
#define cadre_iallreduce cadre__impl_iallreduce
#define cadre_igather cadre__impl_igather
#define cadre_igatherv cadre__impl_igatherv
#define cadre_iallgather cadre__impl_iallgather
#define cadre_iallgatherv cadre__impl_iallgatherv
#define cadre_iscatter cadre__impl_iscatter
#define cadre_iscatterv cadre__impl_iscatterv
#define cadre_ireduce_scatter cadre__impl_ireduce_scatter
#define cadre_ialltoall cadre__impl_ialltoall
#define cadre_ialltoallv cadre__impl_ialltoallv
#define cadre_iscan cadre__impl_iscan
#define cadre_iexscan cadre__impl_iexscan
#define cadre_init_thread cadre__impl_init_thread
#endif /* CADRE_API_NAMES_H */
