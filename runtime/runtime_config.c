/* The CADRE_* tunables: read from the environment, default from the table. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "runtime.h"

const struct cadre_config_entry cadre__config_table[CADRE_CFG_COUNT] = {
#define X(id, type, def, help) [CADRE_CFG_##id] = {"CADRE_" #id, CADRE_CFG_##type, def, help},
#include "runtime_config_table.h"
#undef X
};

static unsigned char warned[CADRE_CFG_COUNT];

const char *cadre__config_str(int id)
{
    const char *v = getenv(cadre__config_table[id].name);
    return v ? v : cadre__config_table[id].def;
}

static void warn_bad(int id, const char *v)
{
    /* A racy double warning is harmless; a missing one would not be. */
    if (!warned[id]) {
        warned[id] = 1;
        CADRE_WARN(RUNTIME, "ignoring %s=\"%s\": not a valid value; using the default %s",
                   cadre__config_table[id].name, v, cadre__config_table[id].def);
    }
}

long cadre__config_int(int id)
{
    const char *v = getenv(cadre__config_table[id].name);
    if (v && *v) {
        char *end;
        errno = 0;
        long x = strtol(v, &end, 0);
        if (!errno && *end == '\0')
            return x;
        warn_bad(id, v);
    }
    return strtol(cadre__config_table[id].def, NULL, 0);
}

double cadre__config_dbl(int id)
{
    const char *v = getenv(cadre__config_table[id].name);
    if (v && *v) {
        char *end;
        errno = 0;
        double x = strtod(v, &end);
        if (!errno && *end == '\0')
            return x;
        warn_bad(id, v);
    }
    return strtod(cadre__config_table[id].def, NULL);
}

static int parse_bool(const char *v, int *out)
{
    static const char *const yes[] = {"1", "yes", "on", "true"};
    static const char *const no[] = {"0", "no", "off", "false"};
    for (size_t i = 0; i < 4; i++) {
        if (!strcasecmp(v, yes[i]))
            return *out = 1, 0;
        if (!strcasecmp(v, no[i]))
            return *out = 0, 0;
    }
    return -1;
}

int cadre__config_bool(int id)
{
    const char *v = getenv(cadre__config_table[id].name);
    int b;
    if (v && *v) {
        if (parse_bool(v, &b) == 0)
            return b;
        warn_bad(id, v);
    }
    parse_bool(cadre__config_table[id].def, &b);
    return b;
}
