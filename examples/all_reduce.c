/* all_reduce: the All-Reduce example of "Writing Distributed Applications
 * with PyTorch", dist.all_reduce(tensor, op=SUM) over the world. Every rank
 * starts with a tensor of ones and ends with the sum, the world size:
 *
 *   $ cadrerun -n 4 ./all_reduce
 *   Rank 0 has data 4.0
 *   Rank 1 has data 4.0
 *   Rank 2 has data 4.0
 *   Rank 3 has data 4.0
 */
#include <stdio.h>
#include <stdlib.h>

#include <cadre.h>

#define CHECK(call)                                                                       \
    do {                                                                                  \
        if ((call) != CADRE_SUCCESS) {                                                    \
            fprintf(stderr, "all_reduce: %s failed: %s\n", #call, cadre_last_error());    \
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
    /* In place, as torch: the tensor is both input and result. */
    CHECK(cadre_allreduce(CADRE_IN_PLACE, tensor, 1, CADRE_FLOAT32, CADRE_SUM, CADRE_COMM_WORLD));
    printf("Rank %d has data %.1f\n", rank, tensor[0]);

    CHECK(cadre_finalize());
    return 0;
}
