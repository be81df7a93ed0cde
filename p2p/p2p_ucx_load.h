/*
 * p2p_ucx_load.h - libucp, loaded at run time (p2p_ucx_load.c): the UCX
 * transport (p2p_ucx*.c) and cadre-info's ucx row call UCP only through
 * this table. cadre compiles against UCX's headers for their types and
 * constants and never links -lucp, so that UCX's memory hooks, signal
 * handlers and async thread touch only the processes that chose it.
 * Uses no other part of cadre: cadre-info links it alone.
 */
#ifndef CADRE_P2P_UCX_LOAD_H
#define CADRE_P2P_UCX_LOAD_H

#include <stddef.h>
#include <stdio.h>

#include "config.h"

#if HAVE_UCX
#include <ucp/api/ucp.h>

/* The UCP (and UCS) functions the transport uses. ucp_init is an inline
 * wrapper of ucp_init_version in the header: the table has the latter. */
#define CADRE_UCX_FNS(X)                                                                       \
    X(ucp_get_version_string)                                                                  \
    X(ucp_config_read)                                                                         \
    X(ucp_config_release)                                                                      \
    X(ucp_init_version)                                                                        \
    X(ucp_cleanup)                                                                             \
    X(ucp_context_query)                                                                       \
    X(ucp_context_print_info)                                                                  \
    X(ucp_worker_create)                                                                       \
    X(ucp_worker_destroy)                                                                      \
    X(ucp_worker_get_address)                                                                  \
    X(ucp_worker_release_address)                                                              \
    X(ucp_worker_progress)                                                                     \
    X(ucp_worker_get_efd)                                                                      \
    X(ucp_worker_arm)                                                                          \
    X(ucp_worker_set_am_recv_handler)                                                          \
    X(ucp_ep_create)                                                                           \
    X(ucp_ep_close_nbx)                                                                        \
    X(ucp_am_send_nbx)                                                                         \
    X(ucp_am_recv_data_nbx)                                                                    \
    X(ucp_am_data_release)                                                                     \
    X(ucp_request_check_status)                                                                \
    X(ucp_request_free)                                                                        \
    X(ucs_status_string)

struct cadre_ucx_fns {
#define X(f) __typeof__(&f) f;
    CADRE_UCX_FNS(X)
#undef X
};
/* Filled by cadre__ucx_load. */
extern struct cadre_ucx_fns cadre__ucx;
#endif

/* Loads libucp from `lib` (CADRE_UCX_LIB: libucp.so.0 unless a test
 * points it elsewhere) and fills cadre__ucx, once: later calls return the
 * first outcome. 0, or -1 with why written ("libucp.so.0: cannot open
 * shared object file...", "not built: ..."). */
int cadre__ucx_load(const char *lib, char *why, size_t len);

/* What a UCP context offers on this machine (cadre__ucx_probe). */
struct cadre_ucx_info {
    char version[32];
    /* "tl/device" of every resource, comma separated, as UCX lists them
     * (UCX_TLS and UCX_NET_DEVICES apply). */
    char resources[768];
    int rdma; /* one of them is an RDMA transport (rc, dc, ud: verbs, mlx5) */
    int cuda; /* the context takes CUDA memory (UCS_MEMORY_TYPE_CUDA) */
};

#if HAVE_UCX
/* Fills *info from context c (loaded already). */
void cadre__ucx_context_info(ucp_context_h c, struct cadre_ucx_info *info);
#endif
/* Loads libucp, makes a context with the transport's features, describes
 * it in *info and cleans it up: 0, or -1 with why written. */
int cadre__ucx_probe(const char *lib, struct cadre_ucx_info *info, char *why, size_t len);

#endif /* CADRE_P2P_UCX_LOAD_H */
