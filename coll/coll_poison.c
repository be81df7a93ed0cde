/*
 * Mismatch detection, the communicator side. A rank that finds another's
 * collective differs from its own (by their signatures, coll_sig.h) fails
 * its call with CADRE_ERR_MISMATCH and sends every other rank of the
 * communicator a POISON message naming both calls. The communicator is then
 * poisoned on every rank: the call in progress and every later collective on
 * it fail with the same text, so that no rank hangs waiting for a partner
 * that went elsewhere (like an NCCL communicator after an asynchronous error).
 */
#include <stdio.h>
#include <string.h>

#include "coll.h"
#include "coll_sig.h"

#define MAX_POISONED 32

static struct {
    uint32_t ctx;
    char text[320];
} poisoned[MAX_POISONED];
static _Atomic int npoisoned;

static int world_of(const struct cadre_comm *c, int rank)
{
    return c->world_ranks ? c->world_ranks[rank] : rank;
}

/* Lock held. */
static void record(uint32_t ctx, const char *text)
{
    int n = atomic_load(&npoisoned);
    for (int i = 0; i < n; i++)
        if (poisoned[i].ctx == ctx)
            return; /* the first report stands */
    if (n == MAX_POISONED)
        return;
    poisoned[n].ctx = ctx;
    snprintf(poisoned[n].text, sizeof poisoned[n].text, "%s", text);
    atomic_store(&npoisoned, n + 1);
    cadre__p2p_kick();
}

static void describe(char *buf, size_t len, int a, uint64_t asig, int b, uint64_t bsig)
{
    char x[128], y[128];
    cadre__sig_describe(asig, x, sizeof x);
    cadre__sig_describe(bsig, y, sizeof y);
    snprintf(buf, len, "rank %d called %s, rank %d called %s", a, x, b, y);
}

void cadre__coll_poison_in(int peer, const struct cadre_p2p_hdr *h)
{
    (void)peer;
    char text[300];
    describe(text, sizeof text, (int)h->off, h->sreq, (int)h->src, h->rreq);
    record(h->ctx, text);
}

/* Lock held: poisons comm here and at every other rank, after this rank
 * (`me`, whose call is `mine`) found that rank `other` called `theirs`. */
void cadre__coll_poison_locked(struct cadre_comm *c, int other, uint64_t theirs, uint64_t mine)
{
    uint32_t ctx = cadre__coll_ctx(c);
    char text[300];
    describe(text, sizeof text, other, theirs, c->rank, mine);
    record(ctx, text);
    for (int q = 0; q < c->size; q++) {
        if (q == c->rank)
            continue;
        struct cadre_p2p_hdr h = {.type = CADRE_P2P_EAGER, .ctx = ctx, .src = c->rank,
                                  .tag = CADRE_P2P_POISON_TAG, .sreq = theirs, .rreq = mine,
                                  .off = (uint64_t)other};
        (void)cadre__p2p_post(world_of(c, q), &h, NULL, NULL);
    }
}

void cadre__coll_poison(struct cadre_comm *c, int other, uint64_t theirs, uint64_t mine)
{
    eng_lock();
    cadre__coll_poison_locked(c, other, theirs, mine);
    eng_unlock();
}

int cadre__coll_poisoned(uint32_t ctx, const char *fn)
{
    int n = atomic_load_explicit(&npoisoned, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (poisoned[i].ctx == ctx)
            return cadre__error(CADRE_ERR_MISMATCH,
                                "%s: the ranks of this communicator disagreed on a collective: %s",
                                fn, poisoned[i].text);
    return CADRE_SUCCESS;
}

int cadre__coll_any_poisoned(void)
{
    return atomic_load_explicit(&npoisoned, memory_order_relaxed) != 0;
}
