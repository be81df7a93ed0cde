/* The program of the fault-injection soak (bench/fault_soak.sh): a loop of
 * mixed point-to-point and collective calls, every result checked element by
 * element, in which one rank fails on purpose.
 *
 * Environment:
 *   SOAK_ITERS   iterations of the loop (default 40)
 *   SOAK_VICTIM  the rank that fails (default: none)
 *   SOAK_ITER    the iteration at which it fails
 *   SOAK_STEP    the step of that iteration before which it fails (0..7)
 *   SOAK_KIND    kill | segv | abort | exit0 | exit3 | cadre_abort | none
 *   SOAK_DIR     a directory shared by the ranks: the victim writes the
 *                CLOCK_MONOTONIC time of its failure to SOAK_DIR/fault
 *
 * Every rank prints one line on stdout as it ends:
 *   "soak: rank R done"                     the loop ran to the end
 *   "soak: rank R detected rc=CODE in OP (iteration I) after S s: TEXT"
 *                                           a call failed; S is the time
 *                                           since the victim's failure
 * and a data check that fails prints "soak: rank R WRONG ..." and exits 99:
 * a wrong result with a success code, which must never happen. The script
 * judges the lines and cadrerun's exit status. */
#include <signal.h>
#include <unistd.h>

#include "rank_util.h"

#define W CADRE_COMM_WORLD

static int me, np;
static double fault_at(void);

static const char *soak_dir;

static void wrong(const char *op, int it, const char *what)
{
    printf("soak: rank %d WRONG in %s (iteration %d): %s\n", me, op, it, what);
    fflush(stdout);
    _exit(99);
}

static void fail_now(const char *kind)
{
    if (soak_dir) {
        char path[512];
        snprintf(path, sizeof path, "%s/fault", soak_dir);
        FILE *f = fopen(path, "w");
        if (f) {
            fprintf(f, "%.9f\n", ru_now());
            fclose(f);
        }
    }
    if (!strcmp(kind, "kill"))
        raise(SIGKILL);
    if (!strcmp(kind, "segv")) {
        /* A real invalid access, as a bug would make: an address the
         * optimiser cannot prove wrong. */
        volatile uintptr_t bad = 8;
        *(volatile int *)bad = 1;
    }
    if (!strcmp(kind, "abort"))
        abort();
    if (!strcmp(kind, "exit0"))
        exit(0);
    if (!strcmp(kind, "exit3"))
        exit(3);
    if (!strcmp(kind, "cadre_abort"))
        cadre_abort(W, 42);
    fprintf(stderr, "soak: unknown SOAK_KIND %s\n", kind);
    exit(2);
}

static double fault_at(void)
{
    if (!soak_dir)
        return -1;
    char path[512];
    snprintf(path, sizeof path, "%s/fault", soak_dir);
    FILE *f = fopen(path, "r");
    double t = -1;
    if (f) {
        if (fscanf(f, "%lf", &t) != 1)
            t = -1;
        fclose(f);
    }
    return t;
}

/* A call failed: report it and what follows from it, then finalize. */
static int detected(int rc, const char *op, int it)
{
    double now = ru_now(), t = fault_at();
    char text[1024];
    snprintf(text, sizeof text, "%s", cadre_last_error());
    for (char *p = text; *p; p++)
        if (*p == '\n')
            *p = ' ';
    printf("soak: rank %d detected rc=%d in %s (iteration %d) after %.3f s: %s\n", me, rc, op,
           it, t < 0 ? -1.0 : now - t, text);
    /* A later collective on the world fails too, and at once. */
    double b0 = ru_now();
    int brc = cadre_barrier(W);
    printf("soak: rank %d then barrier rc=%d after %.3f s\n", me, brc, ru_now() - b0);
    fflush(stdout);
    cadre_finalize();
    return 0;
}

#define STEP(k, op, call)                                                              \
    do {                                                                               \
        if (me == victim && it == fiter && step == (k))                                \
            fail_now(kind);                                                            \
        int rc_ = (call);                                                              \
        if (rc_ != CADRE_SUCCESS)                                                      \
            return detected(rc_, op, it);                                              \
    } while (0)

int main(int argc, char **argv)
{
    if (cadre_init(&argc, &argv) != CADRE_SUCCESS) {
        fprintf(stderr, "soak: cadre_init: %s\n", cadre_last_error());
        return 1;
    }
    cadre_comm_rank(W, &me);
    cadre_comm_size(W, &np);
    ru_rank = me;
    const char *e;
    int iters = (e = getenv("SOAK_ITERS")) ? atoi(e) : 40;
    int victim = (e = getenv("SOAK_VICTIM")) ? atoi(e) : -1;
    int fiter = (e = getenv("SOAK_ITER")) ? atoi(e) : -1;
    int step = (e = getenv("SOAK_STEP")) ? atoi(e) : 0;
    const char *kind = (e = getenv("SOAK_KIND")) ? e : "none";
    soak_dir = getenv("SOAK_DIR");
    if (!strcmp(kind, "none"))
        victim = -1;

    cadre_comm_t dup = CADRE_COMM_NULL;
    if (cadre_comm_dup(W, &dup) != CADRE_SUCCESS)
        return detected(CADRE_ERR_INTERNAL, "cadre_comm_dup", -1);

    const size_t counts[] = {1, 7, 1000, 100003};
    size_t maxn = 100003 * (size_t)np;
    int64_t *a = malloc(maxn * sizeof *a), *b = malloc(maxn * sizeof *b);
    unsigned char *s = malloc(65536), *r = malloc(65536 * (size_t)np);
    if (!a || !b || !s || !r)
        return 1;
    char what[256];

    for (int it = 0; it < iters; it++) {
        size_t n = counts[it % 4];
        /* 0: allreduce on the world, int64 sum of (rank+1)*(it+1)+i */
        for (size_t i = 0; i < n; i++)
            a[i] = (int64_t)(me + 1) * (it + 1) + (int64_t)i;
        STEP(0, "cadre_allreduce", cadre_allreduce(a, b, n, CADRE_INT64, CADRE_SUM, W));
        for (size_t i = 0; i < n; i++) {
            int64_t want = (int64_t)np * (np + 1) / 2 * (it + 1) + (int64_t)np * (int64_t)i;
            if (b[i] != want) {
                snprintf(what, sizeof what, "element %zu of %zu: %lld, expected %lld", i, n,
                         (long long)b[i], (long long)want);
                wrong("cadre_allreduce", it, what);
            }
        }
        /* 1: bcast from a root that moves */
        int root = it % np;
        for (size_t i = 0; i < n; i++)
            b[i] = me == root ? (int64_t)it * 1000003 + (int64_t)i : -1;
        STEP(1, "cadre_bcast", cadre_bcast(b, n, CADRE_INT64, root, W));
        for (size_t i = 0; i < n; i++)
            if (b[i] != (int64_t)it * 1000003 + (int64_t)i) {
                snprintf(what, sizeof what, "root %d, element %zu of %zu: %lld", root, i, n,
                         (long long)b[i]);
                wrong("cadre_bcast", it, what);
            }
        /* 2: a ring of sendrecv */
        size_t bytes = 1 + (size_t)(it * 977) % 65535;
        int right = (me + 1) % np, left = (me + np - 1) % np;
        ru_fill(s, bytes, me, right, (uint64_t)it);
        cadre_status_t st;
        STEP(2, "cadre_sendrecv",
             cadre_sendrecv(s, bytes, right, 5, r, bytes, left, 5, CADRE_UINT8, W, &st));
        if (ru_check(r, bytes, left, me, (uint64_t)it) != bytes || st.source != left ||
            st.count != bytes) {
            snprintf(what, sizeof what, "%zu bytes from rank %d (status source %d count %zu)",
                     bytes, left, st.source, st.count);
            wrong("cadre_sendrecv", it, what);
        }
        /* 3: rank 0 takes one message from every other rank with
         * CADRE_ANY_SOURCE (nonblocking receives, then waitall) */
        if (me == 0) {
            cadre_request_t rq[64];
            int m = np - 1 < 64 ? np - 1 : 64;
            for (int k = 0; k < m; k++)
                STEP(3, "cadre_irecv",
                     cadre_irecv(r + (size_t)k * 256, 256, CADRE_UINT8, CADRE_ANY_SOURCE, 9, W,
                                 &rq[k]));
            cadre_status_t sts[64];
            STEP(3, "cadre_waitall", cadre_waitall(m, rq, sts));
            int seen[64] = {0};
            for (int k = 0; k < m; k++) {
                int src = sts[k].source;
                if (src < 1 || src >= np || seen[src] ||
                    ru_check(r + (size_t)k * 256, 256, src, 0, (uint64_t)it + 77) != 256) {
                    snprintf(what, sizeof what, "message %d from source %d", k, src);
                    wrong("cadre_irecv(ANY_SOURCE)", it, what);
                }
                seen[src] = 1;
            }
        } else {
            ru_fill(s, 256, me, 0, (uint64_t)it + 77);
            STEP(3, "cadre_send", cadre_send(s, 256, CADRE_UINT8, 0, 9, W));
        }
        /* 4: alltoall on the dup'd communicator */
        size_t per = 1 + (size_t)it % 300;
        for (int p = 0; p < np; p++)
            ru_fill(s + (size_t)p * per, per, me, p, (uint64_t)it + 3);
        STEP(4, "cadre_alltoall", cadre_alltoall(s, r, per, CADRE_UINT8, dup));
        for (int p = 0; p < np; p++)
            if (ru_check(r + (size_t)p * per, per, p, me, (uint64_t)it + 3) != per) {
                snprintf(what, sizeof what, "block of rank %d (%zu bytes)", p, per);
                wrong("cadre_alltoall", it, what);
            }
        /* 5: a nonblocking allreduce on the dup'd communicator, waited */
        cadre_request_t req;
        for (size_t i = 0; i < n; i++)
            a[i] = (int64_t)i - me;
        STEP(5, "cadre_iallreduce", cadre_iallreduce(a, b, n, CADRE_INT64, CADRE_MAX, dup, &req));
        STEP(5, "cadre_wait", cadre_wait(&req, CADRE_STATUS_IGNORE));
        for (size_t i = 0; i < n; i++)
            if (b[i] != (int64_t)i) {
                snprintf(what, sizeof what, "element %zu: %lld", i, (long long)b[i]);
                wrong("cadre_iallreduce", it, what);
            }
        /* 6: allgather on the world */
        for (size_t i = 0; i < 5; i++)
            a[i] = me * 100 + (int64_t)i + it;
        STEP(6, "cadre_allgather", cadre_allgather(a, b, 5, CADRE_INT64, W));
        for (int p = 0; p < np; p++)
            for (size_t i = 0; i < 5; i++)
                if (b[(size_t)p * 5 + i] != p * 100 + (int64_t)i + it) {
                    snprintf(what, sizeof what, "rank %d's element %zu", p, i);
                    wrong("cadre_allgather", it, what);
                }
        /* 7: barrier */
        STEP(7, "cadre_barrier", cadre_barrier(W));
    }
    cadre_comm_free(&dup);
    printf("soak: rank %d done\n", me);
    fflush(stdout);
    free(a);
    free(b);
    free(s);
    free(r);
    int rc = cadre_finalize();
    return rc == CADRE_SUCCESS && !ru_failures ? 0 : 1;
}
