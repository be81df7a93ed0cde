/*
 * device_direct_comm.h - what the two halves of the direct one-node
 * collectives share (device_direct_call.c: a call, and the design;
 * device_direct_comm.c: a communicator's workspace): the flag pages, the
 * workspace, and the small failure helpers both use. CUDA builds only.
 */
#ifndef CADRE_DEVICE_DIRECT_COMM_H
#define CADRE_DEVICE_DIRECT_COMM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "device/device_direct.h"
#include "device/device_op.h"

#define RING 8
#define AHEAD 0x40000000u /* a flag set this far past a call releases every wait for it */

struct gd_call {
    _Atomic uint32_t seq; /* stored last: the slot holds call seq */
    int32_t mode, dt, op;
    uint64_t count;
    struct gpu_ipc_desc in, out;
};

struct gd_page {
    _Atomic uint32_t ready; /* written by the rank's stream */
    char pad0[60];
    _Atomic uint32_t done; /* written by a leader's stream */
    char pad1[60];
    _Atomic uint32_t taken; /* written by a leader's host */
    char pad2[60];
    _Atomic uint32_t failed; /* the first call that failed here (0 none) */
    _Atomic int32_t cause;   /* the rank whose failure it was */
    char pad3[56];
    struct gd_call ring[RING];
};
_Static_assert(sizeof(struct gd_page) <= 4096, "a rank's page is one page");
_Static_assert(offsetof(struct gd_page, ready) == 0 && offsetof(struct gd_page, done) == 64,
               "the device addresses of the flags (OFF_*)");

struct gpu_direct {
    struct cadre_comm *comm;
    int state; /* 1 usable, -1 not for this communicator */
    int n, me, ngpu, mygpu, lead;
    int world[GPU_DIRECT_MAXR];
    int gpu_of[GPU_DIRECT_MAXR];    /* GPU index (0..ngpu-1) of each rank */
    int leader[GPU_DIRECT_MAXR];    /* comm rank of each GPU's leader */
    struct gd_page *page[GPU_DIRECT_MAXR];
    char *dev[GPU_DIRECT_MAXR];     /* each page's device address */
    uint32_t seq;
    int blocks_max;
    long long host_done_max;        /* CADRE_GPU_HOST_DONE, read at setup */
    int gate_id;                    /* its gate, or -1 */
    unsigned int *gate;             /* device word: the leader's `failed`, copied before each
                                       kernel (a read of host memory per block costs about
                                       1 us, one block after another) */
    cudaEvent_t last;               /* the end of the last direct call */
    int have_last;
    pthread_mutex_t lock;
};

static inline int cyc_ge(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b) >= 0;
}

/* ---- failures ----------------------------------------------------------------------- */
/* Rank q's flags far past call s: no stream waits for q any more. */
static inline void release(struct gpu_direct *d, int q, uint32_t s)
{
    struct gd_page *p = d->page[q];
    atomic_store(&p->ready, s + AHEAD);
    atomic_store(&p->done, s + AHEAD);
    atomic_store(&p->taken, s + AHEAD);
}

/* Records in q's page that call s failed there because of rank `cause`. */
static inline void mark_failed(struct gpu_direct *d, int q, uint32_t s, int cause)
{
    uint32_t zero = 0;
    if (atomic_compare_exchange_strong(&d->page[q]->failed, &zero, s))
        atomic_store(&d->page[q]->cause, cause);
    release(d, q, s);
}

/* The rank whose failure broke call s or an earlier one (the cause recorded
 * in the lowest page that has one), or -1. */
static inline int failed_rank(const struct gpu_direct *d, uint32_t s, uint32_t *at)
{
    for (int q = 0; q < d->n; q++) {
        uint32_t f = atomic_load(&d->page[q]->failed);
        if (f && cyc_ge(s, f)) {
            *at = f;
            int c = atomic_load(&d->page[q]->cause);
            return c >= 0 && c < d->n ? c : q;
        }
    }
    return -1;
}

/* The lowest member of the communicator that died, or -1. */
static inline int dead_rank(const struct gpu_direct *d)
{
    eng_lock();
    int q = cadre__p2p_comm_dead_member(d->comm);
    eng_unlock();
    return q;
}

static inline double timeout_s(void)
{
    return cadre__config_dbl(CADRE_CFG_TIMEOUT); /* more than 0: cadre_init checked it */
}

/* ---- the proxy's watch (device_direct_comm.c) ------------------------------------------- */
struct watch {
    struct gpu_direct *d;
    uint32_t s;
    double t0, next;
};

/* op->watch of a call's op (op->watch_arg: its struct watch). */
int cadre__gpu_direct_watch(struct gpu_op *op, int done);
/* The communicator's usable state (set up on first use), or NULL: the call
 * is not for the direct path. */
struct gpu_direct *cadre__gpu_direct_usable(const char *fn, struct cadre_comm *comm, int *rc);

#endif
