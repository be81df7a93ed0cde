/* scatter: dist.scatter(tensor, scatter_list, src=0), after "Writing
 * Distributed Applications with PyTorch". Rank 0 holds scatter_list =
 * [1.0, 2.0, ..., size]; tensor i of it goes to rank i:
 *
 *   $ cadrerun -n 4 ./scatter
 *   Rank 0 has data 1.0
 *   Rank 1 has data 2.0
 *   Rank 2 has data 3.0
 *   Rank 3 has data 4.0
 */
#include <stdio.h>
#include <stdlib.h>

#include <cadre.h>

#define CHECK(call)                                                                       \
    do {                                                                                  \
        if ((call) != CADRE_SUCCESS) {                                                    \
            fprintf(stderr, "scatter: %s failed: %s\n", #call, cadre_last_error());       \
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

    float tensor[1] = {0.0f}; /* torch.zeros(1) */
    float *scatter_list = NULL; /* size tensors of 1 element, at the root only */
    if (rank == 0) {
        scatter_list = malloc((size_t)size * sizeof *scatter_list);
        if (!scatter_list) {
            fprintf(stderr, "scatter: out of memory\n");
            return 1;
        }
        for (int i = 0; i < size; i++)
            scatter_list[i] = (float)(i + 1);
    }
    CHECK(cadre_scatter(scatter_list, tensor, 1, CADRE_FLOAT32, 0, CADRE_COMM_WORLD));
    printf("Rank %d has data %.1f\n", rank, tensor[0]);
    free(scatter_list);

    CHECK(cadre_finalize());
    return 0;
}
