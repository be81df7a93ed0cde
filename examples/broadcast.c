/* broadcast: dist.broadcast(tensor, src=0), after "Writing Distributed
 * Applications with PyTorch". Every rank starts with its own value, rank + 1;
 * after the broadcast from rank 0 all hold rank 0's 1.0:
 *
 *   $ cadrerun -n 4 ./broadcast
 *   Rank 0 has data 1.0
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
            fprintf(stderr, "broadcast: %s failed: %s\n", #call, cadre_last_error());     \
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

    float tensor[1] = {(float)(rank + 1)};
    CHECK(cadre_bcast(tensor, 1, CADRE_FLOAT32, 0, CADRE_COMM_WORLD));
    printf("Rank %d has data %.1f\n", rank, tensor[0]);

    CHECK(cadre_finalize());
    return 0;
}
