/* gpu_test.h - what the device-buffer test programs share: the rank, the
 * size, the failure count and the stream of the program, and the checks of
 * cadre and CUDA calls. Included once per program, after cadre.h and the
 * CUDA runtime header. */
#ifndef CADRE_GPU_TEST_H
#define CADRE_GPU_TEST_H

#include <stdio.h>
#include <stdlib.h>

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

#endif /* CADRE_GPU_TEST_H */
