/* The one CUnit runner of make check. `cadre-tests [suite ...]` runs only the
 * named suites. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "testutil.h"

#define X(fn) void fn(void);
#include "suites.h"
#undef X

int main(int argc, char **argv)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
#define X(fn) fn();
#include "suites.h"
#undef X
    CU_basic_set_mode(CU_BRM_VERBOSE);
    /* The suites to run: the arguments, else CADRE_TEST_SUITES (names
     * separated by spaces or commas; what make check runs), else all. */
    char *names[64];
    int nnames = 0;
    for (int i = 1; i < argc && nnames < 64; i++)
        names[nnames++] = argv[i];
    char env[512] = "";
    const char *sel = getenv("CADRE_TEST_SUITES");
    if (!nnames && sel && *sel) {
        snprintf(env, sizeof env, "%s", sel);
        char *save = NULL;
        for (char *t = strtok_r(env, " ,", &save); t && nnames < 64; t = strtok_r(NULL, " ,", &save))
            names[nnames++] = t;
    }
    /* Each CU_basic_run_suite starts a new run summary: the failures are
     * added up suite by suite, or a failing suite followed by a passing one
     * would pass. */
    unsigned failed = 0;
    if (nnames) {
        for (int i = 0; i < nnames; i++) {
            if (!CU_get_suite(names[i])) {
                fprintf(stderr, "cadre-tests: no suite named '%s'\n", names[i]);
                CU_cleanup_registry();
                return 2;
            }
        }
        for (int i = 0; i < nnames; i++) {
            CU_basic_run_suite(CU_get_suite(names[i]));
            failed += CU_get_number_of_failures() + CU_get_number_of_tests_failed();
        }
    } else {
        CU_basic_run_tests();
        failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    }
    if (failed && nnames > 1)
        fprintf(stderr, "\ncadre-tests: %u failure(s) in the suites run (see each summary)\n",
                failed);
    CU_cleanup_registry();
    return failed ? 1 : 0;
}
