/* The diagnosis in words: one block on stderr per event (an operation that
 * timed out, or one stuck for CADRE_STUCK_WARN seconds), whose first line
 * names the operation and then the cause: the ranks it waits for and what
 * they do, or a deadlock (the peer waits for this rank too). Ranks in the
 * same state are named together ("ranks 3 5-7 are not in cadre ..."); a line
 * follows for each further state. The first line is also the summary that
 * cadre_last_error() gives. The peers' answers come from p2p_diag.c. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "p2p_diag.h"

#define MAX_GROUPS 16

/* One diagnosis at a time per process: the query in flight is one. */
static pthread_mutex_t diag_lock = PTHREAD_MUTEX_INITIALIZER;

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

/* Appends the values v[0..n) (ascending) compactly: "0-2 5 7". */
static void put_list(struct text *t, const int *v, int n)
{
    for (int i = 0; i < n; i++) {
        int j = i;
        while (j + 1 < n && v[j + 1] == v[j] + 1)
            j++;
        const char *sep = i ? " " : "";
        if (j > i + 1)
            put(t, "%s%d-%d", sep, v[i], v[j]);
        else if (j == i + 1)
            put(t, "%s%d %d", sep, v[i], v[j]);
        else
            put(t, "%s%d", sep, v[i]);
        i = j;
    }
}

/* A group of ranks in one state. */
struct group {
    char key[256];   /* the state without its time */
    double lo, hi;   /* the members' times; lo < 0: none */
    struct cadre_op_snapshot st; /* the first member's state, when it answered */
    char note[96];   /* said after the state: ", which waits for ..." */
    int n;
};

struct diag {
    struct cadre_comm *c;
    struct cadre__diag_answer *ans; /* by world rank */
    int *grp;   /* by comm rank: its group, -1: not listed */
    int *tmp;   /* scratch for lists */
    struct group g[MAX_GROUPS + 1]; /* the last one: "other states" */
    int ng;
};

/* "rank 3", "ranks 3 5-7", with " (world ...)" on another communicator. */
static void put_members(struct text *t, struct diag *d, int g)
{
    struct cadre_comm *c = d->c;
    int n = 0;
    for (int i = 0; i < c->size; i++)
        if (d->grp[i] == g)
            d->tmp[n++] = i;
    put(t, "%s ", n == 1 ? "rank" : "ranks");
    put_list(t, d->tmp, n);
    if (c->world_ranks) {
        for (int k = 0; k < n; k++)
            d->tmp[k] = cadre__world_rank(c, d->tmp[k]);
        put(t, " (world ");
        put_list(t, d->tmp, n);
        put(t, ")");
    }
}

/* What world rank w is doing, without its time (key), and that time. */
static void peer_state(const struct cadre__diag_answer *a, int w, char *key, size_t len,
                       double *secs, struct cadre_op_snapshot *st)
{
    struct cadre_peer *p = &cadre__eng.peers[w];
    *secs = -1;
    memset(st, 0, sizeof *st);
    if (a->got) {
        *st = a->st;
        struct cadre_op_snapshot s = a->st;
        *secs = s.secs;
        s.secs = -1;
        cadre__state_describe(&s, key, len);
    } else if (p->state == PEER_DEAD) {
        snprintf(key, len, "gone: %.240s", p->why);
    } else if (p->state == PEER_FINALIZED) {
        snprintf(key, len, "has called cadre_finalize");
    } else {
        snprintf(key, len, "no answer within %g s", CADRE_DIAG_QUERY_WAIT_S);
    }
}

static void add_to_group(struct diag *d, int i, const char *key, double secs,
                         const struct cadre_op_snapshot *st, const char *note)
{
    int g = 0;
    while (g < d->ng && (strcmp(d->g[g].key, key) || strcmp(d->g[g].note, note)))
        g++;
    if (g == d->ng) {
        if (d->ng == MAX_GROUPS) {
            g = MAX_GROUPS;
            snprintf(d->g[g].key, sizeof d->g[g].key, "in other states");
            d->g[g].note[0] = '\0';
            if (!d->g[g].n)
                d->g[g].lo = d->g[g].hi = -1;
            d->g[g].n++;
            d->grp[i] = g;
            return;
        }
        d->ng++;
        snprintf(d->g[g].key, sizeof d->g[g].key, "%s", key);
        snprintf(d->g[g].note, sizeof d->g[g].note, "%s", note);
        d->g[g].lo = d->g[g].hi = secs;
        d->g[g].st = *st;
        d->g[g].n = 0;
    }
    struct group *x = &d->g[g];
    if (secs >= 0 && (x->lo < 0 || secs < x->lo))
        x->lo = secs;
    if (secs > x->hi)
        x->hi = secs;
    x->n++;
    d->grp[i] = g;
}

/* The group's state as the end of a sentence whose subject is its ranks:
 * "is in cadre_recv ... for 2.0 s", "have called cadre_finalize", "gave no
 * answer within 1 s". */
static void put_state(struct text *t, const struct group *x)
{
    char s[320];
    if (x->st.valid && x->lo >= 0) {
        cadre__state_describe_span(&x->st, x->lo, x->hi, s, sizeof s);
    } else {
        snprintf(s, sizeof s, "%s", x->key);
    }
    int many = x->n > 1;
    if (!strncmp(s, "has ", 4))
        put(t, "%s%s", many ? "have " : "has ", s + 4);
    else if (!strncmp(s, "no answer", 9))
        put(t, "gave %s", s);
    else
        put(t, "%s %s", many ? "are" : "is", s);
    put(t, "%s", x->note);
}

/* A further group: a line of the block, and a clause of the summary. */
static void put_group_line(struct text *more, struct text *tail, struct diag *d, int g,
                           const char *pfx)
{
    put(more, "%s   ", pfx);
    put_members(more, d, g);
    put(more, " ");
    put_state(more, &d->g[g]);
    put(more, "\n");
    put(tail, "; ");
    put_members(tail, d, g);
    put(tail, " ");
    put_state(tail, &d->g[g]);
}

/* Whether a rank in state s (an answer, or a note) waits for comm rank
 * `me` of c: in a point-to-point call to or from it (or any rank), or in a
 * collective on c, which this rank, in a point-to-point call, is not in. */
static int waits_for(const struct cadre_op_snapshot *s, const struct cadre_comm *c, int me)
{
    if (!s->valid || !s->in_cadre || s->ctx != c->context_id || !s->op[0] ||
        !strcmp(s->op, "cadre_init") || !strcmp(s->op, "cadre_finalize"))
        return 0;
    return s->seq || s->peer == me || s->peer == CADRE_ANY_SOURCE;
}

/* The deadlock of a point-to-point operation with one peer, comm rank i
 * (world w), as the first line's cause; 0 when there is none to name. */
static int put_deadlock(struct text *t, struct diag *d, int i, int w, double my_secs)
{
    struct cadre_comm *c = d->c;
    const struct cadre__diag_answer *a = &d->ans[w];
    char s[320], who[48];
    if (c->world_ranks)
        snprintf(who, sizeof who, "rank %d (world %d)", i, w);
    else
        snprintf(who, sizeof who, "rank %d", i);
    if (a->got && waits_for(&a->st, c, c->rank)) {
        cadre__state_describe(&a->st, s, sizeof s);
        put(t, "a deadlock: %s waits for this rank too (%s)", who, s);
        return 1;
    }
    /* It asked this rank while this operation went on, waiting for this
     * rank; it has given up since (its timeout came first). */
    const struct cadre__diag_note *n = cadre__diag_note(w);
    double began = cadre__now() - (my_secs >= 0 ? my_secs : cadre__eng.timeout);
    if (!n || !n->gave_up || n->at < began || !waits_for(&n->st, c, c->rank))
        return 0;
    struct cadre_op_snapshot was = n->st;
    double secs = was.secs;
    was.secs = -1;
    cadre__state_describe(&was, s, sizeof s);
    put(t, "a deadlock: %s waited for this rank too (%s) and gave up after %.1f s "
           "(its CADRE_TIMEOUT); now it ", who, s, secs);
    struct group now = {.n = 1};
    peer_state(a, w, now.key, sizeof now.key, &now.lo, &now.st);
    now.hi = now.lo;
    put_state(t, &now);
    return 1;
}

/* Whether collective count `have` has reached collective number `want`
 * (tags, and so numbers, wrap at 2^30). */
static int reached(uint32_t have, uint32_t want)
{
    return ((have - want) & 0x3fffffffu) < 0x20000000u;
}

/* Groups the collective's missing ranks; returns how many arrived. A
 * missing rank in a point-to-point call with a rank that has arrived is in
 * a deadlock with it. */
static int coll_groups(struct diag *d, struct cadre_request *r)
{
    struct cadre_comm *c = d->c;
    uint32_t seq = (uint32_t)r->tag + 1;
    int narrived = 0;
    /* d->tmp: whether each rank arrived. */
    for (int i = 0; i < c->size; i++) {
        int w = cadre__world_rank(c, i);
        struct cadre__diag_answer *a = &d->ans[w];
        int in_op = a->got && a->st.in_cadre && a->st.ctx == c->context_id && a->st.seq == seq;
        uint32_t fseq;
        d->tmp[i] = i == c->rank || in_op || (a->got && a->has_seq && reached(a->comm_seq, seq)) ||
                    (!a->got && cadre__diag_final(w, c->context_id, &fseq) && reached(fseq, seq));
        narrived += d->tmp[i];
    }
    for (int i = 0; i < c->size; i++) {
        if (d->tmp[i])
            continue;
        int w = cadre__world_rank(c, i);
        const struct cadre_op_snapshot *as = &d->ans[w].st;
        char key[256], note[96] = "";
        double secs;
        struct cadre_op_snapshot st;
        peer_state(&d->ans[w], w, key, sizeof key, &secs, &st);
        if (d->ans[w].got && as->in_cadre && !as->seq && as->ctx == c->context_id &&
            as->peer >= 0 && as->peer < c->size && d->tmp[as->peer] && strcmp(as->op, "cadre_init") &&
            strcmp(as->op, "cadre_finalize"))
        {
            if (as->peer == c->rank)
                snprintf(note, sizeof note, ", while this rank waits in this collective: a "
                         "deadlock");
            else
                snprintf(note, sizeof note, ", while rank %d waits in this collective: a deadlock",
                         (int)as->peer);
        }
        add_to_group(d, i, key, secs, &st, note);
    }
    return narrived;
}

/* The collective's cause after the first line's head, and the lines of its
 * further groups and of ranks in a different collective. */
static void put_coll(struct text *first, struct text *more, struct text *tail, struct diag *d,
                     struct cadre_request *r, const char *pfx)
{
    struct cadre_comm *c = d->c;
    int narrived = coll_groups(d, r);
    if (narrived == c->size) {
        put(first, ": every rank has joined it, yet nothing moved");
    } else {
        int k = 0;
        for (int i = 0; i < c->size; i++)
            if (d->grp[i] >= 0)
                d->tmp[k++] = i;
        put(first, ": waiting for %s ", k == 1 ? "rank" : "ranks");
        put_list(first, d->tmp, k);
        if (c->world_ranks) {
            for (int j = 0; j < k; j++)
                d->tmp[j] = cadre__world_rank(c, d->tmp[j]);
            put(first, " (world ");
            put_list(first, d->tmp, k);
            put(first, ")");
        }
        put(first, " (%d of %d missing)", c->size - narrived, c->size);
        int ngroups = 0, only = -1;
        for (int g = 0; g <= MAX_GROUPS; g++)
            if (d->g[g].n)
                ngroups++, only = g;
        if (ngroups == 1) {
            put(first, ", which ");
            put_state(first, &d->g[only]);
        }
        for (int g = 0; ngroups > 1 && g <= MAX_GROUPS; g++)
            if (d->g[g].n)
                put_group_line(more, tail, d, g, pfx);
    }
    /* A rank inside this very collective number but a different collective
     * is a mismatch worth naming. */
    uint32_t seq = (uint32_t)r->tag + 1;
    for (int i = 0; i < c->size; i++) {
        struct cadre__diag_answer *a = &d->ans[cadre__world_rank(c, i)];
        if (i != c->rank && a->got && a->st.in_cadre && a->st.ctx == c->context_id &&
            a->st.seq == seq && strcmp(a->st.op, r->op) && !a->st.via[0]) {
            char s[320];
            cadre__state_describe(&a->st, s, sizeof s);
            put(more, "%s   rank %d is %s (a different collective)\n", pfx, i, s);
        }
    }
}

/* A point-to-point operation's cause after the first line's head: a
 * deadlock with its one peer, or what happened (stage) and what the ranks
 * it waits for do. */
static void put_p2p(struct text *first, struct text *more, struct text *tail, struct diag *d,
                    const struct cadre_request *r, const char *stage, const char *pfx,
                    double my_secs)
{
    struct cadre_comm *c = d->c;
    int nasked = 0, one = -1;
    for (int i = 0; i < c->size; i++) {
        int w = cadre__world_rank(c, i);
        if (w >= 0 && w < cadre__eng.nranks && d->ans[w].asked)
            nasked++, one = i;
    }
    if (nasked == 0) {
        if (stage)
            put(first, ": %s", stage);
        return;
    }
    /* Only an operation that waits for its peer to begin (no matching
     * message, no receive posted) can be a deadlock; a transfer that
     * stalled half-way is not. */
    int waits_to_begin = r->kind == REQ_RECV ? r->state == RS_POSTED
                         : r->kind == REQ_SEND ? r->state == RS_WAIT_CTS
                                               : 0;
    if (nasked == 1 && waits_to_begin) {
        char buf[1024];
        struct text dl = {buf, 0, sizeof buf};
        buf[0] = '\0';
        if (put_deadlock(&dl, d, one, cadre__world_rank(c, one), my_secs)) {
            put(first, ": %s", buf);
            return;
        }
    }
    for (int i = 0; i < c->size; i++) {
        int w = cadre__world_rank(c, i);
        if (w < 0 || w >= cadre__eng.nranks || !d->ans[w].asked)
            continue;
        char key[256];
        double secs;
        struct cadre_op_snapshot st;
        peer_state(&d->ans[w], w, key, sizeof key, &secs, &st);
        add_to_group(d, i, key, secs, &st, "");
    }
    if (stage)
        put(first, ": %s", stage);
    int g0 = d->g[0].n ? 0 : MAX_GROUPS;
    put(first, stage ? "; " : ": ");
    put_members(first, d, g0);
    put(first, " ");
    put_state(first, &d->g[g0]);
    for (int g = g0 + 1; g <= MAX_GROUPS; g++)
        if (d->g[g].n)
            put_group_line(more, tail, d, g, pfx);
}

/* The diagnosis: asks, writes the block, returns whether it wrote one; sum
 * gets the first line and the further groups. warn: a stuck operation's
 * warning after secs seconds, not a failure. */
static int diagnose(struct cadre_request *r, const char *fn, const char *what, const char *stage,
                    char *sum, size_t sumlen, int warn, double secs)
{
    struct cadre_comm *c = r->comm;
    int coll = r->kind == REQ_GENERIC;
    int nw = cadre__eng.nranks;
    char head[512];
    if (warn)
        snprintf(head, sizeof head, "%s: %s has made no progress for %.0f s (CADRE_STUCK_WARN) "
                 "and still waits", fn, what, secs);
    else
        snprintf(head, sizeof head, "%s: %s made no progress for %g s (CADRE_TIMEOUT)", fn, what,
                 cadre__eng.timeout);
    snprintf(sum, sumlen, "%s%s%s", head, stage ? ": " : "", stage ? stage : "");
    if (!c || !cadre__eng.peers || nw <= 0)
        return 0;

    struct cadre_op_snapshot me;
    cadre__state_snapshot(&me);
    double my_secs = me.in_cadre ? me.secs : -1;
    pthread_mutex_lock(&diag_lock);
    struct diag d = {.c = c};
    d.ans = calloc((size_t)nw, sizeof *d.ans);
    d.grp = malloc((size_t)c->size * sizeof *d.grp);
    d.tmp = malloc((size_t)c->size * sizeof *d.tmp);
    size_t cap = 16384;
    char *out = malloc(cap), *fbuf = malloc(2048), *tbuf = malloc(cap);
    int wrote = 0;
    if (!d.ans || !d.grp || !d.tmp || !out || !fbuf || !tbuf)
        goto done;
    for (int i = 0; i < c->size; i++) {
        d.grp[i] = -1;
        int w = cadre__world_rank(c, i);
        if (w < 0 || w >= nw || i == c->rank)
            continue;
        if (coll || r->peer == CADRE_ANY_SOURCE || r->peer == i)
            d.ans[w].asked = 1;
    }
    cadre__diag_ask(d.ans, nw, c->context_id, warn ? CADRE_DIAG_ASK_WARN : CADRE_DIAG_ASK_TIMEOUT);

    char pfx[48];
    if (warn)
        snprintf(pfx, sizeof pfx, "[rank %d WARN P2P]", cadre__proc.rank);
    else
        snprintf(pfx, sizeof pfx, "rank %d:", cadre__proc.rank);
    struct text first = {fbuf, 0, 2048}, tail = {tbuf, 0, cap}, more = {out, 0, cap};
    fbuf[0] = tbuf[0] = out[0] = '\0';
    put(&first, "%s", head);
    eng_lock();
    if (coll)
        put_coll(&first, &more, &tail, &d, r, pfx);
    else
        put_p2p(&first, &more, &tail, &d, r, stage, pfx, my_secs);
    eng_unlock();
    snprintf(sum, sumlen, "%s%s", fbuf, tbuf);
    /* One write: the first line, then the others. */
    char *block = malloc(cap + 2048 + 64);
    if (block) {
        int n = snprintf(block, cap + 2048 + 64, "%s %s\n%s", pfx, fbuf, out);
        if (n > 0) {
            ssize_t wr = write(STDERR_FILENO, block, strlen(block));
            (void)wr;
            wrote = 1;
        }
        free(block);
    }
done:
    free(d.ans), free(d.grp), free(d.tmp), free(out), free(fbuf), free(tbuf);
    pthread_mutex_unlock(&diag_lock);
    return wrote;
}

int cadre__p2p_diagnose(struct cadre_request *r, const char *fn, const char *what,
                        const char *stage, char *sum, size_t sumlen)
{
    return diagnose(r, fn, what, stage, sum, sumlen, 0, 0);
}

void cadre__p2p_diag_stuck(struct cadre_request *r, const char *fn, const char *what,
                           const char *stage, double secs)
{
    char sum[1024];
    diagnose(r, fn, what, stage, sum, sizeof sum, 1, secs);
}

/* A request that stands for collective number seq on c (the shared-memory
 * collectives run without one). */
static struct cadre_request *coll_req(struct cadre_comm *c, const char *fn, uint32_t seq,
                                      char *what, size_t len)
{
    struct cadre_request *r = cadre__req_new(REQ_GENERIC, fn);
    if (!r)
        return NULL;
    r->comm = c;
    r->tag = (int32_t)(seq - 1);
    char comm[32];
    cadre__state_comm_name(c->context_id, comm, sizeof comm);
    snprintf(what, len, "#%u on %s (%d ranks)", (unsigned)seq, comm, c->size);
    return r;
}

int cadre__p2p_coll_timed_out(struct cadre_comm *c, const char *fn, uint32_t seq, int q,
                              const char *what)
{
    char head[160], sum[1024];
    struct cadre_request *r = coll_req(c, fn, seq, head, sizeof head);
    if (!r)
        return cadre__error(CADRE_ERR_TIMEOUT, "%s: #%u made no progress for %g s (CADRE_TIMEOUT): "
                            "rank %d has not %s", fn, (unsigned)seq, cadre__eng.timeout, q, what);
    int shown = cadre__p2p_diagnose(r, fn, head, NULL, sum, sizeof sum);
    cadre__req_free(r);
    int rc = cadre__error(CADRE_ERR_TIMEOUT, "%s", sum);
    if (shown)
        cadre__error_shown();
    return rc;
}

void cadre__p2p_coll_stuck(struct cadre_comm *c, const char *fn, uint32_t seq, double secs)
{
    char head[160];
    struct cadre_request *r = coll_req(c, fn, seq, head, sizeof head);
    if (!r)
        return;
    cadre__p2p_diag_stuck(r, fn, head, NULL, secs);
    cadre__req_free(r);
}
