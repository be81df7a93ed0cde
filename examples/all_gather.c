/* all_gather: dist.all_gather(tensor_list, tensor), after "Writing
 * Distributed Applications with PyTorch". Rank r contributes a tensor holding
 * r + 1; every rank ends with all of them, in rank order:
 *
 *   $ cadrerun -n 4 ./all_gather
 *   Rank 0 has data [1.0, 2.0, 3.0, 4.0]
 *   Rank 1 has data [1.0, 2.0, 3.0, 4.0]
 *   Rank 2 has data [1.0, 2.0, 3.0, 4.0]
 *   Rank 3 has data [1.0, 2.0, 3.0, 4.0]
 */
#include <stdio.h>
#include <stdlib.h>

#include <cadre.h>

#define CHECK(call)                                                                       \
    do {                                                                                  \
        if ((call) != CADRE_SUCCESS) {                                                    \
            fprintf(stderr, "all_gather: %s failed: %s\n", #call, cadre_last_error());    \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

/* One line, "Rank r has data [a, b, ...]": stdout is line-buffered, so the
 * pieces leave together at the newline. */
static void print_list(int rank, const float *v, int n)
{
    printf("Rank %d has data [", rank);
    for (int i = 0; i < n; i++)
        printf("%s%.1f", i ? ", " : "", v[i]);
    printf("]\n");
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(cadre_init(&argc, &argv));
    int rank, size;
    CHECK(cadre_comm_rank(CADRE_COMM_WORLD, &rank));
    CHECK(cadre_comm_size(CADRE_COMM_WORLD, &size));

    float tensor[1] = {(float)(rank + 1)};
    float *tensor_list = calloc((size_t)size, sizeof *tensor_list); /* size tensors of 1 */
    if (!tensor_list) {
        fprintf(stderr, "all_gather: out of memory\n");
        return 1;
    }
    CHECK(cadre_allgather(tensor, tensor_list, 1, CADRE_FLOAT32, CADRE_COMM_WORLD));
    print_list(rank, tensor_list, size);
    free(tensor_list);

    CHECK(cadre_finalize());
    return 0;
}
