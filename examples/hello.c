/* hello: every rank prints its rank, the world size, its local rank and GPU. */
#include <stdio.h>
#include <stdlib.h>

#include <cadre.h>

int main(int argc, char **argv)
{
    int rc = cadre_init(&argc, &argv);
    if (rc != CADRE_SUCCESS) {
        fprintf(stderr, "hello: cadre_init: %s\n", cadre_last_error());
        return 1;
    }
    int rank, size, local_rank, local_size, dev;
    cadre_comm_rank(CADRE_COMM_WORLD, &rank);
    cadre_comm_size(CADRE_COMM_WORLD, &size);
    cadre_local_rank(&local_rank);
    cadre_local_size(&local_size);
    cadre_device(&dev);
    char gpu[16] = "none";
    if (dev >= 0)
        snprintf(gpu, sizeof gpu, "%d", dev);
    printf("hello from rank %d of %d (local rank %d of %d, GPU %s)\n", rank, size, local_rank,
           local_size, gpu);
    return cadre_finalize() == CADRE_SUCCESS ? 0 : 1;
}
