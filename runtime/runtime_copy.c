/* Copies that dodge a slow case of the string instructions.
 *
 * glibc copies blocks above about 2 KiB with `rep movsb`. On the development
 * machine's AMD EPYC that runs at 3 GB/s instead of 50 when the destination
 * lies 1 to 47 bytes past the source modulo 4 KiB (bench: 128 KiB, in
 * cache): a user buffer from malloc (16 bytes into a page) against a 64-byte
 * aligned shared-memory fragment is exactly that, so message and collective
 * copies ran at a third of their speed in some runs and not in others. In
 * that window a loop of 16-byte loads and stores does the copy instead. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

void cadre__copy_big(void *dst, const void *src, size_t n)
{
#if defined(__SSE2__)
    size_t rel = ((uintptr_t)dst - (uintptr_t)src) & 4095;
    if (rel == 0 || rel >= 64) {
        memcpy(dst, src, n);
        return;
    }
    char *d = dst;
    const char *s = src;
    while ((uintptr_t)d & 15) {
        *d++ = *s++;
        n--;
    }
    for (; n >= 64; n -= 64, d += 64, s += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)s);
        __m128i b = _mm_loadu_si128((const __m128i *)s + 1);
        __m128i c = _mm_loadu_si128((const __m128i *)s + 2);
        __m128i e = _mm_loadu_si128((const __m128i *)s + 3);
        _mm_store_si128((__m128i *)d, a);
        _mm_store_si128((__m128i *)d + 1, b);
        _mm_store_si128((__m128i *)d + 2, c);
        _mm_store_si128((__m128i *)d + 3, e);
    }
    memcpy(d, s, n);
#else
    memcpy(dst, src, n);
#endif
}

/* 2 ranks, ping-pong, five alternated runs each: from 16 MiB the streaming
 * copy was ahead (64 MiB: 4.8-7.2 ms against 9.9-30; 16 MiB: 1.54-1.65
 * against 1.63-1.87), at 4 MiB behind (0.37-0.45 against 0.17: a 4 MiB
 * receive buffer used over and over stays in the 32 MiB L3). */
size_t cadre__copy_out_min = (size_t)16 << 20;

void cadre__copy_nt(void *dst, const void *src, size_t n)
{
#if defined(__SSE2__)
    char *d = dst;
    const char *s = src;
    if (n < 256) {
        memcpy(dst, src, n);
        return;
    }
    while ((uintptr_t)d & 15) {
        *d++ = *s++;
        n--;
    }
    for (; n >= 64; n -= 64, d += 64, s += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)s);
        __m128i b = _mm_loadu_si128((const __m128i *)s + 1);
        __m128i c = _mm_loadu_si128((const __m128i *)s + 2);
        __m128i e = _mm_loadu_si128((const __m128i *)s + 3);
        _mm_stream_si128((__m128i *)d, a);
        _mm_stream_si128((__m128i *)d + 1, b);
        _mm_stream_si128((__m128i *)d + 2, c);
        _mm_stream_si128((__m128i *)d + 3, e);
    }
    _mm_sfence();
    memcpy(d, s, n);
#else
    memcpy(dst, src, n);
#endif
}
