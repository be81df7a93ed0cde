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
#include <string.h>

#include "cadre.h"
#include "runtime_handle.h"

#define CADRE_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* ---- errors ------------------------------------------------------------- */
/* Records a detailed message as the calling thread's cadre_last_error() and
 * returns status, so call sites read: return cadre__error(CADRE_ERR_ARG, ...). */
int cadre__error(int status, const char *fmt, ...) CADRE_PRINTF(2, 3);
void cadre__clear_error(void);
/* The calling thread's last error was written to stderr already (as the
 * first line of a diagnosis block): a failing call's warning (CADRE_ERRORS)
 * leaves it out. cadre__error and cadre__clear_error forget it. */
void cadre__error_shown(void);
int cadre__error_was_shown(void);

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

/* ---- error modes (lifecycle/lifecycle_errors.c) -------------------------------------- */
/* A public call failed with rc (the wrappers of lifecycle/lifecycle_api.c): writes its
 * cadre_last_error() to stderr, aborts the job or does nothing, as the mode of
 * comm says (CADRE_COMM_NULL, or a handle that is not a communicator:
 * CADRE_COMM_WORLD's). Returns rc. */
int cadre__api_fail(int rc, cadre_comm_t comm, const char *fn) __attribute__((cold, noinline));
/* A communicator made from parent (dup, split, create) starts with its mode;
 * child may be CADRE_COMM_NULL. */
void cadre__api_inherit(cadre_comm_t parent, cadre_comm_t child);
/* The mode CADRE_ERRORS gives (read once; a bad value is warned about). */
int cadre__errors_default(void);

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
/* n lines, each with the head cadre__log gives it, in one write: a block
 * that the other ranks' lines on the same stderr do not cut (up to 16 KiB;
 * longer lines are cut). The caller checks cadre__log_enabled. */
void cadre__log_block(int level, int subsys, const char *const *lines, int n);
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
/* The tunables every rank must set alike, as compared: ranks that check
 * their collective calls and ranks that do not, or that force different
 * algorithms, or different device paths, cannot run one collective together
 * (a wrong "called ?" mismatch, or a wait until CADRE_TIMEOUT that names no
 * cause). Each rank publishes its own at cadre_init (p2p_engine.c). */
struct cadre_agree {
    int32_t check;      /* CADRE_CHECK != 0 */
    int32_t gpu_staged; /* CADRE_GPU_ALGO=staged */
    uint64_t algo;      /* CADRE_ALGO: a hash of its text */
};
void cadre__config_agree(struct cadre_agree *a);
/* CADRE_SUCCESS, or CADRE_ERR_ARG naming the first tunable that rank sets
 * otherwise. */
int cadre__config_agree_check(const struct cadre_agree *mine, const struct cadre_agree *theirs,
                              int rank);

/* ---- process state ------------------------------------------------------ */
struct cadre_proc_info {
    int rank, size;
    int local_rank, local_size;
    int node_id;
    int has_node_id; /* node_id came from the launcher (PMIX_NODEID) */
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
/* cadre_finalize: runs them, last registered first, and forgets them. */
void cadre__run_at_finalize(void);
/* The library's state, which cadre_init and cadre_finalize move on. */
enum { CADRE__ST_NEW, CADRE__ST_INIT, CADRE__ST_FINALIZED };
int cadre__lib_state(void);
void cadre__lib_set_state(int s);

/* ---- argument checks (runtime_args.c) ------------------------------------ */
/* "CADRE_INT32", "CADRE_SUM"; "an unknown datatype" / "an unknown op"
 * otherwise, for messages. */
const char *cadre__datatype_name(cadre_datatype_t dt);
const char *cadre__op_name(cadre_op_t op);

/* The most bytes one buffer may span, and the address it must end at or
 * below. On 64-bit Linux a user buffer lies below 2^56 wherever the kernel
 * maps it (2^47 on x86-64 with 4-level paging, 2^56 with 5-level; 2^52 on
 * aarch64 and ppc64; 2^56 on riscv64 with Sv57), so a larger count is a
 * mistake, not a buffer; elsewhere the C bound: an object has at most
 * PTRDIFF_MAX bytes and does not wrap around the address space. */
#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__) || defined(__powerpc64__) || \
                           (defined(__riscv) && __riscv_xlen == 64))
#define CADRE__ADDR_BITS 56
#define CADRE__MAX_BYTES ((size_t)1 << CADRE__ADDR_BITS)
#define CADRE__ADDR_END ((uintptr_t)1 << CADRE__ADDR_BITS)
#else
#define CADRE__ADDR_BITS 0
#define CADRE__MAX_BYTES ((size_t)PTRDIFF_MAX)
#define CADRE__ADDR_END UINTPTR_MAX
#endif

/* count elements of dt, mult times over (the ranks of a collective's
 * buffer; else 1), from buf: *bytes gets their size, or CADRE_ERR_ARG
 * names fn, `what` (the count: "count", "sendcount"), bufname and the
 * numbers when they overflow size_t, exceed CADRE__MAX_BYTES, or end past
 * CADRE__ADDR_END. */
int cadre__check_span(const char *fn, const char *what, size_t count, size_t mult,
                      cadre_datatype_t dt, const char *bufname, const void *buf, size_t *bytes);
/* The blocks of a v-collective's buffer: counts[i] elements from element
 * displs[i], i < n. *lo and *hi get the first and one past the last element
 * the nonempty blocks cover (0 and 0 when all are empty); CADRE_ERR_ARG
 * names the block (cname[i], dname[i]) that ends past the address space. */
int cadre__check_layout(const char *fn, const char *bufname, const void *buf, const char *cname,
                        const size_t *counts, const char *dname, const size_t *displs, int n,
                        cadre_datatype_t dt, size_t *lo, size_t *hi);
/* CADRE_IN_PLACE where the call takes a buffer of its own: CADRE_ERR_ARG
 * "fn: CADRE_IN_PLACE is not valid for name here" (every point-to-point
 * buffer, and the collectives' buffers that have no in-place meaning). The
 * success path is one compare; the message is written out of line. */
int cadre__in_place_refused(const char *fn, const char *name) __attribute__((cold, noinline));
static inline int cadre__check_not_in_place(const char *fn, const char *name, const void *buf)
{
    if (__builtin_expect(buf == CADRE_IN_PLACE, 0))
        return cadre__in_place_refused(fn, name);
    return CADRE_SUCCESS;
}
/* CADRE_ERR_ARG naming both ranges ("fn: sendbuf [a, b) overlaps recvbuf
 * [c, d); hint") when [sbuf, sbuf+sbytes) and [rbuf, rbuf+rbytes) share a
 * byte; empty ranges share none. The ranges passed the checks above. */
int cadre__check_overlap(const char *fn, const void *sbuf, size_t sbytes, const void *rbuf,
                         size_t rbytes, const char *hint);
/* "1000 elements (4000 bytes)" for bytes of elements of elsize bytes;
 * "4001 bytes" when they are not a whole number of elements. */
void cadre__elements_text(char *buf, size_t len, size_t bytes, size_t elsize);

/* ---- communicators ------------------------------------------------------ */
#define CADRE_COMM_MAGIC 0x636f6d6du
#define CADRE_SIG_HIST 32
struct cadre_comm {
    uint32_t magic;
    uint32_t context_id;
    int rank, size;
    int *world_ranks; /* world rank of each member; NULL for the world itself */
    uint32_t coll_seq; /* collectives started on this communicator */
    void *fast;        /* its shared-memory slot (coll/coll_fast.c), or NULL */
    void *gpu;         /* device-path state (device/device_mem.h), made on first use */
    void *hier;        /* its members by host (coll/coll_hier.h), made on first use */
    int errors;        /* error mode + 1 (cadre_comm_set_errors); 0: CADRE_COMM_WORLD's */
    /* The signatures of its last CADRE_SIG_HIST collectives here, by tag
     * (tag + 1 in sig_tag; 0: none), to judge the collective messages that no
     * receive takes; stray_check: such a message came and awaits judgment
     * (coll/coll_poison.c). */
    uint32_t sig_tag[CADRE_SIG_HIST];
    uint64_t sig_hist[CADRE_SIG_HIST];
    int stray_check;
    cadre_comm_t handle; /* what the user holds (runtime_handle.h); CADRE_COMM_WORLD for the world */
    uint32_t hidx;       /* its slot in cadre__comm_handles */
    struct cadre_hslot *hslot;
};

/* The world rank of member `rank` of c. */
static inline int cadre__world_rank(const struct cadre_comm *c, int rank)
{
    return c->world_ranks ? c->world_ranks[rank] : rank;
}
/* memcpy for buffers that do not overlap, without the slow case of the
 * string instructions (runtime_copy.c). */
void cadre__copy_big(void *dst, const void *src, size_t n);
static inline void cadre__copy(void *dst, const void *src, size_t n)
{
    if (n >= 2048)
        cadre__copy_big(dst, src, n);
    else if (n)
        memcpy(dst, src, n);
}

/* A copy with streaming stores: the destination's lines are not read
 * first (a plain copy reads each one before writing it), so a copy to
 * memory costs one write instead of a read and a write. On the development
 * machine: 8 MiB in 0.36 ms against 1.0 ms for memcpy, two cores copying at
 * once. Ends with a store fence: what follows (a completion flag) is seen
 * after the data. For destinations nobody reads soon. */
void cadre__copy_nt(void *dst, const void *src, size_t n);
/* Where a message or a collective's block lands in its final place: from
 * cadre__copy_out_min bytes on (the whole transfer, not one fragment), the
 * destination is larger than what the caches would keep for the reader, and
 * the streaming copy wins; below, the plain one. */
extern size_t cadre__copy_out_min;
static inline void cadre__copy_out(void *dst, const void *src, size_t n, size_t total)
{
    if (total >= cadre__copy_out_min)
        cadre__copy_nt(dst, src, n);
    else
        cadre__copy(dst, src, n);
}

extern struct cadre_comm cadre__comm_world;

/* The communicators' handle table (runtime_comm.c). */
extern struct cadre_htab cadre__comm_handles;
/* Gives c a handle (c->handle), or CADRE_ERR_NOMEM. */
int cadre__comm_handle_new(struct cadre_comm *c);
/* Ends c's handle: copies of it are stale from now on. */
void cadre__comm_handle_end(struct cadre_comm *c);
/* What the user holds for c, e.g. to call a public function on it. */
static inline cadre_comm_t cadre__comm_handle(const struct cadre_comm *c)
{
    return c->handle;
}
/* The error of cadre__comm_get; returns NULL. */
struct cadre_comm *cadre__comm_bad(cadre_comm_t comm, const char *fn, int *status);
/* Validates a user's handle and returns the object, without dereferencing
 * a bad value; for CADRE_COMM_NULL or a freed communicator's handle records
 * an error naming fn and returns NULL with *status CADRE_ERR_STATE, and for
 * a value that is no communicator handle, CADRE_ERR_ARG. */
static inline struct cadre_comm *cadre__comm_get(cadre_comm_t comm, const char *fn, int *status)
{
    if (comm == CADRE_COMM_WORLD && cadre__comm_world.magic == CADRE_COMM_MAGIC)
        return &cadre__comm_world;
    struct cadre_comm *c = cadre__h_find(&cadre__comm_handles, (uintptr_t)comm, CADRE_HKIND_COMM);
    return c ? c : cadre__comm_bad(comm, fn, status);
}

/* ---- operation state (runtime_state.c) ------------------------------------ */
/* What this process is doing in cadre now, for the diagnosis of a timeout
 * (which peers a stuck operation waits for, and what they are doing) and for
 * cadrerun's report on --timeout. Written by the thread in a blocking call or
 * a wait, read by whichever thread answers a peer's or the launcher's
 * question: a seqlock of plain stores, no lock and no system call, since a
 * small collective costs well under a microsecond. One record per process: a
 * program that waits in several threads at once shows the latest entry. */
struct cadre_op_state {
    uint32_t gen;         /* odd while the writer is inside (accessed with __atomic builtins) */
    const char *op;       /* current op (in_cadre) or the last one; never NULL once set */
    const char *via;      /* "cadre_wait", "cadre_waitall", ... when waiting on the nonblocking op `op`; else NULL */
    uint32_t ctx;         /* context id of op's communicator */
    uint32_t seq;         /* collectives: its number on that communicator (from 1); p2p: 0 */
    int32_t peer, tag;    /* p2p: peer's rank in the communicator (or CADRE_ANY_SOURCE), tag */
    int32_t in_cadre;
    int64_t t_ns;         /* in_cadre: when it began (0: not stamped yet); else when it ended */
};
extern struct cadre_op_state cadre__op_state;

#define CADRE__RLX(p, v) __atomic_store_n(p, v, __ATOMIC_RELAXED)
/* Enters a blocking operation. The start time is stamped lazily (by the
 * first clock check of the wait), so entering costs stores only. */
static inline void cadre__state_enter(const char *op, const char *via, uint32_t ctx, uint32_t seq,
                                      int peer, int tag)
{
    struct cadre_op_state *s = &cadre__op_state;
    uint32_t g = __atomic_load_n(&s->gen, __ATOMIC_RELAXED);
    __atomic_store_n(&s->gen, g + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    CADRE__RLX(&s->op, op);
    CADRE__RLX(&s->via, via);
    CADRE__RLX(&s->ctx, ctx);
    CADRE__RLX(&s->seq, seq);
    CADRE__RLX(&s->peer, peer);
    CADRE__RLX(&s->tag, tag);
    CADRE__RLX(&s->in_cadre, 1);
    __atomic_store_n(&s->t_ns, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->gen, g + 2, __ATOMIC_RELEASE);
}
/* Leaves it (plain stores; the progress thread stamps the time). */
void cadre__state_leave(void);
/* Stamps the start of the current operation if not yet done; now in the
 * seconds of cadre__now (CLOCK_MONOTONIC). */
void cadre__state_stamp(double now);

/* A consistent copy of a state record, local or received from a peer. */
struct cadre_op_snapshot {
    int valid;        /* 0: could not be read / no answer */
    int in_cadre;
    char op[32];      /* "" when the process never was in cadre */
    char via[24];
    uint32_t ctx, seq;
    int32_t peer, tag;
    double secs;      /* in the op so far, or out of cadre so far; < 0 unknown */
};
void cadre__state_snapshot(struct cadre_op_snapshot *out);
/* "WORLD" or "comm ctx 4". */
void cadre__state_comm_name(uint32_t ctx, char *buf, size_t len);
/* "in cadre_allreduce #17 on WORLD for 12.3 s", "not in cadre for 2.1 s
 * (last: cadre_barrier #3 on WORLD)". */
void cadre__state_describe(const struct cadre_op_snapshot *s, char *buf, size_t len);
/* The same with the time given as a span, "for 2.0-3.1 s", for ranks named
 * together (lo == hi: one time). */
void cadre__state_describe_span(const struct cadre_op_snapshot *s, double lo, double hi, char *buf,
                                size_t len);
/* Writes "cadre: rank R: <description>" to stderr (cadrerun --timeout). */
void cadre__state_report(void);

/* The PMIx event codes of cadrerun's state report: the launcher notifies
 * the job with QUERY; each rank writes its line and answers with DONE.
 * User-defined codes sit below PMIX_EXTERNAL_ERR_BASE (-3000). */
#define CADRE_PMIX_EVENT_STATE_QUERY (-3000 - 0x4341)
#define CADRE_PMIX_EVENT_STATE_DONE (-3000 - 0x4342)

/* Communicators by context id, so that a peer's question about one can be
 * answered from any thread. */
void cadre__comm_register(struct cadre_comm *c);
void cadre__comm_unregister(struct cadre_comm *c);
/* This process's collective count on the communicator with context id ctx,
 * also once it was freed (its final count); returns 0 when it never had
 * such a communicator. */
int cadre__comm_coll_seq(uint32_t ctx, uint32_t *seq);
/* Calls fn on every registered communicator, under the registry's lock (take
 * the engine lock, if at all, before it: answer_query holds it when it asks). */
void cadre__comm_foreach(void (*fn)(const struct cadre_comm *c, void *arg), void *arg);

#endif /* CADRE_RUNTIME_H */
