/* Rank 0's side of the rendezvous (bootstrap_rdv.h): it listens at
 * MASTER_ADDR:MASTER_PORT until every rank has joined, then answers the
 * fences over the ranks' connections.
 *
 * Anyone may connect to the port while the job starts. One poll loop serves
 * every connection without waiting on any: a connection that has not
 * completed its hello is dropped after HANDSHAKE_S seconds, at most
 * MAX_PENDING of them are kept (the oldest goes first: a real rank that
 * loses its place connects again), each reads into its fixed hello, and
 * what is not a cadre hello is closed without an answer. A hello that is
 * one (magic and version) but fails a check (world size, rank range, the
 * proof of the job key, a rank already joined) gets a refusal saying which,
 * for a misconfigured rank's message. The listening socket closes once
 * every rank has joined. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap_rdv.h"
#include "runtime/runtime.h"

#define MAX_PENDING 128
#define HANDSHAKE_S 10.0

struct pend {
    int fd;
    double deadline;
    uint8_t nonce[RDV_NONCE];
    size_t have;
    struct rdv_hello h;
};

static double after(double t0, double secs)
{
    return isfinite(secs) ? t0 + secs : INFINITY;
}

static int bind_listen(const struct rdv_env *e, int *out)
{
    char port[16];
    snprintf(port, sizeof port, "%d", e->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE},
                    *ai = NULL;
    int g = getaddrinfo(e->addr, port, &hints, &ai);
    if (g != 0)
        return cadre__error(CADRE_ERR_BOOTSTRAP, "cadre_init: MASTER_ADDR %s: %s", e->addr,
                            gai_strerror(g));
    int err = 0, family = ai->ai_family;
    for (int wildcard = 0; wildcard < 2; wildcard++) {
        for (struct addrinfo *a = ai; a; a = a->ai_next) {
            int fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            if (fd < 0) {
                err = errno;
                continue;
            }
            int one = 1;
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
            struct sockaddr_storage ss;
            memcpy(&ss, a->ai_addr, a->ai_addrlen);
            if (wildcard) {
                /* MASTER_ADDR names this host from outside (a NAT, a
                 * published name): listen on every address of the family. */
                if (a->ai_family != family)
                    continue;
                if (family == AF_INET)
                    ((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_ANY);
                else
                    ((struct sockaddr_in6 *)&ss)->sin6_addr = in6addr_any;
            }
            if (bind(fd, (struct sockaddr *)&ss, a->ai_addrlen) == 0 &&
                listen(fd, SOMAXCONN) == 0) {
                freeaddrinfo(ai);
                *out = fd;
                return CADRE_SUCCESS;
            }
            err = errno;
            close(fd);
            if (err == EADDRINUSE)
                break;
        }
        if (err != EADDRNOTAVAIL)
            break;
    }
    freeaddrinfo(ai);
    return cadre__error(CADRE_ERR_BOOTSTRAP, "cadre_init: rank 0 cannot serve the rendezvous at "
                        "%s:%d: %s%s", e->addr, e->port, strerror(err),
                        err == EADDRINUSE ? " (another job, or torchrun's store: set "
                                            "CADRE_MASTER_PORT to a free port)" : "");
}

/* "2, 5-7" for the ranks r in [1, n) with flag[r] == 0. */
static void list_missing(const int *have, int n, char *out, size_t cap, int *count)
{
    size_t len = 0;
    *count = 0;
    out[0] = '\0';
    for (int r = 0; r < n; r++) {
        if (have[r])
            continue;
        int s = r;
        while (r + 1 < n && !have[r + 1])
            r++;
        *count += r - s + 1;
        if (len + 32 >= cap) {
            if (len + 4 < cap)
                len += (size_t)snprintf(out + len, cap - len, ", ...");
            continue;
        }
        len += (size_t)(s == r ? snprintf(out + len, cap - len, "%s%d", len ? ", " : "", s)
                               : snprintf(out + len, cap - len, "%s%d-%d", len ? ", " : "", s, r));
    }
}

/* Tells every connected rank why the start or a fence failed. */
static void tell_all(int *fds, int n, const char *text)
{
    double d = cadre__rdv_now() + 1;
    for (int r = 1; r < n; r++)
        if (fds[r] >= 0)
            cadre__rdv_send(fds[r], RDV_ERROR, text, strlen(text), d);
}

/* Closes the pending connection that came first (the earliest deadline). */
static void evict_oldest(struct pend *pd, int *np)
{
    int o = 0;
    for (int i = 1; i < *np; i++)
        if (pd[i].deadline < pd[o].deadline)
            o = i;
    close(pd[o].fd);
    pd[o] = pd[--(*np)];
}

/* A new connection: greet it with a challenge, keep it among the pending. */
static void admit(int fd, const struct rdv_env *e, struct pend *pd, int *np, double t)
{
    if (*np == MAX_PENDING)
        evict_oldest(pd, np);
    struct pend *p = &pd[*np];
    memset(p, 0, sizeof *p);
    p->fd = fd;
    p->deadline = t + rdv_min(HANDSHAKE_S, e->timeout);
    struct rdv_challenge ch;
    memcpy(ch.magic, RDV_MAGIC, sizeof ch.magic);
    ch.version = htonl(RDV_VERSION);
    ch.keyed = htonl((uint32_t)e->keyed);
    if (getrandom(p->nonce, sizeof p->nonce, 0) != (ssize_t)sizeof p->nonce) {
        close(fd);
        return;
    }
    memcpy(ch.nonce, p->nonce, sizeof ch.nonce);
    /* A fresh socket's buffer takes 32 bytes at once; one that does not is
     * no one worth waiting for. */
    if (send(fd, &ch, sizeof ch, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof ch) {
        close(fd);
        return;
    }
    (*np)++;
}

/* A complete hello: NULL when it joins (fds and hostkey updated), else the
 * refusal ("" for no answer at all). */
static const char *judge(struct pend *p, const struct rdv_env *e, int *fds, uint64_t *hostkey,
                         char *why, size_t cap)
{
    const struct rdv_hello *h = &p->h;
    if (memcmp(h->magic, RDV_MAGIC, sizeof h->magic) != 0)
        return "";
    uint32_t v = ntohl(h->version), size = ntohl(h->size), rank = ntohl(h->rank);
    uint8_t want[RDV_PROOF];
    cadre__rdv_mac(e->key, 'C', p->nonce, sizeof p->nonce, h, offsetof(struct rdv_hello, proof),
                   want);
    /* The proof first: with a key, no one without it learns the job's size. */
    if (v != RDV_VERSION)
        snprintf(why, cap, "rendezvous version %u, rank 0 speaks %u", v, RDV_VERSION);
    else if (!cadre__rdv_equal(want, h->proof, RDV_PROOF))
        snprintf(why, cap, "rank %u's hello does not prove the job key%s", rank,
                 e->keyed ? "" : " (a corrupted hello)");
    else if (size != (uint32_t)e->size)
        snprintf(why, cap, "world size %u, rank 0's is %d", size, e->size);
    else if (rank == 0 || rank >= size)
        snprintf(why, cap, "rank %u is not in [1, %d)", rank, e->size);
    else if (fds[rank] >= 0)
        snprintf(why, cap, "rank %u has joined already (two processes given RANK=%u?)", rank,
                 rank);
    else {
        struct {
            uint8_t nonce[RDV_NONCE];
            uint32_t rank;
        } ack = {.rank = h->rank};
        memcpy(ack.nonce, p->nonce, sizeof ack.nonce);
        uint8_t proof[RDV_PROOF];
        cadre__rdv_mac(e->key, 'S', h->nonce, sizeof h->nonce, &ack, sizeof ack, proof);
        if (cadre__rdv_send(p->fd, RDV_ACK, proof, sizeof proof, cadre__rdv_now() + 1) != 0)
            return "";
        int one = 1;
        setsockopt(p->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fds[rank] = p->fd;
        hostkey[rank] = (uint64_t)ntohl(h->hostkey[0]) << 32 | ntohl(h->hostkey[1]);
        CADRE_TRACE(BOOTSTRAP, "rank %u joined from host %.*s (pid %u)", rank,
                    RDV_HOST_LEN, h->host, ntohl(h->pid));
        return NULL;
    }
    return why;
}

/* Reads what pending connection p has sent: 1 to drop it. */
static int step_pending(struct pend *p, const struct rdv_env *e, int *fds, uint64_t *hostkey,
                        int *joined, unsigned *refused)
{
    ssize_t n = recv(p->fd, (char *)&p->h + p->have, sizeof p->h - p->have, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    if (n <= 0)
        return 1;
    p->have += (size_t)n;
    if (memcmp(p->h.magic, RDV_MAGIC, p->have < 8 ? p->have : 8) != 0)
        return 1; /* garbage, an HTTP request: no answer */
    if (p->have < sizeof p->h)
        return 0;
    char why[160];
    const char *no = judge(p, e, fds, hostkey, why, sizeof why);
    if (!no) {
        (*joined)++;
        p->fd = -1; /* now fds[rank]'s */
        return 1;
    }
    (*refused)++;
    if (*no) {
        CADRE_INFO(BOOTSTRAP, "rendezvous: refused a hello: %s", no);
        cadre__rdv_send(p->fd, RDV_REJECT, no, strlen(no), cadre__rdv_now() + 0.1);
    }
    return 1;
}

/* Host numbering in the order of the lowest rank, as p2p_host.c does. */
static void welcome(const struct rdv_env *e, int *fds, const uint64_t *hostkey,
                    struct cadre_bootstrap_info *info)
{
    int n = e->size, nn = 0;
    int *node = malloc((size_t)n * sizeof *node), *lr = malloc((size_t)n * sizeof *lr);
    int *cnt = calloc((size_t)n, sizeof *cnt);
    if (!node || !lr || !cnt)
        goto out; /* the fence that follows fails on the ranks' side */
    for (int r = 0; r < n; r++) {
        node[r] = -1;
        for (int v = 0; v < r && node[r] < 0; v++)
            if (hostkey[v] == hostkey[r])
                node[r] = node[v];
        if (node[r] < 0)
            node[r] = nn++;
        lr[r] = cnt[node[r]]++;
    }
    double d = after(cadre__rdv_now(), e->timeout);
    for (int r = 1; r < n; r++) {
        uint32_t w[4] = {htonl((uint32_t)node[r]), htonl((uint32_t)nn), htonl((uint32_t)lr[r]),
                         htonl((uint32_t)cnt[node[r]])};
        /* A rank that died since it joined shows at the first fence. */
        if (cadre__rdv_send(fds[r], RDV_WELCOME, w, sizeof w, d) != 0) {
            close(fds[r]);
            fds[r] = -1;
        }
    }
    info->node_id = 0;
    info->local_rank = 0;
    info->local_size = cnt[0];
out:
    free(node);
    free(lr);
    free(cnt);
}

int cadre__rdv_serve(const struct rdv_env *e, int *fds, struct cadre_bootstrap_info *info)
{
    int lfd = -1, n = e->size, np = 0, joined = 1, rc = CADRE_SUCCESS;
    unsigned accepted = 0, refused = 0;
    CADRE_CHECK(bind_listen(e, &lfd));
    uint64_t *hostkey = calloc((size_t)n, sizeof *hostkey);
    int *left = calloc((size_t)n, sizeof *left); /* joined, then closed */
    struct pend *pd = calloc(MAX_PENDING, sizeof *pd);
    struct pollfd *pfd = calloc((size_t)(1 + MAX_PENDING + n), sizeof *pfd);
    int *rank_of = calloc((size_t)(1 + MAX_PENDING + n), sizeof *rank_of);
    if (!hostkey || !left || !pd || !pfd || !rank_of) {
        rc = cadre__error(CADRE_ERR_NOMEM, "cadre_init: no memory for %d ranks", n);
        goto out;
    }
    hostkey[0] = e->hostkey;
    double deadline = after(cadre__rdv_now(), e->timeout);
    while (joined < n) {
        double t = cadre__rdv_now(), wake = deadline;
        if (t >= deadline) {
            int *have = calloc((size_t)n, sizeof *have), cnt = 0, nleft = 0;
            char list[512] = "?", gone[300] = "";
            if (have) {
                for (int r = 0; r < n; r++)
                    have[r] = r == 0 || fds[r] >= 0;
                list_missing(have, n, list, sizeof list, &cnt);
                for (int r = 0; r < n; r++)
                    have[r] = !left[r] || fds[r] >= 0; /* a rank may come again */
                list_missing(have, n, gone, sizeof gone, &nleft);
            }
            free(have);
            rc = cadre__error(CADRE_ERR_TIMEOUT, "cadre_init: rank%s %s did not join the "
                              "rendezvous at %s:%d within %g s (CADRE_TIMEOUT); %d of %d ranks "
                              "joined%s%s", cnt == 1 ? "" : "s", list, e->addr, e->port,
                              e->timeout, joined, n, nleft ? "; joined, then left: " : "", gone);
            tell_all(fds, n, cadre_last_error());
            goto out;
        }
        int k = 0;
        pfd[k++] = (struct pollfd){.fd = lfd, .events = POLLIN};
        for (int i = 0; i < np; i++) {
            if (pd[i].deadline <= t) {
                close(pd[i].fd);
                pd[i--] = pd[--np];
                continue;
            }
            wake = rdv_min(wake, pd[i].deadline);
        }
        for (int i = 0; i < np; i++)
            pfd[k++] = (struct pollfd){.fd = pd[i].fd, .events = POLLIN};
        for (int r = 1; r < n; r++)
            if (fds[r] >= 0) {
                rank_of[k] = r;
                pfd[k++] = (struct pollfd){.fd = fds[r], .events = POLLIN};
            }
        double wait_s = rdv_min(wake - t, 1.0);
        if (poll(pfd, (nfds_t)k, (int)(wait_s * 1000) + 1) < 0 && errno != EINTR) {
            rc = cadre__error(CADRE_ERR_INTERNAL, "cadre_init: poll: %s", strerror(errno));
            goto out;
        }
        /* Joined ranks send nothing before the start: an end of file is a
         * rank gone, which may come again. */
        for (int i = 1 + np; i < k; i++) {
            if (!pfd[i].revents)
                continue;
            int r = rank_of[i];
            CADRE_INFO(BOOTSTRAP, "rendezvous: rank %d left before every rank joined", r);
            left[r] = 1;
            close(fds[r]);
            fds[r] = -1;
            joined--;
        }
        int npoll = np;
        for (int i = 0; i < npoll; i++)
            if (pfd[1 + i].revents && step_pending(&pd[i], e, fds, hostkey, &joined, &refused)) {
                if (pd[i].fd >= 0)
                    close(pd[i].fd);
                pd[i].fd = -2;
            }
        int j = 0;
        for (int i = 0; i < np; i++)
            if (pd[i].fd != -2)
                pd[j++] = pd[i];
        np = j;
        for (int i = 0; i < 64 && (pfd[0].revents & POLLIN); i++) {
            int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) {
                if ((errno == EMFILE || errno == ENFILE) && np > 0) {
                    evict_oldest(pd, &np); /* make room */
                    continue;
                }
                break;
            }
            accepted++;
            admit(fd, e, pd, &np, t);
        }
    }
    CADRE_INFO(BOOTSTRAP, "rendezvous: %d ranks joined (%u connections, %u hellos refused)", n,
               accepted, refused);
    welcome(e, fds, hostkey, info);
out:
    for (int i = 0; i < np; i++)
        close(pd[i].fd);
    close(lfd);
    free(hostkey);
    free(left);
    free(pd);
    free(pfd);
    free(rank_of);
    return rc;
}

struct fin {
    uint32_t hdr[2];
    size_t hh, have, len;
    uint8_t *buf;
    int done;
};

/* Reads what rank r sent for the fence: CADRE_SUCCESS (f->done once whole),
 * else an error already set. */
static int step_fence(struct fin *f, int fd, int r, int size)
{
    int in_hdr = f->hh < sizeof f->hdr;
    ssize_t n = in_hdr ? recv(fd, (char *)f->hdr + f->hh, sizeof f->hdr - f->hh, MSG_DONTWAIT)
                       : recv(fd, f->buf + f->have, f->len - f->have, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return CADRE_SUCCESS;
    if (n <= 0)
        return cadre__error(CADRE_ERR_PEER, "bootstrap: rank %d left (its connection to rank 0 "
                            "%s) before the fence", r, n == 0 ? "closed" : strerror(errno));
    if (in_hdr) {
        f->hh += (size_t)n;
        if (f->hh < sizeof f->hdr)
            return CADRE_SUCCESS;
        f->len = ntohl(f->hdr[1]);
        if (ntohl(f->hdr[0]) != RDV_FENCE || f->len > RDV_MAX_PUTS)
            return cadre__error(CADRE_ERR_BOOTSTRAP, "bootstrap: rank %d sent message %u of %zu "
                                "bytes in a fence (do the ranks make the same calls?)", r,
                                ntohl(f->hdr[0]), f->len);
        f->buf = malloc(f->len ? f->len : 1);
        if (!f->buf)
            return cadre__error(CADRE_ERR_NOMEM, "bootstrap: no memory");
    }
    else
        f->have += (size_t)n;
    if (f->have == f->len) {
        if (cadre__rdv_entries(f->buf, f->len, r, size, 0) != 0)
            return cadre__error(CADRE_ERR_BOOTSTRAP, "bootstrap: rank %d's fence data is malformed",
                                r);
        f->done = 1;
    }
    return CADRE_SUCCESS;
}

int cadre__rdv_serve_fence(const struct rdv_env *e, int *fds, const void *mine, size_t mylen,
                           void **all, size_t *alen)
{
    int n = e->size, done = 1, rc = CADRE_SUCCESS, k;
    const char *what = "fence";
    struct fin *f = calloc((size_t)n, sizeof *f);
    struct pollfd *pfd = calloc((size_t)n, sizeof *pfd);
    int *rank_of = calloc((size_t)n, sizeof *rank_of), *have = calloc((size_t)n, sizeof *have);
    uint8_t *out = NULL;
    if (!f || !pfd || !rank_of || !have) {
        rc = cadre__error(CADRE_ERR_NOMEM, "bootstrap: no memory for a %s of %d ranks", what, n);
        goto out;
    }
    for (int r = 1; r < n; r++)
        if (fds[r] < 0) {
            rc = cadre__error(CADRE_ERR_PEER, "bootstrap: rank %d left before the %s", r, what);
            goto fail;
        }
    double deadline = after(cadre__rdv_now(), e->timeout);
    while (done < n) {
        double t = cadre__rdv_now();
        if (t >= deadline) {
            int cnt;
            char list[512];
            have[0] = 1;
            for (int r = 1; r < n; r++)
                have[r] = f[r].done;
            list_missing(have, n, list, sizeof list, &cnt);
            rc = cadre__error(CADRE_ERR_TIMEOUT, "bootstrap: rank%s %s did not reach the %s "
                              "within %g s (CADRE_TIMEOUT)", cnt == 1 ? "" : "s", list, what,
                              e->timeout);
            goto fail;
        }
        k = 0;
        for (int r = 1; r < n; r++)
            if (!f[r].done) {
                rank_of[k] = r;
                pfd[k++] = (struct pollfd){.fd = fds[r], .events = POLLIN};
            }
        if (poll(pfd, (nfds_t)k, (int)(rdv_min(deadline - t, 1.0) * 1000) + 1) < 0 && errno != EINTR) {
            rc = cadre__error(CADRE_ERR_INTERNAL, "bootstrap: poll: %s", strerror(errno));
            goto fail;
        }
        for (int i = 0; i < k; i++) {
            int r = rank_of[i];
            if (!pfd[i].revents)
                continue;
            rc = step_fence(&f[r], fds[r], r, n);
            if (rc != CADRE_SUCCESS)
                goto fail;
            done += f[r].done;
        }
    }
    size_t total = mylen;
    for (int r = 1; r < n; r++)
        total += f[r].len;
    out = malloc(total ? total : 1);
    if (!out) {
        rc = cadre__error(CADRE_ERR_NOMEM, "bootstrap: no memory for a %s of %zu bytes", what,
                          total);
        goto fail;
    }
    if (mylen)
        memcpy(out, mine, mylen);
    size_t off = mylen;
    for (int r = 1; r < n; r++) {
        if (f[r].len)
            memcpy(out + off, f[r].buf, f[r].len);
        off += f[r].len;
    }
    double d = after(cadre__rdv_now(), e->timeout);
    for (int r = 1; r < n; r++)
        if (cadre__rdv_send(fds[r], RDV_FENCE, out, total, d) != 0) {
            rc = cadre__error(CADRE_ERR_PEER, "bootstrap: rank %d left (%s) during the %s", r,
                              strerror(errno), what);
            goto fail;
        }
    *all = out;
    *alen = total;
    out = NULL;
    goto out;
fail:
    tell_all(fds, n, cadre_last_error());
out:
    if (f)
        for (int r = 0; r < n; r++)
            free(f[r].buf);
    free(f);
    free(pfd);
    free(rank_of);
    free(have);
    free(out);
    return rc;
}
