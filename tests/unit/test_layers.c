/* The layers of the library call only down (LAYERS at the top of the tree,
 * doc/DESIGN-layers.md): tests/layers.sh reads every #include "..." of the
 * sources and, with nm, which folder's objects use which folder's symbols,
 * and fails on an edge up the order or a cycle between folders. And the
 * checker itself: on a copy of LAYERS with p2p and coll swapped, the real
 * tree must fail it (coll calls p2p everywhere), so a checker that passes
 * everything is caught; and with another folder named for the CUDA API,
 * device/'s calls must fail it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static void test_layers_call_down(void)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "sh %s %s %s", src_path("tests/layers.sh"), src_path("."),
             build_path("."));
    struct run_result r;
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 300, &r) == 0);
    CHECK_MSG(r.exit_code == 0 && count_matching(r.out, "layers: ok") == 1,
              "tests/layers.sh: exit %d\n--- stdout\n%s--- stderr\n%s", r.exit_code, r.out,
              r.err);
    run_free(&r);
}

static void test_layers_checker_fails_upward_edges(void)
{
    char tmpl[] = "/tmp/cadre-layers-XXXXXX";
    int fd = mkstemp(tmpl);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    char cmd[4096];
    /* coll below p2p: every call of coll into p2p goes up. */
    snprintf(cmd, sizeof cmd,
             "sed -e 's/^layer p2p$/layer TMP/' -e 's/^layer coll$/layer p2p/' "
             "-e 's/^layer TMP$/layer coll/' %s > %s && sh %s %s %s %s",
             src_path("LAYERS"), tmpl, src_path("tests/layers.sh"), src_path("."),
             build_path("."), tmpl);
    struct run_result r;
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 300, &r) == 0);
    CHECK_MSG(r.exit_code == 1 && count_matching(r.out, "layers: UP       coll -> p2p") > 0 &&
                  count_matching(r.out, "layers: CYCLE") == 0 &&
                  count_matching(r.out, "layers: FAILED") == 1,
              "swapped LAYERS: exit %d\n--- stdout\n%s--- stderr\n%s", r.exit_code, r.out, r.err);
    run_free(&r);
    unlink(tmpl);
}

/* Only LAYERS' "cuda" folder calls the CUDA API: with coll named instead,
 * device/'s calls fail the check (seen in the sources, so also in a build
 * without CUDA). */
static void test_layers_checker_fails_cuda_outside(void)
{
    char tmpl[] = "/tmp/cadre-layers-XXXXXX";
    int fd = mkstemp(tmpl);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "sed -e 's/^cuda device$/cuda coll/' %s > %s && sh %s %s %s %s",
             src_path("LAYERS"), tmpl, src_path("tests/layers.sh"), src_path("."),
             build_path("."), tmpl);
    struct run_result r;
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 300, &r) == 0);
    CHECK_MSG(r.exit_code == 1 && count_matching(r.out, "layers: CUDA     device/") > 0 &&
                  count_matching(r.out, "layers: CUDA     coll/") == 0 &&
                  count_matching(r.out, "layers: FAILED") == 1,
              "cuda coll: exit %d\n--- stdout\n%s--- stderr\n%s", r.exit_code, r.out, r.err);
    run_free(&r);
    unlink(tmpl);
}

void suite_layers(void)
{
    CU_pSuite s = CU_add_suite("layers", NULL, NULL);
    CU_add_test(s, "every include and call goes down LAYERS' order, no cycle between folders",
                test_layers_call_down);
    CU_add_test(s, "the checker fails an edge up the order", test_layers_checker_fails_upward_edges);
    CU_add_test(s, "the checker fails a CUDA call outside LAYERS' cuda folder",
                test_layers_checker_fails_cuda_outside);
}
