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

/* ---- the tunables every rank must set alike --------------------------------------- */
void cadre__config_agree(struct cadre_agree *a)
{
    memset(a, 0, sizeof *a);
    a->check = cadre__config_int(CADRE_CFG_CHECK) != 0;
    a->gpu_staged = !strcmp(cadre__config_str(CADRE_CFG_GPU_ALGO), "staged");
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)cadre__config_str(CADRE_CFG_ALGO); *p;
         p++)
        h = (h ^ *p) * 0x100000001b3ull;
    a->algo = h;
}

int cadre__config_agree_check(const struct cadre_agree *mine, const struct cadre_agree *theirs,
                              int rank)
{
    if (mine->check != theirs->check)
        return cadre__error(CADRE_ERR_ARG, "cadre_init: CADRE_CHECK is %s here and %s at rank %d: "
                            "every rank must set it alike (a rank that checks its collective "
                            "calls against its peers' cannot run them with one that does not)",
                            mine->check ? "on" : "off", theirs->check ? "on" : "off", rank);
    if (mine->gpu_staged != theirs->gpu_staged)
        return cadre__error(CADRE_ERR_ARG, "cadre_init: CADRE_GPU_ALGO is %s here and %s at rank "
                            "%d: every rank must set it alike (the device collectives' paths "
                            "must match)", mine->gpu_staged ? "staged" : "auto",
                            theirs->gpu_staged ? "staged" : "auto", rank);
    if (mine->algo != theirs->algo)
        return cadre__error(CADRE_ERR_ARG, "cadre_init: CADRE_ALGO (\"%s\" here) differs at rank "
                            "%d: every rank must set it to the same text (the collectives' "
                            "algorithms must match)", cadre__config_str(CADRE_CFG_ALGO), rank);
    return CADRE_SUCCESS;
}
