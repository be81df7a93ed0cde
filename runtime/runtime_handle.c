/* Handle tables (runtime_handle.h): binding slots to objects. */
#include <stdlib.h>

#include "runtime.h"

int cadre__h_bind(struct cadre_htab *t, void *obj, uint32_t *idx, struct cadre_hslot **slot)
{
    pthread_mutex_lock(&t->lock);
    uint32_t i;
    struct cadre_hslot *s;
    if (t->free_head) {
        i = t->free_head - 1;
        s = &atomic_load_explicit(&t->chunk[i >> CADRE_H_CHUNK_BITS],
                                  memory_order_relaxed)[i & CADRE_H_CHUNK_MASK];
        t->free_head = s->next_free;
    } else {
        i = t->nslots;
        if (i > CADRE_H_IDX_MASK) {
            pthread_mutex_unlock(&t->lock);
            return CADRE_ERR_NOMEM;
        }
        struct cadre_hslot *c =
            atomic_load_explicit(&t->chunk[i >> CADRE_H_CHUNK_BITS], memory_order_relaxed);
        if (!c) {
            /* Zeroed: generation 0, free, matches no handle. Published only
             * once initialised, for lookups that take no lock. */
            c = calloc((size_t)CADRE_H_CHUNK_MASK + 1, sizeof *c);
            if (!c) {
                pthread_mutex_unlock(&t->lock);
                return CADRE_ERR_NOMEM;
            }
            atomic_store_explicit(&t->chunk[i >> CADRE_H_CHUNK_BITS], c, memory_order_release);
        }
        t->nslots = i + 1;
        s = &c[i & CADRE_H_CHUNK_MASK];
    }
    s->next_free = 0;
    s->obj = obj;
    pthread_mutex_unlock(&t->lock);
    *idx = i;
    *slot = s;
    return CADRE_SUCCESS;
}

void cadre__h_unbind(struct cadre_htab *t, uint32_t idx)
{
    pthread_mutex_lock(&t->lock);
    struct cadre_hslot *s = &atomic_load_explicit(&t->chunk[idx >> CADRE_H_CHUNK_BITS],
                                                  memory_order_relaxed)[idx & CADRE_H_CHUNK_MASK];
    s->obj = NULL;
    s->next_free = t->free_head;
    t->free_head = idx + 1;
    pthread_mutex_unlock(&t->lock);
}

void cadre__h_foreach_open(struct cadre_htab *t, void (*fn)(void *obj, void *arg), void *arg)
{
    pthread_mutex_lock(&t->lock);
    for (uint32_t i = 0; i < t->nslots; i++) {
        struct cadre_hslot *s = cadre__h_slot(t, i);
        if ((atomic_load_explicit(&s->gen, memory_order_acquire) & 1) && s->obj)
            fn(s->obj, arg);
    }
    pthread_mutex_unlock(&t->lock);
}

int cadre__h_stale(struct cadre_htab *t, uintptr_t h, uint32_t kind)
{
    if ((h & CADRE_H_CHECK_MASK) != kind)
        return 0;
    uint32_t idx = (uint32_t)(h >> 4) & CADRE_H_IDX_MASK;
    uint32_t hg = (uint32_t)(h >> CADRE_H_GEN_SHIFT) & CADRE_H_GEN_MASK;
    struct cadre_hslot *c =
        atomic_load_explicit(&t->chunk[idx >> CADRE_H_CHUNK_BITS], memory_order_acquire);
    if (!c || !(hg & 1))
        return 0;
    uint32_t g = atomic_load_explicit(&c[idx & CADRE_H_CHUNK_MASK].gen, memory_order_acquire);
    /* The slot has moved past the handle's generation: it was handed out
     * and has been closed since (modulo the wrap of the generation). */
    uint32_t ahead = (g - hg) & CADRE_H_GEN_MASK;
    return ahead != 0 && ahead <= CADRE_H_GEN_MASK / 2;
}
