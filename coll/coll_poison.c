/*
 * Mismatch detection, the communicator side. A rank that finds another's
 * collective differs from its own (by their signatures, coll_sig.h) fails
 * its call with CADRE_ERR_MISMATCH and sends every other rank of the
 * communicator a POISON message naming both calls. The communicator is then
 * poisoned on every rank: the call in progress and every later collective on
 * it fail with the same text, so that no rank hangs waiting for a partner
 * that went elsewhere (like an NCCL communicator after an asynchronous error).
 * A rank that finds a member dead tells the others the same way, so that a
 * rank waiting on a live partner that left the collective for that reason
 * does not wait for it in vain: every survivor gets CADRE_ERR_PEER.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "coll_sig.h"

/* The poisoned contexts, never a fixed number of them: a hash of lists that
 * only grow, under the engine lock, and that the collectives read without it
 * (a record is complete before it is linked). Context ids are never reused
 * within a process, so a record outlives its communicator harmlessly. */
#define NBUCKETS 64

struct poison {
    struct poison *next;
    uint32_t ctx;
    int code; /* CADRE_ERR_MISMATCH or CADRE_ERR_PEER */
    char text[320];
};
static struct poison *_Atomic buckets[NBUCKETS];
static _Atomic int npoisoned;
/* A report that found no memory for its record: every collective fails
 * rather than go on as if nothing happened. */
static _Atomic int lost;

static const struct poison *find(uint32_t ctx)
{
    struct poison *p = atomic_load_explicit(&buckets[(ctx >> 1) % NBUCKETS], memory_order_acquire);
    while (p && p->ctx != ctx)
        p = p->next;
    return p;
}

static int world_of(const struct cadre_comm *c, int rank)
{
    return c->world_ranks ? c->world_ranks[rank] : rank;
}

/* Lock held. Returns 1 when this is ctx's first report. */
static int record(uint32_t ctx, int code, const char *text)
{
    if (find(ctx))
        return 0; /* the first report stands */
    struct poison *p = malloc(sizeof *p);
    if (!p) {
        atomic_store(&lost, 1);
        atomic_fetch_add(&npoisoned, 1);
        cadre__p2p_kick();
        return 1;
    }
    p->ctx = ctx;
    p->code = code;
    snprintf(p->text, sizeof p->text, "%s", text);
    _Atomic(struct poison *) *b = &buckets[(ctx >> 1) % NBUCKETS];
    p->next = atomic_load_explicit(b, memory_order_relaxed);
    atomic_store_explicit(b, p, memory_order_release);
    atomic_fetch_add_explicit(&npoisoned, 1, memory_order_release);
    cadre__p2p_kick();
    return 1;
}

static void describe(char *buf, size_t len, int a, uint64_t asig, int b, uint64_t bsig)
{
    char x[128], y[128];
    cadre__sig_describe(asig, x, sizeof x);
    cadre__sig_describe(bsig, y, sizeof y);
    snprintf(buf, len, "rank %d called %s, rank %d called %s", a, x, b, y);
}

/* Tells the live ranks of c but `skip` what rank `src` found: sreq = a,
 * rreq = b, off = other (src is this rank, or the finder when passed on). */
static void tell(struct cadre_comm *c, int skip, int src, int other, uint64_t a, uint64_t b)
{
    struct cadre_engine *e = &cadre__eng;
    uint32_t ctx = cadre__coll_ctx(c);
    for (int q = 0; q < c->size; q++) {
        int w = world_of(c, q);
        if (q == c->rank || q == skip || e->peers[w].state != PEER_OK)
            continue;
        struct cadre_p2p_hdr h = {.type = CADRE_P2P_EAGER, .ctx = ctx, .src = src,
                                  .tag = CADRE_P2P_POISON_TAG, .sreq = a, .rreq = b,
                                  .off = (uint64_t)other};
        (void)cadre__p2p_post(w, &h, NULL, NULL);
    }
}

struct forward {
    const struct cadre_p2p_hdr *h;
    int skip;
};

static void forward_one(const struct cadre_comm *c, void *arg)
{
    const struct forward *f = arg;
    if (cadre__coll_ctx(c) == f->h->ctx)
        tell((struct cadre_comm *)c, f->skip, f->h->src, (int)f->h->off, f->h->sreq, f->h->rreq);
}

/* A POISON is passed on, once, before anything this rank sends later: its
 * BYE at finalize must not reach a rank that still waits on it before the
 * news does (the finder's own message may come later, on another
 * connection), or that rank blames this one's finalize. */
void cadre__coll_poison_in(int peer, const struct cadre_p2p_hdr *h)
{
    (void)peer;
    char text[300];
    int failed = !h->sreq && !h->rreq; /* a rank failed, else a mismatch */
    if (failed) {
        snprintf(text, sizeof text, "rank %d failed (rank %d found out)", (int)h->off,
                 (int)h->src);
    } else {
        describe(text, sizeof text, (int)h->off, h->sreq, (int)h->src, h->rreq);
    }
    if (record(h->ctx, failed ? CADRE_ERR_PEER : CADRE_ERR_MISMATCH, text)) {
        struct forward f = {h, failed ? (int)h->off : -1};
        cadre__comm_foreach(forward_one, &f);
    }
}

void cadre__coll_poison_peer_locked(struct cadre_comm *c, int dead)
{
    char text[300];
    snprintf(text, sizeof text, "rank %d failed (this rank, %d, found out)", dead, c->rank);
    uint32_t ctx = cadre__coll_ctx(c);
    if (find(ctx))
        return; /* told already */
    record(ctx, CADRE_ERR_PEER, text);
    tell(c, dead, c->rank, dead, 0, 0);
}

int cadre__coll_blame(struct cadre_comm *c, int peer)
{
    struct cadre_engine *e = &cadre__eng;
    if (peer >= 0 && !e->peers[world_of(c, peer)].said_bye)
        return peer;
    /* First a failure the engine noticed (it saw no BYE), then a process
     * that exited unnoticed: a rank that finalized may have exited with its
     * BYE still unread here, a failure seen is surer. */
    for (int pass = 0; pass < 2; pass++) {
        for (int q = 0; q < c->size; q++) {
            const struct cadre_peer *m = &e->peers[world_of(c, q)];
            if (q == c->rank || m->said_bye)
                continue;
            struct pollfd pf = {m->pidfd, POLLIN, 0};
            if (pass == 0 ? m->state == PEER_DEAD : m->pidfd >= 0 && poll(&pf, 1, 0) == 1)
                return q;
        }
    }
    return peer;
}

/* Lock held: poisons comm here and at every other rank, after this rank
 * (`me`, whose call is `mine`) found that rank `other` called `theirs`. */
void cadre__coll_poison_locked(struct cadre_comm *c, int other, uint64_t theirs, uint64_t mine)
{
    char text[300];
    describe(text, sizeof text, other, theirs, c->rank, mine);
    record(cadre__coll_ctx(c), CADRE_ERR_MISMATCH, text);
    tell(c, -1, c->rank, other, theirs, mine);
}

void cadre__coll_poison(struct cadre_comm *c, int other, uint64_t theirs, uint64_t mine)
{
    eng_lock();
    cadre__coll_poison_locked(c, other, theirs, mine);
    eng_unlock();
}

int cadre__coll_poisoned(uint32_t ctx, const char *fn)
{
    if (!atomic_load_explicit(&npoisoned, memory_order_acquire))
        return CADRE_SUCCESS;
    const struct poison *p = find(ctx);
    if (!p)
        return atomic_load(&lost) ? cadre__error(CADRE_ERR_MISMATCH,
                                                 "%s: a collective failed on a communicator of "
                                                 "this process and there was no memory to record "
                                                 "which",
                                                 fn)
                                  : CADRE_SUCCESS;
    return p->code == CADRE_ERR_PEER
               ? cadre__error(CADRE_ERR_PEER, "%s: %s", fn, p->text)
               : cadre__error(CADRE_ERR_MISMATCH,
                              "%s: the ranks of this communicator disagreed on a collective: %s",
                              fn, p->text);
}

int cadre__coll_any_poisoned(void)
{
    return atomic_load_explicit(&npoisoned, memory_order_relaxed) != 0;
}
