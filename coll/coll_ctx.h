/* Context ids and shared-memory slots of the communicators being made
 * (coll_ctx.c). May call: runtime, coll_fast.
 *
 * Every process keeps next_ctx, above the context of every communicator it
 * belongs to. The ranks that make a communicator offer theirs, and take the
 * largest (and the lowest slot free at all of them). Threads of a process may
 * make communicators at once (on different parents, or create_group with
 * different tags): between its offer and the agreement, another creation of
 * the process may have taken that context or slot. So each rank then claims
 * the agreed pair in its process, and the ranks agree once more that every
 * claim held; where one did not, every rank gives its claim back and they
 * offer again (the process that lost has moved next_ctx past it). */
#ifndef CADRE_COLL_CTX_H
#define CADRE_COLL_CTX_H

#include <stdint.h>

#include "coll.h"

/* What a rank offers: its next_ctx and the slots free in its process. */
void cadre__ctx_offer(uint32_t *ctx, uint64_t *fast);

struct ctx_claim {
    uint32_t ctx;
    int slot; /* -1: none */
    int held; /* the context is this claim's */
};
/* Claims ctx and the lowest slot of fast (the AND of the members' masks)
 * in this process: 1 claimed, 0 another creation of this process holds one
 * of them (nothing claimed), -1 no memory (nothing claimed). */
int cadre__ctx_claim(uint32_t ctx, uint64_t fast, struct ctx_claim *cl);
/* Gives a claim back (the ranks did not all claim theirs). */
void cadre__ctx_unclaim(struct ctx_claim *cl);
/* A communicator's context is free again (cadre_comm_free). */
void cadre__ctx_release(uint32_t ctx);

/* Offer rounds before a creation gives up (each one moves past a context a
 * thread of some member took meanwhile: more means a bug). */
#define CTX_ROUNDS 1000

#endif
