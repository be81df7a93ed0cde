/* The rendezvous start (bootstrap_rdv.h): what the environment says, a
 * rank's join (ranks 1..size-1), the key store and the fences. Rank 0's side
 * is bootstrap_rdv_server.c. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap_rdv.h"
#include "runtime/runtime.h"

/* Seconds a rank waits beyond CADRE_TIMEOUT for rank 0's word, so that rank
 * 0, which counts from the same moment or earlier, names the missing ranks
 * first. */
#define RDV_GRACE 5.0

struct rdv_kv {
    int rank;
    char key[64];
    void *data;
    size_t len;
    struct rdv_kv *next;
};

static struct {
    int active;
    struct rdv_env env;
    int *fds; /* rank 0: by rank */
    int fd;   /* the others: to rank 0 */
    uint8_t *pend; /* puts since the last fence, encoded as on the wire */
    size_t plen, pcap;
    struct rdv_kv *store;
} R = {.fd = -1};

/* CADRE_<name> first, then the launcher's name; NULL when neither is set. */
static const char *env2(const char *cname, const char *tname, const char **which)
{
    const char *v = getenv(cname);
    *which = cname;
    if (!v || !*v) {
        v = tname ? getenv(tname) : NULL;
        *which = tname;
    }
    return v && *v ? v : NULL;
}

int cadre__rdv_wanted(void)
{
    const char *w;
    return env2("CADRE_MASTER_ADDR", "MASTER_ADDR", &w) &&
           env2("CADRE_MASTER_PORT", "MASTER_PORT", &w) && env2("CADRE_RANK", "RANK", &w) &&
           env2("CADRE_WORLD_SIZE", "WORLD_SIZE", &w);
}

/* An integer variable in [lo, hi]; *out = dflt when unset and not required. */
static int env_int(const char *cname, const char *tname, long lo, long hi, int dflt, int *out)
{
    const char *which, *v = env2(cname, tname, &which);
    *out = dflt;
    if (!v)
        return CADRE_SUCCESS;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi)
        return cadre__error(CADRE_ERR_ARG, "cadre_init: %s=\"%s\" is not an integer in [%ld, %ld]",
                            which, v, lo, hi);
    *out = (int)x;
    return CADRE_SUCCESS;
}

static uint64_t fnv1a(const char *s, uint64_t h)
{
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

/* This host as p2p_host.c names it: CADRE_HOSTID, else the hostname with
 * the kernel's boot id (two machines both called "localhost" differ). */
static void host_self(struct rdv_env *e)
{
    char hn[256] = "", boot[64] = "";
    if (gethostname(hn, sizeof hn - 1) != 0 || !hn[0])
        snprintf(hn, sizeof hn, "localhost");
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, boot, sizeof boot - 1);
        boot[n > 0 ? n : 0] = '\0';
        close(fd);
    }
    const char *forced = cadre__config_str(CADRE_CFG_HOSTID);
    char key[400];
    if (forced[0])
        snprintf(key, sizeof key, "id:%s", forced);
    else
        snprintf(key, sizeof key, "host:%s/%s", hn, boot);
    e->hostkey = fnv1a(key, 0xcbf29ce484222325ull);
    snprintf(e->host, sizeof e->host, "%s", forced[0] ? forced : hn);
}

static int parse_env(struct rdv_env *e)
{
    memset(e, 0, sizeof *e);
    const char *which, *addr = env2("CADRE_MASTER_ADDR", "MASTER_ADDR", &which);
    if (strlen(addr) >= sizeof e->addr)
        return cadre__error(CADRE_ERR_ARG, "cadre_init: %s is longer than %zu characters", which,
                            sizeof e->addr - 1);
    snprintf(e->addr, sizeof e->addr, "%s", addr);
    CADRE_CHECK(env_int("CADRE_WORLD_SIZE", "WORLD_SIZE", 1, 1 << 24, 1, &e->size));
    CADRE_CHECK(env_int("CADRE_RANK", "RANK", 0, e->size - 1, 0, &e->rank));
    CADRE_CHECK(env_int("CADRE_MASTER_PORT", "MASTER_PORT", 1, 65535, 0, &e->port));
    /* torchrun's agent may keep its own store on MASTER_PORT and tell its
     * workers so: then cadre takes the port above (CADRE_MASTER_PORT picks
     * another). */
    const char *agent = getenv("TORCHELASTIC_USE_AGENT_STORE");
    const char *cport = getenv("CADRE_MASTER_PORT");
    if (agent && (!strcasecmp(agent, "true") || !strcmp(agent, "1")) && !(cport && *cport)) {
        if (e->port == 65535)
            return cadre__error(CADRE_ERR_ARG, "cadre_init: MASTER_PORT 65535 is torchrun's store "
                                               "and no port is above it: set CADRE_MASTER_PORT");
        e->port++;
    }
    CADRE_CHECK(env_int("CADRE_LOCAL_RANK", "LOCAL_RANK", 0, e->size - 1, -1, &e->local_rank));
    CADRE_CHECK(env_int("CADRE_LOCAL_WORLD_SIZE", "LOCAL_WORLD_SIZE", 1, e->size, -1,
                        &e->local_size));
    const char *secret = env2("CADRE_JOB_KEY", "TORCHELASTIC_RUN_ID", &which);
    e->keyed = secret != NULL;
    cadre__rdv_key(secret ? secret : "", e->key);
    e->timeout = cadre__config_dbl(CADRE_CFG_TIMEOUT);
    if (!(e->timeout > 0))
        return cadre__error(CADRE_ERR_ARG, "cadre_init: CADRE_TIMEOUT must be more than 0");
    host_self(e);
    return CADRE_SUCCESS;
}

static double after(double t0, double secs)
{
    return isfinite(secs) ? t0 + secs : INFINITY;
}

static void nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* A connection to a, or -1 (errno) when refused or not answered in time. */
static int try_connect(const struct addrinfo *a, double deadline)
{
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0)
        return -1;
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
        if (errno != EINPROGRESS) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        double left = deadline - cadre__rdv_now();
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int err = 0;
        socklen_t el = sizeof err;
        if (left <= 0 || poll(&p, 1, (int)(rdv_min(left, 5.0) * 1000) + 1) <= 0)
            err = ETIMEDOUT;
        else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
            err = errno;
        if (err) {
            close(fd);
            errno = err;
            return -1;
        }
    }
    nodelay(fd);
    return fd;
}

/* One try at the handshake on fd: 0 joined, -1 worth another try (why in
 * last), or an error status. */
static int handshake(int fd, double deadline, char *last, size_t lastlen)
{
    const struct rdv_env *e = &R.env;
    struct rdv_challenge ch;
    double greet = rdv_min(deadline, cadre__rdv_now() + 10);
    if (cadre__rdv_read(fd, &ch, sizeof ch, greet) != 0) {
        snprintf(last, lastlen, "no greeting from rank 0 (%s)", strerror(errno));
        return -1;
    }
    if (memcmp(ch.magic, RDV_MAGIC, sizeof ch.magic) != 0)
        return cadre__error(CADRE_ERR_BOOTSTRAP, "cadre_init: what answers at %s:%d is no cadre "
                            "rendezvous (under torchrun, whose agent may hold MASTER_PORT, set "
                            "CADRE_MASTER_PORT to a free port)", e->addr, e->port);
    if (ntohl(ch.version) != RDV_VERSION)
        return cadre__error(CADRE_ERR_BOOTSTRAP, "cadre_init: rank 0 at %s:%d speaks rendezvous "
                            "version %u, this rank %u (another cadre version?)", e->addr, e->port,
                            ntohl(ch.version), RDV_VERSION);
    if (!!ntohl(ch.keyed) != e->keyed)
        return cadre__error(CADRE_ERR_BOOTSTRAP, "cadre_init: rank 0 %s a job key and rank %d %s "
                            "(CADRE_JOB_KEY or TORCHELASTIC_RUN_ID must be set at every rank or "
                            "none)", ntohl(ch.keyed) ? "has" : "has no", e->rank,
                            e->keyed ? "has one" : "has none");
    struct rdv_hello h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, RDV_MAGIC, sizeof h.magic);
    h.version = htonl(RDV_VERSION);
    h.size = htonl((uint32_t)e->size);
    h.rank = htonl((uint32_t)e->rank);
    h.pid = htonl((uint32_t)getpid());
    h.hostkey[0] = htonl((uint32_t)(e->hostkey >> 32));
    h.hostkey[1] = htonl((uint32_t)e->hostkey);
    if (getrandom(h.nonce, sizeof h.nonce, 0) != (ssize_t)sizeof h.nonce)
        return cadre__error(CADRE_ERR_INTERNAL, "cadre_init: getrandom: %s", strerror(errno));
    snprintf(h.host, sizeof h.host, "%s", e->host);
    cadre__rdv_mac(e->key, 'C', ch.nonce, sizeof ch.nonce, &h, offsetof(struct rdv_hello, proof),
                   h.proof);
    if (cadre__rdv_write(fd, &h, sizeof h, deadline) != 0) {
        snprintf(last, lastlen, "sending the hello: %s", strerror(errno));
        return -1;
    }
    uint32_t type;
    void *p;
    size_t n;
    if (cadre__rdv_recv(fd, &type, &p, &n, 512, deadline) != 0) {
        snprintf(last, lastlen, "rank 0 closed the connection before accepting this rank (%s)",
                 strerror(errno));
        return -1;
    }
    if (type == RDV_REJECT) {
        int rc = cadre__error(CADRE_ERR_BOOTSTRAP, "cadre_init: rank 0 refused rank %d: %s",
                              e->rank, p ? (char *)p : "(no reason)");
        free(p);
        return rc;
    }
    struct {
        uint8_t nonce[RDV_NONCE];
        uint32_t rank;
    } ack = {.rank = h.rank};
    memcpy(ack.nonce, ch.nonce, sizeof ack.nonce);
    uint8_t want[RDV_PROOF];
    cadre__rdv_mac(e->key, 'S', h.nonce, sizeof h.nonce, &ack, sizeof ack, want);
    int ok = type == RDV_ACK && n == RDV_PROOF && cadre__rdv_equal(p, want, RDV_PROOF);
    free(p);
    if (!ok)
        return cadre__error(CADRE_ERR_BOOTSTRAP, "cadre_init: the answer from %s:%d does not "
                            "prove the job key (another job's rank 0 at that port?)", e->addr,
                            e->port);
    return 0;
}

/* Ranks 1..size-1: connect (rank 0 may start later: again until the
 * timeout), prove the key, wait for every rank to join. */
static int join(struct cadre_bootstrap_info *info)
{
    const struct rdv_env *e = &R.env;
    double t0 = cadre__rdv_now(), deadline = after(t0, e->timeout), backoff = 0.01;
    char port[16], last[200] = "no try yet";
    snprintf(port, sizeof port, "%d", e->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int g = getaddrinfo(e->addr, port, &hints, &ai);
    if (g != 0)
        return cadre__error(CADRE_ERR_BOOTSTRAP, "cadre_init: MASTER_ADDR %s: %s", e->addr,
                            gai_strerror(g));
    int fd = -1;
    while (fd < 0) {
        for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
            fd = try_connect(a, deadline);
            if (fd < 0) {
                /* A refusal says more than the timeout of the last try. */
                if (errno != ETIMEDOUT || !strncmp(last, "no try", 6))
                    snprintf(last, sizeof last, "connect: %s", strerror(errno));
                continue;
            }
            int rc = handshake(fd, deadline, last, sizeof last);
            if (rc != 0) {
                close(fd);
                fd = -1;
            }
            if (rc > 0) {
                freeaddrinfo(ai);
                return rc;
            }
        }
        if (fd >= 0)
            break;
        if (cadre__rdv_now() >= deadline) {
            freeaddrinfo(ai);
            return cadre__error(CADRE_ERR_TIMEOUT, "cadre_init: rank %d could not join the "
                                "rendezvous of rank 0 at %s:%d within %g s (CADRE_TIMEOUT): %s "
                                "(is rank 0 running, at that address?)", e->rank, e->addr, e->port, e->timeout, last);
        }
        usleep((useconds_t)(backoff * 1e6));
        backoff = rdv_min(backoff * 2, 0.25);
    }
    freeaddrinfo(ai);
    R.fd = fd;
    uint32_t type;
    void *p = NULL;
    size_t n;
    if (cadre__rdv_recv(fd, &type, &p, &n, 4096, after(cadre__rdv_now(), e->timeout + RDV_GRACE))
        != 0)
        return cadre__error(errno == ETIMEDOUT ? CADRE_ERR_TIMEOUT : CADRE_ERR_BOOTSTRAP,
                            "cadre_init: rank %d joined, then %s from rank 0 (at %s:%d) while the "
                            "other ranks joined", e->rank, errno == ETIMEDOUT ? "heard nothing"
                            : "lost the connection", e->addr, e->port);
    int rc = CADRE_SUCCESS;
    if (type == RDV_ERROR)
        rc = cadre__error(CADRE_ERR_TIMEOUT, "%s", p ? (char *)p : "cadre_init: rank 0 failed");
    else if (type != RDV_WELCOME || n != 4 * sizeof(uint32_t))
        rc = cadre__error(CADRE_ERR_BOOTSTRAP, "cadre_init: rank 0 sent message %u of %zu bytes "
                          "instead of the start", type, n);
    else {
        uint32_t w[4];
        memcpy(w, p, sizeof w);
        info->node_id = (int)ntohl(w[0]);
        info->local_rank = (int)ntohl(w[2]);
        info->local_size = (int)ntohl(w[3]);
    }
    free(p);
    return rc;
}

int cadre__rdv_init(struct cadre_bootstrap_info *info)
{
    CADRE_CHECK(parse_env(&R.env));
    const struct rdv_env *e = &R.env;
    info->rank = e->rank;
    info->size = e->size;
    info->has_node_id = 1;
    info->local_size = 1;
    int rc = CADRE_SUCCESS;
    if (e->size > 1 && e->rank == 0) {
        R.fds = malloc((size_t)e->size * sizeof *R.fds);
        if (!R.fds)
            return cadre__error(CADRE_ERR_NOMEM, "cadre_init: no memory for %d ranks", e->size);
        for (int r = 0; r < e->size; r++)
            R.fds[r] = -1;
        rc = cadre__rdv_serve(e, R.fds, info);
    }
    else if (e->size > 1)
        rc = join(info);
    if (rc != CADRE_SUCCESS) {
        cadre__rdv_finalize();
        return rc;
    }
    /* The launcher's local numbering, where it gives one, binds the GPU. */
    if (e->local_rank >= 0)
        info->local_rank = e->local_rank;
    if (e->local_size >= 0)
        info->local_size = e->local_size;
    snprintf(info->nspace, sizeof info->nspace, "rdv.%.200s:%d", e->addr, e->port);
    R.active = 1;
    CADRE_INFO(BOOTSTRAP, "rendezvous at %s:%d%s: rank %d/%d local %d/%d node %d (%s)", e->addr,
               e->port, e->keyed ? " (job key)" : "", info->rank, info->size, info->local_rank,
               info->local_size, info->node_id, e->host);
    return CADRE_SUCCESS;
}

int cadre__rdv_finalize(void)
{
    if (R.fds)
        for (int r = 0; r < R.env.size; r++)
            if (R.fds[r] >= 0)
                close(R.fds[r]);
    free(R.fds);
    R.fds = NULL;
    if (R.fd >= 0)
        close(R.fd);
    R.fd = -1;
    while (R.store) {
        struct rdv_kv *n = R.store->next;
        free(R.store->data);
        free(R.store);
        R.store = n;
    }
    free(R.pend);
    R.pend = NULL;
    R.plen = R.pcap = 0;
    R.active = 0;
    return CADRE_SUCCESS;
}

static int store_add(int rank, const char *key, size_t klen, const void *data, size_t len)
{
    struct rdv_kv *kv = calloc(1, sizeof *kv);
    void *copy = malloc(len ? len : 1);
    if (!kv || !copy || klen >= sizeof kv->key) {
        free(kv);
        free(copy);
        return cadre__error(klen >= 64 ? CADRE_ERR_BOOTSTRAP : CADRE_ERR_NOMEM,
                            "bootstrap: cannot keep key %.*s of rank %d", (int)klen, key, rank);
    }
    memcpy(copy, data, len);
    memcpy(kv->key, key, klen);
    kv->rank = rank;
    kv->data = copy;
    kv->len = len;
    kv->next = R.store;
    R.store = kv;
    return CADRE_SUCCESS;
}

int cadre__rdv_put(const char *key, const void *data, size_t len)
{
    size_t klen = strlen(key), need = R.plen + 12 + klen + len;
    if (need > RDV_MAX_PUTS)
        return cadre__error(CADRE_ERR_BOOTSTRAP, "bootstrap: the puts before a fence pass %u "
                            "bytes (key %s)", RDV_MAX_PUTS, key);
    if (need > R.pcap) {
        uint8_t *p = realloc(R.pend, need * 2);
        if (!p)
            return cadre__error(CADRE_ERR_NOMEM, "bootstrap: no memory for key %s", key);
        R.pend = p;
        R.pcap = need * 2;
    }
    CADRE_CHECK(store_add(R.env.rank, key, klen, data, len));
    uint32_t h[3] = {htonl((uint32_t)R.env.rank), htonl((uint32_t)klen), htonl((uint32_t)len)};
    memcpy(R.pend + R.plen, h, sizeof h);
    memcpy(R.pend + R.plen + 12, key, klen);
    memcpy(R.pend + R.plen + 12 + klen, data, len);
    R.plen = need;
    return CADRE_SUCCESS;
}

int cadre__rdv_entries(const uint8_t *buf, size_t len, int only, int size, int keep)
{
    size_t off = 0;
    while (off < len) {
        uint32_t h[3];
        if (len - off < sizeof h)
            return -1;
        memcpy(h, buf + off, sizeof h);
        uint32_t r = ntohl(h[0]), kl = ntohl(h[1]), dl = ntohl(h[2]);
        off += sizeof h;
        if (r >= (uint32_t)size || (only >= 0 && r != (uint32_t)only) || kl == 0 || kl >= 64 ||
            len - off < kl || len - off - kl < dl)
            return -1;
        if (keep && (int)r != R.env.rank &&
            store_add((int)r, (const char *)buf + off, kl, buf + off + kl, dl) != CADRE_SUCCESS)
            return -2;
        off += kl + dl;
    }
    return 0;
}

int cadre__rdv_fence(void)
{
    const struct rdv_env *e = &R.env;
    if (!R.active || e->size == 1) {
        R.plen = 0;
        return CADRE_SUCCESS;
    }
    void *all = NULL;
    size_t alen = 0;
    if (e->rank == 0) {
        int rc = cadre__rdv_serve_fence(e, R.fds, R.pend, R.plen, &all, &alen);
        R.plen = 0;
        if (rc != CADRE_SUCCESS)
            return rc;
    }
    else {
        double t = cadre__rdv_now();
        if (cadre__rdv_send(R.fd, RDV_FENCE, R.pend, R.plen, after(t, e->timeout)) != 0)
            return cadre__error(CADRE_ERR_BOOTSTRAP, "bootstrap: rank %d cannot reach rank 0 "
                                "for a fence: %s", e->rank, strerror(errno));
        R.plen = 0;
        uint32_t type;
        size_t max = (size_t)e->size * RDV_MAX_PUTS;
        if (max > (1u << 30))
            max = 1u << 30;
        if (cadre__rdv_recv(R.fd, &type, &all, &alen, max, after(t, e->timeout + RDV_GRACE)) != 0)
            return cadre__error(errno == ETIMEDOUT ? CADRE_ERR_TIMEOUT : CADRE_ERR_BOOTSTRAP,
                                "bootstrap: rank %d %s rank 0 in a fence: %s", e->rank,
                                errno == ETIMEDOUT ? "heard nothing from" : "lost",
                                strerror(errno));
        if (type == RDV_ERROR) {
            int rc = cadre__error(CADRE_ERR_BOOTSTRAP, "%s", all ? (char *)all : "rank 0 failed");
            free(all);
            return rc;
        }
        if (type != RDV_FENCE) {
            free(all);
            return cadre__error(CADRE_ERR_BOOTSTRAP, "bootstrap: rank 0 answered a fence with "
                                "message %u", type);
        }
    }
    int rc = cadre__rdv_entries(all, alen, -1, e->size, 1);
    free(all);
    if (rc == -1)
        return cadre__error(CADRE_ERR_BOOTSTRAP, "bootstrap: rank 0's answer to a fence is "
                            "malformed");
    return rc == 0 ? CADRE_SUCCESS : CADRE_ERR_NOMEM;
}

int cadre__rdv_get(int rank, const char *key, void **data, size_t *len)
{
    for (struct rdv_kv *kv = R.store; kv; kv = kv->next) {
        if (kv->rank == rank && !strcmp(kv->key, key)) {
            void *copy = malloc(kv->len ? kv->len : 1);
            if (!copy)
                return cadre__error(CADRE_ERR_NOMEM, "bootstrap: no memory");
            memcpy(copy, kv->data, kv->len);
            *data = copy;
            *len = kv->len;
            return CADRE_SUCCESS;
        }
    }
    return cadre__error(CADRE_ERR_BOOTSTRAP, "bootstrap: no key %s for rank %d", key, rank);
}
