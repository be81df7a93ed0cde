/* The data of the reduction tests (coll_test.c, scan_test.c; coll_test_v.c
 * too, for its element access and names):
 * element access as double for every datatype, each rank's inputs (small
 * values, so that sums and products over up to 5 ranks are exact in every
 * type), the op as the reference applies it, and the tolerance. */
#ifndef CADRE_COLL_DATA_H
#define CADRE_COLL_DATA_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cadre.h"

static const cadre_datatype_t dts[] = {CADRE_INT8,    CADRE_UINT8,    CADRE_INT32,  CADRE_UINT32,
                                       CADRE_INT64,   CADRE_UINT64,   CADRE_FLOAT16, CADRE_BFLOAT16,
                                       CADRE_FLOAT32, CADRE_FLOAT64};
static const char *const dt_names[] = {"int8",  "uint8",    "int32",   "uint32",  "int64",
                                       "uint64", "float16", "bfloat16", "float32", "float64"};
static const char *const op_names[] = {"sum", "prod", "max", "min", "avg"};

/* ---- element access as double (exact for every value used here) ---------------- */
static float h2f(uint16_t h)
{
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023, f;
    if (e == 0 && m == 0)
        f = s;
    else if (e == 0) { /* subnormal (not produced by our inputs) */
        float v = ldexpf((float)m, -24);
        return s ? -v : v;
    } else if (e == 31)
        f = s | 0x7f800000u | m << 13;
    else
        f = s | (e + 112) << 23 | m << 13;
    float out;
    memcpy(&out, &f, 4);
    return out;
}
static uint16_t f2h(float v) /* inputs are small integers: exact */
{
    uint32_t f;
    memcpy(&f, &v, 4);
    if (v == 0)
        return (uint16_t)((f >> 16) & 0x8000);
    uint32_t s = (f >> 16) & 0x8000, e = ((f >> 23) & 255) - 112, m = (f >> 13) & 1023;
    return (uint16_t)(s | e << 10 | m);
}
static double get(const void *b, cadre_datatype_t dt, size_t i)
{
    switch (dt) {
    case CADRE_INT8: return ((const int8_t *)b)[i];
    case CADRE_UINT8: return ((const uint8_t *)b)[i];
    case CADRE_INT32: return ((const int32_t *)b)[i];
    case CADRE_UINT32: return ((const uint32_t *)b)[i];
    case CADRE_INT64: return (double)((const int64_t *)b)[i];
    case CADRE_UINT64: return (double)((const uint64_t *)b)[i];
    case CADRE_FLOAT16: return h2f(((const uint16_t *)b)[i]);
    case CADRE_BFLOAT16: {
        uint32_t f = (uint32_t)((const uint16_t *)b)[i] << 16;
        float out;
        memcpy(&out, &f, 4);
        return out;
    }
    case CADRE_FLOAT32: return ((const float *)b)[i];
    case CADRE_FLOAT64: return ((const double *)b)[i];
    }
    return 0;
}
static void set(void *b, cadre_datatype_t dt, size_t i, double v)
{
    switch (dt) {
    case CADRE_INT8: ((int8_t *)b)[i] = (int8_t)v; break;
    case CADRE_UINT8: ((uint8_t *)b)[i] = (uint8_t)v; break;
    case CADRE_INT32: ((int32_t *)b)[i] = (int32_t)v; break;
    case CADRE_UINT32: ((uint32_t *)b)[i] = (uint32_t)v; break;
    case CADRE_INT64: ((int64_t *)b)[i] = (int64_t)v; break;
    case CADRE_UINT64: ((uint64_t *)b)[i] = (uint64_t)v; break;
    case CADRE_FLOAT16: ((uint16_t *)b)[i] = f2h((float)v); break;
    case CADRE_BFLOAT16: {
        float f = (float)v;
        uint32_t u;
        memcpy(&u, &f, 4);
        ((uint16_t *)b)[i] = (uint16_t)(u >> 16);
        break;
    }
    case CADRE_FLOAT32: ((float *)b)[i] = (float)v; break;
    case CADRE_FLOAT64: ((double *)b)[i] = v; break;
    }
}

/* Rank r's input element i for (dt, op): small values so that sums and
 * products of up to 5 ranks are exact in every type (products use 1 and 2,
 * and signed types see negative values). It depends on i only through
 * i mod 2, 3 and 23: every INPUT_PERIOD elements it repeats, and so does any
 * reference computed from it element by element (coll_test.c tabulates one
 * period instead of reducing every rank's input for each of a million
 * elements; input_periodic checks the claim). */
#define INPUT_PERIOD 138 /* 2 * 3 * 23 */
static double input(int r, size_t i, cadre_datatype_t dt, int op)
{
    int sign = (dt == CADRE_UINT8 || dt == CADRE_UINT32 || dt == CADRE_UINT64) ? 1
               : ((i + (size_t)r) % 3 == 0)                                  ? -1
                                                                             : 1;
    if (op == CADRE_PROD)
        return (double)(sign * (int)(1 + (i + (size_t)r) % 2));
    return (double)(sign * (int)((i * 7 + (size_t)r * 13) % 23));
}

/* Whether input() repeats every INPUT_PERIOD elements for rank r, over the
 * first periods and around element n (the large counts'). */
static inline int input_periodic(int r, size_t n)
{
    for (int dt = 0; dt < (int)(sizeof dts / sizeof dts[0]); dt++)
        for (int op = 0; op <= CADRE_AVG; op++)
            for (size_t i = 0; i < 4 * INPUT_PERIOD; i++) {
                size_t far = n + i;
                if (input(r, i, dts[dt], op) != input(r, i % INPUT_PERIOD, dts[dt], op) ||
                    input(r, far, dts[dt], op) != input(r, far % INPUT_PERIOD, dts[dt], op))
                    return 0;
            }
    return 1;
}

/* static inline: coll_test_v.c includes this header and never reduces, where
 * a plain static would be an unused function (an error under -Werror). */
static inline double combine(double a, double b, int op)
{
    switch (op) {
    case CADRE_PROD: return a * b;
    case CADRE_MAX: return a > b ? a : b;
    case CADRE_MIN: return a < b ? a : b;
    default: return a + b;
    }
}

/* Relative tolerance: exact for integers; AVG and narrow floats round. */
static int close_enough(double got, double want, cadre_datatype_t dt, int op)
{
    if (dt == CADRE_FLOAT16 || dt == CADRE_BFLOAT16 || op == CADRE_AVG) {
        double tol = dt == CADRE_BFLOAT16 ? 1e-2 : dt == CADRE_FLOAT16 ? 2e-3 : 1e-6;
        return fabs(got - want) <= tol * fabs(want) + tol;
    }
    return got == want;
}

#endif
