/* Status strings and the per-thread detailed error message. */
#include <stdio.h>
#include <string.h>

#include "runtime.h"

#define CADRE_LAST_ERROR_MAX 1024

static __thread char last_error[CADRE_LAST_ERROR_MAX];

const char *cadre_error_string(int status)
{
    switch (status) {
#define CADRE__STATUS_CASE(name, code, text) \
    case CADRE_##name:                       \
        return "CADRE_" #name ": " text;
        CADRE_STATUS_MAP(CADRE__STATUS_CASE)
#undef CADRE__STATUS_CASE
    }
    return "unknown status";
}

const char *cadre_last_error(void)
{
    return last_error;
}

void cadre__clear_error(void)
{
    last_error[0] = '\0';
}

int cadre__error(int status, const char *fmt, ...)
{
    /* Formatted aside, then copied: a caller that wraps an inner failure
     * passes cadre_last_error() itself as an argument ("%s: ...: %s"), and
     * vsnprintf into the buffer it reads from garbles the message. */
    char msg[CADRE_LAST_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(last_error, msg, strlen(msg) + 1);
    CADRE_TRACE(RUNTIME, "error %d: %s", status, last_error);
    return status;
}
