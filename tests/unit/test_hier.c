/* Locality and the two-level collectives, on fake hosts of this machine
 * (CADRE_HOSTID from FAKE_HOSTS, tests/ranks/fake_hosts.h): the library's
 * decisions as its INFO log states them. Each rank names its host and the
 * ranks on it, each peer its transport (shared memory only within a fake
 * host), and the collectives their algorithm. The data is checked by the
 * programs (host_test here, coll_test in ranks.list). A rank killed, and a
 * rank that never joins, fail the two-level collectives as the flat ones. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../ranks/fake_hosts.h"
#include "testutil.h"

#define HOST_TEST build_path("tests/ranks/host_test")
#define SHOWW(r, w) "no \"%s\"; exit %d%s\n--- stdout\n%s--- stderr\n%s", (w), (r).exit_code, \
                    (r).timed_out ? " (timed out)" : "", (r).out, (r).err

static void run_hosts(struct run_result *r, const char *spec, int n, const char *env)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "env CADRE_DEBUG=INFO CADRE_DEBUG_SUBSYS=P2P,COLL FAKE_HOSTS=%s %s %s -n %d %s", spec,
             env, CADRERUN, n, HOST_TEST);
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 60 + 20.0 * n, r) == 0);
}

/* Every rank's locality line and peer lines match FAKE_HOSTS=spec. */
static void check_locality(const struct run_result *r, const char *spec, int n)
{
    char want[512];
    setenv("FAKE_HOSTS", spec, 1);
    int nh = 0;
    for (int w = 0; w < n; w++)
        if (fake_host_of(w, n) + 1 > nh)
            nh = fake_host_of(w, n) + 1;
    for (int w = 0; w < n; w++) {
        char name[64], list[256] = "";
        fake_host_name(w, n, name, sizeof name);
        int h = fake_host_of(w, n);
        size_t len = 0;
        for (int v = 0; v < n; v++)
            if (fake_host_of(v, n) == h)
                len += (size_t)snprintf(list + len, sizeof list - len, "%s%d", len ? "," : "", v);
        snprintf(want, sizeof want,
                 "[rank %d INFO P2P] locality: host %d of %d (%s), ranks on this host: %s", w, h,
                 nh, name, list);
        CHECK_MSG(count_lines(r->err, want) == 1, SHOWW(*r, want));
        for (int v = 0; v < n; v++) {
            if (v == w)
                continue;
            snprintf(want, sizeof want, "[rank %d INFO P2P] peer %d: %s", w, v,
                     fake_host_of(v, n) == h ? "shm" : "tcp");
            CHECK_MSG(count_lines(r->err, want) == 1, SHOWW(*r, want));
        }
        snprintf(want, sizeof want, "host_test: rank %d ok", w);
        CHECK_MSG(count_lines(r->out, want) == 1, SHOWW(*r, want));
    }
    unsetenv("FAKE_HOSTS");
}

static void test_locality(void)
{
    static const struct {
        const char *spec;
        int n;
    } cases[] = {{"block:2", 4}, {"cyclic:2", 4}, {"block:3", 3}, {"cyclic:3", 6},
                 {"list:b,a,b,a,a", 5}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct run_result r;
        run_hosts(&r, cases[i].spec, cases[i].n, "HOST_COUNTS=3");
        CHECK_MSG(r.exit_code == 0, SHOWW(r, "exit 0"));
        check_locality(&r, cases[i].spec, cases[i].n);
        run_free(&r);
    }
}

/* Without CADRE_HOSTID the ranks of cadrerun share one host, named by the
 * hostname; a singleton (no launcher, no node id) takes the hostname too. */
static void test_one_host(void)
{
    char host[256] = "", want[512];
    CU_ASSERT_FATAL(gethostname(host, sizeof host - 1) == 0);
    host[63] = '\0';
    struct run_result r;
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "env CADRE_DEBUG=INFO CADRE_DEBUG_SUBSYS=P2P HOST_COUNTS=3 %s -n 3 %s",
             CADRERUN, HOST_TEST);
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 60, &r) == 0);
    for (int w = 0; w < 3; w++) {
        snprintf(want, sizeof want,
                 "[rank %d INFO P2P] locality: host 0 of 1 (%s), ranks on this host: 0,1,2", w,
                 host);
        CHECK_MSG(count_lines(r.err, want) == 1, SHOWW(r, want));
        for (int v = 0; v < 3; v++) {
            snprintf(want, sizeof want, "[rank %d INFO P2P] peer %d: shm", w, v);
            CHECK_MSG(v == w || count_lines(r.err, want) == 1, SHOWW(r, want));
        }
    }
    run_free(&r);
    snprintf(cmd, sizeof cmd, "env -u PMIX_NAMESPACE CADRE_DEBUG=INFO CADRE_DEBUG_SUBSYS=P2P "
                              "HOST_COUNTS=3 %s", HOST_TEST);
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 60, &r) == 0);
    snprintf(want, sizeof want,
             "[rank 0 INFO P2P] locality: host 0 of 1 (%s), ranks on this host: 0", host);
    CHECK_MSG(r.exit_code == 0 && count_lines(r.err, want) == 1, SHOWW(r, want));
    run_free(&r);
}

/* The log line of collective `coll` with algorithm `algo` at rank w and size
 * `bytes`: there once. */
static void want_algo(const struct run_result *r, int w, const char *coll, const char *algo,
                      size_t bytes, int n, int nh)
{
    char want[256];
    snprintf(want, sizeof want, "[rank %d INFO COLL] %s: algorithm %s (%zu bytes, %d ranks, %d hosts",
             w, coll, algo, bytes, n, nh);
    CHECK_MSG(count_matching(r->err, want) == 1, SHOWW(*r, want));
}

/* The allreduces of host_test (2, 100000 and 2^20 int32) take the leader
 * algorithm, then hier_split on hosts of equal size or hier_ring on hosts
 * of different sizes, whatever the placement; the barrier the leader one.
 * One host keeps the flat algorithms (no line); so does one rank per host,
 * but for the allreduce from 256 KiB, the ring in chunks (hier_ring). */
static void test_algorithms(void)
{
    static const struct {
        const char *spec;
        int n, nh;
        const char *big;
    } cases[] = {{"block:2", 4, 2, "hier_split"},
                 {"cyclic:2", 4, 2, "hier_split"},
                 {"cyclic:3", 6, 3, "hier_split"},
                 {"list:a,b,a,a,b", 5, 2, "hier_ring"},
                 {"block:3", 3, 3, NULL},
                 {"block:1", 3, 1, NULL}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct run_result r;
        run_hosts(&r, cases[i].spec, cases[i].n, "");
        CHECK_MSG(r.exit_code == 0, SHOWW(r, "exit 0"));
        for (int w = 0; w < cases[i].n; w++) {
            char ok[64];
            snprintf(ok, sizeof ok, "host_test: rank %d ok", w);
            CHECK_MSG(count_lines(r.out, ok) == 1, SHOWW(r, ok));
            if (!cases[i].big)
                continue;
            want_algo(&r, w, "allreduce", "hier_leader", 8, cases[i].n, cases[i].nh);
            want_algo(&r, w, "allreduce", cases[i].big, 400000, cases[i].n, cases[i].nh);
            want_algo(&r, w, "allreduce", cases[i].big, 4194304, cases[i].n, cases[i].nh);
            want_algo(&r, w, "barrier", "hier_leader", 0, cases[i].n, cases[i].nh);
        }
        int per_host = cases[i].nh > 1 && !cases[i].big; /* one rank per host */
        for (int w = 0; w < cases[i].n && per_host; w++) {
            want_algo(&r, w, "allreduce", "hier_ring", 400000, cases[i].n, cases[i].nh);
            want_algo(&r, w, "allreduce", "hier_ring", 4194304, cases[i].n, cases[i].nh);
        }
        if (!cases[i].big)
            CHECK_MSG(count_matching(r.err, "algorithm hier_") == (per_host ? 2 * cases[i].n : 0),
                      SHOWW(r, per_host ? "hier_ring only for the large allreduces" : "no hier_"));
        run_free(&r);
    }
    /* CADRE_ALGO forces one: hier_ring on equal hosts, for every size. */
    struct run_result r;
    run_hosts(&r, "cyclic:2", 4, "CADRE_ALGO=allreduce=hier_ring");
    CHECK_MSG(r.exit_code == 0, SHOWW(r, "exit 0"));
    for (int w = 0; w < 4; w++) {
        want_algo(&r, w, "allreduce", "hier_ring", 8, 4, 2);
        want_algo(&r, w, "allreduce", "hier_ring", 4194304, 4, 2);
    }
    run_free(&r);
}

/* CADRE_HOSTID=h(rank % 2) before `prog` at every rank of cadrerun. */
static void run_cyclic2(struct run_result *r, const char *env, const char *opts, int n,
                        const char *prog)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "env %s %s %s -n %d sh -c 'CADRE_HOSTID=h$((CADRE_RANK %% 2)) exec %s'", env,
             CADRERUN, opts, n, build_path(prog));
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 90, r) == 0);
}

/* A rank SIGKILLed in a loop of allreduces on 2 fake hosts (the leader and
 * split algorithms): every survivor gets CADRE_ERR_PEER naming it within 5 s
 * (coll_peerfail checks) and finalizes. */
static void test_peer_killed(void)
{
    const char *envs[] = {"COLL_PEERFAIL_COUNT=2", "COLL_PEERFAIL_COUNT=1000000"};
    for (int i = 0; i < 2; i++) {
        struct run_result r;
        run_cyclic2(&r, envs[i], "--keep-going", 4, "tests/ranks/coll_peerfail");
        int oks = 0;
        for (int k = 0; k < 4; k++) {
            char line[64];
            snprintf(line, sizeof line, "coll_peerfail: rank %d ok", k);
            oks += count_lines(r.out, line);
        }
        CHECK_MSG(r.exit_code == 137 && oks == 3 && !r.timed_out,
                  "%s: exit %d, %d ok lines\n--- stdout\n%s--- stderr\n%s", envs[i],
                  r.exit_code, oks, r.out, r.err);
        run_free(&r);
    }
}

/* The last rank never joins an allreduce on 2 fake hosts: the others time
 * out after CADRE_TIMEOUT and each names it missing. */
static void test_sleeper_diagnosed(void)
{
    struct run_result r;
    run_cyclic2(&r, "CADRE_TIMEOUT=3 DIAG=coll_sleeper", "", 4, "tests/ranks/diag_test");
    CHECK_MSG(r.exit_code == 0, SHOWW(r, "exit 0"));
    for (int i = 0; i < 3; i++) {
        char want[160];
        snprintf(want, sizeof want, "diag: rank %d ok", i);
        CHECK_MSG(count_lines(r.out, want) == 1, SHOWW(r, want));
        snprintf(want, sizeof want,
                 "rank %d: cadre_allreduce: #1 on WORLD (4 ranks) made no progress for 3 s "
                 "(CADRE_TIMEOUT): waiting for rank 3 (1 of 4 missing), which is ", i);
        CHECK_MSG(count_matching(r.err, want) == 1, SHOWW(r, want));
    }
    run_free(&r);
}

void suite_hier(void)
{
    CU_pSuite s = CU_add_suite("hier", NULL, NULL);
    CU_add_test(s, "hosts from CADRE_HOSTID, transports by host", test_locality);
    CU_add_test(s, "one host: the hostname", test_one_host);
    CU_add_test(s, "the two-level algorithms by hosts and size", test_algorithms);
    CU_add_test(s, "a rank killed in two-level allreduces", test_peer_killed);
    CU_add_test(s, "a rank that never joins, diagnosed across hosts", test_sleeper_diagnosed);
}
