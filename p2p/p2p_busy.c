/* Whether other processes want this node's cores (cadre__cores_busy).
 *
 * A rank that spins while it waits keeps its core, which on a quiet machine
 * is what makes a wait short. When other processes are runnable too (CPU
 * hogs, other jobs), the spinning burns the rank's fair share of the core:
 * the scheduler then runs the hogs just when the rank has work, and each
 * hand-over between two ranks costs a time slice (2-rank 16 MiB allreduce
 * with six `yes` beside it: 47-55 ms against 2.4 ms quiet). A rank that
 * sleeps instead keeps its share, and the peer's ring wakes it ahead of the
 * hogs. So waits ask here, once they have spun a little, whether to go on
 * spinning.
 *
 * The answer comes from the kernel's count of runnable tasks (the fourth
 * field of /proc/loadavg, "running/total", this process's own threads
 * included): busy while it exceeds the online cores in two samples in a row
 * and idle again after two below, so that a passing daemon does not turn a
 * quiet machine's spinning off. A sample is taken at most every
 * BUSY_SAMPLE seconds, by whichever waiter asks first; the others read the
 * last answer. CADRE_WAIT=spin answers "no" and CADRE_WAIT=sleep "yes",
 * always.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <strings.h>
#include <unistd.h>

#include "p2p_engine.h"

#define BUSY_SAMPLE 5e-3

static int busy_mode; /* CADRE_WAIT: 0 auto, 1 spin, 2 sleep */
static int busy_fd = -2; /* -2: not opened yet; -1: no /proc/loadavg */
static long busy_cores = 1;
static _Atomic double busy_next;
static _Atomic int busy_state, busy_streak;
static _Atomic int busy_sampling;

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

int cadre__cores_busy(void)
{
    if (busy_mode)
        return busy_mode == 2;
    double now = cadre__now();
    if (now < atomic_load_explicit(&busy_next, memory_order_relaxed) ||
        atomic_exchange_explicit(&busy_sampling, 1, memory_order_acquire))
        return atomic_load_explicit(&busy_state, memory_order_relaxed);
    long r = runnable();
    int state = atomic_load_explicit(&busy_state, memory_order_relaxed);
    if (r >= 0) {
        int over = r > busy_cores;
        /* Two samples in a row that disagree with the state change it. */
        if (over != state) {
            if (atomic_fetch_add_explicit(&busy_streak, 1, memory_order_relaxed) >= 1) {
                state = over;
                CADRE_INFO(P2P, "%ld runnable tasks on %ld cores: waits %s", r, busy_cores,
                           over ? "sleep on the doorbell after a few polls (the cores are busy)"
                                : "spin again (the cores are free)");
                atomic_store_explicit(&busy_state, state, memory_order_relaxed);
                atomic_store_explicit(&busy_streak, 0, memory_order_relaxed);
            }
        } else {
            atomic_store_explicit(&busy_streak, 0, memory_order_relaxed);
        }
    }
    atomic_store_explicit(&busy_next, now + BUSY_SAMPLE, memory_order_relaxed);
    atomic_store_explicit(&busy_sampling, 0, memory_order_release);
    return state;
}
