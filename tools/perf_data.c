/* cadre-perf's collective inputs, their references and the v-variants'
 * layout (perf_coll.h).
 *
 * Every input element is a small integer that depends on the rank, the
 * element's index and the iteration, chosen so that every result is exact
 * in the datatype (sums of values in [-3,4]; products of 2, 1 and -1;
 * averages of values whose sum is a multiple of the rank count). The
 * reference is computed from the same formula, and a result element counts
 * as wrong unless its bits equal the reference's. Integer sums and products
 * wrap modulo 2^bits, as the library's do; float16 products overflow past
 * 15 ranks. */
#include <string.h>

#include "perf_coll.h"

static uint32_t mix(int rank, size_t i, uint32_t it)
{
    uint32_t x = (uint32_t)i * 0x9e3779b1u ^ (uint32_t)((uint64_t)i >> 32) * 0x27d4eb2fu;
    x += (uint32_t)(rank + 1) * 0x85ebca77u + it * 0xc2b2ae3du;
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

/* AVG: rank r > 0 gives m + k_r, rank 0 gives m - (k_1 + ... + k_{n-1}): the
 * sum is n*m and the average m, exactly. */
static int64_t avg_mean(size_t i, uint32_t it)
{
    return (int64_t)(mix(-1, i, it) % 8) - 3;
}

/* Element i of rank `rank`'s input at iteration it. */
static int64_t gen(const struct perf_run *R, int rank, size_t i, uint32_t it)
{
    uint32_t h = mix(rank, i, it);
    if (R->m->reduces) {
        switch (R->op) {
        case CADRE_SUM: return R->sgn ? (int64_t)(h % 8) - 3 : (int64_t)(h % 8);
        case CADRE_PROD: h %= 3; return h == 0 ? 2 : h == 1 && R->sgn ? -1 : 1;
        case CADRE_AVG:
            if (rank > 0)
                return avg_mean(i, it) + (h & 1);
            int64_t v = avg_mean(i, it);
            for (int r = 1; r < R->n; r++)
                v -= mix(r, i, it) & 1;
            return v;
        default: break; /* MAX, MIN: below */
        }
    }
    return (int64_t)(h % (uint32_t)R->range) - (R->sgn ? R->range / 2 : 0);
}

/* Element i of the reduction over every rank's input. */
static int64_t ref(const struct perf_run *R, size_t i, uint32_t it)
{
    if (R->op == CADRE_AVG)
        return avg_mean(i, it);
    int64_t a = gen(R, 0, i, it);
    for (int r = 1; r < R->n; r++) {
        int64_t b = gen(R, r, i, it);
        switch (R->op) {
        case CADRE_SUM: a = (int64_t)((uint64_t)a + (uint64_t)b); break;
        case CADRE_PROD: a = (int64_t)((uint64_t)a * (uint64_t)b); break;
        case CADRE_MAX: a = b > a ? b : a; break;
        case CADRE_MIN: a = b < a ? b : a; break;
        default: break;
        }
    }
    return a;
}

/* v in a 16-bit IEEE format with `man` mantissa bits and exponent bias `bias`
 * (float16: 10, 15; bfloat16: 7, 127), rounded to nearest even; infinity
 * beyond the largest finite value. */
static uint16_t int_to_f16(int64_t v, int man, int bias)
{
    uint16_t sign = v < 0 ? 0x8000 : 0;
    uint64_t a = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    if (!a)
        return sign;
    int e = 63 - __builtin_clzll(a);
    uint64_t m;
    if (e <= man) {
        m = a << (man - e);
    } else {
        int sh = e - man;
        uint64_t rem = a & ((1ull << sh) - 1), half = 1ull << (sh - 1);
        m = a >> sh;
        if (rem > half || (rem == half && (m & 1)))
            m++;
        if (m >> (man + 1)) {
            m >>= 1;
            e++;
        }
    }
    int emax = (1 << (15 - man)) - 1; /* all ones: infinity */
    if (e + bias >= emax)
        return (uint16_t)(sign | emax << man);
    return (uint16_t)(sign | (e + bias) << man | (m & ((1u << man) - 1)));
}

/* v as one element of dt, at p. */
static void put(cadre_datatype_t dt, void *p, int64_t v)
{
    switch (dt) {
    case CADRE_INT8:
    case CADRE_UINT8: *(uint8_t *)p = (uint8_t)v; break;
    case CADRE_INT32:
    case CADRE_UINT32: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
    case CADRE_INT64:
    case CADRE_UINT64: { uint64_t x = (uint64_t)v; memcpy(p, &x, 8); break; }
    case CADRE_FLOAT16: { uint16_t x = int_to_f16(v, 10, 15); memcpy(p, &x, 2); break; }
    case CADRE_BFLOAT16: { uint16_t x = int_to_f16(v, 7, 127); memcpy(p, &x, 2); break; }
    case CADRE_FLOAT32: { float x = (float)v; memcpy(p, &x, 4); break; }
    case CADRE_FLOAT64: { double x = (double)v; memcpy(p, &x, 8); break; }
    }
}

void perf_data_fill(const struct perf_run *R, unsigned char *buf, int rank, size_t first, size_t n,
                    uint32_t it)
{
    for (size_t i = 0; i < n; i++)
        put(R->dt, perf_el(R, buf, i), gen(R, rank, first + i, it));
}

/* Element i must be gen(rank, first + i), or with rank < 0 the reduction
 * ref(first + i). */
long perf_data_wrong(const struct perf_run *R, unsigned char *buf, int rank, size_t first, size_t n,
                     uint32_t it)
{
    long w = 0;
    unsigned char want[8];
    for (size_t i = 0; i < n; i++) {
        put(R->dt, want, rank < 0 ? ref(R, first + i, it) : gen(R, rank, first + i, it));
        w += memcmp(want, perf_el(R, buf, i), R->ts) != 0;
    }
    return w;
}

long perf_data_unpoisoned(const struct perf_run *R, const unsigned char *buf, size_t n)
{
    long w = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t b = 0; b < R->ts; b++)
            if (buf[i * R->ts + b] != 0xff) {
                w++;
                break;
            }
    return w;
}

static size_t vcount(const struct perf_run *R, int k)
{
    return R->c * 2 * (size_t)(k + 1) / (size_t)(R->n + 1);
}

size_t perf_data_layout(const struct perf_run *R, int rank, size_t *counts, size_t *displs)
{
    size_t at = 0;
    for (int k = 0; k < R->n; k++) {
        counts[k] = vcount(R, rank >= 0 ? (rank + k) % R->n : k);
        displs[k] = at + 1;
        at = displs[k] + counts[k];
    }
    return at + 1;
}

size_t perf_data_vbytes(const struct perf_run *R)
{
    size_t sum = 0;
    for (int k = 0; k < R->n; k++)
        sum += vcount(R, k);
    return sum * R->ts;
}
