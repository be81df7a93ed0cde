/*
 * cadrerun as a PMIx server (libpmix's server API). The module callbacks run
 * on libpmix's progress thread: they never block and never touch the job's
 * state, except through event_base_once on the main loop (thread-safe with
 * evthread_use_pthreads) and the ranks' atomic flags.
 */
#include "config.h"

#include <pmix.h>
#include <pmix_server.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "launcher.h"

#define FINALIZE_DEADLINE_S 1

static struct cadre__launcher_job *server_job;
static int server_up;

/* ---- waiting for libpmix's completion callbacks, at start-up only --------- */
struct pending_ops {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int left;
    pmix_status_t status; /* first failure */
};

static void op_done(pmix_status_t status, void *cbdata)
{
    struct pending_ops *p = cbdata;
    pthread_mutex_lock(&p->lock);
    if (status != PMIX_SUCCESS && p->status == PMIX_SUCCESS)
        p->status = status;
    if (--p->left == 0)
        pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

/* A call returned rc instead of promising a callback. */
static void op_not_started(struct pending_ops *p, pmix_status_t rc)
{
    op_done(rc == PMIX_OPERATION_SUCCEEDED ? PMIX_SUCCESS : rc, p);
}

static pmix_status_t op_wait(struct pending_ops *p)
{
    pthread_mutex_lock(&p->lock);
    while (p->left > 0)
        pthread_cond_wait(&p->cond, &p->lock);
    pmix_status_t st = p->status;
    pthread_mutex_unlock(&p->lock);
    return st;
}

/* ---- module callbacks (libpmix's thread) ------------------------------------ */
/* Done at once; libpmix may also pass no callback and want just the status. */
static pmix_status_t ack(pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    if (cbfunc)
        cbfunc(PMIX_SUCCESS, cbdata);
    return PMIX_SUCCESS;
}

static pmix_status_t on_connected(const pmix_proc_t *proc, void *obj, pmix_op_cbfunc_t cbfunc,
                                  void *cbdata)
{
    (void)proc;
    struct cadre__launcher_rank *r = obj;
    if (r)
        atomic_store(&r->connected, 1);
    /* A libpmix that no longer calls accept() through the PLT would take
     * connections unchecked: say so rather than trust it silently. */
    static atomic_int said;
    if (cadre__launcher_guard_admitted() == 0 && !atomic_exchange(&said, 1))
        CADRE_WARN(LAUNCHER, "a client connected to the PMIx server without passing cadrerun's "
                             "connection check: this libpmix (%s) does not call accept() "
                             "through cadrerun, so any local process may reach it",
                   PMIx_Get_version());
    return ack(cbfunc, cbdata);
}

static pmix_status_t on_finalized(const pmix_proc_t *proc, void *obj, pmix_op_cbfunc_t cbfunc,
                                  void *cbdata)
{
    (void)proc;
    struct cadre__launcher_rank *r = obj;
    if (r)
        atomic_store(&r->finalized, 1);
    return ack(cbfunc, cbdata);
}

struct abort_req {
    struct cadre__launcher_job *job;
    int rank, code;
    pmix_op_cbfunc_t cbfunc;
    void *cbdata;
};

static void abort_on_loop(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct abort_req *a = arg;
    /* Release the caller first; it waits in PMIx_Abort for us to kill it. */
    if (a->cbfunc)
        a->cbfunc(PMIX_SUCCESS, a->cbdata);
    cadre__launcher_abort(a->job, a->rank, a->code);
    free(a);
}

/* cadre_abort ends the whole job whatever procs the caller names. */
static pmix_status_t on_abort(const pmix_proc_t *proc, void *obj, int status, const char msg[],
                              pmix_proc_t procs[], size_t nprocs, pmix_op_cbfunc_t cbfunc,
                              void *cbdata)
{
    (void)obj;
    (void)msg;
    (void)procs;
    (void)nprocs;
    struct abort_req *a = malloc(sizeof *a);
    if (!a)
        return PMIX_ERR_NOMEM;
    *a = (struct abort_req){server_job, (int)proc->rank, status, cbfunc, cbdata};
    static const struct timeval now = {0, 0};
    if (event_base_once(server_job->base, -1, EV_TIMEOUT, abort_on_loop, a, &now) != 0) {
        free(a);
        return PMIX_ERROR;
    }
    return PMIX_SUCCESS;
}

/* One node: every participant is local, so what libpmix collected from them
 * is already the whole result. */
static pmix_status_t on_fence(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[],
                              size_t ninfo, char *data, size_t ndata, pmix_modex_cbfunc_t cbfunc,
                              void *cbdata)
{
    (void)procs;
    (void)nprocs;
    (void)info;
    (void)ninfo;
    if (cbfunc)
        cbfunc(PMIX_SUCCESS, data, ndata, cbdata, NULL, NULL);
    return PMIX_SUCCESS;
}

/* Every proc is local, so libpmix answers Gets itself; a direct-modex
 * request can only be for data nobody has. */
static pmix_status_t on_dmodex(const pmix_proc_t *proc, const pmix_info_t info[], size_t ninfo,
                               pmix_modex_cbfunc_t cbfunc, void *cbdata)
{
    (void)proc;
    (void)info;
    (void)ninfo;
    if (cbfunc)
        cbfunc(PMIX_ERR_NOT_FOUND, NULL, 0, cbdata, NULL, NULL);
    return PMIX_SUCCESS;
}

/* Event registrations and notifications stay within this server. */
static pmix_status_t on_register_events(pmix_status_t *codes, size_t ncodes,
                                        const pmix_info_t info[], size_t ninfo,
                                        pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    (void)codes;
    (void)ncodes;
    (void)info;
    (void)ninfo;
    return ack(cbfunc, cbdata);
}

static void answered_on_loop(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    cadre__launcher_state_answered(arg);
}

/* A rank's answer to the state report of --timeout; other events stay here. */
static pmix_status_t on_notify_event(pmix_status_t code, const pmix_proc_t *source,
                                     pmix_data_range_t range, pmix_info_t info[], size_t ninfo,
                                     pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    (void)range;
    (void)info;
    (void)ninfo;
    struct cadre__launcher_job *job = server_job;
    if (code == CADRE_PMIX_EVENT_STATE_DONE && job && source &&
        PMIX_CHECK_NSPACE(source->nspace, job->nspace) && source->rank < (pmix_rank_t)job->nranks) {
        atomic_store(&job->ranks[source->rank].reported, 1);
        static const struct timeval now = {0, 0};
        event_base_once(job->base, -1, EV_TIMEOUT, answered_on_loop, job, &now);
    }
    /* Done here and now; libpmix 4.2.2 takes no more of these from a
     * client when we call cbfunc from inside the upcall instead. */
    (void)cbfunc;
    (void)cbdata;
    return PMIX_OPERATION_SUCCEEDED;
}

static pmix_server_module_t module = {
    .client_connected = on_connected,
    .client_finalized = on_finalized,
    .abort = on_abort,
    .fence_nb = on_fence,
    .direct_modex = on_dmodex,
    .register_events = on_register_events,
    .notify_event = on_notify_event,
};

/* ---- main thread --------------------------------------------------------------- */
static int fail(const char *what, pmix_status_t rc)
{
    cadre__launcher_say("%s failed: %s", what, PMIx_Error_string(rc));
    return -1;
}

#define ADD(list, key, val, type)                                                \
    do {                                                                         \
        pmix_status_t add_rc_ = PMIx_Info_list_add(list, key, val, type);        \
        if (add_rc_ != PMIX_SUCCESS) {                                           \
            rc = add_rc_;                                                        \
            goto out;                                                            \
        }                                                                        \
    } while (0)

/* The job description libpmix 4.2.2 needs before clients may connect (the
 * set Slurm's mpi/pmix plugin gives), as one info array. */
static pmix_status_t job_info(struct cadre__launcher_job *job, pmix_data_array_t *out)
{
    pmix_status_t rc = PMIX_ERR_NOMEM;
    uint32_t n = (uint32_t)job->nranks, one = 1, zero = 0;
    pmix_rank_t rank0 = 0;
    char *regex = NULL, *ppn = NULL, *peers = NULL;
    void *list = PMIx_Info_list_start(), *proc = NULL;
    if (!list)
        return rc;

    size_t plen = (size_t)job->nranks * 6 + 1;
    if (!(peers = malloc(plen)))
        goto out;
    size_t off = 0;
    for (int r = 0; r < job->nranks; r++)
        off += (size_t)snprintf(peers + off, plen - off, r ? ",%d" : "%d", r);
    /* 4.2.2 takes a range ("0-3") in the proc map literally: the local
     * peers become the string "0-3" and the local size 1. List them. */
    if ((rc = PMIx_generate_regex(job->hostname, &regex)) != PMIX_SUCCESS ||
        (rc = PMIx_generate_ppn(peers, &ppn)) != PMIX_SUCCESS)
        goto out;

    ADD(list, PMIX_JOBID, job->jobid, PMIX_STRING);
    ADD(list, PMIX_UNIV_SIZE, &n, PMIX_UINT32);
    ADD(list, PMIX_JOB_SIZE, &n, PMIX_UINT32);
    ADD(list, PMIX_MAX_PROCS, &n, PMIX_UINT32);
    ADD(list, PMIX_JOB_NUM_APPS, &one, PMIX_UINT32);
    ADD(list, PMIX_NUM_NODES, &one, PMIX_UINT32);
    ADD(list, PMIX_NODE_MAP, regex, PMIX_STRING);
    ADD(list, PMIX_PROC_MAP, ppn, PMIX_STRING);
    ADD(list, PMIX_LOCAL_PEERS, peers, PMIX_STRING);
    ADD(list, PMIX_LOCAL_SIZE, &n, PMIX_UINT32);
    ADD(list, PMIX_NODE_SIZE, &n, PMIX_UINT32);
    ADD(list, PMIX_LOCALLDR, &rank0, PMIX_PROC_RANK);
    ADD(list, PMIX_TMPDIR, job->tmpdir, PMIX_STRING);
    for (int r = 0; r < job->nranks; r++) {
        pmix_rank_t pr = (pmix_rank_t)r;
        uint16_t lr = (uint16_t)job->ranks[r].local_rank;
        if (!(proc = PMIx_Info_list_start())) {
            rc = PMIX_ERR_NOMEM;
            goto out;
        }
        ADD(proc, PMIX_RANK, &pr, PMIX_PROC_RANK); /* must come first */
        ADD(proc, PMIX_APPNUM, &zero, PMIX_UINT32);
        ADD(proc, PMIX_APPLDR, &rank0, PMIX_PROC_RANK);
        ADD(proc, PMIX_GLOBAL_RANK, &pr, PMIX_PROC_RANK);
        ADD(proc, PMIX_APP_RANK, &pr, PMIX_PROC_RANK);
        ADD(proc, PMIX_LOCAL_RANK, &lr, PMIX_UINT16);
        ADD(proc, PMIX_NODE_RANK, &lr, PMIX_UINT16);
        ADD(proc, PMIX_HOSTNAME, job->hostname, PMIX_STRING);
        ADD(proc, PMIX_NODEID, &zero, PMIX_UINT32);
        pmix_data_array_t darr;
        if ((rc = PMIx_Info_list_convert(proc, &darr)) != PMIX_SUCCESS)
            goto out;
        rc = PMIx_Info_list_add(list, PMIX_PROC_DATA, &darr, PMIX_DATA_ARRAY);
        PMIX_DATA_ARRAY_DESTRUCT(&darr);
        if (rc != PMIX_SUCCESS)
            goto out;
        PMIx_Info_list_release(proc);
        proc = NULL;
    }
    rc = PMIx_Info_list_convert(list, out);
out:
    if (proc)
        PMIx_Info_list_release(proc);
    PMIx_Info_list_release(list);
    free(regex);
    free(ppn);
    free(peers);
    return rc;
}

int cadre__launcher_pmix_start(struct cadre__launcher_job *job)
{
    server_job = job;
    /* libpmix's listener starts in PMIx_server_init. */
    if (cadre__launcher_guard_start(job) != 0)
        return -1;
    pmix_status_t rc;
    pmix_info_t sinfo[4];
    bool no = false;
    /* Everything libpmix writes goes in the job's own temp dir, which the
     * cleaner removes however the job ends. */
    PMIX_INFO_LOAD(&sinfo[0], PMIX_SERVER_TMPDIR, job->tmpdir, PMIX_STRING);
    PMIX_INFO_LOAD(&sinfo[1], PMIX_SYSTEM_TMPDIR, job->tmpdir, PMIX_STRING);
    PMIX_INFO_LOAD(&sinfo[2], PMIX_SERVER_TOOL_SUPPORT, &no, PMIX_BOOL);
    PMIX_INFO_LOAD(&sinfo[3], PMIX_SERVER_SYSTEM_SUPPORT, &no, PMIX_BOOL);
    rc = PMIx_server_init(&module, sinfo, 4);
    for (int i = 0; i < 4; i++)
        PMIX_INFO_DESTRUCT(&sinfo[i]);
    if (rc != PMIX_SUCCESS)
        return fail("PMIx_server_init", rc);
    server_up = 1;

    pmix_data_array_t info;
    if ((rc = job_info(job, &info)) != PMIX_SUCCESS)
        return fail("describing the job to PMIx", rc);

    /* libpmix handles registrations in order: the nspace, then every client,
     * then one wait for them all before any fork. */
    struct pending_ops p = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                            job->nranks + 1, PMIX_SUCCESS};
    pmix_nspace_t ns;
    PMIX_LOAD_NSPACE(ns, job->nspace);
    rc = PMIx_server_register_nspace(ns, job->nranks, info.array, info.size, op_done, &p);
    if (rc != PMIX_SUCCESS)
        op_not_started(&p, rc);
    uid_t uid = geteuid();
    gid_t gid = getegid();
    for (int r = 0; r < job->nranks; r++) {
        pmix_proc_t proc;
        PMIX_LOAD_PROCID(&proc, job->nspace, (pmix_rank_t)r);
        rc = PMIx_server_register_client(&proc, uid, gid, &job->ranks[r], op_done, &p);
        if (rc != PMIX_SUCCESS)
            op_not_started(&p, rc);
    }
    rc = op_wait(&p);
    PMIX_DATA_ARRAY_DESTRUCT(&info);
    if (rc != PMIX_SUCCESS)
        return fail("registering the job with PMIx", rc);
    CADRE_INFO(LAUNCHER, "PMIx server up: namespace %s, %d clients registered", job->nspace,
               job->nranks);
    return 0;
}

/* What a notification refers to must live until its callback. */
struct state_query {
    pmix_proc_t all;
    pmix_info_t info[3];
};

static void query_sent(pmix_status_t status, void *cbdata)
{
    struct state_query *q = cbdata;
    if (status != PMIX_SUCCESS && status != PMIX_OPERATION_SUCCEEDED)
        CADRE_INFO(LAUNCHER, "state report: PMIx_Notify_event: %s", PMIx_Error_string(status));
    for (int i = 0; i < 3; i++)
        PMIX_INFO_DESTRUCT(&q->info[i]);
    free(q);
}

int cadre__launcher_pmix_state_query(struct cadre__launcher_job *job)
{
    if (!server_up)
        return 0;
    int asked = 0;
    for (int r = 0; r < job->nranks; r++) {
        struct cadre__launcher_rank *k = &job->ranks[r];
        atomic_store(&k->reported, 0);
        asked += k->state == RANK_RUNNING && atomic_load(&k->connected) &&
                 !atomic_load(&k->finalized);
    }
    struct state_query *q;
    if (!asked || !(q = calloc(1, sizeof *q)))
        return 0;
    /* To the job's processes only (a custom range), not cached for a rank
     * that registers later, not for default handlers. */
    PMIX_LOAD_PROCID(&q->all, job->nspace, PMIX_RANK_WILDCARD);
    pmix_data_array_t range = {.type = PMIX_PROC, .size = 1, .array = &q->all};
    bool yes = true;
    PMIX_INFO_LOAD(&q->info[0], PMIX_EVENT_CUSTOM_RANGE, &range, PMIX_DATA_ARRAY);
    PMIX_INFO_LOAD(&q->info[1], PMIX_EVENT_NON_DEFAULT, &yes, PMIX_BOOL);
    PMIX_INFO_LOAD(&q->info[2], PMIX_EVENT_DO_NOT_CACHE, &yes, PMIX_BOOL);
    pmix_status_t rc = PMIx_Notify_event(CADRE_PMIX_EVENT_STATE_QUERY, NULL, PMIX_RANGE_CUSTOM,
                                         q->info, 3, query_sent, q);
    if (rc != PMIX_SUCCESS) {
        /* No callback will come. */
        query_sent(rc, q);
        return rc == PMIX_OPERATION_SUCCEEDED ? asked : 0;
    }
    return asked;
}

int cadre__launcher_pmix_setup_fork(struct cadre__launcher_job *job, int rank, char ***env)
{
    pmix_proc_t proc;
    PMIX_LOAD_PROCID(&proc, job->nspace, (pmix_rank_t)rank);
    pmix_status_t rc = PMIx_server_setup_fork(&proc, env);
    if (rc != PMIX_SUCCESS)
        return fail("PMIx_server_setup_fork", rc);
    return 0;
}

struct finalizer {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done;
    pmix_status_t rc;
};

static void *finalize_main(void *arg)
{
    struct finalizer *f = arg;
    pmix_status_t rc = PMIx_server_finalize();
    pthread_mutex_lock(&f->lock);
    f->rc = rc;
    f->done = 1;
    pthread_cond_signal(&f->cond);
    pthread_mutex_unlock(&f->lock);
    return NULL;
}

int cadre__launcher_pmix_stop(struct cadre__launcher_job *job)
{
    (void)job;
    if (!server_up)
        return 0;
    server_up = 0;
    /* libpmix 4.2.2 can deadlock in PMIx_server_finalize once a client died
     * in the middle of its connection handshake (ptl_base_connection_hdlr
     * reports UNREACHABLE first), which happens when we kill a job whose
     * ranks are still starting. Give it a deadline instead of hanging. */
    static struct finalizer f = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
    pthread_t th;
    if (pthread_create(&th, NULL, finalize_main, &f) != 0) {
        finalize_main(&f);
    } else {
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += FINALIZE_DEADLINE_S;
        pthread_mutex_lock(&f.lock);
        while (!f.done && pthread_cond_timedwait(&f.cond, &f.lock, &deadline) == 0)
            ;
        int done = f.done;
        pthread_mutex_unlock(&f.lock);
        if (!done) {
            CADRE_INFO(LAUNCHER, "PMIx_server_finalize did not return in %d s; leaving it",
                       FINALIZE_DEADLINE_S);
            return -1;
        }
        pthread_join(th, NULL);
    }
    if (f.rc != PMIX_SUCCESS)
        CADRE_WARN(LAUNCHER, "PMIx_server_finalize: %s", PMIx_Error_string(f.rc));
    return 0;
}
