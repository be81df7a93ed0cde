/* The reduction kernels of device/device_kernels.cu against the host kernels of
 * coll/coll_reduce.c, bit for bit: every datatype and op, odd counts, aligned
 * and misaligned buffers. Exit 77 ("skipped: no GPU") without a GPU. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "device/device.h"

static int fails;

static size_t esize(int dt)
{
    static const size_t sz[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
    return sz[dt];
}

static void fill(unsigned char *b, size_t bytes, cadre_datatype_t dt, unsigned seed)
{
    size_t es = esize(dt), n = bytes / es;
    for (size_t i = 0; i < n; i++) {
        unsigned v = (unsigned)(i * 2654435761u + seed * 40503u) >> 7;
        switch (dt) {
        case CADRE_FLOAT16: ((uint16_t *)b)[i] = cadre__float_to_half((float)(v % 64) / 8.0f - 3.0f); break;
        case CADRE_BFLOAT16: ((uint16_t *)b)[i] = cadre__float_to_bf16((float)(v % 64) / 8.0f - 3.0f); break;
        case CADRE_FLOAT32: ((float *)b)[i] = (float)(v % 1000) / 7.0f - 50.0f; break;
        case CADRE_FLOAT64: ((double *)b)[i] = (double)(v % 1000) / 7.0 - 50.0; break;
        default: for (size_t k = 0; k < es; k++) b[i * es + k] = (unsigned char)(v >> (k % 3)); break;
        }
    }
}

int main(void)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("skipped: no GPU\n");
        return 77;
    }
    const size_t counts[] = {1, 3, 7, 8, 31, 1000, 65537, 1 << 20};
    const size_t offs[] = {0, 1, 3}; /* elements: 16-byte aligned or not */
    size_t maxb = ((1 << 20) + 8) * 8;
    unsigned char *hd = malloc(maxb), *hs = malloc(maxb), *ref = malloc(maxb), *out = malloc(maxb);
    void *dd, *ds;
    cudaMalloc(&dd, maxb);
    cudaMalloc(&ds, maxb);
    int cases = 0;
    for (int dt = CADRE_INT8; dt <= CADRE_FLOAT64; dt++) {
        size_t es = esize(dt);
        int isf = dt >= CADRE_FLOAT16;
        for (int op = CADRE_SUM; op <= CADRE_AVG; op++) {
            if (op == CADRE_AVG && !isf)
                continue;
            for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
                for (size_t o = 0; o < 3; o++) {
                    size_t n = counts[c], off = offs[o] * es, bytes = n * es;
                    fill(hd, bytes + off, dt, 1);
                    fill(hs, bytes + off, dt, 2);
                    cudaMemcpy(dd, hd, bytes + off, cudaMemcpyHostToDevice);
                    cudaMemcpy(ds, hs, bytes + off, cudaMemcpyHostToDevice);
                    memcpy(ref, hd, bytes + off);
                    cadre__coll_reduce(ref + off, hs + off, n, dt, op == CADRE_AVG ? CADRE_SUM : op);
                    int e = cadre__gpu_reduce((char *)dd + off, (char *)ds + off, n, dt,
                                          op == CADRE_AVG ? CADRE_SUM : op, NULL);
                    if (!e && op == CADRE_AVG) {
                        cadre__coll_scale(ref + off, n, dt, 3);
                        e = cadre__gpu_scale((char *)dd + off, n, dt, 3, NULL);
                    }
                    cudaError_t ce = cudaDeviceSynchronize();
                    cudaMemcpy(out, dd, bytes + off, cudaMemcpyDeviceToHost);
                    cases++;
                    if (e || ce != cudaSuccess || memcmp(out, ref, bytes + off)) {
                        size_t i = 0;
                        while (i < bytes + off && out[i] == ref[i])
                            i++;
                        fprintf(stderr, "kernel_test: dt %d op %d count %zu offset %zu: %s (first "
                                        "difference at byte %zu)\n",
                                dt, op, n, offs[o], e || ce ? cudaGetErrorString(ce ? ce : (cudaError_t)e) : "wrong result", i);
                        if (++fails > 20)
                            return 1;
                    }
                }
            }
        }
    }
    printf("kernel_test: %d cases, %d failed\n", cases, fails);
    return fails != 0;
}
