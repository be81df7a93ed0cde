/*
 * runtime_handle.h - handle tables: what a user holds for a communicator or
 * a request is not a pointer to the object but a handle, a slot of a table
 * with the slot's generation and a kind, in one pointer-sized value.
 *
 * The object may be freed and its memory reused by anything (the allocator
 * hands the same address to the next request): the slot's generation has
 * moved on by then, so a stale copy of the handle no longer matches it, and
 * a value that never was a handle (0x1234, a pointer to the stack) matches
 * no slot. Neither is ever dereferenced. A lookup is a few loads and no
 * lock: slots are never moved or freed (the table grows by chunks that stay
 * until the process ends), and a slot's generation is written only by the
 * thread that owns its object at that moment. Odd generations are live,
 * even ones free: a handle is valid from cadre__h_open to cadre__h_close.
 * A slot's generation wraps after 2^31 uses on 64-bit systems (2^13 on
 * 32-bit ones); only a stale handle kept that long could match again.
 *
 * Layout (64-bit): bits 0-3 the kind, 4-27 the slot, 28-31 zero, 32-63 the
 * generation. 32-bit: bits 0-3 the kind, 4-17 the slot, 18-31 the
 * generation. No kind is 0 or 1, so neither NULL nor CADRE_COMM_WORLD
 * ((cadre_comm_t)1) is ever a table handle, and kinds are odd, so no
 * aligned pointer is one either.
 */
#ifndef CADRE_RUNTIME_HANDLE_H
#define CADRE_RUNTIME_HANDLE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define CADRE_HKIND_COMM 0x5u
#define CADRE_HKIND_REQ 0xbu

#if UINTPTR_MAX > 0xffffffffu
#define CADRE_H_IDX_BITS 24
#define CADRE_H_GEN_SHIFT 32
#define CADRE_H_GEN_MASK 0xffffffffu
#define CADRE_H_CHECK_MASK ((uintptr_t)0xf000000fu) /* the kind and the zero bits */
#else
#define CADRE_H_IDX_BITS 14
#define CADRE_H_GEN_SHIFT 18
#define CADRE_H_GEN_MASK 0x3fffu
#define CADRE_H_CHECK_MASK ((uintptr_t)0xfu)
#endif
#define CADRE_H_IDX_MASK ((1u << CADRE_H_IDX_BITS) - 1)
#define CADRE_H_CHUNK_BITS 12 /* slots per chunk: 4096 (64 KiB on 64-bit systems) */
#define CADRE_H_CHUNK_MASK ((1u << CADRE_H_CHUNK_BITS) - 1)
#define CADRE_H_CHUNKS (1u << (CADRE_H_IDX_BITS - CADRE_H_CHUNK_BITS))

struct cadre_hslot {
    _Atomic uint32_t gen; /* odd while the object is live under a handle */
    uint32_t next_free;   /* free list: next slot + 1, 0 = end (under the lock) */
    void *obj;            /* bound object; set before its first open */
};

struct cadre_htab {
    struct cadre_hslot *_Atomic chunk[CADRE_H_CHUNKS];
    pthread_mutex_t lock; /* binding and unbinding only */
    uint32_t nslots;      /* slots made so far */
    uint32_t free_head;   /* first free slot + 1, 0 = none */
};
#define CADRE_HTAB_INIT {.lock = PTHREAD_MUTEX_INITIALIZER}

/* Binds a free slot to obj (taking the table's lock); the slot stays bound,
 * open or closed, until cadre__h_unbind. CADRE_ERR_NOMEM when the table is
 * full or a chunk cannot be allocated. */
int cadre__h_bind(struct cadre_htab *t, void *obj, uint32_t *idx, struct cadre_hslot **slot);
/* Gives a closed slot back (taking the lock). */
void cadre__h_unbind(struct cadre_htab *t, uint32_t idx);

/* The slot of index idx, which must have been bound once (its chunk exists). */
static inline struct cadre_hslot *cadre__h_slot(struct cadre_htab *t, uint32_t idx)
{
    return &atomic_load_explicit(&t->chunk[idx >> CADRE_H_CHUNK_BITS],
                                 memory_order_relaxed)[idx & CADRE_H_CHUNK_MASK];
}

static inline uintptr_t cadre__h_value(uint32_t kind, uint32_t idx, uint32_t gen)
{
    return ((uintptr_t)(gen & CADRE_H_GEN_MASK) << CADRE_H_GEN_SHIFT) | ((uintptr_t)idx << 4) |
           kind;
}

/* Makes a new handle for the slot's object (owner only): the slot's
 * generation becomes odd, a value no handle had before. */
static inline uintptr_t cadre__h_open(struct cadre_hslot *s, uint32_t kind, uint32_t idx)
{
    uint32_t g = (atomic_load_explicit(&s->gen, memory_order_relaxed) + 1) & CADRE_H_GEN_MASK;
    atomic_store_explicit(&s->gen, g, memory_order_release);
    return cadre__h_value(kind, idx, g);
}

/* Ends the handle (owner only): every copy of it is stale from now on. */
static inline void cadre__h_close(struct cadre_hslot *s)
{
    uint32_t g = (atomic_load_explicit(&s->gen, memory_order_relaxed) + 1) & CADRE_H_GEN_MASK;
    atomic_store_explicit(&s->gen, g, memory_order_release);
}

/* The object of live handle h of this kind, or NULL (never dereferences h). */
static inline void *cadre__h_find(struct cadre_htab *t, uintptr_t h, uint32_t kind)
{
#if CADRE_H_GEN_SHIFT == 32
    /* With 16-byte slots the slot's offset in its chunk is h's bits 4-15
     * as they stand; one test covers the kind, the zero bits and an odd
     * (live) generation. */
    _Static_assert(sizeof(struct cadre_hslot) == 16, "slot offset is h & 0xfff0");
    const uintptr_t odd = (uintptr_t)1 << CADRE_H_GEN_SHIFT;
    if ((h & (CADRE_H_CHECK_MASK | odd)) != (kind | odd))
        return NULL;
    struct cadre_hslot *c = atomic_load_explicit(
        &t->chunk[(h >> (4 + CADRE_H_CHUNK_BITS)) & (CADRE_H_CHUNKS - 1)], memory_order_acquire);
    if (!c)
        return NULL;
    struct cadre_hslot *s =
        (struct cadre_hslot *)((char *)c + (h & ((uintptr_t)CADRE_H_CHUNK_MASK << 4)));
    if (atomic_load_explicit(&s->gen, memory_order_acquire) != (uint32_t)(h >> CADRE_H_GEN_SHIFT))
        return NULL;
    return s->obj;
#else
    if ((h & CADRE_H_CHECK_MASK) != kind)
        return NULL;
    uint32_t idx = (uint32_t)(h >> 4) & CADRE_H_IDX_MASK;
    struct cadre_hslot *c =
        atomic_load_explicit(&t->chunk[idx >> CADRE_H_CHUNK_BITS], memory_order_acquire);
    if (!c)
        return NULL;
    struct cadre_hslot *s = &c[idx & CADRE_H_CHUNK_MASK];
    uint32_t g = atomic_load_explicit(&s->gen, memory_order_acquire);
    if (g != ((uint32_t)(h >> CADRE_H_GEN_SHIFT) & CADRE_H_GEN_MASK) || !(g & 1))
        return NULL;
    return s->obj;
#endif
}

/* Calls fn(obj, arg) for the object of every open handle (a live handle's
 * slot), under the table's lock: fn must take no lock that is ever held
 * while binding or unbinding. */
void cadre__h_foreach_open(struct cadre_htab *t, void (*fn)(void *obj, void *arg), void *arg);

/* For the message of a failed lookup: 1 when h has the form of a handle of
 * this kind to a slot that has been used since (a freed object's handle),
 * 0 when it never was a handle of this table. */
int cadre__h_stale(struct cadre_htab *t, uintptr_t h, uint32_t kind);

#endif /* CADRE_RUNTIME_HANDLE_H */
