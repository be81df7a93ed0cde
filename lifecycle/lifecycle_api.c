/*
 * The public functions: one wrapper per function of api_list.h, around the
 * implementation the layers define under its cadre__impl_ name (they are
 * built with api_names.h; this file is not). A wrapper adds one branch to
 * a call that succeeds; a failing call goes to cadre__api_fail, which
 * writes the message or aborts as the error mode says (lifecycle/lifecycle_errors.c).
 * Calls inside the library never come through here, so one failing call is
 * reported once, by the call the user made.
 */
#include "runtime/runtime.h"

#define CADRE__API_FAIL_PLAIN(rc, comm, fn) cadre__api_fail(rc, comm, fn)
#define CADRE__API_FAIL_NEWCOMM(rc, comm, fn) cadre__api_fail(rc, comm, fn)
#define CADRE__API_FAIL_INIT(rc, comm, fn) cadre__api_fail(rc, comm, fn)
#define CADRE__API_FAIL_TIMEOUT(rc, comm, fn) \
    ((rc) == CADRE_ERR_TIMEOUT ? (rc) : cadre__api_fail(rc, comm, fn))

#define CADRE__API_OK_PLAIN
#define CADRE__API_OK_TIMEOUT
#define CADRE__API_OK_NEWCOMM cadre__api_inherit(comm, *newcomm);
#define CADRE__API_OK_INIT (void)cadre__errors_default();

#define CADRE__API(kind, name, params, args, comm)                         \
    __typeof__(cadre_##name) cadre__impl_##name;                           \
    int cadre_##name params                                                \
    {                                                                      \
        int rc = cadre__impl_##name args;                                  \
        if (__builtin_expect(rc != CADRE_SUCCESS, 0))                      \
            return CADRE__API_FAIL_##kind(rc, comm, "cadre_" #name);       \
        CADRE__API_OK_##kind                                               \
        return CADRE_SUCCESS;                                              \
    }
#include "runtime/api_list.h"
#undef CADRE__API
