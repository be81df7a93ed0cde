/* Words for what the engine holds: a request's "what" and stage, which a
 * timed-out wait's diagnosis (p2p_api.c, p2p_diag.c) and the report of
 * cadre_finalize share, and that report: the requests the application
 * started and never completed, and the messages that came for its
 * receives and that no receive took.
 *
 * MPI calls a program erroneous that finalizes with either (MPI_Finalize
 * with requests pending); implementations drop them without a word. cadre
 * finalizes all the same and keeps finalize bounded (it waits for no peer
 * that might never answer), but says what it dropped: a send the peer
 * never received is lost, and a message no receive took was the peer's
 * work for nothing. One WARN block per rank (one write, which other ranks'
 * lines do not cut), before the farewells.
 * May call: this folder, runtime/. */
#include <stdio.h>
#include <string.h>

#include "p2p_engine.h"
#include "p2p_match.h"

void cadre__p2p_req_what(const struct cadre_request *r, const char *fn, int flags, char *what,
                         size_t len)
{
    char comm[32] = "", tag[32], size[48] = "";
    if (r->comm)
        cadre__state_comm_name(r->comm->context_id, comm, sizeof comm);
    if ((flags & CADRE_WHAT_FULL) && r->tag == CADRE_ANY_TAG)
        snprintf(tag, sizeof tag, "any tag");
    else
        snprintf(tag, sizeof tag, "tag %d", r->tag);
    if (flags & CADRE_WHAT_FULL)
        snprintf(size, sizeof size, ", up to %zu bytes", r->bytes);
    if (r->kind == REQ_SEND)
        snprintf(what, len, "%s to rank %d (tag %d, %zu bytes)", r->op, r->peer, r->tag, r->bytes);
    else if (r->kind == REQ_RECV && r->peer == CADRE_ANY_SOURCE)
        snprintf(what, len, "%s from any rank (%s%s)", r->op, tag, size);
    else if (r->kind == REQ_RECV)
        snprintf(what, len, "%s from rank %d (%s%s)", r->op, r->peer, tag, size);
    else if (!strcmp(fn, r->op))
        snprintf(what, len, "#%u on %s (%d ranks)", (unsigned)r->tag + 1, comm,
                 r->comm ? r->comm->size : 0);
    else
        snprintf(what, len, "%s #%u on %s (%d ranks)", r->op, (unsigned)r->tag + 1, comm,
                 r->comm ? r->comm->size : 0);
    if (r->kind != REQ_GENERIC && comm[0] &&
        ((flags & (CADRE_WHAT_FULL | CADRE_WHAT_COMM)) || strcmp(comm, "WORLD")))
        snprintf(what + strlen(what), len - strlen(what), " on %s", comm);
}

const char *cadre__p2p_req_stage(const struct cadre_request *r)
{
    return r->kind == REQ_GENERIC                     ? NULL
           : r->state == RS_POSTED                    ? "no matching message arrived"
           : r->state == RS_WAIT_CTS                  ? "the receiver never posted a matching receive"
           : r->state == RS_STREAM || r->state == RS_WAIT_DATA ? "the transfer stalled"
                                                               : "it could not be sent";
}

/* ---- what cadre_finalize leaves behind ---------------------------------------------- */

#define LIST_MAX 8 /* lines of each kind; the rest are counted */

struct leftovers {
    char lines[2 * LIST_MAX][520];
    int nlines, nreqs, nmsgs, reqs_listed, msgs_listed;
};

/* A request the application still holds (its handle is open): one that is
 * not done, or failed without anyone waiting to hear it. A request that
 * succeeded and was never waited for lost nothing, and is not named. */
static void leftover_req(void *obj, void *arg)
{
    struct cadre_request *r = obj;
    struct leftovers *L = arg;
    int done = atomic_load(&r->done);
    if (done && r->error == CADRE_SUCCESS)
        return;
    if (L->nreqs++ >= LIST_MAX)
        return;
    char what[200];
    cadre__p2p_req_what(r, "cadre_finalize", CADRE_WHAT_FULL, what, sizeof what);
    const char *stage = cadre__p2p_req_stage(r);
    if (done)
        snprintf(L->lines[L->nlines++], sizeof L->lines[0], "  %s: failed, never waited for: %s",
                 what, r->errmsg[0] ? r->errmsg : cadre_error_string(r->error));
    else
        snprintf(L->lines[L->nlines++], sizeof L->lines[0], "  %s: %s", what,
                 stage ? stage : "not complete");
    L->reqs_listed++;
}

/* The messages of the application's communicators (even contexts: the
 * collectives' own traffic has the odd ones, and their diagnosis) that no
 * receive took: an eager one's data is here, a rendezvous one's (RTS) at
 * its sender, whose send is dropped with it. */
static void leftover_msgs(struct leftovers *L)
{
    for (uint32_t i = 0; i < cadre__p2p_nctx_cap; i++) {
        const struct match_ctx *m = &cadre__p2p_ctxs[i];
        if (!m->used || (m->ctx & 1u))
            continue;
        char comm[32];
        cadre__state_comm_name(m->ctx, comm, sizeof comm);
        for (const struct unexp *u = m->unexp; u; u = u->next) {
            if (L->nmsgs++ >= LIST_MAX)
                continue;
            snprintf(L->lines[L->nlines++], sizeof L->lines[0],
                     "  a message from rank %d (tag %d, %llu bytes) on %s: never received%s",
                     (int)u->h.src, (int)u->h.tag, (unsigned long long)u->h.len, comm,
                     u->h.type == CADRE_P2P_RTS ? " (its sender's send is dropped)" : "");
            L->msgs_listed++;
        }
    }
}

static const char *plural(int n)
{
    return n == 1 ? "" : "s";
}

void cadre__p2p_report_leftovers(void)
{
    struct leftovers L = {.nlines = 0};
    eng_lock();
    cadre__h_foreach_open(&cadre__req_handles, leftover_req, &L);
    leftover_msgs(&L);
    eng_unlock();
    if ((!L.nreqs && !L.nmsgs) || !cadre__log_enabled(CADRE_LOG_WARN, CADRE_SUBSYS_P2P))
        return;
    char head[300] = "", more[2][64];
    if (L.nreqs)
        snprintf(head, sizeof head, "%d pending request%s", L.nreqs, plural(L.nreqs));
    if (L.nmsgs)
        snprintf(head + strlen(head), sizeof head - strlen(head), "%s%d message%s never received",
                 L.nreqs ? " and " : "", L.nmsgs, plural(L.nmsgs));
    snprintf(head + strlen(head), sizeof head - strlen(head),
             " (complete every request and receive every message before cadre_finalize):");
    char first[360];
    snprintf(first, sizeof first, "cadre_finalize: dropping %s", head);
    /* The head, the requests, the count of those left out, the messages,
     * theirs. */
    const char *out[2 * LIST_MAX + 3];
    int n = 0;
    out[n++] = first;
    for (int i = 0; i < L.reqs_listed; i++)
        out[n++] = L.lines[i];
    if (L.nreqs > L.reqs_listed) {
        snprintf(more[0], sizeof more[0], "  and %d more request%s", L.nreqs - L.reqs_listed,
                 plural(L.nreqs - L.reqs_listed));
        out[n++] = more[0];
    }
    for (int i = 0; i < L.msgs_listed; i++)
        out[n++] = L.lines[L.reqs_listed + i];
    if (L.nmsgs > L.msgs_listed) {
        snprintf(more[1], sizeof more[1], "  and %d more message%s", L.nmsgs - L.msgs_listed,
                 plural(L.nmsgs - L.msgs_listed));
        out[n++] = more[1];
    }
    cadre__log_block(CADRE_LOG_WARN, CADRE_SUBSYS_P2P, out, n);
}
