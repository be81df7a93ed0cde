/* PMIx client bootstrap, the rendezvous start without PMIx (handed to
 * bootstrap_rdv.c), and the singleton fallback with a local key store. */
#include <pmix.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap.h"
#include "bootstrap_rdv.h"
#include "runtime/runtime.h"

static pmix_proc_t myproc;
static int using_pmix, using_rdv;

/* Singleton key store: a world of one only ever gets its own keys back. */
struct local_kv {
    char key[64];
    void *data;
    size_t len;
    struct local_kv *next;
};
static struct local_kv *local_store;

static int pmix_fail(const char *what, pmix_status_t rc)
{
    return cadre__error(CADRE_ERR_BOOTSTRAP, "cadre_init: %s failed: %s (PMIx status %d)", what,
                        PMIx_Error_string(rc), (int)rc);
}

/* Integer-valued key of proc; the job-level keys live on the wildcard rank. */
static int get_u32(const pmix_proc_t *proc, const char *key, uint32_t *out)
{
    pmix_value_t *val = NULL;
    pmix_info_t info;
    bool optional = true;
    PMIX_INFO_LOAD(&info, PMIX_OPTIONAL, &optional, PMIX_BOOL);
    pmix_status_t rc = PMIx_Get(proc, key, &info, 1, &val);
    PMIX_INFO_DESTRUCT(&info);
    if (rc != PMIX_SUCCESS || !val)
        return -1;
    int ok = 0;
    switch (val->type) {
    case PMIX_UINT32: *out = val->data.uint32; break;
    case PMIX_UINT16: *out = val->data.uint16; break;
    case PMIX_INT: *out = (uint32_t)val->data.integer; break;
    case PMIX_UINT: *out = val->data.uint; break;
    case PMIX_PROC_RANK: *out = val->data.rank; break;
    default: ok = -1;
    }
    PMIX_VALUE_RELEASE(val);
    return ok;
}

int cadre__bootstrap_init(struct cadre_bootstrap_info *info)
{
    memset(info, 0, sizeof *info);
    /* A PMIx server wins: under cadrerun, mpirun or srun the CADRE_RANK and
     * MASTER_ADDR a rank may also see are not meant for a rendezvous. */
    if (!getenv("PMIX_NAMESPACE") && cadre__rdv_wanted()) {
        CADRE_CHECK(cadre__rdv_init(info));
        using_rdv = 1;
        return CADRE_SUCCESS;
    }
    if (!getenv("PMIX_NAMESPACE")) {
        /* Started alone: a world of one, no server to talk to. */
        info->size = info->local_size = 1;
        info->singleton = 1;
        snprintf(info->nspace, sizeof info->nspace, "singleton.%d", (int)getpid());
        CADRE_INFO(BOOTSTRAP, "no PMIx server in the environment: running as a singleton");
        return CADRE_SUCCESS;
    }

    pmix_status_t rc = PMIx_Init(&myproc, NULL, 0);
    if (rc != PMIX_SUCCESS)
        return pmix_fail("PMIx_Init (is the launcher still running?)", rc);
    using_pmix = 1;

    pmix_proc_t wild;
    PMIX_LOAD_PROCID(&wild, myproc.nspace, PMIX_RANK_WILDCARD);
    uint32_t size = 0, lsize = 0, lrank = 0, nodeid = 0;
    if (get_u32(&wild, PMIX_JOB_SIZE, &size) != 0) {
        PMIx_Finalize(NULL, 0);
        using_pmix = 0;
        return cadre__error(CADRE_ERR_BOOTSTRAP, "cadre_init: the PMIx server gave no job size");
    }
    if (get_u32(&wild, PMIX_LOCAL_SIZE, &lsize) != 0)
        lsize = size;
    if (get_u32(&myproc, PMIX_LOCAL_RANK, &lrank) != 0)
        lrank = myproc.rank;
    if (get_u32(&myproc, PMIX_NODEID, &nodeid) != 0)
        nodeid = 0;
    else
        info->has_node_id = 1;

    info->rank = (int)myproc.rank;
    info->size = (int)size;
    info->local_rank = (int)lrank;
    info->local_size = (int)lsize;
    info->node_id = (int)nodeid;
    snprintf(info->nspace, sizeof info->nspace, "%s", myproc.nspace);
    CADRE_INFO(BOOTSTRAP, "PMIx nspace %s rank %d/%d local %d/%d node %d", info->nspace,
               info->rank, info->size, info->local_rank, info->local_size, info->node_id);
    return CADRE_SUCCESS;
}

int cadre__bootstrap_finalize(void)
{
    if (using_rdv) {
        using_rdv = 0;
        return cadre__rdv_finalize();
    }
    while (local_store) {
        struct local_kv *n = local_store->next;
        free(local_store->data);
        free(local_store);
        local_store = n;
    }
    if (using_pmix) {
        using_pmix = 0;
        pmix_status_t rc = PMIx_Finalize(NULL, 0);
        if (rc != PMIX_SUCCESS)
            return cadre__error(CADRE_ERR_BOOTSTRAP, "cadre_finalize: PMIx_Finalize failed: %s",
                                PMIx_Error_string(rc));
    }
    return CADRE_SUCCESS;
}

int cadre__bootstrap_put(const char *key, const void *data, size_t len)
{
    if (using_rdv)
        return cadre__rdv_put(key, data, len);
    if (!using_pmix) {
        struct local_kv *kv = calloc(1, sizeof *kv);
        void *copy = malloc(len ? len : 1);
        if (!kv || !copy) {
            free(kv);
            free(copy);
            return cadre__error(CADRE_ERR_NOMEM, "bootstrap: no memory for key %s", key);
        }
        memcpy(copy, data, len);
        snprintf(kv->key, sizeof kv->key, "%s", key);
        kv->data = copy;
        kv->len = len;
        kv->next = local_store;
        local_store = kv;
        return CADRE_SUCCESS;
    }
    pmix_value_t val;
    PMIX_VALUE_CONSTRUCT(&val);
    val.type = PMIX_BYTE_OBJECT;
    val.data.bo.bytes = (char *)data;
    val.data.bo.size = len;
    char pkey[PMIX_MAX_KEYLEN + 1];
    snprintf(pkey, sizeof pkey, "cadre.%s", key);
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, pkey, &val);
    if (rc != PMIX_SUCCESS)
        return cadre__error(CADRE_ERR_BOOTSTRAP, "bootstrap: PMIx_Put(%s) failed: %s", pkey,
                            PMIx_Error_string(rc));
    return CADRE_SUCCESS;
}

int cadre__bootstrap_commit(void)
{
    if (!using_pmix)
        return CADRE_SUCCESS;
    pmix_status_t rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS)
        return cadre__error(CADRE_ERR_BOOTSTRAP, "bootstrap: PMIx_Commit failed: %s",
                            PMIx_Error_string(rc));
    return CADRE_SUCCESS;
}

int cadre__bootstrap_fence(void)
{
    if (using_rdv)
        return cadre__rdv_fence();
    if (!using_pmix)
        return CADRE_SUCCESS;
    pmix_proc_t all;
    PMIX_LOAD_PROCID(&all, myproc.nspace, PMIX_RANK_WILDCARD);
    pmix_info_t info;
    bool collect = true;
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    pmix_status_t rc = PMIx_Fence(&all, 1, &info, 1);
    PMIX_INFO_DESTRUCT(&info);
    if (rc != PMIX_SUCCESS)
        return cadre__error(CADRE_ERR_BOOTSTRAP, "bootstrap: PMIx_Fence failed: %s",
                            PMIx_Error_string(rc));
    return CADRE_SUCCESS;
}

int cadre__bootstrap_get(int rank, const char *key, void **data, size_t *len)
{
    if (using_rdv)
        return cadre__rdv_get(rank, key, data, len);
    if (!using_pmix) {
        for (struct local_kv *kv = local_store; kv; kv = kv->next) {
            if (rank == 0 && !strcmp(kv->key, key)) {
                void *copy = malloc(kv->len ? kv->len : 1);
                if (!copy)
                    return cadre__error(CADRE_ERR_NOMEM, "bootstrap: no memory");
                memcpy(copy, kv->data, kv->len);
                *data = copy;
                *len = kv->len;
                return CADRE_SUCCESS;
            }
        }
        return cadre__error(CADRE_ERR_BOOTSTRAP, "bootstrap: no key %s for rank %d", key, rank);
    }
    pmix_proc_t proc;
    PMIX_LOAD_PROCID(&proc, myproc.nspace, (pmix_rank_t)rank);
    char pkey[PMIX_MAX_KEYLEN + 1];
    snprintf(pkey, sizeof pkey, "cadre.%s", key);
    pmix_value_t *val = NULL;
    pmix_status_t rc = PMIx_Get(&proc, pkey, NULL, 0, &val);
    if (rc != PMIX_SUCCESS || !val)
        return cadre__error(CADRE_ERR_BOOTSTRAP, "bootstrap: PMIx_Get(rank %d, %s) failed: %s",
                            rank, pkey, PMIx_Error_string(rc));
    if (val->type != PMIX_BYTE_OBJECT) {
        PMIX_VALUE_RELEASE(val);
        return cadre__error(CADRE_ERR_BOOTSTRAP, "bootstrap: key %s of rank %d has type %d",
                            pkey, rank, (int)val->type);
    }
    size_t n = val->data.bo.size;
    void *copy = malloc(n ? n : 1);
    if (!copy) {
        PMIX_VALUE_RELEASE(val);
        return cadre__error(CADRE_ERR_NOMEM, "bootstrap: no memory");
    }
    memcpy(copy, val->data.bo.bytes, n);
    PMIX_VALUE_RELEASE(val);
    *data = copy;
    *len = n;
    return CADRE_SUCCESS;
}

/* ---- cadrerun's state report ------------------------------------------------ */
static void (*state_report_fn)(void);

static void state_done_sent(pmix_status_t status, void *cbdata)
{
    (void)status;
    pmix_info_t *info = cbdata;
    PMIX_INFO_FREE(info, 2);
}

static void on_state_query(size_t id, pmix_status_t status, const pmix_proc_t *source,
                           pmix_info_t info[], size_t ninfo, pmix_info_t results[],
                           size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc,
                           void *cbdata)
{
    (void)id;
    (void)status;
    (void)source;
    (void)info;
    (void)ninfo;
    (void)results;
    (void)nresults;
    if (state_report_fn)
        state_report_fn();
    /* The answer goes to the host (the launcher), which counts them. On
     * libpmix's thread a blocking call would deadlock: give a callback. */
    pmix_info_t *done;
    PMIX_INFO_CREATE(done, 2);
    if (done) {
        bool yes = true;
        PMIX_INFO_LOAD(&done[0], PMIX_EVENT_NON_DEFAULT, &yes, PMIX_BOOL);
        PMIX_INFO_LOAD(&done[1], PMIX_EVENT_DO_NOT_CACHE, &yes, PMIX_BOOL);
        /* libpmix 4.2.2 hands the host only events of a wider range than
         * PMIX_RANGE_LOCAL/RM. */
        pmix_status_t rc = PMIx_Notify_event(CADRE_PMIX_EVENT_STATE_DONE, &myproc,
                                             PMIX_RANGE_NAMESPACE, done, 2, state_done_sent, done);
        if (rc != PMIX_SUCCESS)
            PMIX_INFO_FREE(done, 2);
    }
    if (cbfunc)
        cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

static void state_handler_registered(pmix_status_t status, size_t ref, void *cbdata)
{
    (void)ref;
    (void)cbdata;
    if (status != PMIX_SUCCESS)
        CADRE_INFO(BOOTSTRAP, "no state report for cadrerun --timeout: %s",
                   PMIx_Error_string(status));
}

void cadre__bootstrap_set_state_report(void (*fn)(void))
{
    state_report_fn = fn;
    if (!using_pmix)
        return;
    pmix_status_t code = CADRE_PMIX_EVENT_STATE_QUERY;
    pmix_status_t rc = PMIx_Register_event_handler(&code, 1, NULL, 0, on_state_query,
                                                   state_handler_registered, NULL);
    if (rc != PMIX_SUCCESS)
        state_handler_registered(rc, 0, NULL);
}

void cadre__bootstrap_abort(int code, const char *msg)
{
    fflush(stdout);
    fflush(stderr);
    if (using_pmix) {
        /* NULL procs = the whole namespace. The server acknowledges and kills us. */
        PMIx_Abort(code, msg, NULL, 0);
        /* The launcher normally kills us first; never return to the caller. */
        sleep(10);
    }
    _exit(code);
}
