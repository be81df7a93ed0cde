/* c2c: the round trip of one cache line between two CPUs, in nanoseconds.
 *
 * Two threads pinned to CPUs A and B (default 0 and 1) take turns writing a
 * counter on one cache line; the time per turn pair is what every message
 * between two ranks on those CPUs pays at least once. On the development
 * machine (a 2-vCPU virtual machine) it moves between about 100 ns and
 * 1.5 us from one second to the next, as the host places the two vCPUs on
 * cores that share a cache or not; the benchmark scripts print it beside
 * their figures so that a slow run can be told from a slow library.
 *
 *   c2c [A B [ROUNDS]]      prints: c2c_ns <median of 5 samples>
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static _Atomic long turn __attribute__((aligned(64)));
static long rounds = 100000;
static int cpu_b = 1;

static int pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set);
}

static void *answer(void *arg)
{
    (void)arg;
    pin(cpu_b);
    for (long i = 0; i < 5 * rounds; i++) {
        while (atomic_load_explicit(&turn, memory_order_acquire) != 2 * i + 1)
            ;
        atomic_store_explicit(&turn, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int cpu_a = argc > 2 ? atoi(argv[1]) : 0;
    if (argc > 2)
        cpu_b = atoi(argv[2]);
    if (argc > 3)
        rounds = atol(argv[3]);
    if (pin(cpu_a) != 0) {
        perror("c2c: sched_setaffinity");
        return 1;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, answer, NULL) != 0) {
        fprintf(stderr, "c2c: cannot start a thread\n");
        return 1;
    }
    double ns[5];
    for (int s = 0; s < 5; s++) {
        double t0 = now();
        for (long i = s * rounds; i < (s + 1) * rounds; i++) {
            atomic_store_explicit(&turn, 2 * i + 1, memory_order_release);
            while (atomic_load_explicit(&turn, memory_order_acquire) != 2 * i + 2)
                ;
        }
        ns[s] = (now() - t0) / (double)rounds * 1e9;
    }
    pthread_join(t, NULL);
    qsort(ns, 5, sizeof *ns, cmp);
    printf("c2c_ns %.0f\n", ns[2]);
    return 0;
}
