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
#include "coll_fast.h"
#include "coll_sig.h"

/* The poisoned contexts, never a fixed number of them: a hash of lists that
 * only grow, under the engine lock, and that the collectives read without it
 * (a record is complete before it is linked). Context ids are never reused
 * within a process, so a record outlives its communicator harmlessly. */
#define NBUCKETS 64

struct poison {
    struct poison *next;
    uint32_t ctx;
    int code;    /* CADRE_ERR_MISMATCH or CADRE_ERR_PEER */
    int32_t tag; /* the call (collective number) found at fault, -1: not known */
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

/* Lock held. Returns 1 when this is ctx's first report. */
static int record(uint32_t ctx, int code, const char *text, int32_t tag)
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
    p->tag = tag;
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
    /* Calls that differ in the algorithm alone read the same: say so. */
    if ((asig ^ bsig) == ((asig ^ bsig) & (7ull << 11)) && asig != bsig)
        snprintf(buf, len, "rank %d and rank %d chose different algorithms for %s: is CADRE_ALGO "
                 "the same on every rank?", a, b, y);
    else
        snprintf(buf, len, "rank %d called %s, rank %d called %s", a, x, b, y);
}

/* Tells the live ranks of c but `skip` what rank `src` found: sreq = a,
 * rreq = b, off = other, and in its high half the call's number + 1 when
 * known (src is this rank, or the finder when passed on). */
static void tell_at(struct cadre_comm *c, int skip, int src, int other, uint64_t a, uint64_t b,
                    int32_t tag)
{
    struct cadre_engine *e = &cadre__eng;
    uint32_t ctx = cadre__coll_ctx(c);
    for (int q = 0; q < c->size; q++) {
        int w = cadre__world_rank(c, q);
        if (q == c->rank || q == skip || e->peers[w].state != PEER_OK)
            continue;
        struct cadre_p2p_hdr h = {.type = CADRE_P2P_EAGER, .ctx = ctx, .src = src,
                                  .tag = CADRE_P2P_POISON_TAG, .sreq = a, .rreq = b,
                                  .off = (uint64_t)(uint32_t)other |
                                         (uint64_t)(uint32_t)(tag + 1) << 32};
        (void)cadre__p2p_post(w, &h, NULL, NULL);
    }
}

static void tell(struct cadre_comm *c, int skip, int src, int other, uint64_t a, uint64_t b)
{
    tell_at(c, skip, src, other, a, b, -1);
}

struct forward {
    const struct cadre_p2p_hdr *h;
    int skip;
};

static void forward_one(const struct cadre_comm *c, void *arg)
{
    const struct forward *f = arg;
    if (cadre__coll_ctx(c) == f->h->ctx)
        tell_at((struct cadre_comm *)c, f->skip, f->h->src, (int)(uint32_t)f->h->off, f->h->sreq,
                f->h->rreq, (int32_t)(uint32_t)(f->h->off >> 32) - 1);
}

/* A POISON is passed on, once, before anything this rank sends later: its
 * BYE at finalize must not reach a rank that still waits on it before the
 * news does (the finder's own message may come later, on another
 * connection), or that rank blames this one's finalize. */
struct by_ctx {
    uint32_t ctx;
    const struct cadre_comm *c;
};

static void find_ctx(const struct cadre_comm *c, void *arg)
{
    struct by_ctx *f = arg;
    if (!f->c && cadre__coll_ctx(c) == f->ctx)
        f->c = c;
}

void cadre__coll_poison_in(int peer, const struct cadre_p2p_hdr *h)
{
    (void)peer;
    char text[300];
    int failed = !h->sreq && !h->rreq; /* a rank failed, else a mismatch */
    int other = (int)(uint32_t)h->off;
    if (failed) {
        /* The engine fails that rank here too when it is of another node
         * (a lost host: this rank may have no connection to it), and the
         * text names its host. */
        struct by_ctx f = {h->ctx, NULL};
        const char *host = NULL;
        cadre__comm_foreach(find_ctx, &f);
        if (f.c && other >= 0 && other < f.c->size && (int)h->src >= 0 &&
            (int)h->src < f.c->size) {
            cadre__p2p_peer_reported(cadre__world_rank(f.c, other),
                                     cadre__world_rank(f.c, (int)h->src));
            host = cadre__p2p_host(cadre__world_rank(f.c, other));
        }
        snprintf(text, sizeof text, "rank %d%s%s%s failed (rank %d found out)", other,
                 host ? " (host " : "", host ? host : "", host ? ")" : "", (int)h->src);
    } else {
        describe(text, sizeof text, other, h->sreq, (int)h->src, h->rreq);
    }
    if (record(h->ctx, failed ? CADRE_ERR_PEER : CADRE_ERR_MISMATCH, text,
               (int32_t)(uint32_t)(h->off >> 32) - 1)) {
        struct forward f = {h, failed ? other : -1};
        cadre__comm_foreach(forward_one, &f);
    }
}

void cadre__coll_poison_peer_locked(struct cadre_comm *c, int dead)
{
    char text[300], world[32] = "", how[200] = "";
    int w = cadre__world_rank(c, dead);
    if (w != dead)
        snprintf(world, sizeof world, " (world rank %d)", w);
    /* What the engine saw, when it saw it ("(pid 4711) exited"). */
    if (cadre__p2p_peer_died(w))
        snprintf(how, sizeof how, ": %.190s", cadre__eng.peers[w].why);
    snprintf(text, sizeof text, "rank %d%s failed%s (this rank, %d, found out)", dead, world, how,
             c->rank);
    /* Once: the first report stands, and was told. */
    if (record(cadre__coll_ctx(c), CADRE_ERR_PEER, text, -1))
        tell(c, dead, c->rank, dead, 0, 0);
}

struct died {
    int world;
};

static void died_one(const struct cadre_comm *c, void *arg)
{
    const struct died *d = arg;
    int q = cadre__p2p_comm_rank_of(c, d->world);
    if (q >= 0 && q != c->rank)
        cadre__coll_poison_peer_locked((struct cadre_comm *)c, q);
}

/* The engine saw world rank w fail (no BYE): every communicator it is in
 * fails its collectives here, also those whose partners in the call that
 * waits now are all alive (they would wait for CADRE_TIMEOUT for ranks that
 * left the call because of the failure, or never came to it). The live
 * members are told, for those that cannot see w go themselves. */
void cadre__coll_peer_died(int w)
{
    struct died d = {w};
    struct cadre_comm *world = &cadre__comm_world;
    int told = world->magic == CADRE_COMM_MAGIC && find(cadre__coll_ctx(world));
    cadre__comm_foreach(died_one, &d);
    /* A rank of another node that this rank saw fail (not one it was told
     * of): the world hears of it even when it was poisoned already for an
     * earlier death, so that a rank with no connection to a lost host learns
     * of each of its ranks (cadre__p2p_peer_reported), not of the first. */
    const struct cadre_peer *p = &cadre__eng.peers[w];
    if (told && !p->same_node && !p->heard)
        tell(world, w, world->rank, w, 0, 0);
}

void cadre__coll_poison_dead_members(struct cadre_comm *c)
{
    int q = cadre__p2p_comm_dead_member(c);
    if (q >= 0)
        cadre__coll_poison_peer_locked(c, q);
}

int cadre__coll_blame(struct cadre_comm *c, int peer)
{
    struct cadre_engine *e = &cadre__eng;
    if (peer >= 0 && !e->peers[cadre__world_rank(c, peer)].said_bye)
        return peer;
    /* First a failure the engine noticed (it saw no BYE), then a process
     * that exited unnoticed: a rank that finalized may have exited with its
     * BYE still unread here, a failure seen is surer. */
    for (int pass = 0; pass < 2; pass++) {
        for (int q = 0; q < c->size; q++) {
            const struct cadre_peer *m = &e->peers[cadre__world_rank(c, q)];
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
void cadre__coll_poison_locked(struct cadre_comm *c, int32_t tag, int other, uint64_t theirs,
                               uint64_t mine)
{
    char text[300];
    describe(text, sizeof text, other, theirs, c->rank, mine);
    record(cadre__coll_ctx(c), CADRE_ERR_MISMATCH, text, tag);
    tell_at(c, -1, c->rank, other, theirs, mine, tag);
}

void cadre__coll_poison(struct cadre_comm *c, int32_t tag, int other, uint64_t theirs,
                        uint64_t mine)
{
    eng_lock();
    cadre__coll_poison_locked(c, tag, other, theirs, mine);
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

int cadre__coll_poisoned_by(uint32_t ctx, int32_t tag, const char *fn)
{
    if (!atomic_load_explicit(&npoisoned, memory_order_acquire))
        return CADRE_SUCCESS;
    const struct poison *p = find(ctx);
    if (!p || p->tag < 0 || (((uint32_t)tag - (uint32_t)p->tag) & 0x3fffffffu) >= (1u << 29))
        return CADRE_SUCCESS;
    return cadre__coll_poisoned(ctx, fn);
}

int cadre__coll_fault_after(uint32_t ctx, int32_t tag)
{
    if (!atomic_load_explicit(&npoisoned, memory_order_acquire))
        return 0;
    const struct poison *p = find(ctx);
    return p && p->tag >= 0 && tag != p->tag &&
           (((uint32_t)p->tag - (uint32_t)tag) & 0x3fffffffu) < (1u << 29);
}

int cadre__coll_any_poisoned(void)
{
    return atomic_load_explicit(&npoisoned, memory_order_relaxed) != 0;
}

/* ---- messages of another call -------------------------------------------------------- */
/* Where ranks disagree on the root, or on the call, a rank may send a message
 * that no receive of the peer takes (two roots of a bcast each send, neither
 * receives): it waits in the peer's queue with the signature of the call it
 * belongs to. The peer judges it against the signature of its own call of
 * that sequence number: at arrival when it made that call already, else when
 * it makes it (stray_check). */

void cadre__coll_sig_record(struct cadre_comm *c, int32_t tag, uint64_t sig)
{
    unsigned i = (uint32_t)tag % CADRE_SIG_HIST;
    /* A seqlock of one entry: the progress thread reads it under the
     * engine lock, which the owner does not take on the shared-memory path. */
    __atomic_store_n(&c->sig_tag[i], 0, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&c->sig_hist[i], sig, __ATOMIC_RELAXED);
    __atomic_store_n(&c->sig_tag[i], (uint32_t)tag + 1, __ATOMIC_RELEASE);
}

/* 1: this rank made c's call `tag` with the non-zero signature *mine and h
 * is of another call; 0: nothing to say (the same call, unchecked, or made
 * too long ago to tell); -1: the call is not made yet (or its signature not
 * recorded yet). */
static int judge(const struct cadre_comm *c, const struct cadre_p2p_hdr *h, uint64_t *mine)
{
    if (!h->off || h->tag >= CADRE_P2P_SIGQ_TAG)
        return 0;
    unsigned i = (uint32_t)h->tag % CADRE_SIG_HIST;
    uint32_t t1 = __atomic_load_n(&c->sig_tag[i], __ATOMIC_ACQUIRE);
    *mine = __atomic_load_n(&c->sig_hist[i], __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    uint32_t t2 = __atomic_load_n(&c->sig_tag[i], __ATOMIC_RELAXED);
    if (t1 == t2 && t1 == (uint32_t)h->tag + 1)
        return *mine && *mine != h->off;
    /* How many calls ago this rank started that one, if it did. */
    uint32_t seq = __atomic_load_n(&c->coll_seq, __ATOMIC_RELAXED);
    uint32_t ago = (seq - 1u - (uint32_t)h->tag) & 0x3fffffffu;
    return ago >= CADRE_SIG_HIST && ago < (1u << 29) ? 0 : -1;
}

/* The judging of a message h runs in cadre__comm_foreach, under the lock
 * that keeps the communicator from being freed meanwhile. */
struct judging {
    const struct cadre_p2p_hdr *h; /* the message: tag, signature off */
    int sigq;                      /* asked by SIGQ (else a stray) */
};

static void judge_one(const struct cadre_comm *cc, void *arg)
{
    const struct judging *j = arg;
    const struct cadre_p2p_hdr *h = j->h;
    if (cadre__coll_ctx(cc) != h->ctx)
        return;
    struct cadre_comm *c = (struct cadre_comm *)cc;
    if (!j->sigq) {
        /* Flag first, then look: the owner records first, then looks at
         * the flag. */
        __atomic_store_n(&c->stray_check, 1, __ATOMIC_SEQ_CST);
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
    }
    uint64_t mine;
    if (judge(c, h, &mine) == 1)
        cadre__coll_poison_locked(c, h->tag, h->src, h->off, mine);
}

void cadre__coll_stray_in(int peer, const struct cadre_p2p_hdr *h)
{
    (void)peer;
    if (!h->off || find(h->ctx))
        return;
    struct judging j = {h, 0};
    cadre__comm_foreach(judge_one, &j);
}

struct scan {
    struct cadre_comm *c;
    int pending, src;
    int32_t tag;
    uint64_t theirs, mine;
};

static int scan_one(void *arg, const struct cadre_p2p_hdr *h)
{
    struct scan *sc = arg;
    uint64_t mine;
    int j = judge(sc->c, h, &mine);
    if (j < 0)
        sc->pending = 1;
    if (j == 1) {
        sc->src = h->src;
        sc->tag = h->tag;
        sc->theirs = h->off;
        sc->mine = mine;
        return 1;
    }
    return 0;
}

/* Before a communicator exists here, nothing marks the messages its peers
 * send it already: its first call looks at what waits, whatever the flag. */
int cadre__coll_strays_locked(struct cadre_comm *c, int32_t tag, const char *fn)
{
    if (!__atomic_load_n(&c->stray_check, __ATOMIC_SEQ_CST) && tag != 0)
        return CADRE_SUCCESS;
    struct scan sc = {c, 0, -1, -1, 0, 0};
    cadre__p2p_unexp_each(cadre__coll_ctx(c), scan_one, &sc);
    if (sc.src < 0) {
        if (!sc.pending)
            __atomic_store_n(&c->stray_check, 0, __ATOMIC_RELAXED);
        return CADRE_SUCCESS;
    }
    if (!find(cadre__coll_ctx(c)))
        cadre__coll_poison_locked(c, sc.tag, sc.src, sc.theirs, sc.mine);
    return cadre__sig_mismatch(fn, sc.src, sc.theirs, c->rank, sc.mine);
}

int cadre__coll_sig_begin(struct cadre_comm *c, int32_t tag, uint64_t sig, const char *fn)
{
    if (!sig)
        return CADRE_SUCCESS;
    cadre__coll_sig_record(c, tag, sig);
    /* No fence between the record and the look at the flag (it would cost
     * every call on the shared-memory path): a message that races with
     * the record leaves the flag set, and the next call judges it, or this
     * one while it waits (coll_fast.c's cadre__fast_idle looks for it). */
    if (!__atomic_load_n(&c->stray_check, __ATOMIC_RELAXED) && tag != 0)
        return CADRE_SUCCESS;
    eng_lock();
    int rc = cadre__coll_strays_locked(c, tag, fn);
    eng_unlock();
    return rc;
}

/* A rank waits on this one in its call `tag` (h->sreq) with signature
 * h->rreq: when this rank made another call there, neither would ever send
 * the other what it waits for (two roots of a reduce each wait for the
 * other): it is a mismatch. */
void cadre__coll_sigq_in(int peer, const struct cadre_p2p_hdr *h)
{
    (void)peer;
    if (!h->rreq || h->sreq >= CADRE_P2P_SIGQ_TAG || find(h->ctx))
        return;
    struct cadre_p2p_hdr q = *h;
    q.tag = (int32_t)h->sreq;
    q.off = h->rreq;
    struct judging j = {&q, 1};
    cadre__comm_foreach(judge_one, &j);
}

void cadre__coll_sigq_send_locked(struct cadre_comm *c, int peer, int32_t tag, uint64_t sig)
{
    struct cadre_p2p_hdr h = {.type = CADRE_P2P_EAGER, .ctx = cadre__coll_ctx(c), .src = c->rank,
                              .tag = CADRE_P2P_SIGQ_TAG, .sreq = (uint64_t)(uint32_t)tag,
                              .rreq = sig};
    int w = cadre__world_rank(c, peer);
    if (w != cadre__proc.rank && cadre__eng.peers[w].state == PEER_OK)
        (void)cadre__p2p_post(w, &h, NULL, NULL);
}

void cadre__coll_init(void)
{
    static const struct cadre_p2p_upcalls up = {
        .poison_in = cadre__coll_poison_in,
        .sigq_in = cadre__coll_sigq_in,
        .stray_in = cadre__coll_stray_in,
        .peer_died = cadre__coll_peer_died,
    };
    cadre__p2p_set_upcalls(&up);
}
