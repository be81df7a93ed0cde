/* send_recv: blocking point-to-point, after "Writing Distributed Applications
 * with PyTorch". Both ranks start with a zero tensor; rank 0 adds 1 and sends
 * it to rank 1, which receives it, so that both end up with 1.0:
 *
 *   $ cadrerun -n 2 ./send_recv
 *   Rank 0 has data 1.0
 *   Rank 1 has data 1.0
 *
 * Ranks beyond 1 take no part and keep 0.0. */
#include <stdio.h>
#include <stdlib.h>

#include <cadre.h>

#define CHECK(call)                                                                       \
    do {                                                                                  \
        if ((call) != CADRE_SUCCESS) {                                                    \
            fprintf(stderr, "send_recv: %s failed: %s\n", #call, cadre_last_error());     \
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
    if (size < 2) {
        fprintf(stderr, "send_recv: needs at least 2 ranks (cadrerun -n 2 %s)\n", argv[0]);
        return 1;
    }

    float tensor[1] = {0.0f}; /* torch.zeros(1) */
    if (rank == 0) {
        tensor[0] += 1;
        /* Send the tensor to process 1 */
        CHECK(cadre_send(tensor, 1, CADRE_FLOAT32, 1, 0, CADRE_COMM_WORLD));
    } else if (rank == 1) {
        /* Receive tensor from process 0 */
        CHECK(cadre_recv(tensor, 1, CADRE_FLOAT32, 0, 0, CADRE_COMM_WORLD, CADRE_STATUS_IGNORE));
    }
    printf("Rank %d has data %.1f\n", rank, tensor[0]);

    CHECK(cadre_finalize());
    return 0;
}
