/*
 * device_p2p.c - point-to-point on device buffers: staged through pinned host
 * memory (device_proxy.c's design), or, between two processes of one node,
 * by CUDA IPC.
 *
 * CUDA IPC (a device send to a peer for which cadre__gpu_ipc_peer_ok):
 *
 *   sender stream:    event `ready` | wait flag | event `done`
 *   sender proxy:     `ready` seen -> posts the receive of the answer, then
 *                     the descriptor (gpu_ipc_desc: IPC handle of the
 *                     allocation, offset, bytes) as an EAGER message flagged
 *                     CADRE_P2P_DEVICE on the user's context and tag, so it
 *                     matches like any message; answer in -> stores the flag.
 *   receiver stream:  wait flag | copy kernel (from the slot) | event `done`
 *   receiver proxy:   its host receive (into staging) done -> if a descriptor
 *                     matched, maps the sender's allocation (cached) and
 *                     points the slot at it, else at staging; stores the
 *                     flag; `done` seen -> answers the sender.
 *
 *   So the sender's stream waits until the receiver's copy is over (the data
 *   is read in place, never copied through the host): a device send behaves
 *   as a rendezvous, as in NCCL. A nonblocking send leaves `wait flag |
 *   event done` to cadre_wait, on the communicator's stream (nothing, if the
 *   answer is in by then): its stream holds nothing enqueued after it, so
 *   sends and receives may match in any order, also when every stream is on
 *   one hardware queue (CUDA_DEVICE_MAX_CONNECTIONS=1). A blocking send
 *   enqueued before the matching receive on the peer's stream, when the
 *   peer's stream also holds a send to us first, waits forever: use
 *   cadre_sendrecv (which enqueues the receive's copy before the send's
 *   wait) or the nonblocking calls (nonblocking receives have their own
 *   internal stream).
 *
 *   Which side decides: the sender, from what it knows of the peer (same
 *   node, shared memory transport, a GPU it can reach: device_ipc.c), never from
 *   the receive buffer's kind, which it cannot know. A host-buffer receive
 *   that matches a descriptor is handed to the proxy (OP_HOSTRECV), which
 *   copies the data out of the mapped allocation into the user's buffer.
 *
 * Over a UCX that takes CUDA memory (cadre__p2p_device_direct: an off-host
 * peer over ucx, st->direct in p2p_ucx.c), no staging for large messages:
 *
 *   sender stream:    event `ready` | wait flag | event `done`
 *   sender proxy:     `ready` seen -> cadre__p2p_isend_device (the device
 *                     pointer goes to UCX with the RTS); the send done (UCX
 *                     has read the buffer) -> stores the flag.
 *   receiver stream:  event `ready` | wait flag | copy kernel (slot) | `done`
 *   receiver:         its host receive is posted into staging at call time
 *                     (it matches in posting order) and names the user's
 *                     buffer for a pulled message (cadre__p2p_recv_redirect);
 *                     the proxy opens that gate when `ready` has completed,
 *                     so UCX writes the user's buffer only once the stream
 *                     reached the call; host receive done -> the slot copies
 *                     nothing (landed) or from staging (small, truncated or
 *                     eager messages), stores the flag.
 *
 *   The sender's stream thus waits for the receiver's stream to reach the
 *   call, as with CUDA IPC (the same advice holds: cadre_sendrecv or the
 *   nonblocking calls). Never run: no UCX with CUDA was at hand
 *   (tests/gpu/README.md says how to verify it).
 *
 * May call: this folder (the proxy's ops, CUDA IPC, the pools), p2p/ (the
 * engine and requests), runtime/.
 */
#include "config.h"

#if HAVE_CUDA
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device_op.h"

static int p2p_classify(const char *fn, const void *buf, size_t bytes)
{
    char *base;
    size_t size;
    if (!bytes || !cadre__gpu_classify(buf, &base, &size))
        return 0;
    if ((size_t)((const char *)buf - base) + bytes > size)
        return cadre__error(CADRE_ERR_ARG, "%s: the %zu bytes at %p run past the end of their "
                                           "device allocation",
                            fn, bytes, buf);
    return 1;
}

/* The first half of a device send or receive: the op, and what goes on the
 * stream before its wait (the copy to staging and `ready` for a send; the
 * posted host receive for a receive). */
static int p2p_prepare(int kind, const char *fn, void *buf, size_t count, cadre_datatype_t dt,
                       int peer, int tag, struct cadre_comm *comm, int nonblocking,
                       struct gpu_op **out, cudaStream_t *X)
{
    size_t bytes = count * cadre_datatype_size(dt);
    struct gpu_op *op;
    int rc = cadre__gpu_op_new(fn, comm, nonblocking, kind == OP_RECV, &op, X);
    if (rc != CADRE_SUCCESS)
        return rc;
    op->kind = kind;
    op->count = count;
    op->dt = dt;
    op->peer = peer;
    op->tag = tag;
    op->cap = bytes;
    /* An empty message (a zero count of cadre_sendrecv) is staged: no
     * buffer to export, and nothing to copy on either side. */
    if (kind == OP_SEND && bytes && peer != comm->rank &&
        cadre__gpu_ipc_peer_ok(cadre__world_rank(comm, peer)) &&
        cadre__gpu_ipc_export(buf, &op->desc) == CADRE_SUCCESS) {
        op->ipc = 1;
        op->peer_world = cadre__world_rank(comm, peer);
        op->desc.id = cadre__gpu_ipc_next_id();
        op->desc.bytes = bytes;
        cudaError_t e = cudaEventRecord(op->ready, *X);
        if (e != cudaSuccess) {
            cadre__gpu_op_discard(op);
            return cadre__gpu_cuda_fail(e, fn, "cudaEventRecord");
        }
        *out = op;
        return CADRE_SUCCESS;
    }
    /* Off-host over a UCX that takes CUDA memory: a large send's device
     * pointer goes to UCX once the stream reaches the call (`ready`), and
     * the stream waits until UCX has read it. */
    int world = peer == CADRE_ANY_SOURCE ? -1 : cadre__world_rank(comm, peer);
    if (kind == OP_SEND && bytes && peer != comm->rank &&
        cadre__p2p_device_direct(world, bytes, 1)) {
        op->gdr = 1;
        op->dbuf = buf;
        cudaError_t e = cudaEventRecord(op->ready, *X);
        if (e != cudaSuccess) {
            cadre__gpu_op_discard(op);
            return cadre__gpu_cuda_fail(e, fn, "cudaEventRecord");
        }
        *out = op;
        return CADRE_SUCCESS;
    }
    /* A receive that may meet a descriptor: from any source, or from a peer
     * that would send one. Its staging holds the copy slot after the data. */
    size_t slot_off = (bytes + 63) & ~(size_t)63;
    if (kind == OP_RECV &&
        (peer == CADRE_ANY_SOURCE ||
         (peer != comm->rank && cadre__gpu_ipc_peer_ok(cadre__world_rank(comm, peer)))))
        op->ipc = 2;
    /* A receive whose large message UCX may pull straight into buf (the
     * slot then copies nothing), not before its stream reaches the call. */
    if (kind == OP_RECV && bytes && peer != comm->rank && cadre__p2p_device_direct(world, bytes, 0))
        op->gdr = 2;
    if (!(op->stage = cadre__gpu_stage_get(op->ipc || op->gdr ? slot_off + sizeof *op->slot
                                                              : bytes,
                                           fn, &rc))) {
        cadre__gpu_op_discard(op);
        return rc;
    }
    cudaError_t e = cudaSuccess;
    if (kind == OP_SEND) {
        if (bytes)
            e = cudaMemcpyAsync(op->stage->p, buf, bytes, cudaMemcpyDeviceToHost, *X);
        if (e == cudaSuccess)
            e = cudaEventRecord(op->ready, *X);
    } else {
        if (op->ipc || op->gdr) {
            op->slot = (struct gpu_copy_slot *)(op->stage->p + slot_off);
            op->slot->src = NULL;
            op->slot->n = 0;
        }
        if (op->ipc)
            rc = cadre__gpu_ipc_watch(op->stage->p, op);
        /* `ready`: the gate of a pull into buf (the proxy opens it). */
        if (op->gdr && (e = cudaEventRecord(op->ready, *X)) != cudaSuccess)
            rc = cadre__gpu_cuda_fail(e, fn, "cudaEventRecord");
        /* Posted now, into staging: it matches in posting order. */
        if (rc == CADRE_SUCCESS)
            rc = cadre_irecv(op->stage->p, count, dt, peer, tag, cadre__gpu_handle_of(comm),
                             &op->hreq);
        if (rc == CADRE_SUCCESS && op->gdr) {
            /* Matched already, maybe, and its data moving into staging:
             * then it stays there (cadre__p2p_recv_landed says). */
            struct cadre_request *hr = cadre__req_find(op->hreq);
            eng_lock();
            if (hr && !atomic_load(&hr->done))
                cadre__p2p_recv_redirect(hr, buf, CADRE_P2P_MEM_CUDA);
            eng_unlock();
        }
        if (rc != CADRE_SUCCESS && op->ipc)
            cadre__gpu_ipc_unwatch(op->stage->p);
        e = cudaSuccess; /* a failure is in rc */
        op->state = ST_RUNNING;
    }
    if (e != cudaSuccess)
        rc = cadre__gpu_cuda_fail(e, fn, "enqueueing the copy to staging");
    if (rc != CADRE_SUCCESS) {
        cadre__gpu_op_discard(op);
        return rc;
    }
    *out = op;
    return CADRE_SUCCESS;
}

/* The second half: the wait, the copy out of staging (or from the slot),
 * `done`, the request, and the hand-over to the proxy. */
static int p2p_finish(struct gpu_op *op, void *buf, cudaStream_t X, cadre_request_t *req)
{
    size_t bytes = op->cap;
    cudaError_t e = cudaSuccess;
    /* A nonblocking CUDA IPC send waits for the receiver's copy only where
     * cadre_wait puts that wait, not on its stream now: a later send's
     * `ready` behind it could be what the receiver's copy waits for (two
     * isends against irecvs in the other order), and with every stream on
     * one hardware queue (CUDA_DEVICE_MAX_CONNECTIONS=1) so could the
     * receives enqueued after it. */
    int lazy = op->kind == OP_SEND && op->ipc == 1 && req;
    int rc = lazy ? CADRE_SUCCESS : cadre__gpu_enqueue_wait(op, X);
    if (rc == CADRE_SUCCESS && op->kind == OP_RECV && bytes) {
        if (op->ipc || op->gdr)
            e = (cudaError_t)cadre__gpu_copy_slot(buf, op->slot, bytes, X);
        else
            e = cudaMemcpyAsync(buf, op->stage->p, bytes, cudaMemcpyHostToDevice, X);
    }
    if (rc == CADRE_SUCCESS && e == cudaSuccess && !lazy)
        e = cudaEventRecord(op->done, X);
    if (lazy)
        atomic_store(&op->lazy, LAZY_OPEN);
    if (rc == CADRE_SUCCESS && e != cudaSuccess)
        rc = cadre__gpu_cuda_fail(e, op->fn, "enqueueing on the stream");
    if (rc == CADRE_SUCCESS && req)
        rc = cadre__gpu_attach_request(op, req);
    if (rc != CADRE_SUCCESS) {
        /* A posted receive must not outlive the op: give it a moment, then
         * abandon it (its staging stays with the engine until then). */
        struct cadre_request *hr = cadre__req_find(op->hreq);
        if (hr) {
            eng_lock();
            if (op->ipc)
                cadre__gpu_ipc_unwatch(op->stage->p);
            cadre__p2p_recv_redirect_drop(hr); /* buf is the user's again */
            cadre__p2p_abandon(hr);
            eng_unlock();
            op->hreq = CADRE_REQUEST_NULL;
            op->stage = NULL; /* may still be written: leak rather than reuse */
        }
        cadre__gpu_op_discard(op);
        return rc;
    }
    return cadre__gpu_submit(op);
}

static int p2p_op(int kind, const char *fn, void *buf, size_t count, cadre_datatype_t dt,
                  int peer, int tag, struct cadre_comm *comm, cadre_request_t *req)
{
    struct gpu_op *op;
    cudaStream_t X;
    int rc = p2p_prepare(kind, fn, buf, count, dt, peer, tag, comm, req != NULL, &op, &X);
    return rc == CADRE_SUCCESS ? p2p_finish(op, buf, X, req) : rc;
}

int cadre__gpu_send(const void *buf, size_t count, cadre_datatype_t dt, int dst, int tag,
                    struct cadre_comm *comm, cadre_request_t *req)
{
    const char *fn = req ? "cadre_isend" : "cadre_send";
    int k = p2p_classify(fn, buf, count * cadre_datatype_size(dt));
    if (k <= 0)
        return k == 0 ? CADRE__GPU_NOT_MINE : k;
    return p2p_op(OP_SEND, fn, (void *)buf, count, dt, dst, tag, comm, req);
}

int cadre__gpu_recv(void *buf, size_t count, cadre_datatype_t dt, int src, int tag,
                    struct cadre_comm *comm, cadre_request_t *req, cadre_status_t *status)
{
    const char *fn = req ? "cadre_irecv" : "cadre_recv";
    int k = p2p_classify(fn, buf, count * cadre_datatype_size(dt));
    if (k <= 0)
        return k == 0 ? CADRE__GPU_NOT_MINE : k;
    int rc = p2p_op(OP_RECV, fn, buf, count, dt, src, tag, comm, req);
    /* The data arrives later: the status says what was asked for. */
    if (rc == CADRE_SUCCESS && status)
        *status = (cadre_status_t){.source = src, .tag = tag, .count = count};
    return rc;
}

int cadre__gpu_sendrecv(const void *sendbuf, size_t sendcount, int dst, int sendtag,
                        void *recvbuf, size_t recvcount, int src, int recvtag, cadre_datatype_t dt,
                        struct cadre_comm *comm, cadre_status_t *status)
{
    const char *fn = "cadre_sendrecv";
    size_t es = cadre_datatype_size(dt);
    int ks = p2p_classify(fn, sendbuf, sendcount * es);
    int kr = p2p_classify(fn, recvbuf, recvcount * es);
    if (ks < 0 || kr < 0)
        return ks < 0 ? ks : kr;
    if (!ks && !kr)
        return CADRE__GPU_NOT_MINE;
    if ((sendcount && recvcount && ks != kr))
        return cadre__error(CADRE_ERR_ARG,
                            "%s: rank %d passed a host buffer and a device buffer; one call takes "
                            "buffers of one kind",
                            fn, comm->rank);
    /* The receive is posted at once; the send goes out when its data is
     * ready. On the stream the receive's copy comes before the send's wait:
     * a CUDA IPC send waits for the peer's copy, and the peer's sendrecv
     * does the same, so neither copy may sit behind a send's wait. A side
     * with a zero count still sends or receives its empty message, as on
     * host buffers: the peer's receive of it must match, and the peer's
     * empty message must not be left for a later receive. */
    struct gpu_op *sop = NULL, *rop = NULL;
    cudaStream_t X = NULL;
    int rc = p2p_prepare(OP_SEND, fn, (void *)sendbuf, sendcount, dt, dst, sendtag, comm, 0, &sop,
                         &X);
    if (rc == CADRE_SUCCESS) {
        rc = p2p_prepare(OP_RECV, fn, recvbuf, recvcount, dt, src, recvtag, comm, 0, &rop, &X);
        if (rc == CADRE_SUCCESS)
            rc = p2p_finish(rop, recvbuf, X, NULL);
    }
    if (sop) {
        if (rc == CADRE_SUCCESS) {
            rc = p2p_finish(sop, (void *)sendbuf, X, NULL);
        } else {
            /* Its `ready` is on the stream, its wait is not: drop it. */
            cadre__gpu_op_discard(sop);
        }
    }
    if (rc == CADRE_SUCCESS && status)
        *status = (cadre_status_t){.source = src, .tag = recvtag, .count = recvcount};
    return rc;
}

/* ---- a receive whose message UCX may pull into its buffer (the proxy) -------------- */
/* A receive whose pulled message may land in the user's device buffer
 * (op->gdr 2): its gate opens once its stream has reached the call
 * (`ready`), never before; 1 when its host receive is done (*rc, *st its
 * outcome, op->landed where the data went), else 0. The host receive is
 * only tested once done (cadre_test frees it), so that where its data went
 * is read first. */
int cadre__gpu_gdr_recv_test(struct gpu_op *op, int *rc, cadre_status_t *st)
{
    struct cadre_request *hr = cadre__req_find(op->hreq);
    if (hr && !op->gdr_go) {
        cudaError_t e = cudaEventQuery(op->ready);
        if (e == cudaSuccess) {
            op->gdr_go = 1;
            cadre__p2p_recv_redirect_go(hr);
        } else if (e != cudaErrorNotReady) {
            /* The stream failed before the call: nothing may write the
             * user's buffer; the message lands in staging. */
            cudaGetLastError();
            op->gdr_go = 1;
            eng_lock();
            if (!atomic_load(&hr->done))
                cadre__p2p_recv_redirect_drop(hr);
            eng_unlock();
            char m[200];
            snprintf(m, sizeof m, "the stream failed before the operation: %s",
                     cudaGetErrorString(e));
            cadre__gpu_record_failure(op, CADRE_ERR_DEVICE, m);
        }
    }
    if (hr && !atomic_load_explicit(&hr->done, memory_order_acquire)) {
        cadre__p2p_progress();
        if (!atomic_load_explicit(&hr->done, memory_order_acquire))
            return 0;
    }
    op->landed = hr && cadre__p2p_recv_landed(hr);
    int done = 0;
    *rc = cadre_test(&op->hreq, &done, st);
    return done || *rc != CADRE_SUCCESS;
}

/* ---- a descriptor matched a receive (engine lock held) ---------------------------- */
void cadre__gpu_deliver(struct cadre_request *r, const struct cadre_p2p_hdr *h, int peer,
                        const void *data)
{
    struct gpu_ipc_desc d;
    r->peer_world = peer;
    r->status.source = h->src;
    r->status.tag = h->tag;
    if (h->len != sizeof d) {
        r->status.count = 0;
        cadre__req_complete(r, CADRE_ERR_INTERNAL,
                            "%s: rank %d sent a device-buffer descriptor of %llu bytes", r->op,
                            peer, (unsigned long long)h->len);
        return;
    }
    memcpy(&d, data, sizeof d);
    size_t got = d.bytes < r->bytes ? d.bytes : r->bytes;
    r->status.count = r->elsize ? got / r->elsize : got;
    r->msg_len = d.bytes;
    struct gpu_op *op = cadre__gpu_ipc_watched(r->buf);
    if (op) {
        /* A device receive: its proxy maps and its stream copies. */
        op->desc = d;
        op->peer_world = peer;
        atomic_store(&op->got_desc, 1);
        if (d.bytes > r->bytes) {
            char got[64], room[64];
            cadre__elements_text(got, sizeof got, (size_t)d.bytes, r->elsize);
            cadre__elements_text(room, sizeof room, r->bytes, r->elsize);
            cadre__req_complete(r, CADRE_ERR_TRUNCATE,
                                "%s: message of %s from rank %d tag %d is longer than the "
                                "receive buffer of %s",
                                r->op, got, (int)h->src, (int)h->tag, room);
        } else
            cadre__req_complete(r, CADRE_SUCCESS, NULL);
        return;
    }
    /* A host receive: the proxy copies into it, then completes it. */
    struct gpu_op *hop = calloc(1, sizeof *hop);
    struct gpu_comm *gc = r->comm ? cadre__gpu_comm(r->comm) : NULL;
    if (!hop || !gc) {
        /* The sender's stream stays blocked: it fails at CADRE_TIMEOUT there. */
        free(hop);
        cadre__req_complete(r, CADRE_ERR_NOMEM, "%s: no memory for rank %d's device buffer",
                            r->op, peer);
        return;
    }
    hop->kind = OP_HOSTRECV;
    hop->state = ST_RUNNING;
    hop->fn = r->op;
    hop->comm = r->comm;
    hop->gc = gc;
    hop->desc = d;
    hop->peer_world = peer;
    hop->host_r = r;
    atomic_init(&hop->refs, 1);
    r->state = RS_WAIT_DATA;
    if (cadre__gpu_submit(hop) != CADRE_SUCCESS) {
        free(hop);
        cadre__req_complete(r, CADRE_ERR_INTERNAL, "%s: %s", r->op, cadre_last_error());
    }
}
#endif /* HAVE_CUDA */
