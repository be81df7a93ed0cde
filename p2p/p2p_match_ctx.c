/* The matching table (p2p_match.h) as a whole: its storage, the look for
 * a collective's queued message (cadre__p2p_probe_coll, cadre__p2p_unexp_each),
 * the receives a failed peer fails, and the cleanup at finalize.
 * May call: this folder's engine and requests, runtime/. */
#include <stdio.h>
#include <stdlib.h>

#include "p2p_engine.h"
#include "p2p_match.h"

struct match_ctx *cadre__p2p_ctxs;
uint32_t cadre__p2p_nctx_cap, cadre__p2p_nctx_used, cadre__p2p_ctx_last;
uint32_t cadre__p2p_unexp_gen;

/* Open addressing on the context id; communicators are few. */
struct match_ctx *cadre__p2p_ctx_find_slow(uint32_t ctx, int create)
{
    if (cadre__p2p_nctx_cap) {
        for (uint32_t i = 0, h = (ctx * 2654435761u) & (cadre__p2p_nctx_cap - 1); i < cadre__p2p_nctx_cap;
             i++, h = (h + 1) & (cadre__p2p_nctx_cap - 1)) {
            if (!cadre__p2p_ctxs[h].used)
                break;
            if (cadre__p2p_ctxs[h].ctx == ctx) {
                cadre__p2p_ctx_last = h;
                return &cadre__p2p_ctxs[h];
            }
        }
    }
    if (!create)
        return NULL;
    if ((cadre__p2p_nctx_used + 1) * 2 > cadre__p2p_nctx_cap) {
        uint32_t ncap = cadre__p2p_nctx_cap ? cadre__p2p_nctx_cap * 2 : 16;
        struct match_ctx *n = calloc(ncap, sizeof *n);
        if (!n)
            return NULL;
        for (uint32_t i = 0; i < cadre__p2p_nctx_cap; i++) {
            if (!cadre__p2p_ctxs[i].used)
                continue;
            uint32_t h = (cadre__p2p_ctxs[i].ctx * 2654435761u) & (ncap - 1);
            while (n[h].used)
                h = (h + 1) & (ncap - 1);
            n[h] = cadre__p2p_ctxs[i];
        }
        free(cadre__p2p_ctxs);
        cadre__p2p_ctxs = n;
        cadre__p2p_nctx_cap = ncap;
        cadre__p2p_ctx_last = 0; /* the entries moved */
    }
    uint32_t h = (ctx * 2654435761u) & (cadre__p2p_nctx_cap - 1);
    while (cadre__p2p_ctxs[h].used)
        h = (h + 1) & (cadre__p2p_nctx_cap - 1);
    cadre__p2p_ctxs[h].used = 1;
    cadre__p2p_ctxs[h].ctx = ctx;
    cadre__p2p_nctx_used++;
    cadre__p2p_ctx_last = h;
    return &cadre__p2p_ctxs[h];
}

/* Fails a receive from CADRE_ANY_SOURCE because rank q of its communicator
 * (world rank w) failed: any rank might have been its sender, so it cannot
 * wait (ULFM's MPI_ERR_PROC_FAILED_PENDING). */
void cadre__p2p_any_source_text(const struct cadre_request *r, int q, int w, char *buf, size_t len)
{
    char world[32] = "";
    if (q != w)
        snprintf(world, sizeof world, " (world rank %d)", w);
    snprintf(buf, len, "%s: from CADRE_ANY_SOURCE while rank %d%s of the communicator has failed "
                       "(%s); it may have been the sender",
             r->op, q, world, cadre__eng.peers[w].why);
}

void cadre__p2p_unexp_each(uint32_t ctx, int (*fn)(void *arg, const struct cadre_p2p_hdr *h),
                           void *arg)
{
    struct match_ctx *m = ctx_find(ctx, 0);
    for (struct unexp *u = m ? m->unexp : NULL; u; u = u->next)
        if (fn(arg, &u->h))
            return;
}

/* Streams the send's DATA fragments after the receiver's CTS. */
int cadre__p2p_probe_coll(uint32_t ctx, int tag, uint64_t *sig)
{
    int src = -1;
    eng_lock();
    struct match_ctx *m = ctx_find(ctx, 0);
    for (struct unexp *u = m ? m->unexp : NULL; u; u = u->next) {
        if (u->h.tag == tag) {
            src = u->h.src;
            *sig = u->h.off;
            break;
        }
    }
    eng_unlock();
    return src;
}

/* Posted receives waiting on a failed peer, and, when it died (no BYE),
 * those from any source on a communicator it belongs to; requests with ids
 * are failed by the engine. */
int cadre__p2p_match_fail_peer(int peer, const char *why)
{
    int failed = 0, died = cadre__p2p_peer_died(peer);
    for (uint32_t i = 0; i < cadre__p2p_nctx_cap; i++) {
        if (!cadre__p2p_ctxs[i].used)
            continue;
        for (struct cadre_request *r = cadre__p2p_ctxs[i].posted, *n; r; r = n) {
            n = r->next;
            if (r->peer == CADRE_ANY_SOURCE) {
                int q = died && r->comm ? cadre__p2p_comm_rank_of(r->comm, peer) : -1;
                if (q < 0)
                    continue;
                char msg[512];
                cadre__p2p_any_source_text(r, q, peer, msg, sizeof msg);
                cadre__p2p_unpost(r);
                cadre__req_complete(r, CADRE_ERR_PEER, "%s", msg);
                failed++;
                continue;
            }
            if (r->peer_world != peer)
                continue;
            cadre__p2p_unpost(r);
            cadre__req_complete(r, CADRE_ERR_PEER, "%s: peer rank %d %s", r->op, peer, why);
            failed++;
        }
    }
    return failed;
}

void cadre__p2p_match_cleanup(void)
{
    for (uint32_t i = 0; i < cadre__p2p_nctx_cap; i++) {
        for (struct unexp *u = cadre__p2p_ctxs[i].unexp, *n; u; u = n) {
            n = u->next;
            free(u->data);
            free(u);
        }
    }
    free(cadre__p2p_ctxs);
    cadre__p2p_ctxs = NULL;
    cadre__p2p_nctx_cap = cadre__p2p_nctx_used = cadre__p2p_ctx_last = 0;
}

/* NACK with rreq 0: the sender gave up on its message h->sreq, whose data
 * its transport carried with the RTS, before any receive here took it
 * (p2p.h): it is no longer there to take. */
void cadre__p2p_unexp_withdraw(int peer, const struct cadre_p2p_hdr *h)
{
    struct match_ctx *m = ctx_find(h->ctx, 0);
    for (struct unexp *u = m ? m->unexp : NULL, *prev = NULL; u; prev = u, u = u->next) {
        if (u->peer != peer || u->h.type != CADRE_P2P_RTS || u->h.sreq != h->sreq)
            continue;
        unexp_unlink(m, u, prev);
        free(u->data);
        free(u);
        __atomic_store_n(&cadre__p2p_unexp_gen, cadre__p2p_unexp_gen + 1, __ATOMIC_RELEASE);
        return;
    }
}
