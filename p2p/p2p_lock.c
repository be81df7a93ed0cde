/* The engine lock's slow paths and its bias (p2p_lock.h). */
#include "config.h"

#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "p2p_lock.h"

__thread uint32_t cadre__lock_gen __attribute__((tls_model("initial-exec")));
__thread int cadre__lock_helper __attribute__((tls_model("initial-exec")));

static _Atomic uint32_t last_gen;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int private_membarrier(void)
{
    static _Atomic int registered; /* 0 unknown, 1 yes, -1 no */
    int r = atomic_load(&registered);
    if (r)
        return r > 0;
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    r = cmds >= 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
                syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0
            ? 1
            : -1;
    atomic_store(&registered, r);
    return r > 0;
}

void cadre__lock_init(struct cadre_eng_lock *l, int yield_spins)
{
    uint32_t gen = atomic_fetch_add(&last_gen, 1) + 1;
    cadre__lock_gen = gen;
    atomic_store(&l->word, 0);
    atomic_store(&l->waiters, 0);
    atomic_store(&l->in, 0);
    atomic_store(&l->multi, 0);
    atomic_store(&l->n_revokes, 0);
    atomic_store(&l->n_rebias, 0);
    l->yield_spins = yield_spins;
    l->can_bias = private_membarrier();
    atomic_store(&l->owner_gen, gen);
    atomic_store(&l->biased, (uint32_t)l->can_bias);
}

void cadre__lock_took_word(struct cadre_eng_lock *l)
{
    if (!cadre__lock_helper)
        atomic_store_explicit(&l->multi, 1, memory_order_relaxed);
    if (!atomic_load_explicit(&l->biased, memory_order_relaxed))
        return;
    atomic_store_explicit(&l->biased, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&l->n_revokes, 1, memory_order_relaxed);
    /* Every thread of the process passes a full barrier: the owner's store
     * of `in` is visible now, or its check comes later and sees `biased`
     * clear. Registered at cadre__lock_init, so it is not refused; a fence
     * here would not be enough, so were it refused, wait as long as an
     * owner's critical section could possibly take to start: the owner
     * checks `biased` right after its store, so a millisecond of seeing
     * `in` clear is far beyond it. */
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    for (unsigned i = 0; atomic_load_explicit(&l->in, memory_order_acquire); i++) {
        if (l->yield_spins || i >= 1000)
            sched_yield();
        else
            cpu_relax();
    }
}

void cadre__lock_rebias(struct cadre_eng_lock *l)
{
    if (!l->can_bias || atomic_load_explicit(&l->biased, memory_order_relaxed) ||
        atomic_load_explicit(&l->multi, memory_order_relaxed))
        return;
    cadre__lock_acquire(l);
    if (!atomic_load_explicit(&l->multi, memory_order_relaxed) &&
        !atomic_load_explicit(&l->biased, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&l->n_rebias, 1, memory_order_relaxed);
        /* The last store of our critical section: from here on the owner
         * may enter by `in`, and a thread that takes `word` after our
         * release finds the lock biased and revokes. */
        atomic_store_explicit(&l->biased, 1, memory_order_release);
    }
    cadre__lock_release(l);
}

void cadre__lock_slow(struct cadre_eng_lock *l)
{
    /* Critical sections are short: spin first, unless the holder may be
     * waiting for this very core. */
    int spins = l->yield_spins ? 4 : 2000;
    for (int i = 0; i < spins; i++) {
        if (!atomic_load_explicit(&l->word, memory_order_relaxed) && cadre__lock_try(l))
            return;
        if (l->yield_spins)
            sched_yield();
        else
            cpu_relax();
    }
    atomic_fetch_add(&l->waiters, 1);
    long nap = 50000; /* ns */
    while (!cadre__lock_try(l)) {
        struct timespec ts = {0, nap};
        syscall(SYS_futex, (uint32_t *)&l->word, FUTEX_WAIT_PRIVATE, 1, &ts, NULL, 0);
        if (nap < 1000000)
            nap *= 2;
    }
    atomic_fetch_sub(&l->waiters, 1);
}

void cadre__lock_wake(struct cadre_eng_lock *l)
{
    syscall(SYS_futex, (uint32_t *)&l->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
