/* Large messages between processes of one node in one copy, with
 * cross-memory attach (process_vm_readv/writev), both cores copying:
 *
 *   sender                          receiver
 *   RTS, flag CMA, rreq = address ->  matched, on a point-to-point context:
 *                                 <-  CTS, flags CMA|SPLIT: write bytes ctx..len
 *                                     to my address off (the upper half)
 *   writes the upper half             reads the lower half in place
 *                                 <-  CTS, flag CMA: read
 *   send complete; DONE           ->  receive complete
 *
 * A collective's receive (odd context) reads the whole message itself and
 * grants nothing. The receive completes only on DONE: a send given up in the
 * meantime (its wait timed out) may have had its buffer rewritten while it
 * was read, and then answers NACK instead, which fails the receive. A receive
 * that granted a write is never given back to its user while the sender may
 * still write: giving it up waits for the sender's answer or its death
 * (cadre__p2p_cma_settle). A receiver that cannot read before granting
 * anything answers a plain CTS and the message goes through the shared-memory
 * pipeline (p2p_shm.c), so the sender always takes both answers.
 *
 * Against the pipeline, which copies every byte twice (into the ring on the
 * sender's core, out of it on the receiver's), each byte is copied once, and
 * the two cores share the copying. A window of 64 isends (bench/window.sh),
 * c2c about 110 ns: into distinct buffers, 9-11 GB/s with the pipeline,
 * 12-18 with the receiver reading all, 15-27 split, at 64 KiB to 1 MiB; 2 to
 * 64 MiB split 11.7-16.3 against 7.8-12.7; into one buffer, 2 to 64 MiB,
 * 28-38 against 10-13. (With the two vCPUs far apart, c2c 1.1-1.4 us, and a
 * loaded machine, the pipeline was ahead from 4 MiB into distinct buffers:
 * CADRE_SHM_CMA_MAX.) A lone send keeps the pipeline (cadre__p2p_cma_offer).
 *
 * May call: this folder, runtime/. */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>

#include "p2p_engine.h"
#include "p2p_match.h"

/* r->cma of a receive (a send's is 1 once offered, then as a receive's
 * but for CMA_READ): */
enum { CMA_NONE, CMA_READ, CMA_GRANTED, CMA_FAILED, CMA_QUEUED };

/* Copies of the split that wait in a queue for one system call: a window's
 * messages come in bursts (a drain of the ring holds many RTS, many grants),
 * and each process_vm_readv/writev costs a fixed part (finding the task,
 * its mm, the access check; on the sender also the pidfd poll) besides the
 * per-page one. Measured on 4 MiB of 32 KiB pieces between two processes:
 * 8 per call, readv 7.6-8.0 -> 8.4-8.9 GB/s, writev 7.4-8.4 -> 8.9-9.4. The
 * receiver queues its reads after granting (so all the grants of a drain go
 * out before it copies), the sender its writes; both queues are emptied at
 * the end of every progress pass (cadre__p2p_cma_flush), the sender's also
 * before a read report, which must find its write done. A job names its
 * request by id and is dropped if that is no longer waiting for it. */
#define CMA_BATCH 64
#define CMA_BATCH_BYTES ((size_t)4 << 20)
struct cma_job {
    uint64_t id, remote;
    char *local;
    size_t n;
};
struct cma_queue {
    int peer, n;
    size_t bytes;
    struct cma_job job[CMA_BATCH];
};
static struct cma_queue reads, writes;
static void flush_reads(void);
static void flush_writes(void);

/* Tells the progress loop whether it has work here (cadre__p2p_progress
 * skips the lock when nothing else waits). */
static void queued_note(void)
{
    __atomic_store_n(&cadre__eng.cma_queued, reads.n + writes.n, __ATOMIC_RELAXED);
}

/* 1 once a read failed for want of permission or of the system call: no
 * more offers are taken, every message then goes through the pipeline. */
static int cma_broken;
static size_t cma_min = (size_t)-1, cma_max; /* CADRE_SHM_CMA_MIN/MAX, read on first use */

int cadre__p2p_cma_offer(int w, const struct cadre_request *r)
{
    struct cadre_peer *p = &cadre__eng.peers[w];
    if (cma_min == (size_t)-1) {
        long lo = cadre__config_int(CADRE_CFG_SHM_CMA_MIN);
        long hi = cadre__config_int(CADRE_CFG_SHM_CMA_MAX);
        cma_min = lo > 0 ? (size_t)lo : 0;
        cma_max = hi > 0 ? (size_t)hi : SIZE_MAX;
    }
    /* Only behind another large send still in flight to the peer: a window
     * (osu_bw's loop). A lone send, a ping-pong's, keeps the pipeline, where
     * each user buffer stays in its own core's cache: read in place, the
     * buffer a ping-pong answers from crosses between the cores both ways
     * (256 KiB to 1 MiB in place measured 20-40% slower read in place). */
    const struct cadre_request *prev = p->last_rndv ? cadre__req_lookup(p->last_rndv) : NULL;
    p->last_rndv = r->id;
    /* Where the node's ranks outnumber its cores the pipeline's second copy
     * is paid for out of the same cores: every large message is read in
     * place. 2 hosts x 2 ranks on 2 cores, 16 MiB allreduce (perf, all
     * cores): user-space copies 26% of the cycles with the pipeline, 10%
     * read in place; the time moved within the noise of that machine. */
    int window = prev && prev != r && prev->kind == REQ_SEND && prev->state != RS_DONE;
    return cma_min && r->bytes >= cma_min && r->bytes <= cma_max && !cma_broken &&
           p->tp == &cadre__p2p_shm && p->pid > 0 && (window || cadre__eng.oversubscribed);
}

/* Whether world rank w is a process of this node we may copy with; with
 * `exited`, also asks its pidfd whether it exited (a system call): before we
 * write, so that a pid taken again by another process is never written. */
static int peer_alive(int w, int exited)
{
    const struct cadre_peer *p = &cadre__eng.peers[w];
    if (p->tp != &cadre__p2p_shm || p->pid <= 0 || p->state != PEER_OK)
        return 0;
    struct pollfd pf = {p->pidfd, POLLIN, 0};
    return !(exited && p->pidfd >= 0 && poll(&pf, 1, 0) == 1);
}

int cadre__cma(int w, void *local, uint64_t remote, size_t n, int write)
{
    pid_t pid = cadre__eng.peers[w].pid;
    char *l = local;
    while (n) {
        struct iovec lv = {l, n}, rv = {(void *)(uintptr_t)remote, n};
        ssize_t got = write ? process_vm_writev(pid, &lv, 1, &rv, 1, 0)
                            : process_vm_readv(pid, &lv, 1, &rv, 1, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return got < 0 ? errno : EIO;
        l += got;
        remote += (uint64_t)got;
        n -= (size_t)got;
    }
    return 0;
}

/* A copy refused for want of permission or of the system call turns the
 * single copy off for good. */
static void cma_refused(int w, int e, int write)
{
    if ((e == EPERM || e == ENOSYS) && !cma_broken) {
        cma_broken = 1;
        CADRE_WARN(P2P, "process_vm_%s with rank %d: %s; large messages in shared "
                        "memory go through the pipeline from now on",
                   write ? "writev" : "readv", w, strerror(e));
    }
}

/* cadre__cma for a message. */
static int cma_copy(int w, void *local, uint64_t remote, size_t n, int write)
{
    int e = cadre__cma(w, local, remote, n, write);
    cma_refused(w, e, write);
    return e;
}

/* Moves n jobs (each n > 0) between us and world rank w in as few system
 * calls as the kernel allows (one when nothing fails); err[i]: job i's
 * errno, 0 when it moved whole. A call moves a prefix of the bytes asked
 * for: the next one starts where it stopped, and a call that fails fails
 * the job it starts in. */
static void cma_copy_jobs(int w, const struct cma_job *j, int n, int write, int *err)
{
    pid_t pid = cadre__eng.peers[w].pid;
    struct iovec lv[CMA_BATCH], rv[CMA_BATCH];
    int i = 0;
    size_t done = 0; /* bytes of job i moved */
    while (i < n) {
        int k = 0;
        for (int m = i; m < n; m++, k++) {
            size_t off = m == i ? done : 0;
            lv[k] = (struct iovec){j[m].local + off, j[m].n - off};
            rv[k] = (struct iovec){(void *)(uintptr_t)(j[m].remote + off), j[m].n - off};
        }
        ssize_t got = write ? process_vm_writev(pid, lv, (unsigned long)k, rv, (unsigned long)k, 0)
                            : process_vm_readv(pid, lv, (unsigned long)k, rv, (unsigned long)k, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            err[i] = got < 0 ? errno : EIO;
            cma_refused(w, err[i], write);
            i++;
            done = 0;
            continue;
        }
        for (size_t g = (size_t)got; g && i < n;) {
            size_t left = j[i].n - done;
            if (g < left) {
                done += g;
                break;
            }
            g -= left;
            err[i++] = 0;
            done = 0;
        }
    }
}

/* Adds a job to q (the peer's queue); a full queue, or one for another
 * peer, is emptied first. */
static void cma_queue_add(struct cma_queue *q, int peer, const struct cma_job *j)
{
    if (q->n && (q->peer != peer || q->n == CMA_BATCH || q->bytes >= CMA_BATCH_BYTES)) {
        if (q == &reads)
            flush_reads();
        else
            flush_writes();
    }
    q->peer = peer;
    q->job[q->n++] = *j;
    q->bytes += j->n;
    queued_note();
}

/* A receive's answer to the sender (a grant or a read report); one that
 * cannot be sent fails the receive. */
static int answer(struct cadre_request *r, int peer, const struct cadre_p2p_hdr *c)
{
    int rc = cadre__p2p_post(peer, c, NULL, NULL);
    if (rc != CADRE_SUCCESS)
        cadre__req_complete(r, rc, "%s: cannot answer rank %d: %s", r->op, peer,
                            cadre_last_error());
    return rc;
}

/* Empties q into j and rq: the jobs whose request (of kind, in state) still
 * waits for them, in order. One that completed meanwhile (its peer died)
 * may already be its user's again. */
static int queue_take(struct cma_queue *q, int kind, int state, struct cma_job *j,
                      struct cadre_request **rq)
{
    int n = 0;
    for (int i = 0; i < q->n; i++) {
        struct cadre_request *r = cadre__req_lookup(q->job[i].id);
        if (r && r->kind == kind && r->state == state && r->cma == CMA_QUEUED &&
            r->peer_world == q->peer) {
            rq[n] = r;
            j[n++] = q->job[i];
        }
    }
    q->n = 0;
    q->bytes = 0;
    queued_note();
    return n;
}

/* A queued copy's outcome on its request; what: "read the message of". */
static void job_result(struct cadre_request *r, int e, int peer, const char *what)
{
    r->cma = e ? CMA_FAILED : CMA_GRANTED;
    if (e)
        snprintf(r->errmsg, sizeof r->errmsg, "%s: cannot %s rank %d: %s", r->op, what, peer,
                 e == EIO ? "no progress" : strerror(e));
}

int cadre__p2p_cma_recv(struct cadre_request *r, int peer, const struct cadre_p2p_hdr *h)
{
    if (cma_broken || !peer_alive(peer, 0))
        return 0;
    struct cadre_p2p_hdr c = {.type = CADRE_P2P_CTS, .flags = CADRE_P2P_CMA, .len = r->xfer,
                              .sreq = h->sreq, .rreq = r->id};
    /* The sender writes the upper half while we read the lower; a page
     * boundary between them (pages are what the kernel pins). */
    size_t k = (r->xfer / 2) & ~(size_t)4095;
    if ((r->ctx & 1) || !k) {
        int e = cma_copy(peer, r->buf, h->rreq, r->xfer, 0);
        if (e)
            return 0;
        r->cma = CMA_READ;
    } else {
        /* Granted, then read: the read fails only if the sender's buffer is
         * bad or the sender is gone; the receive then fails on the answer. */
        struct cadre_p2p_hdr g = c;
        g.flags |= CADRE_P2P_SPLIT;
        g.ctx = (uint32_t)k;
        g.off = (uint64_t)(uintptr_t)(r->buf + k);
        if (answer(r, peer, &g) != CADRE_SUCCESS)
            return 1;
        /* The read, and the report after it, wait in the queue. */
        r->cma = CMA_QUEUED;
        r->moved = r->xfer;
        cma_queue_add(&reads, peer, &(struct cma_job){r->id, h->rreq, r->buf, k});
        return 1;
    }
    r->moved = r->xfer;
    answer(r, peer, &c);
    return 1;
}

/* The queued reads in one system call, then their reports. */
static void flush_reads(void)
{
    struct cma_job j[CMA_BATCH];
    struct cadre_request *rs[CMA_BATCH];
    int err[CMA_BATCH], peer = reads.peer;
    int n = queue_take(&reads, REQ_RECV, RS_WAIT_DATA, j, rs);
    if (!n)
        return;
    cma_copy_jobs(peer, j, n, 0, err);
    for (int i = 0; i < n; i++) {
        struct cadre_request *r = rs[i];
        job_result(r, err[i], peer, "read the message of");
        struct cadre_p2p_hdr c = {.type = CADRE_P2P_CTS, .flags = CADRE_P2P_CMA, .len = r->xfer,
                                  .sreq = r->remote, .rreq = r->id};
        answer(r, peer, &c);
    }
}

/* The queued writes in one system call, after one look that the peer is
 * still the process we were given (its pidfd). */
static void flush_writes(void)
{
    struct cma_job j[CMA_BATCH];
    struct cadre_request *ss[CMA_BATCH];
    int err[CMA_BATCH], peer = writes.peer;
    int taken = queue_take(&writes, REQ_SEND, RS_WAIT_CTS, j, ss), n = 0;
    for (int i = 0; i < taken; i++) {
        if (ss[i]->abandoned) {
            ss[i]->cma = 1; /* not written: the read report that follows answers NACK */
            continue;
        }
        ss[n] = ss[i];
        j[n++] = j[i];
    }
    if (!n)
        return;
    if (peer_alive(peer, 1))
        cma_copy_jobs(peer, j, n, 1, err);
    else
        for (int i = 0; i < n; i++)
            err[i] = ESRCH;
    for (int i = 0; i < n; i++)
        job_result(ss[i], err[i], peer, "write the message into");
}

void cadre__p2p_cma_flush(void)
{
    if (reads.n)
        flush_reads();
    if (writes.n)
        flush_writes();
}

void cadre__p2p_cma_done(int peer, const struct cadre_p2p_hdr *h)
{
    struct cadre_request *r = cadre__req_lookup(h->rreq);
    /* A DONE comes only after our read report: never while the read waits. */
    if (!r || r->kind != REQ_RECV || r->state != RS_WAIT_DATA || !r->cma || r->cma == CMA_QUEUED ||
        r->peer_world != peer || r->remote != h->sreq) {
        CADRE_WARN(P2P, "ignoring a DONE from rank %d for unknown receive %llx", peer,
                   (unsigned long long)h->rreq);
        return;
    }
    if (r->cma == CMA_FAILED)
        cadre__req_complete(r, CADRE_ERR_INTERNAL, NULL); /* errmsg says why already */
    else
        cadre__p2p_complete_recv(r);
}

/* Our send's receiver grants us bytes ctx..len of the message to write at
 * its address off (CTS flagged CMA and SPLIT); its read report follows. */
static void cma_grant(int peer, const struct cadre_p2p_hdr *h)
{
    struct cadre_request *s = cadre__req_lookup(h->sreq);
    if (!s || s->kind != REQ_SEND || s->state != RS_WAIT_CTS || s->cma != 1 ||
        s->peer_world != peer || h->len > s->bytes || h->ctx > h->len) {
        CADRE_WARN(P2P, "ignoring a write grant from rank %d for unknown send %llx", peer,
                   (unsigned long long)h->sreq);
        return;
    }
    if (s->abandoned)
        return; /* the read report that follows answers NACK */
    if (h->len == h->ctx) {
        s->cma = CMA_GRANTED; /* nothing to write */
        return;
    }
    s->cma = CMA_QUEUED;
    cma_queue_add(&writes, peer, &(struct cma_job){s->id, h->off, s->buf + h->ctx, h->len - h->ctx});
}

/* The receiver read our buffer (a CTS flagged CMA). */
void cadre__p2p_cma_fin(int peer, const struct cadre_p2p_hdr *h)
{
    if (h->flags & CADRE_P2P_SPLIT) {
        cma_grant(peer, h);
        return;
    }
    /* The write the receiver granted before this report is done first. */
    if (writes.n)
        flush_writes();
    struct cadre_request *s = cadre__req_lookup(h->sreq);
    if (!s || s->kind != REQ_SEND || s->state != RS_WAIT_CTS || !s->cma ||
        s->peer_world != peer || h->len > s->bytes) {
        CADRE_WARN(P2P, "ignoring a read report from rank %d for unknown send %llx", peer,
                   (unsigned long long)h->sreq);
        return;
    }
    if (s->abandoned || s->cma == CMA_FAILED) {
        /* Our user may have rewritten the buffer during the read, or our
         * half did not arrive: the receive must fail. */
        struct cadre_p2p_hdr n = {.type = CADRE_P2P_NACK, .sreq = h->sreq, .rreq = h->rreq};
        cadre__p2p_post(peer, &n, NULL, NULL);
        if (s->abandoned)
            cadre__req_complete(s, CADRE_ERR_TIMEOUT, NULL);
        else
            cadre__req_complete(s, CADRE_ERR_INTERNAL, NULL); /* errmsg says why already */
        return;
    }
    struct cadre_p2p_hdr d = {.type = CADRE_P2P_DONE, .sreq = h->sreq, .rreq = h->rreq};
    int rc = cadre__p2p_post(peer, &d, NULL, NULL);
    if (rc != CADRE_SUCCESS)
        cadre__req_complete(s, rc, "%s: %s", s->op, cadre_last_error());
    else
        cadre__req_complete(s, CADRE_SUCCESS, NULL);
}

void cadre__p2p_cma_settle(struct cadre_request *r)
{
    /* Lock held: progress here, so the sender's answer is taken; a receive
     * that granted nothing, or whose sender is gone, has nothing to wait for. */
    while (r->kind == REQ_RECV && r->state == RS_WAIT_DATA && r->cma != CMA_NONE &&
           r->cma != CMA_READ && !atomic_load(&r->done) && peer_alive(r->peer_world, 1)) {
        cadre__p2p_progress_locked();
        sched_yield();
    }
}
