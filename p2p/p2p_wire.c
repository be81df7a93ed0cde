/*
 * p2p_wire.c - the one check of a message header that a peer sent, before
 * the receiving side acts on it. The transports check the framing (type,
 * lengths, flags) against what the lane it came on can hold; the engine
 * checks the stream (sequence numbers) and the matching fields (source, tag,
 * offset). Both call cadre__p2p_hdr_check with what they know, so a header
 * that passes can index nothing out of bounds. It depends on nothing but
 * its arguments: tests/fuzz/fuzz_hdr.c drives it alone.
 */
#include "config.h"

#include <stdio.h>

#include "p2p/p2p.h"

static const char *type_name(unsigned t)
{
    switch (t) {
    case CADRE_P2P_EAGER: return "EAGER";
    case CADRE_P2P_RTS: return "RTS";
    case CADRE_P2P_CTS: return "CTS";
    case CADRE_P2P_DATA: return "DATA";
    case CADRE_P2P_NACK: return "NACK";
    case CADRE_P2P_BYE: return "BYE";
    case CADRE_P2P_DONE: return "DONE";
    default: return "type";
    }
}

int cadre__p2p_hdr_check(const struct cadre_p2p_hdr *h, const struct cadre_p2p_wire *w, char *why,
                         size_t whylen)
{
    unsigned t = h->type;
    if (t < 1 || t > CADRE_P2P_TYPE_MAX) {
        snprintf(why, whylen, "sent a message of unknown type %u (corrupt stream)", t);
        return CADRE_P2P_HDR_CORRUPT;
    }
    if (!(w->types & CADRE_P2P_TYPE_BIT(t))) {
        snprintf(why, whylen, "sent a %s message (type %u) where none can come (corrupt stream)",
                 type_name(t), t);
        return CADRE_P2P_HDR_CORRUPT;
    }
    if (cadre__p2p_has_payload(h->type) && h->len > w->max_payload) {
        snprintf(why, whylen, "sent a %s message of %llu payload bytes, more than the %llu this "
                              "path carries (corrupt stream)",
                 type_name(t), (unsigned long long)h->len, (unsigned long long)w->max_payload);
        return CADRE_P2P_HDR_CORRUPT;
    }
    if (w->max_inline && (h->flags & CADRE_P2P_INLINE) &&
        (t != CADRE_P2P_EAGER || h->len > w->max_inline)) {
        snprintf(why, whylen, "sent a %s message of %llu bytes marked inline (at most %llu; EAGER "
                              "only) (corrupt stream)",
                 type_name(t), (unsigned long long)h->len, (unsigned long long)w->max_inline);
        return CADRE_P2P_HDR_CORRUPT;
    }
    if (w->seq && t != CADRE_P2P_DATA && h->seq != w->seq) {
        snprintf(why, whylen, "sent a message out of sequence (number %llu, expected %llu) "
                              "(corrupt stream)",
                 (unsigned long long)h->seq, (unsigned long long)w->seq);
        return CADRE_P2P_HDR_CORRUPT;
    }
    if (!w->nranks)
        return CADRE_P2P_HDR_OK;
    if ((t == CADRE_P2P_EAGER || t == CADRE_P2P_RTS) &&
        (h->src < 0 || h->src >= w->nranks || h->tag < 0)) {
        snprintf(why, whylen, "sent a message with source %d tag %d (%d ranks, tags >= 0)",
                 (int)h->src, (int)h->tag, w->nranks);
        return CADRE_P2P_HDR_IGNORE;
    }
    if (t == CADRE_P2P_DATA && h->off > UINT64_MAX - h->len) {
        snprintf(why, whylen, "sent %llu DATA bytes at offset %llu, past any message",
                 (unsigned long long)h->len, (unsigned long long)h->off);
        return CADRE_P2P_HDR_IGNORE;
    }
    return CADRE_P2P_HDR_OK;
}
