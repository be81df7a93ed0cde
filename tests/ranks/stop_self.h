/* A thread that stops its own process (SIGSTOP) as soon as a watched 16-bit
 * word changes, unless the call it watches returned first: lands a stop in
 * the middle of a collective's round 2, once its first output element is
 * written (stagefail_test.c, readfail_test.c). The thread leaves the core
 * cadrerun bound the rank to, where it would wait for the very call it
 * watches. Whoever continues the process (SIGCONT) is the test's business. */
#ifndef CADRE_STOP_SELF_H
#define CADRE_STOP_SELF_H

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#include "rank_util.h"

struct stop_self {
    const volatile uint16_t *word; /* watched ... */
    uint16_t initial;              /* ... while it holds this */
    _Atomic int running;           /* the thread watches */
    _Atomic int returned;          /* the watched call returned: set by the caller */
    _Atomic int stopped;           /* the thread stopped the process */
    pthread_t thread;
};

static void *stop_self_main(void *arg)
{
    struct stop_self *s = arg;
    cpu_set_t all;
    CPU_ZERO(&all);
    for (long c = 0; c < sysconf(_SC_NPROCESSORS_ONLN) && c < CPU_SETSIZE; c++)
        CPU_SET((int)c, &all);
    pthread_setaffinity_np(pthread_self(), sizeof all, &all);
    atomic_store(&s->running, 1);
    while (*s->word == s->initial)
        if (atomic_load(&s->returned))
            return NULL;
    if (atomic_load(&s->returned))
        return NULL;
    atomic_store(&s->stopped, 1);
    EXPECT(kill(getpid(), SIGSTOP) == 0, "SIGSTOP to itself");
    return NULL;
}

/* Starts watching `word` (its value now is the initial one); returns once
 * the thread runs. */
static inline void stop_self_start(struct stop_self *s, const volatile void *word)
{
    s->word = word;
    s->initial = *s->word;
    atomic_store(&s->running, 0);
    atomic_store(&s->returned, 0);
    atomic_store(&s->stopped, 0);
    EXPECT(pthread_create(&s->thread, NULL, stop_self_main, s) == 0, "pthread_create");
    while (!atomic_load(&s->running))
        sched_yield();
}

/* The watched call returned: 1 when the thread had stopped the process. */
static inline int stop_self_end(struct stop_self *s)
{
    atomic_store(&s->returned, 1);
    pthread_join(s->thread, NULL);
    return atomic_load(&s->stopped);
}

#endif
