/* gather: dist.gather(tensor, gather_list, dst=0), after "Writing Distributed
 * Applications with PyTorch". Rank r sends a tensor holding r + 1; rank 0
 * receives them all, in rank order, and prints the list; the other ranks
 * print their own tensor:
 *
 *   $ cadrerun -n 4 ./gather
 *   Rank 0 has data [1.0, 2.0, 3.0, 4.0]
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
            fprintf(stderr, "gather: %s failed: %s\n", #call, cadre_last_error());        \
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
    float *gather_list = NULL; /* size tensors of 1 element, at the root only */
    if (rank == 0) {
        gather_list = calloc((size_t)size, sizeof *gather_list);
        if (!gather_list) {
            fprintf(stderr, "gather: out of memory\n");
            return 1;
        }
    }
    CHECK(cadre_gather(tensor, gather_list, 1, CADRE_FLOAT32, 0, CADRE_COMM_WORLD));
    if (rank == 0)
        print_list(rank, gather_list, size);
    else
        printf("Rank %d has data %.1f\n", rank, tensor[0]);
    free(gather_list);

    CHECK(cadre_finalize());
    return 0;
}
