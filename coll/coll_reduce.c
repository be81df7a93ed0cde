/* Host reduction kernels: dst[i] = dst[i] OP src[i] for every datatype and
 * op. float16 and bfloat16 are widened to float32, combined, and rounded back
 * to nearest-even; AVG is a SUM here, divided once at the end by the caller
 * (cadre__coll_scale). */
#include <math.h>
#include <string.h>

#include "coll.h"

static inline float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, f;
    if (exp == 0) {
        if (man == 0) {
            f = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400));
            f = sign | (uint32_t)(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
        }
    } else if (exp == 31) {
        f = sign | 0x7f800000u | man << 13;
    } else {
        f = sign | (exp + 127 - 15) << 23 | man << 13;
    }
    float out;
    memcpy(&out, &f, 4);
    return out;
}

static inline uint16_t float_to_half(float v)
{
    uint32_t f;
    memcpy(&f, &v, 4);
    uint32_t sign = (f >> 16) & 0x8000;
    int32_t exp = (int32_t)((f >> 23) & 0xff) - 127 + 15;
    uint32_t man = f & 0x7fffff;
    if (((f >> 23) & 0xff) == 0xff) /* inf or nan */
        return (uint16_t)(sign | 0x7c00 | (man ? 0x200 | (man >> 13) : 0));
    if (exp >= 31)
        return (uint16_t)(sign | 0x7c00);
    if (exp <= 0) {
        if (exp < -10)
            return (uint16_t)sign;
        man |= 0x800000;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | (uint32_t)exp << 10 | man >> 13, rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1)))
        half++; /* may carry into the exponent: that is the correct rounding */
    return (uint16_t)half;
}

static inline float bf16_to_float(uint16_t b)
{
    uint32_t f = (uint32_t)b << 16;
    float out;
    memcpy(&out, &f, 4);
    return out;
}

static inline uint16_t float_to_bf16(float v)
{
    uint32_t f;
    memcpy(&f, &v, 4);
    if ((f & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((f >> 16) | 0x40); /* quiet nan */
    f += 0x7fff + ((f >> 16) & 1);
    return (uint16_t)(f >> 16);
}

float cadre__half_to_float(uint16_t h) { return half_to_float(h); }
uint16_t cadre__float_to_half(float f) { return float_to_half(f); }
float cadre__bf16_to_float(uint16_t b) { return bf16_to_float(b); }
uint16_t cadre__float_to_bf16(float f) { return float_to_bf16(f); }

#define OP_SUM(a, b) ((a) + (b))
#define OP_PROD(a, b) ((a) * (b))
#define OP_MAX(a, b) ((a) > (b) ? (a) : (b))
#define OP_MIN(a, b) ((a) < (b) ? (a) : (b))

/* NaN propagates through MAX and MIN of floats as it does through SUM. */
#define FOP_MAX(a, b) (isnan(a) ? (a) : isnan(b) ? (b) : OP_MAX(a, b))
#define FOP_MIN(a, b) (isnan(a) ? (a) : isnan(b) ? (b) : OP_MIN(a, b))

#define LOOP(T, OPX)                                                              \
    do {                                                                          \
        T *restrict d = dst;                                                      \
        const T *restrict s = src;                                                \
        for (size_t i = 0; i < n; i++)                                            \
            d[i] = OPX(d[i], s[i]);                                               \
    } while (0)

/* Unsigned SUM and PROD wrap modulo 2^bits; signed ones are done unsigned so
 * overflow wraps the same way instead of being undefined. */
#define INT_OPS(T, UT)                                                            \
    switch (op) {                                                                 \
    case CADRE_SUM: LOOP(UT, OP_SUM); return;                                     \
    case CADRE_PROD: LOOP(UT, OP_PROD); return;                                   \
    case CADRE_MAX: LOOP(T, OP_MAX); return;                                      \
    case CADRE_MIN: LOOP(T, OP_MIN); return;                                      \
    default: return;                                                              \
    }

#define FLT_OPS(T)                                                                \
    switch (op) {                                                                 \
    case CADRE_SUM:                                                               \
    case CADRE_AVG: LOOP(T, OP_SUM); return;                                      \
    case CADRE_PROD: LOOP(T, OP_PROD); return;                                    \
    case CADRE_MAX: LOOP(T, FOP_MAX); return;                                     \
    case CADRE_MIN: LOOP(T, FOP_MIN); return;                                     \
    }                                                                             \
    return;

#define NARROW_OPS(TOF, FROMF)                                                    \
    do {                                                                          \
        uint16_t *restrict d = dst;                                               \
        const uint16_t *restrict s = src;                                         \
        for (size_t i = 0; i < n; i++) {                                          \
            float a = TOF(d[i]), b = TOF(s[i]), r;                                \
            switch (op) {                                                         \
            case CADRE_PROD: r = a * b; break;                                    \
            case CADRE_MAX: r = FOP_MAX(a, b); break;                             \
            case CADRE_MIN: r = FOP_MIN(a, b); break;                             \
            default: r = a + b;                                                   \
            }                                                                     \
            d[i] = FROMF(r);                                                      \
        }                                                                         \
    } while (0)

void cadre__coll_reduce(void *dst, const void *src, size_t n, cadre_datatype_t dt, cadre_op_t op)
{
    switch (dt) {
    case CADRE_INT8: INT_OPS(int8_t, uint8_t)
    case CADRE_UINT8: INT_OPS(uint8_t, uint8_t)
    case CADRE_INT32: INT_OPS(int32_t, uint32_t)
    case CADRE_UINT32: INT_OPS(uint32_t, uint32_t)
    case CADRE_INT64: INT_OPS(int64_t, uint64_t)
    case CADRE_UINT64: INT_OPS(uint64_t, uint64_t)
    case CADRE_FLOAT32: FLT_OPS(float)
    case CADRE_FLOAT64: FLT_OPS(double)
    case CADRE_FLOAT16: NARROW_OPS(half_to_float, float_to_half); return;
    case CADRE_BFLOAT16: NARROW_OPS(bf16_to_float, float_to_bf16); return;
    }
}

/* AVG: divide the summed elements by the number of contributors. */
void cadre__coll_scale(void *buf, size_t n, cadre_datatype_t dt, int divisor)
{
    switch (dt) {
    case CADRE_FLOAT32: {
        float *b = buf;
        for (size_t i = 0; i < n; i++)
            b[i] /= (float)divisor;
        return;
    }
    case CADRE_FLOAT64: {
        double *b = buf;
        for (size_t i = 0; i < n; i++)
            b[i] /= divisor;
        return;
    }
    case CADRE_FLOAT16: {
        uint16_t *b = buf;
        for (size_t i = 0; i < n; i++)
            b[i] = float_to_half(half_to_float(b[i]) / (float)divisor);
        return;
    }
    case CADRE_BFLOAT16: {
        uint16_t *b = buf;
        for (size_t i = 0; i < n; i++)
            b[i] = float_to_bf16(bf16_to_float(b[i]) / (float)divisor);
        return;
    }
    default: return;
    }
}
