/* A thread that stops its own process (SIGSTOP) as soon as a watched 16-bit
 * word changes, unless the call it watches returned first: lands a stop in
 * the middle of a collective's round 2, once its first output element is
 * written (readfail_test.c). The thread leaves the core
 * cadrerun bound the rank to, where it would wait for the very call it
 * watches.
 *
 * And the peer's thread that continues that process (SIGCONT): from a
 * given moment on, every 50 ms until told to stop, since the stop may land
 * late (the watcher saw the word change, then waited for a core) and a
 * single SIGCONT sent before it would leave the process stopped for good;
 * and from WAKER_PATIENT_US after its start in any case, since a stop in
 * the middle of a write into the peer's buffers (the claims of the
 * two-rank allreduce) holds the peer's call, which waits for that write
 * before it returns, and that return is the given moment.
 *
 * And the tests' data: float16, whose reduction is slow enough (about 25 ms
 * for 8 MiB here) that the stop lands in the middle of it; every value and
 * sum below is exact in it. */
#ifndef CADRE_STOP_SELF_H
#define CADRE_STOP_SELF_H

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
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

struct waker {
    pid_t peer;
    unsigned delay_us; /* after `go` */
    _Atomic int go, done;
    pthread_t thread;
};

#define WAKER_PATIENT_US 5000000u

static void *waker_main(void *arg)
{
    struct waker *w = arg;
    unsigned waited = 0;
    while (!atomic_load(&w->go) && !atomic_load(&w->done) && waited < WAKER_PATIENT_US) {
        usleep(1000);
        waited += 1000;
    }
    if (atomic_load(&w->go))
        usleep(w->delay_us);
    while (!atomic_load(&w->done)) {
        /* The peer may have left already where it never stopped. */
        if (kill(w->peer, SIGCONT) != 0 && errno != ESRCH)
            EXPECT(0, "SIGCONT to pid %d: %s", (int)w->peer, strerror(errno));
        usleep(50000);
    }
    return NULL;
}

static inline void waker_start(struct waker *w, pid_t peer, unsigned delay_us)
{
    w->peer = peer;
    w->delay_us = delay_us;
    atomic_store(&w->go, 0);
    atomic_store(&w->done, 0);
    EXPECT(pthread_create(&w->thread, NULL, waker_main, w) == 0, "pthread_create");
}

/* Once the peer is known to have gone on (its message came). */
static inline void waker_end(struct waker *w)
{
    atomic_store(&w->done, 1);
    pthread_join(w->thread, NULL);
}

/* The start of the call under test, once its buffers are filled: rank 1's
 * pid goes to rank 0 (a bcast, so both ranks call this); rank 1 watches
 * `word`, its first output element, and rank 0's waker waits for its go,
 * then continues rank 1 from delay_us later. */
static inline void stop_begin(int me, struct stop_self *st, struct waker *wk,
                              const volatile void *word, unsigned delay_us)
{
    int pid = (int)getpid(), pid1 = 0;
    OK(cadre_bcast(me == 1 ? &pid : &pid1, 1, CADRE_INT32, 1, CADRE_COMM_WORLD));
    if (me == 1)
        stop_self_start(st, word);
    else
        waker_start(wk, (pid_t)pid1, delay_us);
}

typedef _Float16 elem;
#define STOP_SENTINEL ((elem)-1234.0f)

/* Element i of rank `rank`'s input to call `call`. */
static inline elem stop_input(int rank, size_t i, int call)
{
    return (elem)((i * 7 + (size_t)rank * 13 + (size_t)call * 101) % 1000) - 500;
}

/* Wrong elements of out[0..n), the sum of both ranks' inputs to call `call`
 * from element `base` on. */
static inline long stop_wrong_sum(const elem *out, size_t base, size_t n, int call)
{
    long wrong = 0;
    for (size_t i = 0; i < n; i++)
        wrong += out[i] != (elem)((float)stop_input(0, base + i, call) +
                                  (float)stop_input(1, base + i, call));
    return wrong;
}

/* The end of a 2-rank test's calls: rank 1 tells rank 0 it has gone on
 * (rank 0's buffers are its own to free only then), and rank 0's waker
 * stops. */
static inline void stop_finish(int me, struct waker *wk, double patient)
{
    int x = 0;
    cadre_request_t r;
    if (me == 1)
        OK(cadre_isend(&x, 1, CADRE_INT32, 0, 1, CADRE_COMM_WORLD, &r));
    else
        OK(cadre_irecv(&x, 1, CADRE_INT32, 1, 1, CADRE_COMM_WORLD, &r));
    OK(cadre_wait_timeout(&r, patient, CADRE_STATUS_IGNORE));
    if (me == 0)
        waker_end(wk);
}

#endif
