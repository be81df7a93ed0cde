/* Communicator objects and handle validation. */
#include "runtime.h"

struct cadre_comm cadre__comm_world;

struct cadre_comm *cadre__comm_get(cadre_comm_t comm, const char *fn, int *status)
{
    struct cadre_comm *c = comm == CADRE_COMM_WORLD ? &cadre__comm_world : comm;
    if (!c) {
        *status = cadre__error(CADRE_ERR_STATE, "%s: communicator is CADRE_COMM_NULL", fn);
        return NULL;
    }
    if (c->magic != CADRE_COMM_MAGIC) {
        *status = cadre__error(CADRE_ERR_STATE, "%s: communicator %p is freed or not a communicator",
                               fn, (void *)comm);
        return NULL;
    }
    return c;
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
