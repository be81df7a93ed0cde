/* reduce_scatter: dist.reduce_scatter(output, input_list, op=SUM), after
 * "Writing Distributed Applications with PyTorch". Rank r's input list holds
 * size tensors of 2 elements; tensor j is [(r+1)*1, (r+1)*2] raised
 * elementwise to the power j+1. Rank j receives the sum over all ranks of
 * tensor j:
 *
 *   $ cadrerun -n 3 ./reduce_scatter
 *   Rank 0 has data [6.0, 12.0]       (1+2+3,  2+4+6)
 *   Rank 1 has data [14.0, 56.0]      (1+4+9,  4+16+36)
 *   Rank 2 has data [36.0, 288.0]     (1+8+27, 8+64+216)
 */
#include <stdio.h>
#include <stdlib.h>

#include <cadre.h>

#define CHECK(call)                                                                       \
    do {                                                                                  \
        if ((call) != CADRE_SUCCESS) {                                                    \
            fprintf(stderr, "reduce_scatter: %s failed: %s\n", #call, cadre_last_error()); \
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

    /* input_list, tensor after tensor: size * 2 floats. */
    float *input_list = malloc((size_t)size * 2 * sizeof *input_list);
    if (!input_list) {
        fprintf(stderr, "reduce_scatter: out of memory\n");
        return 1;
    }
    for (int j = 0; j < size; j++) {
        for (int k = 0; k < 2; k++) {
            float base = (float)((rank + 1) * (k + 1)), p = 1.0f;
            for (int e = 0; e <= j; e++)
                p *= base;
            input_list[2 * j + k] = p;
        }
    }
    float output[2] = {0.0f, 0.0f};
    CHECK(cadre_reduce_scatter(input_list, output, 2, CADRE_FLOAT32, CADRE_SUM,
                               CADRE_COMM_WORLD));
    print_list(rank, output, 2);
    free(input_list);

    CHECK(cadre_finalize());
    return 0;
}
