/* Error modes: what a failing public call does besides returning its status
 * (CADRE_ERRORS, cadre_comm_set_errors; ERRORS in cadre(7)). The wrappers
 * of lifecycle/lifecycle_api.c come here only when a call has failed. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "runtime/runtime.h"

static int default_mode = CADRE_ERRORS_WARN;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

static const char *const mode_names[] = {"return", "warn", "abort"};

static void default_setup(void)
{
    const char *v = cadre__config_str(CADRE_CFG_ERRORS);
    for (int m = CADRE_ERRORS_RETURN; m <= CADRE_ERRORS_ABORT; m++)
        if (!strcasecmp(v, mode_names[m])) {
            default_mode = m;
            return;
        }
    /* A mistyped value must not silence the errors it was meant to show. */
    CADRE_WARN(RUNTIME, "ignoring CADRE_ERRORS=\"%s\": not return, warn or abort; using warn", v);
}

int cadre__errors_default(void)
{
    pthread_once(&default_once, default_setup);
    return default_mode;
}

/* The mode of a communicator object; NULL: the world's. A communicator the
 * library made for itself has none set and follows the world too. */
static int mode_of(const struct cadre_comm *c)
{
    int m = c ? __atomic_load_n(&c->errors, __ATOMIC_RELAXED) : 0;
    if (!m)
        m = __atomic_load_n(&cadre__comm_world.errors, __ATOMIC_RELAXED);
    return m ? m - 1 : cadre__errors_default();
}

struct find_mode {
    cadre_comm_t want;
    int mode; /* -1: not a registered communicator */
};

static void find_one(const struct cadre_comm *c, void *arg)
{
    struct find_mode *f = arg;
    if (cadre__comm_handle(c) == f->want)
        f->mode = mode_of(c);
}

/* The mode of a handle a failed call was given, which may be anything: it is
 * looked for among the registered communicators' handles, never followed, so
 * reporting a garbage or freed handle cannot crash, and
 * cadre__comm_get's message (the caller's cadre_last_error) is left alone. */
static int handle_mode(cadre_comm_t comm)
{
    if (comm == CADRE_COMM_NULL || comm == CADRE_COMM_WORLD)
        return mode_of(NULL);
    struct find_mode f = {.want = comm, .mode = -1};
    cadre__comm_foreach(find_one, &f);
    return f.mode >= 0 ? f.mode : mode_of(NULL);
}

static const char *status_name(int rc)
{
    switch (rc) {
#define CADRE__STATUS_NAME(name, code, text) \
    case CADRE_##name:                       \
        return "CADRE_" #name;
        CADRE_STATUS_MAP(CADRE__STATUS_NAME)
#undef CADRE__STATUS_NAME
    }
    return "unknown status";
}

int cadre__api_fail(int rc, cadre_comm_t comm, const char *fn)
{
    int mode = handle_mode(comm);
    if (mode == CADRE_ERRORS_RETURN)
        return rc;
    /* One line in the format of the library's warnings, whatever
     * CADRE_DEBUG_SUBSYS filters: the message names the call; where an inner
     * step wrote it ("rank 2: gone"), the call's name goes first. */
    const char *msg = cadre_last_error();
    size_t n = strlen(fn);
    if (!msg[0])
        cadre__log(CADRE_LOG_WARN, CADRE_SUBSYS_RUNTIME, "%s: %s", fn, cadre_error_string(rc));
    else if (!strncmp(msg, fn, n) && msg[n] == ':' && cadre__error_was_shown())
        ; /* a diagnosis block began with it: one block per event */
    else if (!strncmp(msg, fn, n) && msg[n] == ':')
        cadre__log(CADRE_LOG_WARN, CADRE_SUBSYS_RUNTIME, "%s (%s)", msg, status_name(rc));
    else
        cadre__log(CADRE_LOG_WARN, CADRE_SUBSYS_RUNTIME, "%s: %s (%s)", fn, msg, status_name(rc));
    if (mode == CADRE_ERRORS_ABORT) {
        /* As MPI_ERRORS_ARE_FATAL: the whole job ends, the status as its exit
         * code. cadre_abort does not return; _exit in case it could not. */
        cadre_abort(CADRE_COMM_WORLD, rc);
        _exit(rc);
    }
    return rc;
}

void cadre__api_inherit(cadre_comm_t parent, cadre_comm_t child)
{
    if (child == CADRE_COMM_NULL)
        return;
    /* Both were just checked by the call that made child. */
    int st;
    struct cadre_comm *p = cadre__comm_get(parent, "cadre__api_inherit", &st);
    struct cadre_comm *c = cadre__comm_get(child, "cadre__api_inherit", &st);
    if (p && c)
        __atomic_store_n(&c->errors, mode_of(p) + 1, __ATOMIC_RELAXED);
}

int cadre_comm_set_errors(cadre_comm_t comm, int mode)
{
    CADRE_CHECK(cadre__check_initialized("cadre_comm_set_errors"));
    int st;
    struct cadre_comm *c = cadre__comm_get(comm, "cadre_comm_set_errors", &st);
    if (!c)
        return st;
    if (mode < CADRE_ERRORS_RETURN || mode > CADRE_ERRORS_ABORT)
        return cadre__error(CADRE_ERR_ARG,
                            "cadre_comm_set_errors: mode %d is not CADRE_ERRORS_RETURN (0), "
                            "CADRE_ERRORS_WARN (1) or CADRE_ERRORS_ABORT (2)",
                            mode);
    __atomic_store_n(&c->errors, mode + 1, __ATOMIC_RELAXED);
    return CADRE_SUCCESS;
}

int cadre_comm_get_errors(cadre_comm_t comm, int *mode)
{
    if (!mode)
        return cadre__error(CADRE_ERR_ARG, "cadre_comm_get_errors: mode is NULL");
    CADRE_CHECK(cadre__check_initialized("cadre_comm_get_errors"));
    int st;
    struct cadre_comm *c = cadre__comm_get(comm, "cadre_comm_get_errors", &st);
    if (!c)
        return st;
    *mode = mode_of(c);
    return CADRE_SUCCESS;
}
