/* Communicator objects and handle validation. */
#include "runtime.h"

struct cadre_comm cadre__comm_world = {.handle = CADRE_COMM_WORLD};
struct cadre_htab cadre__comm_handles = CADRE_HTAB_INIT;

int cadre__comm_handle_new(struct cadre_comm *c)
{
    int rc = cadre__h_bind(&cadre__comm_handles, c, &c->hidx, &c->hslot);
    if (rc != CADRE_SUCCESS)
        return rc;
    c->handle = (cadre_comm_t)cadre__h_open(c->hslot, CADRE_HKIND_COMM, c->hidx);
    return CADRE_SUCCESS;
}

void cadre__comm_handle_end(struct cadre_comm *c)
{
    if (!c->hslot)
        return;
    cadre__h_close(c->hslot);
    cadre__h_unbind(&cadre__comm_handles, c->hidx);
    c->hslot = NULL;
    c->handle = CADRE_COMM_NULL;
}

struct cadre_comm *cadre__comm_bad(cadre_comm_t comm, const char *fn, int *status)
{
    if (comm == CADRE_COMM_NULL)
        *status = cadre__error(CADRE_ERR_STATE, "%s: communicator is CADRE_COMM_NULL", fn);
    else if (comm == CADRE_COMM_WORLD)
        /* Callers check the library's state first: only while cadre_init
         * or cadre_finalize runs in another thread. */
        *status = cadre__error(CADRE_ERR_STATE,
                               "%s: CADRE_COMM_WORLD is not set up (before cadre_init or after "
                               "cadre_finalize)",
                               fn);
    else if (cadre__h_stale(&cadre__comm_handles, (uintptr_t)comm, CADRE_HKIND_COMM))
        *status = cadre__error(CADRE_ERR_STATE,
                               "%s: comm %p is a stale handle (communicator already freed)", fn,
                               (void *)comm);
    else
        *status = cadre__error(CADRE_ERR_ARG, "%s: comm %p is not a communicator handle", fn,
                               (void *)comm);
    return NULL;
}

int cadre_comm_rank(cadre_comm_t comm, int *rank)
{
    if (!rank)
        return cadre__error(CADRE_ERR_ARG, "cadre_comm_rank: rank is NULL");
    CADRE_CHECK(cadre__check_initialized("cadre_comm_rank"));
    int st;
    struct cadre_comm *c = cadre__comm_get(comm, "cadre_comm_rank", &st);
    if (!c)
        return st;
    *rank = c->rank;
    return CADRE_SUCCESS;
}

int cadre_comm_size(cadre_comm_t comm, int *size)
{
    if (!size)
        return cadre__error(CADRE_ERR_ARG, "cadre_comm_size: size is NULL");
    CADRE_CHECK(cadre__check_initialized("cadre_comm_size"));
    int st;
    struct cadre_comm *c = cadre__comm_get(comm, "cadre_comm_size", &st);
    if (!c)
        return st;
    *size = c->size;
    return CADRE_SUCCESS;
}
