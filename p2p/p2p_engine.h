/*
 * p2p_engine.h - state shared by the files of the p2p engine (not by
 * transports): peers, matching queues, the engine lock, sleeping and
 * waking. Requests and the diagnosis of their waits: p2p_request.h.
 */
#ifndef CADRE_P2P_ENGINE_H
#define CADRE_P2P_ENGINE_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/types.h>

#include "p2p.h"
#include "p2p_lock.h"
#include "p2p_request.h"

/* ---- peers --------------------------------------------------------------- */
enum { PEER_OK = 0, PEER_FINALIZED = 1, PEER_DEAD = 2 };

struct outq_entry {
    struct cadre_p2p_hdr hdr;
    struct cadre_request *req; /* EAGER: completed when sent; DATA stream: the send */
    const void *payload;       /* EAGER payload (user's buffer, kept until sent) */
    struct outq_entry *next;
};

struct cadre_peer {
    const struct cadre_p2p_transport *tp;
    int state;
    int same_node;
    /* It takes part in shared memory (CADRE_TRANSPORT allows it): it
     * publishes a verdict (cadre__shm_agree); one that does not, none. */
    int shm_tried;
    pid_t pid;
    int pidfd;
    size_t frag;  /* largest DATA payload */
    size_t eager; /* largest EAGER payload */
    uint64_t send_seq, recv_seq;
    struct outq_entry *outq, *outq_tail;
    /* The receive an EAGER payload from this peer is being read into
     * (cadre__p2p_eager_dest); RS_WAIT_DATA, registered. */
    struct cadre_request *claimed;
    int said_bye; /* its BYE came: it finalized, it did not fail */
    /* Wire id of the last large send to this peer (p2p_cma.c: is it still
     * in flight?); 0 = none. */
    uint64_t last_rndv;
    /* It failed (no BYE) and the communicators it belongs to are still to
     * be poisoned (cadre__p2p_deaths_settle). */
    int poison_pending;
    /* by + 1: rank `by` told us this peer of another node failed
     * (cadre__p2p_peer_reported), to be settled with the deaths. */
    int reported_by;
    int heard; /* it failed by another rank's word, not by what this one saw */
    char why[256];
};

/* ---- the engine ---------------------------------------------------------- */
struct cadre_p2p_doorbell {
    _Atomic uint32_t seq;      /* futex word: bumped by whoever wakes us */
    _Atomic uint32_t sleepers; /* threads of this process sleeping on seq */
    /* Of those, the threads asleep in poll() (a socket transport is in use),
     * which a futex wake does not reach: a peer that rings also sends a
     * datagram to the socket named by wake_key (0: none; cadre__p2p_wake_*). */
    _Atomic uint32_t pollers;
    /* 1 while some sleeper may wait on the present seq: a ring takes it
     * (and only then bumps seq and wakes), so a burst of messages to a
     * sleeping rank makes one wake-up system call, not one per message. */
    _Atomic uint32_t armed;
    /* 1: its process is registered for membarrier's global expedited
     * barrier (cadre__membarrier), and its sleepers order their last look
     * with that barrier (cadre__bell_sleep_begin): a ringer registered too
     * needs no fence of its own (cadre__bell_ring). Set before the segment
     * is published, never changed; 0 in a process's local bell (no shared
     * segment), which only its own threads ring. */
    _Atomic uint32_t asym;
    /* Threads of this process in a series of naps (cadre__bell_naps_begin)
     * that order each nap with a plain fence: while nonzero, ringers fence
     * too. The series costs one membarrier, not one per nap: each is an
     * interrupt on every core that runs a registered process, 10-80 us
     * here while the peer works. */
    _Atomic uint32_t fencers;
    _Atomic uint64_t wake_key;
};


struct cadre_engine {
    struct cadre_eng_lock lock; /* eng_lock / eng_unlock / eng_trylock */
    int nranks;
    struct cadre_peer *peers;
    const struct cadre_p2p_transport *tps[3];
    int ntps;
    int poll_mode;  /* some peer is reached by a socket transport: sleep in poll() */
    int shm_active; /* some peer is reached through shared memory */
    int shm_only;   /* ... and no peer through anything else */
    int oversubscribed;
    /* cadre__yield_brief: no yields before this time (cadre__now), since
     * one showed another process holding the core; the length of the last
     * such turn (0: none since the last brief yield). */
    _Atomic double yield_off_until, yield_off_len;
    size_t eager_min; /* the smallest eager limit of any peer */
    int eventfd;
    int wake_fd, wake_tx; /* the datagram socket shm peers wake our poll() with, and ours to them */
    struct cadre_p2p_doorbell *bell; /* in our shm segment, or bell_local */
    struct cadre_p2p_doorbell bell_local;

    _Atomic int outstanding; /* user requests not done + queued output */
    /* Of those, the requests whose data moves only when some thread answers
     * (api's wants_progress): the progress thread's business once the
     * application leaves its wait. */
    _Atomic int pt_wanted;
    /* Counted for the INFO line of cadre__p2p_finalize (tests read it):
     * wake-ups sent to peers' sleeping threads, kicks that woke the idle
     * progress thread, long yields that turned this process's waits to
     * naps (cadre__yield_brief), and membarriers (cadre__membarrier_all). */
    _Atomic unsigned long n_wakes, n_pt_wakes, n_nap_turns, n_membarriers;
    _Atomic int app_waiting; /* application threads inside a wait */
    _Atomic int stop;
    _Atomic uint32_t pt_word; /* the idle progress thread sleeps here */
    _Atomic int pt_idle;
    pthread_t pt;
    int pt_running;
    double timeout; /* CADRE_TIMEOUT */
    double stuck_warn; /* CADRE_STUCK_WARN, 0: never */
    double next_peer_check;
    int ndead;          /* peers that failed without a BYE (cadre__p2p_peer_died) */
    int deaths_pending; /* of those, how many have poison_pending set */
    int finalizing;     /* in cadre_finalize: 1, no more poisoning; 2, farewells only */

    struct cadre_request *generic; /* collective requests polled by progress */
    int cma_queued; /* single-copy reads and writes waiting in p2p_cma.c's queues */

    /* Moved by application threads as they enter cadre (cadre__app_active);
     * read by the progress thread. A line of its own. */
    _Alignas(64) _Atomic uint32_t app_seq;
    char app_seq_pad[60];
};
extern struct cadre_engine cadre__eng;

/* The engine lock (p2p_lock.h). Not a pthread mutex: its release is a plain
 * store (a pthread unlock is a locked exchange, a full barrier that waits
 * for every store of the critical section to reach the other cores, on the
 * path of every message), and the thread that called cadre_init takes it
 * with a plain store too while no other thread uses it. A thread that finds
 * the lock taken spins a little, then sleeps on the word with a short
 * timeout, counted in `waiters` so that an unlock wakes it. An unlock that
 * reads `waiters` before a new waiter's count is visible wakes nobody; that
 * waiter then wakes by its timeout, 50 us at first, which bounds the cost
 * of that rare race. */
static inline int eng_trylock(void)
{
    return cadre__lock_try(&cadre__eng.lock);
}
static inline void eng_lock(void)
{
    cadre__lock_acquire(&cadre__eng.lock);
}
/* Lock held: every change of outstanding is made under the engine lock, so
 * it needs no locked instruction (one per posted receive and one per
 * completion, about 10 ns each here); readers without the lock take a
 * snapshot, as of an atomic. */
static inline void eng_outstanding_add(int d)
{
    _Atomic int *o = &cadre__eng.outstanding;
    atomic_store_explicit(o, atomic_load_explicit(o, memory_order_relaxed) + d,
                          memory_order_relaxed);
}

static inline void eng_unlock(void)
{
    cadre__lock_release(&cadre__eng.lock);
}

double cadre__now(void);

/* process_vm_readv (write 0) or process_vm_writev of n bytes between local
 * memory and world rank w's address space (p2p_cma.c; the direct
 * collectives use it too): 0, or an errno (ESRCH: the process is gone; EIO:
 * no progress). */
int cadre__cma(int w, void *local, uint64_t remote, size_t n, int write);

/* Other processes want this node's cores now (p2p_busy.c); the calling
 * thread's scheduler slice follows the answer. */
int cadre__cores_busy(void);
void cadre__busy_init(void); /* reads CADRE_WAIT */
/* A wait that has spun CADRE_BUSY_ASK polls asks this: 1 (CADRE_WAIT=sleep)
 * when it should sleep on its doorbell now rather than spin on. */
int cadre__wait_doze(void);

/* Idle polls of a wait before it asks cadre__wait_doze (a short wait never
 * pays for the question). */
#define CADRE_BUSY_ASK 256

/* p2p_busy.c: a long yield went to another job's process (more runnable
 * tasks than this job's ranks on the machine). */
int cadre__cores_foreign(void);

/* One idle poll of a rank whose job has more ranks than the node has cores:
 * gives the core away (sched_yield), which on a quiet machine hands it to
 * another rank of the job at once (4 ranks on 2 cores: an 8-byte allreduce
 * in 2.5 us, against 50 us when every wait naps on its doorbell instead).
 * Returns 0, and the waiter should nap now, when a yield took long and
 * another job's process held the core (a CPU hog keeps it for its slice,
 * milliseconds; cadre__cores_foreign), since a rank woken from its nap by
 * a peer's ring runs before such a process. Then no rank of this process
 * yields for a while, since each yield would cost a slice again (5 ranks
 * and two hogs on 2 cores, 8-byte allreduce: 2.6 ms yielding on every idle
 * poll, 0.12-0.3 ms napping): YIELD_OFF_MIN the first time, twice as long
 * each time after that without a brief yield between, up to YIELD_OFF_MAX.
 * A fixed 0.1 s made a long yield at the job's start (ranks still loading,
 * the launcher) cost its first 0.1 s: a nap, a wake-up and a membarrier a
 * window, 2 pairs of the 8-byte message rate on one core each. A long
 * yield to the job's own ranks changes nothing: they had work, and
 * yielding hands the core back soonest. */
#define YIELD_OFF_MIN 4e-3
#define YIELD_OFF_MAX 0.1
static inline int cadre__yield_brief(void)
{
    double t0 = cadre__now();
    if (t0 < atomic_load_explicit(&cadre__eng.yield_off_until, memory_order_relaxed))
        return 0;
    sched_yield();
    double dt = cadre__now() - t0;
    if (dt < 500e-6) {
        if (atomic_load_explicit(&cadre__eng.yield_off_len, memory_order_relaxed) != 0)
            atomic_store_explicit(&cadre__eng.yield_off_len, 0, memory_order_relaxed);
        return 1;
    }
    if (!cadre__cores_foreign())
        return 1;
    atomic_fetch_add_explicit(&cadre__eng.n_nap_turns, 1, memory_order_relaxed);
    double len = atomic_load_explicit(&cadre__eng.yield_off_len, memory_order_relaxed);
    len = !len ? YIELD_OFF_MIN : 2 * len < YIELD_OFF_MAX ? 2 * len : YIELD_OFF_MAX;
    atomic_store_explicit(&cadre__eng.yield_off_len, len, memory_order_relaxed);
    atomic_store_explicit(&cadre__eng.yield_off_until, t0 + dt + len, memory_order_relaxed);
    return 0;
}

/* An application thread is in cadre: the progress thread stands aside while
 * the counter moves (the caller's own calls progress the work) and takes
 * over once it has stood still for PT_DEFER. A plain store, no atomic add:
 * a count lost to a race between threads still changes the value. */
static inline void cadre__app_active(void)
{
    uint32_t s = atomic_load_explicit(&cadre__eng.app_seq, memory_order_relaxed);
    atomic_store_explicit(&cadre__eng.app_seq, s + 1, memory_order_relaxed);
}

/* A blocking receive from one peer (world rank `world`, comm rank `src`). */
struct cadre_p2p_direct {
    uint32_t ctx;
    int world, src, tag;
    void *buf;
    size_t bytes, elsize;
};
/* Polls of the peer's lane before the general path (about a few us). */
#define DIRECT_POLLS 2048
/* The receive fast path: when the next message of the peer's lane is the
 * one this receive takes and nothing posted or queued before could take
 * it, reads it straight into the buffer, without a request. Returns 1 when
 * done (status filled), 0 to take the general path. Lock NOT held. */
int cadre__p2p_recv_direct(const struct cadre_p2p_direct *d, cadre_status_t *status);
/* Lock held: request r, handed to the user and not done, moves only when
 * some thread answers: the progress thread's business while the application
 * is away (cadre__eng.pt_wanted; complete_tail uncounts it). */
static inline void cadre__req_wants_pt(struct cadre_request *r)
{
    if (!r->pt_wants) {
        r->pt_wants = 1;
        atomic_fetch_add(&cadre__eng.pt_wanted, 1);
    }
}
/* Progress with the lock already held. */
int cadre__p2p_progress_locked(void);
/* Sleeps until a peer or local thread rings our doorbell, a socket is
 * readable, or timeout_s passes. Lock NOT held. */
void cadre__p2p_sleep(double timeout_s);
/* Wakes the idle progress thread after posting work it should drive. */
void cadre__p2p_kick(void);
/* Checks whether same-node peers are alive (every 100 ms at most). Lock held. */
void cadre__p2p_check_peers(void);
/* Queues or sends a message to world rank `peer`; lock held. payload is
 * kept by reference until sent (req, if any, completes then for EAGER). */
int cadre__p2p_post(int peer, const struct cadre_p2p_hdr *h, const void *payload,
                    struct cadre_request *req);
/* Fails every request that involves world rank `peer`; lock held. */
int cadre__p2p_fail_peer_requests(int peer);
/* Another process's file descriptor fd, or -1 with why filled in
 * (p2p_shm.c: pidfd_getfd, else /proc/PID/fd). */
int cadre__shm_grab_fd(int pid, int fd, char *why, size_t whylen);
/* Whether world rank w failed: it is gone and never said BYE (a rank that
 * finalized is not dead, whatever its connections do afterwards). */
static inline int cadre__p2p_peer_died(int w)
{
    const struct cadre_peer *p = &cadre__eng.peers[w];
    return p->state == PEER_DEAD && !p->said_bye;
}
/* The rank of c that failed (cadre__p2p_peer_died), the lowest if several,
 * or -1; lock held. A quick no while nothing failed. */
int cadre__p2p_comm_dead_member(const struct cadre_comm *c);
/* The rank of world rank w in c, or -1 when w is not a member. */
int cadre__p2p_comm_rank_of(const struct cadre_comm *c, int w);
/* Poisons the communicators of the peers that failed since the last call
 * (cadre__p2p_up.peer_died), lock held. Called where no communicator list is
 * being walked: at the end of progress and of the peer check. */
void cadre__p2p_deaths_settle(void);
/* A rank told us (a POISON saying it failed) that world rank w failed;
 * lock held, maybe inside a walk of the communicators: the next settle
 * fails w here too, after reading what w sent, unless w is of this node
 * (watched through its process) or already gone. So a rank that never
 * talked to a lost host learns it from one that did. */
void cadre__p2p_peer_reported(int w, int by);
/* A receive in RS_WAIT_DATA is done or freed (lock held): its claim ends and
 * the peer's transport stops writing into its buffer (release_dest). */
void cadre__p2p_dest_gone(struct cadre_request *req);
/* Posted receive r (the device path's, into host staging) takes a message
 * its transport pulls whole (CADRE_P2P_PULL: ucx's large messages) at dest,
 * of memory kind mem, instead of its buffer, and only once
 * cadre__p2p_recv_redirect_go(r) was called. Other messages (eager,
 * truncated, of another transport) land in its buffer as before:
 * cadre__p2p_recv_landed says which, once r is done (before it is freed).
 * Lock held. */
enum { PULL_GATE_SHUT, PULL_GATE_OPEN, PULL_GATE_LANDED };
void cadre__p2p_recv_redirect(struct cadre_request *r, void *dest, int mem);
static inline int cadre__p2p_recv_landed(struct cadre_request *r)
{
    return atomic_load_explicit(&r->pull_go, memory_order_acquire) == PULL_GATE_LANDED;
}
/* Whether the device path hands device buffers to the transport of world
 * rank w directly (send: a message of `bytes`; receive, send 0: from w,
 * -1 for any source): w is reached by ucx, which takes them
 * (cadre__p2p_ucx_direct), and a send is one the transport carries with
 * its RTS (above w's eager limit, within its largest payload). Lock not
 * needed (the peers' transports are fixed after cadre_init). */
int cadre__p2p_device_direct(int w, size_t bytes, int send);
/* cadre_isend from device buffer buf (cadre__p2p_device_direct said yes),
 * for the device path: no host code reads buf; its RTS goes to the
 * transport flagged CADRE_P2P_DEVMEM. */
int cadre__p2p_isend_device(const void *buf, size_t count, cadre_datatype_t dt, int dst, int tag,
                            cadre_comm_t comm, cadre_request_t *req);
/* Opens r's gate (any thread, lock not needed); the next progress pass
 * starts the pull. */
void cadre__p2p_recv_redirect_go(struct cadre_request *r);
/* Forgets r's redirection (lock held): the owner of dest goes before r
 * does (r abandoned). A pull already running is the transport's
 * (release_dest waits for it). */
void cadre__p2p_recv_redirect_drop(struct cadre_request *r);
/* Removes an unmatched posted receive (timeout); lock held. */
void cadre__p2p_unpost(struct cadre_request *req);

/* Matching (p2p_match.c); lock held. */
int cadre__p2p_start_send(struct cadre_request *req);
int cadre__p2p_start_recv(struct cadre_request *req);
int cadre__p2p_match_fail_peer(int peer, const char *why);
/* Gives up on a request whose wait timed out; lock held. Frees it or leaves
 * it to the engine, which frees it once the protocol is over. */
void cadre__p2p_abandon(struct cadre_request *req);
/* Before receive r is given up (lock held): waits, progressing, while its
 * sender may still write into its buffer, until its answer or its death
 * (p2p_cma.c). */
void cadre__p2p_cma_settle(struct cadre_request *r);
/* Before send r is given up (lock held): waits, progressing, while a
 * transport still reads its buffer (CADRE_P2P_LATER). */
void cadre__p2p_later_settle(struct cadre_request *r);
/* The single copy's queued reads and writes (p2p_cma.c), moved and
 * reported at the end of every progress pass; lock held. */
void cadre__p2p_cma_flush(void);
/* (Whether any wait there: cadre__eng.cma_queued, a hint without the lock.) */
/* Whether this process has sent to world rank w, which is still there: the
 * peers that get BYE, and the final counts below, at finalize. Lock held. */
static inline int cadre__p2p_talked_to(int w)
{
    const struct cadre_peer *p = &cadre__eng.peers[w];
    return p->tp && p->state == PEER_OK && p->send_seq;
}
void cadre__p2p_match_cleanup(void);

/* Eager-lane tunables shared with the shm transport. A slot holds one
 * message of up to CADRE_SHM_EAGER bytes after its 64-byte header line. Slots
 * are two pages apart, so that every header line starts a page and a message
 * of up to 4032 bytes stays within it, as when slots were one page: a 4 KiB
 * message spills 64 bytes into the second page, which no smaller message
 * touches (and an untouched page of the segment costs no memory). */
#define CADRE_SHM_EAGER 4096
#define CADRE_SHM_SLOT 8192

/* Whether a shared-memory ring holds a message (no lock needed). */
int cadre__p2p_shm_pending(void);

/* p2p_progress.c: the transports' idle hooks (what busy progress does only
 * now and then, such as accepting connections), and the progress thread's
 * body (started by cadre__p2p_init). */
void cadre__p2p_tps_idle(void);
void *cadre__p2p_progress_thread(void *arg);

/* futex helpers */
void cadre__futex_wait(_Atomic uint32_t *word, uint32_t val, double timeout_s);
void cadre__futex_wake(_Atomic uint32_t *word);
/* Rings a doorbell: wakes its sleepers, if any. */
/* The area of every shm segment that the shared-memory collectives use
 * (coll/coll_fast.c), and how to reach it: the area of world rank w as this
 * process maps it (its own for w == rank; NULL when w is not reached through
 * shm), and a wake-up for w's sleeping threads. */
/* What p2p tells the layer above it (the collective layer, coll/coll_poison.c,
 * registers these before cadre__p2p_init; p2p never names that layer). All
 * are called with the engine lock held; a NULL entry is skipped.
 *  poison_in: a POISON message arrived on a collective context;
 *  sigq_in:   a SIGQ message (a peer asks for a call's signature) arrived;
 *  stray_in:  a collective message that no receive took was queued;
 *  peer_died: world rank w failed (cadre__p2p_deaths_settle): every
 *             communicator it belongs to is to be poisoned. */
struct cadre_p2p_upcalls {
    void (*poison_in)(int peer, const struct cadre_p2p_hdr *h);
    void (*sigq_in)(int peer, const struct cadre_p2p_hdr *h);
    void (*stray_in)(int peer, const struct cadre_p2p_hdr *h);
    void (*peer_died)(int w);
};
extern struct cadre_p2p_upcalls cadre__p2p_up;
void cadre__p2p_set_upcalls(const struct cadre_p2p_upcalls *up);
/* A look for a collective message that waits unmatched with tag `tag` on
 * context ctx (takes the lock): returns its sender's rank and signature,
 * or -1. */
int cadre__p2p_probe_coll(uint32_t ctx, int tag, uint64_t *sig);
/* Lock held: fn on every queued message of context ctx that no receive
 * took, in arrival order, until it returns non-zero. */
void cadre__p2p_unexp_each(uint32_t ctx, int (*fn)(void *arg, const struct cadre_p2p_hdr *h),
                           void *arg);

/* cadre_init, after the transports' wireup (p2p_shm_agree.c): every rank
 * that tried shared memory (`tried`) publishes whether it has it (`ok`:
 * its segment and every peer's of its host mapped) and why not; the
 * exchange is a fence of every rank. A rank with shared memory drops the
 * peers without it, and every rank warns of a failure that concerns it,
 * naming the cause first (`tcp`: tcp is there to take over; else
 * cadre_init fails, with cadre__shm_lost's text). */
int cadre__shm_agree(int tried, int ok, int tcp);
/* Why world rank w and this rank lost shared memory between them (a
 * failure to map a segment), or NULL. */
const char *cadre__shm_lost(int w);
void cadre__shm_agree_free(void);
/* For a message on a failed mapping or thread start (ENOMEM, EAGAIN): the
 * errno's name and this rank's address-space limit where it has one, as
 * " (ENOMEM; rank 1's address-space limit, RLIMIT_AS or ulimit -v, is N
 * KiB)"; "" for other errors. A static buffer. */
const char *cadre__p2p_limit_note(int err);

#define CADRE_SHM_COLL_BYTES ((size_t)(16 * 1024 + 64 + 512) << 10)
void *cadre__shm_coll_area(int w);
void cadre__shm_wake(int w);
/* Oversubscribed waits: publishes the CPU this rank waits on, and says
 * whether world rank w (a shared-memory peer) last waited on it too, when
 * polling for it is pointless until this rank yields the core. */
int cadre__shm_same_cpu(int w);

/* The wake socket (p2p_progress.c): opened when this process sleeps in
 * poll() and has peers in shared memory; a peer's doorbell rung with its
 * sleepers in poll() also gets a datagram. */
void cadre__p2p_wake_open(void);
void cadre__p2p_wake_close(void);
void cadre__p2p_wake_peer(struct cadre_p2p_doorbell *b);

/* 1 when this process is registered for MEMBARRIER_CMD_GLOBAL_EXPEDITED
 * (cadre__membarrier_init, at cadre__p2p_init): a membarrier of that kind
 * by any process then orders the memory accesses of this one's running
 * threads. */
extern int cadre__membarrier;
void cadre__membarrier_init(void);
/* Lock not needed. The global expedited barrier: every running thread of
 * every registered process passes a full fence before it returns. */
void cadre__membarrier_all(void);

/* Rings a doorbell after a store the sleepers look for: wakes them when
 * some may sleep on its present seq. Returns 1 when it did (the caller then
 * also owes poll() sleepers their datagram), 0 when nobody sleeps or an
 * earlier ring since they went to sleep woke them already. */
static inline int cadre__bell_ring(struct cadre_p2p_doorbell *b)
{
    /* The store before the look at sleepers, against the sleeper's count
     * before its last look (Dekker): a fence on both sides, or, where the
     * sleeper's side is a membarrier that reaches this process, none here
     * (the asymmetric fence of user-space RCU). A store still in this
     * core's buffer when the sleeper's barrier runs is then flushed before
     * its last look; a look after that barrier sees the count. The fence
     * cost a window of 8-byte messages a locked instruction per message,
     * which waited for the slot's cache line. */
    if (cadre__membarrier && atomic_load_explicit(&b->asym, memory_order_relaxed) &&
        !atomic_load_explicit(&b->fencers, memory_order_relaxed))
        atomic_signal_fence(memory_order_seq_cst);
    else
        atomic_thread_fence(memory_order_seq_cst);
    if (!atomic_load_explicit(&b->sleepers, memory_order_relaxed) ||
        !atomic_load_explicit(&b->armed, memory_order_relaxed) ||
        !atomic_exchange_explicit(&b->armed, 0, memory_order_acquire))
        return 0;
    atomic_fetch_add(&b->seq, 1);
    cadre__futex_wake(&b->seq);
    return 1;
}

/* The bell whose naps this thread orders with a fence, in a series begun by
 * cadre__bell_naps_begin (NULL: none), and how many series it is in. */
extern __thread struct cadre_p2p_doorbell *cadre__bell_fenced
    __attribute__((tls_model("initial-exec")));

/* A thread about to nap more than once on doorbell b (a wait that found
 * nothing to do for a while) may begin a series: b's ringers fence from
 * then on (fencers), after one membarrier that makes sure any ring that
 * did not is seen, and each nap of the series takes a plain fence. Ended,
 * once per begin, by cadre__bell_naps_end; nested series count. */
void cadre__bell_naps_begin(struct cadre_p2p_doorbell *b);
void cadre__bell_naps_end(void);

/* A wait's series on this process's bell, kept in *series (0: none yet):
 * begun before its first nap, ended once when the wait ends. */
static inline void cadre__bell_series_nap(int *series)
{
    if (!*series) {
        *series = 1;
        cadre__bell_naps_begin(cadre__eng.bell);
    }
}

static inline void cadre__bell_series_end(int *series)
{
    if (*series) {
        *series = 0;
        cadre__bell_naps_end();
    }
}

/* A thread about to sleep on doorbell b: counted among its sleepers, and
 * the bell armed, before its last look for work (the fence orders the two),
 * so that a store the look misses finds it to wake. Returns the seq to
 * sleep on (cadre__futex_wait); cadre__bell_sleep_end when awake. */
static inline uint32_t cadre__bell_sleep_begin(struct cadre_p2p_doorbell *b)
{
    atomic_fetch_add(&b->sleepers, 1);
    /* seq before armed: a ring that takes our armed bumps seq after this
     * read, so our wait on v returns. */
    uint32_t v = atomic_load_explicit(&b->seq, memory_order_acquire);
    atomic_store_explicit(&b->armed, 1, memory_order_relaxed);
    /* b is this process's own bell: asym says it is registered; in a
     * series of naps on b its ringers fence (cadre__bell_naps_begin). */
    if (atomic_load_explicit(&b->asym, memory_order_relaxed) && cadre__bell_fenced != b)
        cadre__membarrier_all();
    else
        atomic_thread_fence(memory_order_seq_cst);
    return v;
}

static inline void cadre__bell_sleep_end(struct cadre_p2p_doorbell *b)
{
    atomic_fetch_sub(&b->sleepers, 1);
}

#endif
