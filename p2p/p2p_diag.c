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

#include "p2p_engine.h"

#define QUERY_WAIT_S 1.0
#define MAX_DETAIL_LINES 16

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

struct answer {
    int asked, got;
    int has_seq;
    uint32_t comm_seq;
    struct cadre_op_snapshot st;
};

/* The query in flight; engine lock held to touch. */
static struct answer *answers;
static int nanswers;
static uint16_t query_id;
static pthread_mutex_t diag_lock = PTHREAD_MUTEX_INITIALIZER;

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

static void answer_query(int peer, const struct cadre_p2p_hdr *q)
{
    struct cadre_op_snapshot s;
    cadre__state_snapshot(&s);
    uint32_t comm_seq = 0;
    uint64_t flags = 0;
    if (cadre__comm_coll_seq(q->ctx, &comm_seq))
        flags |= SR_HAS_SEQ;
    if (s.in_cadre)
        flags |= SR_IN_CADRE;
    if (s.secs >= 0)
        flags |= SR_HAS_SECS;
    if (s.op[0])
        flags |= SR_HAS_OP;
    if (!strcmp(s.via, "cadre_wait"))
        flags |= SR_VIA_WAIT;
    else if (!strcmp(s.via, "cadre_wait_timeout"))
        flags |= SR_VIA_WAIT_TIMEOUT;
    else if (!strcmp(s.via, "cadre_waitall"))
        flags |= SR_VIA_WAITALL;
    uint64_t ms = s.secs >= 0 ? (uint64_t)(s.secs * 1e3) : 0;
    if (ms >= (1ull << 40))
        ms = (1ull << 40) - 1;
    struct cadre_p2p_hdr r = {.type = CADRE_P2P_STATE_R,
                              .ctx = s.ctx,
                              .src = s.peer,
                              .tag = s.tag,
                              .len = ((uint64_t)comm_seq << 32) | s.seq,
                              .sreq = (q->sreq & 0xffff) | (flags << 16) | (ms << 24)};
    pack_name(&r, s.op);
    cadre__p2p_post(peer, &r, NULL, NULL);
}

static void take_answer(int peer, const struct cadre_p2p_hdr *h)
{
    if (!answers || peer >= nanswers || (h->sreq & 0xffff) != query_id)
        return;
    struct answer *a = &answers[peer];
    if (!a->asked || a->got)
        return;
    uint64_t flags = (h->sreq >> 16) & 0xff, ms = h->sreq >> 24;
    a->got = 1;
    a->has_seq = !!(flags & SR_HAS_SEQ);
    a->comm_seq = (uint32_t)(h->len >> 32);
    struct cadre_op_snapshot *s = &a->st;
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

void cadre__p2p_diag_cleanup(void)
{
    free(finals);
    finals = NULL;
    nfinals = finals_cap = 0;
}

/* ---- asking --------------------------------------------------------------------- */

/* Sends STATE_Q to the world ranks marked asked; waits for their answers. */
static void ask(uint32_t ctx)
{
    struct cadre_engine *e = &cadre__eng;
    int pending = 0;
    eng_lock();
    query_id++;
    for (int w = 0; w < nanswers; w++) {
        if (!answers[w].asked)
            continue;
        struct cadre_peer *p = &e->peers[w];
        if (w == cadre__proc.rank || !p->tp || p->state != PEER_OK)
            continue;
        struct cadre_p2p_hdr q = {.type = CADRE_P2P_STATE_Q, .ctx = ctx, .sreq = query_id};
        if (cadre__p2p_post(w, &q, NULL, NULL) == CADRE_SUCCESS)
            pending++;
    }
    eng_unlock();
    double end = cadre__now() + QUERY_WAIT_S;
    while (pending > 0 && cadre__now() < end) {
        if (cadre__p2p_progress() == 0)
            cadre__p2p_sleep(1e-3);
        eng_lock();
        cadre__p2p_check_peers();
        pending = 0;
        for (int w = 0; w < nanswers; w++)
            pending += answers[w].asked && !answers[w].got && e->peers[w].state == PEER_OK &&
                       w != cadre__proc.rank;
        eng_unlock();
    }
}

/* Appends to a bounded buffer. */
struct text {
    char *buf;
    size_t len, cap;
};

static void put(struct text *t, const char *fmt, ...) CADRE_PRINTF(2, 3);
static void put(struct text *t, const char *fmt, ...)
{
    if (t->len + 1 >= t->cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->len += (size_t)n < t->cap - t->len ? (size_t)n : t->cap - t->len - 1;
}

/* "rank 2" or "rank 2 (world 5)". */
static void rank_name(const struct cadre_comm *c, int r, char *buf, size_t len)
{
    if (c->world_ranks)
        snprintf(buf, len, "rank %d (world %d)", r, cadre__world_rank(c, r));
    else
        snprintf(buf, len, "rank %d", r);
}

/* What world rank w is doing, in words. */
static void peer_state(const struct answer *ans, int w, char *buf, size_t len)
{
    const struct answer *a = &ans[w];
    struct cadre_peer *p = &cadre__eng.peers[w];
    if (a->got)
        cadre__state_describe(&a->st, buf, len);
    else if (p->state == PEER_DEAD)
        snprintf(buf, len, "gone: %.240s", p->why);
    else if (p->state == PEER_FINALIZED)
        snprintf(buf, len, "has called cadre_finalize");
    else
        snprintf(buf, len, "no answer within %g s", QUERY_WAIT_S);
}

/* What joins a rank's name to its state in a sentence: "rank 1 is in
 * cadre_recv ...", "rank 1 is gone: ...", "rank 1 has called
 * cadre_finalize", "rank 1 gave no answer within 1 s". */
static const char *state_verb(const char *state)
{
    if (!strncmp(state, "has ", 4))
        return " ";
    if (!strncmp(state, "no answer", 9))
        return " gave ";
    if (!strncmp(state, "in ", 3) || !strncmp(state, "not in ", 7) || !strncmp(state, "gone", 4))
        return " is ";
    return ": ";
}

/* Appends a compact list of comm ranks ("0-2 5 7"). */
static void put_ranks(struct text *t, const int *flag, int n, int want)
{
    int first = 1;
    for (int i = 0; i < n; i++) {
        if (flag[i] != want)
            continue;
        int j = i;
        while (j + 1 < n && flag[j + 1] == want)
            j++;
        if (j > i + 1)
            put(t, "%s%d-%d", first ? "" : " ", i, j);
        else if (j == i + 1)
            put(t, "%s%d %d", first ? "" : " ", i, j);
        else
            put(t, "%s%d", first ? "" : " ", i);
        first = 0;
        i = j;
    }
}

/* Whether collective count `have` has reached collective number `want`
 * (tags, and so numbers, wrap at 2^30). */
static int reached(uint32_t have, uint32_t want)
{
    return ((have - want) & 0x3fffffffu) < 0x20000000u;
}

void cadre__p2p_diagnose(struct cadre_request *r, const char *fn, const char *what,
                         const char *stage, char *sum, size_t sumlen)
{
    struct cadre_comm *c = r->comm;
    int coll = r->kind == REQ_GENERIC;
    int nw = cadre__eng.nranks;
    char head[512];
    snprintf(head, sizeof head, "%s: %s made no progress for %g s (CADRE_TIMEOUT)%s%s", fn, what,
             cadre__eng.timeout, stage ? ": " : "", stage ? stage : "");
    snprintf(sum, sumlen, "%s", head);
    if (!c || !cadre__eng.peers || nw <= 0)
        return;

    pthread_mutex_lock(&diag_lock);
    struct answer *ans = calloc((size_t)nw, sizeof *ans);
    int *arrived = calloc((size_t)c->size, sizeof *arrived);
    size_t cap = 16384;
    char *out = malloc(cap);
    if (!ans || !arrived || !out) {
        free(ans), free(arrived), free(out);
        pthread_mutex_unlock(&diag_lock);
        return;
    }
    for (int i = 0; i < c->size; i++) {
        int w = cadre__world_rank(c, i);
        if (w < 0 || w >= nw || i == c->rank)
            continue;
        if (coll || r->peer == CADRE_ANY_SOURCE || r->peer == i)
            ans[w].asked = 1;
    }
    eng_lock();
    answers = ans;
    nanswers = nw;
    eng_unlock();
    ask(c->context_id);
    eng_lock();
    /* From here on ans is ours alone; peers' states are read under the lock. */
    answers = NULL;
    nanswers = 0;

    struct text t = {out, 0, cap};
    char me[24];
    snprintf(me, sizeof me, "rank %d: ", cadre__proc.rank);
    put(&t, "%s%s\n", me, head);
    struct text s = {sum, strlen(sum), sumlen};
    char name[48], state[256];
    if (coll) {
        uint32_t seq = (uint32_t)r->tag + 1;
        int narrived = 0, nmissing = 0;
        for (int i = 0; i < c->size; i++) {
            int w = cadre__world_rank(c, i);
            struct answer *a = &ans[w];
            int in_op = a->got && a->st.in_cadre && a->st.ctx == c->context_id && a->st.seq == seq;
            const struct final_seq *f = a->got ? NULL : find_final(w, c->context_id);
            arrived[i] = i == c->rank || in_op ||
                         (a->got && a->has_seq && reached(a->comm_seq, seq)) ||
                         (f && reached(f->seq, seq));
            narrived += arrived[i];
        }
        nmissing = c->size - narrived;
        put(&t, "%s  arrived (%d of %d): ", me, narrived, c->size);
        put_ranks(&t, arrived, c->size, 1);
        put(&t, "\n%s  missing (%d): ", me, nmissing);
        put_ranks(&t, arrived, c->size, 0);
        put(&t, "%s\n", nmissing ? "" : "none");
        int lines = 0;
        put(&s, nmissing ? ": waiting for %s" : ": every rank has joined it, yet nothing moved",
            nmissing == 1 ? "rank" : "ranks");
        for (int i = 0, listed = 0; i < c->size; i++) {
            if (arrived[i])
                continue;
            int w = cadre__world_rank(c, i);
            rank_name(c, i, name, sizeof name);
            peer_state(ans, w, state, sizeof state);
            if (lines++ < MAX_DETAIL_LINES)
                put(&t, "%s  %s: %s\n", me, name, state);
            put(&s, "%s %d (%s)", listed++ ? "," : "", i, state);
        }
        if (lines > MAX_DETAIL_LINES)
            put(&t, "%s  ... and %d more missing\n", me, lines - MAX_DETAIL_LINES);
        /* A rank inside this very collective number but a different
         * collective is a mismatch worth naming. */
        for (int i = 0; i < c->size; i++) {
            struct answer *a = &ans[cadre__world_rank(c, i)];
            if (i != c->rank && a->got && a->st.in_cadre && a->st.ctx == c->context_id &&
                a->st.seq == seq && strcmp(a->st.op, r->op) && !a->st.via[0]) {
                rank_name(c, i, name, sizeof name);
                cadre__state_describe(&a->st, state, sizeof state);
                put(&t, "%s  %s: %s (a different collective)\n", me, name, state);
            }
        }
    } else {
        int listed = 0;
        for (int i = 0; i < c->size; i++) {
            int w = cadre__world_rank(c, i);
            if (w < 0 || w >= nw || !ans[w].asked)
                continue;
            rank_name(c, i, name, sizeof name);
            peer_state(ans, w, state, sizeof state);
            if (listed < MAX_DETAIL_LINES)
                put(&t, "%s  %s: %s\n", me, name, state);
            if (!listed)
                put(&s, "; %s%s%s", name, state_verb(state), state);
            listed++;
        }
        if (listed > MAX_DETAIL_LINES)
            put(&t, "%s  ... and %d more\n", me, listed - MAX_DETAIL_LINES);
        else if (listed > 1)
            put(&s, " (and %d more rank(s): see stderr)", listed - 1);
    }
    eng_unlock();
    ssize_t wr = write(STDERR_FILENO, out, t.len);
    (void)wr;
    free(ans);
    free(arrived);
    free(out);
    pthread_mutex_unlock(&diag_lock);
}

int cadre__p2p_coll_timed_out(struct cadre_comm *c, const char *fn, uint32_t seq, int q,
                              const char *what)
{
    struct cadre_request *r = cadre__req_new(REQ_GENERIC, fn);
    if (!r)
        return cadre__error(CADRE_ERR_TIMEOUT, "%s: #%u made no progress for %g s (CADRE_TIMEOUT): "
                            "rank %d has not %s", fn, (unsigned)seq, cadre__eng.timeout, q, what);
    r->comm = c;
    r->tag = (int32_t)(seq - 1);
    char comm[32], head[160], sum[1024];
    cadre__state_comm_name(c->context_id, comm, sizeof comm);
    snprintf(head, sizeof head, "#%u on %s (%d ranks)", (unsigned)seq, comm, c->size);
    cadre__p2p_diagnose(r, fn, head, NULL, sum, sizeof sum);
    cadre__req_free(r);
    return cadre__error(CADRE_ERR_TIMEOUT, "%s", sum);
}
