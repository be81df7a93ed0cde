/*
 * The choice of algorithm for a call: the communicator's facts for the
 * tables of coll_select.c, CADRE_ALGO (read once), and the COLL INFO line
 * that says which algorithm ran and why, once per (collective, algorithm,
 * size class) and communicator. May call runtime (config, log), p2p (the
 * communicator's peers, through coll_direct.c and coll_fast.c) and the
 * device path's cadre__gpu_enabled (runtime/runtime_device.h).
 */
#include <pthread.h>
#include <stdio.h>

#include "coll_call.h"

/* ---- CADRE_ALGO ------------------------------------------------------------------ */
static enum coll_algo forced[COLL_NKINDS];
static pthread_once_t algo_once = PTHREAD_ONCE_INIT;

static void bad_entry(const char *entry)
{
    CADRE_WARN(COLL, "CADRE_ALGO: ignoring \"%s\" (collective=algorithm; see cadre-collectives(7))", entry);
}

static void parse_algo(void)
{
    cadre__coll_algo_parse(cadre__config_str(CADRE_CFG_ALGO), forced, bad_entry);
}

/* ---- the communicator's facts --------------------------------------------------- */
/* The hosts c spans (its grouping by host is made once, coll_hier.c). */
static int comm_hosts(struct cadre_comm *c)
{
    struct coll_hier *h = cadre__hier_get(c);
    return h ? h->nh : 1;
}

/* The two-level stage's collective, or -1 where it has none. */
static int hier_kind(enum coll_kind k)
{
    switch (k) {
    case COLL_BARRIER: return HK_BARRIER;
    case COLL_BCAST: return HK_BCAST;
    case COLL_REDUCE: return HK_REDUCE;
    case COLL_ALLREDUCE: return HK_ALLREDUCE;
    case COLL_ALLGATHER: return HK_ALLGATHER;
    case COLL_REDUCE_SCATTER: return HK_REDUCE_SCATTER;
    default: return -1;
    }
}

/* Asked only by a rule that needs it, as the calls asked before the tables
 * (the direct test reads every member's transport). */
static int ask(const struct coll_in *in, enum coll_fact f)
{
    struct cadre_comm *c = in->comm;
    return f == COLL_FACT_SLOTS ? cadre__fast_get(c) != NULL : cadre__direct_usable(c);
}

/* ---- the log ----------------------------------------------------------------------- */
/* The (communicator, collective, algorithm, size class) already logged. The
 * handle names the communicator: a freed one's is never given again. */
struct logged {
    cadre_comm_t comm;
    uint32_t key;
};
static struct logged *seen;
static size_t nseen, capseen;
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;

/* Whether this is the first such choice here (and remembers it). */
static int first_time(cadre_comm_t comm, uint32_t key)
{
    int first = 1;
    pthread_mutex_lock(&seen_lock);
    for (size_t i = 0; i < nseen && first; i++)
        first = !(seen[i].comm == comm && seen[i].key == key);
    if (first && nseen == capseen) {
        size_t cap = capseen ? 2 * capseen : 64;
        struct logged *m = realloc(seen, cap * sizeof *m);
        if (m)
            seen = m, capseen = cap;
    }
    if (first && nseen < capseen)
        seen[nseen++] = (struct logged){comm, key};
    pthread_mutex_unlock(&seen_lock);
    return first;
}

/* Size class: 0 for 0 bytes, else 1 + floor(log2(bytes)). */
static unsigned size_class(size_t bytes)
{
    return bytes ? 64u - (unsigned)__builtin_clzll((unsigned long long)bytes) : 0;
}

void cadre__coll_log_choice(struct cadre_comm *comm, enum coll_kind k, enum coll_algo a,
                            size_t bytes, int hosts, const char *why)
{
    if (!cadre__log_enabled(CADRE_LOG_INFO, CADRE_SUBSYS_COLL))
        return;
    uint32_t key = (uint32_t)k << 16 | (uint32_t)a << 8 | size_class(bytes);
    if (!first_time(comm->handle, key))
        return;
    cadre__log(CADRE_LOG_INFO, CADRE_SUBSYS_COLL, "%s: algorithm %s (%zu bytes, %d ranks, %d hosts: %s)",
               cadre__coll_kind_name(k), cadre__coll_algo_name(a), bytes, comm->size, hosts, why);
}

static void log_choice(const struct call *c, const struct coll_in *in,
                       const struct coll_choice *ch)
{
    char why[256];
    cadre__coll_select_why(in, ch, why, sizeof why);
    cadre__coll_log_choice(c->comm, in->kind, ch->algo, in->bytes, in->hosts, why);
}

void cadre__coll_choose(const struct call *c, struct coll_in *in, struct coll_choice *ch)
{
    pthread_once(&algo_once, parse_algo);
    in->n = c->n;
    in->hosts = comm_hosts(c->comm);
    in->device = cadre__gpu_enabled();
    in->slots = in->local = -1;
    in->ask = ask;
    in->comm = c->comm;
    /* The two-level stage first, on a communicator over several hosts (it
     * logs its own choice): by its rules or CADRE_ALGO's hier_* names. */
    int hk = hier_kind(in->kind);
    int h = hk < 0 || in->hosts < 2 ? HA_NONE
                                    : cadre__hier_pick(c->comm, hk, in->bytes, forced[in->kind] != COLL_ALGO_NONE);
    if (h != HA_NONE) {
        *ch = (struct coll_choice){.algo = h == HA_LEADER  ? COLL_ALGO_HIER_LEADER
                                           : h == HA_SPLIT ? COLL_ALGO_HIER_SPLIT
                                                           : COLL_ALGO_HIER_RING,
                                   .rule = -1};
        return;
    }
    cadre__coll_select(in, forced[in->kind], ch);
    if (cadre__log_enabled(CADRE_LOG_INFO, CADRE_SUBSYS_COLL))
        log_choice(c, in, ch);
}
