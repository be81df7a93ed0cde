/* The user-facing tools outside cadrerun: cadrecc's --showme forms (those
 * of Open MPI's mpicc) and cadre-info's report. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define CADRECC build_path("tools/cadrecc")

/* Runs cadrecc with args; returns its stdout (malloc'ed) and exit code. */
static char *cadrecc(const char *args, int *code, char **err)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "CADRE_CC=cc %s %s", CADRECC, args);
    struct run_result r;
    if (run_cmd(cmd, NULL, 30, &r) != 0)
        return NULL;
    *code = r.exit_code;
    char *out = r.out;
    *err = r.err;
    return out;
}

/* Every form prints its answer, exits 0 and runs no compiler (the file
 * named does not exist). */
static void test_showme_forms(void)
{
    static const struct {
        const char *args, *want, *not_want;
    } cases[] = {
        {"--showme -o app app.c", "cc -I", NULL},
        {"--showme -o app app.c", " -lcadre", NULL},
        {"--showme -c app.c", "-c app.c", "-lcadre"},
        {"-O2 --showme -o app app.c", "cc -I", NULL}, /* anywhere, as in mpicc */
        {"-showme -o app app.c", "-lcadre", NULL},
        {"--showme:command", "cc\n", "-I"},
        {"--showme:compile", "-I", "-lcadre"},
        {"--showme:link", "-lcadre", "-I"},
        {"-showme:link", "-lcadre", "-I"},
        {"--showme:incdirs", "/include\n", "-I"},
        {"--showme:libdirs", "/lib\n", "-L"},
        {"--showme:libs", "cadre\n", "-l"},
        {"--showme:version", "cadre", NULL},
        {"--showme:help", "--showme:libdirs", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int code = -1;
        char *err = NULL, *out = cadrecc(cases[i].args, &code, &err);
        CU_ASSERT_FATAL(out != NULL);
        CHECK_MSG(code == 0 && strstr(out, cases[i].want) &&
                      !(cases[i].not_want && strstr(out, cases[i].not_want)),
                  "cadrecc %s: exit %d, want '%s'%s%s in\n%s--- stderr\n%s", cases[i].args, code,
                  cases[i].want, cases[i].not_want ? " and no " : "",
                  cases[i].not_want ? cases[i].not_want : "", out, err);
        free(out);
        free(err);
    }
    /* --showme:incdirs and :libdirs are the directories of :compile and :link. */
    int c1, c2;
    char *e1, *e2, *inc = cadrecc("--showme:incdirs", &c1, &e1), *comp = cadrecc("--showme:compile", &c2, &e2);
    CU_ASSERT_FATAL(inc && comp);
    inc[strcspn(inc, "\n")] = '\0';
    char want[600];
    snprintf(want, sizeof want, "-I%s", inc);
    CHECK_MSG(strstr(comp, want) != NULL, "--showme:compile '%s' lacks %s", comp, want);
    free(inc), free(comp), free(e1), free(e2);
}

/* An unknown form is an error that names it, and no compiler runs. */
static void test_showme_unknown(void)
{
    static const char *const bad[] = {"--showme:libs_static", "--showme:", "-showme:foo app.c",
                                      "-c x.c --showme:cflags"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int code = -1;
        char *err = NULL, *out = cadrecc(bad[i], &code, &err);
        CU_ASSERT_FATAL(out != NULL);
        CHECK_MSG(code == 2 && strstr(err, "cadrecc: unknown option") && !*out,
                  "cadrecc %s: exit %d, want 2 and a message\n--- stdout\n%s--- stderr\n%s", bad[i],
                  code, out, err);
        free(out);
        free(err);
    }
}

void suite_tools(void)
{
    CU_pSuite s = CU_add_suite("tools", NULL, NULL);
    CU_add_test(s, "cadrecc: every --showme form of mpicc", test_showme_forms);
    CU_add_test(s, "cadrecc: an unknown --showme form is an error", test_showme_unknown);
}
