/* Status strings and the per-thread detailed error message. */
#include <stdio.h>
#include <string.h>

#include "runtime.h"

#define CADRE_LAST_ERROR_MAX 1024

static __thread char last_error[CADRE_LAST_ERROR_MAX];
/* The message above is already on stderr (a diagnosis block begins with it). */
static __thread int last_error_shown;

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
    last_error_shown = 0;
}

void cadre__error_shown(void)
{
    last_error_shown = 1;
}

int cadre__error_was_shown(void)
{
    return last_error_shown;
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
    last_error_shown = 0;
    CADRE_TRACE(RUNTIME, "error %d: %s", status, last_error);
    return status;
}
