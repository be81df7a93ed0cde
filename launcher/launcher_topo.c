/* What this node offers the job: GPUs (counted without linking CUDA), CPUs,
 * and the GPU and CPU set each rank gets. */
#include "config.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher.h"

#define NVIDIA_GPUS "/proc/driver/nvidia/gpus"

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* PCI addresses of the GPUs the driver knows, in bus order (the order CUDA
 * numbers identical GPUs in). Returns the count; *ids is malloc'ed. */
static int nvidia_gpus(char ***ids)
{
    *ids = NULL;
    DIR *d = opendir(NVIDIA_GPUS);
    if (!d)
        return 0;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            char **more = realloc(*ids, (size_t)cap * sizeof *more);
            if (!more)
                break;
            *ids = more;
        }
        if (!((*ids)[n] = strdup(e->d_name)))
            break;
        n++;
    }
    closedir(d);
    if (n)
        qsort(*ids, (size_t)n, sizeof **ids, cmp_str);
    return n;
}

static void free_ids(char **ids, int n)
{
    for (int i = 0; i < n; i++)
        free(ids[i]);
    free(ids);
}

/* Walks CUDA_VISIBLE_DEVICES as CUDA does: the list ends at the first entry
 * that names no device. Fills phys[i] with the physical index of visible
 * device i (-1 for a UUID, which we cannot map). Returns the visible count. */
static int visible_gpus(int nphys, int *phys, int max)
{
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    if (!cvd) {
        for (int i = 0; i < nphys && i < max; i++)
            phys[i] = i;
        return nphys < max ? nphys : max;
    }
    int n = 0;
    for (const char *p = cvd; *p && n < max;) {
        while (*p == ' ')
            p++;
        size_t len = strcspn(p, ",");
        char tok[128];
        snprintf(tok, sizeof tok, "%.*s", (int)len, p);
        char *end;
        long v = strtol(tok, &end, 10);
        if (end != tok && (*end == '\0' || *end == ' ')) {
            if (v < 0 || v >= nphys)
                break;
            phys[n++] = (int)v;
        } else if (!strncmp(tok, "GPU-", 4) || !strncmp(tok, "MIG-", 4)) {
            phys[n++] = -1;
        } else {
            break;
        }
        p += len;
        if (*p == ',')
            p++;
    }
    return n;
}

int cadre__launcher_gpu_count(void)
{
    long forced = cadre__config_int(CADRE_CFG_LAUNCHER_NGPUS);
    if (forced >= 0)
        return forced > 65535 ? 65535 : (int)forced;
    char **ids;
    int nphys = nvidia_gpus(&ids);
    free_ids(ids, nphys);
    if (nphys == 0)
        return 0;
    int phys[256];
    return visible_gpus(nphys, phys, 256);
}

int cadre__launcher_cpu_count(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Reads a kernel cpulist file ("0-3,8-11") into set. Returns -1 if absent. */
static int read_cpulist(const char *path, cpu_set_t *set)
{
    CPU_ZERO(set);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char buf[4096];
    int ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    if (!ok)
        return -1;
    for (char *p = buf; *p && *p != '\n';) {
        char *end;
        long a = strtol(p, &end, 10), b = a;
        if (end == p)
            break;
        if (*end == '-')
            b = strtol(end + 1, &end, 10);
        for (long c = a; c <= b && c < CPU_SETSIZE; c++)
            if (c >= 0)
                CPU_SET((int)c, set);
        p = *end == ',' ? end + 1 : end;
        if (*end != ',')
            break;
    }
    return 0;
}

/* NUMA node of the PCI device behind each visible GPU, -1 when unknown. */
static void gpu_numa_nodes(int *node, int ngpus)
{
    for (int i = 0; i < ngpus; i++)
        node[i] = -1;
    if (cadre__config_int(CADRE_CFG_LAUNCHER_NGPUS) >= 0)
        return; /* a forced count names no real devices */
    char **ids;
    int nphys = nvidia_gpus(&ids);
    int phys[256];
    int nvis = visible_gpus(nphys, phys, 256);
    for (int i = 0; i < nvis && i < ngpus; i++) {
        if (phys[i] < 0)
            continue;
        char path[512];
        snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/numa_node", ids[phys[i]]);
        FILE *f = fopen(path, "r");
        if (f) {
            if (fscanf(f, "%d", &node[i]) != 1)
                node[i] = -1;
            fclose(f);
        }
    }
    free_ids(ids, nphys);
}

/* Groups of CPUs (cores or NUMA nodes) within the allowed set. */
struct cpu_groups {
    int n;
    int id[CPU_SETSIZE]; /* NUMA node number, or first CPU of a core */
    cpu_set_t set[CPU_SETSIZE];
};

static void core_groups(const cpu_set_t *allowed, struct cpu_groups *g)
{
    cpu_set_t done;
    CPU_ZERO(&done);
    g->n = 0;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, allowed) || CPU_ISSET(c, &done))
            continue;
        char path[128];
        cpu_set_t sib;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", c);
        if (read_cpulist(path, &sib) != 0 || !CPU_ISSET(c, &sib)) {
            CPU_ZERO(&sib);
            CPU_SET(c, &sib);
        }
        CPU_AND(&g->set[g->n], &sib, allowed);
        CPU_OR(&done, &done, &g->set[g->n]);
        g->id[g->n++] = c;
    }
}

static void numa_groups(const cpu_set_t *allowed, struct cpu_groups *g)
{
    g->n = 0;
    DIR *d = opendir("/sys/devices/system/node");
    struct dirent *e;
    while (d && (e = readdir(d)) && g->n < CPU_SETSIZE) {
        int node;
        char rest;
        if (sscanf(e->d_name, "node%d%c", &node, &rest) != 1)
            continue;
        char path[128];
        cpu_set_t cpus;
        snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", node);
        if (read_cpulist(path, &cpus) != 0)
            continue;
        CPU_AND(&cpus, &cpus, allowed);
        if (CPU_COUNT(&cpus) == 0)
            continue;
        /* Keep the groups in node order: readdir's order is arbitrary. */
        int at = g->n;
        while (at > 0 && g->id[at - 1] > node) {
            g->id[at] = g->id[at - 1];
            g->set[at] = g->set[at - 1];
            at--;
        }
        g->id[at] = node;
        g->set[at] = cpus;
        g->n++;
    }
    if (d)
        closedir(d);
    if (g->n == 0) { /* no sysfs: one node holding everything */
        g->id[0] = 0;
        g->set[0] = *allowed;
        g->n = 1;
    }
}

static void format_cpus(const cpu_set_t *set, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int c = 0; c < CPU_SETSIZE && off + 16 < len; c++) {
        if (!CPU_ISSET(c, set))
            continue;
        int e = c;
        while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set))
            e++;
        off += (size_t)snprintf(buf + off, len - off, off ? ",%d" : "%d", c);
        if (e > c)
            off += (size_t)snprintf(buf + off, len - off, "-%d", e);
        c = e;
    }
}

int cadre__launcher_plan(struct cadre__launcher_job *job)
{
    const struct cadre__launcher_opts *o = job->opts;
    for (int r = 0; r < job->nranks; r++) {
        struct cadre__launcher_rank *rk = &job->ranks[r];
        rk->job = job;
        rk->rank = r;
        rk->local_rank = r; /* one node */
        rk->pid = -1;
        rk->stdio[0] = rk->stdio[1] = rk->stdio[2] = -1;
        rk->out.fd = rk->err.fd = -1;
        if (job->ngpus == 0)
            rk->gpu = -1;
        else if (o->ranks_per_gpu)
            rk->gpu = (rk->local_rank / o->ranks_per_gpu) % job->ngpus;
        else
            rk->gpu = rk->local_rank % job->ngpus;
    }

    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return 0; /* cannot tell what we may use: leave ranks unbound */
    struct cpu_groups *cores = malloc(sizeof *cores);
    if (!cores) {
        cadre__launcher_say("out of memory");
        return -1;
    }
    core_groups(&allowed, cores);
    int bind = o->bind;
    if (bind == BIND_DEFAULT)
        bind = job->ngpus ? BIND_NUMA : job->nranks <= cores->n ? BIND_CORE : BIND_NONE;
    if (bind == BIND_NONE) {
        free(cores);
        CADRE_INFO(LAUNCHER, "ranks are not bound to CPUs");
        return 0;
    }
    /* Asked for explicitly (the default binds to cores only when the ranks
     * fit): ranks that share a core take turns on it, and a rank that spins
     * while waiting holds up the one it waits for. */
    if (bind == BIND_CORE && job->nranks > cores->n)
        cadre__launcher_say("warning: --bind-to core: %d ranks on %d core(s); up to %d ranks "
                            "share each core (rank r on core r %% %d); --bind-to none lets the "
                            "kernel spread them",
                            job->nranks, cores->n, (job->nranks + cores->n - 1) / cores->n,
                            cores->n);
    struct cpu_groups *g = cores;
    int gnode[256];
    if (bind == BIND_NUMA) {
        numa_groups(&allowed, g);
        gpu_numa_nodes(gnode, job->ngpus < 256 ? job->ngpus : 256);
    }
    for (int r = 0; r < job->nranks; r++) {
        struct cadre__launcher_rank *rk = &job->ranks[r];
        int k = -1;
        if (bind == BIND_CORE) {
            k = rk->local_rank % g->n;
        } else {
            /* Next to the rank's GPU when sysfs says where that is; else
             * consecutive ranks share a node. */
            int node = rk->gpu >= 0 && rk->gpu < 256 ? gnode[rk->gpu] : -1;
            for (int i = 0; i < g->n && node >= 0; i++)
                if (g->id[i] == node)
                    k = i;
            if (k < 0)
                k = (int)((long)rk->local_rank * g->n / job->nranks);
        }
        rk->cpus = g->set[k];
        /* The whole allowed set is no binding at all. */
        rk->bound = !CPU_EQUAL(&rk->cpus, &allowed);
        if (cadre__log_enabled(CADRE_LOG_INFO, CADRE_SUBSYS_LAUNCHER)) {
            char list[256];
            format_cpus(&rk->cpus, list, sizeof list);
            CADRE_INFO(LAUNCHER, "rank %d: GPU %d, bound to %s %d (CPUs %s)%s", r, rk->gpu,
                       bind == BIND_CORE ? "core" : "NUMA node", g->id[k], list,
                       rk->bound ? "" : ", which is every CPU we have");
        }
    }
    free(cores);
    return 0;
}
