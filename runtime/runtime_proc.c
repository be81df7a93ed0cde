/* Process information and the library's state: what every layer asks
 * (cadre__check_initialized, cadre__proc), the public getters of it, and the
 * functions cadre_finalize runs first (cadre__at_finalize). cadre_init and
 * cadre_finalize themselves are the top layer's (lifecycle/). */
#include <stdatomic.h>

#include "runtime.h"
#include "runtime_device.h"

struct cadre_proc_info cadre__proc = {.device = -1};

/* runtime_device.h: whether the device path looks at buffers at all, and
 * its entry points (filled by cadre_init). */
int cadre__gpu_on;
struct cadre_gpu_path cadre__gpu;

static _Atomic int state = CADRE__ST_NEW;

int cadre__lib_state(void)
{
    return atomic_load_explicit(&state, memory_order_acquire);
}

void cadre__lib_set_state(int s)
{
    atomic_store_explicit(&state, s, memory_order_release);
}

int cadre__check_initialized(const char *fn)
{
    int s = atomic_load_explicit(&state, memory_order_acquire);
    if (s == CADRE__ST_INIT)
        return CADRE_SUCCESS;
    return cadre__error(CADRE_ERR_STATE, "%s: called %s", fn,
                        s == CADRE__ST_NEW ? "before cadre_init" : "after cadre_finalize");
}

static void (*fini_hooks[8])(void);
static int nfini_hooks;

void cadre__at_finalize(void (*fn)(void))
{
    for (int i = 0; i < nfini_hooks; i++)
        if (fini_hooks[i] == fn)
            return;
    if (nfini_hooks < 8)
        fini_hooks[nfini_hooks++] = fn;
}

void cadre__run_at_finalize(void)
{
    for (int i = nfini_hooks - 1; i >= 0; i--)
        fini_hooks[i]();
    nfini_hooks = 0;
}

int cadre_initialized(int *flag)
{
    if (!flag)
        return cadre__error(CADRE_ERR_ARG, "cadre_initialized: flag is NULL");
    *flag = atomic_load(&state) == CADRE__ST_INIT;
    return CADRE_SUCCESS;
}

#define PROC_GETTER(fn, field)                                  \
    int fn(int *out)                                            \
    {                                                           \
        if (!out)                                               \
            return cadre__error(CADRE_ERR_ARG, #fn ": argument is NULL"); \
        CADRE_CHECK(cadre__check_initialized(#fn));             \
        *out = cadre__proc.field;                               \
        return CADRE_SUCCESS;                                   \
    }
PROC_GETTER(cadre_local_rank, local_rank)
PROC_GETTER(cadre_local_size, local_size)
PROC_GETTER(cadre_device, device)

int cadre_version(int *major, int *minor, int *patch)
{
    if (!major || !minor || !patch)
        return cadre__error(CADRE_ERR_ARG, "cadre_version: %s is NULL",
                            !major ? "major" : !minor ? "minor" : "patch");
    *major = CADRE_VERSION_MAJOR;
    *minor = CADRE_VERSION_MINOR;
    *patch = CADRE_VERSION_PATCH;
    return CADRE_SUCCESS;
}

size_t cadre_datatype_size(cadre_datatype_t dt)
{
    switch (dt) {
    case CADRE_INT8:
    case CADRE_UINT8: return 1;
    case CADRE_FLOAT16:
    case CADRE_BFLOAT16: return 2;
    case CADRE_INT32:
    case CADRE_UINT32:
    case CADRE_FLOAT32: return 4;
    case CADRE_INT64:
    case CADRE_UINT64:
    case CADRE_FLOAT64: return 8;
    }
    return 0;
}
