/* p2p_match.h - the matching table shared by p2p_match.c (posting and
 * matching) and p2p_match_ctx.c (its walks: failures, probes, cleanup):
 * per context, the posted receives and the messages no receive took yet.
 * Lock held for all of it. */
#ifndef CADRE_P2P_MATCH_H
#define CADRE_P2P_MATCH_H

#include <stdint.h>
#include <stdlib.h>

#include "p2p_engine.h"

struct unexp {
    struct cadre_p2p_hdr h; /* EAGER or RTS */
    int peer;               /* world rank of the sender */
    void *data;             /* EAGER payload copy */
    struct unexp *next;
};

struct match_ctx {
    uint32_t ctx;
    int used;
    struct cadre_request *posted, *posted_tail;
    struct unexp *unexp, *unexp_tail;
};

/* Open addressing on the context id; communicators are few. */
extern struct match_ctx *cadre__p2p_ctxs;
extern uint32_t cadre__p2p_nctx_cap, cadre__p2p_nctx_used;

/* Bumped, lock held, whenever a message is queued unmatched: a blocking
 * probe (p2p_probe.c) looks at the queues again only when it moved. */
extern uint32_t cadre__p2p_unexp_gen;

/* The look-up and creation behind ctx_find (p2p_match_ctx.c). */
struct match_ctx *cadre__p2p_ctx_find_slow(uint32_t ctx, int create);
extern uint32_t cadre__p2p_ctx_last; /* the entry found last */

/* The entry of context ctx (made when create; NULL on ENOMEM), lock held.
 * Most traffic is on one communicator: the entry found last is tried inline
 * (it is on the path of every message), the table out of line. */
static inline struct match_ctx *ctx_find(uint32_t ctx, int create)
{
    if (__builtin_expect(cadre__p2p_nctx_cap != 0, 1)) {
        struct match_ctx *m = &cadre__p2p_ctxs[cadre__p2p_ctx_last];
        if (m->used && m->ctx == ctx)
            return m;
    }
    return cadre__p2p_ctx_find_slow(ctx, create);
}

/* Takes u, which follows prev (NULL: u is the first), out of m's queue of
 * unmatched messages, lock held; the caller frees it. */
static inline void unexp_unlink(struct match_ctx *m, struct unexp *u, struct unexp *prev)
{
    if (prev)
        prev->next = u->next;
    else
        m->unexp = u->next;
    if (m->unexp_tail == u)
        m->unexp_tail = prev;
}

/* Whether a receive from `src` (or CADRE_ANY_SOURCE) with `tag` (or
 * CADRE_ANY_TAG) takes the message h. */
static inline int takes(int src, int tag, const struct cadre_p2p_hdr *h)
{
    return (src == CADRE_ANY_SOURCE || src == (int)h->src) &&
           (tag == CADRE_ANY_TAG || tag == (int)h->tag);
}

/* The receive DATA header h from peer is for (registered, waiting for
 * data, h within what it takes), or NULL. */
static inline struct cadre_request *cadre__p2p_data_target(int peer,
                                                           const struct cadre_p2p_hdr *h)
{
    struct cadre_request *r = cadre__req_lookup(h->rreq);
    /* xfer 0: a receive that takes no DATA (claimed by an EAGER payload); cma:
     * one that read its data itself. */
    if (!r || r->kind != REQ_RECV || r->state != RS_WAIT_DATA || r->peer_world != peer ||
        !r->xfer || r->cma || h->off > r->xfer || h->len > r->xfer - h->off)
        return NULL;
    return r;
}

/* The message of a receive from CADRE_ANY_SOURCE failed because rank q of
 * its communicator (world rank w) failed. */
void cadre__p2p_any_source_text(const struct cadre_request *r, int q, int w, char *buf,
                                size_t len);

/* Single-copy large messages between processes of one node (p2p_cma.c). */
/* Whether large send r (registered) to world rank w offers its buffer to
 * be read; notes it as the last one to w. */
int cadre__p2p_cma_offer(int w, const struct cadre_request *r);
/* Reads n bytes at address src of world rank w into dst; 0, or -1 when it
 * could not (the message then goes the usual way). */
int cadre__p2p_cma_read(int w, void *dst, uint64_t src, size_t n);
/* Receive r (RS_WAIT_DATA, registered, xfer > 0) matched RTS h flagged CMA
 * from world rank peer: reads it in place and answers; 0 when it did
 * nothing, and the caller answers CTS. */
int cadre__p2p_cma_recv(struct cadre_request *r, int peer, const struct cadre_p2p_hdr *h);
/* A CTS flagged CMA from the receiver of a send: a write grant, or its read
 * report. */
void cadre__p2p_cma_fin(int peer, const struct cadre_p2p_hdr *h);
/* A DONE: the sender's part is written and its buffer was whole. */
void cadre__p2p_cma_done(int peer, const struct cadre_p2p_hdr *h);
/* Completes a receive whose data is in place (truncation is an error). */
void cadre__p2p_complete_recv(struct cadre_request *r);
/* NACK with rreq 0 (p2p.h): the unexpected RTS h->sreq of peer on h->ctx,
 * whose sender withdrew it, is dropped (p2p_match_ctx.c). */
void cadre__p2p_unexp_withdraw(int peer, const struct cadre_p2p_hdr *h);

#endif
