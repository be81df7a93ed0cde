/* cadre-info: version, build options, devices and every tunable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cadre.h"
#include "coll/coll_select.h"
#include "config.h"

struct tunable {
    const char *name, *type, *def, *help;
};
static const struct tunable tunables[] = {
#define X(id, type, def, help) {"CADRE_" #id, #type, def, help},
#include "runtime/runtime_config_table.h"
#undef X
};

static void usage(FILE *f)
{
    fprintf(f, "usage: cadre-info [--tunables | --algorithms | --version | --help]\n");
}

int main(int argc, char **argv)
{
    int only_tunables = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tunables"))
            only_tunables = 1;
        else if (!strcmp(argv[i], "--algorithms")) {
            cadre__coll_select_print(stdout);
            return 0;
        }
        else if (!strcmp(argv[i], "--version")) {
            printf("cadre-info (cadre) %s\n", PACKAGE_VERSION);
            return 0;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "cadre-info: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!only_tunables) {
        int ma, mi, pa;
        cadre_version(&ma, &mi, &pa);
        printf("cadre version     : %d.%d.%d\n", ma, mi, pa);
        printf("build options     : %s\n", CADRE_BUILD_CONFIG);
        printf("transports        : shm tcp\n");
        /* cadre_init binds and counts GPUs; as a singleton it is cheap. */
        int dev = -1;
        if (cadre_init(NULL, NULL) == CADRE_SUCCESS) {
            cadre_device(&dev);
            cadre_finalize();
        }
        printf("GPU               : %s\n", HAVE_CUDA ? (dev >= 0 ? "present" : "none visible")
                                                      : "CUDA not built in");
        printf("\n");
    }
    printf("%-22s %-6s %-8s %s\n", "tunable", "type", "default", "meaning");
    for (size_t i = 0; i < sizeof tunables / sizeof tunables[0]; i++) {
        const char *cur = getenv(tunables[i].name);
        printf("%-22s %-6s %-8s %s%s%s%s\n", tunables[i].name, tunables[i].type,
               tunables[i].def[0] ? tunables[i].def : "\"\"", tunables[i].help,
               cur ? " [set: " : "", cur ? cur : "", cur ? "]" : "");
    }
    return 0;
}
