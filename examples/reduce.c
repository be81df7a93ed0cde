/* reduce: dist.reduce(tensor, dst=0, op=SUM), after "Writing Distributed
 * Applications with PyTorch". Every rank contributes a tensor of ones; rank 0
 * reduces in place (CADRE_IN_PLACE: its input is its result buffer) and ends
 * with the world size, the others keep their 1.0:
 *
 *   $ cadrerun -n 4 ./reduce
 *   Rank 0 has data 4.0
 *   Rank 1 has data 1.0
 *   Rank 2 has data 1.0
 *   Rank 3 has data 1.0
 */
#include <stdio.h>
#include <stdlib.h>

#include <cadre.h>

#define CHECK(call)                                                                       \
    do {                                                                                  \
        if ((call) != CADRE_SUCCESS) {                                                    \
            fprintf(stderr, "reduce: %s failed: %s\n", #call, cadre_last_error());        \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(cadre_init(&argc, &argv));
    int rank, size;
    CHECK(cadre_comm_rank(CADRE_COMM_WORLD, &rank));
    CHECK(cadre_comm_size(CADRE_COMM_WORLD, &size));

    float tensor[1] = {1.0f}; /* torch.ones(1) */
    if (rank == 0)
        CHECK(cadre_reduce(CADRE_IN_PLACE, tensor, 1, CADRE_FLOAT32, CADRE_SUM, 0,
                           CADRE_COMM_WORLD));
    else /* the result buffer matters at the root only */
        CHECK(cadre_reduce(tensor, NULL, 1, CADRE_FLOAT32, CADRE_SUM, 0, CADRE_COMM_WORLD));
    printf("Rank %d has data %.1f\n", rank, tensor[0]);

    CHECK(cadre_finalize());
    return 0;
}
