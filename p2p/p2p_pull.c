/* Data a transport pulls (CADRE_P2P_PULL: the ucx transport's large
 * messages, whose data waits at the receiver as UCX's descriptor until a
 * receive takes it): where it lands. Usually the receive's buffer; a
 * receive may name another destination (the device path: the user's
 * device buffer, which a CUDA-capable transport writes directly instead of
 * host staging), and a gate: that destination must not be written before
 * the receive's stream has reached the call, so the transport waits
 * (CADRE_P2P_PULL_WAIT) until the owner opens it. Only a message pulled
 * whole, by a transport that can write that kind of memory then, goes
 * there; a truncated one (the transport then lands all of it in a buffer
 * of its own) and every other message land in the buffer as before, and
 * the owner learns which (cadre__p2p_recv_landed). May call: this folder,
 * runtime/. */
#include "config.h"

#include <stdatomic.h>

#include "p2p/p2p_match.h"

int cadre__p2p_pull_dest(int peer, const struct cadre_p2p_hdr *h, size_t whole, unsigned mems,
                         struct cadre_p2p_pull_to *to)
{
    struct cadre_request *r = cadre__p2p_data_target(peer, h);
    if (!r)
        return CADRE_P2P_PULL_GONE;
    if (r->pull_to && !h->off && h->len == whole && (mems & (1u << r->pull_mem))) {
        if (atomic_load_explicit(&r->pull_go, memory_order_acquire) == PULL_GATE_SHUT)
            return CADRE_P2P_PULL_WAIT;
        to->buf = r->pull_to;
        to->mem = r->pull_mem;
        return CADRE_P2P_PULL_NOW;
    }
    to->buf = r->buf + h->off;
    to->mem = CADRE_P2P_MEM_HOST;
    return CADRE_P2P_PULL_NOW;
}

void cadre__p2p_recv_redirect(struct cadre_request *r, void *dest, int mem)
{
    r->pull_to = dest;
    r->pull_mem = mem;
    atomic_store_explicit(&r->pull_go, PULL_GATE_SHUT, memory_order_relaxed);
}

void cadre__p2p_recv_redirect_go(struct cadre_request *r)
{
    int shut = PULL_GATE_SHUT;
    atomic_compare_exchange_strong(&r->pull_go, &shut, PULL_GATE_OPEN);
}

void cadre__p2p_recv_redirect_drop(struct cadre_request *r)
{
    r->pull_to = NULL;
}
