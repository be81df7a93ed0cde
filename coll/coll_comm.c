/* Communicators: split, create (torch's new_group), create_group (by the
 * members alone), dup, free, world_rank.
 *
 * Context ids: every process keeps next_ctx, above the context of every
 * communicator it belongs to. A new communicator takes the largest next_ctx
 * of the ranks that make it (the parent's ranks, learnt in the same
 * allgather that tells colours and keys apart; create_group's members, in
 * their own exchange), so no process can hold two communicators with one
 * context, and two processes exchange messages on a context only within the
 * one communicator that both hold with it; each rank claims it, and the
 * ranks agree that every claim held, as threads may make communicators at
 * once (coll_ctx.h). Contexts are multiples of 4; the one above carries the
 * collective traffic, the next create_group's exchanges on the communicator
 * (coll.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_ctx.h"
#include "coll_fast.h"
#include "coll_hier.h"
#include "runtime/runtime_device.h"

struct entry {
    int64_t color, key, ctx;
    int64_t fast; /* shared-memory collective slots free at this rank */
};

static void free_comm(struct cadre_comm *c)
{
    /* The device path's pending work still calls public functions on the
     * handle: it ends once that work is done. */
    cadre__gpu.comm_free(c);
    cadre__comm_handle_end(c);
    eng_lock();
    cadre__p2p_send_final(c);
    eng_unlock();
    cadre__comm_unregister(c);
    cadre__fast_release(c);
    cadre__hier_release(c);
    cadre__ctx_release(c->context_id);
    c->magic = 0;
    free(c->world_ranks);
    free(c);
}

/* A communicator with the context and shared-memory slot cl claimed; the
 * claim is its own from here (given back when it fails). */
static int new_comm(int rank, int size, const int *world, struct ctx_claim *cl,
                    struct cadre_comm **out)
{
    struct cadre_comm *c = calloc(1, sizeof *c);
    int *w = malloc((size_t)size * sizeof *w);
    if (!c || !w) {
        free(c);
        free(w);
        cadre__ctx_unclaim(cl);
        return CADRE_ERR_NOMEM;
    }
    uint32_t ctx = cl->ctx;
    memcpy(w, world, (size_t)size * sizeof *w);
    c->magic = CADRE_COMM_MAGIC;
    c->context_id = ctx;
    c->rank = rank;
    c->size = size;
    c->world_ranks = w;
    if (cadre__comm_handle_new(c) != CADRE_SUCCESS) {
        free(c);
        free(w);
        cadre__ctx_unclaim(cl);
        return CADRE_ERR_NOMEM;
    }
    cadre__comm_register(c);
    eng_lock();
    cadre__coll_poison_dead_members(c);
    eng_unlock();
    /* The context is the communicator's now: free_comm gives it back. */
    cl->held = 0;
    int rc = cadre__fast_setup(c, cl->slot);
    cl->slot = -1;
    if (rc != CADRE_SUCCESS) {
        free_comm(c);
        return rc;
    }
    *out = c;
    return CADRE_SUCCESS;
}

/* The error of a collective the constructor fn ran as itself
 * (cadre__allgather_as), without its leading "fn: ". */
static const char *inner_error(const char *fn)
{
    const char *e = cadre_last_error();
    size_t k = strlen(fn);
    return strncmp(e, fn, k) == 0 && e[k] == ':' && e[k + 1] == ' ' ? e + k + 2 : e;
}

/* Everyone's (color, key, next_ctx) over parent. */
static int exchange(const char *fn, cadre_comm_t parent, struct cadre_comm *p, int64_t color,
                    int64_t key, struct entry **out)
{
    uint32_t ctx;
    uint64_t fast;
    cadre__ctx_offer(&ctx, &fast);
    struct entry mine = {color, key, ctx, (int64_t)fast};
    struct entry *all = malloc((size_t)p->size * sizeof *all);
    if (!all)
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", fn);
    int rc = cadre__allgather_as(fn, &mine, all, 4, CADRE_INT64, parent);
    if (rc != CADRE_SUCCESS) {
        free(all);
        return cadre__error(rc, "%s: exchanging with the other ranks failed: %s", fn,
                            inner_error(fn));
    }
    *out = all;
    return CADRE_SUCCESS;
}

static uint32_t agreed_ctx(const struct entry *all, int n)
{
    int64_t m = 0;
    for (int i = 0; i < n; i++)
        if (all[i].ctx > m)
            m = all[i].ctx;
    return (uint32_t)m;
}

/* What the ranks' lowest answer `least` (of agree_claims or group_agree)
 * means for this rank, whose own answer was `mine`: 1 done; otherwise its
 * claim given back, and an error for no memory (here or at another `who`)
 * or past CTX_ROUNDS rounds, else another round. */
static int claims_outcome(const char *fn, int mine, int least, const char *who,
                          struct ctx_claim *cl, int *rounds)
{
    if (least == 1)
        return CADRE_SUCCESS;
    cadre__ctx_unclaim(cl);
    if (least < 0)
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory %s%s", fn,
                            mine < 0 ? "here" : "at another ", mine < 0 ? "" : who);
    if (++*rounds >= CTX_ROUNDS)
        return cadre__error(CADRE_ERR_INTERNAL,
                            "%s: no context id agreed after %d rounds (other threads keep making "
                            "communicators)", fn, *rounds);
    return CADRE_SUCCESS;
}

/* The second round over parent: whether every rank's claim held (*ok: 1
 * this rank's did or it claimed nothing, 0 it lost to another creation of
 * its process, -1 no memory). Returns with *ok the lowest of the ranks',
 * this rank's claim given back unless it is 1; `rounds` counts the rounds
 * and ends them with an error past CTX_ROUNDS. */
static int agree_claims(const char *fn, cadre_comm_t parent, int *ok, struct ctx_claim *cl,
                        int *rounds)
{
    int32_t mine = *ok, least = 0;
    int rc = cadre__allreduce_as(fn, &mine, &least, 1, CADRE_INT32, CADRE_MIN, parent);
    if (rc != CADRE_SUCCESS) {
        cadre__ctx_unclaim(cl);
        return cadre__error(rc, "%s: agreeing on the new context failed: %s", fn,
                            inner_error(fn));
    }
    *ok = least;
    return claims_outcome(fn, mine, least, "rank", cl, rounds);
}

static struct cadre_comm *get_parent(const char *fn, cadre_comm_t comm, int *rc)
{
    *rc = cadre__check_initialized(fn);
    if (*rc != CADRE_SUCCESS)
        return NULL;
    return cadre__comm_get(comm, fn, rc);
}

struct member {
    int64_t key;
    int parent_rank;
};

static int by_key(const void *a, const void *b)
{
    const struct member *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->parent_rank - y->parent_rank;
}

int cadre_comm_split(cadre_comm_t comm, int color, int key, cadre_comm_t *newcomm)
{
    const char *fn = "cadre_comm_split";
    if (!newcomm)
        return cadre__error(CADRE_ERR_ARG, "%s: newcomm is NULL", fn);
    int rc;
    struct cadre_comm *p = get_parent(fn, comm, &rc);
    if (!p)
        return rc;
    if (color < 0 && color != CADRE_UNDEFINED)
        return cadre__error(CADRE_ERR_ARG, "%s: color %d is negative (use CADRE_UNDEFINED)", fn,
                            color);
    struct member *m = malloc((size_t)p->size * sizeof *m);
    int *world = malloc((size_t)p->size * sizeof *world);
    if (!m || !world) {
        free(m), free(world);
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", fn);
    }
    struct ctx_claim cl = {.slot = -1};
    int n = 0, myrank = -1, ok = 0, rounds = 0;
    while (ok != 1) {
        struct entry *all;
        rc = exchange(fn, comm, p, color, key, &all);
        if (rc != CADRE_SUCCESS)
            break;
        uint32_t ctx = agreed_ctx(all, p->size);
        n = 0;
        for (int i = 0; i < p->size; i++)
            if (color != CADRE_UNDEFINED && all[i].color == color)
                m[n++] = (struct member){all[i].key, i};
        qsort(m, (size_t)n, sizeof *m, by_key);
        uint64_t fast = ~0ull;
        for (int i = 0; i < n; i++) {
            world[i] = cadre__world_rank(p, m[i].parent_rank);
            if (m[i].parent_rank == p->rank)
                myrank = i;
            fast &= (uint64_t)all[m[i].parent_rank].fast;
        }
        free(all);
        ok = color == CADRE_UNDEFINED ? 1 : cadre__ctx_claim(ctx, fast, &cl);
        rc = agree_claims(fn, comm, &ok, &cl, &rounds);
        if (rc != CADRE_SUCCESS)
            break;
    }
    free(m);
    if (rc != CADRE_SUCCESS || color == CADRE_UNDEFINED) {
        free(world);
        if (rc == CADRE_SUCCESS)
            *newcomm = CADRE_COMM_NULL;
        return rc;
    }
    struct cadre_comm *c;
    rc = new_comm(myrank, n, world, &cl, &c);
    free(world);
    if (rc != CADRE_SUCCESS)
        return cadre__error(rc, "%s: no memory", fn);
    *newcomm = cadre__comm_handle(c);
    return CADRE_SUCCESS;
}

int cadre_comm_create(cadre_comm_t comm, int n, const int ranks[], cadre_comm_t *newcomm)
{
    const char *fn = "cadre_comm_create";
    if (!newcomm)
        return cadre__error(CADRE_ERR_ARG, "%s: newcomm is NULL", fn);
    int rc;
    struct cadre_comm *p = get_parent(fn, comm, &rc);
    if (!p)
        return rc;
    if (n < 0 || n > p->size)
        return cadre__error(CADRE_ERR_ARG, "%s: n %d out of range [0,%d]", fn, n, p->size);
    if (n > 0 && !ranks)
        return cadre__error(CADRE_ERR_ARG, "%s: ranks is NULL with n %d", fn, n);
    char *seen = calloc((size_t)p->size, 1);
    if (!seen)
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", fn);
    int myrank = -1;
    for (int i = 0; i < n; i++) {
        if (ranks[i] < 0 || ranks[i] >= p->size || seen[ranks[i]]) {
            int bad = ranks[i];
            free(seen);
            return cadre__error(CADRE_ERR_ARG, "%s: ranks[%d] = %d is %s", fn, i, bad,
                                bad < 0 || bad >= p->size ? "out of range" : "listed twice");
        }
        seen[ranks[i]] = 1;
        if (ranks[i] == p->rank)
            myrank = i;
    }
    free(seen);
    /* Every rank of comm takes part, members or not, so the context is agreed. */
    struct ctx_claim cl = {.slot = -1};
    int ok = 0, rounds = 0;
    while (ok != 1) {
        struct entry *all;
        CADRE_CHECK(exchange(fn, comm, p, n, 0, &all));
        for (int i = 0; i < p->size; i++) {
            if (all[i].color != n) {
                int other = (int)all[i].color;
                free(all);
                return cadre__error(CADRE_ERR_MISMATCH,
                                    "%s: rank %d passed %d ranks, rank %d passed %d: every rank "
                                    "must pass the same list",
                                    fn, p->rank, n, i, other);
            }
        }
        uint32_t ctx = agreed_ctx(all, p->size);
        uint64_t fast = ~0ull;
        for (int i = 0; i < n; i++)
            fast &= (uint64_t)all[ranks[i]].fast;
        free(all);
        ok = myrank < 0 ? 1 : cadre__ctx_claim(ctx, fast, &cl);
        CADRE_CHECK(agree_claims(fn, comm, &ok, &cl, &rounds));
    }
    if (myrank < 0) {
        *newcomm = CADRE_COMM_NULL;
        return CADRE_SUCCESS;
    }
    int *world = malloc((size_t)n * sizeof *world);
    if (!world) {
        cadre__ctx_unclaim(&cl);
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", fn);
    }
    for (int i = 0; i < n; i++)
        world[i] = cadre__world_rank(p, ranks[i]);
    struct cadre_comm *c;
    int rc2 = new_comm(myrank, n, world, &cl, &c);
    free(world);
    if (rc2 != CADRE_SUCCESS)
        return cadre__error(rc2, "%s: no memory", fn);
    *newcomm = cadre__comm_handle(c);
    return CADRE_SUCCESS;
}

/* ---- create_group ------------------------------------------------------------------ */
/* A member's part of the exchange, in int64: n, next_ctx, the slots free,
 * then its list. */
enum { G_N, G_CTX, G_FAST, G_LIST };

static int check_group(const char *fn, const struct cadre_comm *p, int n, const int *ranks,
                       int tag, int *myrank)
{
    if (n < 1 || n > p->size)
        return cadre__error(CADRE_ERR_ARG, "%s: n %d out of range [1,%d]", fn, n, p->size);
    if (!ranks)
        return cadre__error(CADRE_ERR_ARG, "%s: ranks is NULL with n %d", fn, n);
    if (tag < 0)
        return cadre__error(CADRE_ERR_ARG, "%s: tag %d is negative", fn, tag);
    char *seen = calloc((size_t)p->size, 1);
    if (!seen)
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", fn);
    *myrank = -1;
    for (int i = 0; i < n; i++) {
        if (ranks[i] < 0 || ranks[i] >= p->size || seen[ranks[i]]) {
            int bad = ranks[i];
            free(seen);
            return cadre__error(CADRE_ERR_ARG, "%s: ranks[%d] = %d is %s", fn, i, bad,
                                bad < 0 || bad >= p->size ? "out of range" : "listed twice");
        }
        seen[ranks[i]] = 1;
        if (ranks[i] == p->rank)
            *myrank = i;
    }
    free(seen);
    if (*myrank < 0)
        return cadre__error(CADRE_ERR_ARG,
                            "%s: this rank (%d) is not in ranks[]: only the listed ranks call it",
                            fn, p->rank);
    return CADRE_SUCCESS;
}

/* "{0,2,1}", cut short past a few dozen ranks. */
static void list_text(char *buf, size_t len, const int64_t *l, int64_t n)
{
    size_t k = (size_t)snprintf(buf, len, "{");
    for (int64_t i = 0; i < n && k + 16 < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%lld", i ? "," : "", (long long)l[i]);
    snprintf(buf + k, len > k ? len - k : 0, "%s}", k + 16 < len ? "" : ",...");
}

/* Every member sends its part (`words` int64 at all + myrank * slot) to the
 * others of its list and receives theirs (up to slot words each), on the
 * parent's create_group context with the caller's tag: only the members
 * take part, and creations with other tags (or user messages) never meet
 * this one's. */
static int group_exchange(const char *fn, struct cadre_comm *p, int n, const int *ranks, int tag,
                          int myrank, int64_t *all, size_t slot, size_t words)
{
    if (n == 1)
        return CADRE_SUCCESS;
    const int64_t *mine = all + (size_t)myrank * slot;
    struct coll_sched s;
    cadre__sched_init_on(&s, p, fn, cadre__group_ctx(p), tag);
    int rc = CADRE_SUCCESS;
    for (int i = 0; i < n && rc == CADRE_SUCCESS; i++)
        if (i != myrank) {
            rc = cadre__sched_send(&s, ranks[i], mine, words * sizeof *mine);
            if (rc == CADRE_SUCCESS)
                rc = cadre__sched_recv_upto(&s, ranks[i], all + (size_t)i * slot,
                                            slot * sizeof *all);
        }
    if (rc == CADRE_SUCCESS)
        rc = cadre__sched_barrier(&s);
    if (rc != CADRE_SUCCESS) {
        cadre__sched_free(&s);
        return rc;
    }
    return cadre__sched_run(&s);
}

/* The members' offers; the agreed context and slots, or the member whose
 * list differs (CADRE_ERR_MISMATCH). */
static int group_offers(const char *fn, struct cadre_comm *p, int n, const int *ranks, int tag,
                        int myrank, int64_t *all, size_t slot, uint32_t *ctx, uint64_t *fast)
{
    int64_t *mine = all + (size_t)myrank * slot;
    uint32_t my_ctx;
    uint64_t my_fast;
    cadre__ctx_offer(&my_ctx, &my_fast);
    mine[G_N] = n;
    mine[G_CTX] = my_ctx;
    mine[G_FAST] = (int64_t)my_fast;
    for (int i = 0; i < n; i++)
        mine[G_LIST + i] = ranks[i];
    CADRE_CHECK(group_exchange(fn, p, n, ranks, tag, myrank, all, slot, G_LIST + (size_t)n));
    *ctx = 0;
    *fast = ~0ull;
    for (int i = 0; i < n; i++) {
        const int64_t *e = all + (size_t)i * slot;
        if (e[G_N] != n || memcmp(e + G_LIST, mine + G_LIST, (size_t)n * sizeof *e)) {
            char a[160], b[160];
            list_text(a, sizeof a, e + G_LIST, e[G_N] < 1 || e[G_N] > p->size ? 0 : e[G_N]);
            list_text(b, sizeof b, mine + G_LIST, n);
            return cadre__error(CADRE_ERR_MISMATCH,
                                "%s: rank %d passed ranks %s, rank %d (this rank) passed %s (tag "
                                "%d): every member must pass the same list",
                                fn, ranks[i], a, p->rank, b, tag);
        }
        if ((uint32_t)e[G_CTX] > *ctx)
            *ctx = (uint32_t)e[G_CTX];
        *fast &= (uint64_t)e[G_FAST];
    }
    return CADRE_SUCCESS;
}

/* agree_claims among the members: the lowest of their *ok. */
static int group_agree(const char *fn, struct cadre_comm *p, int n, const int *ranks, int tag,
                       int myrank, int64_t *oks, int *ok, struct ctx_claim *cl, int *rounds)
{
    int mine = *ok;
    oks[myrank] = mine;
    int rc = group_exchange(fn, p, n, ranks, tag, myrank, oks, 1, 1);
    if (rc != CADRE_SUCCESS) {
        cadre__ctx_unclaim(cl);
        return rc;
    }
    for (int i = 0; i < n; i++)
        if (oks[i] < *ok)
            *ok = (int)oks[i];
    return claims_outcome(fn, mine, *ok, "member", cl, rounds);
}

int cadre_comm_create_group(cadre_comm_t comm, int n, const int ranks[], int tag,
                            cadre_comm_t *newcomm)
{
    const char *fn = "cadre_comm_create_group";
    if (!newcomm)
        return cadre__error(CADRE_ERR_ARG, "%s: newcomm is NULL", fn);
    int rc, myrank = -1;
    struct cadre_comm *p = get_parent(fn, comm, &rc);
    if (!p)
        return rc;
    CADRE_CHECK(check_group(fn, p, n, ranks, tag, &myrank));
    size_t slot = G_LIST + (size_t)p->size;
    int64_t *all = calloc((size_t)n * slot, sizeof *all);
    int64_t *oks = calloc((size_t)n, sizeof *oks);
    int *world = malloc((size_t)n * sizeof *world);
    if (!all || !oks || !world) {
        free(all), free(oks), free(world);
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", fn);
    }
    struct ctx_claim cl = {.slot = -1};
    int ok = 0, rounds = 0;
    while (ok != 1) {
        uint32_t ctx;
        uint64_t fast;
        rc = group_offers(fn, p, n, ranks, tag, myrank, all, slot, &ctx, &fast);
        if (rc != CADRE_SUCCESS)
            break;
        ok = cadre__ctx_claim(ctx, fast, &cl);
        rc = group_agree(fn, p, n, ranks, tag, myrank, oks, &ok, &cl, &rounds);
        if (rc != CADRE_SUCCESS)
            break;
    }
    free(all), free(oks);
    if (rc != CADRE_SUCCESS) {
        free(world);
        return rc;
    }
    for (int i = 0; i < n; i++)
        world[i] = cadre__world_rank(p, ranks[i]);
    struct cadre_comm *c;
    rc = new_comm(myrank, n, world, &cl, &c);
    free(world);
    if (rc != CADRE_SUCCESS)
        return cadre__error(rc, "%s: no memory", fn);
    *newcomm = cadre__comm_handle(c);
    return CADRE_SUCCESS;
}

int cadre_comm_dup(cadre_comm_t comm, cadre_comm_t *newcomm)
{
    const char *fn = "cadre_comm_dup";
    if (!newcomm)
        return cadre__error(CADRE_ERR_ARG, "%s: newcomm is NULL", fn);
    int rc;
    struct cadre_comm *p = get_parent(fn, comm, &rc);
    if (!p)
        return rc;
    struct ctx_claim cl = {.slot = -1};
    int ok = 0, rounds = 0;
    while (ok != 1) {
        struct entry *all;
        CADRE_CHECK(exchange(fn, comm, p, 0, 0, &all));
        uint32_t ctx = agreed_ctx(all, p->size);
        uint64_t fast = ~0ull;
        for (int i = 0; i < p->size; i++)
            fast &= (uint64_t)all[i].fast;
        free(all);
        ok = cadre__ctx_claim(ctx, fast, &cl);
        CADRE_CHECK(agree_claims(fn, comm, &ok, &cl, &rounds));
    }
    int *world = malloc((size_t)p->size * sizeof *world);
    if (!world) {
        cadre__ctx_unclaim(&cl);
        return cadre__error(CADRE_ERR_NOMEM, "%s: no memory", fn);
    }
    for (int i = 0; i < p->size; i++)
        world[i] = cadre__world_rank(p, i);
    struct cadre_comm *c;
    rc = new_comm(p->rank, p->size, world, &cl, &c);
    free(world);
    if (rc != CADRE_SUCCESS)
        return cadre__error(rc, "%s: no memory", fn);
    *newcomm = cadre__comm_handle(c);
    return CADRE_SUCCESS;
}

int cadre_comm_free(cadre_comm_t *comm)
{
    const char *fn = "cadre_comm_free";
    if (!comm)
        return cadre__error(CADRE_ERR_ARG, "%s: comm is NULL", fn);
    CADRE_CHECK(cadre__check_initialized(fn));
    if (*comm == CADRE_COMM_WORLD)
        return cadre__error(CADRE_ERR_ARG, "%s: CADRE_COMM_WORLD cannot be freed", fn);
    int rc;
    struct cadre_comm *c = cadre__comm_get(*comm, fn, &rc);
    if (!c)
        return rc;
    free_comm(c);
    *comm = CADRE_COMM_NULL;
    return CADRE_SUCCESS;
}

int cadre_comm_world_rank(cadre_comm_t comm, int rank, int *world_rank)
{
    const char *fn = "cadre_comm_world_rank";
    if (!world_rank)
        return cadre__error(CADRE_ERR_ARG, "%s: world_rank is NULL", fn);
    int rc;
    struct cadre_comm *c = get_parent(fn, comm, &rc);
    if (!c)
        return rc;
    if (rank < 0 || rank >= c->size)
        return cadre__error(CADRE_ERR_ARG, "%s: rank %d out of range [0,%d)", fn, rank, c->size);
    *world_rank = cadre__world_rank(c, rank);
    return CADRE_SUCCESS;
}
