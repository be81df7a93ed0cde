/* Argument checks shared by the point-to-point and collective calls: the
 * names of datatypes and ops for messages. */
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

void cadre__elements_text(char *buf, size_t len, size_t bytes, size_t elsize)
{
    if (elsize && bytes % elsize == 0)
        snprintf(buf, len, "%zu element%s (%zu byte%s)", bytes / elsize,
                 bytes == elsize ? "" : "s", bytes, bytes == 1 ? "" : "s");
    else
        snprintf(buf, len, "%zu bytes", bytes);
}
