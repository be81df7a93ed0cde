/* isend_irecv: nonblocking point-to-point, after "Writing Distributed
 * Applications with PyTorch". As send_recv, but rank 0 posts cadre_isend and
 * rank 1 cadre_irecv; each waits on its request before touching the tensor
 * (writing it after isend, or reading it after irecv, before the wait is
 * undefined). After cadre_wait both have 1.0:
 *
 *   $ cadrerun -n 2 ./isend_irecv
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
            fprintf(stderr, "isend_irecv: %s failed: %s\n", #call, cadre_last_error());   \
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
        fprintf(stderr, "isend_irecv: needs at least 2 ranks (cadrerun -n 2 %s)\n", argv[0]);
        return 1;
    }

    float tensor[1] = {0.0f}; /* torch.zeros(1) */
    cadre_request_t req = CADRE_REQUEST_NULL;
    if (rank == 0) {
        tensor[0] += 1;
        /* Send the tensor to process 1 */
        CHECK(cadre_isend(tensor, 1, CADRE_FLOAT32, 1, 0, CADRE_COMM_WORLD, &req));
    } else if (rank == 1) {
        /* Receive tensor from process 0 */
        CHECK(cadre_irecv(tensor, 1, CADRE_FLOAT32, 0, 0, CADRE_COMM_WORLD, &req));
    }
    /* A null request (ranks beyond 1) completes at once. */
    CHECK(cadre_wait(&req, CADRE_STATUS_IGNORE));
    printf("Rank %d has data %.1f\n", rank, tensor[0]);

    CHECK(cadre_finalize());
    return 0;
}
