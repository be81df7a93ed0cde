/* Large messages between processes of one node in one copy: the receiver
 * reads the sender's buffer with process_vm_readv (cross-memory attach).
 *
 *   sender                          receiver
 *   RTS, flag CMA, rreq = address ->  matched: reads len bytes into place
 *                                 <-  CTS, flag CMA (len bytes read)
 *   send complete; DONE           ->  receive complete
 *
 * The receive completes only on DONE: a send given up in the meantime (its
 * wait timed out, its collective failed) may have had its buffer rewritten
 * while it was read, and then answers NACK instead, which fails the receive.
 * A receiver that cannot read (another user's process, a dead one, a bad
 * address) answers a plain CTS and the message goes through the shared-memory
 * pipeline (p2p_shm.c) as before, so the sender always takes both answers.
 *
 * Against the pipeline, which copies every byte twice (into the ring on the
 * sender's core, out of it on the receiver's), one copy on the receiver's
 * core moves every line once between the cores: a window of 64 isends into
 * distinct buffers (bench/window.sh) went from 9-11 to 12-18 GB/s at 64 KiB
 * to 1 MiB. From 2 MiB, where such a window no longer fits the cache, the
 * pipeline was ahead (7.8-9.8 against 4.3-8.6 GB/s), hence CADRE_SHM_CMA_MAX;
 * a lone send keeps the pipeline too (cadre__p2p_cma_offer).
 *
 * May call: this folder, runtime/. */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>

#include "p2p_engine.h"
#include "p2p_match.h"

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
        cma_max = hi > 0 ? (size_t)hi : 0;
    }
    /* Only behind another large send still in flight to the peer: a window
     * (osu_bw's loop). A lone send, a ping-pong's, keeps the pipeline, where
     * each user buffer stays in its own core's cache: read in place, the
     * buffer a ping-pong answers from crosses between the cores both ways
     * (256 KiB to 1 MiB in place measured 20-40% slower read in place). */
    const struct cadre_request *prev = p->last_rndv ? cadre__req_lookup(p->last_rndv) : NULL;
    p->last_rndv = r->id;
    return cma_min && r->bytes >= cma_min && r->bytes <= cma_max && !cma_broken &&
           p->tp == &cadre__p2p_shm && p->pid > 0 && prev && prev != r && prev->kind == REQ_SEND &&
           prev->state != RS_DONE;
}

int cadre__p2p_cma_read(int w, void *dst, uint64_t src, size_t n)
{
    const struct cadre_peer *p = &cadre__eng.peers[w];
    if (cma_broken || p->tp != &cadre__p2p_shm || p->pid <= 0 || p->state != PEER_OK)
        return -1;
    char *d = dst;
    while (n) {
        struct iovec lv = {d, n}, rv = {(void *)(uintptr_t)src, n};
        ssize_t got = process_vm_readv(p->pid, &lv, 1, &rv, 1, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            if (got < 0 && (errno == EPERM || errno == ENOSYS)) {
                cma_broken = 1;
                CADRE_WARN(P2P, "process_vm_readv from rank %d: %s; large messages in shared "
                                "memory go through the pipeline from now on",
                           w, strerror(errno));
            }
            return -1;
        }
        d += got;
        src += (uint64_t)got;
        n -= (size_t)got;
    }
    return 0;
}

/* The receiver read our buffer (a CTS flagged CMA). */
void cadre__p2p_cma_fin(int peer, const struct cadre_p2p_hdr *h)
{
    struct cadre_request *s = cadre__req_lookup(h->sreq);
    if (!s || s->kind != REQ_SEND || s->state != RS_WAIT_CTS || !s->cma ||
        s->peer_world != peer || h->len > s->bytes) {
        CADRE_WARN(P2P, "ignoring a read report from rank %d for unknown send %llx", peer,
                   (unsigned long long)h->sreq);
        return;
    }
    if (s->abandoned) {
        /* Our user may have rewritten the buffer during the read. */
        struct cadre_p2p_hdr n = {.type = CADRE_P2P_NACK, .sreq = h->sreq, .rreq = h->rreq};
        cadre__p2p_post(peer, &n, NULL, NULL);
        cadre__req_complete(s, CADRE_ERR_TIMEOUT, NULL);
        return;
    }
    struct cadre_p2p_hdr d = {.type = CADRE_P2P_DONE, .sreq = h->sreq, .rreq = h->rreq};
    int rc = cadre__p2p_post(peer, &d, NULL, NULL);
    if (rc != CADRE_SUCCESS)
        cadre__req_complete(s, rc, "%s: %s", s->op, cadre_last_error());
    else
        cadre__req_complete(s, CADRE_SUCCESS, NULL);
}
