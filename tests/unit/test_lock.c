/* The engine lock (p2p/p2p_lock.c, compiled into this runner): mutual
 * exclusion between the owner, which enters by its bias, the helper, which
 * revokes the bias and gives it back, and a third thread, after which the
 * bias stays off; and a trylock of the holder fails. Each thread adds to a
 * counter inside the lock by a load, a pause and a store, so that two
 * threads inside at once lose additions; the counter must come out exact. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "p2p/p2p_lock.h"
#include "testutil.h"

static struct cadre_eng_lock L;
static volatile unsigned long counter;
static _Atomic int go, stop_helper;
static _Atomic unsigned long helper_ops;

/* A read-modify-write that another thread inside the lock would break. */
static void add_one(void)
{
    unsigned long v = counter;
    for (int i = 0; i < 4; i++) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        __asm__ volatile("" ::: "memory");
    }
    counter = v + 1;
}

/* The progress thread's part: take the lock now and then, and give the
 * bias back before each "sleep". */
static void *helper(void *arg)
{
    (void)arg;
    cadre__lock_helper = 1;
    while (!atomic_load(&go))
        sched_yield();
    while (!atomic_load(&stop_helper)) {
        for (int i = 0; i < 50; i++) {
            cadre__lock_acquire(&L);
            add_one();
            cadre__lock_release(&L);
            atomic_fetch_add(&helper_ops, 1);
        }
        cadre__lock_rebias(&L);
        sched_yield();
    }
    return NULL;
}

static void *third(void *arg)
{
    long n = (long)arg;
    for (long i = 0; i < n; i++) {
        cadre__lock_acquire(&L);
        add_one();
        cadre__lock_release(&L);
    }
    return NULL;
}

static void test_biased_lock_excludes(void)
{
    memset(&L, 0, sizeof L);
    counter = 0;
    atomic_store(&go, 0);
    atomic_store(&stop_helper, 0);
    atomic_store(&helper_ops, 0);
    cadre__lock_init(&L, 0);
    if (!L.can_bias)
        fprintf(stderr, "lock: no private expedited membarrier here; the bias is off\n");
    CU_ASSERT_FATAL(cadre__lock_is_owner(&L));

    /* The holder's trylock fails, by the bias and by the word. */
    CU_ASSERT_FATAL(cadre__lock_try(&L));
    CU_ASSERT_EQUAL(atomic_load(&L.in), (uint32_t)L.can_bias);
    CU_ASSERT_FALSE(cadre__lock_try(&L));
    cadre__lock_release(&L);
    CU_ASSERT_EQUAL(atomic_load(&L.in), 0);

    pthread_t h;
    CU_ASSERT_FATAL(pthread_create(&h, NULL, helper, NULL) == 0);
    atomic_store(&go, 1);
    /* The owner: lock, add, unlock, counting its entries by the bias, for
     * 1 s and until the helper has taken the bias 100 times and the owner
     * has entered both ways (on a loaded machine the helper may get little
     * of a core; 60 s at most). */
    unsigned long mine = 0, by_bias = 0;
    struct timespec t0, t;
    double el;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        for (int i = 0; i < 1000; i++) {
            cadre__lock_acquire(&L);
            by_bias += atomic_load_explicit(&L.in, memory_order_relaxed);
            add_one();
            cadre__lock_release(&L);
            mine++;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        el = (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9;
    } while (el < 60 && (el < 1.0 || atomic_load(&L.n_revokes) < 100 ||
                         (L.can_bias && (!by_bias || by_bias == mine))));
    atomic_store(&stop_helper, 1);
    pthread_join(h, NULL);
    unsigned long revokes = atomic_load(&L.n_revokes), returns = atomic_load(&L.n_rebias);
    fprintf(stderr,
            "lock: owner %lu entries (%lu by the bias), helper %lu; %lu revocations, %lu returns; "
            "counter %lu\n",
            mine, by_bias, atomic_load(&helper_ops), revokes, returns, counter);
    CU_ASSERT_EQUAL(counter, mine + atomic_load(&helper_ops));
    if (L.can_bias) {
        /* Both ways of entering were used, and the bias went back and forth. */
        CU_ASSERT(by_bias > 0);
        CU_ASSERT(by_bias < mine);
        CU_ASSERT(revokes > 0);
        CU_ASSERT(returns > 0);
    }
    CU_ASSERT_EQUAL(atomic_load(&L.multi), 0);

    /* A third thread: the bias goes and stays gone, exclusion holds. */
    unsigned long before = counter;
    pthread_t x;
    CU_ASSERT_FATAL(pthread_create(&x, NULL, third, (void *)200000L) == 0);
    for (int i = 0; i < 200000; i++) {
        cadre__lock_acquire(&L);
        add_one();
        cadre__lock_release(&L);
    }
    pthread_join(x, NULL);
    CU_ASSERT_EQUAL(counter, before + 400000);
    CU_ASSERT_EQUAL(atomic_load(&L.multi), 1);
    cadre__lock_helper = 1; /* as the progress thread would */
    cadre__lock_rebias(&L);
    cadre__lock_helper = 0;
    CU_ASSERT_EQUAL(atomic_load(&L.biased), 0);
    cadre__lock_acquire(&L);
    CU_ASSERT_EQUAL(atomic_load(&L.in), 0);
    cadre__lock_release(&L);
}

void suite_lock(void)
{
    CU_pSuite s = CU_add_suite("lock", NULL, NULL);
    CU_add_test(s, "biased engine lock: owner, helper and a third thread exclude each other",
                test_biased_lock_excludes);
}
