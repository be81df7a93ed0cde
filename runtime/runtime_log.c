/* Logging with a level and a subsystem, filtered by CADRE_DEBUG and
 * CADRE_DEBUG_SUBSYS. Each message is written with one write(2) so lines of
 * concurrent threads and processes never interleave mid-line. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "runtime.h"

static const char *const subsys_names[CADRE_SUBSYS_COUNT] = {
#define CADRE__SUBSYS_NAME(n) #n,
    CADRE_SUBSYS_MAP(CADRE__SUBSYS_NAME)
#undef CADRE__SUBSYS_NAME
};
static const char *const level_names[] = {"WARN", "INFO", "TRACE"};

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static int log_level = CADRE_LOG_WARN;
static unsigned log_subsys_mask = ~0u;
static char log_prefix[64] = "cadre";

/* A value we cannot use is said once, as for the other CADRE_* settings
 * (cadre__config_*); through cadre__log itself, as CADRE_WARN would wait on
 * log_once, which runs us. */
static void log_bad(const char *fmt, ...) CADRE_PRINTF(1, 2);
static void log_bad(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cadre__log(CADRE_LOG_WARN, CADRE_SUBSYS_RUNTIME, "%s", msg);
}

static void log_setup(void)
{
    const char *lvl = cadre__config_str(CADRE_CFG_DEBUG);
    if (!strcasecmp(lvl, "INFO"))
        log_level = CADRE_LOG_INFO;
    else if (!strcasecmp(lvl, "TRACE"))
        log_level = CADRE_LOG_TRACE;
    else if (lvl[0] && strcasecmp(lvl, "WARN"))
        log_bad("ignoring CADRE_DEBUG=\"%s\": not WARN, INFO or TRACE; using the default WARN",
                lvl);

    const char *list = cadre__config_str(CADRE_CFG_DEBUG_SUBSYS);
    if (list[0]) {
        log_subsys_mask = 0;
        char buf[256];
        snprintf(buf, sizeof buf, "%s", list);
        char *save = NULL;
        for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            int known = 0;
            for (int i = 0; i < CADRE_SUBSYS_COUNT; i++)
                if (!strcasecmp(tok, subsys_names[i]))
                    log_subsys_mask |= 1u << i, known = 1;
            if (!known) {
                char names[128] = "";
                for (int i = 0; i < CADRE_SUBSYS_COUNT; i++)
                    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                             i ? ", " : "", subsys_names[i]);
                log_bad("ignoring \"%.64s\" in CADRE_DEBUG_SUBSYS: not a subsystem (%s)", tok,
                        names);
            }
        }
    }
}

int cadre__log_enabled(int level, int subsys)
{
    pthread_once(&log_once, log_setup);
    return level <= log_level && (log_subsys_mask & (1u << subsys));
}

void cadre__log_set_prefix(const char *prefix)
{
    snprintf(log_prefix, sizeof log_prefix, "%s", prefix);
}

void cadre__log_set_level(int level)
{
    pthread_once(&log_once, log_setup);
    log_level = level;
}

void cadre__vwrite_line(int fd, const char *head, const char *fmt, va_list ap)
{
    char line[2048];
    int n = snprintf(line, sizeof line, "%s", head);
    if (n < 0 || n > (int)sizeof line - 2)
        n = 0;
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    ssize_t w = write(fd, line, len);
    (void)w;
}

void cadre__log_block(int level, int subsys, const char *const *lines, int n)
{
    char head[128], out[16384];
    snprintf(head, sizeof head, "[%s %s %s] ", log_prefix, level_names[level],
             subsys_names[subsys]);
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        int m = snprintf(out + len, sizeof out - len, "%s%s\n", head, lines[i]);
        if (m < 0)
            break;
        if ((size_t)m >= sizeof out - len) { /* cut: the block ends here */
            len = sizeof out - 1;
            out[len - 1] = '\n';
            break;
        }
        len += (size_t)m;
    }
    for (size_t done = 0; done < len;) {
        ssize_t w = write(STDERR_FILENO, out + done, len - done);
        if (w <= 0)
            break;
        done += (size_t)w;
    }
}

void cadre__log(int level, int subsys, const char *fmt, ...)
{
    char head[128];
    snprintf(head, sizeof head, "[%s %s %s] ", log_prefix, level_names[level],
             subsys_names[subsys]);
    va_list ap;
    va_start(ap, fmt);
    cadre__vwrite_line(STDERR_FILENO, head, fmt, ap);
    va_end(ap);
}
