/*
 * coll.h - the collective layer's internal interface.
 *
 * A collective is a schedule: rounds of steps. The communication steps of a
 * round (sends and receives) are posted together; when all have completed,
 * its local steps (reductions, copies) run in order, and the next round
 * starts. Algorithms only build schedules; an executor runs them: the host
 * executor (coll_sched_run.c) with p2p requests, memcpy and the C reduction
 * kernels, in the calling thread for blocking calls and in the progress
 * engine for nonblocking ones. The GPU path runs the same schedules with a
 * device executor.
 */
#ifndef CADRE_COLL_H
#define CADRE_COLL_H

#include <stddef.h>
#include <stdint.h>

#include "p2p/p2p_engine.h"

enum coll_step_kind { CS_SEND = 1, CS_RECV, CS_REDUCE, CS_COPY, CS_CALL };

struct coll_sched;
struct coll_step;
/* A CS_CALL step: local work that is not a plain reduce or copy (the direct
 * algorithms' reads and writes of the peers' buffers). Returns a status; on
 * failure it has set cadre_last_error. */
typedef int (*coll_call_fn)(struct coll_sched *s, const struct coll_step *st);

struct coll_step {
    uint8_t kind;
    int peer;        /* CS_SEND / CS_RECV: rank in the communicator */
    void *dst;       /* CS_RECV buffer, CS_REDUCE / CS_COPY destination */
    const void *src; /* CS_SEND buffer, CS_REDUCE / CS_COPY source */
    const void *src2; /* CS_REDUCE: when set, dst = src2 op src (dst not read) */
    size_t n;        /* bytes for SEND/RECV/COPY, elements for REDUCE */
    uint8_t upto;    /* CS_RECV: a message up to n bytes (else exactly n) */
    coll_call_fn call; /* CS_CALL */
    void *arg;         /* CS_CALL */
};

struct coll_sched {
    struct cadre_comm *comm;
    const char *op_name;   /* "cadre_allreduce" */
    cadre_datatype_t dt;
    cadre_op_t op;
    size_t elsize;
    uint32_t ctx;          /* the communicator's collective context */
    uint64_t sig;          /* the call's signature (coll_sig.h), on every message */
    int32_t tag;           /* this collective's sequence number */
    size_t out_bytes;      /* what the call writes at this rank (0: unknown): from
                            * cadre__copy_out_min on, its copies and receives
                            * use streaming stores whatever their own size */

    struct coll_step *steps;
    int nsteps, cap;
    int *round_end; /* round r holds steps [round_end[r-1], round_end[r]) */
    int nrounds, rcap;

    /* scratch memory owned by the schedule, freed with it */
    void **tmp;
    int ntmp, tcap;

    /* execution */
    int round;       /* round running now */
    int posted;      /* its communication is posted */
    struct cadre_request **reqs;
    int nreqs, reqcap;
    int error;
    char errmsg[256];
    /* A receive whose message was longer or shorter than it: the counts
     * differ. The schedule runs on to its end (its partners' messages all
     * come; leaving early would leave them waiting), then fails with it. */
    int count_error;
    char count_msg[256];
    double waited_since, ask_after; /* the round's wait, for cadre__coll_sigq */
    /* after the last round: AVG division (scale_buf != NULL) */
    void *scale_buf;
    size_t scale_n;
    int scale_div;
    /* counted among the direct schedules alive (coll_direct.c, build) until
     * it finishes (sched_poll) or is freed */
    int direct_live;
    /* the call key whose window into this rank's buffers the schedule
     * opened (coll_direct_window.c), closed when it finishes or is freed */
    uint64_t direct_window;
};

/* ---- building ------------------------------------------------------------- */
int cadre__sched_init(struct coll_sched *s, struct cadre_comm *comm, const char *op_name,
                      cadre_datatype_t dt, cadre_op_t op);
/* A schedule of a subset of comm's ranks, on context ctx with tag `tag`
 * (never the collective sequence, which every rank of comm counts), without
 * signature: cadre_comm_create_group's exchange (coll_comm.c). */
int cadre__sched_init_on(struct coll_sched *s, struct cadre_comm *comm, const char *op_name,
                         uint32_t ctx, int32_t tag);
void cadre__sched_free(struct coll_sched *s);
/* A schedule counted alive (direct_live, coll_direct.c) finished or was
 * freed: it no longer counts, and the window it opened into this rank's
 * buffers is closed, once no peer's write is in flight. */
void cadre__direct_gone(struct coll_sched *s);
int cadre__sched_send(struct coll_sched *s, int peer, const void *buf, size_t bytes);
int cadre__sched_recv(struct coll_sched *s, int peer, void *buf, size_t bytes);
/* A receive of a message of at most `bytes` (cadre__sched_recv's must be
 * exactly `bytes`: a shorter one is a mismatch of counts). */
int cadre__sched_recv_upto(struct coll_sched *s, int peer, void *buf, size_t bytes);
int cadre__sched_reduce(struct coll_sched *s, void *dst, const void *src, size_t count);
/* dst = a op b, element by element (the same bits as copying a to dst and
 * reducing b into it, without the copy); dst is only written. */
int cadre__sched_reduce_to(struct coll_sched *s, void *dst, const void *a, const void *b,
                           size_t count);
int cadre__sched_copy(struct coll_sched *s, void *dst, const void *src, size_t bytes);
int cadre__sched_call(struct coll_sched *s, coll_call_fn fn, void *arg);
/* Ends the current round: later steps wait for everything before. */
int cadre__sched_barrier(struct coll_sched *s);
/* Scratch memory that lives as long as the schedule (NULL on ENOMEM). */
void *cadre__sched_alloc(struct coll_sched *s, size_t bytes);

/* ---- running ----------------------------------------------------------------- */
/* Runs to completion in the calling thread; returns the collective's status. */
int cadre__sched_run(struct coll_sched *s);
/* Starts in the background: *req completes when the schedule does. Both
 * take over what s holds (s is left empty). */
int cadre__sched_start(struct coll_sched *s, cadre_request_t *req);

/* ---- reductions ------------------------------------------------------------------- */
void cadre__coll_reduce(void *dst, const void *src, size_t n, cadre_datatype_t dt, cadre_op_t op);
/* dst = a op b (dst neither a nor b): the same bits as copying a to dst and
 * reducing b into it, in one pass over dst (coll_sched_run.c). */
void cadre__coll_reduce_to(void *dst, const void *a, const void *b, size_t n,
                           cadre_datatype_t dt, cadre_op_t op);
void cadre__coll_scale(void *buf, size_t n, cadre_datatype_t dt, int divisor);
float cadre__half_to_float(uint16_t h);
uint16_t cadre__float_to_half(float f);
float cadre__bf16_to_float(uint16_t b);
uint16_t cadre__float_to_bf16(float f);

/* ---- communicators ---------------------------------------------------------------- */
/* Contexts are multiples of 4 (coll_comm.c): context_id carries user p2p,
 * context_id | 1 the collectives, context_id | 2 the exchanges of
 * cadre_comm_create_group on comm (tag = the caller's). */
static inline uint32_t cadre__coll_ctx(const struct cadre_comm *c)
{
    return c->context_id | 1u;
}
static inline uint32_t cadre__group_ctx(const struct cadre_comm *c)
{
    return c->context_id | 2u;
}
/* Mismatch (coll_poison.c). */
/* Lock held: poisons c here and at every other rank, after this rank (whose
 * call number `tag` has signature mine) found that rank `other` called
 * theirs. */
void cadre__coll_poison_locked(struct cadre_comm *c, int32_t tag, int other, uint64_t theirs,
                               uint64_t mine);
void cadre__coll_poison(struct cadre_comm *c, int32_t tag, int other, uint64_t theirs,
                        uint64_t mine);
/* Rank `dead` of c failed: fail c's collectives here and at the live ranks. */
void cadre__coll_poison_peer_locked(struct cadre_comm *c, int dead);
/* Lock held: a communicator made while a member was already dead (its
 * making finished before the death was seen) is poisoned like the others. */
void cadre__coll_poison_dead_members(struct cadre_comm *c);
/* Lock held. A collective of c failed because rank `peer` of c is gone. A
 * peer that finalized (its BYE came) left because of a failure elsewhere,
 * and the news of it may not reach this rank before its BYE did: a member
 * that died without a BYE (its pidfd says so, noticed or not) is the one to
 * name, if there is one. Returns the rank of c to blame (peer -1: not known;
 * then -1 when no member died). */
int cadre__coll_blame(struct cadre_comm *c, int peer);
/* CADRE_ERR_MISMATCH (recorded, naming fn) when ctx is poisoned. */
int cadre__coll_poisoned(uint32_t ctx, const char *fn);
/* ... only when the call found at fault is known and is `tag` or before
 * (a call that completed is not failed for a later one). */
int cadre__coll_poisoned_by(uint32_t ctx, int32_t tag, const char *fn);
/* Whether ctx's poison names a call after `tag` (known and later): call
 * `tag` matched at every rank, and it completes. */
int cadre__coll_fault_after(uint32_t ctx, int32_t tag);
int cadre__coll_any_poisoned(void);

/* Calls of another signature whose messages no receive takes (two roots):
 * records this rank's call `tag` and judges what waits unmatched; returns
 * CADRE_ERR_MISMATCH (c poisoned) when a peer's message is of another call.
 * Takes the lock only when such a message came. */
int cadre__coll_sig_begin(struct cadre_comm *c, int32_t tag, uint64_t sig, const char *fn);
void cadre__coll_sig_record(struct cadre_comm *c, int32_t tag, uint64_t sig);
int cadre__coll_strays_locked(struct cadre_comm *c, int32_t tag, const char *fn);
/* Lock held: asks rank `peer` of c whether its call `tag` has signature sig
 * (it poisons c when not). */
void cadre__coll_sigq_send_locked(struct cadre_comm *c, int peer, int32_t tag, uint64_t sig);

/* cadre_init, before p2p starts: registers what p2p is to tell this layer
 * (cadre__p2p_set_upcalls; coll_poison.c). */
void cadre__coll_init(void);
/* Releases what the collective layer keeps for the world (cadre_finalize). */
void cadre__coll_finalize(void);
/* The p2p upcalls (coll_poison.c): a POISON or SIGQ message arrived, a
 * collective message no receive took was queued, world rank w failed. */
void cadre__coll_poison_in(int peer, const struct cadre_p2p_hdr *h);
void cadre__coll_sigq_in(int peer, const struct cadre_p2p_hdr *h);
void cadre__coll_stray_in(int peer, const struct cadre_p2p_hdr *h);
void cadre__coll_peer_died(int w);

/* cadre_allgather and cadre_allreduce run for another call of the library
 * (a communicator constructor's exchange): fn names that call in every
 * message and diagnosis, as the user made it, not the collective inside. */
int cadre__allgather_as(const char *fn, const void *sendbuf, void *recvbuf, size_t count,
                        cadre_datatype_t dt, cadre_comm_t comm);
int cadre__allreduce_as(const char *fn, const void *sendbuf, void *recvbuf, size_t count,
                        cadre_datatype_t dt, cadre_op_t op, cadre_comm_t comm);

/* The next collective sequence number on comm, used as the tag. */
int32_t cadre__coll_next_tag(struct cadre_comm *c);

#endif
