/* Threads (issue 18): cadre_init_thread's arguments and answer, then, at the
 * same time on every rank, P2P_THREADS threads that exchange messages with
 * every other rank and receive them with CADRE_ANY_SOURCE and CADRE_ANY_TAG,
 * and COLL_THREADS threads that each run collectives on a communicator of
 * their own. Every message is checked byte by byte against the pattern of
 * its (source, tag), every (source, tag) must arrive exactly once, and every
 * collective result is checked against the value computed here. Then
 * MAKE_THREADS threads that each make communicators from a parent of their
 * own at the same time (dup, split, create_group) and use them: two
 * creations that took one context id or shared-memory slot would mix their
 * traffic (each took the process's next_ctx unlocked). Run at 2 to 4 ranks
 * over shared memory and TCP (ranks.list). */
#include <pthread.h>
#include <stdatomic.h>

#include "rank_util.h"

#define P2P_THREADS 4
#define COLL_THREADS 2
#define MSGS 12      /* per sending thread and destination */
#define BIG 150000   /* bytes: past the eager sizes of both transports */
#define COLL_ITERS 25
#define MAKE_THREADS 3
#define MAKE_ITERS 24

static int me, np;

/* Bytes of message k of sending thread t: zero, small and large ones. */
static size_t msg_len(int t, int k)
{
    switch ((t + k) % 4) {
    case 0: return 0;
    case 1: return (size_t)(1 + 37 * k);
    case 2: return (size_t)(1000 + 11 * t);
    default: return BIG - (size_t)k;
    }
}

static int tag_of(int t, int k)
{
    return t * 1000 + k;
}

/* seen[src][tag_of(t, k)]: how many times it arrived. */
static _Atomic int *seen;
#define SEEN(src, t, k) seen[((size_t)(src) * P2P_THREADS + (size_t)(t)) * MSGS + (size_t)(k)]

static void *p2p_thread(void *arg)
{
    int t = (int)(intptr_t)arg;
    size_t nsend = (size_t)(np - 1) * MSGS;
    cadre_request_t *reqs = calloc(nsend, sizeof *reqs);
    unsigned char **bufs = calloc(nsend, sizeof *bufs), *rbuf = malloc(BIG + 1);
    size_t s = 0;
    for (int k = 0; k < MSGS; k++) {
        for (int d = 0; d < np; d++) {
            if (d == me)
                continue;
            size_t len = msg_len(t, k);
            bufs[s] = malloc(len ? len : 1);
            for (size_t i = 0; i < len; i++)
                bufs[s][i] = ru_byte(me, d, (uint64_t)tag_of(t, k), i);
            OK(cadre_isend(bufs[s], len, CADRE_UINT8, d, tag_of(t, k), CADRE_COMM_WORLD, &reqs[s]));
            s++;
        }
    }
    /* Each thread takes as many messages as it sent, whichever they are. */
    for (size_t m = 0; m < nsend; m++) {
        cadre_status_t st;
        memset(rbuf, 0xee, BIG + 1);
        int rc = cadre_recv(rbuf, BIG, CADRE_UINT8, CADRE_ANY_SOURCE, CADRE_ANY_TAG,
                            CADRE_COMM_WORLD, &st);
        EXPECT(rc == CADRE_SUCCESS, "thread %d: recv: %s", t, cadre_last_error());
        if (rc != CADRE_SUCCESS)
            break;
        int st_t = st.tag / 1000, st_k = st.tag % 1000;
        if (st.source < 0 || st.source >= np || st.source == me || st_t >= P2P_THREADS ||
            st_k >= MSGS || st.tag < 0) {
            EXPECT(0, "thread %d: message from %d with tag %d", t, st.source, st.tag);
            continue;
        }
        size_t len = msg_len(st_t, st_k);
        EXPECT(st.count == len, "thread %d: from %d tag %d: count %zu, want %zu", t, st.source,
               st.tag, st.count, len);
        size_t bad = 0;
        for (size_t i = 0; i < len; i++)
            bad += rbuf[i] != ru_byte(st.source, me, (uint64_t)st.tag, i);
        EXPECT(bad == 0 && rbuf[len] == 0xee, "thread %d: from %d tag %d: %zu wrong bytes%s", t,
               st.source, st.tag, bad, rbuf[len] == 0xee ? "" : ", written past the end");
        atomic_fetch_add(&SEEN(st.source, st_t, st_k), 1);
    }
    OK(cadre_waitall((int)nsend, reqs, NULL));
    for (size_t i = 0; i < nsend; i++)
        free(bufs[i]);
    free(bufs);
    free(reqs);
    free(rbuf);
    return NULL;
}

static cadre_comm_t coll_comms[COLL_THREADS];

/* Allreduce, bcast from every root in turn and allgather on this thread's
 * communicator, with values that differ per thread, rank and iteration. */
static void *coll_thread(void *arg)
{
    int c = (int)(intptr_t)arg;
    cadre_comm_t comm = coll_comms[c];
    static const size_t counts[] = {0, 1, 7, 1000, 40000};
    int64_t *in = malloc(40000 * sizeof *in), *out = malloc(40000 * sizeof *out);
    int64_t *all = malloc((size_t)np * 3 * sizeof *all);
    for (int it = 0; it < COLL_ITERS; it++) {
        size_t n = counts[it % 5];
        for (size_t i = 0; i < n; i++)
            in[i] = (int64_t)(me + 1) * (int64_t)(i + 1) + it * 100 + c;
        OK(cadre_allreduce(in, out, n, CADRE_INT64, CADRE_SUM, comm));
        size_t bad = 0;
        for (size_t i = 0; i < n; i++)
            bad += out[i] != (int64_t)np * (np + 1) / 2 * (int64_t)(i + 1) +
                                 (int64_t)np * (it * 100 + c);
        EXPECT(bad == 0, "comm %d iteration %d: allreduce of %zu: %zu wrong", c, it, n, bad);

        int root = it % np;
        for (size_t i = 0; i < n; i++)
            out[i] = me == root ? (int64_t)i * 3 + it + c * 7 : -1;
        OK(cadre_bcast(out, n, CADRE_INT64, root, comm));
        bad = 0;
        for (size_t i = 0; i < n; i++)
            bad += out[i] != (int64_t)i * 3 + it + c * 7;
        EXPECT(bad == 0, "comm %d iteration %d: bcast of %zu from %d: %zu wrong", c, it, n, root,
               bad);

        int64_t mine[3] = {me, it, c};
        OK(cadre_allgather(mine, all, 3, CADRE_INT64, comm));
        for (int r = 0; r < np; r++)
            EXPECT(all[3 * r] == r && all[3 * r + 1] == it && all[3 * r + 2] == c,
                   "comm %d iteration %d: allgather block %d: %lld %lld %lld", c, it, r,
                   (long long)all[3 * r], (long long)all[3 * r + 1], (long long)all[3 * r + 2]);
    }
    free(in);
    free(out);
    free(all);
    return NULL;
}

static cadre_comm_t make_parents[MAKE_THREADS];

/* Makes a communicator from its own parent MAKE_ITERS times (dup, split in
 * two by rank parity, create_group of every rank in reverse order), checks
 * its rank and size, runs an allreduce and an allgather on it with values
 * of this thread and iteration, and frees it. */
static void *make_thread(void *arg)
{
    int t = (int)(intptr_t)arg;
    cadre_comm_t parent = make_parents[t];
    int *ranks = malloc((size_t)np * sizeof *ranks);
    int64_t *all = malloc((size_t)np * 2 * sizeof *all);
    for (int it = 0; it < MAKE_ITERS; it++) {
        cadre_comm_t c = CADRE_COMM_NULL;
        int kind = it % 3, want_rank = me, want_size = np;
        if (kind == 0) {
            OK(cadre_comm_dup(parent, &c));
        } else if (kind == 1) {
            OK(cadre_comm_split(parent, me % 2, me, &c));
            want_rank = me / 2;
            want_size = (np + 1 - me % 2) / 2;
        } else {
            for (int i = 0; i < np; i++)
                ranks[i] = np - 1 - i;
            OK(cadre_comm_create_group(parent, np, ranks, t, &c));
            want_rank = np - 1 - me;
        }
        if (c == CADRE_COMM_NULL)
            continue;
        int r = -1, n = -1;
        OK(cadre_comm_rank(c, &r));
        OK(cadre_comm_size(c, &n));
        EXPECT(r == want_rank && n == want_size, "thread %d iteration %d: rank %d of %d, want %d of %d",
               t, it, r, n, want_rank, want_size);
        int64_t v = (int64_t)t * 1000000 + it * 1000 + r, sum = -1;
        OK(cadre_allreduce(&v, &sum, 1, CADRE_INT64, CADRE_SUM, c));
        int64_t want = (int64_t)n * ((int64_t)t * 1000000 + it * 1000) + (int64_t)n * (n - 1) / 2;
        EXPECT(sum == want, "thread %d iteration %d (kind %d): allreduce %lld, want %lld", t, it,
               kind, (long long)sum, (long long)want);
        int64_t mine[2] = {t * 1000 + it, r};
        OK(cadre_allgather(mine, all, 2, CADRE_INT64, c));
        for (int q = 0; q < n; q++)
            EXPECT(all[2 * q] == t * 1000 + it && all[2 * q + 1] == q,
                   "thread %d iteration %d (kind %d): allgather block %d: %lld %lld", t, it, kind,
                   q, (long long)all[2 * q], (long long)all[2 * q + 1]);
        OK(cadre_comm_free(&c));
    }
    free(ranks);
    free(all);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = -1;
    /* Before a good call: a level that is none, and no place for the answer. */
    FAILS(cadre_init_thread(&argc, &argv, 4, &provided), CADRE_ERR_ARG, "required 4");
    FAILS(cadre_init_thread(&argc, &argv, -1, &provided), CADRE_ERR_ARG, "required -1");
    FAILS(cadre_init_thread(&argc, &argv, CADRE_THREAD_MULTIPLE, NULL), CADRE_ERR_ARG,
          "provided is NULL");
    int flag = 1;
    OK(cadre_initialized(&flag));
    EXPECT(flag == 0 && provided == -1, "after failed calls: initialized %d, provided %d", flag,
           provided);
    OK(cadre_init_thread(&argc, &argv, CADRE_THREAD_MULTIPLE, &provided));
    EXPECT(provided == CADRE_THREAD_MULTIPLE, "provided %d, want CADRE_THREAD_MULTIPLE (%d)",
           provided, CADRE_THREAD_MULTIPLE);
    EXPECT(CADRE_THREAD_SINGLE < CADRE_THREAD_FUNNELED &&
               CADRE_THREAD_FUNNELED < CADRE_THREAD_SERIALIZED &&
               CADRE_THREAD_SERIALIZED < CADRE_THREAD_MULTIPLE,
           "the levels are not in MPI's order");
    FAILS(cadre_init_thread(&argc, &argv, CADRE_THREAD_SINGLE, &provided), CADRE_ERR_STATE,
          "already initialized");
    OK(cadre_comm_rank(CADRE_COMM_WORLD, &me));
    OK(cadre_comm_size(CADRE_COMM_WORLD, &np));
    ru_rank = me;

    seen = calloc((size_t)np * P2P_THREADS * MSGS, sizeof *seen);
    for (int c = 0; c < COLL_THREADS; c++)
        OK(cadre_comm_dup(CADRE_COMM_WORLD, &coll_comms[c]));
    pthread_t th[P2P_THREADS + COLL_THREADS];
    int nth = 0;
    for (int t = 0; np > 1 && t < P2P_THREADS; t++)
        EXPECT(pthread_create(&th[nth++], NULL, p2p_thread, (void *)(intptr_t)t) == 0,
               "pthread_create");
    for (int c = 0; c < COLL_THREADS; c++)
        EXPECT(pthread_create(&th[nth++], NULL, coll_thread, (void *)(intptr_t)c) == 0,
               "pthread_create");
    for (int i = 0; i < nth; i++)
        pthread_join(th[i], NULL);

    int missing = 0, twice = 0;
    for (int src = 0; src < np; src++)
        for (int t = 0; src != me && t < P2P_THREADS; t++)
            for (int k = 0; k < MSGS; k++) {
                int n = atomic_load(&SEEN(src, t, k));
                missing += n == 0;
                twice += n > 1;
            }
    EXPECT(missing == 0 && twice == 0, "%d messages missing, %d received more than once",
           missing, twice);
    for (int c = 0; c < COLL_THREADS; c++)
        OK(cadre_comm_free(&coll_comms[c]));
    free(seen);

    for (int t = 0; t < MAKE_THREADS; t++)
        OK(cadre_comm_dup(CADRE_COMM_WORLD, &make_parents[t]));
    pthread_t mk[MAKE_THREADS];
    for (int t = 0; t < MAKE_THREADS; t++)
        EXPECT(pthread_create(&mk[t], NULL, make_thread, (void *)(intptr_t)t) == 0,
               "pthread_create");
    for (int t = 0; t < MAKE_THREADS; t++)
        pthread_join(mk[t], NULL);
    for (int t = 0; t < MAKE_THREADS; t++)
        OK(cadre_comm_free(&make_parents[t]));
    /* Every rank is done with the threads before any finalizes. */
    OK(cadre_barrier(CADRE_COMM_WORLD));
    OK(cadre_finalize());
    if (ru_failures)
        fprintf(stderr, "[rank %d] thread_test: %d checks failed\n", me, ru_failures);
    else
        printf("thread_test: rank %d of %d ok\n", me, np);
    return ru_failures ? 1 : 0;
}
