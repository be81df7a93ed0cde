/* The UCX transport's wireup (p2p_ucx.c has the design): each rank reads
 * the worker addresses of its off-host peers, makes its endpoint to each
 * while every host is up, and publishes its verdict ("ucx.ok": whether its
 * ucx wired up, and the peers whose endpoint UCX could not make); after
 * the engine's agreement fence both ranks of every pair read the other's
 * verdict and decide alike: ucx, or tcp (by default), or cadre_init fails
 * naming why (where CADRE_TRANSPORT forces ucx). May call: this folder,
 * bootstrap/, runtime/. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "p2p/p2p_ucx.h"

#if HAVE_UCX

#define st (&cadre__ucx_st)
#define U cadre__ucx

char cadre__ucx_own_why[384];

/* Peers off this host that published an address. */
static int wire_peers(void)
{
    st->cookie = cadre__p2p_info.job_cookie;
    for (int w = 0; w < st->size; w++) {
        struct ucx_peer *p = &st->peers[w];
        if (w == st->rank || cadre__p2p_same_host(w))
            continue;
        void *data = NULL;
        size_t len = 0;
        if (cadre__bootstrap_get(w, "ucx", &data, &len) != CADRE_SUCCESS)
            continue; /* it does not use ucx: tcp between us */
        const struct ucx_blob *b = data;
        if (len < sizeof *b || b->magic != UCX_MAGIC || b->version != UCX_BLOB_VERSION ||
            len != sizeof *b + b->addrlen) {
            free(data);
            return cadre__error(CADRE_ERR_BOOTSTRAP, "ucx: rank %d published a bad endpoint "
                                                     "(%zu bytes; another cadre version?)", w, len);
        }
        snprintf(p->host, sizeof p->host, "%.*s", (int)sizeof b->host - 1, b->host);
        p->addr = malloc(b->addrlen);
        if (!p->addr) {
            free(data);
            return cadre__error(CADRE_ERR_NOMEM, "ucx: out of memory for %d peers", st->size);
        }
        memcpy(p->addr, b->addr, b->addrlen);
        p->addrlen = b->addrlen;
        p->reachable = 1;
        free(data);
        /* Its endpoint now, while every host is up (UCX's connect() blocks
         * for tens of seconds toward a host whose link was cut: none is
         * made later), and before the verdicts: where UCX cannot make it,
         * both ranks of the pair learn so before anything went over ucx
         * (cadre__p2p_ucx_agree). */
        ucs_status_t s = cadre__ucx_ep(w);
        if (s != UCS_OK) {
            p->ep_status = s;
            CADRE_INFO(P2P, "ucx: no endpoint to rank %d (host %s): UCX ucp_ep_create: %s", w,
                       p->host, U.ucs_status_string(s));
        }
    }
    return CADRE_SUCCESS;
}

/* Whether this rank's ucx wired up, published after wireup ("ucx.ok") by
 * every rank that published an endpoint; the engine's agreement fence
 * (cadre__shm_agree's) carries it, and cadre__p2p_ucx_agree reads it. It
 * lists the peers whose endpoint UCX could not make (nfail of struct
 * ucx_nopeer after it): such a pair takes tcp (or cadre_init fails, where
 * ucx was forced) on both sides. */
struct ucx_verdict {
    int32_t ok;
    int32_t nfail;
    char why[384]; /* else why not, naming the rank */
};
struct ucx_nopeer {
    int32_t rank;
    int32_t status; /* ucp_ep_create's ucs_status_t */
};
/* More peers than this without an endpoint: ucx is off on the rank. */
#define UCX_NOPEER_MAX 64

int cadre__ucx_wireup(void)
{
    if (!st->on)
        return CADRE_SUCCESS;
    int rc = wire_peers();
    int nfail = 0, first = -1;
    for (int w = 0; rc == CADRE_SUCCESS && w < st->size; w++)
        if (st->peers[w].reachable && st->peers[w].ep_status) {
            first = first < 0 ? w : first;
            nfail++;
        }
    if (nfail > UCX_NOPEER_MAX)
        rc = cadre__error(CADRE_ERR_UNSUPPORTED, "ucx: UCX cannot make endpoints to %d peers "
                          "(rank %d, host %s: %s)", nfail, first, st->peers[first].host,
                          U.ucs_status_string(st->peers[first].ep_status));
    if (rc != CADRE_SUCCESS)
        nfail = 0;
    size_t len = sizeof(struct ucx_verdict) + (size_t)nfail * sizeof(struct ucx_nopeer);
    struct ucx_verdict *v = calloc(1, len);
    if (!v) {
        snprintf(cadre__ucx_own_why, sizeof cadre__ucx_own_why, "rank %d: out of memory", st->rank);
        return cadre__error(CADRE_ERR_NOMEM, "%s", cadre__ucx_own_why);
    }
    v->ok = rc == CADRE_SUCCESS;
    v->nfail = nfail;
    struct ucx_nopeer *np = (struct ucx_nopeer *)(v + 1);
    for (int w = 0, i = 0; i < nfail && w < st->size; w++)
        if (st->peers[w].reachable && st->peers[w].ep_status)
            np[i++] = (struct ucx_nopeer){.rank = w, .status = st->peers[w].ep_status};
    if (!v->ok)
        snprintf(cadre__ucx_own_why, sizeof cadre__ucx_own_why, "rank %d: %s", st->rank, cadre_last_error());
    snprintf(v->why, sizeof v->why, "%s", cadre__ucx_own_why);
    int prc = cadre__bootstrap_put("ucx.ok", v, len);
    free(v);
    if (rc != CADRE_SUCCESS)
        return cadre__error(rc, "%s", cadre__ucx_own_why);
    if (prc != CADRE_SUCCESS)
        snprintf(cadre__ucx_own_why, sizeof cadre__ucx_own_why, "rank %d: %s", st->rank, cadre_last_error());
    return prc;
}

/* Where UCX could not make the endpoint of a pair (at either end): a
 * forced ucx fails cadre_init naming both ranks, their hosts and UCX's
 * reason; by default the pair takes tcp, both sides warned. */
static int pair_without_ep(int w, int at, int status, const char *list, int *warned)
{
    struct ucx_peer *p = &st->peers[w];
    char why[384];
    snprintf(why, sizeof why, "UCX cannot make rank %d's endpoint to rank %d (host %s to host "
             "%s): ucp_ep_create: %s", at, at == w ? st->rank : w, at == w ? p->host : st->host,
             at == w ? st->host : p->host, U.ucs_status_string((ucs_status_t)status));
    if (cadre__p2p_info.ucx_forced)
        return cadre__error(CADRE_ERR_UNSUPPORTED, "cadre_init: CADRE_TRANSPORT=\"%s\" asks for ucx, "
                            "which cannot reach rank %d (host %s) from rank %d (host %s): %s",
                            list, w, p->host, st->rank, st->host, why);
    if (p->ep)
        cadre__ucx_ep_force_close(w);
    p->state = EP_NONE;
    p->reachable = 0;
    if ((*warned)++ < 3)
        CADRE_WARN(P2P, "ucx: rank %d (host %s) over tcp instead: %s", w, p->host, why);
    else
        CADRE_INFO(P2P, "ucx: rank %d (host %s) over tcp instead: %s", w, p->host, why);
    return CADRE_SUCCESS;
}

int cadre__p2p_ucx_agree(const char *list)
{
    int forced = cadre__p2p_info.ucx_forced;
    if (forced && cadre__ucx_own_why[0])
        return cadre__error(CADRE_ERR_UNSUPPORTED, "cadre_init: CADRE_TRANSPORT=\"%s\" asks for "
                            "ucx, which cannot start on %s", list, cadre__ucx_own_why);
    int warned = 0;
    for (int w = 0; st->on && w < st->size; w++) {
        struct ucx_peer *p = &st->peers[w];
        if (!p->reachable)
            continue;
        void *data = NULL;
        size_t len = 0;
        struct ucx_verdict v = {.ok = 0};
        int status = 0; /* w's failure to make its endpoint to this rank */
        if (cadre__bootstrap_get(w, "ucx.ok", &data, &len) != CADRE_SUCCESS)
            snprintf(v.why, sizeof v.why, "rank %d published no verdict on ucx", w);
        else if (len < sizeof v ||
                 (memcpy(&v, data, sizeof v), v.nfail < 0 || v.nfail > UCX_NOPEER_MAX ||
                  len != sizeof v + (size_t)v.nfail * sizeof(struct ucx_nopeer))) {
            snprintf(v.why, sizeof v.why, "rank %d published a %zu-byte verdict on ucx "
                     "(another cadre version?)", w, len);
            v.ok = 0;
        } else {
            const struct ucx_nopeer *np = (const struct ucx_nopeer *)((char *)data + sizeof v);
            for (int i = 0; i < v.nfail; i++)
                if (np[i].rank == st->rank)
                    status = np[i].status ? np[i].status : UCS_ERR_UNREACHABLE;
        }
        free(data);
        if (v.ok) {
            int rc = CADRE_SUCCESS;
            if (p->ep_status)
                rc = pair_without_ep(w, st->rank, p->ep_status, list, &warned);
            else if (status)
                rc = pair_without_ep(w, w, status, list, &warned);
            if (rc != CADRE_SUCCESS)
                return rc;
            continue;
        }
        v.why[sizeof v.why - 1] = '\0';
        if (forced)
            return cadre__error(CADRE_ERR_UNSUPPORTED, "cadre_init: CADRE_TRANSPORT=\"%s\" asks "
                                "for ucx, which cannot start on %s", list, v.why);
        /* Both sides drop the pair: that rank has no ucx at all. */
        if (p->ep)
            cadre__ucx_ep_force_close(w);
        p->state = EP_NONE;
        p->reachable = 0;
        CADRE_INFO(P2P, "ucx: not used with rank %d (%s): tcp between us", w, v.why);
    }
    if (warned > 3)
        CADRE_WARN(P2P, "ucx: %d peers over tcp instead, as UCX could not make their endpoints "
                   "(CADRE_DEBUG=INFO names each)", warned);
    /* The peers' silence counts from here, not from the endpoints made
     * before the fence: their heartbeats start when their init ends. */
    double now = cadre__ucx_now();
    for (int w = 0; st->on && w < st->size; w++)
        if (st->peers[w].state == EP_UP)
            st->peers[w].last_heard = st->peers[w].last_sent = now;
    return CADRE_SUCCESS;
}

#endif /* HAVE_UCX */
