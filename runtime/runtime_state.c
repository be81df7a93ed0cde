/* What this process is doing in cadre (the operation state record), and the
 * communicators by context id: the answers a timed-out peer or cadrerun's
 * --timeout report asks for. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime.h"

struct cadre_op_state cadre__op_state;

static int64_t fine_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void cadre__state_leave(void)
{
    struct cadre_op_state *s = &cadre__op_state;
    uint32_t g = __atomic_load_n(&s->gen, __ATOMIC_RELAXED);
    __atomic_store_n(&s->gen, g + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    CADRE__RLX(&s->in_cadre, 0);
    /* No clock read here (it would cost every call): the progress thread
     * stamps the time of leaving within 0.1 s (cadre__state_stamp), or a
     * snapshot does. */
    __atomic_store_n(&s->t_ns, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->gen, g + 2, __ATOMIC_RELEASE);
}

static void stamp_ns(int64_t now)
{
    struct cadre_op_state *s = &cadre__op_state;
    /* The start of the operation in progress, or the time of leaving cadre,
     * whichever is unknown (0). A stamp that lands on an operation entered
     * just now is still about right; a stamp of 0 from the writer wins over
     * ours. */
    int64_t zero = 0;
    __atomic_compare_exchange_n(&s->t_ns, &zero, now ? now : 1, 0, __ATOMIC_RELAXED,
                                __ATOMIC_RELAXED);
}

void cadre__state_stamp(double now)
{
    stamp_ns((int64_t)(now * 1e9));
}

static void copy_name(char *dst, size_t len, const char *src)
{
    snprintf(dst, len, "%s", src ? src : "");
}

void cadre__state_snapshot(struct cadre_op_snapshot *out)
{
    struct cadre_op_state *s = &cadre__op_state;
    memset(out, 0, sizeof *out);
    out->secs = -1;
    /* The stamp is ours to take when the waiting thread has not yet. */
    stamp_ns(fine_ns());
    /* A writer holds the record for a few stores; more than a few hundred
     * tries means several writers (threads): take what we have. */
    for (int tries = 0; tries < 1000; tries++) {
        uint32_t g1 = __atomic_load_n(&s->gen, __ATOMIC_ACQUIRE);
        if (g1 & 1) {
            sched_yield();
            continue;
        }
        const char *op = __atomic_load_n(&s->op, __ATOMIC_RELAXED);
        const char *via = __atomic_load_n(&s->via, __ATOMIC_RELAXED);
        out->ctx = __atomic_load_n(&s->ctx, __ATOMIC_RELAXED);
        out->seq = __atomic_load_n(&s->seq, __ATOMIC_RELAXED);
        out->peer = __atomic_load_n(&s->peer, __ATOMIC_RELAXED);
        out->tag = __atomic_load_n(&s->tag, __ATOMIC_RELAXED);
        out->in_cadre = __atomic_load_n(&s->in_cadre, __ATOMIC_RELAXED);
        int64_t t = __atomic_load_n(&s->t_ns, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        uint32_t g2 = __atomic_load_n(&s->gen, __ATOMIC_RELAXED);
        copy_name(out->op, sizeof out->op, op);
        copy_name(out->via, sizeof out->via, via);
        if (t > 0) {
            double d = (double)(fine_ns() - t) * 1e-9;
            out->secs = d < 0 ? 0 : d;
        }
        out->valid = 1;
        if (g1 == g2)
            break;
    }
}

void cadre__state_comm_name(uint32_t ctx, char *buf, size_t len)
{
    if (ctx == 0)
        snprintf(buf, len, "WORLD");
    else
        snprintf(buf, len, "comm ctx %u", ctx);
}

/* "cadre_allreduce #17 on WORLD", "cadre_recv from rank 2 (tag 5) on WORLD". */
static void describe_op(const struct cadre_op_snapshot *s, char *buf, size_t len)
{
    char comm[32];
    cadre__state_comm_name(s->ctx, comm, sizeof comm);
    if (s->seq) {
        snprintf(buf, len, "%s #%u on %s", s->op, s->seq, comm);
        return;
    }
    if (!strcmp(s->op, "cadre_init") || !strcmp(s->op, "cadre_finalize")) {
        snprintf(buf, len, "%s", s->op);
        return;
    }
    const char *dir = strstr(s->op, "sendrecv") ? "with"
                      : strstr(s->op, "recv") || strstr(s->op, "probe") ? "from"
                      : strstr(s->op, "send")  ? "to"
                                               : "peer";
    char peer[32], tag[32];
    if (s->peer == CADRE_ANY_SOURCE)
        snprintf(peer, sizeof peer, "any rank");
    else
        snprintf(peer, sizeof peer, "rank %d", (int)s->peer);
    if (s->tag == CADRE_ANY_TAG)
        snprintf(tag, sizeof tag, "any tag");
    else
        snprintf(tag, sizeof tag, "tag %d", (int)s->tag);
    snprintf(buf, len, "%s %s %s (%s) on %s", s->op, dir, peer, tag, comm);
}

void cadre__state_describe(const struct cadre_op_snapshot *s, char *buf, size_t len)
{
    cadre__state_describe_span(s, s->secs, s->secs, buf, len);
}

void cadre__state_describe_span(const struct cadre_op_snapshot *s, double lo, double hi, char *buf,
                                size_t len)
{
    if (!s->valid) {
        snprintf(buf, len, "state unknown");
        return;
    }
    char op[160] = "", secs[48] = "";
    if (s->op[0])
        describe_op(s, op, sizeof op);
    char a[16], b[16];
    snprintf(a, sizeof a, "%.1f", lo);
    snprintf(b, sizeof b, "%.1f", hi);
    if (lo >= 0 && strcmp(a, b))
        snprintf(secs, sizeof secs, " for %s-%s s", a, b);
    else if (lo >= 0)
        snprintf(secs, sizeof secs, " for %s s", a);
    if (s->in_cadre && s->via[0])
        snprintf(buf, len, "in %s on %s%s", s->via, op, secs);
    else if (s->in_cadre)
        snprintf(buf, len, "in %s%s", op, secs);
    else if (s->op[0])
        snprintf(buf, len, "not in cadre%s (last: %s)", secs, op);
    else
        snprintf(buf, len, "not in cadre%s", secs);
}

void cadre__state_report(void)
{
    struct cadre_op_snapshot s;
    cadre__state_snapshot(&s);
    char text[256];
    cadre__state_describe(&s, text, sizeof text);
    char line[320];
    int n = snprintf(line, sizeof line, "cadre: rank %d: %s\n", cadre__proc.rank, text);
    if (n > 0) {
        ssize_t w = write(STDERR_FILENO, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
        (void)w;
    }
}

/* ---- communicators by context id ---------------------------------------------- */
/* Recursive: what cadre__comm_foreach calls may come back to it in the same
 * thread. A POISON is passed on from inside a walk (coll_poison.c's
 * forward_one); the send that passes it on may find its TCP connection
 * broken and first read what the peer left (p2p_tcp.c's drain_in), and a
 * POISON among that is passed on from a walk of its own. With a plain mutex
 * that thread waited on itself for ever (the fault soak under load: a
 * survivor of an exit without cadre_finalize hung in cadre_bcast). The
 * walks only read the list; it changes only in register and unregister,
 * which no walk calls. */
static pthread_mutex_t comms_lock;
static pthread_once_t comms_once = PTHREAD_ONCE_INIT;
static struct cadre_comm **comms;
static size_t ncomms, comms_cap;
/* The collective counts of freed communicators, by context id (never
 * reused): a peer that waits in a collective may ask after this rank freed
 * the communicator (it timed out first and went on), and its count still
 * says whether it arrived. Only the diagnosis reads them; 8 bytes each. */
static struct freed_comm {
    uint32_t ctx, seq;
} *freed;
static size_t nfreed, freed_cap;

static void comms_lock_init(void)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&comms_lock, &a);
    pthread_mutexattr_destroy(&a);
}

static void comms_lock_take(void)
{
    pthread_once(&comms_once, comms_lock_init);
    pthread_mutex_lock(&comms_lock);
}

void cadre__comm_register(struct cadre_comm *c)
{
    comms_lock_take();
    if (ncomms == comms_cap) {
        size_t ncap = comms_cap ? comms_cap * 2 : 16;
        struct cadre_comm **n = realloc(comms, ncap * sizeof *n);
        if (!n) {
            /* Only the diagnosis loses: questions about c go unanswered. */
            pthread_mutex_unlock(&comms_lock);
            return;
        }
        comms = n;
        comms_cap = ncap;
    }
    comms[ncomms++] = c;
    pthread_mutex_unlock(&comms_lock);
}

void cadre__comm_unregister(struct cadre_comm *c)
{
    comms_lock_take();
    for (size_t i = 0; i < ncomms; i++) {
        if (comms[i] == c) {
            comms[i] = comms[--ncomms];
            break;
        }
    }
    if (nfreed == freed_cap) {
        size_t ncap = freed_cap ? freed_cap * 2 : 16;
        struct freed_comm *n = realloc(freed, ncap * sizeof *n);
        if (n) {
            freed = n;
            freed_cap = ncap;
        }
    }
    /* Without memory only the diagnosis loses: c counts as never arrived. */
    if (nfreed < freed_cap)
        freed[nfreed++] = (struct freed_comm){c->context_id,
                                              __atomic_load_n(&c->coll_seq, __ATOMIC_RELAXED)};
    pthread_mutex_unlock(&comms_lock);
}

void cadre__comm_foreach(void (*fn)(const struct cadre_comm *c, void *arg), void *arg)
{
    comms_lock_take();
    for (size_t i = 0; i < ncomms; i++)
        fn(comms[i], arg);
    pthread_mutex_unlock(&comms_lock);
}

int cadre__comm_coll_seq(uint32_t ctx, uint32_t *seq)
{
    int found = 0;
    comms_lock_take();
    for (size_t i = 0; i < ncomms && !found; i++) {
        if (comms[i]->context_id == ctx) {
            /* The owner increments it without atomics; a torn read of an
             * aligned word cannot happen, a stale one is fine here. */
            *seq = __atomic_load_n(&comms[i]->coll_seq, __ATOMIC_RELAXED);
            found = 1;
        }
    }
    for (size_t i = nfreed; i-- > 0 && !found;) {
        if (freed[i].ctx == ctx) {
            *seq = freed[i].seq;
            found = 1;
        }
    }
    pthread_mutex_unlock(&comms_lock);
    return found;
}
