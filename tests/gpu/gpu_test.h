/* gpu_test.h - what the device-buffer test programs share: the rank, the
 * size, the failure count and the stream of the program, and the checks of
 * cadre and CUDA calls. Included once per program, after cadre.h and the
 * CUDA runtime header. */
#ifndef CADRE_GPU_TEST_H
#define CADRE_GPU_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int me, np, fails;
static cudaStream_t S;

#define CK(call)                                                                           \
    do {                                                                                   \
        int rc_ = (call);                                                                  \
        if (rc_ != CADRE_SUCCESS) {                                                        \
            fprintf(stderr, "rank %d: %s:%d: %s: %s\n", me, __FILE__, __LINE__, #call,     \
                    cadre_last_error());                                                   \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)
#define CU(call)                                                                           \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            fprintf(stderr, "rank %d: %s:%d: %s: %s\n", me, __FILE__, __LINE__, #call,     \
                    cudaGetErrorString(e_));                                               \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)
#define EXPECT(cond, ...)                                                                  \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "rank %d: FAIL %s:%d: ", me, __FILE__, __LINE__);              \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
            if (++fails > 20)                                                              \
                exit(1);                                                                   \
        }                                                                                  \
    } while (0)

/* Seconds on the monotonic clock. */
static inline double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* The start of every program: exit 77 ("skipped") without a GPU, else
 * cadre_init, me and np, and S made the world's stream. */
static void gpu_test_init(int *argc, char ***argv)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("skipped: no GPU\n");
        exit(77);
    }
    CK(cadre_init(argc, argv));
    CK(cadre_comm_rank(CADRE_COMM_WORLD, &me));
    CK(cadre_comm_size(CADRE_COMM_WORLD, &np));
    CU(cudaStreamCreateWithFlags(&S, cudaStreamNonBlocking));
    CK(cadre_comm_set_stream(CADRE_COMM_WORLD, S));
}

#endif /* CADRE_GPU_TEST_H */
