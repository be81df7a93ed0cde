/* gpu_peerfail.c - a rank killed in the middle of a direct device collective
 * (issue 19). Under cadrerun --keep-going with all ranks on one GPU, a loop
 * of iallreduce on device buffers, each waited for and checked; at
 * iteration 5 rank 2 (not the GPU's leader) holds its stream with a
 * spinning kernel, makes the call (its stream never reaches it) and
 * SIGKILLs itself. Every survivor's cadre_wait must return CADRE_ERR_PEER
 * naming rank 2 within 5 s, its stream must drain (no stream left waiting
 * for the dead rank), and its next device collective must fail at once.
 * Each survivor prints "gpu_peerfail: rank R ok". */
#include <cuda_runtime.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cadre.h"
#include "device/device.h"
#include "gpu_test.h"

int main(int argc, char **argv)
{
    gpu_test_init(&argc, &argv);
    size_t n = (size_t)1 << 20;
    float *d, *h = malloc(n * sizeof *h);
    unsigned *rel;
    CU(cudaMalloc((void **)&d, n * sizeof *d));
    CU(cudaHostAlloc((void **)&rel, sizeof *rel, cudaHostAllocMapped));
    *(volatile unsigned *)rel = 0;
    int rc = CADRE_SUCCESS, it;
    double t0 = 0;
    for (it = 0; it < 50; it++) {
        for (size_t i = 0; i < n; i++)
            h[i] = (float)(i % 7) + (float)me;
        CU(cudaMemcpyAsync(d, h, n * sizeof *d, cudaMemcpyHostToDevice, S));
        if (me == 2 && it == 5)
            CU((cudaError_t)cadre__gpu_busy_kernel(0, rel, S));
        cadre_request_t q;
        t0 = now();
        rc = cadre_iallreduce(CADRE_IN_PLACE, d, n, CADRE_FLOAT32, CADRE_SUM, CADRE_COMM_WORLD, &q);
        if (me == 2 && it == 5) {
            usleep(300000);
            raise(SIGKILL);
        }
        if (rc == CADRE_SUCCESS)
            rc = cadre_wait_timeout(&q, 30, NULL);
        if (rc != CADRE_SUCCESS)
            break;
        CU(cudaMemcpyAsync(h, d, n * sizeof *d, cudaMemcpyDeviceToHost, S));
        CU(cudaStreamSynchronize(S));
        float base = (float)(np * (np - 1) / 2);
        for (size_t i = 0; i < n; i++)
            if (h[i] != (float)np * (float)(i % 7) + base) {
                EXPECT(0, "iteration %d: element %zu is %g", it, i, h[i]);
                break;
            }
    }
    double t = now() - t0;
    EXPECT(rc == CADRE_ERR_PEER, "iallreduce returned %s at iteration %d: %s",
           cadre_error_string(rc), it, cadre_last_error());
    EXPECT(strstr(cadre_last_error(), "rank 2") != NULL, "message: %s", cadre_last_error());
    EXPECT(t < 5.0, "CADRE_ERR_PEER after %.2f s", t);
    EXPECT(it == 5, "failed at iteration %d", it);
    t0 = now();
    cudaError_t e = cudaStreamSynchronize(S);
    EXPECT(e == cudaSuccess, "the stream after the failure: %s", cudaGetErrorString(e));
    EXPECT(now() - t0 < 5.0, "the stream drained after %.2f s", now() - t0);
    t0 = now();
    rc = cadre_allreduce(CADRE_IN_PLACE, d, n, CADRE_FLOAT32, CADRE_SUM, CADRE_COMM_WORLD);
    EXPECT(rc != CADRE_SUCCESS, "a device allreduce after the failure succeeded");
    EXPECT(now() - t0 < 5.0, "the allreduce after the failure took %.2f s", now() - t0);
    cadre_finalize();
    if (!fails)
        printf("gpu_peerfail: rank %d saw CADRE_ERR_PEER after %.3f s\ngpu_peerfail: rank %d ok\n",
               me, t, me);
    return fails ? 1 : 0;
}
