/*
 * The shared-memory slots of coll_fast.c given to communicators: where the
 * slot area and the direct algorithms' areas lie in a process's segment,
 * which slots are free, reserved for a communicator being made (coll_ctx.c),
 * in use, or retired until their last readers are done; a communicator's
 * view of its slot, set up and released.
 */
#include <pthread.h>
#include <stdlib.h>

#include "coll_fast_impl.h"

#define FLAGS_OFF ((size_t)FAST_NSLOTS * sizeof(struct fast_slot))
_Static_assert(FLAGS_OFF + sizeof(struct direct_flags) <= CADRE_SHM_COLL_BYTES,
               "the fast slots and the direct flags must fit the shm segment's collective area");

#define RING_OFF ((FLAGS_OFF + sizeof(struct direct_flags) + 4095) & ~(size_t)4095)
_Static_assert(FLAGS_OFF + sizeof(struct direct_flags) <= RING_OFF &&
                   RING_OFF + DIRECT_RING_BYTES <= CADRE_SHM_COLL_BYTES,
               "the direct ring must fit the shm segment's collective area");

unsigned char *cadre__direct_ring(int w)
{
    unsigned char *area = cadre__shm_coll_area(w);
    return area ? area + RING_OFF : NULL;
}

struct direct_flags *cadre__direct_flags(int w)
{
    unsigned char *area = cadre__shm_coll_area(w);
    return area ? (struct direct_flags *)(area + FLAGS_OFF) : NULL;
}

/* Slots this process has given to communicators or reserved for one being
 * made; threads may make communicators at once (coll_comm.c), so the mask
 * is read and changed under slot_lock. */
static uint64_t used_mask;
static pthread_mutex_t slot_lock = PTHREAD_MUTEX_INITIALIZER;
static int world_tried;

/* A freed communicator's slot, kept from new ones until every other member
 * has finished the last call this rank made on it: cadre_comm_free is
 * local, and a member may still read this rank's buffers (the last two
 * calls') while the ranks that made a new communicator, which it need not
 * be part of, would write them. A member has finished when its `done` word
 * says so, or names another context (it set the slot up for a communicator
 * made after it freed this one), or it is dead. */
struct retired {
    int slot, n, me;
    uint64_t ctx;
    uint32_t last;
    struct fast_slot **peer;
    int *world;
    struct retired *next;
};
static struct retired *retired; /* under slot_lock */

static int retired_done(const struct retired *r)
{
    for (int q = 0; q < r->n; q++) {
        if (q == r->me)
            continue;
        uint64_t d = atomic_load_explicit(&r->peer[q]->done, memory_order_acquire);
        if ((d & ~0xffffffffull) == r->ctx && (uint32_t)d < r->last &&
            __atomic_load_n(&cadre__eng.peers[r->world[q]].state, __ATOMIC_RELAXED) != PEER_DEAD)
            return 0;
    }
    return 1;
}

/* Gives back the retired slots whose members have all finished; lock held. */
static void reap_retired(int all)
{
    for (struct retired **pp = &retired; *pp;) {
        struct retired *r = *pp;
        if (!all && !retired_done(r)) {
            pp = &r->next;
            continue;
        }
        used_mask &= ~(1ull << r->slot);
        *pp = r->next;
        free(r->peer), free(r->world), free(r);
    }
}

uint64_t cadre__fast_free_mask(void)
{
    if (!cadre__eng.shm_active)
        return 0;
    pthread_mutex_lock(&slot_lock);
    reap_retired(0);
    /* Slot 0 is the world's, whether it took it yet or not. */
    uint64_t m = ~used_mask & ((1ull << FAST_NSLOTS) - 1) & ~1ull;
    pthread_mutex_unlock(&slot_lock);
    return m;
}

int cadre__fast_reserve(uint64_t agreed)
{
    if (!agreed)
        return -1;
    int slot = __builtin_ctzll(agreed);
    pthread_mutex_lock(&slot_lock);
    int taken = (used_mask >> slot) & 1;
    if (!taken)
        used_mask |= 1ull << slot;
    pthread_mutex_unlock(&slot_lock);
    return taken ? -2 : slot;
}

void cadre__fast_unreserve(int slot)
{
    if (slot < 0)
        return;
    pthread_mutex_lock(&slot_lock);
    used_mask &= ~(1ull << slot);
    pthread_mutex_unlock(&slot_lock);
}

int cadre__fast_setup(struct cadre_comm *c, int slot)
{
    c->fast = NULL;
    if (slot < 0)
        return CADRE_SUCCESS;
    /* Reserved for it by cadre__fast_reserve (the world's: slot 0, never
     * offered); given back here when c does not use it. */
    if (c->size < 2 || !cadre__direct_usable(c)) {
        cadre__fast_unreserve(slot);
        return CADRE_SUCCESS;
    }
    struct coll_fast *F = calloc(1, sizeof *F);
    if (!F) {
        cadre__fast_unreserve(slot);
        return CADRE_ERR_NOMEM;
    }
    F->peer = calloc((size_t)c->size, sizeof *F->peer);
    F->world = calloc((size_t)c->size, sizeof *F->world);
    F->seen_done = calloc((size_t)c->size, sizeof *F->seen_done);
    if (!F->peer || !F->world || !F->seen_done) {
        free(F->peer), free(F->world), free(F->seen_done), free(F);
        cadre__fast_unreserve(slot);
        return CADRE_ERR_NOMEM;
    }
    for (int i = 0; i < c->size; i++) {
        F->world[i] = cadre__world_rank(c, i);
        unsigned char *area = cadre__shm_coll_area(F->world[i]);
        if (!area) {
            free(F->peer), free(F->world), free(F->seen_done), free(F);
            cadre__fast_unreserve(slot);
            return CADRE_SUCCESS;
        }
        F->peer[i] = (struct fast_slot *)area + slot;
    }
    F->slot = slot;
    F->n = c->size;
    F->me = c->rank;
    F->ctx = (uint64_t)c->context_id << 32;
    /* Finished call 0 of this context: the members of the communicator that
     * had the slot before see that this rank is done with that one. */
    atomic_store_explicit(&F->peer[F->me]->done, F->ctx, memory_order_release);
    c->fast = F;
    return CADRE_SUCCESS;
}

void cadre__fast_release(struct cadre_comm *c)
{
    struct coll_fast *F = c->fast;
    if (c == &cadre__comm_world)
        world_tried = 0;
    if (!F)
        return;
    struct retired *r = F->seq && c != &cadre__comm_world ? malloc(sizeof *r) : NULL;
    if (r) {
        *r = (struct retired){.slot = F->slot, .n = F->n, .me = F->me, .ctx = F->ctx,
                              .last = F->seq, .peer = F->peer, .world = F->world};
        F->peer = NULL;
        F->world = NULL;
        pthread_mutex_lock(&slot_lock);
        r->next = retired;
        retired = r;
        pthread_mutex_unlock(&slot_lock);
    } else if (!F->seq || c == &cadre__comm_world) {
        /* No call made (nobody reads its buffers), or the world at
         * finalize. */
        cadre__fast_unreserve(F->slot);
    }
    /* else no memory to remember it by: the slot stays taken. */
    free(F->tmp), free(F->addr);
    free(F->peer), free(F->world), free(F->seen_done), free(F);
    c->fast = NULL;
}

void cadre__coll_finalize(void)
{
    cadre__fast_release(&cadre__comm_world);
    pthread_mutex_lock(&slot_lock);
    reap_retired(1);
    pthread_mutex_unlock(&slot_lock);
}

struct coll_fast *cadre__fast_get(struct cadre_comm *c)
{
    if (c->fast || c != &cadre__comm_world || world_tried)
        return c->fast;
    world_tried = 1;
    pthread_mutex_lock(&slot_lock);
    used_mask |= 1; /* the world's slot, never offered */
    pthread_mutex_unlock(&slot_lock);
    cadre__fast_setup(c, 0);
    return c->fast;
}
