/* Context ids and shared-memory slots of the communicators being made: the
 * offers and the claims (coll_ctx.h says why claims). May call: runtime,
 * coll_fast. */
#include <pthread.h>
#include <stdlib.h>

#include "coll_ctx.h"
#include "coll_fast.h"

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t next_ctx = 4;
/* The contexts of this process's communicators and of those being made. */
static uint32_t *held;
static size_t nheld, capheld;

void cadre__ctx_offer(uint32_t *ctx, uint64_t *fast)
{
    pthread_mutex_lock(&ctx_lock);
    *ctx = next_ctx;
    pthread_mutex_unlock(&ctx_lock);
    *fast = cadre__fast_free_mask();
}

int cadre__ctx_claim(uint32_t ctx, uint64_t fast, struct ctx_claim *cl)
{
    *cl = (struct ctx_claim){.ctx = ctx, .slot = -1, .held = 0};
    pthread_mutex_lock(&ctx_lock);
    for (size_t i = 0; i < nheld; i++) {
        if (held[i] == ctx) {
            /* Its claim moved next_ctx past it: the next offer is higher. */
            pthread_mutex_unlock(&ctx_lock);
            return 0;
        }
    }
    if (nheld == capheld) {
        size_t cap = capheld ? 2 * capheld : 16;
        uint32_t *more = realloc(held, cap * sizeof *more);
        if (!more) {
            pthread_mutex_unlock(&ctx_lock);
            return -1;
        }
        held = more;
        capheld = cap;
    }
    held[nheld++] = ctx;
    if (next_ctx < ctx + 4)
        next_ctx = ctx + 4;
    pthread_mutex_unlock(&ctx_lock);
    cl->held = 1;
    int slot = cadre__fast_reserve(fast);
    if (slot == -2) {
        /* Taken since the offer: the next offer leaves it out. */
        cadre__ctx_release(ctx);
        cl->held = 0;
        return 0;
    }
    cl->slot = slot;
    return 1;
}

void cadre__ctx_unclaim(struct ctx_claim *cl)
{
    if (cl->held)
        cadre__ctx_release(cl->ctx);
    cadre__fast_unreserve(cl->slot);
    cl->held = 0;
    cl->slot = -1;
}

void cadre__ctx_release(uint32_t ctx)
{
    pthread_mutex_lock(&ctx_lock);
    for (size_t i = 0; i < nheld; i++) {
        if (held[i] == ctx) {
            held[i] = held[--nheld];
            break;
        }
    }
    if (!nheld) {
        free(held);
        held = NULL;
        capheld = 0;
    }
    pthread_mutex_unlock(&ctx_lock);
}
