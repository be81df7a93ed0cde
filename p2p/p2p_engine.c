/* The p2p engine: transports and peers, output queues, progress (by the
 * waiting thread or the progress thread), sleeping and waking, peer failure. */
#include "config.h"

#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "p2p_engine.h"

struct cadre_engine cadre__eng = {.eventfd = -1};
struct cadre_p2p_engine_info cadre__p2p_info;


double cadre__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cadre__futex_wait(_Atomic uint32_t *word, uint32_t val, double timeout_s)
{
    struct timespec ts = {(time_t)timeout_s, (long)((timeout_s - (double)(time_t)timeout_s) * 1e9)};
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, val, &ts, NULL, 0);
}

void cadre__futex_wake(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, 1 << 30, NULL, NULL, 0);
}

void cadre__eng_lock_slow(void)
{
    struct cadre_eng_lock *l = &cadre__eng.lock;
    /* Critical sections are short: spin first, unless the holder may be
     * waiting for this very core. */
    int spins = cadre__eng.oversubscribed ? 4 : 2000;
    for (int i = 0; i < spins; i++) {
        if (!atomic_load_explicit(&l->word, memory_order_relaxed) && eng_trylock())
            return;
        if (cadre__eng.oversubscribed)
            sched_yield();
#if defined(__x86_64__) || defined(__i386__)
        else
            __builtin_ia32_pause();
#endif
    }
    atomic_fetch_add(&l->waiters, 1);
    double nap = 50e-6;
    while (!eng_trylock()) {
        struct timespec ts = {0, (long)(nap * 1e9)};
        syscall(SYS_futex, (uint32_t *)&l->word, FUTEX_WAIT_PRIVATE, 1, &ts, NULL, 0);
        if (nap < 1e-3)
            nap *= 2;
    }
    atomic_fetch_sub(&l->waiters, 1);
}

void cadre__eng_unlock_wake(void)
{
    syscall(SYS_futex, (uint32_t *)&cadre__eng.lock.word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* ---- output --------------------------------------------------------------- */

/* Hands one queued entry to the transport. Returns SENT when the entry is
 * finished, BUSY when the transport is full, or an error status. */
static int send_entry(int w, struct cadre_peer *p, struct outq_entry *q)
{
    if (q->hdr.type != CADRE_P2P_DATA) {
        q->hdr.seq = p->send_seq + 1;
        int rc = p->tp->send(w, &q->hdr, q->payload);
        if (rc == CADRE_P2P_SENT)
            p->send_seq++;
        return rc;
    }
    struct cadre_request *s = q->req;
    while (s->moved < s->xfer) {
        size_t n = s->xfer - s->moved;
        if (n > p->frag)
            n = p->frag;
        q->hdr.len = n;
        q->hdr.off = s->moved;
        int rc = p->tp->send(w, &q->hdr, s->buf + s->moved);
        if (rc != CADRE_P2P_SENT)
            return rc;
        s->moved += n;
        s->last_activity = cadre__now();
    }
    return CADRE_P2P_SENT;
}

static void entry_done(struct outq_entry *q, int rc)
{
    if (q->req && (q->hdr.type == CADRE_P2P_EAGER || q->hdr.type == CADRE_P2P_DATA)) {
        if (rc == CADRE_SUCCESS)
            cadre__req_complete(q->req, CADRE_SUCCESS, NULL);
        else
            cadre__req_complete(q->req, rc, "%s: %s", q->req->op, cadre_last_error());
    }
}

/* Sends what the transport takes from the peer's queue; returns events.
 * The entry being sent is off the queue during the send: a transport that
 * finds the peer gone fails everything queued for it, and must not free the
 * entry in our hands. */
static int flush_peer(int w)
{
    struct cadre_peer *p = &cadre__eng.peers[w];
    int events = 0;
    while (p->outq) {
        struct outq_entry *q = p->outq;
        p->outq = q->next;
        if (!p->outq)
            p->outq_tail = NULL;
        int rc = send_entry(w, p, q);
        if (rc == CADRE_P2P_BUSY) {
            q->next = p->outq;
            p->outq = q;
            if (!p->outq_tail)
                p->outq_tail = q;
            break;
        }
        atomic_fetch_sub(&cadre__eng.outstanding, 1);
        entry_done(q, rc);
        free(q);
        events++;
    }
    return events;
}

int cadre__p2p_post(int w, const struct cadre_p2p_hdr *h, const void *payload,
                    struct cadre_request *req)
{
    struct cadre_peer *p = &cadre__eng.peers[w];
    if (p->state == PEER_DEAD)
        return cadre__error(CADRE_ERR_PEER, "peer rank %d %s", w, p->why);
    if (!p->outq && h->type != CADRE_P2P_DATA) {
        /* Fast path: nothing queued ahead, the transport may take it now. */
        struct cadre_p2p_hdr hh = *h;
        hh.seq = p->send_seq + 1;
        int rc = p->tp->send(w, &hh, payload);
        if (rc == CADRE_P2P_SENT) {
            p->send_seq++;
            if (req)
                cadre__req_complete(req, CADRE_SUCCESS, NULL);
            return CADRE_SUCCESS;
        }
        if (rc != CADRE_P2P_BUSY)
            return rc;
    }
    struct outq_entry *q = calloc(1, sizeof *q);
    if (!q)
        return cadre__error(CADRE_ERR_NOMEM, "no memory to queue a message to rank %d", w);
    q->hdr = *h;
    q->payload = payload;
    q->req = req;
    if (p->outq_tail)
        p->outq_tail->next = q;
    else
        p->outq = q;
    p->outq_tail = q;
    atomic_fetch_add(&cadre__eng.outstanding, 1);
    if (p->outq == q)
        flush_peer(w);
    return CADRE_SUCCESS;
}

/* ---- progress -------------------------------------------------------------- */

int cadre__p2p_progress_locked(void)
{
    struct cadre_engine *e = &cadre__eng;
    int events = 0;
    for (int i = 0; i < e->ntps; i++)
        events += e->tps[i]->progress();
    if (atomic_load_explicit(&e->outstanding, memory_order_relaxed)) {
        for (int w = 0; w < e->nranks; w++)
            if (e->peers[w].outq)
                events += flush_peer(w);
    }
    for (struct cadre_request *r = e->generic, *n; r; r = n) {
        n = r->next;
        events += r->poll(r);
    }
    if (e->deaths_pending)
        cadre__p2p_deaths_settle();
    return events;
}

int cadre__p2p_progress(void)
{
    struct cadre_engine *e = &cadre__eng;
    /* Nothing queued, no collective running and nothing in the rings: no
     * need for the lock (this is the spin of a blocking receive). */
    if (e->shm_only && !atomic_load_explicit(&e->outstanding, memory_order_relaxed) &&
        !__atomic_load_n(&e->generic, __ATOMIC_RELAXED) && !cadre__p2p_shm_pending())
        return 0;
    if (!eng_trylock())
        return 0;
    int n = cadre__p2p_progress_locked();
    eng_unlock();
    return n;
}

void cadre__p2p_sleep(double timeout_s)
{
    struct cadre_engine *e = &cadre__eng;
    if (e->poll_mode) {
        struct pollfd fds[1024];
        int n = 0;
        eng_lock();
        for (int i = 0; i < e->ntps; i++)
            if (e->tps[i]->pollfds)
                n += e->tps[i]->pollfds(fds + n, 1023 - n);
        eng_unlock();
        fds[n].fd = e->eventfd;
        fds[n].events = POLLIN;
        fds[n].revents = 0; /* read below also when poll() is skipped */
        n++;
        /* Shared-memory arrivals do not wake poll(): keep naps short then. */
        if (e->shm_active && timeout_s > 1e-3)
            timeout_s = 1e-3;
        atomic_fetch_add(&e->bell->sleepers, 1);
        if (cadre__p2p_progress() == 0)
            poll(fds, (nfds_t)n, (int)(timeout_s * 1e3) + 1);
        atomic_fetch_sub(&e->bell->sleepers, 1);
        uint64_t v;
        if (fds[n - 1].revents & POLLIN)
            (void)!read(e->eventfd, &v, sizeof v);
        return;
    }
    atomic_fetch_add(&e->bell->sleepers, 1);
    atomic_thread_fence(memory_order_seq_cst);
    uint32_t v = atomic_load(&e->bell->seq);
    /* A message published before we counted ourselves a sleeper would find
     * nobody to wake: look once more before sleeping. */
    if (cadre__p2p_progress() == 0)
        cadre__futex_wait(&e->bell->seq, v, timeout_s);
    atomic_fetch_sub(&e->bell->sleepers, 1);
}

void cadre__p2p_kick(void)
{
    struct cadre_engine *e = &cadre__eng;
    /* One wake-up per nap of the progress thread, not one per request. */
    if (atomic_load_explicit(&e->pt_idle, memory_order_relaxed) && atomic_exchange(&e->pt_idle, 0)) {
        atomic_fetch_add(&e->pt_word, 1);
        cadre__futex_wake(&e->pt_word);
    }
    if (atomic_load(&e->bell->sleepers)) {
        cadre__bell_ring(e->bell);
        if (e->poll_mode) {
            uint64_t one = 1;
            (void)!write(e->eventfd, &one, sizeof one);
        }
    }
}

/* The transports' idle hooks: what busy progress does only now and then
 * (accepting connections) is done on the next progress call. */
static void tps_idle(void)
{
    for (int i = 0; i < cadre__eng.ntps; i++)
        if (cadre__eng.tps[i]->idle)
            cadre__eng.tps[i]->idle();
}

/* How long the application must stay out of cadre, with work outstanding,
 * before the progress thread drives that work. */
#define PT_DEFER 200e-6

/* Drives nonblocking work while the application computes. It sleeps while
 * there is nothing outstanding or an application thread is waiting (that
 * thread progresses itself), and naps on the doorbell when idle, so on an
 * oversubscribed node it costs nothing but the wake-ups. While application
 * threads keep calling into cadre (posting a window of sends, testing,
 * waiting), their calls move the work, and a thread that took turns with
 * them on a shared core, or fought them for the engine lock, would only
 * slow them: it stands aside until they have been away for PT_DEFER. */
static void *progress_thread(void *arg)
{
    (void)arg;
    struct cadre_engine *e = &cadre__eng;
    int idle = 0;
    double next_check = 0;
    uint32_t seen = atomic_load(&e->app_seq) - 1; /* a kick finds the caller in cadre */
    while (!atomic_load(&e->stop)) {
        uint32_t seq = atomic_load_explicit(&e->app_seq, memory_order_relaxed);
        if (seq != seen && atomic_load(&e->outstanding) && !atomic_load(&e->app_waiting)) {
            /* Not idle: a kick need not wake this nap. */
            seen = seq;
            uint32_t v = atomic_load(&e->pt_word);
            cadre__futex_wait(&e->pt_word, v, PT_DEFER);
            idle = 0;
            continue;
        }
        if (!atomic_load(&e->outstanding) || atomic_load(&e->app_waiting)) {
            atomic_store(&e->pt_idle, 1);
            uint32_t v = atomic_load(&e->pt_word);
            if ((!atomic_load(&e->outstanding) || atomic_load(&e->app_waiting)) &&
                !atomic_load(&e->stop))
                cadre__futex_wait(&e->pt_word, v, 0.1);
            atomic_store(&e->pt_idle, 0);
            idle = 0;
            /* A peer's question (STATE_Q) must be answered while the
             * application computes: look at least every 0.1 s. */
            if (!atomic_load(&e->app_waiting)) {
                tps_idle();
                cadre__p2p_progress();
            }
            /* The time the application left cadre, within 0.1 s. */
            cadre__state_stamp(cadre__now());
            continue;
        }
        if (cadre__p2p_progress() > 0) {
            idle = 0;
            continue;
        }
        if (++idle < (e->oversubscribed ? 4 : 200))
            continue;
        double now = cadre__now();
        if (now >= next_check) {
            eng_lock();
            cadre__p2p_check_peers();
            eng_unlock();
            next_check = now + 0.1;
        }
        cadre__p2p_sleep(0.01);
        idle = 0;
    }
    cadre__req_drop_spare();
    return NULL;
}

/* ---- peers ----------------------------------------------------------------- */

struct proc_blob {
    int32_t pid;
    int32_t node_id;
    uint64_t cookie; /* rank 0's is the job's */
    struct cadre_host_id host; /* p2p_host.c */
};

struct fail_arg {
    int peer, failed;
};

static void fail_registered(struct cadre_request *r, void *arg)
{
    struct fail_arg *fa = arg;
    int peer = fa->peer;
    if (r->peer_world != peer || r->kind == REQ_GENERIC)
        return;
    if (r->state == RS_WAIT_CTS || r->state == RS_STREAM || r->state == RS_WAIT_DATA) {
        fa->failed++;
        cadre__req_complete(r, CADRE_ERR_PEER, "%s: peer rank %d %s", r->op, peer,
                            cadre__eng.peers[peer].why);
    }
}

int cadre__p2p_fail_peer_requests(int w)
{
    struct cadre_peer *p = &cadre__eng.peers[w];
    int failed = 0;
    while (p->outq) {
        failed++;
        struct outq_entry *q = p->outq;
        p->outq = q->next;
        atomic_fetch_sub(&cadre__eng.outstanding, 1);
        if (q->req)
            cadre__req_complete(q->req, CADRE_ERR_PEER, "%s: peer rank %d %s", q->req->op, w,
                                p->why);
        free(q);
    }
    p->outq_tail = NULL;
    struct fail_arg fa = {w, 0};
    cadre__req_foreach(fail_registered, &fa);
    return failed + fa.failed + cadre__p2p_match_fail_peer(w, p->why);
}

void cadre__p2p_peer_failed(int w, const char *why)
{
    struct cadre_engine *e = &cadre__eng;
    struct cadre_peer *p = &e->peers[w];
    if (p->state == PEER_DEAD)
        return;
    int was = p->state;
    p->state = PEER_DEAD;
    if (was == PEER_FINALIZED)
        snprintf(p->why, sizeof p->why, "has finalized");
    else if (why[0] == '(') /* "(host H) ...": one parenthesis with the pid */
        snprintf(p->why, sizeof p->why, "(pid %d, %s", (int)p->pid, why + 1);
    else
        snprintf(p->why, sizeof p->why, "(pid %d) %s", (int)p->pid, why);
    if (!p->said_bye) {
        /* A failure, not the end of a rank that finalized: receives from
         * any source on its communicators fail below, and those
         * communicators are poisoned at the next settle (not here: this
         * may run inside a walk of the communicator list, a POISON being
         * passed on). */
        e->ndead++;
        if (!e->finalizing) {
            p->poison_pending = 1;
            e->deaths_pending++;
        }
    }
    int failed = cadre__p2p_fail_peer_requests(w);
    /* A peer that dies while we wait on it is worth a warning; one that
     * exits when the job ends, with nothing of ours pending, is not. */
    if (was == PEER_OK && failed && e->finalizing < 2)
        CADRE_WARN(P2P, "peer rank %d %s", w, p->why);
    else
        CADRE_INFO(P2P, "peer rank %d %s", w, p->why);
}

void cadre__p2p_peer_finalized(int w)
{
    struct cadre_peer *p = &cadre__eng.peers[w];
    p->said_bye = 1;
    if (p->state == PEER_OK) {
        p->state = PEER_FINALIZED;
        snprintf(p->why, sizeof p->why, "has called cadre_finalize");
    }
}

void cadre__p2p_check_peers(void)
{
    struct cadre_engine *e = &cadre__eng;
    double now = cadre__now();
    if (now < e->next_peer_check) {
        if (e->deaths_pending)
            cadre__p2p_deaths_settle();
        return;
    }
    e->next_peer_check = now + 0.1;
    for (int w = 0; w < e->nranks; w++) {
        struct cadre_peer *p = &e->peers[w];
        if (p->pidfd < 0 || p->state == PEER_DEAD)
            continue;
        struct pollfd pf = {p->pidfd, POLLIN, 0};
        if (poll(&pf, 1, 0) == 1) {
            close(p->pidfd);
            p->pidfd = -1;
            /* Messages it sent before exiting may still be in our queues,
             * or on a connection not accepted yet (idle: accept on the next
             * call, which the one after it reads). Its BYE, which makes its
             * exit no failure, may come after a full ring (a call reads
             * part of it): read while messages come, within a bound. */
            tps_idle();
            for (int k = 0; k < 64; k++)
                if (cadre__p2p_progress_locked() == 0 && k > 0)
                    break;
            cadre__p2p_peer_failed(w, "exited");
        }
    }
    if (e->deaths_pending)
        cadre__p2p_deaths_settle();
}

void cadre__p2p_peer_reported(int w, int by)
{
    struct cadre_engine *e = &cadre__eng;
    if (w < 0 || w >= e->nranks || w == cadre__proc.rank || e->finalizing)
        return;
    struct cadre_peer *p = &e->peers[w];
    if (p->same_node || p->state != PEER_OK || p->reported_by)
        return;
    p->reported_by = by + 1;
    e->deaths_pending++;
}

/* What w sent before it went is read first (as for a death seen here),
 * while messages come, within a bound. */
static void peer_reported_settle(int w)
{
    struct cadre_peer *p = &cadre__eng.peers[w];
    int by = p->reported_by - 1;
    p->reported_by = 0;
    for (int k = 0; k < 64 && p->state == PEER_OK; k++)
        if (cadre__p2p_progress_locked() == 0 && k > 0)
            break;
    if (p->state != PEER_OK)
        return;
    char why[128];
    const char *host = cadre__p2p_tcp_host(w);
    snprintf(why, sizeof why, "%s%s%slost: rank %d found it failed", host ? "(host " : "",
             host ? host : "", host ? ") " : "", by);
    p->heard = 1;
    cadre__p2p_peer_failed(w, why);
}

void cadre__p2p_deaths_settle(void)
{
    struct cadre_engine *e = &cadre__eng;
    /* Poisoning sends POISON messages; a send that finds another peer gone
     * adds to the count, which this loop then takes too. */
    static int settling;
    if (settling)
        return;
    settling = 1;
    while (e->deaths_pending > 0) {
        for (int w = 0; w < e->nranks; w++) {
            struct cadre_peer *p = &e->peers[w];
            if (p->reported_by) {
                e->deaths_pending--;
                peer_reported_settle(w);
            }
            if (!p->poison_pending)
                continue;
            p->poison_pending = 0;
            e->deaths_pending--;
            if (!e->finalizing)
                cadre__coll_peer_died(w);
        }
    }
    settling = 0;
}

int cadre__p2p_comm_rank_of(const struct cadre_comm *c, int w)
{
    if (!c->world_ranks)
        return w >= 0 && w < c->size ? w : -1;
    for (int q = 0; q < c->size; q++)
        if (c->world_ranks[q] == w)
            return q;
    return -1;
}

int cadre__p2p_comm_dead_member(const struct cadre_comm *c)
{
    if (!cadre__eng.ndead)
        return -1;
    for (int q = 0; q < c->size; q++) {
        int w = c->world_ranks ? c->world_ranks[q] : q;
        if (w != cadre__proc.rank && cadre__p2p_peer_died(w))
            return q;
    }
    return -1;
}

/* ---- init / finalize ------------------------------------------------------------ */

static int transport_allowed(const char *name)
{
    const char *list = cadre__config_str(CADRE_CFG_TRANSPORT);
    if (!list[0])
        return 1;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        size_t l = strcspn(p, ",");
        if (l == n && !strncmp(p, name, n))
            return 1;
        p += l;
        if (*p == ',')
            p++;
    }
    return 0;
}

int cadre__p2p_init(void)
{
    struct cadre_engine *e = &cadre__eng;
    int nr = cadre__proc.size, me = cadre__proc.rank;
    e->nranks = nr;
    e->timeout = cadre__config_dbl(CADRE_CFG_TIMEOUT);
    e->bell = &e->bell_local;
    e->ntps = 0;
    e->poll_mode = e->shm_active = 0;
    e->next_peer_check = 0;
    e->ndead = e->deaths_pending = e->finalizing = 0;
    atomic_store(&e->stop, 0);
    atomic_store(&e->outstanding, 0);
    long ncores = sysconf(_SC_NPROCESSORS_ONLN);
    e->oversubscribed = cadre__proc.local_size > (ncores > 0 ? ncores : 1);
    e->peers = calloc((size_t)nr, sizeof *e->peers);
    if (!e->peers)
        return cadre__error(CADRE_ERR_NOMEM, "cadre_init: no memory for %d peers", nr);

    const char *list = cadre__config_str(CADRE_CFG_TRANSPORT);
    if (list[0] && !transport_allowed("shm") && !transport_allowed("tcp"))
        return cadre__error(CADRE_ERR_ARG, "cadre_init: CADRE_TRANSPORT=\"%s\" names no known "
                                           "transport (shm, tcp)", list);

    struct proc_blob pb = {.pid = (int32_t)getpid(), .node_id = cadre__proc.node_id};
    cadre__p2p_host_self(&pb.host);
    CADRE_CHECK(cadre__p2p_hosts_begin(nr));
    if (getrandom(&pb.cookie, sizeof pb.cookie, 0) != sizeof pb.cookie)
        pb.cookie = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ (uint64_t)time(NULL);
    CADRE_CHECK(cadre__bootstrap_put("proc", &pb, sizeof pb));

    const struct cadre_p2p_transport *cand[2] = {&cadre__p2p_shm, &cadre__p2p_tcp};
    int ok[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        if (nr == 1 || !transport_allowed(cand[i]->name))
            continue;
        int rc = cand[i]->init();
        if (rc == CADRE_SUCCESS)
            ok[i] = 1;
        else if (rc == CADRE_ERR_ARG) /* a setting to fix (CADRE_SOCKET_IFNAME) */
            return rc;
        else
            CADRE_WARN(P2P, "transport %s disabled: %s", cand[i]->name, cadre_last_error());
    }
    CADRE_CHECK(cadre__bootstrap_commit());
    CADRE_CHECK(cadre__bootstrap_fence());

    cadre__p2p_info.job_cookie = pb.cookie;
    for (int w = 0; w < nr; w++) {
        struct cadre_peer *p = &e->peers[w];
        p->pidfd = -1;
        if (w == me) {
            p->pid = getpid();
            p->same_node = 1;
            cadre__p2p_hosts_set(w, &pb.host);
            continue;
        }
        void *data;
        size_t len;
        CADRE_CHECK(cadre__bootstrap_get(w, "proc", &data, &len));
        struct proc_blob peer;
        if (len != sizeof peer) {
            free(data);
            return cadre__error(CADRE_ERR_BOOTSTRAP, "cadre_init: rank %d published a %zu-byte "
                                "process record, not %zu (another cadre version?)", w, len,
                                sizeof peer);
        }
        memcpy(&peer, data, sizeof peer);
        free(data);
        peer.host.name[CADRE_HOST_NAME_MAX - 1] = '\0';
        if (w == 0)
            cadre__p2p_info.job_cookie = peer.cookie;
        p->pid = peer.pid;
        p->same_node = peer.node_id == cadre__proc.node_id; /* and the same host, below */
        cadre__p2p_hosts_set(w, &peer.host);
    }
    cadre__p2p_hosts_end();
    for (int w = 0; w < nr; w++) {
        struct cadre_peer *p = &e->peers[w];
        /* A pid names a process only on its own node: the same host, and
         * the same launcher node too (CADRE_HOSTID may name one host on
         * several). A host that CADRE_HOSTID split off this node is
         * another host: TCP, and no watching of its pids. */
        p->same_node = p->same_node && cadre__p2p_same_host(w);
        if (w != me && p->same_node)
            p->pidfd = (int)syscall(SYS_pidfd_open, (pid_t)p->pid, 0);
    }
    for (int i = 0; i < 2; i++) {
        if (ok[i] && cand[i]->wireup() != CADRE_SUCCESS) {
            CADRE_WARN(P2P, "transport %s disabled: %s", cand[i]->name, cadre_last_error());
            cand[i]->finalize();
            ok[i] = 0;
        }
    }
    int used[2] = {0, 0};
    for (int w = 0; w < nr; w++) {
        if (w == me)
            continue;
        struct cadre_peer *p = &e->peers[w];
        for (int i = 0; i < 2 && !p->tp; i++) {
            if (ok[i] && cand[i]->reachable(w)) {
                p->tp = cand[i];
                used[i] = 1;
            }
        }
        if (!p->tp) {
            for (int i = 0; i < 2; i++)
                if (ok[i])
                    cand[i]->finalize();
            cadre__p2p_finalize();
            return cadre__error(CADRE_ERR_BOOTSTRAP, "cadre_init: no transport reaches rank %d "
                                                     "(CADRE_TRANSPORT=\"%s\")", w, list);
        }
        p->frag = p->tp->max_payload(w);
        p->eager = p->tp->eager_limit ? p->tp->eager_limit(w) : p->frag;
        if (!e->eager_min || p->eager < e->eager_min)
            e->eager_min = p->eager;
        if (p->tp == &cadre__p2p_shm)
            e->shm_active = 1;
        else
            e->poll_mode = 1;
        CADRE_TRACE(P2P, "rank %d via %s (eager %zu, fragment %zu)", w, p->tp->name, p->eager,
                    p->frag);
        CADRE_INFO(P2P, "peer %d: %s", w, p->tp->name);
    }
    /* Peers attach to each other's segments above; a rank that went on and
     * finalized at once would take its segment away from a slower peer. */
    if (e->shm_active || nr > 1)
        CADRE_CHECK(cadre__bootstrap_barrier());
    /* A transport no peer uses is closed, not polled on every progress call. */
    for (int i = 0; i < 2; i++) {
        if (used[i])
            e->tps[e->ntps++] = cand[i];
        else if (ok[i])
            cand[i]->finalize();
    }
    e->shm_only = e->shm_active && !e->poll_mode;
    if (e->poll_mode) {
        e->eventfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (e->eventfd < 0) {
            cadre__p2p_finalize();
            return cadre__error(CADRE_ERR_INTERNAL, "cadre_init: eventfd: %s", strerror(errno));
        }
    }
    if (pthread_create(&e->pt, NULL, progress_thread, NULL) != 0) {
        cadre__p2p_finalize();
        return cadre__error(CADRE_ERR_INTERNAL, "cadre_init: cannot start the progress thread");
    }
    e->pt_running = 1;
    return CADRE_SUCCESS;
}

/* Whether world rank w gets this process's BYE at finalize: every live peer
 * that may see it go. Without the BYE, its exit is a failure there, which
 * poisons every communicator they share and fails its receives from any
 * source, even when this rank had nothing more to say to it: a peer it
 * exchanged messages with (the connection closes), and one on this node,
 * which watches this process (pidfd) even where they never talked (the
 * shared-memory collectives send no messages). A peer on another node that
 * it never talked to cannot see it go, and is spared a connection. */
static int says_bye_to(int w)
{
    const struct cadre_peer *p = &cadre__eng.peers[w];
    if (w == cadre__proc.rank || !p->tp || p->state != PEER_OK)
        return 0;
    /* One that has exited already needs none (and a connection to it would
     * fail with a warning). */
    struct pollfd pf = {p->pidfd, POLLIN, 0};
    if (p->pidfd >= 0 && poll(&pf, 1, 0) == 1)
        return 0;
    return p->send_seq || p->recv_seq || p->same_node;
}

/* Waits (progressing) until every queued message has left, at most `limit` s. */
static void drain(double limit)
{
    double end = cadre__now() + limit;
    while (atomic_load(&cadre__eng.outstanding) > 0 && cadre__now() < end) {
        eng_lock();
        int outq = 0;
        for (int w = 0; w < cadre__eng.nranks; w++)
            outq |= cadre__eng.peers[w].outq != NULL;
        cadre__p2p_progress_locked();
        eng_unlock();
        if (!outq)
            break;
    }
}

void cadre__p2p_finalize(void)
{
    struct cadre_engine *e = &cadre__eng;
    if (!e->peers)
        return;
    /* From here on a peer that fails concerns nobody: the application is
     * done with its communicators. */
    eng_lock();
    e->finalizing = 1;
    eng_unlock();
    drain(e->timeout);
    eng_lock();
    /* What is sent from here on is farewells: losing one is no news. */
    e->finalizing = 2;
    cadre__p2p_send_finals();
    for (int w = 0; w < e->nranks; w++) {
        if (says_bye_to(w)) {
            struct cadre_p2p_hdr bye = {.type = CADRE_P2P_BYE};
            cadre__p2p_post(w, &bye, NULL, NULL);
        }
    }
    eng_unlock();
    drain(5.0);
    if (e->pt_running) {
        atomic_store(&e->stop, 1);
        atomic_fetch_add(&e->pt_word, 1);
        cadre__futex_wake(&e->pt_word);
        cadre__bell_ring(e->bell);
        if (e->eventfd >= 0) {
            uint64_t one = 1;
            (void)!write(e->eventfd, &one, sizeof one);
        }
        pthread_join(e->pt, NULL);
        e->pt_running = 0;
    }
    eng_lock();
    for (int w = 0; w < e->nranks; w++) {
        struct cadre_peer *p = &e->peers[w];
        while (p->outq) {
            struct outq_entry *q = p->outq;
            p->outq = q->next;
            free(q);
        }
        if (p->pidfd >= 0)
            close(p->pidfd);
    }
    for (int i = 0; i < e->ntps; i++)
        e->tps[i]->finalize();
    e->ntps = 0;
    cadre__p2p_match_cleanup();
    cadre__p2p_diag_cleanup();
    free(e->peers);
    e->peers = NULL;
    cadre__p2p_hosts_free();
    if (e->eventfd >= 0)
        close(e->eventfd);
    e->eventfd = -1;
    e->bell = &e->bell_local;
    eng_unlock();
}
