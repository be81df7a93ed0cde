/* The one-node device paths under cadrerun: point-to-point between device
 * buffers (CUDA IPC where the ranks share a node: offsets inside an
 * allocation, a buffer sent twice, a buffer freed and allocated again, a host
 * buffer on the other side, any source, a short message) and allreduce,
 * reduce_scatter and allgather on device buffers (the direct kernels where
 * they apply; CADRE_GPU_ALGO forces one), every datatype and op, odd counts,
 * misaligned and in-place buffers,
 * blocking and nonblocking, on the world and on a split communicator. Every
 * element is checked against a reference computed here, and the bytes
 * around the result must be untouched. Exit 77 ("skipped: no GPU") without a
 * GPU. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cadre.h"

#include "gpu_test.h"

static const char *const dtname[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                                     "float16", "bfloat16", "float32", "float64"};
static const char *const opname[] = {"sum", "prod", "max", "min", "avg"};

/* ---- values: small integers, exact in every type (averages rounded) ---------------- */
/* float to half, rounded to nearest even (normal values and zero: those used
 * here; an average over 3 ranks is not exact) */
static uint16_t f2h(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t s = (x >> 16) & 0x8000, a = x & 0x7fffffff;
    if (!a)
        return (uint16_t)s;
    uint32_t h = ((((a >> 23) & 0xff) - 112) << 10) | ((a >> 13) & 0x3ff), rest = a & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
        h++; /* a carry into the exponent is right */
    return (uint16_t)(s | h);
}

static float h2f(uint16_t h)
{
    uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, x;
    if (!e && !m)
        x = s;
    else if (!e) { /* subnormal: not produced here; decode anyway */
        float f = (float)m / 1024.0f / 16384.0f;
        return s ? -f : f;
    } else if (e == 31)
        x = s | 0x7f800000 | (m << 13);
    else
        x = s | ((e + 112) << 23) | (m << 13);
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static void put(void *b, size_t i, int dt, double v)
{
    char *p = (char *)b;
    switch (dt) {
    case CADRE_INT8: ((int8_t *)p)[i] = (int8_t)(int64_t)v; break;
    case CADRE_UINT8: ((uint8_t *)p)[i] = (uint8_t)(int64_t)v; break;
    case CADRE_INT32: ((int32_t *)p)[i] = (int32_t)(int64_t)v; break;
    case CADRE_UINT32: ((uint32_t *)p)[i] = (uint32_t)(int64_t)v; break;
    case CADRE_INT64: ((int64_t *)p)[i] = (int64_t)v; break;
    case CADRE_UINT64: ((uint64_t *)p)[i] = (uint64_t)(int64_t)v; break;
    case CADRE_FLOAT16: ((uint16_t *)p)[i] = f2h((float)v); break;
    case CADRE_BFLOAT16: { /* rounded to nearest even */
        float f = (float)v;
        uint32_t x;
        memcpy(&x, &f, 4);
        ((uint16_t *)p)[i] = (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
        break;
    }
    case CADRE_FLOAT32: ((float *)p)[i] = (float)v; break;
    default: ((double *)p)[i] = v; break;
    }
}

static double get(const void *b, size_t i, int dt)
{
    const char *p = (const char *)b;
    switch (dt) {
    case CADRE_INT8: return ((const int8_t *)p)[i];
    case CADRE_UINT8: return ((const uint8_t *)p)[i];
    case CADRE_INT32: return ((const int32_t *)p)[i];
    case CADRE_UINT32: return ((const uint32_t *)p)[i];
    case CADRE_INT64: return (double)((const int64_t *)p)[i];
    case CADRE_UINT64: return (double)((const uint64_t *)p)[i];
    case CADRE_FLOAT16: return h2f(((const uint16_t *)p)[i]);
    case CADRE_BFLOAT16: {
        uint32_t x = (uint32_t)((const uint16_t *)p)[i] << 16;
        float f;
        memcpy(&f, &x, 4);
        return f;
    }
    case CADRE_FLOAT32: return ((const float *)p)[i];
    default: return ((const double *)p)[i];
    }
}

static int is_unsigned(int dt)
{
    return dt == CADRE_UINT8 || dt == CADRE_UINT32 || dt == CADRE_UINT64;
}

/* What rank r contributes at element i. */
static double val(int r, size_t i, int dt, int op)
{
    if (op == CADRE_PROD)
        return 1 + (double)((i + (size_t)r) % 2);
    double v = (double)((i * 7 + (size_t)r * 13) % 23);
    return is_unsigned(dt) ? v : v - 11;
}

/* The reduction over ranks 0..n-1 of the communicator whose rank k is world
 * rank wr[k]. */
static double expect(const int *wr, int n, size_t i, int dt, int op)
{
    double a = val(wr[0], i, dt, op);
    for (int k = 1; k < n; k++) {
        double b = val(wr[k], i, dt, op);
        a = op == CADRE_PROD ? a * b : op == CADRE_MAX ? (a > b ? a : b)
            : op == CADRE_MIN ? (a < b ? a : b) : a + b;
    }
    return op == CADRE_AVG ? a / n : a;
}

/* ---- allreduce ---------------------------------------------------------------------- */
static void allreduce_case(cadre_comm_t comm, const int *wr, int n_ranks, int crank, size_t n,
                           int dt, int op, int mode, int inplace, int misalign)
{
    size_t es = cadre_datatype_size((cadre_datatype_t)dt), off = misalign ? es : 0;
    size_t bytes = (n + 4) * es + 64;
    unsigned char *h = malloc(bytes), *out = malloc(bytes), *want = malloc(es);
    void *din, *dout;
    CU(cudaMalloc(&din, bytes));
    CU(cudaMalloc(&dout, bytes));
    for (size_t i = 0; i < n; i++)
        put(h, i, dt, val(wr[crank], i, dt, op));
    CU(cudaMemset(dout, 0xA5, bytes));
    CU(cudaMemcpy((char *)(inplace ? dout : din) + off, h, n * es, cudaMemcpyHostToDevice));
    CU(cudaDeviceSynchronize()); /* see fill_dev */
    const void *sb = inplace ? CADRE_IN_PLACE : (const void *)((char *)din + off);
    void *rb = (char *)dout + off;
    if (mode) {
        cadre_request_t q;
        CK(cadre_iallreduce(sb, rb, n, (cadre_datatype_t)dt, (cadre_op_t)op, comm, &q));
        CK(mode == 1 ? cadre_wait(&q, NULL) : cadre_wait_timeout(&q, 120, NULL));
    } else {
        CK(cadre_allreduce(sb, rb, n, (cadre_datatype_t)dt, (cadre_op_t)op, comm));
    }
    CU(cudaStreamSynchronize(S));
    CU(cudaMemcpy(out, dout, bytes, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (size_t i = 0; i < n && bad < 3; i++) {
        put(want, 0, dt, expect(wr, n_ranks, i, dt, op));
        if (memcmp(want, out + off + i * es, es)) {
            EXPECT(0, "allreduce %s %s count %zu mode %d%s%s: element %zu is %g, not %g",
                   dtname[dt], opname[op], n, mode, inplace ? " in place" : "",
                   misalign ? " misaligned" : "", i, get(out + off, i, dt), get(want, 0, dt));
            bad++;
        }
    }
    for (size_t k = 0; k < bytes; k++)
        if ((k < off || k >= off + n * es) && out[k] != 0xA5) {
            EXPECT(0, "allreduce %s %s count %zu: byte %zu outside the result was written",
                   dtname[dt], opname[op], n, k);
            break;
        }
    cudaFree(din);
    cudaFree(dout);
    free(h);
    free(out);
    free(want);
}

static void allreduce_all(cadre_comm_t comm, const int *wr, int n_ranks, int crank)
{
    const size_t counts[] = {1, 3, 7, 17, 1001, 65539};
    int ran = 0;
    for (int dt = CADRE_INT8; dt <= CADRE_FLOAT64; dt++)
        for (int op = CADRE_SUM; op <= CADRE_AVG; op++) {
            if (op == CADRE_AVG && dt < CADRE_FLOAT16)
                continue;
            for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
                int k = (int)(c + (size_t)op + (size_t)dt);
                allreduce_case(comm, wr, n_ranks, crank, counts[c], dt, op, k % 3, k % 4 == 1,
                               k % 5 == 2);
                ran++;
            }
        }
    /* large, odd counts: the vector and scalar parts of the kernel, every GPU's share */
    allreduce_case(comm, wr, n_ranks, crank, ((size_t)1 << 22) + 5, CADRE_FLOAT32, CADRE_SUM, 0,
                   0, 0);
    allreduce_case(comm, wr, n_ranks, crank, ((size_t)1 << 21) + 3, CADRE_BFLOAT16, CADRE_AVG,
                   1, 1, 0);
    allreduce_case(comm, wr, n_ranks, crank, ((size_t)1 << 20) + 1, CADRE_INT64, CADRE_MAX, 0, 0,
                   1);
    /* the same buffers many times in a row: more calls than the ring's slots */
    for (int i = 0; i < 9; i++)
        allreduce_case(comm, wr, n_ranks, crank, 4099, CADRE_INT32, CADRE_SUM, i % 2, 0, 0);
    if (!crank && wr[0] == 0)
        printf("ipc_gpu_test: %d allreduce cases on %d ranks\n", ran + 12, n_ranks);
}

/* ---- float sums that are not exact ------------------------------------------------------ */
/* Rank r's input at i: +-(1 + f) * 2^k, f a 52-bit fraction, k in -4..3,
 * rounded into dt (positive for float16, whose small sums would be
 * subnormal). Sums of these round at every step. */
static double inexact_val(int r, size_t i, int dt)
{
    uint64_t z = (uint64_t)r * 0x9E3779B97F4A7C15ull + i + 1;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    double v = (1 + (double)(z >> 11) / 9007199254740992.0) * (double)(1u << (z & 7)) / 16;
    if (dt != CADRE_FLOAT16 && (z >> 3 & 1))
        v = -v;
    unsigned char b[8];
    put(b, 0, dt, v);
    return get(b, 0, dt);
}

/* Allreduce (SUM or AVG) of inexact_val against two references: within the
 * error bound of any summation order, from sums in double (the staged path
 * may reduce in another order and round at every step); and, on the direct
 * path, bit for bit the sum in rank order in the accumulator's type (float,
 * double for FLOAT64) rounded once (cadre-device(7)): so every rank has the same
 * bits. */
static void inexact_case(cadre_comm_t comm, const int *wr, int nr, int crank, size_t n, int dt,
                         int op, int mode, int direct)
{
    size_t es = cadre_datatype_size((cadre_datatype_t)dt);
    unsigned char *h = malloc(n * es), *out = malloc(n * es), *want = malloc(es);
    void *din, *dout;
    CU(cudaMalloc(&din, n * es));
    CU(cudaMalloc(&dout, n * es));
    for (size_t i = 0; i < n; i++)
        put(h, i, dt, inexact_val(wr[crank], i, dt));
    CU(cudaMemcpy(din, h, n * es, cudaMemcpyHostToDevice));
    CU(cudaMemset(dout, 0xA5, n * es));
    CU(cudaDeviceSynchronize()); /* see fill_dev */
    if (mode) {
        cadre_request_t q;
        CK(cadre_iallreduce(din, dout, n, (cadre_datatype_t)dt, (cadre_op_t)op, comm, &q));
        CK(cadre_wait(&q, NULL));
    } else {
        CK(cadre_allreduce(din, dout, n, (cadre_datatype_t)dt, (cadre_op_t)op, comm));
    }
    CU(cudaStreamSynchronize(S));
    CU(cudaMemcpy(out, dout, n * es, cudaMemcpyDeviceToHost));
    /* unit roundoffs: of the output type, and of a step (any order may
     * round every step in the output type) */
    double u_out = dt == CADRE_FLOAT16 ? 0x1p-11 : dt == CADRE_BFLOAT16 ? 0x1p-8
                 : dt == CADRE_FLOAT32 ? 0x1p-24 : 0x1p-53;
    int bad_bound = 0, bad_bits = 0;
    for (size_t i = 0; i < n; i++) {
        long double sum = 0; /* x86-64: a 64-bit significand, exact enough here */
        double mag = 0, got = get(out, i, dt);
        float accf = 0;
        double accd = 0;
        for (int k = 0; k < nr; k++) {
            double x = inexact_val(wr[k], i, dt);
            sum += x;
            mag += x < 0 ? -x : x;
            if (k == 0) {
                accf = (float)x;
                accd = x;
            } else {
                accf = accf + (float)x;
                accd = accd + x;
            }
        }
        long double ref = sum;
        double aref = (double)(ref < 0 ? -ref : ref);
        double tol = (nr - 1) * u_out * mag + u_out * aref;
        if (op == CADRE_AVG) {
            ref /= nr;
            tol = tol / nr + 2 * u_out * aref / nr;
            accf = accf / (float)nr;
            accd = accd / nr;
        }
        double err = (double)((long double)got - ref);
        if (!(err <= tol && -err <= tol) && bad_bound++ < 3)
            EXPECT(0, "allreduce %s %s count %zu mode %d, inexact sums: element %zu is %.17g, "
                      "%.3g from %.17g (bound %.3g)", dtname[dt], opname[op], n, mode, i, got,
                   err, (double)ref, tol);
        if (!direct)
            continue;
        put(want, 0, dt, dt == CADRE_FLOAT64 ? accd : (double)accf);
        if (memcmp(want, out + i * es, es) && bad_bits++ < 3)
            EXPECT(0, "allreduce %s %s count %zu mode %d, inexact sums: element %zu is %.17g, "
                      "not %.17g (the sum in rank order, rounded once)", dtname[dt],
                   opname[op], n, mode, i, got, get(want, 0, dt));
    }
    cudaFree(din);
    cudaFree(dout);
    free(h);
    free(out);
    free(want);
}

static void inexact_all(cadre_comm_t comm, const int *wr, int nr, int crank)
{
    const char *algo = getenv("CADRE_GPU_ALGO");
    int direct = nr <= 16 && !(algo && !strcmp(algo, "staged"));
    const size_t counts[] = {1, 1001, 65537, ((size_t)1 << 20) + 3};
    const int dts[] = {CADRE_FLOAT32, CADRE_FLOAT64, CADRE_FLOAT16, CADRE_BFLOAT16};
    for (size_t t = 0; t < sizeof dts / sizeof *dts; t++)
        for (size_t c = 0; c < sizeof counts / sizeof *counts; c++)
            for (int op = CADRE_SUM; op <= CADRE_AVG; op += CADRE_AVG - CADRE_SUM)
                inexact_case(comm, wr, nr, crank, counts[c], dts[t], op, (int)(c + t) % 2,
                             direct);
}

/* ---- reduce_scatter and allgather -------------------------------------------------------- */
/* kind 0 reduce_scatter (n = recvcount), 1 allgather (n = count). */
static void rsag_case(int kind, cadre_comm_t comm, const int *wr, int nr, int crank, size_t n,
                      int dt, int op, int mode, int inplace, int misalign)
{
    size_t es = cadre_datatype_size((cadre_datatype_t)dt), off = misalign ? es : 0;
    size_t in_n = kind ? n : n * (size_t)nr, out_n = kind ? n * (size_t)nr : n;
    size_t bytes = (in_n > out_n ? in_n : out_n) * es + 64;
    unsigned char *h = malloc(bytes), *out = malloc(bytes), *want = malloc(es);
    void *din, *dout;
    CU(cudaMalloc(&din, bytes));
    CU(cudaMalloc(&dout, bytes));
    for (size_t i = 0; i < in_n; i++)
        put(h, i, dt, val(wr[crank], i, dt, op));
    CU(cudaMemset(dout, 0xA5, bytes));
    /* in place: reduce_scatter's input is recvbuf, allgather's this rank's block of it */
    char *at = inplace ? (char *)dout + off + (kind ? (size_t)crank * n * es : 0)
                       : (char *)din + off;
    CU(cudaMemcpy(at, h, in_n * es, cudaMemcpyHostToDevice));
    CU(cudaDeviceSynchronize()); /* see fill_dev */
    const void *sb = inplace ? CADRE_IN_PLACE : (const void *)((char *)din + off);
    void *rb = (char *)dout + off;
    cadre_datatype_t t = (cadre_datatype_t)dt;
    cadre_request_t q, *rq = mode ? &q : NULL;
    if (kind)
        CK(rq ? cadre_iallgather(sb, rb, n, t, comm, rq) : cadre_allgather(sb, rb, n, t, comm));
    else
        CK(rq ? cadre_ireduce_scatter(sb, rb, n, t, (cadre_op_t)op, comm, rq)
              : cadre_reduce_scatter(sb, rb, n, t, (cadre_op_t)op, comm));
    if (mode)
        CK(mode == 1 ? cadre_wait(&q, NULL) : cadre_wait_timeout(&q, 120, NULL));
    CU(cudaStreamSynchronize(S));
    CU(cudaMemcpy(out, dout, bytes, cudaMemcpyDeviceToHost));
    const char *what = kind ? "allgather" : "reduce_scatter";
    for (size_t i = 0; i < out_n; i++) {
        double w = kind ? val(wr[i / n], i % n, dt, op)
                        : expect(wr, nr, (size_t)crank * n + i, dt, op);
        put(want, 0, dt, w);
        if (memcmp(want, out + off + i * es, es)) {
            EXPECT(0, "%s %s %s count %zu mode %d%s%s: element %zu is %g, not %g", what,
                   dtname[dt], opname[op], n, mode, inplace ? " in place" : "",
                   misalign ? " misaligned" : "", i, get(out + off, i, dt), w);
            break;
        }
    }
    /* in-place reduce_scatter: the input past the result is the library's */
    size_t end = off + (inplace && !kind ? in_n : out_n) * es;
    for (size_t k = 0; k < bytes; k++)
        if ((k < off || k >= end) && out[k] != 0xA5) {
            EXPECT(0, "%s %s count %zu: byte %zu outside the result was written", what,
                   dtname[dt], n, k);
            break;
        }
    cudaFree(din);
    cudaFree(dout);
    free(h);
    free(out);
    free(want);
}

static void rsag_all(cadre_comm_t comm, const int *wr, int nr, int crank)
{
    const size_t counts[] = {1, 5, 1001, 65537};
    for (int dt = CADRE_INT8; dt <= CADRE_FLOAT64; dt++) {
        for (int op = CADRE_SUM; op <= CADRE_AVG; op++) {
            if (op == CADRE_AVG && dt < CADRE_FLOAT16)
                continue;
            for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
                int k = (int)(c + (size_t)op + (size_t)dt);
                rsag_case(0, comm, wr, nr, crank, counts[c], dt, op, k % 3, k % 4 == 1,
                          k % 5 == 2);
            }
        }
        for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
            int k = (int)(c + (size_t)dt);
            rsag_case(1, comm, wr, nr, crank, counts[c], dt, CADRE_SUM, k % 3, k % 4 == 1,
                      k % 5 == 2);
        }
    }
    /* large, odd counts */
    rsag_case(0, comm, wr, nr, crank, ((size_t)1 << 20) + 3, CADRE_FLOAT32, CADRE_SUM, 0, 0, 0);
    rsag_case(1, comm, wr, nr, crank, ((size_t)1 << 20) + 3, CADRE_FLOAT16, CADRE_SUM, 1, 1, 0);
}

/* ---- point-to-point ------------------------------------------------------------------- */
static void fill_dev(void *d, size_t n, int dt, int r, int salt)
{
    size_t es = cadre_datatype_size((cadre_datatype_t)dt);
    unsigned char *h = malloc(n * es + 1);
    for (size_t i = 0; i < n; i++)
        put(h, i, dt, val(r + salt, i, dt, CADRE_SUM));
    CU(cudaMemcpy(d, h, n * es, cudaMemcpyHostToDevice));
    /* From pageable memory cudaMemcpy may return before the data is in
     * place, and S does not wait for the legacy stream. */
    CU(cudaDeviceSynchronize());
    free(h);
}

/* n elements from rank r with salt at d (device or host); the next `extra`
 * bytes must still be 0x5A. */
static void check(const void *d, int host, size_t n, int dt, int r, int salt, size_t extra,
                  const char *what)
{
    size_t es = cadre_datatype_size((cadre_datatype_t)dt);
    unsigned char *h = malloc(n * es + extra + 1), *want = malloc(es);
    if (host)
        memcpy(h, d, n * es + extra);
    else
        CU(cudaMemcpy(h, d, n * es + extra, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) {
        put(want, 0, dt, val(r + salt, i, dt, CADRE_SUM));
        if (memcmp(want, h + i * es, es)) {
            EXPECT(0, "%s %s count %zu: element %zu is %g, not %g", what, dtname[dt], n, i,
                   get(h, i, dt), get(want, 0, dt));
            break;
        }
    }
    for (size_t k = 0; k < extra; k++)
        if (h[n * es + k] != 0x5A) {
            EXPECT(0, "%s %s count %zu: byte %zu past the message was written", what,
                   dtname[dt], n, k);
            break;
        }
    free(h);
    free(want);
}

static void p2p(void)
{
    if (np < 2)
        return;
    cadre_comm_t W = CADRE_COMM_WORLD;
    int right = (me + 1) % np, left = (me + np - 1) % np;
    const size_t counts[] = {1, 7, 1001, 65539, ((size_t)1 << 22) + 3};
    for (int dt = CADRE_INT8; dt <= CADRE_FLOAT64; dt++)
        for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
            size_t n = counts[c], es = cadre_datatype_size((cadre_datatype_t)dt);
            if (n > 100000 && dt != CADRE_FLOAT32 && dt != CADRE_UINT8)
                continue;
            char *s, *r;
            CU(cudaMalloc((void **)&s, (n + 8) * es));
            CU(cudaMalloc((void **)&r, (n + 8) * es + 64));
            /* from 3 elements into the allocation, into 1 element in */
            fill_dev(s + 3 * es, n, dt, me, 0);
            CU(cudaMemset(r, 0x5A, (n + 8) * es + 64));
            CU(cudaDeviceSynchronize()); /* the legacy stream's memset, before S */
            int mode = (int)((c + (size_t)dt) % 3);
            if (mode == 0) {
                CK(cadre_sendrecv(s + 3 * es, n, right, 1, r + es, n, left, 1,
                                  (cadre_datatype_t)dt, W, NULL));
            } else if (mode == 1) {
                cadre_request_t q[2];
                CK(cadre_isend(s + 3 * es, n, (cadre_datatype_t)dt, right, 2, W, &q[0]));
                CK(cadre_irecv(r + es, n, (cadre_datatype_t)dt, left, 2, W, &q[1]));
                CK(cadre_waitall(2, q, NULL));
            } else {
                /* blocking, ordered so that no send waits on its stream for a
                 * receive enqueued after a send at the peer (CUDA IPC sends
                 * are a rendezvous); an odd ring makes a chain, not a cycle */
                for (int turn = 0; turn < 2; turn++) {
                    if ((me % 2) == turn)
                        CK(cadre_send(s + 3 * es, n, (cadre_datatype_t)dt, right, 3, W));
                    else
                        CK(cadre_recv(r + es, n, (cadre_datatype_t)dt, left, 3, W, NULL));
                }
            }
            CU(cudaStreamSynchronize(S));
            check(r + es, 0, n, dt, left, 0, 32, "ring");
            cudaFree(s);
            cudaFree(r);
        }
    CK(cadre_barrier(W));

    /* Two isends to the right (tags 11, 12) against irecvs from the left in
     * the other order (12, 11), then waitall: a CUDA IPC isend that made its
     * stream wait for the receiver's copy held the second send's descriptor
     * behind the first, whose copy sat behind the second's: a hang (and, on
     * one hardware queue, CUDA_DEVICE_MAX_CONNECTIONS=1, any wait there). */
    for (int round = 0; round < 3; round++) {
        size_t n = round == 0 ? 5 : round == 1 ? 70001 : ((size_t)1 << 21) + 1;
        int dt = CADRE_FLOAT32;
        char *s1, *s2, *r1, *r2;
        CU(cudaMalloc((void **)&s1, n * 4));
        CU(cudaMalloc((void **)&s2, n * 4));
        CU(cudaMalloc((void **)&r1, n * 4));
        CU(cudaMalloc((void **)&r2, n * 4));
        fill_dev(s1, n, dt, me, 11);
        fill_dev(s2, n, dt, me, 12);
        CU(cudaMemset(r1, 0x5A, n * 4));
        CU(cudaMemset(r2, 0x5A, n * 4));
        CU(cudaDeviceSynchronize());
        cadre_request_t q[4];
        CK(cadre_isend(s1, n, (cadre_datatype_t)dt, right, 11, W, &q[0]));
        CK(cadre_isend(s2, n, (cadre_datatype_t)dt, right, 12, W, &q[1]));
        CK(cadre_irecv(r2, n, (cadre_datatype_t)dt, left, 12, W, &q[2]));
        CK(cadre_irecv(r1, n, (cadre_datatype_t)dt, left, 11, W, &q[3]));
        CK(cadre_waitall(4, q, NULL));
        CU(cudaStreamSynchronize(S));
        check(r1, 0, n, dt, left, 11, 0, "isends against irecvs in the other order, tag 11");
        check(r2, 0, n, dt, left, 12, 0, "isends against irecvs in the other order, tag 12");
        cudaFree(s1);
        cudaFree(s2);
        cudaFree(r1);
        cudaFree(r2);
    }
    CK(cadre_barrier(W));

    /* Issue 43: a probe of a message sent from a device buffer (a CUDA IPC
     * descriptor, or staged) counts it in the sender's elements; waitany
     * takes device requests as cadre_wait does, testall once they finished
     * on the device. */
    for (int round = 0; round < 2; round++) {
        size_t n = round == 0 ? 7 : ((size_t)1 << 20) + 5;
        int dt = round == 0 ? CADRE_FLOAT64 : CADRE_INT8;
        size_t es = cadre_datatype_size((cadre_datatype_t)dt);
        char *s, *r;
        CU(cudaMalloc((void **)&s, n * es));
        CU(cudaMalloc((void **)&r, n * es + 64));
        fill_dev(s, n, dt, me, 21);
        CU(cudaMemset(r, 0x5A, n * es + 64));
        CU(cudaDeviceSynchronize());
        cadre_request_t q[3] = {CADRE_REQUEST_NULL, CADRE_REQUEST_NULL, CADRE_REQUEST_NULL};
        CK(cadre_isend(s, n, (cadre_datatype_t)dt, right, 21, W, &q[2]));
        cadre_status_t st;
        CK(cadre_probe(left, CADRE_ANY_TAG, W, &st));
        EXPECT(st.source == left && st.tag == 21 && st.count == n,
               "probe of a device message of %zu %s: source %d tag %d count %zu", n, dtname[dt],
               st.source, st.tag, st.count);
        CK(cadre_irecv(r, n, (cadre_datatype_t)dt, left, 21, W, &q[1]));
        int done = 0, idx, nidx = 0;
        for (int k = 0; k < 2; k++) {
            CK(cadre_waitany(3, q, &idx, NULL));
            EXPECT(idx == 1 || idx == 2, "waitany of device requests: index %d", idx);
            nidx += idx;
        }
        EXPECT(nidx == 3 && !q[1] && !q[2], "waitany took indexes summing to %d", nidx);
        CK(cadre_waitany(3, q, &idx, NULL));
        EXPECT(idx == CADRE_UNDEFINED, "waitany of none: index %d", idx);
        CU(cudaStreamSynchronize(S));
        check(r, 0, n, dt, left, 21, 64, "probed device message");
        /* testall: complete once finished on the device */
        CK(cadre_isend(s, n, (cadre_datatype_t)dt, right, 22, W, &q[0]));
        CK(cadre_irecv(r, n, (cadre_datatype_t)dt, left, 22, W, &q[1]));
        double t0 = now();
        while (!done && now() - t0 < 60)
            CK(cadre_testall(2, q, &done, NULL));
        EXPECT(done == 1 && !q[0] && !q[1], "testall of device requests: flag %d", done);
        check(r, 0, n, dt, left, 21, 64, "device message after testall");
        cudaFree(s);
        cudaFree(r);
    }
    CK(cadre_barrier(W));

    /* pairs 0-1: the cache, host buffers, any source, a short message */
    if (me < 2) {
        size_t n = 300001;
        int dt = CADRE_INT32, peer = 1 - me;
        char *d, *h = malloc(n * 4 + 64);
        CU(cudaMalloc((void **)&d, n * 4 + 64));
        for (int round = 0; round < 4; round++) {
            /* round 2: freed and allocated again (often at the same address) */
            if (round == 2) {
                CU(cudaFree(d));
                CU(cudaMalloc((void **)&d, n * 4 + 64));
            }
            if (me == 0) {
                fill_dev(d, n, dt, 0, round);
                CK(cadre_send(d, n, (cadre_datatype_t)dt, peer, 10, W));
                CU(cudaStreamSynchronize(S));
            } else {
                CU(cudaMemset(d, 0x5A, n * 4 + 64));
                CU(cudaDeviceSynchronize());
                CK(cadre_recv(d, n, (cadre_datatype_t)dt, peer, 10, W, NULL));
                CU(cudaStreamSynchronize(S));
                check(d, 0, n, dt, 0, round, 32, round == 2 ? "reallocated buffer" : "resend");
            }
        }
        /* device -> host and host -> device */
        if (me == 0) {
            fill_dev(d, n, dt, 0, 7);
            CK(cadre_send(d, n, (cadre_datatype_t)dt, peer, 11, W));
            memset(h, 0x5A, n * 4 + 64);
            CK(cadre_recv(h, n, (cadre_datatype_t)dt, peer, 12, W, NULL));
            check(h, 1, n, dt, 1, 8, 32, "device to host");
        } else {
            memset(h, 0x5A, n * 4 + 64);
            CK(cadre_recv(h, n, (cadre_datatype_t)dt, peer, 11, W, NULL));
            check(h, 1, n, dt, 0, 7, 32, "device to host");
            for (size_t i = 0; i < n; i++)
                put(h, i, dt, val(1 + 8, i, dt, CADRE_SUM));
            CK(cadre_send(h, n, (cadre_datatype_t)dt, peer, 12, W));
        }
        CU(cudaStreamSynchronize(S));
        /* a host send into a device receive from any source, a short one */
        if (me == 0) {
            CU(cudaMemset(d, 0x5A, n * 4 + 64));
            CU(cudaDeviceSynchronize());
            cadre_status_t st;
            CK(cadre_recv(d, n, (cadre_datatype_t)dt, CADRE_ANY_SOURCE, 13, W, &st));
            CK(cadre_recv(d + 4 * (n / 2 + 1), n / 2 + 10, (cadre_datatype_t)dt, peer, 14, W,
                          NULL));
            CU(cudaStreamSynchronize(S));
            check(d, 0, n / 2, dt, 1, 9, 0, "any source");
            /* past the message, up to the buffer's end: undefined (cadre-device(7)) */
            check(d + 4 * (n / 2 + 1), 0, n / 2, dt, 1, 10, 0, "short message");
        } else {
            for (size_t i = 0; i < n; i++)
                put(h, i, dt, val(1 + 9, i, dt, CADRE_SUM));
            CK(cadre_send(h, n / 2, (cadre_datatype_t)dt, peer, 13, W));
            fill_dev(d, n / 2, dt, 1, 10);
            CK(cadre_send(d, n / 2, (cadre_datatype_t)dt, peer, 14, W));
            CU(cudaStreamSynchronize(S));
        }
        cudaFree(d);
        free(h);
    }
    CU(cudaStreamSynchronize(S));
    CK(cadre_barrier(W));
}

int main(int argc, char **argv)
{
    gpu_test_init(&argc, &argv);
    const char *only = getenv("GPU_TESTS");
    if (!only || strstr(only, "p2p"))
        p2p();
    if (!only || strstr(only, "allreduce")) {
        int *wr = malloc((size_t)np * sizeof *wr);
        for (int i = 0; i < np; i++)
            wr[i] = i;
        allreduce_all(CADRE_COMM_WORLD, wr, np, me);
        inexact_all(CADRE_COMM_WORLD, wr, np, me);
        if (!only || strstr(only, "rsag"))
            rsag_all(CADRE_COMM_WORLD, wr, np, me);
        /* halves of the world: a second workspace, freed with its communicator */
        cadre_comm_t sub;
        int sr, sn;
        CK(cadre_comm_split(CADRE_COMM_WORLD, me % 2, me, &sub));
        CK(cadre_comm_set_stream(sub, S));
        CK(cadre_comm_rank(sub, &sr));
        CK(cadre_comm_size(sub, &sn));
        for (int i = 0; i < sn; i++)
            wr[i] = me % 2 + 2 * i;
        for (int dt = CADRE_INT8; dt <= CADRE_FLOAT64; dt++)
            allreduce_case(sub, wr, sn, sr, 1001 + (size_t)dt, dt, CADRE_MAX, dt % 2, 0,
                           dt % 3 == 0);
        rsag_case(0, sub, wr, sn, sr, 333, CADRE_BFLOAT16, CADRE_AVG, 1, 0, 1);
        rsag_case(1, sub, wr, sn, sr, 333, CADRE_INT64, CADRE_SUM, 0, 1, 0);
        CU(cudaStreamSynchronize(S));
        CK(cadre_comm_free(&sub));
        free(wr);
    }
    CU(cudaStreamSynchronize(S));
    CK(cadre_finalize());
    if (fails)
        return 1;
    printf("ipc_gpu_test: rank %d ok\n", me);
    return 0;
}
