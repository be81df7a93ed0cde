/*
 * Who may talk to our PMIx server. libpmix 4.2.2 listens on a loopback TCP
 * port that every local user can reach (its ptl has no Unix socket and no
 * way to restrict peers), and parses a connection's first message before
 * any credential is checked - without checking the credential length it
 * reads off the wire against the bytes it got (PMIX_PTL_GET_BLOB), so 24
 * bytes from anyone end cadrerun with SIGSEGV; a peer that sends part of a
 * message parks libpmix's progress thread in a blocking recv.
 *
 * cadrerun defines accept(), and exports it (launcher/Makefile.am), so
 * libpmix's listener thread calls this one instead of the C library's. A
 * connection reaches libpmix only when
 *   - its peer socket belongs to our user (the uid sock_diag, else
 *     /proc/net/tcp, gives),
 *   - a process of this job holds it: a rank, or a descendant of one
 *     (found by the socket's inode in /proc/PID/fd of cadrerun's
 *     descendants; SO_PEERCRED for a Unix socket),
 *   - and its whole first message is already there (MSG_PEEK) and is what a
 *     4.2.2 client sends: the connect message of a simple client naming this
 *     job's namespace and the very rank whose process tree holds the socket,
 *     every length inside the bytes received.
 * Anything else is closed at once, with one WARN line (the first few), and
 * libpmix sees ECONNABORTED, which its listener takes as "try the next".
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "launcher.h"

/* What a client may take between connect() and sending its first message
 * (it sends both in one go), and the longest first message we take. */
#define HELLO_WAIT_MS 10000
/* The fast path's wait: a rank's message is usually there when we accept. */
#define HELLO_QUICK_MS 20
#define HELLO_MAX 4096
#define HDR_LEN 16 /* pmix_ptl_hdr_t on 64-bit: pindex, tag, nbytes, padding */
#define WARN_MAX 10

static struct {
    atomic_int on;
    char nspace[64];
    int nranks;
    pid_t self;
    _Atomic pid_t *pids; /* rank -> pid, 0 until forked */
    atomic_int warned, admitted;
} guard;

int cadre__launcher_guard_start(struct cadre__launcher_job *job)
{
    guard.pids = calloc((size_t)job->nranks, sizeof *guard.pids);
    if (!guard.pids) {
        cadre__launcher_say("out of memory for %d ranks", job->nranks);
        return -1;
    }
    snprintf(guard.nspace, sizeof guard.nspace, "%s", job->nspace);
    guard.nranks = job->nranks;
    guard.self = getpid();
    atomic_store(&guard.on, 1);
    return 0;
}

void cadre__launcher_guard_rank(int rank, pid_t pid)
{
    if (guard.pids && rank >= 0 && rank < guard.nranks)
        atomic_store(&guard.pids[rank], pid);
}

int cadre__launcher_guard_admitted(void)
{
    return atomic_load(&guard.admitted);
}

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- the peer's socket: uid and inode ------------------------------------------ */
/* Asks the kernel for the one TCP socket with local end `peer` and remote
 * end `us` (sock_diag: a lookup, where /proc/net/tcp lists every socket of
 * the machine, tens of milliseconds where there are thousands). */
static int diag_socket(const struct sockaddr_storage *us, const struct sockaddr_storage *peer,
                       unsigned *uid, unsigned long *inode)
{
    int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (nl < 0)
        return -1;
    struct {
        struct nlmsghdr nh;
        struct inet_diag_req_v2 req;
    } q;
    memset(&q, 0, sizeof q);
    q.nh.nlmsg_len = sizeof q;
    q.nh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    q.nh.nlmsg_flags = NLM_F_REQUEST;
    q.req.sdiag_family = (unsigned char)peer->ss_family;
    q.req.sdiag_protocol = IPPROTO_TCP;
    q.req.idiag_states = ~0u;
    q.req.id.idiag_cookie[0] = q.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    if (peer->ss_family == AF_INET) {
        const struct sockaddr_in *p = (const void *)peer, *u = (const void *)us;
        q.req.id.idiag_sport = p->sin_port;
        q.req.id.idiag_dport = u->sin_port;
        memcpy(q.req.id.idiag_src, &p->sin_addr, 4);
        memcpy(q.req.id.idiag_dst, &u->sin_addr, 4);
    } else {
        const struct sockaddr_in6 *p = (const void *)peer, *u = (const void *)us;
        q.req.id.idiag_sport = p->sin6_port;
        q.req.id.idiag_dport = u->sin6_port;
        memcpy(q.req.id.idiag_src, &p->sin6_addr, 16);
        memcpy(q.req.id.idiag_dst, &u->sin6_addr, 16);
    }
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    long buf[1024];
    ssize_t n = -1;
    if (sendto(nl, &q, sizeof q, 0, (struct sockaddr *)&kernel, sizeof kernel) == sizeof q) {
        struct pollfd pf = {nl, POLLIN, 0};
        if (poll(&pf, 1, 1000) == 1)
            n = recv(nl, buf, sizeof buf, MSG_DONTWAIT);
    }
    close(nl);
    const struct nlmsghdr *h = (const void *)buf;
    if (n < (ssize_t)sizeof *h || !NLMSG_OK(h, (size_t)n) || h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
        h->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
        return -1;
    const struct inet_diag_msg *m = NLMSG_DATA(h);
    *uid = m->idiag_uid;
    *inode = m->idiag_inode;
    return 0;
}

/* The kernel prints an address as the 32-bit words of its bytes, in host
 * order, "%08X" each, then ":%04X" of the port. */
static void proc_addr(const struct sockaddr_storage *ss, char *out, size_t len)
{
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const void *)ss;
        snprintf(out, len, "%08X:%04X", (unsigned)in->sin_addr.s_addr, ntohs(in->sin_port));
    } else {
        const struct sockaddr_in6 *in6 = (const void *)ss;
        uint32_t w[4];
        memcpy(w, &in6->sin6_addr, sizeof w);
        snprintf(out, len, "%08X%08X%08X%08X:%04X", (unsigned)w[0], (unsigned)w[1],
                 (unsigned)w[2], (unsigned)w[3], ntohs(in6->sin6_port));
    }
}

/* An IPv4 peer of an IPv6 socket has an IPv4 socket. */
static void unmap_v4(struct sockaddr_storage *ss)
{
    struct sockaddr_in6 in6;
    memcpy(&in6, ss, sizeof in6);
    if (ss->ss_family != AF_INET6 || !IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr))
        return;
    struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = in6.sin6_port};
    memcpy(&in.sin_addr, &in6.sin6_addr.s6_addr[12], 4);
    memset(ss, 0, sizeof *ss);
    memcpy(ss, &in, sizeof in);
}

/* The socket whose local end is `peer` and remote end `us`: our peer's. */
static int find_socket(struct sockaddr_storage *us, struct sockaddr_storage *peer,
                       unsigned *uid, unsigned long *inode)
{
    unmap_v4(us);
    unmap_v4(peer);
    if (diag_socket(us, peer, uid, inode) == 0)
        return 0;
    char local[64], remote[64];
    proc_addr(peer, local, sizeof local);
    proc_addr(us, remote, sizeof remote);
    FILE *f = fopen(peer->ss_family == AF_INET ? "/proc/net/tcp" : "/proc/net/tcp6", "r");
    if (!f)
        return -1;
    char line[512], l[64], r[64];
    int found = -1;
    while (found < 0 && fgets(line, sizeof line, f)) {
        unsigned u;
        unsigned long ino;
        /* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
        if (sscanf(line, " %*s %63s %63s %*s %*s %*s %*s %u %*s %lu", l, r, &u, &ino) == 4 &&
            !strcmp(l, local) && !strcmp(r, remote)) {
            *uid = u;
            *inode = ino;
            found = 0;
        }
    }
    fclose(f);
    return found;
}

/* ---- which process holds it --------------------------------------------------- */
struct proc_link {
    pid_t pid, ppid;
};

static int by_pid(const void *a, const void *b)
{
    pid_t x = ((const struct proc_link *)a)->pid, y = ((const struct proc_link *)b)->pid;
    return (x > y) - (x < y);
}

/* Every process with its parent, sorted by pid. */
static struct proc_link *read_procs(size_t *n)
{
    DIR *d = opendir("/proc");
    if (!d)
        return NULL;
    size_t cap = 1024, k = 0;
    struct proc_link *v = malloc(cap * sizeof *v);
    struct dirent *e;
    while (v && (e = readdir(d))) {
        char state;
        int ppid, pgrp;
        if (cadre__launcher_proc_stat(e->d_name, &state, &ppid, &pgrp) != 0)
            continue;
        if (k == cap) {
            struct proc_link *more = realloc(v, 2 * cap * sizeof *v);
            if (!more) {
                free(v);
                v = NULL;
                break;
            }
            v = more;
            cap *= 2;
        }
        v[k++] = (struct proc_link){(pid_t)atol(e->d_name), (pid_t)ppid};
    }
    closedir(d);
    if (v)
        qsort(v, k, sizeof *v, by_pid);
    *n = k;
    return v;
}

/* The child of cadrerun that pid descends from (pid itself if it is one),
 * or 0 when pid is not a descendant of cadrerun. */
static pid_t top_ancestor(const struct proc_link *v, size_t n, pid_t pid)
{
    for (int depth = 0; depth < 4096 && pid > 1; depth++) {
        struct proc_link key = {pid, 0};
        const struct proc_link *p = bsearch(&key, v, n, sizeof *v, by_pid);
        if (!p)
            return 0;
        if (p->ppid == guard.self)
            return pid;
        pid = p->ppid;
    }
    return 0;
}

/* Whether pid is still cadrerun's child (a rank's pid, not yet reused). */
static int our_child(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t len = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (len <= 0)
        return 0;
    buf[len] = '\0';
    char *rp = strrchr(buf, ')');
    int ppid;
    return rp && sscanf(rp + 1, " %*c %d", &ppid) == 1 && ppid == guard.self;
}

static int holds_inode(pid_t pid, unsigned long inode)
{
    char path[64], want[64], link[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    snprintf(want, sizeof want, "socket:[%lu]", inode);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        ssize_t len = readlinkat(dirfd(d), e->d_name, link, sizeof link - 1);
        if (len > 0) {
            link[len] = '\0';
            found = !strcmp(link, want);
        }
    }
    closedir(d);
    return found;
}

/* The process of this job holding the socket `inode`, and the rank whose
 * tree it is in; -1 when no process of the job holds it. */
static int find_owner(unsigned long inode, pid_t *owner)
{
    size_t n = 0;
    struct proc_link *v = read_procs(&n);
    if (!v)
        return -1;
    pid_t top = 0;
    for (size_t i = 0; i < n && !top; i++) {
        pid_t t = top_ancestor(v, n, v[i].pid);
        if (t && holds_inode(v[i].pid, inode)) {
            top = t;
            *owner = v[i].pid;
        }
    }
    free(v);
    if (!top)
        return -1;
    /* cadrerun records a rank's pid just after fork; a fast child may
     * connect before that. */
    for (long waited = 0; waited <= 2000; waited += 5) {
        for (int r = 0; r < guard.nranks; r++)
            if (atomic_load(&guard.pids[r]) == top)
                return r;
        sleep_ms(5);
    }
    return -1;
}

/* ---- the first message ------------------------------------------------------- */
/* A NUL-terminated string inside the n bytes left, of the characters module
 * names and versions have (or any, for the namespace: it is compared). */
static const char *take_string(const unsigned char **m, size_t *n, int names_only)
{
    const unsigned char *end = memchr(*m, '\0', *n);
    if (!end)
        return NULL;
    const char *s = (const char *)*m;
    for (const unsigned char *p = *m; names_only && p < end; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              (*p >= '0' && *p <= '9') || *p == ',' || *p == '.' || *p == '_' || *p == '-'))
            return NULL;
    *n -= (size_t)(end - *m) + 1;
    *m = end + 1;
    return s;
}

static int take_u32(const unsigned char **m, size_t *n, uint32_t *v)
{
    if (*n < 4)
        return -1;
    uint32_t be;
    memcpy(&be, *m, 4);
    *v = ntohl(be);
    *m += 4;
    *n -= 4;
    return 0;
}

/* The connect message of a 4.2.2 simple client (ptl_base_connection_hdlr.c
 * reads it in this order): psec module, credential length and bytes, the
 * process type (0), namespace, rank, version "M.m.r", then (unless the
 * version is 2.0) bfrops module, buffer type, gds module, and any rest. */
static const char *check_hello(const unsigned char *m, size_t n, int *rank)
{
    uint32_t credlen, r;
    const char *ns, *version;
    if (!take_string(&m, &n, 1))
        return "no security module name";
    if (take_u32(&m, &n, &credlen) != 0 || credlen > n)
        return "a credential longer than the message";
    m += credlen;
    n -= credlen;
    if (n < 1 || *m != 0)
        return "not a client's connection (tool or launcher)";
    m++;
    n--;
    if (!(ns = take_string(&m, &n, 0)) || strcmp(ns, guard.nspace) != 0)
        return "not this job's namespace";
    if (take_u32(&m, &n, &r) != 0 || r >= (uint32_t)guard.nranks)
        return "no rank of this job";
    if (!(version = take_string(&m, &n, 1)))
        return "no version";
    char *p;
    unsigned long major = strtoul(version, &p, 10), minor;
    if (p == version || *p != '.' || (minor = strtoul(p + 1, &p, 10), *p != '.') ||
        !(p[1] >= '0' && p[1] <= '9'))
        return "a version that is not M.m.r";
    if (!(major == 2 && minor == 0)) {
        if (!take_string(&m, &n, 1) || n < 1)
            return "no buffer module";
        m++;
        n--;
        if (!take_string(&m, &n, 1))
            return "no data store module";
    }
    *rank = (int)r;
    return NULL;
}

/* Waits for the whole first message, without taking it from the socket. */
static const char *peek_hello(int s, unsigned char *buf, size_t *len, long wait_ms)
{
    size_t want = HDR_LEN;
    long deadline = now_ms() + wait_ms;
    for (;;) {
        ssize_t got = recv(s, buf, HELLO_MAX, MSG_PEEK | MSG_DONTWAIT);
        if (got == 0)
            return "closed before its first message";
        if (got < 0 && errno != EAGAIN && errno != EINTR)
            return "a socket error before its first message";
        if (got >= HDR_LEN && want == HDR_LEN) {
            uint32_t nbytes;
            memcpy(&nbytes, buf + 8, 4);
            if (nbytes == 0 || nbytes > HELLO_MAX - HDR_LEN)
                return "a first message of an impossible length";
            want = HDR_LEN + nbytes;
        }
        if (got >= (ssize_t)want) {
            *len = want;
            return NULL;
        }
        long left = deadline - now_ms();
        if (left <= 0)
            return "no whole first message in time";
        struct pollfd p = {s, POLLIN | POLLRDHUP, 0};
        int ready = poll(&p, 1, (int)(left < 50 ? left : 50));
        /* Readable with part of a message: the rest is on its way, or
         * never comes (the peer has shut its side). */
        if (ready > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
            return "closed in the middle of its first message";
        if (ready > 0 && got > 0)
            sleep_ms(1);
    }
}

/* NULL when the connection may go to libpmix, else why not. */
static const char *judge(int s, char *who, size_t wlen)
{
    struct sockaddr_storage us, peer;
    socklen_t ul = sizeof us, pl = sizeof peer;
    pid_t owner = 0;
    int owner_rank = -1;
    if (getsockname(s, (struct sockaddr *)&us, &ul) != 0 ||
        getpeername(s, (struct sockaddr *)&peer, &pl) != 0)
        return "its addresses are unknown";
    if (peer.ss_family == AF_UNIX) {
        struct ucred cred;
        socklen_t cl = sizeof cred;
        if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0)
            return "its credentials are unknown";
        snprintf(who, wlen, "pid %d (uid %u)", (int)cred.pid, (unsigned)cred.uid);
        if (cred.uid != geteuid())
            return "another user's process";
        /* Whether it is a process of the job: through the same tree walk. */
        size_t n = 0;
        struct proc_link *v = read_procs(&n);
        pid_t top = v ? top_ancestor(v, n, cred.pid) : 0;
        free(v);
        for (int r = 0; top && r < guard.nranks && owner_rank < 0; r++)
            if (atomic_load(&guard.pids[r]) == top)
                owner_rank = r;
        if (owner_rank < 0)
            return "not a process of this job";
    } else if (peer.ss_family == AF_INET || peer.ss_family == AF_INET6) {
        unsigned uid;
        unsigned long inode;
        if (find_socket(&us, &peer, &uid, &inode) != 0)
            return "its socket is not found";
        snprintf(who, wlen, "uid %u", uid);
        if (uid != (unsigned)geteuid())
            return "another user's process";
        /* Fast path, the usual case: a rank's own connect message is
         * already there, and that rank's process holds the socket. */
        unsigned char quick[HELLO_MAX];
        size_t qlen = 0;
        int r = -1;
        pid_t pid;
        if (!peek_hello(s, quick, &qlen, HELLO_QUICK_MS) &&
            !check_hello(quick + HDR_LEN, qlen - HDR_LEN, &r) &&
            (pid = atomic_load(&guard.pids[r])) > 0 && holds_inode(pid, inode) && our_child(pid))
            return NULL;
        /* Else who holds it first, then the message, however long. */
        if ((owner_rank = find_owner(inode, &owner)) < 0)
            return "not a process of this job";
        snprintf(who, wlen, "pid %d of rank %d (uid %u)", (int)owner, owner_rank, uid);
    } else {
        return "not a local socket";
    }

    unsigned char buf[HELLO_MAX];
    size_t len = 0;
    int rank = -1;
    const char *why = peek_hello(s, buf, &len, HELLO_WAIT_MS);
    if (!why)
        why = check_hello(buf + HDR_LEN, len - HDR_LEN, &rank);
    if (!why && rank != owner_rank)
        why = "another rank's name";
    return why;
}

/* libpmix's listener thread calls this for each connection to its port. */
int accept(int fd, __SOCKADDR_ARG addr, socklen_t *restrict addrlen)
{
    int s = accept4(fd, addr, addrlen, 0);
    if (s < 0 || !atomic_load(&guard.on))
        return s;
    char who[96] = "an unknown process";
    const char *why = judge(s, who, sizeof who);
    if (!why) {
        atomic_fetch_add(&guard.admitted, 1);
        return s;
    }
    close(s);
    int k = atomic_fetch_add(&guard.warned, 1);
    if (k < WARN_MAX)
        CADRE_WARN(LAUNCHER, "refused a connection to the PMIx server from %s: %s%s", who, why,
                   k == WARN_MAX - 1 ? " (further refusals are not reported)" : "");
    errno = ECONNABORTED;
    return -1;
}
