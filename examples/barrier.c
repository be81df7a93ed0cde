/* barrier: dist.barrier(), after "Writing Distributed Applications with
 * PyTorch". Rank r sleeps r seconds, then enters the barrier; no rank leaves
 * it before the last one, rank size-1, has entered, so every rank passes it
 * size-1 seconds after the start:
 *
 *   $ cadrerun -n 3 ./barrier
 *   Rank 0 passed the barrier after 2 s
 *   Rank 1 passed the barrier after 2 s
 *   Rank 2 passed the barrier after 2 s
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <cadre.h>

#define CHECK(call)                                                                       \
    do {                                                                                  \
        if ((call) != CADRE_SUCCESS) {                                                    \
            fprintf(stderr, "barrier: %s failed: %s\n", #call, cadre_last_error());       \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(cadre_init(&argc, &argv));
    int rank;
    CHECK(cadre_comm_rank(CADRE_COMM_WORLD, &rank));

    /* cadre_init returns on every rank at about the same time (it ends with a
     * PMIx barrier of all ranks), so the ranks' clocks start together. */
    double start = now();
    sleep((unsigned)rank);
    CHECK(cadre_barrier(CADRE_COMM_WORLD));
    long elapsed = (long)(now() - start + 0.5); /* whole seconds, rounded */
    printf("Rank %d passed the barrier after %ld s\n", rank, elapsed);

    CHECK(cadre_finalize());
    return 0;
}
