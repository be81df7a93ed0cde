/*
 * p2p_request.h - the engine's requests (p2p_request.c): the object, the
 * handles users hold, the waits and completion calls (p2p_api.c,
 * p2p_wait.c), and the diagnosis of a wait that times out or is stuck
 * (p2p_diag.c, p2p_diag_text.c, p2p_describe.c). Included by p2p_engine.h.
 */
#ifndef CADRE_P2P_REQUEST_H
#define CADRE_P2P_REQUEST_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "p2p.h"

/* ---- requests ------------------------------------------------------------ */
enum { REQ_SEND = 1, REQ_RECV = 2, REQ_GENERIC = 3 };
/* Protocol states of a request that is not done. */
enum {
    RS_NEW,       /* not started (queued behind other output)              */
    RS_POSTED,    /* recv: in the posted queue, unmatched                  */
    RS_WAIT_CTS,  /* send: RTS out, waiting for the receiver               */
    RS_STREAM,    /* send: pushing DATA fragments                          */
    RS_WAIT_DATA, /* recv: CTS out, DATA arriving                          */
    RS_DONE
};

#define CADRE_REQ_MAGIC 0x72657175u

struct cadre_request {
    uint32_t magic;
    uint8_t kind;
    uint8_t state;
    uint8_t user;      /* handed to the user (nonblocking call): counts as outstanding */
    uint8_t abandoned; /* the user gave up on it (timeout): the engine frees it when done */
    uint8_t pt_wants;  /* counted in cadre__eng.pt_wanted until done */
    uint8_t nt;        /* recv: land the data with streaming stores (cadre__copy_out) */
    uint8_t cma;       /* single copy (p2p_cma.c): send: offered, wrote; recv: read, granted */
    uint8_t stuck_said; /* its wait warned of CADRE_STUCK_WARN */
    uint8_t dt;        /* send: the header's dt (the datatype + 1; 0: the library's own) */
    uint8_t dev_mem;   /* send: buf is device memory (cadre__p2p_isend_device) */
    /* send: DATA messages a transport still reads (CADRE_P2P_LATER); the
     * request completes when the last is reported (cadre__p2p_sent), with
     * `error` holding the first failure until then (errmsg its text). In
     * the padding before `done`. */
    uint16_t later;
    _Atomic int done;
    int error;         /* status once done */
    cadre_status_t status;
    uint64_t id; /* wire name for RTS/CTS/DATA; 0 when not registered */
    double last_activity;
    const char *op; /* "cadre_recv", ... for messages */

    /* matching */
    struct cadre_comm *comm;
    uint32_t ctx;
    int peer;       /* send: dst comm rank; recv: src comm rank or CADRE_ANY_SOURCE */
    int peer_world; /* world rank of the peer, -1 for ANY_SOURCE until matched */
    int tag;
    size_t elsize;

    /* data */
    char *buf;
    size_t bytes;      /* send: message length; recv: capacity                 */
    uint64_t remote;   /* send: receiver's rreq after CTS; recv: sender's sreq */
    size_t xfer;       /* bytes that will move (receiver's min(len, capacity))  */
    size_t moved;      /* bytes moved so far                                    */
    size_t msg_len;    /* recv: the sender's full length (truncation)          */
    uint64_t sig;      /* collectives: the call's signature (0: unchecked)     */
    uint64_t peer_sig; /* recv failed with CADRE_ERR_MISMATCH: the sender's    */

    /* generic requests (collectives): progressed by the engine */
    int (*poll)(struct cadre_request *req); /* returns events; completes via cadre__req_complete */
    void (*release)(struct cadre_request *req);
    /* Abandons what the request has in flight (its wait timed out); lock held. */
    void (*cancel)(struct cadre_request *req);
    void *priv;

    /* recv: a message pulled whole by its transport lands at pull_to
     * (memory kind pull_mem) instead of buf, not before pull_go is
     * PULL_GATE_OPEN; it is PULL_GATE_LANDED once the data went there
     * (cadre__p2p_recv_redirect, p2p_pull.c). */
    char *pull_to;
    int pull_mem;
    _Atomic int pull_go;
    struct cadre_request *next, *prev; /* posted queue or generic list */
    uintptr_t handle; /* the user's handle while open (runtime_handle.h), else 0 */
    /* last, so a new request need not clear them: detail for cadre_last_error */
    char errmsg[256];
    /* The request's slot in cadre__req_handles, bound the first time the
     * object is handed to a user and kept while it is cached for reuse;
     * hslot NULL: none yet. */
    struct cadre_hslot *hslot;
    uint32_t hidx;
};

/* Creates a request (zeroed, magic set). NULL on ENOMEM. */
struct cadre_request *cadre__req_new(int kind, const char *op);
/* Frees it; its handle, if it has one, ends (copies are stale). */
void cadre__req_free(struct cadre_request *req);

/* ---- request handles: what users hold (runtime/runtime_handle.h) ------------- */
extern struct cadre_htab cadre__req_handles;
int cadre__req_handle_slow(struct cadre_request *r, cadre_request_t *out);
/* Hands r to the user: writes a new handle for it to *out (r's existing
 * one if it has one). CADRE_ERR_NOMEM only when the table cannot grow. */
static inline int cadre__req_handle(struct cadre_request *r, cadre_request_t *out)
{
    if (r->handle) {
        *out = (cadre_request_t)r->handle;
        return CADRE_SUCCESS;
    }
    if (__builtin_expect(!r->hslot, 0))
        return cadre__req_handle_slow(r, out);
    r->handle = cadre__h_open(r->hslot, CADRE_HKIND_REQ, r->hidx);
    *out = (cadre_request_t)r->handle;
    return CADRE_SUCCESS;
}
/* Ends r's handle, if open: the user no longer holds r (it is waited on,
 * freed, or left to the engine), and every copy is stale from now on. */
static inline void cadre__req_handle_end(struct cadre_request *r)
{
    if (r->handle) {
        cadre__h_close(r->hslot);
        r->handle = 0;
    }
}
/* The request of live handle h, or NULL: for NULL, a completed request's
 * stale handle, or a value that is no request handle. Records nothing. */
static inline struct cadre_request *cadre__req_find(cadre_request_t h)
{
    return cadre__h_find(&cadre__req_handles, (uintptr_t)h, CADRE_HKIND_REQ);
}
/* Validates a user's request handle `arg` (named in the message, "req",
 * "reqs[3]") of fn: the request, or NULL with the error recorded in
 * *status: CADRE_ERR_STATE for CADRE_REQUEST_NULL or a stale handle (the
 * request was completed and freed), CADRE_ERR_ARG for a value that is no
 * request handle. NULL is an error here: callers that accept it test it
 * first. */
struct cadre_request *cadre__req_get(cadre_request_t h, const char *fn, const char *arg,
                                     int *status);
/* Frees the calling thread's cache of freed requests (done by itself when
 * the thread ends; the progress thread calls it before it returns). */
void cadre__req_drop_spare(void);
/* Takes a generic request off the engine's list (lock held). */
void cadre__req_unlink_generic(struct cadre_request *r);
/* Gives the request a wire id so RTS/CTS/DATA can name it. */
int cadre__req_register(struct cadre_request *req);
/* Looks up a request by wire id; NULL when unknown (stale or forged). */
struct cadre_request *cadre__req_lookup(uint64_t id);
/* Marks done with status `error` (and message, may be NULL); engine lock held. */
void cadre__req_complete(struct cadre_request *req, int error, const char *fmt, ...)
    CADRE_PRINTF(3, 4);
/* cadre__req_complete(req, CADRE_SUCCESS, NULL) without the variable
 * arguments' cost: the path of every message. */
void cadre__req_complete_ok(struct cadre_request *req);
/* Waits until done or until `deadline` (monotonic seconds; 0 = none, then
 * CADRE_TIMEOUT of no progress applies). Returns CADRE_SUCCESS when done
 * (the request's own status is req->error), CADRE_ERR_TIMEOUT otherwise. */
int cadre__req_wait(struct cadre_request *req, double deadline, int no_progress_timeout);
/* A wait for something other than one request (cadre_waitany, cadre_probe),
 * with cadre__req_wait's polls, naps and peer checks: ready(arg) says, lock
 * NOT held, whether it is over (called after every progress pass, so keep
 * it cheap); activity(arg), the last time what it waits for moved (the
 * CADRE_TIMEOUT rule); peer_world, the world rank it waits for, -1 for
 * any (oversubscribed polls). */
struct cadre_p2p_wait {
    int (*ready)(void *arg);
    double (*activity)(void *arg);
    void *arg;
    int peer_world;
    /* The CADRE_STUCK_WARN warning of the wait (secs without activity),
     * once per wait, lock not held; NULL: none. */
    void (*stuck)(void *arg, double secs);
};
int cadre__p2p_wait_until(const struct cadre_p2p_wait *w, double deadline,
                          int no_progress_timeout);

/* ---- the completion calls (p2p_api.c; p2p_wait.c has those over arrays) ---- */
/* The request of user handle h of fn (NULL for CADRE_REQUEST_NULL), or the
 * error of a stale or bad handle, whose message names reqs[idx] (idx >= 0)
 * or req. */
int cadre__p2p_req_of(const char *fn, cadre_request_t h, int idx, struct cadre_request **out);
/* cadre_wait's work on r, the request of *req (NULL: *req is
 * CADRE_REQUEST_NULL, an empty status): ends the handle, waits (device
 * requests: as cadre_wait), fills *status, frees r, returns its outcome. */
int cadre__p2p_wait_found(const char *fn, cadre_request_t *req, struct cadre_request *r,
                          cadre_status_t *status);
/* cadre_waitall's loop over handles already checked: every one completed,
 * waited for in the order of the array; the first failure's status, its
 * message naming reqs[i]. */
int cadre__p2p_complete_all(const char *fn, int n, cadre_request_t reqs[],
                            cadre_status_t statuses[]);
/* The message of reqs[i]'s failure, just recorded, as fn reports it:
 * "fn: reqs[i]: what failed". */
void cadre__p2p_name_failure(const char *fn, int i, char *msg, size_t len);
/* The operation state peers see while this thread waits on r in fn. */
void cadre__p2p_enter(struct cadre_request *r, const char *fn);

/* ---- the diagnosis of a wait ------------------------------------------------ */
/* The CADRE_TIMEOUT failure of a wait: records the diagnosis, abandons the
 * request, returns CADRE_ERR_TIMEOUT. Lock NOT held. */
int cadre__p2p_timed_out(struct cadre_request *req, const char *fn);
/* A wait that made no progress for CADRE_STUCK_WARN seconds (secs so far):
 * the warning, once; the wait goes on. Lock NOT held. */
void cadre__p2p_stuck(struct cadre_request *req, double secs);
/* A timed-out operation's diagnosis (p2p_diag_text.c), lock NOT held: asks
 * the ranks r waits for what they are doing (at most about 1 s), writes one
 * block to stderr whose first line names the cause, and returns that line
 * (and the further states) as the summary for cadre_last_error in sum, and
 * whether the block was written. `what` names the operation, `stage` says
 * what it waited for (p2p; may be NULL). */
int cadre__p2p_diagnose(struct cadre_request *r, const char *fn, const char *what,
                        const char *stage, char *sum, size_t sumlen);
/* The same block as a warning of a wait stuck for secs seconds
 * (CADRE_STUCK_WARN), with nothing recorded. */
void cadre__p2p_diag_stuck(struct cadre_request *r, const char *fn, const char *what,
                           const char *stage, double secs);
/* The warning for collective number seq on c, which runs without a request
 * (the shared-memory collectives). */
void cadre__p2p_coll_stuck(struct cadre_comm *c, const char *fn, uint32_t seq, double secs);
/* The same for collective number seq on c that runs without a request (the
 * shared-memory collectives): records the error, returns CADRE_ERR_TIMEOUT.
 * q and what say what it waited for ("rank 2 has not joined it"). */
int cadre__p2p_coll_timed_out(struct cadre_comm *c, const char *fn, uint32_t seq, int q,
                              const char *what);
/* STATE_Q and STATE_R from world rank `peer`; lock held. */
void cadre__p2p_state_incoming(int peer, const struct cadre_p2p_hdr *h);
/* At finalize, lock held: leave each peer this process has sent to the final
 * collective count of every communicator they share (p2p_diag.c). */
void cadre__p2p_send_finals(void);
/* The same for one communicator about to be freed (lock held): a member
 * whose collective on it times out after this rank gave up, freed it and
 * left must still count this rank as arrived. */
void cadre__p2p_send_final(const struct cadre_comm *c);
void cadre__p2p_diag_cleanup(void);
/* p2p_describe.c. What request r is, for a message of fn: "cadre_isend to
 * rank 1 (tag 5, 16777216 bytes)", "cadre_recv from any rank (tag 3)",
 * "cadre_iallreduce #4 on WORLD (4 ranks)" ("#4 on ..." when fn is r's own
 * call); " on <communicator>" follows a message's other than WORLD. With
 * CADRE_WHAT_FULL, a receive also says its capacity ("up to 40 bytes") and
 * "any tag", and the communicator is always named; with CADRE_WHAT_COMM
 * only the latter (the diagnoses of a wait). */
#define CADRE_WHAT_FULL 0x1
#define CADRE_WHAT_COMM 0x2
void cadre__p2p_req_what(const struct cadre_request *r, const char *fn, int flags, char *what,
                         size_t len);
/* Where a message request that is not done stands ("no matching message
 * arrived", "the receiver never posted a matching receive", ...); NULL for
 * a collective's. */
const char *cadre__p2p_req_stage(const struct cadre_request *r);
/* At finalize, after the output drained: one WARN block naming the requests
 * the application still holds that are not done (or failed unheard), and
 * the messages of its communicators that no receive took; nothing when
 * there are none. Takes the lock. */
void cadre__p2p_report_leftovers(void);
void cadre__req_foreach(void (*fn)(struct cadre_request *, void *), void *arg);

#endif
