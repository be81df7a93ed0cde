/* The diagnosis of an operation that made no progress for CADRE_TIMEOUT
 * seconds: the waiting rank asks the ranks it waits for what they are doing
 * (STATE_Q), each answers from its progress engine (STATE_R) with its
 * operation state and its collective count on the communicator in question,
 * so a rank that computes answers "not in cadre" and one stuck in another
 * operation names it. The waiting rank then prints one block to stderr.
 *
 * STATE_R carries everything in the header (no payload, so every transport
 * takes it as it takes CTS):
 *   sreq  bits 0-15 query id, 16-23 flags, 24-63 milliseconds in the state
 *   len   bits 0-31 the op's collective number, 32-63 the queried
 *         communicator's collective count
 *   ctx   context id of the op's communicator; src, tag: its peer and tag
 *   rreq, off: the op's name without "cadre_", 16 bytes, not terminated
 *
 * STATE_Q carries the asker's own state the same way (flags: CADRE_P2P_Q_STATE),
 * when it is in an operation on the queried communicator: the peer keeps it
 * as a note, so that when it later times out itself and finds the asker gone
 * or elsewhere, it still knows the asker waited for it meanwhile (a
 * deadlock whose first rank to time out then finalized was reported as
 * "rank 0 has called cadre_finalize").
 *
 * A rank that finalizes first sends each peer it talked to one unsolicited
 * STATE_R flagged SR_FINAL per communicator they share (ctx, and its count
 * in len's high half), since it will not be there to answer: the ranks whose
 * timeouts fire after it left (timers start when each rank enters) must not
 * count a rank that joined the collective and then gave up as missing. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "p2p_diag.h"

enum {
    SR_HAS_SEQ = 0x1,  /* the responder has the queried communicator */
    SR_IN_CADRE = 0x2,
    SR_HAS_SECS = 0x4,
    SR_HAS_OP = 0x8,
    SR_VIA_WAIT = 0x10,
    SR_VIA_WAIT_TIMEOUT = 0x20,
    SR_FINAL = 0x40,   /* unsolicited, at finalize: the count on ctx is final */
    SR_VIA_WAITALL = 0x80,
};

/* Final collective counts left by finalized peers; engine lock held. */
struct final_seq {
    int peer;
    uint32_t ctx, seq;
};
static struct final_seq *finals;
static size_t nfinals, finals_cap;

/* The query in flight; engine lock held to touch. */
static struct cadre__diag_answer *answers;
static int nanswers;
static uint16_t query_id;
/* Notes left by askers, by world rank; engine lock held. */
static struct cadre__diag_note *notes;
static int nnotes;

static void pack_name(struct cadre_p2p_hdr *h, const char *op)
{
    char name[16] = {0};
    if (!strncmp(op, "cadre_", 6))
        op += 6;
    size_t n = strlen(op);
    memcpy(name, op, n < sizeof name ? n : sizeof name);
    memcpy(&h->rreq, name, 8);
    memcpy(&h->off, name + 8, 8);
}

static void unpack_name(const struct cadre_p2p_hdr *h, char *out, size_t len)
{
    char name[17];
    memcpy(name, &h->rreq, 8);
    memcpy(name + 8, &h->off, 8);
    name[16] = '\0';
    for (char *c = name; *c; c++)
        if (*c < 0x20 || *c > 0x7e)
            *c = '?';
    snprintf(out, len, "cadre_%s", name);
}

/* The state s (and the count comm_seq, STATE_R) into h's fields. */
static void pack_state(struct cadre_p2p_hdr *h, const struct cadre_op_snapshot *s, uint64_t flags,
                       uint16_t id, uint32_t comm_seq)
{
    if (s->in_cadre)
        flags |= SR_IN_CADRE;
    if (s->secs >= 0)
        flags |= SR_HAS_SECS;
    if (s->op[0])
        flags |= SR_HAS_OP;
    if (!strcmp(s->via, "cadre_wait"))
        flags |= SR_VIA_WAIT;
    else if (!strcmp(s->via, "cadre_wait_timeout"))
        flags |= SR_VIA_WAIT_TIMEOUT;
    else if (!strcmp(s->via, "cadre_waitall"))
        flags |= SR_VIA_WAITALL;
    uint64_t ms = s->secs >= 0 ? (uint64_t)(s->secs * 1e3) : 0;
    if (ms >= (1ull << 40))
        ms = (1ull << 40) - 1;
    h->ctx = s->ctx;
    h->src = s->peer;
    h->tag = s->tag;
    h->len = ((uint64_t)comm_seq << 32) | s->seq;
    h->sreq = id | (flags << 16) | (ms << 24);
    pack_name(h, s->op);
}

static void unpack_state(const struct cadre_p2p_hdr *h, struct cadre_op_snapshot *s)
{
    uint64_t flags = (h->sreq >> 16) & 0xff, ms = h->sreq >> 24;
    memset(s, 0, sizeof *s);
    s->valid = 1;
    s->in_cadre = !!(flags & SR_IN_CADRE);
    s->secs = flags & SR_HAS_SECS ? (double)ms * 1e-3 : -1;
    if (flags & SR_HAS_OP)
        unpack_name(h, s->op, sizeof s->op);
    if (flags & SR_VIA_WAIT)
        snprintf(s->via, sizeof s->via, "cadre_wait");
    else if (flags & SR_VIA_WAIT_TIMEOUT)
        snprintf(s->via, sizeof s->via, "cadre_wait_timeout");
    else if (flags & SR_VIA_WAITALL)
        snprintf(s->via, sizeof s->via, "cadre_waitall");
    s->ctx = h->ctx;
    s->seq = (uint32_t)h->len;
    s->peer = h->src;
    s->tag = h->tag;
}

static void take_note(int peer, const struct cadre_p2p_hdr *q)
{
    if (!(q->flags & CADRE_P2P_Q_STATE) || peer < 0 || peer >= cadre__eng.nranks)
        return;
    if (!notes) {
        /* Only the diagnosis loses without it. */
        if (!(notes = calloc((size_t)cadre__eng.nranks, sizeof *notes)))
            return;
        nnotes = cadre__eng.nranks;
    }
    struct cadre__diag_note *n = &notes[peer];
    unpack_state(q, &n->st);
    n->valid = 1;
    n->gave_up = !!(q->flags & CADRE_P2P_Q_GIVES_UP);
    n->at = cadre__now();
}

const struct cadre__diag_note *cadre__diag_note(int w)
{
    return notes && w >= 0 && w < nnotes && notes[w].valid ? &notes[w] : NULL;
}

static void answer_query(int peer, const struct cadre_p2p_hdr *q)
{
    take_note(peer, q);
    struct cadre_op_snapshot s;
    cadre__state_snapshot(&s);
    uint32_t comm_seq = 0;
    uint64_t flags = 0;
    if (cadre__comm_coll_seq(q->ctx, &comm_seq))
        flags |= SR_HAS_SEQ;
    struct cadre_p2p_hdr r = {.type = CADRE_P2P_STATE_R};
    pack_state(&r, &s, flags, (uint16_t)(q->sreq & 0xffff), comm_seq);
    cadre__p2p_post(peer, &r, NULL, NULL);
}

static void take_answer(int peer, const struct cadre_p2p_hdr *h)
{
    if (!answers || peer >= nanswers || (h->sreq & 0xffff) != query_id)
        return;
    struct cadre__diag_answer *a = &answers[peer];
    if (!a->asked || a->got)
        return;
    a->got = 1;
    a->has_seq = !!(((h->sreq >> 16) & 0xff) & SR_HAS_SEQ);
    a->comm_seq = (uint32_t)(h->len >> 32);
    unpack_state(h, &a->st);
}

/* The entry of world rank `peer` for ctx, NULL if it left none. */
static struct final_seq *find_final(int peer, uint32_t ctx)
{
    for (size_t i = 0; i < nfinals; i++)
        if (finals[i].peer == peer && finals[i].ctx == ctx)
            return &finals[i];
    return NULL;
}

static void take_final(int peer, const struct cadre_p2p_hdr *h)
{
    uint32_t ctx = (uint32_t)h->ctx, seq = (uint32_t)(h->len >> 32);
    struct final_seq *f = find_final(peer, ctx);
    if (f) {
        f->seq = seq;
        return;
    }
    if (nfinals == finals_cap) {
        size_t ncap = finals_cap ? finals_cap * 2 : 16;
        struct final_seq *n = realloc(finals, ncap * sizeof *n);
        if (!n)
            return; /* only the diagnosis loses */
        finals = n;
        finals_cap = ncap;
    }
    finals[nfinals++] = (struct final_seq){peer, ctx, seq};
}

void cadre__p2p_state_incoming(int peer, const struct cadre_p2p_hdr *h)
{
    if (h->type == CADRE_P2P_STATE_Q)
        answer_query(peer, h);
    else if ((h->sreq >> 16) & SR_FINAL)
        take_final(peer, h);
    else
        take_answer(peer, h);
}

static void send_final(const struct cadre_comm *c, void *arg)
{
    (void)arg;
    uint32_t seq = __atomic_load_n(&c->coll_seq, __ATOMIC_RELAXED);
    for (int i = 0; i < c->size; i++) {
        int w = cadre__world_rank(c, i);
        if (i == c->rank || w < 0 || w >= cadre__eng.nranks || !cadre__p2p_talked_to(w))
            continue;
        struct cadre_p2p_hdr r = {.type = CADRE_P2P_STATE_R,
                                  .ctx = c->context_id,
                                  .len = (uint64_t)seq << 32,
                                  .sreq = (uint64_t)SR_FINAL << 16};
        cadre__p2p_post(w, &r, NULL, NULL);
    }
}

void cadre__p2p_send_finals(void)
{
    cadre__comm_foreach(send_final, NULL);
}

void cadre__p2p_send_final(const struct cadre_comm *c)
{
    send_final(c, NULL);
}

int cadre__diag_final(int w, uint32_t ctx, uint32_t *seq)
{
    const struct final_seq *f = find_final(w, ctx);
    if (f)
        *seq = f->seq;
    return f != NULL;
}

void cadre__p2p_diag_cleanup(void)
{
    free(notes);
    notes = NULL;
    nnotes = 0;
    free(finals);
    finals = NULL;
    nfinals = finals_cap = 0;
}

/* ---- asking --------------------------------------------------------------------- */
void cadre__diag_ask(struct cadre__diag_answer *ans, int nw, uint32_t ctx, int why)
{
    struct cadre_engine *e = &cadre__eng;
    /* This rank's own state goes with the question, when it is about the
     * operation this rank waits in. */
    struct cadre_op_snapshot me;
    cadre__state_snapshot(&me);
    int tell = me.valid && me.in_cadre && me.ctx == ctx;
    int pending = 0;
    eng_lock();
    answers = ans;
    nanswers = nw;
    query_id++;
    for (int w = 0; w < nw; w++) {
        if (!ans[w].asked)
            continue;
        struct cadre_peer *p = &e->peers[w];
        if (w == cadre__proc.rank || !p->tp || p->state != PEER_OK)
            continue;
        struct cadre_p2p_hdr q = {.type = CADRE_P2P_STATE_Q};
        if (tell) {
            pack_state(&q, &me, 0, query_id, 0);
            q.flags = CADRE_P2P_Q_STATE;
            if (why == CADRE_DIAG_ASK_TIMEOUT)
                q.flags |= CADRE_P2P_Q_GIVES_UP;
        } else {
            q.sreq = query_id;
        }
        q.ctx = ctx;
        if (cadre__p2p_post(w, &q, NULL, NULL) == CADRE_SUCCESS)
            pending++;
    }
    eng_unlock();
    double end = cadre__now() + CADRE_DIAG_QUERY_WAIT_S;
    while (pending > 0 && cadre__now() < end) {
        if (cadre__p2p_progress() == 0)
            cadre__p2p_sleep(1e-3);
        eng_lock();
        cadre__p2p_check_peers();
        pending = 0;
        for (int w = 0; w < nw; w++)
            pending += ans[w].asked && !ans[w].got && e->peers[w].state == PEER_OK &&
                       w != cadre__proc.rank;
        eng_unlock();
    }
    eng_lock();
    answers = NULL;
    nanswers = 0;
    eng_unlock();
}
