/* The ucx transport's pulls (p2p/p2p_ucx_pull.c) and where they land
 * (p2p/p2p_pull.c), both compiled into this runner, against a stand-in of
 * UCP's calls and of the engine: the gate of a receive that names another
 * destination (the device path's device buffer; host memory here, where
 * nothing of CUDA can run). A pull into it does not start before the gate
 * opens, however often progress passes, and counts no event meanwhile; it
 * then goes there with UCX's memory type CUDA; a truncated message, data
 * UCX sent eagerly, and a UCX that takes no CUDA memory land in the
 * receive's own buffer instead; a receive that goes away, or a peer that
 * fails, while the gate is shut releases UCX's descriptor and pulls
 * nothing; a gated pull holds back no other pull of the peer. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "p2p/p2p_match.h"
#include "testutil.h"

void suite_ucxpull(void);

/* The engine's side, faked: one receive at a time, wire id RREQ. */
#define RREQ 7
static struct cadre_request *fake_r;

struct cadre_request *cadre__req_lookup(uint64_t id)
{
    return id == RREQ ? fake_r : NULL;
}

#if HAVE_UCX
#include "p2p/p2p_ucx.h"

struct ucx_state cadre__ucx_st;
struct cadre_ucx_fns cadre__ucx;

static struct {
    int pulls, releases, incoming, failed;
    void *desc, *buf;
    size_t len;
    int cuda;              /* the pull asked for UCS_MEMORY_TYPE_CUDA */
    ucp_am_recv_data_nbx_callback_t cb;
    void *user_data;
    const void *payload;   /* of the last DATA to the engine */
    size_t in_len;
} u;
static char fake_req; /* the request UCX returns for a pull in flight */

void *cadre__p2p_data_dest(int peer, const struct cadre_p2p_hdr *h)
{
    struct cadre_request *r = cadre__p2p_data_target(peer, h);
    return r ? r->buf + h->off : NULL;
}

void cadre__p2p_incoming(int peer, const struct cadre_p2p_hdr *h, const void *payload)
{
    (void)peer;
    u.incoming++;
    u.payload = payload;
    u.in_len = h->len;
}

void cadre__ucx_fail(int peer, const char *fmt, ...)
{
    (void)peer;
    (void)fmt;
    u.failed++;
}

int cadre__log_enabled(int level, int subsys)
{
    (void)level;
    (void)subsys;
    return 0;
}

void cadre__log(int level, int subsys, const char *fmt, ...)
{
    (void)level;
    (void)subsys;
    (void)fmt;
}

static ucs_status_ptr_t f_recv(ucp_worker_h w, void *desc, void *buf, size_t len,
                               const ucp_request_param_t *prm)
{
    (void)w;
    u.pulls++;
    u.desc = desc;
    u.buf = buf;
    u.len = len;
    u.cuda = (prm->op_attr_mask & UCP_OP_ATTR_FIELD_MEMORY_TYPE) &&
             prm->memory_type == UCS_MEMORY_TYPE_CUDA;
    u.cb = prm->cb.recv_am;
    u.user_data = prm->user_data;
    return &fake_req;
}

static void f_release(ucp_worker_h w, void *desc)
{
    (void)w;
    (void)desc;
    u.releases++;
}

static void f_free(void *req)
{
    (void)req;
}

static unsigned f_progress(ucp_worker_h w)
{
    (void)w;
    return 0;
}

static const char *f_string(ucs_status_t s)
{
    return s == UCS_OK ? "Success" : "error";
}

/* A receive from rank 1 waiting for the data of a message of `len` bytes,
 * of which it takes xfer (its CTS's). */
static struct cadre_request req;
static char staging[4096], device[4096];

static void receive(size_t xfer)
{
    memset(&req, 0, sizeof req);
    req.kind = REQ_RECV;
    req.state = RS_WAIT_DATA;
    req.peer_world = 1;
    req.id = RREQ;
    req.buf = staging;
    req.bytes = sizeof staging;
    req.xfer = xfer;
    fake_r = &req;
}

/* The RTS sreq of `len` bytes came from rank 1 with UCX's descriptor (rndv)
 * or with its data (eager), and was held; then a receive took it (CTS). */
static void rts_and_cts(uint64_t sreq, size_t len, size_t xfer, int rndv, uint64_t rreq)
{
    static char eager_data[4096];
    struct ucx_in in = {.w = {.h = {.type = CADRE_P2P_RTS, .len = len, .sreq = sreq}},
                        .len = len,
                        .rndv = rndv,
                        .data = rndv ? (void *)(uintptr_t)(0xd000 + sreq) : eager_data};
    CU_ASSERT_FATAL(cadre__ucx_pull_hold(1, &in) == UCS_OK);
    struct cadre_p2p_hdr cts = {.type = CADRE_P2P_CTS, .sreq = sreq, .rreq = rreq, .len = xfer};
    CU_ASSERT(cadre__ucx_pull_cts(1, &cts) == 1);
}

static void setup(int direct)
{
    static struct ucx_peer peers[2];
    memset(&u, 0, sizeof u);
    memset(peers, 0, sizeof peers);
    memset(&cadre__ucx_st, 0, sizeof cadre__ucx_st);
    cadre__ucx_st.on = 1;
    cadre__ucx_st.size = 2;
    cadre__ucx_st.peers = peers;
    cadre__ucx_st.peer_timeout = 5;
    cadre__ucx_st.direct = direct;
    peers[1].state = EP_UP;
    cadre__ucx.ucp_am_recv_data_nbx = f_recv;
    cadre__ucx.ucp_am_data_release = f_release;
    cadre__ucx.ucp_request_free = f_free;
    cadre__ucx.ucp_worker_progress = f_progress;
    cadre__ucx.ucs_status_string = f_string;
}

/* The pull in flight ends (UCX's callback), and the next pass hands the
 * engine its DATA. */
static void pull_ends(size_t len)
{
    u.cb(&fake_req, UCS_OK, len, u.user_data);
    cadre__ucx_pulls();
}

static void gate(void)
{
    /* Shut: no pull however often progress passes, and no event. */
    setup(1);
    receive(1000);
    cadre__p2p_recv_redirect(&req, device, CADRE_P2P_MEM_CUDA);
    rts_and_cts(5, 1000, 1000, 1, RREQ);
    int events = 0;
    for (int i = 0; i < 100; i++)
        events += cadre__ucx_pulls();
    CU_ASSERT(u.pulls == 0 && events == 0 && u.releases == 0 && u.incoming == 0);
    /* Open: one pull, into the named buffer, as device memory. */
    cadre__p2p_recv_redirect_go(&req);
    CU_ASSERT(cadre__ucx_pulls() == 1);
    CU_ASSERT(u.pulls == 1 && u.buf == device && u.len == 1000 && u.cuda &&
              u.desc == (void *)(uintptr_t)0xd005);
    pull_ends(1000);
    /* The engine gets the DATA with the named buffer as its payload (the
     * data is there: incoming_data copies nothing and marks it landed). */
    CU_ASSERT(u.incoming == 1 && u.payload == device && u.in_len == 1000 && !u.failed);
    CU_ASSERT(cadre__ucx_st.peers[1].pulls == NULL);

    /* Opened before the receive took the message: at once. */
    setup(1);
    receive(1000);
    cadre__p2p_recv_redirect(&req, device, CADRE_P2P_MEM_CUDA);
    cadre__p2p_recv_redirect_go(&req);
    rts_and_cts(6, 1000, 1000, 1, RREQ);
    CU_ASSERT(u.pulls == 1 && u.buf == device && u.cuda);
    pull_ends(1000);
    CU_ASSERT(u.incoming == 1 && u.payload == device);
}

static void staged_instead(void)
{
    /* Truncated (the receive takes 600 of 1000 bytes): UCX takes all or
     * nothing, into a host buffer of the transport's; the engine copies
     * the receive's part into its own buffer. */
    setup(1);
    receive(600);
    cadre__p2p_recv_redirect(&req, device, CADRE_P2P_MEM_CUDA);
    cadre__p2p_recv_redirect_go(&req);
    rts_and_cts(5, 1000, 600, 1, RREQ);
    CU_ASSERT(u.pulls == 1 && u.buf != device && u.buf != staging && !u.cuda && u.len == 1000);
    pull_ends(1000);
    CU_ASSERT(u.incoming == 1 && u.payload != device && u.in_len == 600);

    /* UCX that takes no CUDA memory (not direct): into the receive's own
     * buffer, even where the receive named another, and without waiting. */
    setup(0);
    receive(1000);
    cadre__p2p_recv_redirect(&req, device, CADRE_P2P_MEM_CUDA);
    rts_and_cts(5, 1000, 1000, 1, RREQ);
    CU_ASSERT(u.pulls == 1 && u.buf == staging && !u.cuda);
    pull_ends(1000);
    CU_ASSERT(u.incoming == 1 && u.payload == staging);

    /* Data UCX sent eagerly after all: copied by the host, so into the
     * receive's own buffer. */
    setup(1);
    receive(1000);
    cadre__p2p_recv_redirect(&req, device, CADRE_P2P_MEM_CUDA);
    rts_and_cts(5, 1000, 1000, 0, RREQ);
    cadre__ucx_pulls();
    CU_ASSERT(u.pulls == 0 && u.incoming == 1 && u.payload == staging);
}

static void gone_while_shut(void)
{
    /* The receive goes (abandoned, freed) while its gate is shut: the
     * descriptor is released (UCX ends the sender's send), nothing pulled,
     * no DATA, no failure. */
    setup(1);
    receive(1000);
    cadre__p2p_recv_redirect(&req, device, CADRE_P2P_MEM_CUDA);
    rts_and_cts(5, 1000, 1000, 1, RREQ);
    cadre__ucx_pull_release(1, staging, sizeof staging);
    cadre__ucx_pulls();
    CU_ASSERT(u.pulls == 0 && u.releases == 0);
    fake_r = NULL;
    cadre__ucx_pulls(); /* found gone */
    cadre__ucx_pulls(); /* freed */
    CU_ASSERT(u.pulls == 0 && u.releases == 1 && u.incoming == 0 && !u.failed);
    CU_ASSERT(cadre__ucx_st.peers[1].pulls == NULL);

    /* The peer fails while the gate is shut: released, nothing pulled. */
    setup(1);
    receive(1000);
    cadre__p2p_recv_redirect(&req, device, CADRE_P2P_MEM_CUDA);
    rts_and_cts(5, 1000, 1000, 1, RREQ);
    cadre__ucx_pull_drop(1);
    CU_ASSERT(u.pulls == 0 && u.releases == 1 && u.incoming == 0);
    CU_ASSERT(cadre__ucx_st.peers[1].pulls == NULL);
}

static void no_head_of_line(void)
{
    /* A gated pull first, then one for a receive that names nothing (a
     * host receive, wire id 8, which the stand-in engine does not know
     * once asked: its data is dropped, as for a receive gone): the second
     * is not held behind the first. */
    setup(1);
    receive(1000);
    cadre__p2p_recv_redirect(&req, device, CADRE_P2P_MEM_CUDA);
    rts_and_cts(5, 1000, 1000, 1, RREQ);
    rts_and_cts(6, 1000, 1000, 1, 8);
    cadre__ucx_pulls();
    CU_ASSERT(u.pulls == 0 && u.releases == 1); /* the second's, not wanted */
    CU_ASSERT(cadre__ucx_st.peers[1].pulls != NULL && cadre__ucx_st.peers[1].pulls->next == NULL);
    cadre__p2p_recv_redirect_go(&req);
    cadre__ucx_pulls();
    CU_ASSERT(u.pulls == 1 && u.buf == device);
    pull_ends(1000);
    CU_ASSERT(u.incoming == 1 && u.payload == device);
}

void suite_ucxpull(void)
{
    CU_pSuite s = CU_add_suite("ucxpull", NULL, NULL);
    CU_add_test(s, "a pull into a receive's other buffer waits for its gate", gate);
    CU_add_test(s, "truncated, eager, or UCX without CUDA: into the receive's own buffer",
                staged_instead);
    CU_add_test(s, "the receive or the peer gone while the gate is shut: released",
                gone_while_shut);
    CU_add_test(s, "a shut gate holds back no other pull", no_head_of_line);
}

#else /* !HAVE_UCX */

void suite_ucxpull(void)
{
    CU_add_suite("ucxpull", NULL, NULL);
}
#endif
