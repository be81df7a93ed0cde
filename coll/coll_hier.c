/* Two-level collectives: a communicator's members grouped by host, and the
 * choice between the flat algorithms and the host-aware ones (by hosts,
 * ranks per host and size, or CADRE_ALGO's hier_* names), logged once per
 * size class. The schedules are in coll_hier_algos.c. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_hier.h"
#include "coll_select.h"

static const char *const kind_names[HK_COUNT] = {"barrier", "bcast", "reduce", "allreduce",
                                                 "allgather", "reduce_scatter"};
static const char *const algo_names[HA_COUNT] = {"flat", "hier_leader", "hier_split", "hier_ring"};
/* Which algorithms each collective has (bit a: algorithm a). */
static const unsigned kind_algos[HK_COUNT] = {
    [HK_BARRIER] = 1u << HA_LEADER,
    [HK_BCAST] = 1u << HA_LEADER | 1u << HA_RING,
    [HK_REDUCE] = 1u << HA_LEADER,
    [HK_ALLREDUCE] = 1u << HA_LEADER | 1u << HA_SPLIT | 1u << HA_RING,
    [HK_ALLGATHER] = 1u << HA_RING,
    [HK_REDUCE_SCATTER] = 1u << HA_RING,
};


/* ---- CADRE_ALGO: the hier_* entries (coll_api.c reads the others) ------------------ */
static int forced[HK_COUNT];
static pthread_once_t algo_once = PTHREAD_ONCE_INIT;

static void parse_algo(void)
{
    const char *v = cadre__config_str(CADRE_CFG_ALGO);
    char buf[512];
    snprintf(buf, sizeof buf, "%s", v);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq || strncmp(eq + 1, "hier_", 5))
            continue;
        *eq = '\0';
        int ok = 0;
        for (int k = 0; k < HK_COUNT; k++)
            for (int a = 1; a < HA_COUNT; a++)
                if (!strcmp(tok, kind_names[k]) && !strcmp(eq + 1, algo_names[a]) &&
                    (kind_algos[k] >> a & 1))
                    forced[k] = a, ok = 1;
        if (!ok)
            CADRE_WARN(COLL, "CADRE_ALGO: ignoring \"%s=%s\" (the hier_* algorithms of each "
                             "collective are listed in cadre-nodes(7))", tok, eq + 1);
    }
}

/* ---- host grouping ------------------------------------------------------------------- */
static void hier_free(struct coll_hier *h)
{
    if (!h)
        return;
    free(h->host);
    free(h->order);
    free(h->start);
    free(h);
}

static void world_release(void)
{
    cadre__hier_release(&cadre__comm_world);
}

static struct coll_hier *hier_make(struct cadre_comm *c)
{
    int n = c->size;
    struct coll_hier *h = calloc(1, sizeof *h);
    int nhosts = cadre__p2p_nhosts();
    int nmap = nhosts > n ? nhosts : n;
    int *ph = malloc((size_t)n * sizeof *ph);      /* the job's host index by rank */
    int *map = malloc((size_t)nmap * sizeof *map); /* job's host index -> this one's */
    if (h) {
        h->host = malloc((size_t)n * sizeof *h->host);
        h->order = malloc((size_t)n * sizeof *h->order);
        h->start = calloc((size_t)n + 1, sizeof *h->start);
    }
    if (!h || !ph || !map || !h->host || !h->order || !h->start) {
        hier_free(h);
        free(ph);
        free(map);
        cadre__error(CADRE_ERR_NOMEM, "no memory for the host grouping of %d ranks", n);
        return NULL;
    }
    /* The job's host indices, renumbered by lowest rank of this
     * communicator, so that every member derives the same grouping. */
    for (int i = 0; i < nmap; i++)
        map[i] = -1;
    for (int q = 0; q < n; q++) {
        int w = cadre__world_rank(c, q);
        ph[q] = cadre__p2p_host_of(w);
        if (map[ph[q]] < 0)
            map[ph[q]] = h->nh++;
        h->host[q] = map[ph[q]];
    }
    for (int q = 0; q < n; q++)
        h->start[h->host[q] + 1]++;
    h->minl = n;
    for (int k = 0; k < h->nh; k++) {
        int l = h->start[k + 1];
        if (l < h->minl)
            h->minl = l;
        if (l > h->maxl)
            h->maxl = l;
        h->start[k + 1] += h->start[k];
    }
    int *fill = map; /* reused: next free place of each host */
    for (int k = 0; k < h->nh; k++)
        fill[k] = h->start[k];
    for (int q = 0; q < n; q++) {
        if (q == c->rank)
            h->myl = fill[h->host[q]] - h->start[h->host[q]];
        h->order[fill[h->host[q]]++] = q;
    }
    h->myh = h->host[c->rank];
    free(ph);
    free(map);
    return h;
}

struct coll_hier *cadre__hier_get(struct cadre_comm *c)
{
    struct coll_hier *h = __atomic_load_n(&c->hier, __ATOMIC_ACQUIRE);
    if (h)
        return h;
    h = hier_make(c);
    if (!h)
        return NULL;
    void *none = NULL;
    /* Collectives on one communicator are not concurrent, but a world's
     * first ones on two threads of other communicators may meet here. */
    if (!__atomic_compare_exchange_n(&c->hier, &none, h, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        hier_free(h);
        return none;
    }
    if (c == &cadre__comm_world)
        cadre__at_finalize(world_release);
    return h;
}

void cadre__hier_release(struct cadre_comm *c)
{
    hier_free(c->hier);
    c->hier = NULL;
}

/* ---- the choice ---------------------------------------------------------------------- */
/* The thresholds live in coll_select.c's two-level stage. */
static int auto_pick(const struct coll_hier *h, int kind, size_t bytes, const char **why)
{
    static const enum coll_kind as_coll[HK_COUNT] = {
        [HK_BARRIER] = COLL_BARRIER, [HK_BCAST] = COLL_BCAST, [HK_REDUCE] = COLL_REDUCE,
        [HK_ALLREDUCE] = COLL_ALLREDUCE, [HK_ALLGATHER] = COLL_ALLGATHER,
        [HK_REDUCE_SCATTER] = COLL_REDUCE_SCATTER};
    enum coll_algo a = cadre__coll_select_hosts(as_coll[kind], bytes, h->nh, h->minl, h->maxl, why);
    return a == COLL_ALGO_HIER_LEADER ? HA_LEADER
           : a == COLL_ALGO_HIER_SPLIT ? HA_SPLIT
           : a == COLL_ALGO_HIER_RING  ? HA_RING
                                       : HA_NONE;
}

int cadre__hier_pick(struct cadre_comm *c, int kind, size_t bytes, int flat_forced)
{
    pthread_once(&algo_once, parse_algo);
    const char *why;
    int a;
    struct coll_hier *h = cadre__hier_get(c);
    if (!h)
        return HA_NONE; /* no memory for the grouping: the flat algorithms need none */
    if (forced[kind]) {
        a = forced[kind];
        why = "CADRE_ALGO";
        if (a == HA_SPLIT && h->minl != h->maxl) {
            a = HA_RING;
            why = "CADRE_ALGO=hier_split, hosts of different sizes";
        }
    }
    else if (flat_forced)
        return HA_NONE;
    else
        a = auto_pick(h, kind, bytes, &why);
    if (a == HA_NONE)
        return a;
    int cls = bytes ? 64 - __builtin_clzll((unsigned long long)bytes) : 0;
    uint64_t bit = 1ull << (cls > 63 ? 63 : cls);
    if (!(h->logged[kind][a] & bit)) {
        h->logged[kind][a] |= bit;
        CADRE_INFO(COLL, "%s: algorithm %s (%zu bytes, %d ranks, %d hosts, %d-%d per host: %s)",
                   kind_names[kind], algo_names[a], bytes, c->size, h->nh, h->minl, h->maxl, why);
    }
    return a;
}
