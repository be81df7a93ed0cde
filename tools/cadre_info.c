/* cadre-info: what this cadre is and what it can use here: version and
 * configure line, the transports built and whether each is usable on this
 * machine, the GPUs with the CUDA runtime and driver versions, and every
 * tunable. Each section has an option that shows it alone (the table
 * `sections`: a new section is one line there and its function). */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cadre.h"
#include "coll/coll_select.h"
#include "config.h"
#include "info_configure.h"
#include "p2p/p2p_ucx_load.h"
#if HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

struct tunable {
    const char *name, *type, *def, *help;
};
static const struct tunable tunables[] = {
#define X(id, type, def, help) {"CADRE_" #id, #type, def, help},
#include "runtime/runtime_config_table.h"
#undef X
};

/* "label : value" lines of the first sections line up on this width. */
#define LABEL_W 18

static void show_build(void)
{
    int ma, mi, pa;
    cadre_version(&ma, &mi, &pa);
    printf("%-*s: %d.%d.%d\n", LABEL_W, "cadre version", ma, mi, pa);
    printf("%-*s: %s\n", LABEL_W, "configure", CADRE_CONFIGURE_ARGS[0] ? CADRE_CONFIGURE_ARGS
                                                                      : "(no arguments)");
    printf("%-*s: %s\n", LABEL_W, "CUDA", HAVE_CUDA ? "built in" : "not built in");
    printf("%-*s: %s\n", LABEL_W, "UCX", HAVE_UCX ? "built in (libucp loaded when used)"
                                                  : "not built in");
}

/* Whether CADRE_TRANSPORT lets `name` be used (empty: every transport). */
static int transport_allowed(const char *name)
{
    const char *list = getenv("CADRE_TRANSPORT");
    if (!list || !*list)
        return 1;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && !strncmp(p, name, n))
            return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

/* shm's segments are memfds (p2p/p2p_shm.c): it is usable where one can be
 * made and mapped. */
static const char *shm_usable(void)
{
    int fd = (int)syscall(SYS_memfd_create, "cadre-info", 0);
    if (fd < 0)
        return "no: memfd_create failed";
    const char *why = NULL;
    void *p = MAP_FAILED;
    if (ftruncate(fd, 4096) != 0 ||
        (p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
        why = "no: a memfd cannot be mapped";
    if (p != MAP_FAILED)
        munmap(p, 4096);
    close(fd);
    return why;
}

/* tcp is usable where an IPv4 socket can be made; its addresses are those of
 * the interfaces that are up. */
static const char *tcp_usable(char *addrs, size_t cap)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0)
        return "no: socket(AF_INET) failed";
    close(s);
    struct ifaddrs *ifs;
    size_t len = 0;
    addrs[0] = '\0';
    if (getifaddrs(&ifs) == 0) {
        for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
            if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP))
                continue;
            char ip[INET_ADDRSTRLEN];
            inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr, ip, sizeof ip);
            if (len < cap)
                len += (size_t)snprintf(addrs + len, cap - len, "%s%s %s", len ? ", " : "",
                                        i->ifa_name, ip);
        }
        freeifaddrs(ifs);
    }
    return addrs[0] ? NULL : "no: no IPv4 interface is up";
}

/* GPUs visible to this process, or -1 when CUDA cannot say. */
static int gpu_count(void)
{
#if HAVE_CUDA
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess)
        return -1;
    return n;
#else
    return 0;
#endif
}

/* ucx is usable where libucp loads and a context starts (CADRE_UCX_LIB,
 * UCX_TLS and UCX_NET_DEVICES apply, as in a rank); what it carries: the
 * UCX version, its transports and devices, and device memory or not. */
static const char *ucx_usable(char *what, size_t cap, char *why, size_t whycap)
{
    struct cadre_ucx_info info;
    const char *lib = getenv("CADRE_UCX_LIB");
    if (!HAVE_UCX) {
        snprintf(what, cap, "off-host peers over UCX (InfiniBand, RoCE)");
        return "no: not built";
    }
    if (cadre__ucx_probe(lib && *lib ? lib : "libucp.so.0", &info, why, whycap)) {
        snprintf(what, cap, "off-host peers over UCX (InfiniBand, RoCE); %s", why);
        return "no: libucp unusable";
    }
    snprintf(what, cap,
             "off-host peers over UCX %s (%s); transports: %s; CUDA memory: %s",
             info.version,
             info.rdma ? "RDMA offered: used by default"
                       : "no RDMA offered: tcp by default, ucx where CADRE_TRANSPORT names it",
             info.resources[0] ? info.resources : "none",
             info.cuda ? "yes (cadre stages device buffers all the same)" : "no (staged)");
    return NULL;
}

static void show_transports(void)
{
    char addrs[512], ucx_what[1200], ucx_why[512];
    const char *shm = shm_usable(), *tcp = tcp_usable(addrs, sizeof addrs);
    const char *ucx = ucx_usable(ucx_what, sizeof ucx_what, ucx_why, sizeof ucx_why);
    char tcp_what[600];
    snprintf(tcp_what, sizeof tcp_what, "any two ranks; interfaces up: %s",
             addrs[0] ? addrs : "none");
    int ngpu = gpu_count();
    const char *ipc = !HAVE_CUDA  ? "no: CUDA not built in"
                      : ngpu <= 0 ? "no: no GPU visible"
                                  : NULL;
    const struct {
        const char *name;
        int built;
        const char *unusable, *what;
    } t[] = {
        {"shm", 1, shm, "host buffers between ranks of one node (memfd segments)"},
        {"tcp", 1, tcp, tcp_what},
        {"ucx", HAVE_UCX, ucx, ucx_what},
        {"cuda_ipc", HAVE_CUDA, ipc, "device buffers between ranks of one node (CUDA IPC)"},
    };
    printf("%-10s %-6s %-28s %s\n", "transport", "built", "usable here", "carries");
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const char *usable = t[i].unusable ? t[i].unusable : "yes";
        if (!t[i].unusable && !transport_allowed(t[i].name))
            usable = "no: not in CADRE_TRANSPORT";
        printf("%-10s %-6s %-28s %s\n", t[i].name, t[i].built ? "yes" : "no", usable, t[i].what);
    }
}

static void show_devices(void)
{
#if HAVE_CUDA
    int rt = 0, drv = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv); /* 0 when no driver is installed */
    printf("%-*s: %d.%d\n", LABEL_W, "CUDA runtime", rt / 1000, rt % 1000 / 10);
    if (drv)
        printf("%-*s: %d.%d\n", LABEL_W, "CUDA driver", drv / 1000, drv % 1000 / 10);
    else
        printf("%-*s: none installed\n", LABEL_W, "CUDA driver");
    int n = gpu_count();
    printf("%-*s: %d\n", LABEL_W, "GPUs visible", n < 0 ? 0 : n);
    for (int d = 0; d < n; d++) {
        struct cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, d) == cudaSuccess)
            printf("%-*s: %s, %zu MiB, compute capability %d.%d\n", LABEL_W, "", p.name,
                   p.totalGlobalMem >> 20, p.major, p.minor);
    }
#endif
    /* cadre_init binds a GPU as it would for a rank; as a singleton it is
     * cheap. */
    int dev = -1;
    if (cadre_init(NULL, NULL) == CADRE_SUCCESS) {
        cadre_device(&dev);
        cadre_finalize();
    }
    char bound[32];
    snprintf(bound, sizeof bound, "device %d", dev);
    printf("%-*s: %s\n", LABEL_W, "GPU bound",
           !HAVE_CUDA ? "none (CUDA not built in)" : dev >= 0 ? bound : "none (no GPU visible)");
}

static void show_tunables(void)
{
    int wn = (int)strlen("tunable"), wt = (int)strlen("type"), wd = (int)strlen("default");
    for (size_t i = 0; i < sizeof tunables / sizeof tunables[0]; i++) {
        int n = (int)strlen(tunables[i].name), t = (int)strlen(tunables[i].type);
        int d = tunables[i].def[0] ? (int)strlen(tunables[i].def) : 2;
        wn = n > wn ? n : wn;
        wt = t > wt ? t : wt;
        wd = d > wd ? d : wd;
    }
    printf("%-*s  %-*s  %-*s  %s\n", wn, "tunable", wt, "type", wd, "default", "meaning");
    for (size_t i = 0; i < sizeof tunables / sizeof tunables[0]; i++) {
        const char *cur = getenv(tunables[i].name);
        printf("%-*s  %-*s  %-*s  %s%s%s%s\n", wn, tunables[i].name, wt, tunables[i].type, wd,
               tunables[i].def[0] ? tunables[i].def : "\"\"", tunables[i].help,
               cur ? " [set: " : "", cur ? cur : "", cur ? "]" : "");
    }
}

static void show_algorithms(void)
{
    cadre__coll_select_print(stdout);
}

/* The sections, in the order shown; without options cadre-info shows each
 * with by_default set. */
static const struct section {
    const char *option, *help;
    void (*show)(void);
    int by_default;
} sections[] = {
    {"--build", "version, configure line, CUDA or not", show_build, 1},
    {"--transports", "transports built, and whether each is usable here", show_transports, 1},
    {"--devices", "CUDA runtime and driver versions, GPUs, the GPU cadre_init binds",
     show_devices, 1},
    {"--tunables", "every CADRE_* tunable: type, default, meaning, value if set", show_tunables,
     1},
    {"--algorithms", "the rules that choose each collective's algorithm", show_algorithms, 0},
};
#define NSECTIONS (sizeof sections / sizeof sections[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: cadre-info [SECTION ...] | --version | --help\n"
               "Without a SECTION option, every section. SECTION options:\n");
    for (size_t i = 0; i < NSECTIONS; i++)
        fprintf(f, "  %-14s %s\n", sections[i].option, sections[i].help);
    fprintf(f, "  %-14s %s\n  %-14s %s\n", "--version", "cadre-info's version",
            "--help, -h", "this message");
}

int main(int argc, char **argv)
{
    int chosen[NSECTIONS] = {0}, any = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--version")) {
            printf("cadre-info (cadre) %s\n", PACKAGE_VERSION);
            return 0;
        }
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        size_t k = 0;
        while (k < NSECTIONS && strcmp(argv[i], sections[k].option))
            k++;
        if (k == NSECTIONS) {
            fprintf(stderr, "cadre-info: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
        chosen[k] = any = 1;
    }
    int first = 1;
    for (size_t k = 0; k < NSECTIONS; k++) {
        if (any ? !chosen[k] : !sections[k].by_default)
            continue;
        if (!first)
            printf("\n");
        first = 0;
        sections[k].show();
        fflush(stdout);
    }
    return 0;
}
