/* Lifecycle: cadre_init and cadre_finalize bring the layers up and down in
 * order; cadre_abort. The top layer: may call every layer below. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "bootstrap/bootstrap.h"
#include "coll/coll.h"
#include "device/device_mem.h"
#include "p2p/p2p.h"
#include "runtime/runtime.h"

int cadre_init(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    int s = cadre__lib_state();
    if (s == CADRE__ST_INIT)
        return cadre__error(CADRE_ERR_STATE, "cadre_init: already initialized");
    if (s == CADRE__ST_FINALIZED)
        return cadre__error(CADRE_ERR_STATE, "cadre_init: cannot initialize again after cadre_finalize");

    struct cadre_bootstrap_info bi;
    CADRE_CHECK(cadre__bootstrap_init(&bi));
    cadre__proc.rank = bi.rank;
    cadre__proc.size = bi.size;
    cadre__proc.local_rank = bi.local_rank;
    cadre__proc.local_size = bi.local_size;
    cadre__proc.node_id = bi.node_id;
    cadre__proc.has_node_id = bi.has_node_id;
    cadre__proc.singleton = bi.singleton;

    char prefix[32];
    snprintf(prefix, sizeof prefix, "rank %d", bi.rank);
    cadre__log_set_prefix(prefix);

    cadre__gpu_path_init();
    int rc = cadre__device_bind();
    if (rc != CADRE_SUCCESS) {
        cadre__bootstrap_finalize();
        return rc;
    }

    cadre__comm_world.magic = CADRE_COMM_MAGIC;
    cadre__comm_world.context_id = 0;
    cadre__comm_world.rank = bi.rank;
    cadre__comm_world.size = bi.size;
    cadre__comm_world.world_ranks = NULL;
    cadre__comm_world.coll_seq = 0;
    cadre__comm_register(&cadre__comm_world);
    cadre__state_enter("cadre_init", NULL, 0, 0, -1, -1);

    /* Before p2p starts: what arrives for the collective layer goes to it. */
    cadre__coll_init();
    rc = cadre__p2p_init();
    if (rc != CADRE_SUCCESS) {
        cadre__comm_unregister(&cadre__comm_world);
        cadre__bootstrap_finalize();
        return rc;
    }
    cadre__bootstrap_set_state_report(cadre__state_report);
    cadre__state_leave();

    cadre__lib_set_state(CADRE__ST_INIT);
    /* The banner a bug report starts from (NCCL's "NCCL version ..."): once
     * per job, from rank 0. */
    if (bi.rank == 0)
        CADRE_INFO(RUNTIME, "cadre version %s (%s), %d ranks", PACKAGE_VERSION, CADRE_BUILD_CONFIG,
                   bi.size);
    CADRE_INFO(RUNTIME, "initialized: rank %d of %d, local %d of %d, device %d", bi.rank, bi.size,
               bi.local_rank, bi.local_size, cadre__proc.device);
    return CADRE_SUCCESS;
}

/* Every function may be called from any thread at any time (the progress
 * engine, the matching queues, the handle tables and the per-thread last
 * error are built for it), so the answer is always CADRE_THREAD_MULTIPLE;
 * the level asked for is checked only to catch a value that is none. */
int cadre_init_thread(int *argc, char ***argv, int required, int *provided)
{
    if (required < CADRE_THREAD_SINGLE || required > CADRE_THREAD_MULTIPLE)
        return cadre__error(CADRE_ERR_ARG, "cadre_init_thread: required %d is not a thread level "
                                           "(CADRE_THREAD_SINGLE %d to CADRE_THREAD_MULTIPLE %d)",
                            required, CADRE_THREAD_SINGLE, CADRE_THREAD_MULTIPLE);
    if (!provided)
        return cadre__error(CADRE_ERR_ARG, "cadre_init_thread: provided is NULL");
    CADRE_CHECK(cadre_init(argc, argv));
    *provided = CADRE_THREAD_MULTIPLE;
    return CADRE_SUCCESS;
}

int cadre_finalize(void)
{
    CADRE_CHECK(cadre__check_initialized("cadre_finalize"));
    cadre__run_at_finalize();
    cadre__lib_set_state(CADRE__ST_FINALIZED);
    cadre__state_enter("cadre_finalize", NULL, 0, 0, -1, -1);
    cadre__coll_finalize();
    cadre__p2p_finalize();
    cadre__comm_unregister(&cadre__comm_world);
    cadre__comm_world.magic = 0;
    return cadre__bootstrap_finalize();
}

int cadre_abort(cadre_comm_t comm, int errorcode)
{
    /* Abort must work in every state: it is what a program calls when things
     * are already going wrong. Only a value that is no live communicator
     * handle is refused (looking it up never dereferences it). */
    if (comm != CADRE_COMM_WORLD) {
        int st;
        if (!cadre__comm_get(comm, "cadre_abort", &st))
            return st;
    }
    char msg[64];
    snprintf(msg, sizeof msg, "cadre_abort(%d) called by rank %d", errorcode, cadre__proc.rank);
    CADRE_INFO(RUNTIME, "%s", msg);
    cadre__bootstrap_abort(errorcode, msg);
    return CADRE_ERR_INTERNAL; /* not reached */
}
