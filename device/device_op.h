/*
 * device_op.h - point-to-point on device buffers: the entry points p2p/
 * calls through runtime/runtime_device.h's table (device_p2p.c,
 * device_op.c), and the device operations run by the proxy thread
 * (device_proxy.c, device_op.c) that the collectives' device executor
 * (device_coll.c, device_direct_call.c) uses too; the CUDA IPC transport
 * (device_ipc.c).
 */
#ifndef CADRE_DEVICE_OP_H
#define CADRE_DEVICE_OP_H

#include <stdatomic.h>

#include "device/device_mem.h"
#include "runtime/runtime.h"

struct cadre_p2p_hdr;
struct cadre_request;

/* Point-to-point on comm (validated), peer in comm ranks; req NULL for the
 * blocking calls. */
int cadre__gpu_send(const void *buf, size_t count, cadre_datatype_t dt, int dst, int tag,
                    struct cadre_comm *comm, cadre_request_t *req);
int cadre__gpu_recv(void *buf, size_t count, cadre_datatype_t dt, int src, int tag,
                    struct cadre_comm *comm, cadre_request_t *req, cadre_status_t *status);
int cadre__gpu_sendrecv(const void *sendbuf, size_t sendcount, int dst, int sendtag,
                        void *recvbuf, size_t recvcount, int src, int recvtag, cadre_datatype_t dt,
                        struct cadre_comm *comm, cadre_status_t *status);

/* A message flagged CADRE_P2P_DEVICE (a CUDA IPC descriptor, device_p2p.c)
 * matched receive r; engine lock held. Completes r now or later. */
void cadre__gpu_deliver(struct cadre_request *r, const struct cadre_p2p_hdr *h, int peer,
                        const void *data);

/* cadre_wait on a device request: NOT_MINE for host requests. */
int cadre__gpu_wait(struct cadre_request *r, cadre_status_t *status);
/* Whether r is the request of a nonblocking device call (cadre__gpu_wait's). */
int cadre__gpu_is_device_req(const struct cadre_request *r);
/* Called by cadre_comm_free before the communicator goes away: waits for
 * its device operations at most CADRE_TIMEOUT (then warns, naming them). */
void cadre__gpu_comm_free(struct cadre_comm *c);
/* cadre_finalize (registered by cadre__gpu_path_init): frees the world
 * communicator's device state unless operations still hold it. */
void cadre__gpu_world_free(void);

#if HAVE_CUDA
#include <cuda_runtime.h>

#include "p2p/p2p_engine.h"

/* ---- operations (device_proxy.c, device_op.c) ------------------------------------ */
/* OP_HOSTRECV: a host-buffer receive that matched a CUDA IPC descriptor; the
 * proxy copies the data out of the sender's buffer. OP_DEVICE: work already
 * on the stream (the direct kernels); the proxy only waits for `done`. */
enum { OP_SCHED, OP_SEND, OP_RECV, OP_HOSTRECV, OP_DEVICE };
/* ST_ACK: CUDA IPC receive done on the device, the sender's release in flight. */
enum { ST_WAIT_READY, ST_RUNNING, ST_WAIT_DEVICE, ST_ACK };

/* struct gpu_ipc_desc, the payload of a CUDA IPC descriptor, is in
 * runtime/runtime_device.h: p2p/ carries it. */
/* The copy a CUDA IPC-capable receive makes once released: from the mapped
 * sender buffer or from staging. In pinned memory, read by the copy kernel. */
struct gpu_copy_slot {
    const void *src;
    unsigned long long n;
};
/* The context of the answers (never a communicator's: those grow from 0). */
#define CADRE_GPU_CTX 0xfffffffcu

struct gpu_op {
    int kind, state;
    const char *fn;
    struct cadre_comm *comm;
    struct gpu_comm *gc;
    cudaEvent_t ready, done;
    struct flag *flag;
    struct stage *stage;
    /* OP_SCHED: the host work, the collectives' (device_coll.c): started
     * by work_start (which takes work over), or dropped unstarted. */
    void *work;
    int (*work_start)(void *work, cadre_request_t *req);
    void (*work_drop)(void *work);
    cadre_request_t hreq;   /* the host operation once started */
    /* OP_SEND: what the proxy posts */
    size_t count;
    cadre_datatype_t dt;
    int peer, tag;
    /* CUDA IPC: 1 send by descriptor, 2 receive able to take one */
    int ipc;
    /* Straight to the transport (ucx taking CUDA memory,
     * cadre__p2p_device_direct): 1 a send from the user's buffer (dbuf); 2
     * a receive whose host receive names the user's buffer for a pulled
     * message, its gate opened by the proxy once `ready` completed (gdr_go);
     * landed: the data went there, the copy from staging is skipped. */
    int gdr, gdr_go, landed;
    void *dbuf;
    int peer_world;                /* send: the receiver */
    _Atomic int got_desc;          /* receive: a descriptor matched (set under the engine lock) */
    struct gpu_ipc_desc desc;
    struct gpu_copy_slot *slot;    /* receive: in op->stage */
    size_t cap;                    /* receive: bytes the user's buffer holds */
    struct cadre_request *ctl;     /* the answer, received (send) or sent (receive) */
    int32_t ack;                   /* its payload */
    /* A nonblocking CUDA IPC send puts no wait on a stream when it is made
     * (LAZY_OPEN): the first of cadre_wait (LAZY_ENQUEUING while it
     * enqueues, then LAZY_WAITER: the communicator's stream waits for the
     * flag, then `done`) and the proxy once the receiver answered (LAZY_PROXY:
     * nothing on the device) ends it. 0: not such a send. */
    _Atomic int lazy;
    struct cadre_request *host_r;  /* OP_HOSTRECV: the user's receive */
    /* outcome */
    int error;
    char errmsg[256];
    cadre_status_t status;
    /* OP_DEVICE: asked by the proxy while `done` is pending (done 0) and once
     * it completed (1); records any failure on the op (device_direct_comm.c) */
    int (*watch)(struct gpu_op *op, int done);
    void *watch_arg;
    void (*watch_free)(void *arg);
    _Atomic int dev_done; /* `done` completed: the user request may complete */
    _Atomic int refs;     /* the proxy, and the user request if any */
    struct gpu_op *next;
};

enum { LAZY_OPEN = 1, LAZY_ENQUEUING, LAZY_WAITER, LAZY_PROXY };

void cadre__gpu_op_unref(struct gpu_op *op);
cadre_comm_t cadre__gpu_handle_of(struct cadre_comm *c);
void cadre__gpu_record_failure(struct gpu_op *op, int rc, const char *msg);
/* Hands an op to the proxy (which starts on first use). */
int cadre__gpu_submit(struct gpu_op *op);
/* Writes into buf the operations of g the proxy holds (what each is, its
 * peer and tag, where it is), asking the proxy thread, which answers between
 * its passes; says so if it does not answer within a second. */
void cadre__gpu_proxy_describe(struct gpu_comm *g, char *buf, size_t n);
int cadre__gpu_attach_request(struct gpu_op *op, cadre_request_t *req);
/* The communicator's device state, or the status of its sticky error (an
 * earlier device operation on it failed after its call returned). */
int cadre__gpu_comm_ready(const char *fn, struct cadre_comm *comm, struct gpu_comm **out);
/* A new op with its events and flag, and the stream it is enqueued on: the
 * communicator's (blocking) or an internal one that first waits for it
 * (nonblocking; the receive stream when recv_stream). */
int cadre__gpu_op_new(const char *fn, struct cadre_comm *comm, int nonblocking, int recv_stream,
                      struct gpu_op **out, cudaStream_t *stream);
void cadre__gpu_op_discard(struct gpu_op *op);
/* The proxy's test of a receive whose pulled message may land in the user's
 * device buffer (op->gdr 2, device_p2p.c): opens its gate once `ready` has
 * completed; 1 when its host receive is done (*rc, *st), else 0. */
int cadre__gpu_gdr_recv_test(struct gpu_op *op, int *rc, cadre_status_t *st);
/* Enqueues on st the wait for op's flag. */
int cadre__gpu_enqueue_wait(struct gpu_op *op, cudaStream_t st);

/* ---- CUDA IPC (device_ipc.c) ------------------------------------------------------------- */
/* Whether device buffers can go to world rank w through CUDA IPC: another
 * process on this node reached through shared memory, with a GPU this one
 * can map memory of (the same GPU or one with peer access), CADRE_GPU_IPC on. */
int cadre__gpu_ipc_peer_ok(int w);
/* Fills d (all but id and bytes) for the device buffer buf; CADRE__GPU_NOT_MINE
 * when the allocation cannot be exported (managed, pool or VMM memory). */
int cadre__gpu_ipc_export(const void *buf, struct gpu_ipc_desc *d);
/* The address of d's data in this process (the mapping cached per sender
 * and allocation); a status, with the error recorded. */
int cadre__gpu_ipc_map(int src_world, const struct gpu_ipc_desc *d, const char *fn, void **ptr);
/* d's mapping if it is open now, else NULL (opens nothing). A map in a
 * calling thread may close the sender's other mappings (a packed allocation
 * already mapped): a caller holding two checks the first is still there. */
void *cadre__gpu_ipc_mapped(int src_world, const struct gpu_ipc_desc *d);
/* Set in the proxy thread: it never closes a mapping (see device_ipc.c). */
extern __thread int cadre__gpu_in_proxy;
/* Closes every mapping (cadre_finalize). */
void cadre__gpu_ipc_finalize(void);
/* A new answer id (a tag on CADRE_GPU_CTX). */
uint32_t cadre__gpu_ipc_next_id(void);
/* Posts, engine lock held: a receive of the answer to descriptor id from
 * world rank w into *status; the descriptor itself (flagged EAGER on comm's
 * context, payload kept by reference); an answer. The requests are the
 * caller's to poll (->done) and free. */
int cadre__gpu_ipc_post_answer_recv(int w, uint32_t id, int32_t *status,
                                    struct cadre_request **out);
int cadre__gpu_ipc_post_desc(struct cadre_comm *comm, int w, int tag, cadre_datatype_t dt,
                             const struct gpu_ipc_desc *d);
int cadre__gpu_ipc_post_answer(int w, uint32_t id, const int32_t *status,
                               struct cadre_request **out);
/* The receives that may take a descriptor, by staging address: set while
 * their host receive is posted (the engine lock is held by the lookup). */
int cadre__gpu_ipc_watch(const void *stage, struct gpu_op *op);
void cadre__gpu_ipc_unwatch(const void *stage);
struct gpu_op *cadre__gpu_ipc_watched(const void *stage);

#endif /* HAVE_CUDA */

#endif
