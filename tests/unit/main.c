/* The one CUnit runner of make check. `cadre-tests [suite ...]` runs only the
 * named suites. */
#include <stdio.h>
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
    if (argc > 1) {
        for (int i = 1; i < argc; i++) {
            CU_pSuite s = CU_get_suite(argv[i]);
            if (!s) {
                fprintf(stderr, "cadre-tests: no suite named '%s'\n", argv[i]);
                CU_cleanup_registry();
                return 2;
            }
            CU_basic_run_suite(s);
        }
    } else {
        CU_basic_run_tests();
    }
    unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    return failed ? 1 : 0;
}
