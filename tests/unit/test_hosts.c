/* The multi-host tests: each scenario of tests/hosts/hosts-test.sh, which
 * makes hosts as network namespaces and runs jobs on them under Open MPI's
 * mpirun and under Slurm's srun (tests/hosts/lib.sh). The script checks the
 * results and cadre's decisions and prints a line "hosts: ..." per job,
 * passed on here as progress. Skipped (exit 77) where the test bed cannot be
 * made: not root, or no network namespaces. */
#include <stdio.h>
#include <string.h>

#include "testutil.h"

static void run_scenario(const char *name, double limit)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "CADRE_BUILDDIR='%s' %s %s", build_path(""),
             src_path("tests/hosts/hosts-test.sh"), name);
    struct run_job j;
    CU_ASSERT_FATAL(run_start(cmd, NULL, limit, &j) == 0);
    /* Each job's line as it ends. */
    for (int n = 1; run_wait_output(&j, "hosts: ", n); n++) {
        const char *p = j.r.out;
        for (int k = 0; p && k < n; k++) {
            p = strstr(p, "hosts: ");
            if (p && k < n - 1)
                p++;
        }
        if (p) {
            int len = (int)strcspn(p, "\n");
            fprintf(stderr, "\n    %.*s", len, p);
            test_progress("hosts %s: %.*s", name, len, p + 7);
        }
    }
    struct run_result r;
    run_finish(&j, &r);
    if (r.exit_code == 77) {
        const char *why = strstr(r.err, "SKIP: ");
        fprintf(stderr, "\n    skipped: %.*s ", why ? (int)strcspn(why + 6, "\n") : 0,
                why ? why + 6 : "");
        test_progress("hosts %s: skipped", name);
        run_free(&r);
        return;
    }
    fprintf(stderr, "\n    %s: exit %d, %.1f s ", name, r.exit_code, r.seconds);
    CHECK_MSG(r.exit_code == 0 && !r.timed_out, "hosts %s: exit %d%s\n--- stdout\n%s--- stderr\n%s",
              name, r.exit_code, r.timed_out ? " (killed at the limit)" : "", r.out, r.err);
    run_free(&r);
    if (r.timed_out) {
        /* Killed before its trap could undo the test bed: the next run
         * cleans a slot whose owner is gone; do it now. */
        snprintf(cmd, sizeof cmd, "%s clean", src_path("tests/hosts/hosts-test.sh"));
        if (run_cmd(cmd, NULL, 60, &r) == 0)
            run_free(&r);
    }
}

/* cadrerun is a one-machine launcher: asked for hosts it names the
 * launchers that run cadre on several (and starts nothing). */
static void test_cadrerun_host(void)
{
    const char *forms[] = {"--host n1:2,n2:2", "-H n1,n2", "--hostfile=hosts", "--machinefile hosts"};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "%s -n 2 %s %s", CADRERUN, forms[i],
                 build_path("tests/ranks/init_basic"));
        struct run_result r;
        CU_ASSERT_FATAL(run_cmd(cmd, NULL, 30, &r) == 0);
        CHECK_MSG(r.exit_code == 2 && strstr(r.err, "this machine only") &&
                      strstr(r.err, "srun --mpi=pmix") && strstr(r.err, "mpirun --host") &&
                      strstr(r.err, "cadre-nodes(7), Running on several nodes") && r.out_len == 0,
                  "cadrerun %s: exit %d\n--- stdout\n%s--- stderr\n%s", forms[i], r.exit_code,
                  r.out, r.err);
        run_free(&r);
    }
}

/* The test bed's teardown (tb_down, tests/hosts/lib.sh) as bench/hosts.sh
 * runs it, under set -e from its EXIT trap: a process of the bed that is
 * gone already fails both of its kills, and that made a complete run exit 1.
 * The script's own status must come through: 0, and 3 from an exit 3. */
static void test_teardown_status(void)
{
    static const struct { const char *last; int want; } cases[] = {{"true", 0}, {"exit 3", 3}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd,
                 "bash -c 'set -euo pipefail; . \"%s\"; sleep 0 & TB_PIDS=($!); wait; "
                 "trap tb_down EXIT; %s'",
                 src_path("tests/hosts/lib.sh"), cases[i].last);
        struct run_result r;
        CU_ASSERT_FATAL(run_cmd(cmd, NULL, 30, &r) == 0);
        CHECK_MSG(r.exit_code == cases[i].want && !r.timed_out,
                  "tb_down after '%s' with its one process gone: exit %d, want %d\n--- stderr\n%s",
                  cases[i].last, r.exit_code, cases[i].want, r.err);
        run_free(&r);
    }
}

/* check.sh's transport check (TB_CHECK_REMOTE, issue 42) on made-up INFO
 * logs of 2 hosts x 2 ranks (block): shm within a host and the named
 * transport between hosts passes; a peer on another host over the other
 * transport, a peer of the same host over ucx, a tcp connection in a ucx
 * job, or a peer's connection taken from another address fails, naming the
 * ranks. Needs no root: it only reads the log. */
static void test_check_remote(void)
{
    /* mk REMOTE SAME TCPLINES: the log; REMOTE the transport logged to the
     * other host's ranks, SAME rank 0's to rank 1 (its own host), TCPLINES
     * 1 to log tcp's listening and reached lines, 2 to log the second
     * host's connections as the first host's (reached on its connection
     * from the peer's address), 3 the same from a wrong address. */
    static const char *mklog =
        "mk() {\n"
        "    local r w h nc m\n"
        "    nc=$(getconf _NPROCESSORS_ONLN)\n"
        "    m=\"not oversubscribed\"\n"
        "    ((4 > nc)) && m=\"oversubscribed, waits yield\"\n"
        "    for r in 0 1 2 3; do\n"
        "        h=$((r / 2))\n"
        "        echo \"[rank $r INFO P2P] locality: host $h of 2 (ctb7-n$((h + 1))), ranks on this "
        "host: $((2 * h)),$((2 * h + 1))\"\n"
        "        echo \"[rank $r INFO P2P] 4 ranks of the job share this machine's $nc cores (2 on "
        "this host): $m\"\n"
        "        (($3)) && echo \"[rank $r INFO P2P] tcp: listening on 10.213.7.$((h + 1)):4000 (eth0)\"\n"
        "        for w in 0 1 2 3; do\n"
        "            ((w == r)) && continue\n"
        "            if ((w / 2 != h)); then\n"
        "                echo \"[rank $r INFO P2P] peer $w: $1\"\n"
        "                if (($3 == 1 || ($3 >= 2 && h == 0))); then\n"
        "                    echo \"[rank $r INFO P2P] tcp: rank $w reached at "
        "10.213.7.$((w / 2 + 1)):4000\"\n"
        "                elif (($3 >= 2)); then\n"
        "                    echo \"[rank $r INFO P2P] tcp: rank $w reached on its connection "
        "from 10.213.7.$((w / 2 + 1 + ($3 == 3 ? 5 : 0))):5000$w\"\n"
        "                fi\n"
        "            elif ((r == 0)); then\n"
        "                echo \"[rank $r INFO P2P] peer $w: $2\"\n"
        "            else\n"
        "                echo \"[rank $r INFO P2P] peer $w: shm\"\n"
        "            fi\n"
        "        done\n"
        "    done\n"
        "}\n";
    static const struct {
        const char *env, *args;
        int want;
        const char *text;
    } cases[] = {
        {"TB_CHECK_REMOTE=ucx", "ucx shm 0", 0, "4 shm and 8 ucx peers, 0 tcp connections checked, 0 failed"},
        {"", "tcp shm 1", 0, "4 shm and 8 tcp peers, 8 tcp connections checked, 0 failed"},
        {"TB_CHECK_REMOTE=tcp", "tcp shm 1", 0, "4 shm and 8 tcp peers, 8 tcp connections checked, 0 failed"},
        {"TB_CHECK_REMOTE=ucx", "tcp shm 1", 1, "rank 0 (ctb7-n1) uses tcp to rank 2 (ctb7-n2), expected ucx"},
        {"TB_CHECK_REMOTE=ucx", "ucx shm 1", 1, "rank 0 reached rank 2 over tcp, expected ucx"},
        {"TB_CHECK_REMOTE=ucx", "ucx ucx 0", 1, "rank 0 (ctb7-n1) uses ucx to rank 1 (ctb7-n1), expected shm"},
        {"", "ucx shm 1", 1, "rank 0 (ctb7-n1) uses ucx to rank 2 (ctb7-n2), expected tcp"},
        {"", "tcp shm 0", 1, "nothing went over tcp"},
        {"", "tcp shm 2", 0, "4 shm and 8 tcp peers, 8 tcp connections checked, 0 failed"},
        {"", "tcp shm 3", 1, "rank 2 took rank 0's connection (ctb7-n1, 10.213.7.1) at 10.213.7.6"},
        {"TB_CHECK_REMOTE=ucx", "ucx shm 2", 1, "rank 2 took rank 0's connection over tcp, expected ucx"},
        {"TB_CHECK_REMOTE=rdma", "ucx shm 0", 1, "TB_CHECK_REMOTE=rdma: not tcp or ucx"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char script[4096];
        snprintf(script, sizeof script,
                 "%s. '%s'\nTB_K=7\nf=$(mktemp)\nmk %s >\"$f\"\n%s tb_check_decisions \"$f\" 2 2 "
                 "block\nrc=$?\nrm -f \"$f\"\nexit $rc\n",
                 mklog, src_path("tests/hosts/check.sh"), cases[i].args, cases[i].env);
        struct run_result r;
        CU_ASSERT_FATAL(run_cmd("bash -s", script, 30, &r) == 0);
        CHECK_MSG(r.exit_code == cases[i].want && strstr(r.out, cases[i].text),
                  "check.sh, %s, log \"mk %s\": exit %d (want %d), output lacks \"%s\"\n--- stdout\n%s"
                  "--- stderr\n%s",
                  cases[i].env[0] ? cases[i].env : "TB_CHECK_REMOTE unset", cases[i].args,
                  r.exit_code, cases[i].want, cases[i].text, r.out, r.err);
        run_free(&r);
    }
}

static void test_mpirun_coll(void) { run_scenario("mpirun-coll", 600); }
static void test_srun_coll(void) { run_scenario("srun-coll", 400); }
static void test_mpirun_p2p(void) { run_scenario("mpirun-p2p", 300); }
static void test_srun_p2p(void) { run_scenario("srun-p2p", 300); }
static void test_ifaces(void) { run_scenario("ifaces", 400); }
static void test_lost_kill(void) { run_scenario("lost-kill", 300); }
static void test_lost_cut(void) { run_scenario("lost-cut", 200); }
static void test_stale(void) { run_scenario("stale", 200); }
static void test_rdv(void) { run_scenario("rdv", 300); }
static void test_ucx(void) { run_scenario("ucx", 400); }

void suite_hosts(void)
{
    CU_pSuite s = CU_add_suite("hosts", NULL, NULL);
    CU_add_test(s, "cadrerun --host, -H, --hostfile point to srun and mpirun", test_cadrerun_host);
    CU_add_test(s, "the test bed's teardown keeps the script's exit status", test_teardown_status);
    CU_add_test(s, "mpirun: coll_test at 2x2, 3x1, 3x2 hosts x ranks, block and cyclic",
                test_mpirun_coll);
    CU_add_test(s, "srun: coll_test at 2x2 cyclic and 3x2 block", test_srun_coll);
    CU_add_test(s, "mpirun: p2p_test and hosts_probe (ANY_SOURCE) at 3x2 cyclic", test_mpirun_p2p);
    CU_add_test(s, "srun: p2p_test and hosts_probe (ANY_SOURCE) at 2x2 block", test_srun_p2p);
    CU_add_test(s, "without a launcher: coll_test at 2x2 cyclic, 3x1; p2p_test at 3x2", test_rdv);
    CU_add_test(s, "interfaces: docker0 decoy, unreachable eth1, CADRE_SOCKET_IFNAME", test_ifaces);
    CU_add_test(s, "lost host: its ranks killed (mpirun, srun), errors within 10 s", test_lost_kill);
    CU_add_test(s, "lost host: its link cut (mpirun), errors within 10 s", test_lost_cut);
    CU_add_test(s, "a dead run's slot is cleaned by the next run", test_stale);
    CU_add_test(s, "check.sh: shm within a host, tcp or ucx between (TB_CHECK_REMOTE)",
                test_check_remote);
    CU_add_test(s, "ucx (UCX_TLS=tcp): coll_test, p2p_test, anymix_test at 2x2, 3x2 under mpirun and "
                   "srun; a host killed, a link cut: errors within 15 s",
                test_ucx);
}
