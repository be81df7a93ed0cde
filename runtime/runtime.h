/*
 * runtime.h - internal interface of the runtime layer: errors, logging,
 * configuration, process state. Everything here is hidden from users
 * (only cadre_* is exported by the linker version script).
 */
#ifndef CADRE_RUNTIME_H
#define CADRE_RUNTIME_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "cadre.h"

#define CADRE_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* ---- errors ------------------------------------------------------------- */
/* Records a detailed message as the calling thread's cadre_last_error() and
 * returns status, so call sites read: return cadre__error(CADRE_ERR_ARG, ...). */
int cadre__error(int status, const char *fmt, ...) CADRE_PRINTF(2, 3);
void cadre__clear_error(void);

/* Leave a file:line trail at TRACE level and propagate (NCCL's NCCLCHECK). */
#define CADRE_CHECK(call)                                                        \
    do {                                                                         \
        int cadre__rc = (call);                                                  \
        if (cadre__rc != CADRE_SUCCESS) {                                        \
            CADRE_TRACE(RUNTIME, "%s:%d <- %s: %s", __FILE__, __LINE__, #call,   \
                        cadre_error_string(cadre__rc));                          \
            return cadre__rc;                                                    \
        }                                                                        \
    } while (0)

#define CADRE_CHECK_GOTO(call, rc, label)                                        \
    do {                                                                         \
        (rc) = (call);                                                           \
        if ((rc) != CADRE_SUCCESS) {                                             \
            CADRE_TRACE(RUNTIME, "%s:%d <- %s: %s", __FILE__, __LINE__, #call,   \
                        cadre_error_string(rc));                                 \
            goto label;                                                          \
        }                                                                        \
    } while (0)

/* ---- logging ------------------------------------------------------------ */
enum cadre_log_level { CADRE_LOG_WARN = 0, CADRE_LOG_INFO = 1, CADRE_LOG_TRACE = 2 };

#define CADRE_SUBSYS_MAP(X) X(RUNTIME) X(BOOTSTRAP) X(P2P) X(COLL) X(DEVICE) X(LAUNCHER)
enum cadre_subsys {
#define CADRE__SUBSYS_ENUM(n) CADRE_SUBSYS_##n,
    CADRE_SUBSYS_MAP(CADRE__SUBSYS_ENUM)
#undef CADRE__SUBSYS_ENUM
    CADRE_SUBSYS_COUNT
};

int cadre__log_enabled(int level, int subsys);
/* Writes head, the message and a newline to fd in one write(2), so lines of
 * concurrent writers never mix; a message past 2 KiB is cut. */
void cadre__vwrite_line(int fd, const char *head, const char *fmt, va_list ap);
void cadre__log(int level, int subsys, const char *fmt, ...) CADRE_PRINTF(3, 4);
/* Prefix for log lines, e.g. "rank 3" or "cadrerun"; copied. */
void cadre__log_set_prefix(const char *prefix);
/* Overrides CADRE_DEBUG's level for this process only (cadrerun --verbose),
 * so the setting is not inherited by the processes it starts. */
void cadre__log_set_level(int level);

#define CADRE_LOG_(level, subsys, ...)                                           \
    do {                                                                         \
        if (cadre__log_enabled(level, CADRE_SUBSYS_##subsys))                    \
            cadre__log(level, CADRE_SUBSYS_##subsys, __VA_ARGS__);               \
    } while (0)
#define CADRE_WARN(subsys, ...) CADRE_LOG_(CADRE_LOG_WARN, subsys, __VA_ARGS__)
#define CADRE_INFO(subsys, ...) CADRE_LOG_(CADRE_LOG_INFO, subsys, __VA_ARGS__)
#define CADRE_TRACE(subsys, ...) CADRE_LOG_(CADRE_LOG_TRACE, subsys, __VA_ARGS__)

/* ---- configuration ------------------------------------------------------ */
enum cadre_config_type { CADRE_CFG_STR, CADRE_CFG_INT, CADRE_CFG_DBL, CADRE_CFG_BOOL };
enum cadre_config_id {
#define X(id, type, def, help) CADRE_CFG_##id,
#include "runtime_config_table.h"
#undef X
    CADRE_CFG_COUNT
};
struct cadre_config_entry {
    const char *name; /* "CADRE_TIMEOUT" */
    int type;
    const char *def;
    const char *help;
};
extern const struct cadre_config_entry cadre__config_table[CADRE_CFG_COUNT];
/* Value from the environment, else the default. Parsed on every call: cheap
 * enough for start-up paths; hot paths cache the result. A malformed value
 * gives a warning once and the default. */
const char *cadre__config_str(int id);
long cadre__config_int(int id);
double cadre__config_dbl(int id);
int cadre__config_bool(int id);

/* ---- process state ------------------------------------------------------ */
struct cadre_proc_info {
    int rank, size;
    int local_rank, local_size;
    int node_id;
    int device; /* bound CUDA device or -1 */
    int singleton;
};
extern struct cadre_proc_info cadre__proc;

/* CADRE_SUCCESS when cadre_init has completed and cadre_finalize has not
 * begun; otherwise records "<fn>: called before cadre_init" (or after
 * finalize) and returns CADRE_ERR_STATE. */
int cadre__check_initialized(const char *fn);
/* Registers fn to run at the start of cadre_finalize, while the library is
 * still usable (upper layers drain their work there); once per fn. */
void cadre__at_finalize(void (*fn)(void));

/* ---- communicators ------------------------------------------------------ */
#define CADRE_COMM_MAGIC 0x636f6d6du
struct cadre_comm {
    uint32_t magic;
    uint32_t context_id;
    int rank, size;
    int *world_ranks; /* world rank of each member; NULL for the world itself */
    uint32_t coll_seq; /* collectives started on this communicator */
    void *fast;        /* its shared-memory slot (coll/coll_fast.c), or NULL */
    void *gpu;         /* device-path state (gpu/gpu_internal.h), made on first use */
};
extern struct cadre_comm cadre__comm_world;
/* Releases what the collective layer keeps for the world (cadre_finalize). */
void cadre__coll_finalize(void);
/* Validates a user handle and returns the object; records an error naming fn
 * and returns NULL for NULL, freed or foreign handles. */
struct cadre_comm *cadre__comm_get(cadre_comm_t comm, const char *fn, int *status);

/* ---- device ------------------------------------------------------------- */
/* Binds the CUDA device for this process (CADRE_GPU or local_rank % count);
 * sets cadre__proc.device, -1 when CUDA is not built in or no GPU is visible. */
int cadre__device_bind(void);
int cadre__device_count(void); /* visible GPUs, 0 without CUDA */

#endif /* CADRE_RUNTIME_H */
