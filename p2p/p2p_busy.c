/* Whether other processes want this node's cores (cadre__cores_busy), and
 * what ranks do about it.
 *
 * With CPU hogs or other jobs on the cores each rank runs in the slices the
 * scheduler gives it, and two ranks make progress together only while both
 * run. Measured on the 2-core machine with six `yes` beside a 2-rank
 * allreduce (bench/contention.sh, bench/HISTORY.md), two things help:
 *   - short scheduler slices for the ranks' threads (slice_set): the same
 *     share of the core, in smaller pieces, so the two ranks run together
 *     more often;
 *   - for the 2-rank allreduce of 64 KiB or more, the direct variants in
 *     which neither rank paces the other (coll_direct_pair.c): 32 MiB in
 *     34-41 ms against 150-190 ms.
 * Sleeping on the doorbell soon instead of spinning did not: each wake-up
 * waits for the process holding the core (8 B 3.5-5.6 us against 1.4-1.6
 * spinning, 128 KiB 560 us against 115); waits sleep soon only with
 * CADRE_WAIT=sleep (cadre__wait_doze), for programs that want the cores
 * left to other work.
 *
 * The answer comes from the kernel's count of runnable tasks (the fourth
 * field of /proc/loadavg, "running/total", this process's own threads
 * included): busy while it exceeds the online cores in two samples in a row
 * and idle again after two below, so that a passing daemon does not change
 * a quiet machine's behaviour. A sample is taken at most every BUSY_SAMPLE
 * seconds, by whichever caller asks first; the others read the last answer.
 * CADRE_WAIT=spin answers "no" and CADRE_WAIT=sleep "yes", always.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "p2p_engine.h"

#define BUSY_SAMPLE 5e-3

static int busy_mode; /* CADRE_WAIT: 0 auto, 1 spin, 2 sleep */
static int busy_fd = -2; /* -2: not opened yet; -1: no /proc/loadavg */
static long busy_cores = 1;
static _Atomic double busy_next;
static _Atomic int busy_state, busy_streak;
static _Atomic int busy_sampling;
static _Atomic long busy_last = -1; /* the last sample of runnable() */

/* The runnable tasks now, or -1. */
static long runnable(void)
{
    char buf[128];
    if (busy_fd == -2) {
        busy_fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        busy_cores = n > 0 ? n : 1;
    }
    if (busy_fd < 0)
        return -1;
    ssize_t len = pread(busy_fd, buf, sizeof buf - 1, 0);
    if (len <= 0)
        return -1;
    buf[len] = '\0';
    /* "0.52 0.58 0.59 3/612 4242": the fourth field's first number */
    char *p = buf;
    for (int field = 0; field < 3; field++) {
        while (*p && *p != ' ')
            p++;
        while (*p == ' ')
            p++;
    }
    char *end;
    long r = strtol(p, &end, 10);
    return end != p && *end == '/' ? r : -1;
}

void cadre__busy_init(void)
{
    const char *v = cadre__config_str(CADRE_CFG_WAIT);
    static const char *const modes[] = {"auto", "spin", "sleep"};
    for (int i = 0; i < 3; i++)
        if (!strcasecmp(v, modes[i])) {
            busy_mode = i;
            return;
        }
    busy_mode = 0;
    CADRE_WARN(P2P, "ignoring CADRE_WAIT=\"%s\": not auto, spin or sleep; using auto", v);
}

/* sched_setattr's argument (linux/sched/types.h, which glibc 2.36 lacks). */
struct slice_attr {
    uint32_t size, policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime, deadline, period;
    uint32_t util_min, util_max;
};

/* The calling thread's scheduler slice while the cores are busy: the least
 * Linux allows (EEVDF's custom slice, sched_setattr's sched_runtime, Linux
 * 6.12 and later; older kernels refuse it and nothing changes). Its share of
 * the core stays what it was, but it comes in pieces of 0.1 ms instead of
 * the default's 1.4 here, so a rank waiting for its peer, and the peer, are
 * on their cores together far more often: 2-rank allreduce beside six
 * `yes`, 128 KiB 115-120 us against 440-700, 8 B 1.4-1.5 us against
 * 1.5-3.7 (bench/HISTORY.md). Put back as it was when the cores are free. */
#define SLICE_BUSY_NS 100000

static _Atomic int slice_said; /* the INFO line, once per process */
static _Thread_local int slice_short;
static _Thread_local uint64_t slice_was;

static void slice_set(int shortslice)
{
    if (shortslice == slice_short)
        return;
    slice_short = shortslice; /* also when the kernel refuses: asked once */
    struct slice_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    if (syscall(SYS_sched_getattr, 0, &a, sizeof a, 0) != 0 || a.policy != 0 /* SCHED_OTHER */)
        return;
    if (shortslice) {
        if (a.runtime <= SLICE_BUSY_NS)
            return;
        slice_was = a.runtime;
        a.runtime = SLICE_BUSY_NS;
    } else {
        if (!slice_was)
            return;
        a.runtime = slice_was;
        slice_was = 0;
    }
    a.flags = 0;
    if (syscall(SYS_sched_setattr, 0, &a, 0) == 0 && shortslice &&
        !atomic_exchange_explicit(&slice_said, 1, memory_order_relaxed))
        CADRE_INFO(P2P, "scheduler slice of the waiting threads: %.1f ms (was %.1f ms)",
                   SLICE_BUSY_NS / 1e6, (double)slice_was / 1e6);
}

static int busy_answer(int busy)
{
    slice_set(busy);
    return busy;
}

int cadre__wait_doze(void)
{
    return cadre__cores_busy() && busy_mode == 2;
}

/* The runnable tasks at the last sample, taking a new one when that is
 * BUSY_SAMPLE old (by one caller at a time; the others read the last), and
 * moving busy_state on each new one: two samples in a row that disagree
 * with the state change it. */
static long busy_sample(void)
{
    double now = cadre__now();
    if (now < atomic_load_explicit(&busy_next, memory_order_relaxed) ||
        atomic_exchange_explicit(&busy_sampling, 1, memory_order_acquire))
        return atomic_load_explicit(&busy_last, memory_order_relaxed);
    long r = runnable();
    int state = atomic_load_explicit(&busy_state, memory_order_relaxed);
    if (r >= 0) {
        int over = r > busy_cores;
        if (over != state) {
            if (atomic_fetch_add_explicit(&busy_streak, 1, memory_order_relaxed) >= 1) {
                CADRE_INFO(P2P, "%ld runnable tasks on %ld cores: %s", r, busy_cores,
                           over ? "the cores are busy: short scheduler slices, the 2-rank "
                                  "allreduce unpaced"
                                : "the cores are free again");
                atomic_store_explicit(&busy_state, over, memory_order_relaxed);
                atomic_store_explicit(&busy_streak, 0, memory_order_relaxed);
            }
        } else {
            atomic_store_explicit(&busy_streak, 0, memory_order_relaxed);
        }
    }
    atomic_store_explicit(&busy_last, r, memory_order_relaxed);
    atomic_store_explicit(&busy_next, now + BUSY_SAMPLE, memory_order_relaxed);
    atomic_store_explicit(&busy_sampling, 0, memory_order_release);
    return r;
}

int cadre__cores_busy(void)
{
    if (busy_mode)
        return busy_answer(busy_mode == 2);
    busy_sample();
    return busy_answer(atomic_load_explicit(&busy_state, memory_order_relaxed));
}

/* Whether a long yield (cadre__yield_brief) gave the core to a process of
 * another job: more tasks want the cores than this job has ranks on the
 * machine, or cores. With only the job's own ranks on the cores (4 ranks on
 * 2 cores), a long yield means a peer had work to do, and yielding on is
 * what hands the core over soonest: napping instead made every turn a
 * wake-up, which preempts the waker (2 pairs of the 8-byte message rate
 * 1.1-2.6 M messages/s napping against 8-9 yielding). The samples are
 * cadre__cores_busy's; CADRE_WAIT=spin answers no, sleep yes. */
int cadre__cores_foreign(void)
{
    if (busy_mode)
        return busy_mode == 2;
    long r = busy_sample();
    long mine = cadre__p2p_machine_ranks();
    /* No reading (no /proc/loadavg): as before, any long yield counts. */
    return r < 0 || r > (mine > busy_cores ? mine : busy_cores);
}
