/* The p2p engine's output queues (a message waits in its peer's queue
 * until the transport takes it) and progress: by the waiting thread, by the
 * progress thread while the application computes, sleeping on the doorbell
 * and waking. May call: this folder's transports and engine, runtime/. */
#include "config.h"

#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "p2p_engine.h"

/* ---- output --------------------------------------------------------------- */

/* An RTS the transport took with its data (CADRE_P2P_LATER, p2p.h): its
 * send is read until cadre__p2p_sent. */
static int rts_later(const struct cadre_p2p_hdr *h)
{
    struct cadre_request *s = cadre__req_lookup(h->sreq);
    if (s && s->kind == REQ_SEND)
        s->later++;
    return CADRE_P2P_SENT;
}

/* Hands one queued entry to the transport. Returns SENT when the entry is
 * finished, BUSY when the transport is full, or an error status. */
static int send_entry(int w, struct cadre_peer *p, struct outq_entry *q)
{
    if (q->hdr.type != CADRE_P2P_DATA) {
        q->hdr.seq = p->send_seq + 1;
        int rc = p->tp->send(w, &q->hdr, q->payload);
        if (rc == CADRE_P2P_LATER && q->hdr.type == CADRE_P2P_RTS)
            rc = rts_later(&q->hdr);
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
        if (rc == CADRE_P2P_LATER)
            s->later++; /* read until cadre__p2p_sent */
        else if (rc != CADRE_P2P_SENT)
            return rc;
        s->moved += n;
        s->last_activity = cadre__now();
    }
    return CADRE_P2P_SENT;
}

/* The error of a transport's send to world rank w that failed with rc, as
 * the caller's last error, op (NULL: none) first. A transport that finds
 * the peer gone (its connection failed) records why with the peer
 * (cadre__p2p_peer_failed) and returns CADRE_ERR_PEER without a message of
 * its own: the message is made here from the peer's record, since the
 * thread's last error is an older one, or none (the progress thread's: a
 * queued send then failed with the text "cadre_send: " alone). Its other
 * errors come with their message (cadre__error). */
static int send_failed(int w, int rc, const char *op)
{
    const struct cadre_peer *p = &cadre__eng.peers[w];
    if (rc != CADRE_ERR_PEER && cadre_last_error()[0])
        return op ? cadre__error(rc, "%s: %s", op, cadre_last_error()) : rc;
    const char *why = rc == CADRE_ERR_PEER && p->why[0] ? p->why : cadre_error_string(rc);
    return op ? cadre__error(rc, "%s: peer rank %d %s", op, w, why)
              : cadre__error(rc, "peer rank %d %s", w, why);
}

static void entry_done(int w, struct outq_entry *q, int rc)
{
    if (q->req && (q->hdr.type == CADRE_P2P_EAGER || q->hdr.type == CADRE_P2P_DATA)) {
        if (q->req->later) {
            /* Some of its DATA is still read: done when the last is. */
            if (rc != CADRE_SUCCESS && !q->req->error) {
                send_failed(w, rc, q->req->op);
                q->req->error = rc;
                snprintf(q->req->errmsg, sizeof q->req->errmsg, "%s", cadre_last_error());
            }
        } else if (rc == CADRE_SUCCESS) {
            cadre__req_complete_ok(q->req);
        } else {
            send_failed(w, rc, q->req->op);
            cadre__req_complete(q->req, rc, "%s", cadre_last_error());
        }
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
        eng_outstanding_add(-1);
        entry_done(w, q, rc);
        free(q);
        events++;
    }
    return events;
}

void cadre__p2p_sent(int w, uint64_t sreq, int status)
{
    struct cadre_request *s = cadre__req_lookup(sreq);
    if (!s || s->kind != REQ_SEND || s->peer_world != w || !s->later)
        return; /* not counted: nothing to do */
    s->later--;
    if (status != CADRE_SUCCESS && !s->error) {
        s->error = status;
        const struct cadre_peer *p = &cadre__eng.peers[w];
        snprintf(s->errmsg, sizeof s->errmsg, "%.40s: peer rank %d %.190s", s->op, w,
                 p->why[0] ? p->why : cadre_error_string(status));
    }
    if (s->later)
        return;
    s->last_activity = cadre__now();
    if (s->error)
        cadre__req_complete(s, s->error, NULL); /* errmsg set above */
    else if ((s->state == RS_STREAM && s->moved == s->xfer) || s->state == RS_WAIT_CTS)
        cadre__req_complete_ok(s); /* WAIT_CTS: its data went with the RTS (p2p.h) */
    /* else more DATA is queued: its entry completes the send */
}

void cadre__p2p_later_settle(struct cadre_request *r)
{
    /* Bounded: a peer that stops answering fails (the transport's liveness
     * check), and its transport then reports every message (peer_gone).
     * Only the transports: the engine's full progress would poll the
     * collectives' schedules, and this runs inside one (a schedule that
     * drops its requests when poisoned: sched_poll, abandon, settle,
     * sched_poll, ... without end). */
    struct cadre_engine *e = &cadre__eng;
    while (r->kind == REQ_SEND && r->later) {
        int events = 0;
        for (int i = 0; i < e->ntps; i++)
            events += e->tps[i]->progress();
        if (!events)
            sched_yield();
    }
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
        if (rc == CADRE_P2P_LATER && hh.type == CADRE_P2P_RTS)
            rc = rts_later(&hh);
        if (rc == CADRE_P2P_SENT) {
            p->send_seq++;
            if (req)
                cadre__req_complete_ok(req);
            return CADRE_SUCCESS;
        }
        if (rc != CADRE_P2P_BUSY)
            return send_failed(w, rc, req ? req->op : NULL);
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
    eng_outstanding_add(1);
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
    cadre__p2p_cma_flush();
    return events;
}

int cadre__p2p_progress(void)
{
    struct cadre_engine *e = &cadre__eng;
    /* Nothing queued, no collective running and nothing in the rings: no
     * need for the lock (this is the spin of a blocking receive). */
    if (e->shm_only && !atomic_load_explicit(&e->outstanding, memory_order_relaxed) &&
        !__atomic_load_n(&e->generic, __ATOMIC_RELAXED) && !cadre__p2p_shm_pending() &&
        !__atomic_load_n(&e->cma_queued, __ATOMIC_RELAXED))
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
        int wake = -1;
        if (e->wake_fd >= 0) {
            wake = n;
            fds[n].fd = e->wake_fd;
            fds[n].events = POLLIN;
            fds[n].revents = 0;
            n++;
        }
        fds[n].fd = e->eventfd;
        fds[n].events = POLLIN;
        fds[n].revents = 0; /* read below also when poll() is skipped */
        n++;
        /* Shared-memory arrivals wake poll() only through the wake socket:
         * without one, keep naps short. */
        if (e->shm_active && wake < 0 && timeout_s > 1e-3)
            timeout_s = 1e-3;
        struct cadre_p2p_doorbell *b = e->bell;
        atomic_fetch_add(&b->pollers, 1);
        (void)cadre__bell_sleep_begin(b);
        if (cadre__p2p_progress() == 0)
            poll(fds, (nfds_t)n, (int)(timeout_s * 1e3) + 1);
        cadre__bell_sleep_end(b);
        atomic_fetch_sub(&b->pollers, 1);
        uint64_t v;
        if (fds[n - 1].revents & POLLIN)
            (void)!read(e->eventfd, &v, sizeof v);
        if (wake >= 0 && (fds[wake].revents & POLLIN)) {
            char buf[64];
            while (recv(e->wake_fd, buf, sizeof buf, MSG_DONTWAIT) > 0)
                ;
        }
        return;
    }
    uint32_t v = cadre__bell_sleep_begin(e->bell);
    /* A message published before we counted ourselves a sleeper would find
     * nobody to wake: look once more before sleeping. */
    if (cadre__p2p_progress() == 0)
        cadre__futex_wait(&e->bell->seq, v, timeout_s);
    cadre__bell_sleep_end(e->bell);
}

/* ---- the wake socket ------------------------------------------------------ */
/* An abstract AF_UNIX datagram name (no file; gone with the process), from a
 * random key the process publishes in its doorbell. Peers in shared memory
 * share this network namespace; where they do not, sendto fails and the
 * sleeper's 1 ms naps are all that is lost. */
static socklen_t wake_name(struct sockaddr_un *sa, uint64_t key)
{
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    int len = snprintf(sa->sun_path + 1, sizeof sa->sun_path - 1, "cadre-wake-%016llx",
                       (unsigned long long)key);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)len);
}

void cadre__p2p_wake_open(void)
{
    struct cadre_engine *e = &cadre__eng;
    if (e->bell == &e->bell_local)
        return; /* no shared segment: nobody could read the key */
    uint64_t key = 0;
    if (getrandom(&key, sizeof key, 0) != sizeof key || !key)
        return;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int tx = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa;
    socklen_t sl = wake_name(&sa, key);
    if (fd < 0 || tx < 0 || bind(fd, (struct sockaddr *)&sa, sl) != 0) {
        CADRE_INFO(P2P, "no wake socket (%s): a wait in poll() looks at shared memory every ms",
                   strerror(errno));
        if (fd >= 0)
            close(fd);
        if (tx >= 0)
            close(tx);
        return;
    }
    e->wake_fd = fd;
    e->wake_tx = tx;
    atomic_store_explicit(&e->bell->wake_key, key, memory_order_release);
}

void cadre__p2p_wake_close(void)
{
    struct cadre_engine *e = &cadre__eng;
    if (e->wake_fd >= 0)
        close(e->wake_fd);
    if (e->wake_tx >= 0)
        close(e->wake_tx);
    e->wake_fd = e->wake_tx = -1;
}

/* After cadre__bell_ring(b) returned 1 (its fence orders our message before
 * this look). */
void cadre__p2p_wake_peer(struct cadre_p2p_doorbell *b)
{
    struct cadre_engine *e = &cadre__eng;
    if (!atomic_load_explicit(&b->pollers, memory_order_relaxed) || e->wake_tx < 0)
        return;
    uint64_t key = atomic_load_explicit(&b->wake_key, memory_order_acquire);
    if (!key)
        return;
    struct sockaddr_un sa;
    socklen_t sl = wake_name(&sa, key);
    char one = 1;
    (void)!sendto(e->wake_tx, &one, 1, MSG_DONTWAIT, (struct sockaddr *)&sa, sl);
}

void cadre__p2p_kick(void)
{
    struct cadre_engine *e = &cadre__eng;
    /* One wake-up per nap of the progress thread, not one per request. */
    if (atomic_load_explicit(&e->pt_idle, memory_order_relaxed) && atomic_exchange(&e->pt_idle, 0)) {
        atomic_fetch_add_explicit(&e->n_pt_wakes, 1, memory_order_relaxed);
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
void cadre__p2p_tps_idle(void)
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
void *cadre__p2p_progress_thread(void *arg)
{
    (void)arg;
    struct cadre_engine *e = &cadre__eng;
    int idle = 0, napping = 0;
    double next_check = 0;
    uint32_t seen = atomic_load(&e->app_seq) - 1; /* a kick finds the caller in cadre */
    cadre__lock_helper = 1;
    while (!atomic_load(&e->stop)) {
        uint32_t seq = atomic_load_explicit(&e->app_seq, memory_order_relaxed);
        if (seq != seen && atomic_load(&e->outstanding) && !atomic_load(&e->app_waiting)) {
            /* Not idle: a kick need not wake this nap. */
            seen = seq;
            cadre__bell_series_end(&napping);
            /* The application's calls take the engine lock now, not us. */
            cadre__lock_rebias(&e->lock);
            uint32_t v = atomic_load(&e->pt_word);
            cadre__futex_wait(&e->pt_word, v, PT_DEFER);
            idle = 0;
            continue;
        }
        if (!atomic_load(&e->outstanding) || atomic_load(&e->app_waiting)) {
            cadre__bell_series_end(&napping);
            cadre__lock_rebias(&e->lock);
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
                cadre__p2p_tps_idle();
                cadre__p2p_progress();
            }
            /* The time the application left cadre, within 0.1 s. */
            cadre__state_stamp(cadre__now());
            continue;
        }
        if (cadre__p2p_progress() > 0) {
            cadre__bell_series_end(&napping);
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
        /* Naps with nothing in between make one series. */
        cadre__bell_series_nap(&napping);
        cadre__p2p_sleep(0.01);
        idle = 0;
    }
    cadre__bell_series_end(&napping);
    cadre__req_drop_spare();
    return NULL;
}
