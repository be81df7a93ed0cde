/* The engine lock: a spin-then-sleep lock whose owner thread, while no
 * other thread takes it, enters and leaves with plain stores (a biased
 * lock).
 *
 * A locked instruction (compare-and-swap) costs 30-50 cycles here, most of
 * it waiting for the stores before it to reach the cache: on the message
 * rate's path the receiver takes the lock for every posted receive and the
 * sender for every send, and perf put three quarters of the time of
 * those calls on that one instruction. But in most jobs one application
 * thread makes every call, and the progress thread takes the lock only
 * while that thread is away. So the lock is biased to the thread that
 * called cadre_init (the owner): while `biased` is set, the owner enters
 * by storing in = 1 and then checking that `biased` is still set, with no
 * fence between. Any other thread takes `word` (compare-and-swap) and, if
 * the lock is biased, revokes the bias: it clears `biased`, makes every
 * thread of the process execute a full barrier (membarrier,
 * MEMBARRIER_CMD_PRIVATE_EXPEDITED), and waits for `in` to be 0. After
 * the barrier, either the owner's store of in = 1 is visible (the revoker
 * waits for its unlock), or the owner's check comes after the barrier and
 * sees `biased` clear (the owner backs out and takes `word` like anyone).
 *
 * Revoking costs the membarrier (a few microseconds), so the bias returns
 * only when the progress thread (the helper) goes back to sleep, and
 * never once a third thread (cadre_init_thread's users, the GPU proxy)
 * has taken the lock: `multi` is set then. Where membarrier's private
 * expedited command is not there, the lock is never biased.
 *
 * Generic over the lock's address (the engine has one, tests/unit/test_lock.c
 * its own); a thread's role is in thread-local variables, so one lock is
 * biased at a time in a process. */
#ifndef CADRE_P2P_LOCK_H
#define CADRE_P2P_LOCK_H

#include <stdatomic.h>
#include <stdint.h>

struct cadre_eng_lock {
    _Atomic uint32_t word;      /* 0 free, 1 held by a thread that took it by CAS */
    _Atomic uint32_t waiters;   /* threads asleep (or about to be) on word */
    _Atomic uint32_t biased;    /* the owner enters by `in` alone */
    _Atomic uint32_t owner_gen; /* the owner thread is the one whose cadre__lock_gen equals it */
    _Atomic uint32_t in;        /* the owner holds the lock through the bias */
    _Atomic uint32_t multi;     /* a thread other than the owner and the helper took it */
    int can_bias;               /* membarrier's private expedited command is registered */
    int yield_spins;            /* waits yield the core (oversubscribed) */
    _Atomic unsigned long n_revokes, n_rebias;
};

/* This thread's owner generation (the owner's equals owner_gen) and
 * whether it is the helper (the progress thread). */
extern __thread uint32_t cadre__lock_gen __attribute__((tls_model("initial-exec")));
extern __thread int cadre__lock_helper __attribute__((tls_model("initial-exec")));

/* Makes the calling thread the owner and biases the lock where membarrier
 * allows; no other thread may use the lock yet. */
void cadre__lock_init(struct cadre_eng_lock *l, int yield_spins);
/* The helper is about to sleep: gives the bias back to the owner unless a
 * third thread has used the lock. Takes the lock; call it unlocked. */
void cadre__lock_rebias(struct cadre_eng_lock *l);

void cadre__lock_slow(struct cadre_eng_lock *l);
void cadre__lock_wake(struct cadre_eng_lock *l);
/* A thread other than the owner holds `word`: revokes the bias, records a
 * third thread. */
void cadre__lock_took_word(struct cadre_eng_lock *l);

static inline int cadre__lock_is_owner(struct cadre_eng_lock *l)
{
    return cadre__lock_gen == atomic_load_explicit(&l->owner_gen, memory_order_relaxed);
}

static inline int cadre__lock_try(struct cadre_eng_lock *l)
{
    if (atomic_load_explicit(&l->biased, memory_order_relaxed) && cadre__lock_is_owner(l)) {
        if (atomic_load_explicit(&l->in, memory_order_relaxed))
            return 0; /* we hold it already: a trylock fails, as on `word` */
        atomic_store_explicit(&l->in, 1, memory_order_relaxed);
        /* No fence: the revoker's membarrier orders this store before our
         * check (see the top); the compiler must not reorder them. */
        atomic_signal_fence(memory_order_seq_cst);
        if (atomic_load_explicit(&l->biased, memory_order_acquire))
            return 1;
        atomic_store_explicit(&l->in, 0, memory_order_release);
    }
    uint32_t free_ = 0;
    if (!atomic_compare_exchange_strong_explicit(&l->word, &free_, 1, memory_order_acquire,
                                                 memory_order_relaxed))
        return 0;
    if (!cadre__lock_is_owner(l) &&
        (atomic_load_explicit(&l->biased, memory_order_relaxed) ||
         (!cadre__lock_helper && !atomic_load_explicit(&l->multi, memory_order_relaxed))))
        cadre__lock_took_word(l);
    return 1;
}

static inline void cadre__lock_acquire(struct cadre_eng_lock *l)
{
    if (!cadre__lock_try(l))
        cadre__lock_slow(l);
}

/* Releases with a plain store: through `in` when the owner entered by the
 * bias, else through `word` (waking a sleeper). */
static inline void cadre__lock_release(struct cadre_eng_lock *l)
{
    if (atomic_load_explicit(&l->in, memory_order_relaxed) && cadre__lock_is_owner(l)) {
        atomic_store_explicit(&l->in, 0, memory_order_release);
        return;
    }
    atomic_store_explicit(&l->word, 0, memory_order_release);
    if (atomic_load_explicit(&l->waiters, memory_order_relaxed))
        cadre__lock_wake(l);
}

#endif
