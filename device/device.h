/*
 * device.h - the kernels of device/device_kernels.cu and device_direct.cu.
 * The device path's entry points, which the public entry points call, are
 * the table of runtime/runtime_device.h; see device_proxy.c for the
 * design.
 */
#ifndef CADRE_GPU_H
#define CADRE_GPU_H

#include "config.h"

#include <stddef.h>

#include "cadre.h"
#include "runtime/runtime_device.h" /* CADRE__GPU_NOT_MINE, cadre__gpu_enabled() */

/* ---- kernels (device/device_kernels.cu); stream is a cudaStream_t ------------------ */
#ifdef __cplusplus
extern "C" {
#endif
/* dst[i] = dst[i] op src[i] for n elements; AVG is not an op here (SUM, then
 * cadre__gpu_scale). Returns a cudaError_t (0 = success). */
int cadre__gpu_reduce(void *dst, const void *src, size_t n, int dt, int op, void *stream);
/* buf[i] /= divisor, floating types only. */
int cadre__gpu_scale(void *buf, size_t n, int dt, int divisor, void *stream);
/* One thread that spins until *flag >= value: the stream wait used where
 * stream memory operations (cuStreamWaitValue32) are unavailable. */
int cadre__gpu_spin_wait(volatile unsigned int *flag, unsigned int value, void *stream);
/* Copies slot->n bytes (at most cap) from slot->src to dst; slot is a struct
 * gpu_copy_slot in pinned memory, read when the kernel runs. */
int cadre__gpu_copy_slot(void *dst, const void *slot, size_t cap, void *stream);
/* The direct allreduce kernels (device/device_direct.cu); p is a struct
 * gpu_direct_args. */
int cadre__gpu_direct_launch(const void *p, void *stream);
/* The device address of gate word i (< GPU_DIRECT_GATES), or NULL. */
unsigned int *cadre__gpu_direct_gate(int i);
/* Load every kernel of device_kernels.cu / device_direct.cu now, not at
 * its first launch (lazy loading waits for the context's streams there);
 * cudaError_t. Called when the device is bound. */
int cadre__gpu_kernels_load(void);
int cadre__gpu_direct_load(void);
/* A kernel that spins for about `ns` nanoseconds, or until *release != 0
 * when release is given: the long kernel of the stream-semantics tests. */
int cadre__gpu_busy_kernel(unsigned long long ns, volatile unsigned int *release, void *stream);
#ifdef __cplusplus
}
#endif

#endif /* CADRE_GPU_H */
