/* Argument checks shared by the point-to-point and collective calls: the
 * names of datatypes and ops for messages, buffers that no address space
 * holds, CADRE_IN_PLACE where a call has no in-place meaning, and send and
 * receive buffers that overlap. */
#include <inttypes.h>
#include <stdio.h>

#include "runtime.h"

const char *cadre__datatype_name(cadre_datatype_t dt)
{
    switch (dt) {
    case CADRE_INT8: return "CADRE_INT8";
    case CADRE_UINT8: return "CADRE_UINT8";
    case CADRE_INT32: return "CADRE_INT32";
    case CADRE_UINT32: return "CADRE_UINT32";
    case CADRE_INT64: return "CADRE_INT64";
    case CADRE_UINT64: return "CADRE_UINT64";
    case CADRE_FLOAT16: return "CADRE_FLOAT16";
    case CADRE_BFLOAT16: return "CADRE_BFLOAT16";
    case CADRE_FLOAT32: return "CADRE_FLOAT32";
    case CADRE_FLOAT64: return "CADRE_FLOAT64";
    }
    return "an unknown datatype";
}

const char *cadre__op_name(cadre_op_t op)
{
    switch (op) {
    case CADRE_SUM: return "CADRE_SUM";
    case CADRE_PROD: return "CADRE_PROD";
    case CADRE_MAX: return "CADRE_MAX";
    case CADRE_MIN: return "CADRE_MIN";
    case CADRE_AVG: return "CADRE_AVG";
    }
    return "an unknown op";
}

/* How the bound reads in messages (cadre(7) states it). */
#if CADRE__ADDR_BITS
#define LIMIT_TEXT "a buffer holds at most 2^56 bytes and ends at or below address 2^56; see cadre(7)"
#else
#define LIMIT_TEXT "a buffer holds at most PTRDIFF_MAX bytes and may not wrap around; see cadre(7)"
#endif

/* Whether buf (NULL or a sentinel included) followed by bytes ends past the
 * last address a buffer may use. */
static int ends_past(const void *buf, size_t bytes)
{
    return (uintptr_t)buf > CADRE__ADDR_END - bytes;
}

/* "sendbuf of 4 x count 10" or "count 10", for the messages below. */
static void span_head(char *head, size_t len, const char *what, size_t count, size_t mult,
                      const char *bufname)
{
    if (mult > 1)
        snprintf(head, len, "%s of %zu x %s %zu", bufname, mult, what, count);
    else
        snprintf(head, len, "%s %zu", what, count);
}

/* Every point-to-point call and collective passes here: the success path
 * is a few compares (the message is written only on failure; a snprintf
 * per call cost 50 ns of an 8-byte ping-pong's 215). */
int cadre__check_span(const char *fn, const char *what, size_t count, size_t mult,
                      cadre_datatype_t dt, const char *bufname, const void *buf, size_t *bytes)
{
    size_t es = cadre_datatype_size(dt), b = 0;
    char head[160];
    if (__builtin_mul_overflow(count, es, &b) || __builtin_mul_overflow(b, mult, &b)) {
        span_head(head, sizeof head, what, count, mult, bufname);
        return cadre__error(CADRE_ERR_ARG,
                            "%s: %s of %s (more than 2^64 bytes) overflows the address space (%s)",
                            fn, head, cadre__datatype_name(dt), LIMIT_TEXT);
    }
    if (b > CADRE__MAX_BYTES) {
        span_head(head, sizeof head, what, count, mult, bufname);
        return cadre__error(CADRE_ERR_ARG,
                            "%s: %s of %s (%zu bytes) overflows the address space (%s)", fn, head,
                            cadre__datatype_name(dt), b, LIMIT_TEXT);
    }
    if (b && ends_past(buf, b)) {
        span_head(head, sizeof head, what, count, mult, bufname);
        return cadre__error(CADRE_ERR_ARG,
                            "%s: %s %p + %zu bytes (%s of %s) ends past the address space (%s)",
                            fn, bufname, buf, b, head, cadre__datatype_name(dt), LIMIT_TEXT);
    }
    *bytes = b;
    return CADRE_SUCCESS;
}

int cadre__check_layout(const char *fn, const char *bufname, const void *buf, const char *cname,
                        const size_t *counts, const char *dname, const size_t *displs, int n,
                        cadre_datatype_t dt, size_t *lo, size_t *hi)
{
    size_t es = cadre_datatype_size(dt), first = SIZE_MAX, last = 0;
    for (int i = 0; i < n; i++) {
        if (!counts[i])
            continue;
        size_t end, b;
        if (__builtin_add_overflow(displs[i], counts[i], &end) ||
            __builtin_mul_overflow(end, es, &b) || b > CADRE__MAX_BYTES)
            return cadre__error(CADRE_ERR_ARG,
                                "%s: %s[%d] %zu + %s[%d] %zu elements of %s overflow the address "
                                "space of %s (%s)",
                                fn, dname, i, displs[i], cname, i, counts[i],
                                cadre__datatype_name(dt), bufname, LIMIT_TEXT);
        if (ends_past(buf, b))
            return cadre__error(CADRE_ERR_ARG,
                                "%s: %s %p + %zu bytes (to the end of %s[%d] %zu + %s[%d] %zu) "
                                "ends past the address space (%s)",
                                fn, bufname, buf, b, dname, i, displs[i], cname, i, counts[i],
                                LIMIT_TEXT);
        first = displs[i] < first ? displs[i] : first;
        last = end > last ? end : last;
    }
    *lo = last ? first : 0;
    *hi = last;
    return CADRE_SUCCESS;
}

int cadre__in_place_refused(const char *fn, const char *name)
{
    return cadre__error(CADRE_ERR_ARG, "%s: CADRE_IN_PLACE is not valid for %s here", fn, name);
}

int cadre__check_overlap(const char *fn, const void *sbuf, size_t sbytes, const void *rbuf,
                         size_t rbytes, const char *hint)
{
    uintptr_t s = (uintptr_t)sbuf, r = (uintptr_t)rbuf;
    if (!sbytes || !rbytes || s >= r + rbytes || r >= s + sbytes)
        return CADRE_SUCCESS;
    return cadre__error(CADRE_ERR_ARG,
                        "%s: sendbuf [%#" PRIxPTR ", %#" PRIxPTR ") overlaps recvbuf [%#" PRIxPTR
                        ", %#" PRIxPTR ")%s%s",
                        fn, s, s + sbytes, r, r + rbytes, hint ? "; " : "", hint ? hint : "");
}

void cadre__elements_text(char *buf, size_t len, size_t bytes, size_t elsize)
{
    if (elsize && bytes % elsize == 0)
        snprintf(buf, len, "%zu element%s (%zu byte%s)", bytes / elsize,
                 bytes == elsize ? "" : "s", bytes, bytes == 1 ? "" : "s");
    else
        snprintf(buf, len, "%zu bytes", bytes);
}
