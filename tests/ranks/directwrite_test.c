/* The direct algorithms write into peers' buffers with process_vm_writev
 * (coll_direct_window.c): a rank that leaves the call must never have its
 * memory written by a peer afterwards. One writer, rank 1, is stopped
 * (SIGSTOP) in the middle of its writes; DIRECTWRITE picks which:
 *   slices (the default; 3 ranks, CADRE_ALGO=allreduce=direct): the
 *     allreduce in which each rank writes its slice into every peer's
 *     output (rank 1: the second third);
 *   bcast (2 ranks, CADRE_ALGO=bcast=direct): the two-rank bcast whose root,
 *     rank 1, writes the first 60% of rank 0's buffer in pieces of 4 MiB
 *     (one write after another: the stop lands at the end of one, before
 *     rank 1 says it is done with it, so rank 0's call waits, and rank 1
 *     must then find the window closed before the next).
 * With CADRE_TIMEOUT=2. Rank 0 watches the first element rank 1 writes
 * into its buffer; once it changes, a thread of rank 0 stops rank 1. The
 * other ranks finish their part and wait for rank 1's round 3 until
 * CADRE_TIMEOUT: their calls must fail (CADRE_ERR_TIMEOUT). Each then
 * fills its buffer with a pattern of its own; rank 0 wakes rank 1
 * (SIGCONT), which goes on with the write it was stopped before and must
 * not make it: every pattern must survive until rank 1 has returned from
 * its call (it says so with a message to each). Rank 1's call fails, or,
 * where it was stopped after its last write, succeeds with every element
 * right; where it was stopped in the middle of a write, the others' calls
 * wait for that write before they return, and rank 0's thread wakes rank 1
 * after PATIENT_STOP seconds in any case. Where rank 0's call succeeds
 * (rank 1 wrote nothing before the others were done, or was stopped after
 * its last write), the result is checked and the test tries again, up to
 * TRIES times.
 *
 * Before that, calls of the same kind with every element checked: in place
 * and not, float32 sum and int32 max (bcast: int32). Prints
 * "directwrite_test: rank r ok". */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>

#include "rank_util.h"

#define W CADRE_COMM_WORLD
#define N (((size_t)8 << 20) + 3) /* float32: 32 MiB and a bit */
#define PATIENT 60.0 /* s, for the waits outside CADRE_TIMEOUT */
#define PATIENT_STOP 4.0
#define TRIES 20


static float input(int rank, size_t i)
{
    return (float)((i * 7 + (size_t)rank * 13) % 1000) - 500;
}

static int32_t root_data(size_t i)
{
    return (int32_t)(i * 31 % 100003);
}

enum mode { SLICES, BCAST };
static enum mode mode;
static int me, np;

/* The element of rank 0's buffer that rank 1 writes first. */
static size_t first_written(void)
{
    if (mode == BCAST)
        return 0;
    size_t per = (N + (size_t)np - 1) / (size_t)np; /* cadre__share, coll_share.h */
    return (per + 15) / 16 * 16;
}

/* The right result at element i. */
static float want_sum(size_t i)
{
    float w = 0;
    for (int r = 0; r < np; r++)
        w += input(r, i);
    return w;
}

/* /proc/PID/stat's state letter, '?' when unreadable. */
static char proc_state(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return '?';
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' ? p[2] : '?';
}

/* Checked calls of the kind under test. */
static void checked(void)
{
    float *in = malloc(N * sizeof *in), *out = malloc(N * sizeof *out);
    int32_t *iv = malloc(N * sizeof *iv);
    if (!in || !out || !iv) {
        EXPECT(0, "no memory");
        return;
    }
    if (mode == BCAST) {
        for (int root = 0; root < np; root++) {
            for (size_t i = 0; i < N; i++)
                iv[i] = me == root ? root_data(i) + root : -1;
            OK(cadre_bcast(iv, N, CADRE_INT32, root, W));
            long wrong = 0;
            for (size_t i = 0; i < N; i++)
                wrong += iv[i] != root_data(i) + root;
            EXPECT(wrong == 0, "bcast from rank %d: %ld wrong elements", root, wrong);
        }
    }
    for (int inpl = 0; inpl < 2 && mode != BCAST; inpl++) {
        for (size_t i = 0; i < N; i++) {
            in[i] = input(me, i);
            out[i] = -1;
        }
        OK(cadre_allreduce(inpl ? CADRE_IN_PLACE : in, inpl ? in : out, N, CADRE_FLOAT32,
                           CADRE_SUM, W));
        const float *res = inpl ? in : out;
        long wrong = 0;
        for (size_t i = 0; i < N; i++)
            wrong += res[i] != want_sum(i);
        EXPECT(wrong == 0, "float32 sum, %s: %ld wrong elements",
               inpl ? "in place" : "out of place", wrong);
        for (size_t i = 0; i < N; i++)
            iv[i] = (int32_t)input(me, i) * (me % 2 ? -1 : 1);
        OK(cadre_allreduce(CADRE_IN_PLACE, iv, N, CADRE_INT32, CADRE_MAX, W));
        wrong = 0;
        for (size_t i = 0; i < N; i++) {
            int32_t w = INT32_MIN;
            for (int r = 0; r < np; r++) {
                int32_t v = (int32_t)input(r, i) * (r % 2 ? -1 : 1);
                w = v > w ? v : w;
            }
            wrong += iv[i] != w;
        }
        EXPECT(wrong == 0, "int32 max in place: %ld wrong elements", wrong);
    }
    free(in);
    free(out);
    free(iv);
}

static const float SENTINEL = -12345.0f, OURS = 777.0f;

/* The call under test; rank 1's writes land in the others' `out`. */
static int under_test(float *in, float *out)
{
    if (mode == BCAST)
        return cadre_bcast(out, N, CADRE_FLOAT32, 1, W);
    return cadre_allreduce(in, out, N, CADRE_FLOAT32, CADRE_SUM, W);
}

static float want(size_t i)
{
    return mode == BCAST ? (float)root_data(i) : want_sum(i);
}

struct watch {
    volatile float *out; /* rank 0's output */
    pid_t peer;
    _Atomic int returned; /* rank 0's call returned */
    _Atomic int stopped;  /* rank 1 stopped */
    _Atomic int ours;     /* rank 0's output is its own again */
};

/* Rank 0's thread: stops rank 1 once it writes into rank 0's output, unless
 * rank 0's call returned first, and wakes it once rank 0's output is its
 * own again, or after PATIENT_STOP seconds. */
static void *watcher(void *arg)
{
    struct watch *w = arg;
    size_t first = first_written();
    while (w->out[first] == SENTINEL)
        if (atomic_load(&w->returned))
            return NULL;
    EXPECT(kill(w->peer, SIGSTOP) == 0, "SIGSTOP to rank 1");
    double t0 = ru_now();
    while (proc_state(w->peer) != 'T' && ru_now() - t0 < PATIENT)
        usleep(1000);
    atomic_store(&w->stopped, 1);
    while (!atomic_load(&w->ours) && ru_now() - t0 < PATIENT_STOP)
        usleep(1000);
    EXPECT(kill(w->peer, SIGCONT) == 0, "SIGCONT to rank 1");
    return NULL;
}

/* One try; 1 when rank 1 was stopped in the middle of its writes (rank 0's
 * call failed). */
static int stopped_writer(pid_t peer1, float *in, float *out)
{
    for (size_t i = 0; i < N; i++) {
        in[i] = input(me, i);
        out[i] = mode == BCAST && me == 1 ? want(i) : SENTINEL;
    }
    int x = 0, stopped = 0;
    cadre_request_t r;
    struct watch w = {.out = out, .peer = peer1};
    pthread_t t;
    if (me == 0)
        EXPECT(pthread_create(&t, NULL, watcher, &w) == 0, "pthread_create");
    int rc = under_test(in, out);
    if (me == 0) {
        atomic_store(&w.returned, 1);
        stopped = atomic_load(&w.stopped);
    }
    if (rc == CADRE_SUCCESS) {
        /* Rank 1 wrote nothing before rank 0 was done, or was stopped only
         * after its last write: rank 0 tries again. */
        long wrong = 0;
        for (size_t i = 0; i < N; i++)
            wrong += out[i] != want(i);
        EXPECT(wrong == 0, "%ld wrong elements", wrong);
        stopped = 0;
    } else if (me == 0) {
        EXPECT(stopped, "the call failed with rank 1 not stopped: %s: %s",
               cadre_error_string(rc), cadre_last_error());
        EXPECT(rc == CADRE_ERR_TIMEOUT, "the call with rank 1 stopped -> %s: %s",
               cadre_error_string(rc), cadre_last_error());
    } else {
        EXPECT(rc == CADRE_ERR_PEER || rc == CADRE_ERR_TIMEOUT, "the call -> %s: %s",
               cadre_error_string(rc), cadre_last_error());
    }
    if (me == 1) {
        /* The others read their buffers once this comes; then rank 0 says
         * whether rank 1 was stopped. */
        for (int q = 0; q < np; q++)
            if (q != 1) {
                OK(cadre_isend(&x, 1, CADRE_INT32, q, 1, W, &r));
                OK(cadre_wait_timeout(&r, PATIENT, CADRE_STATUS_IGNORE));
            }
    } else {
        for (size_t i = 0; i < N; i++)
            out[i] = OURS;
        if (me == 0) {
            atomic_store(&w.ours, 1);
            pthread_join(t, NULL);
        }
        /* Rank 1's call has returned once this comes. */
        OK(cadre_irecv(&x, 1, CADRE_INT32, 1, 1, W, &r));
        OK(cadre_wait_timeout(&r, PATIENT, CADRE_STATUS_IGNORE));
        size_t bad = N;
        for (size_t i = 0; i < N && bad == N; i++)
            if (out[i] != OURS)
                bad = i;
        EXPECT(bad == N, "rank 1 wrote into this rank's buffer after this rank's call returned: "
                         "element %zu of %zu",
               bad, N);
    }
    long changed = 0;
    for (size_t i = 0; i < N; i++)
        changed += in[i] != input(me, i);
    EXPECT(changed == 0, "%ld input elements changed", changed);
    if (me == 0) {
        for (int q = 1; q < np; q++) {
            OK(cadre_isend(&stopped, 1, CADRE_INT32, q, 2, W, &r));
            OK(cadre_wait_timeout(&r, PATIENT, CADRE_STATUS_IGNORE));
        }
    } else {
        OK(cadre_irecv(&stopped, 1, CADRE_INT32, 0, 2, W, &r));
        OK(cadre_wait_timeout(&r, PATIENT, CADRE_STATUS_IGNORE));
    }
    return stopped;
}

int main(int argc, char **argv)
{
    const char *m = getenv("DIRECTWRITE");
    mode = m && !strcmp(m, "bcast") ? BCAST : SLICES;
    if (!ru_init_np(&argc, &argv, "directwrite_test", mode == SLICES ? 3 : 2, &me))
        return 2;
    np = mode == SLICES ? 3 : 2;
    checked();
    /* Rank 1's pid, for rank 0. */
    int pid = (int)getpid(), pid1 = 0;
    OK(cadre_bcast(me == 1 ? &pid : &pid1, 1, CADRE_INT32, 1, W));
    if (me == 1)
        pid1 = pid;
    float *in = malloc(N * sizeof *in), *out = malloc(N * sizeof *out);
    EXPECT(in && out, "no memory");
    int tries = 0;
    while (in && out && tries < TRIES && !stopped_writer((pid_t)pid1, in, out))
        tries++;
    EXPECT(tries < TRIES, "rank 1 was never stopped in the middle of its writes in %d tries",
           TRIES);
    free(in);
    free(out);
    cadre_finalize();
    if (!ru_failures)
        printf("directwrite_test: rank %d ok\n", me);
    return ru_failures != 0;
}
