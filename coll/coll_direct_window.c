/* The windows of the direct algorithms (coll_direct.c): where a rank writes
 * into a peer's buffers with process_vm_writev (the allreduce's slices,
 * the two-rank bcast's root), it does so only while the peer is still in
 * the call. A rank whose call fails (a wait that gave up,
 * a peer gone) returns to its caller, who may reuse the buffers at once;
 * a late peer's write landing there afterwards would change memory the
 * library no longer owns.
 *
 * Each process's flags in its shm segment (struct direct_flags) hold
 * `open`, the key of the call whose buffers its peers may write into (0:
 * none), and `writing`, the call key | 1 + the world rank of the process it
 * writes into now (0: none). At build, before round 1 sends its addresses,
 * a schedule that overlaps no other direct schedule of its process opens
 * its window (one at a time per process: build in coll_direct.c); it closes
 * it when it finishes or is freed. A writer stores `writing` before it
 * looks at the target's `open`; the target stores `open` = 0 before it
 * looks at the writer's `writing` (both sequentially consistent): either
 * the writer sees the window closed and writes nothing, or the target sees
 * the write and waits for it to end. On success no rank waits here: a
 * peer's round 3 comes after its last write. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <time.h>

#include "coll_direct.h"

uint64_t cadre__direct_key(const struct coll_sched *s)
{
    /* Both halves are odd multiples, one-to-one on 32 bits: calls of one
     * communicator, and calls of the same number on two communicators,
     * never share a key. */
    uint32_t k = (uint32_t)s->tag * 0x9e3779b1u ^ (uint32_t)s->ctx * 0x85ebca77u;
    return (uint64_t)k << 32;
}

static struct direct_flags *flags_of(const struct coll_sched *s, int rank)
{
    return cadre__direct_flags(cadre__world_rank(s->comm, rank));
}

void cadre__direct_window_open(struct coll_sched *s)
{
    for (int q = 0; q < s->comm->size; q++)
        if (!flags_of(s, q))
            return;
    uint64_t key = cadre__direct_key(s);
    if (!key)
        return; /* 0 means no window: this call writes into nobody */
    s->direct_window = key;
    atomic_store(&flags_of(s, s->comm->rank)->open, key);
}

/* Waits while rank q writes into this rank's memory under `busy` (the call
 * key | 1 + this rank's world rank): until the write ends or q is gone,
 * with a warning after CADRE_TIMEOUT. */
static void wait_write(struct coll_sched *s, int q, uint64_t busy)
{
    int w = cadre__world_rank(s->comm, q);
    struct direct_flags *f = cadre__direct_flags(w);
    const struct cadre_peer *p = &cadre__eng.peers[w];
    double since = cadre__now();
    int said = 0;
    while (atomic_load_explicit(&f->writing, memory_order_acquire) == busy) {
        if (p->state == PEER_DEAD || (kill(p->pid, 0) != 0 && errno == ESRCH))
            return;
        /* A peer stopped (SIGSTOP, a debugger) in the middle of a write
         * would finish it when it goes on: wait, and say why. */
        if (!said && cadre__now() - since > cadre__eng.timeout) {
            said = 1;
            CADRE_WARN(COLL, "%s: rank %d (pid %d) has been writing into this rank's buffers "
                       "for %g s (CADRE_TIMEOUT) after this rank left the call; waiting for it "
                       "to finish or exit", s->op_name, q, (int)p->pid, cadre__eng.timeout);
        }
        struct timespec nap = {0, 50000};
        nanosleep(&nap, NULL);
    }
}

void cadre__direct_window_close(struct coll_sched *s)
{
    uint64_t key = s->direct_window;
    s->direct_window = 0;
    int me = s->comm->rank;
    uint64_t k = key;
    atomic_compare_exchange_strong(&flags_of(s, me)->open, &k, 0);
    uint64_t busy = key | (uint32_t)(cadre__world_rank(s->comm, me) + 1);
    for (int q = 0; q < s->comm->size; q++)
        if (q != me && atomic_load(&flags_of(s, q)->writing) == busy)
            wait_write(s, q, busy);
}

int cadre__direct_windows(const struct coll_sched *s, const struct direct *d)
{
    for (int q = 0; q < s->comm->size; q++)
        if (!(d->peer[q].busy & DIRECT_WINDOW))
            return 0;
    return 1;
}

int cadre__direct_write(struct coll_sched *s, int rank, const void *local, uint64_t remote,
                        size_t n)
{
    uint64_t key = s->direct_window;
    int w = cadre__world_rank(s->comm, rank);
    struct direct_flags *mine = flags_of(s, s->comm->rank);
    atomic_store(&mine->writing, key | (uint32_t)(w + 1));
    int rc;
    if (atomic_load(&cadre__direct_flags(w)->open) != key)
        rc = cadre__error(CADRE_ERR_PEER, "%s: rank %d left the call before its buffer was written",
                          s->op_name, rank);
    else
        rc = cadre__direct_cma(s, NULL, rank, (void *)local, remote, n, 1);
    atomic_store_explicit(&mine->writing, 0, memory_order_release);
    return rc;
}

int cadre__direct_peer_left(const struct coll_sched *s, const struct direct *d, int q)
{
    return (d->peer[q].busy & DIRECT_WINDOW) &&
           atomic_load(&flags_of(s, q)->open) != cadre__direct_key(s);
}

int cadre__direct_peers_stayed(struct coll_sched *s, const struct direct *d)
{
    atomic_thread_fence(memory_order_seq_cst); /* every read of round 2 before the looks */
    for (int q = 0; q < s->comm->size; q++) {
        if (q != s->comm->rank && cadre__direct_peer_left(s, d, q))
            return cadre__error(CADRE_ERR_PEER, "%s: rank %d left the call while this rank read "
                                "its buffers (its call failed); this call's result is not valid",
                                s->op_name, q);
    }
    return CADRE_SUCCESS;
}
