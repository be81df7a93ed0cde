/* The two-rank allreduce of a busy machine writes each chunk into both
 * ranks' outputs (coll_direct_pair.c, allreduce_pair_claim; run with 2
 * ranks, CADRE_WAIT=sleep, which counts the cores as busy, and
 * CADRE_TIMEOUT=2). A rank that leaves the call must never have its memory
 * written by its peer afterwards.
 *
 * Rank 0 watches its own output during an allreduce of 32 MiB: rank 1
 * claims chunks from the back and writes them there, so once the last
 * element changes rank 1 is at work in round 2. A thread of rank 0 then
 * stops rank 1 (SIGSTOP). Rank 0 reduces the chunks left and waits for rank
 * 1's round 3 until CADRE_TIMEOUT: its call must fail (CADRE_ERR_TIMEOUT).
 * (Where rank 0 finished before rank 1 wrote anything, or rank 1 was
 * stopped after its last write, the call succeeds, checked, and the test
 * tries again, up to TRIES times.)
 * Rank 0 then fills its output with a pattern of its own and wakes rank 1
 * (SIGCONT), which goes on with the chunk it was stopped in and must not
 * write it into rank 0's output: the pattern must survive until rank 1 has
 * returned from its call (it says so with a message). Rank 1's call either
 * fails (rank 0 left) or, where rank 1 was stopped after its last write,
 * succeeds with every element right. Where rank 1 was stopped in the
 * middle of a write, rank 0's call waits for that write before it returns:
 * the thread wakes rank 1 after PATIENT_STOP seconds in any case.
 *
 * Before that, allreduces of the same variant with every element checked:
 * in place and not, float32 sum and int32 max. Prints "pairwrite_test: rank
 * r ok". */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>

#include "rank_util.h"

#define W CADRE_COMM_WORLD
#define N (((size_t)8 << 20) + 3) /* float32: 32 MiB, 128 chunks and a bit */
#define PATIENT 60.0 /* s, for the waits outside CADRE_TIMEOUT */
#define PATIENT_STOP 4.0
#define TRIES 20

static int me;

static float input(int rank, size_t i)
{
    return (float)((i * 7 + (size_t)rank * 13) % 1000) - 500;
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

/* Checked allreduces of the claimed variant. */
static void checked(void)
{
    float *in = malloc(N * sizeof *in), *out = malloc(N * sizeof *out);
    int32_t *iv = malloc(N * sizeof *iv);
    if (!in || !out || !iv) {
        EXPECT(0, "no memory");
        return;
    }
    for (int inpl = 0; inpl < 2; inpl++) {
        for (size_t i = 0; i < N; i++) {
            in[i] = input(me, i);
            out[i] = -1;
        }
        OK(cadre_allreduce(inpl ? CADRE_IN_PLACE : in, inpl ? in : out, N, CADRE_FLOAT32,
                           CADRE_SUM, W));
        const float *res = inpl ? in : out;
        long wrong = 0;
        for (size_t i = 0; i < N; i++)
            wrong += res[i] != input(0, i) + input(1, i);
        EXPECT(wrong == 0, "float32 sum, %s: %ld wrong elements", inpl ? "in place" : "out of place",
               wrong);
        for (size_t i = 0; i < N; i++)
            iv[i] = (int32_t)input(me, i) * (me ? -1 : 1);
        OK(cadre_allreduce(CADRE_IN_PLACE, iv, N, CADRE_INT32, CADRE_MAX, W));
        wrong = 0;
        for (size_t i = 0; i < N; i++) {
            int32_t a = (int32_t)input(0, i), b = -(int32_t)input(1, i);
            wrong += iv[i] != (a > b ? a : b);
        }
        EXPECT(wrong == 0, "int32 max in place: %ld wrong elements", wrong);
    }
    free(in);
    free(out);
    free(iv);
}

static const float SENTINEL = -12345.0f, OURS = 777.0f;

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
    while (w->out[N - 1] == SENTINEL)
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

/* One try; 1 when rank 1 was stopped in round 2 (rank 0's call failed). */
static int stopped_writer(pid_t peer, float *in, float *out)
{
    for (size_t i = 0; i < N; i++) {
        in[i] = input(me, i);
        out[i] = SENTINEL;
    }
    int x = 0, stopped;
    cadre_request_t r;
    if (me == 1) {
        int rc = cadre_allreduce(in, out, N, CADRE_FLOAT32, CADRE_SUM, W);
        if (rc == CADRE_SUCCESS) {
            long wrong = 0;
            for (size_t i = 0; i < N; i++)
                wrong += out[i] != input(0, i) + input(1, i);
            EXPECT(wrong == 0, "%ld wrong elements", wrong);
        } else {
            EXPECT(rc == CADRE_ERR_PEER || rc == CADRE_ERR_TIMEOUT,
                   "the call that was stopped -> %s: %s", cadre_error_string(rc),
                   cadre_last_error());
        }
        /* Rank 0 reads its output once this comes, then says whether rank
         * 1 was stopped. */
        OK(cadre_isend(&x, 1, CADRE_INT32, 0, 1, W, &r));
        OK(cadre_wait_timeout(&r, PATIENT, CADRE_STATUS_IGNORE));
        OK(cadre_irecv(&stopped, 1, CADRE_INT32, 0, 2, W, &r));
        OK(cadre_wait_timeout(&r, PATIENT, CADRE_STATUS_IGNORE));
        return stopped;
    }
    struct watch w = {.out = out, .peer = peer};
    pthread_t t;
    EXPECT(pthread_create(&t, NULL, watcher, &w) == 0, "pthread_create");
    int rc = cadre_allreduce(in, out, N, CADRE_FLOAT32, CADRE_SUM, W);
    atomic_store(&w.returned, 1);
    stopped = atomic_load(&w.stopped);
    if (rc == CADRE_SUCCESS) {
        /* Rank 1 wrote nothing before rank 0 was done, or was stopped only
         * after its last write: try again. */
        long wrong = 0;
        for (size_t i = 0; i < N; i++)
            wrong += out[i] != input(0, i) + input(1, i);
        EXPECT(wrong == 0, "%ld wrong elements", wrong);
        stopped = 0;
    } else {
        EXPECT(stopped, "the call failed with rank 1 not stopped: %s: %s",
               cadre_error_string(rc), cadre_last_error());
        EXPECT(rc == CADRE_ERR_TIMEOUT, "the call with rank 1 stopped -> %s: %s",
               cadre_error_string(rc), cadre_last_error());
    }
    for (size_t i = 0; i < N; i++)
        out[i] = OURS;
    atomic_store(&w.ours, 1);
    pthread_join(t, NULL);
    /* Rank 1's call has returned once this comes. */
    OK(cadre_irecv(&x, 1, CADRE_INT32, 1, 1, W, &r));
    OK(cadre_wait_timeout(&r, PATIENT, CADRE_STATUS_IGNORE));
    size_t bad = N;
    for (size_t i = 0; i < N && bad == N; i++)
        if (out[i] != OURS)
            bad = i;
    EXPECT(bad == N, "rank 1 wrote into rank 0's output after rank 0's call returned: "
                     "element %zu of %zu",
           bad, N);
    long changed = 0;
    for (size_t i = 0; i < N; i++)
        changed += in[i] != input(0, i);
    EXPECT(changed == 0, "%ld input elements changed", changed);
    OK(cadre_isend(&stopped, 1, CADRE_INT32, 1, 2, W, &r));
    OK(cadre_wait_timeout(&r, PATIENT, CADRE_STATUS_IGNORE));
    return stopped;
}

int main(int argc, char **argv)
{
    if (!ru_init_np(&argc, &argv, "pairwrite_test", 2, &me))
        return 2;
    checked();
    int mine = (int)getpid(), theirs = 0;
    OK(cadre_sendrecv(&mine, 1, !me, 0, &theirs, 1, !me, 0, CADRE_INT32, W, CADRE_STATUS_IGNORE));
    float *in = malloc(N * sizeof *in), *out = malloc(N * sizeof *out);
    EXPECT(in && out, "no memory");
    int tries = 0;
    while (in && out && !ru_failures && tries < TRIES && !stopped_writer((pid_t)theirs, in, out))
        tries++;
    EXPECT(tries < TRIES, "rank 1 was never stopped in round 2 in %d tries", TRIES);
    free(in);
    free(out);
    cadre_finalize();
    if (!ru_failures)
        printf("pairwrite_test: rank %d ok\n", me);
    return ru_failures != 0;
}
