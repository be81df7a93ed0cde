/* Handles of sends done when posted: a small cadre_isend that the transport
 * takes at once (send_now in p2p_api.c) has nothing left to track, so the
 * user gets a handle of its own kind (CADRE_HKIND_SENT) to a slot of a
 * table of its own, with no request behind it. The wait, test or waitall
 * that ends the handle closes the slot and gives the caller the status a
 * completed send has (zeros, error CADRE_SUCCESS). A slot's generation
 * makes every copy of an ended handle stale, as for requests
 * (runtime_handle.h): a second wait on one is refused, not passed.
 *
 * A window of 64 isends of 8 bytes made a request each, with its zeroing,
 * its handle and its free: about a fifth of the sender's time, 2 pairs on
 * one core each (perf). Free slots stay with the thread that ended their
 * handles, up to CADRE_SENT_STASH, and go back to the table when it ends
 * (cadre__req_drop_spare). The calls on a message's path are inline
 * (p2p_engine.h). */
#include "p2p_engine.h"

struct cadre_htab cadre__sent_handles = CADRE_HTAB_INIT;

__thread uint32_t cadre__sent_free __attribute__((tls_model("initial-exec")));
__thread int cadre__sent_nfree __attribute__((tls_model("initial-exec")));

int cadre__sent_bind(uint32_t *idx)
{
    struct cadre_hslot *s;
    return cadre__h_bind(&cadre__sent_handles, NULL, idx, &s);
}

void cadre__sent_full(uint32_t idx)
{
    cadre__h_unbind(&cadre__sent_handles, idx);
}

void cadre__sent_drop_spare(void)
{
    uint32_t idx;
    while (cadre__sent_free) {
        idx = cadre__sent_free - 1;
        cadre__sent_free = cadre__h_slot(&cadre__sent_handles, idx)->next_free;
        cadre__h_unbind(&cadre__sent_handles, idx);
    }
    cadre__sent_nfree = 0;
}
