/* Locality: which ranks share a host. Each rank names its host by a key,
 * CADRE_HOSTID when set, else the launcher's node id (PMIX_NODEID), else the
 * hostname (a singleton, a launcher that gives no node id); the keys travel
 * hashed, with a display name, in the engine's proc blob. Hosts get dense
 * indices in the order of their lowest world rank, the same at every rank.
 * Shared memory is used only within a host, and the two-level collectives
 * (coll/coll_hier*.c) group ranks by these indices.
 *
 * Hosts that are containers or network namespaces of one machine share its
 * cores: each rank also publishes its kernel's boot id, and the ranks with
 * the same one count for whether the cores are oversubscribed (the engine's
 * waits then yield instead of spinning), never for shared memory. The cores
 * are those the machine's ranks may run on, together: each rank publishes
 * its affinity mask too, so that a job given fewer cores than ranks (a
 * launcher under taskset, a cgroup's cpuset) counts as oversubscribed. */
#include "config.h"

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "p2p_engine.h"

static struct {
    int nranks, nhosts, machine_ranks, machine_cpus;
    int *host;     /* by world rank: dense host index */
    uint64_t *key; /* by world rank, until the indices are made */
    uint64_t *machine;
    uint64_t (*cpus)[CADRE_CPU_WORDS]; /* by world rank, until hosts_end */
    char (*name)[CADRE_HOST_NAME_MAX];
    char **names; /* by host index */
} L;

static uint64_t fnv1a(const char *s, uint64_t h)
{
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

/* A hash of /proc/sys/kernel/random/boot_id (new at every boot of a kernel,
 * the same in every namespace of it), or 0. */
static uint64_t machine_self(void)
{
    char buf[64];
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n < 16)
        return 0;
    buf[n] = '\0';
    uint64_t h = fnv1a(buf, 0xcbf29ce484222325ull);
    return h ? h : 1;
}

/* The CPUs this process may run on, as CADRE_CPU_WORDS words of bits; all
 * zero when the kernel does not say (more CPUs than cpu_set_t names). */
static void cpus_self(uint64_t *w)
{
    cpu_set_t set;
    memset(w, 0, CADRE_CPU_WORDS * sizeof *w);
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return;
    for (int c = 0; c < CPU_SETSIZE && c < 64 * CADRE_CPU_WORDS; c++)
        if (CPU_ISSET(c, &set))
            w[c / 64] |= (uint64_t)1 << (c % 64);
}

void cadre__p2p_host_self(struct cadre_host_id *id)
{
    id->machine = machine_self();
    cpus_self(id->cpus);
    char hn[256] = "";
    if (gethostname(hn, sizeof hn - 1) != 0 || !hn[0])
        snprintf(hn, sizeof hn, "localhost");
    const char *forced = cadre__config_str(CADRE_CFG_HOSTID);
    char key[320];
    if (forced[0]) {
        snprintf(key, sizeof key, "id:%s", forced);
        snprintf(id->name, sizeof id->name, "%s", forced);
    }
    else {
        if (cadre__proc.has_node_id)
            snprintf(key, sizeof key, "node:%d", cadre__proc.node_id);
        else
            snprintf(key, sizeof key, "host:%s", hn);
        snprintf(id->name, sizeof id->name, "%s", hn);
    }
    id->key = fnv1a(key, 0xcbf29ce484222325ull);
}

int cadre__p2p_hosts_begin(int nranks)
{
    cadre__p2p_hosts_free();
    L.nranks = nranks;
    L.host = calloc((size_t)nranks, sizeof *L.host);
    L.key = calloc((size_t)nranks, sizeof *L.key);
    L.machine = calloc((size_t)nranks, sizeof *L.machine);
    L.name = calloc((size_t)nranks, sizeof *L.name);
    L.names = calloc((size_t)nranks, sizeof *L.names);
    L.cpus = calloc((size_t)nranks, sizeof *L.cpus);
    if (!L.host || !L.key || !L.machine || !L.name || !L.names || !L.cpus) {
        cadre__p2p_hosts_free();
        return cadre__error(CADRE_ERR_NOMEM, "cadre_init: no memory for the host table");
    }
    return CADRE_SUCCESS;
}

void cadre__p2p_hosts_set(int w, const struct cadre_host_id *id)
{
    L.key[w] = id->key;
    L.machine[w] = id->machine;
    memcpy(L.name[w], id->name, sizeof L.name[w]);
    L.name[w][CADRE_HOST_NAME_MAX - 1] = '\0';
    memcpy(L.cpus[w], id->cpus, sizeof L.cpus[w]);
}

/* Whether world rank w runs on rank me's machine: its host, or a host with
 * the same kernel (hosts_end has numbered the hosts). */
static int same_machine(int me, int w)
{
    return L.host[w] == L.host[me] || (L.machine[me] && L.machine[w] == L.machine[me]);
}

/* The CPUs the ranks of this machine may run on together, or 0 when a
 * rank's mask is unknown. */
static int machine_cpus(int me)
{
    uint64_t all[CADRE_CPU_WORDS] = {0};
    for (int w = 0; w < L.nranks; w++) {
        if (!same_machine(me, w))
            continue;
        uint64_t any = 0;
        for (int i = 0; i < CADRE_CPU_WORDS; i++) {
            all[i] |= L.cpus[w][i];
            any |= L.cpus[w][i];
        }
        if (!any)
            return 0;
    }
    int n = 0;
    for (int i = 0; i < CADRE_CPU_WORDS; i++)
        n += __builtin_popcountll(all[i]);
    return n;
}

void cadre__p2p_hosts_end(void)
{
    /* Quadratic in the ranks, once at init: a host is new when no lower
     * rank has its key. */
    L.nhosts = 0;
    for (int w = 0; w < L.nranks; w++) {
        int h = -1;
        for (int v = 0; v < w && h < 0; v++)
            if (L.key[v] == L.key[w])
                h = L.host[v];
        if (h < 0) {
            h = L.nhosts++;
            L.names[h] = L.name[w];
        }
        L.host[w] = h;
    }
    int me = cadre__proc.rank, mine = L.host[me];
    L.machine_ranks = 0;
    for (int w = 0; w < L.nranks; w++)
        L.machine_ranks += same_machine(me, w);
    L.machine_cpus = machine_cpus(me);
    free(L.cpus);
    L.cpus = NULL;
    if (!cadre__log_enabled(CADRE_LOG_INFO, CADRE_SUBSYS_P2P))
        return;
    char list[1024];
    size_t len = 0;
    list[0] = '\0';
    for (int w = 0; w < L.nranks && len < sizeof list - 16; w++)
        if (L.host[w] == mine)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%d", len ? "," : "", w);
    if (len >= sizeof list - 16)
        snprintf(list + len, sizeof list - len, ",...");
    CADRE_INFO(P2P, "locality: host %d of %d (%s), ranks on this host: %s", mine, L.nhosts,
               L.names[mine], list);
}

void cadre__p2p_hosts_free(void)
{
    free(L.host);
    free(L.key);
    free(L.machine);
    free(L.name);
    free(L.names);
    free(L.cpus);
    memset(&L, 0, sizeof L);
}

int cadre__p2p_nhosts(void)
{
    return L.host ? L.nhosts : 1;
}

int cadre__p2p_host_of(int w)
{
    return L.host && w >= 0 && w < L.nranks ? L.host[w] : 0;
}

int cadre__p2p_machine_ranks(void)
{
    return L.host ? L.machine_ranks : cadre__proc.local_size;
}

int cadre__p2p_machine_cpus(void)
{
    return L.host ? L.machine_cpus : 0;
}

int cadre__p2p_same_host(int w)
{
    return cadre__p2p_host_of(w) == cadre__p2p_host_of(cadre__proc.rank);
}
