/* CADRE_ANY_SOURCE and CADRE_ANY_TAG receives mixed with specific ones, every
 * rank to every other (ranks.list over shm and tcp; tests/hosts/hosts-test.sh
 * ucx across hosts). Each sender sends K messages of each of four kinds to
 * each receiver, in this order: kinds A and B alternated, then C, then D;
 * sizes from 0 bytes to past every transport's eager limit. The receiver
 * posts, in this order:
 *   for k < K, for each source s: (s, tag A), then (ANY_SOURCE, tag B)
 *   for each source s, K times:   (s, ANY_TAG)            takes C
 *   (np-1)*K times:               (ANY_SOURCE, ANY_TAG)   takes D
 * The counts make every match certain: a message takes the first posted
 * receive that matches it (cadre's order, MPI's), and for each message an
 * earlier receive of the right kind is free, because a source's messages
 * match in the order sent. So receive (s, A) number k holds A message k of
 * s; the wildcard receives hold, for each source, its messages in the order
 * sent; every message is received once. Checked: status source, tag and
 * count, every byte, the byte past the message untouched. Two rounds:
 * receives posted before the sends (a barrier between), and after them (the
 * eager messages wait unexpected), a barrier after each. Prints "anymix_test: rank R ok ...". */
#include "rank_util.h"

#define W CADRE_COMM_WORLD
enum { K = 8, NKIND = 4, TAG0 = 40, MAXLEN = 200003 };

static int me, np;

/* Lengths: zero, small, a page, past the eager limits of shm, tcp and UCX. */
static size_t len_of(int from, int kind, int k)
{
    static const size_t lens[] = {8, 0, 1, 100, 4096, 65539, 17, MAXLEN};
    return lens[(size_t)(from + 3 * kind + k) % (sizeof lens / sizeof lens[0])];
}

static uint64_t seq_of(int round, int kind, int k) { return (uint64_t)(round * 1000 + kind * 100 + k); }

struct posted {
    int src, tag; /* what was asked: CADRE_ANY_* or a value */
    int kind;     /* the kind it must take */
    unsigned char *buf;
};

static void round_of(int round, int late)
{
    int npeer = np - 1, nrecv = npeer * K * NKIND;
    struct posted *p = calloc((size_t)nrecv, sizeof *p);
    cadre_request_t *rr = calloc((size_t)nrecv, sizeof *rr), *sr = calloc((size_t)nrecv, sizeof *sr);
    cadre_status_t *st = calloc((size_t)nrecv, sizeof *st);
    size_t total = 0;
    for (int kind = 0; kind < NKIND; kind++)
        for (int k = 0; k < K; k++)
            total += len_of(me, kind, k);
    unsigned char *out = malloc((size_t)npeer * total + 1), *b = out;
    int n = 0;
    for (int k = 0; k < K; k++)
        for (int d = 1; d < np; d++) {
            int s = (me + d) % np;
            p[n++] = (struct posted){s, TAG0, 0, NULL};
            p[n++] = (struct posted){CADRE_ANY_SOURCE, TAG0 + 1, 1, NULL};
        }
    for (int d = 1; d < np; d++)
        for (int k = 0; k < K; k++)
            p[n++] = (struct posted){(me + d) % np, CADRE_ANY_TAG, 2, NULL};
    for (int i = 0; i < npeer * K; i++)
        p[n++] = (struct posted){CADRE_ANY_SOURCE, CADRE_ANY_TAG, 3, NULL};
    for (int i = 0; i < nrecv; i++) {
        p[i].buf = malloc(MAXLEN + 1);
        memset(p[i].buf, 0xEE, MAXLEN + 1);
    }
    /* Sends: to each destination, A and B alternated, then C, then D. */
    int ns = 0;
    int order[K * NKIND][2], no = 0;
    for (int k = 0; k < K; k++) {
        order[no][0] = 0, order[no++][1] = k;
        order[no][0] = 1, order[no++][1] = k;
    }
    for (int kind = 2; kind < NKIND; kind++)
        for (int k = 0; k < K; k++)
            order[no][0] = kind, order[no++][1] = k;
    if (!late) {
        for (int i = 0; i < nrecv; i++)
            OK(cadre_irecv(p[i].buf, MAXLEN, CADRE_UINT8, p[i].src, p[i].tag, W, &rr[i]));
        OK(cadre_barrier(W));
    }
    for (int j = 0; j < no; j++)
        for (int d = 1; d < np; d++) {
            int to = (me + np - d) % np, kind = order[j][0], k = order[j][1];
            size_t len = len_of(me, kind, k);
            ru_fill(b, len, me, to, seq_of(round, kind, k));
            OK(cadre_isend(b, len, CADRE_UINT8, to, TAG0 + kind, W, &sr[ns++]));
            b += len;
        }
    if (late) {
        OK(cadre_barrier(W));
        for (int i = 0; i < nrecv; i++)
            OK(cadre_irecv(p[i].buf, MAXLEN, CADRE_UINT8, p[i].src, p[i].tag, W, &rr[i]));
    }
    OK(cadre_waitall(nrecv, rr, st));
    OK(cadre_waitall(ns, sr, NULL));
    /* The next round sends only when every rank has all of this one: a
     * send completes when its transport holds the message (eager), maybe
     * before it reaches its receiver, whose wildcard receives of this
     * round would take the next round's first messages (MPI's rule, not
     * an error of the library: it failed so over UCX, 2 of 3 runs). */
    OK(cadre_barrier(W));

    /* next[s][kind]: the next message of s of that kind, in posting order. */
    int (*next)[NKIND] = calloc((size_t)np, sizeof *next);
    int bad = 0;
    for (int i = 0; i < nrecv && bad < 10; i++) {
        int s = st[i].source, kind = p[i].kind, fails = ru_failures;
        EXPECT(s >= 0 && s < np && s != me && (p[i].src < 0 || s == p[i].src) &&
                   st[i].tag == TAG0 + kind && st[i].error == CADRE_SUCCESS,
               "round %d%s, receive %d (src %d, tag %d): status source %d tag %d error %d, "
               "expected tag %d", round, late ? " (late)" : "", i, p[i].src, p[i].tag, s, st[i].tag,
               st[i].error, TAG0 + kind);
        if (ru_failures != fails) {
            bad++;
            continue;
        }
        int k = next[s][kind]++;
        size_t len = len_of(s, kind, k), at;
        EXPECT(k < K && st[i].count == len, "round %d, receive %d: message %d of kind %d from %d: "
               "count %zu, expected %zu", round, i, k, kind, s, st[i].count, len);
        if (k < K && (at = ru_check(p[i].buf, len, s, me, seq_of(round, kind, k))) != len)
            EXPECT(0, "round %d%s, receive %d (src %d, tag %d): byte %zu of %zu wrong: not message %d "
                   "of kind %d from rank %d in order", round, late ? " (late)" : "", i, p[i].src,
                   p[i].tag, at, len, k, kind, s);
        EXPECT(p[i].buf[len] == 0xEE, "round %d, receive %d: written past its %zu bytes", round, i, len);
        if (ru_failures != fails)
            bad++;
    }
    for (int s = 0; s < np && !bad; s++)
        for (int kind = 0; kind < NKIND && s != me; kind++)
            EXPECT(next[s][kind] == K, "round %d: %d messages of kind %d from %d, expected %d", round,
                   next[s][kind], kind, s, K);
    for (int i = 0; i < nrecv; i++)
        free(p[i].buf);
    free(next);
    free(p);
    free(rr);
    free(sr);
    free(st);
    free(out);
}

int main(int argc, char **argv)
{
    OK(cadre_init(&argc, &argv));
    OK(cadre_comm_rank(W, &me));
    OK(cadre_comm_size(W, &np));
    ru_rank = me;
    double t0 = ru_now();
    if (np > 1) {
        round_of(0, 0);
        round_of(1, 1);
    }
    int fails = ru_failures, all = 0;
    OK(cadre_allreduce(&fails, &all, 1, CADRE_INT32, CADRE_SUM, W));
    if (!ru_failures)
        printf("anymix_test: rank %d ok (%d messages received, %.2f s)\n", me,
               2 * (np - 1) * K * NKIND, ru_now() - t0);
    OK(cadre_finalize());
    return ru_failures || all ? 1 : 0;
}
