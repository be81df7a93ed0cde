/* The p2p engine: its state and lock, the clock and futexes, and
 * cadre__p2p_init / cadre__p2p_finalize (transports, peers and their
 * exchange through bootstrap, the progress thread). Output queues and
 * progress are in p2p_progress.c, peer failure in p2p_peer.c.
 * May call: this folder, bootstrap/, runtime/. */
#include "config.h"

#include <errno.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
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

struct cadre_engine cadre__eng = {.eventfd = -1, .wake_fd = -1, .wake_tx = -1};
struct cadre_p2p_upcalls cadre__p2p_up;

void cadre__p2p_set_upcalls(const struct cadre_p2p_upcalls *up)
{
    cadre__p2p_up = *up;
}
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

int cadre__membarrier;

void cadre__membarrier_init(void)
{
    if (cadre__membarrier)
        return;
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (cmds < 0 || !(cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED))
        return;
    cadre__membarrier =
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0;
    CADRE_INFO(P2P, "membarrier: %s", cadre__membarrier
                                          ? "registered for the global expedited barrier: "
                                            "doorbell rings take no fence"
                                          : "not available: doorbell rings take a fence");
}

void cadre__membarrier_all(void)
{
    atomic_fetch_add_explicit(&cadre__eng.n_membarriers, 1, memory_order_relaxed);
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) != 0) {
        /* Registered, so the kernel does not refuse it; were it to, a
         * fence here still orders this side, and the sleeper's naps are
         * bounded. */
        atomic_thread_fence(memory_order_seq_cst);
    }
}

__thread struct cadre_p2p_doorbell *cadre__bell_fenced __attribute__((tls_model("initial-exec")));
static __thread int naps_depth __attribute__((tls_model("initial-exec")));

void cadre__bell_naps_begin(struct cadre_p2p_doorbell *b)
{
    if (naps_depth++ || !atomic_load_explicit(&b->asym, memory_order_relaxed))
        return;
    /* Counted before the barrier: a ringer that looks at fencers after its
     * own fence in the barrier sees it; one that looked before had made its
     * store, which the barrier makes visible to our looks. */
    atomic_fetch_add(&b->fencers, 1);
    cadre__membarrier_all();
    cadre__bell_fenced = b;
}

void cadre__bell_naps_end(void)
{
    if (--naps_depth)
        return;
    if (cadre__bell_fenced) {
        atomic_fetch_sub(&cadre__bell_fenced->fencers, 1);
        cadre__bell_fenced = NULL;
    }
}

struct proc_blob {
    int32_t pid;
    int32_t node_id;
    uint64_t cookie; /* rank 0's is the job's */
    struct cadre_host_id host; /* p2p_host.c */
    struct cadre_agree agree;  /* runtime_config.c: compared with every peer's */
    int32_t shm;               /* takes part in shared memory: publishes a verdict */
    int32_t reserved;
};

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
    /* 0 or less once made every wait fail at once ("no progress for 0 s"),
     * while the device waits took it for "never". */
    if (!(e->timeout > 0))
        return cadre__error(CADRE_ERR_ARG,
                            "cadre_init: CADRE_TIMEOUT=%g out of range (seconds, more than 0; inf "
                            "for no limit)",
                            e->timeout);
    e->stuck_warn = cadre__config_dbl(CADRE_CFG_STUCK_WARN);
    if (!(e->stuck_warn > 0))
        e->stuck_warn = 0;
    cadre__membarrier_init();
    /* Until a shared segment brings peers' rings, only this process's
     * threads ring its bell, and seldom (kicks): they fence, and its naps
     * need no membarrier (asym 0; TCP-only ranks made thousands a run). */
    e->bell = &e->bell_local;
    atomic_store(&e->bell_local.asym, 0);
    e->ntps = 0;
    e->poll_mode = e->shm_active = 0;
    e->next_peer_check = 0;
    e->ndead = e->deaths_pending = e->finalizing = 0;
    atomic_store(&e->stop, 0);
    atomic_store(&e->outstanding, 0);
    atomic_store(&e->pt_wanted, 0);
    atomic_store(&e->n_wakes, 0);
    atomic_store(&e->n_pt_wakes, 0);
    atomic_store(&e->n_nap_turns, 0);
    atomic_store(&e->n_membarriers, 0);
    long ncores = sysconf(_SC_NPROCESSORS_ONLN);
    e->oversubscribed = cadre__proc.local_size > (ncores > 0 ? ncores : 1);
    /* No other thread of ours uses the lock yet. */
    cadre__lock_init(&e->lock, e->oversubscribed);
    cadre__busy_init();
    e->peers = calloc((size_t)nr, sizeof *e->peers);
    if (!e->peers)
        return cadre__error(CADRE_ERR_NOMEM, "cadre_init: no memory for %d peers", nr);

    const char *list = cadre__config_str(CADRE_CFG_TRANSPORT);
    if (list[0] && !transport_allowed("shm") && !transport_allowed("tcp") &&
        !transport_allowed("ucx"))
        return cadre__error(CADRE_ERR_ARG, "cadre_init: CADRE_TRANSPORT=\"%s\" names no known "
                                           "transport (shm, tcp, ucx)", list);
    /* Named, ucx must start; by default it starts where RDMA is offered. */
    cadre__p2p_info.ucx_forced = list[0] && transport_allowed("ucx");

    int shm_tried = nr > 1 && transport_allowed("shm");
    struct proc_blob pb = {.pid = (int32_t)getpid(), .node_id = cadre__proc.node_id,
                           .shm = shm_tried};
    cadre__p2p_host_self(&pb.host);
    cadre__config_agree(&pb.agree);
    CADRE_CHECK(cadre__p2p_hosts_begin(nr));
    if (getrandom(&pb.cookie, sizeof pb.cookie, 0) != sizeof pb.cookie)
        pb.cookie = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ (uint64_t)time(NULL);
    CADRE_CHECK(cadre__bootstrap_put("proc", &pb, sizeof pb));

    /* In the order of preference: same-host peers take shm, off-host peers
     * ucx where both ranks have it, tcp otherwise. */
    enum { NTP = 3 };
    const struct cadre_p2p_transport *cand[NTP] = {&cadre__p2p_shm, &cadre__p2p_ucx,
                                                   &cadre__p2p_tcp};
    int ok[NTP] = {0, 0, 0};
    cadre__shm_agree_free();
    for (int i = 0; i < NTP; i++) {
        if (nr == 1 || !transport_allowed(cand[i]->name))
            continue;
        int rc = cand[i]->init();
        if (rc == CADRE_SUCCESS)
            ok[i] = 1;
        else if (rc == CADRE_ERR_ARG) /* a setting to fix (CADRE_SOCKET_IFNAME) */
            return rc;
        else if (cand[i] == &cadre__p2p_ucx && cadre__p2p_info.ucx_forced)
            /* Asked for by name: not replaced by another without a word. */
            return cadre__error(rc, "cadre_init: CADRE_TRANSPORT=\"%s\" asks for ucx, which "
                                "cannot start on rank %d: %s", list, me, cadre_last_error());
        else if (cand[i] != &cadre__p2p_shm) /* shm's: cadre__shm_agree, below */
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
            p->shm_tried = shm_tried;
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
        CADRE_CHECK(cadre__config_agree_check(&pb.agree, &peer.agree, w));
        peer.host.name[CADRE_HOST_NAME_MAX - 1] = '\0';
        if (w == 0)
            cadre__p2p_info.job_cookie = peer.cookie;
        p->pid = peer.pid;
        p->shm_tried = peer.shm != 0;
        p->same_node = peer.node_id == cadre__proc.node_id; /* and the same host, below */
        cadre__p2p_hosts_set(w, &peer.host);
    }
    cadre__p2p_hosts_end();
    /* Hosts that are containers or namespaces of one machine share its
     * cores: 2 hosts of 2 ranks on a 2-core machine spin 4 ranks on 2 cores
     * unless their waits yield (8-byte allreduce 2.6 ms spinning, 0.14 ms
     * yielding; bench/HISTORY.md, across hosts). */
    /* And the cores are those the machine's ranks may run on together: 2
     * ranks under `taskset -c 0 cadrerun` spun against each other, each
     * waiting out its peer's whole slice (8 B message rate 0.16 M/s against
     * 13 yielding). */
    int on_machine = cadre__p2p_machine_ranks();
    long cores = ncores > 0 ? ncores : 1, usable = cadre__p2p_machine_cpus();
    if (usable <= 0 || usable > cores)
        usable = cores;
    if (on_machine > cadre__proc.local_size || on_machine > usable) {
        e->oversubscribed = on_machine > usable;
        e->lock.yield_spins = e->oversubscribed;
        char which[64] = "";
        if (usable < cores)
            snprintf(which, sizeof which, "%ld of ", usable);
        CADRE_INFO(P2P, "%d ranks of the job share %sthis machine's %ld cores (%d on this host): %s",
                   on_machine, which, cores, cadre__proc.local_size,
                   e->oversubscribed ? "oversubscribed, waits yield" : "not oversubscribed");
    }
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
    int wired[NTP] = {ok[0], ok[1], ok[2]};
    for (int i = 0; i < NTP; i++) {
        if (ok[i] && cand[i]->wireup() != CADRE_SUCCESS) {
            wired[i] = 0;
            if (cand[i] == &cadre__p2p_shm)
                continue; /* its segment stays until the peers have taken theirs */
            if (cand[i] != &cadre__p2p_ucx || !cadre__p2p_info.ucx_forced) /* forced: fails below */
                CADRE_WARN(P2P, "transport %s disabled: %s", cand[i]->name, cadre_last_error());
            cand[i]->finalize();
            ok[i] = 0;
        }
    }
    /* Both ranks of a pair use shared memory, or neither: a rank that could
     * not map its peers' segments must not find them writing into its own
     * and their tcp listeners closed. The exchange also keeps a rank that
     * goes on and finalizes at once from taking its segment away from a
     * slower peer that still maps it (or its descriptor, which the peers
     * take before they map it). */
    if (nr > 1) {
        int rc = cadre__shm_agree(shm_tried, wired[0], ok[2]);
        if (ok[0] && !wired[0]) {
            cand[0]->finalize();
            ok[0] = 0;
        }
        /* ucx likewise, after the same fence: a pair uses it only where
         * both ranks wired it up (or cadre_init fails, where forced). */
        if (rc == CADRE_SUCCESS)
            rc = cadre__p2p_ucx_agree(list);
        if (rc != CADRE_SUCCESS) {
            for (int i = 0; i < NTP; i++)
                if (ok[i])
                    cand[i]->finalize();
            cadre__p2p_finalize();
            return rc;
        }
    }
    int used[NTP] = {0, 0, 0};
    for (int w = 0; w < nr; w++) {
        if (w == me)
            continue;
        struct cadre_peer *p = &e->peers[w];
        for (int i = 0; i < NTP && !p->tp; i++) {
            if (ok[i] && cand[i]->reachable(w)) {
                p->tp = cand[i];
                used[i] = 1;
            }
        }
        if (!p->tp) {
            const char *lost = cadre__shm_lost(w);
            char why[512] = "";
            if (lost)
                snprintf(why, sizeof why, "%s", lost);
            for (int i = 0; i < NTP; i++)
                if (ok[i])
                    cand[i]->finalize();
            /* No farewells through the transports just closed (a BYE to a
             * peer chosen before this one went into a freed segment). */
            for (int v = 0; v < nr; v++)
                e->peers[v].tp = NULL;
            cadre__p2p_finalize();
            if (lost)
                return cadre__error(CADRE_ERR_BOOTSTRAP, "%s; no other transport reaches rank %d "
                                    "(CADRE_TRANSPORT=\"%s\")", why, w, list);
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
    /* A transport no peer uses is closed, not polled on every progress call. */
    for (int i = 0; i < NTP; i++) {
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
        if (e->shm_active)
            cadre__p2p_wake_open();
    }
    int prc = pthread_create(&e->pt, NULL, cadre__p2p_progress_thread, NULL);
    if (prc != 0) {
        cadre__p2p_finalize();
        /* EAGAIN: no room for its stack (ulimit -v), or RLIMIT_NPROC */
        return cadre__error(prc == EAGAIN ? CADRE_ERR_NOMEM : CADRE_ERR_INTERNAL,
                            "rank %d cannot start its progress thread: %s%s", me, strerror(prc),
                            cadre__p2p_limit_note(prc));
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

int cadre__p2p_farewells(void)
{
    return cadre__eng.finalizing == 2;
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
    /* What the application left: dropped, but not without a word. */
    cadre__p2p_report_leftovers();
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
    CADRE_INFO(P2P, "wake-ups: %lu sent to peers' sleeping threads, %lu of the progress thread; "
               "%lu turns of napping after a yield to another job's process; %lu membarriers",
               atomic_load(&e->n_wakes), atomic_load(&e->n_pt_wakes), atomic_load(&e->n_nap_turns),
               atomic_load(&e->n_membarriers));
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
    CADRE_INFO(P2P, "engine lock: %s; %lu revocations of the bias, %lu returns",
               e->lock.can_bias ? "biased to the thread of cadre_init"
                                : "not biased (no private expedited membarrier)",
               atomic_load(&e->lock.n_revokes), atomic_load(&e->lock.n_rebias));
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
    cadre__shm_agree_free();
    if (e->eventfd >= 0)
        close(e->eventfd);
    e->eventfd = -1;
    cadre__p2p_wake_close();
    e->bell = &e->bell_local;
    eng_unlock();
}
