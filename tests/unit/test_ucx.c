/* The ucx transport (issue 42) on fake hosts of this machine: ranks with
 * different CADRE_HOSTID reach each other over UCX (UCX_TLS=tcp here: no
 * RDMA on this machine), ranks of one fake host over shared memory. Every
 * case logs each rank's transport per peer (INFO "peer W: ucx|shm"), which
 * is checked, and checks its data itself (p2p_test, coll_test, ucx_test).
 * A rank killed, and one stopped (only cadre's heartbeats can tell), fail
 * the survivors' operations naming it and its host within 15 s, also with
 * its large message held unreceived. Large messages held by the receiver
 * until received: probed, truncated, never received (a send that times
 * out is withdrawn; finalize). UCX that
 * cannot load: forced, cadre_init fails naming why; by default, tcp, also
 * where a fake RDMA device makes the default choose ucx. UCX that cannot
 * make a pair's endpoint: forced, cadre_init fails on both ranks naming
 * the pair; by default that pair takes tcp. The
 * namespace test bed (tests/hosts) runs the same over real links. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../ranks/fake_hosts.h"
#include "config.h"
#include "testutil.h"

#define SHOWW(r, w) "no \"%s\"; exit %d%s\n--- stdout\n%s--- stderr\n%s", (w), (r).exit_code, \
                    (r).timed_out ? " (timed out)" : "", (r).out, (r).err
/* Loopback only: the fake hosts share it, and interfaces that come and go
 * (other jobs' namespaces, bridges) stay out of the workers' addresses. */
#define UCX_ENV "CADRE_TRANSPORT=shm,ucx UCX_TLS=tcp UCX_NET_DEVICES=lo UCX_WARN_UNUSED_ENV_VARS=n"
#define MISSING "/nonexistent/cadre-test/libucp.so.0"

/* prog at n ranks under cadrerun, FAKE_HOSTS=spec giving each its
 * CADRE_HOSTID (a program that does not read FAKE_HOSTS gets it from sh). */
static void run_fake(struct run_result *r, const char *spec, int n, const char *env,
                     const char *opts, const char *prog, double limit)
{
    /* fake_host_name's rule for block:H and cyclic:H, in sh. */
    char host[128];
    int nh = atoi(strchr(spec, ':') + 1);
    if (!strncmp(spec, "block:", 6))
        snprintf(host, sizeof host, "h$((CADRE_RANK * %d / CADRE_WORLD_SIZE))", nh);
    else
        snprintf(host, sizeof host, "h$((CADRE_RANK %% %d))", nh);
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "env CADRE_DEBUG=INFO CADRE_DEBUG_SUBSYS=P2P FAKE_HOSTS=%s %s %s %s -n %d sh -c "
             "'CADRE_HOSTID=%s exec %s'",
             spec, env, CADRERUN, opts, n, host, build_path(prog));
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, limit, r) == 0);
}

/* Every rank's line for every peer: `across` between fake hosts, shm within. */
static void check_peers(const struct run_result *r, const char *spec, int n, const char *across)
{
    setenv("FAKE_HOSTS", spec, 1);
    for (int w = 0; w < n; w++)
        for (int v = 0; v < n; v++) {
            if (v == w)
                continue;
            char want[128];
            snprintf(want, sizeof want, "[rank %d INFO P2P] peer %d: %s", w, v,
                     fake_host_of(v, n) == fake_host_of(w, n) ? "shm" : across);
            CHECK_MSG(count_lines(r->err, want) == 1, SHOWW(*r, want));
        }
    unsetenv("FAKE_HOSTS");
}

static void check_oks(const struct run_result *r, const char *fmt, int n)
{
    for (int w = 0; w < n; w++) {
        char want[128];
        snprintf(want, sizeof want, fmt, w);
        CHECK_MSG(count_lines(r->out, want) == 1, SHOWW(*r, want));
    }
}

/* p2p_test, coll_test and ucx_test's data case at 2 hosts x 2 ranks and 3
 * hosts x 2 (and 5 ranks on 2 hosts of 3 and 2, for ucx_test); anymix_test
 * at 2 x 2, cyclic. */
static void test_programs_on_ucx(void)
{
    if (!HAVE_UCX)
        return;
    static const struct {
        const char *prog, *spec, *env, *ok;
        int n;
    } cases[] = {
        {"tests/ranks/p2p_test", "block:2", "", NULL, 4},
        {"tests/ranks/p2p_test", "cyclic:3", "", NULL, 6},
        {"tests/ranks/coll_test", "block:2", "COLL_BIG=100003", NULL, 4},
        {"tests/ranks/coll_test", "cyclic:3", "COLL_BIG=100003", NULL, 6},
        {"tests/ranks/ucx_test", "block:2", "", "ucx_test: rank %d ok", 4},
        {"tests/ranks/ucx_test", "cyclic:2", "", "ucx_test: rank %d ok", 5},
        /* UCX's own rendezvous for cadre's eager messages from 8 KiB (its
         * default over tcp is higher): into the posted receive's buffer. */
        {"tests/ranks/ucx_test", "block:2", "UCX_RNDV_THRESH=8k", "ucx_test: rank %d ok", 4},
        {"tests/ranks/p2p_test", "block:2", "UCX_RNDV_THRESH=8k", NULL, 4},
        /* Wildcard and specific receives mixed, shm and ucx peers
         * alternating (the hosts scenario's 2x2 cyclic job). */
        {"tests/ranks/anymix_test", "cyclic:2", "", NULL, 4},
        {"tests/ranks/anymix_test", "cyclic:2", "UCX_RNDV_THRESH=8k", NULL, 4},
        /* 512 MiB at once from rank 0 to 1: the link full for longer
         * than the peer timeout; the transfers are signs of life. */
        {"tests/ranks/ucx_test", "block:2", "UCXTEST=bulk CADRE_UCX_PEER_TIMEOUT=1",
         "ucx_test: rank %d ok", 2},
        /* Large messages held by the receiver (UCX's descriptor) until a
         * receive takes them: several senders at once, probed, taken in
         * order; truncated, posted first and unexpected. */
        {"tests/ranks/ucx_test", "cyclic:2", "UCXTEST=held", "ucx_test: rank %d ok", 4},
        /* Each rank's large send never received: finalize neither hangs
         * nor aborts in UCX (a rendezvous send waiting on the endpoint). */
        {"tests/ranks/ucx_test", "block:2", "UCXTEST=orphan", "ucx_test: rank %d ok", 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct run_result r;
        char env[256];
        snprintf(env, sizeof env, "%s %s", UCX_ENV, cases[i].env);
        test_progress("%s at %d ranks, FAKE_HOSTS=%s", cases[i].prog + 12, cases[i].n,
                      cases[i].spec);
        run_fake(&r, cases[i].spec, cases[i].n, env, "", cases[i].prog, 120 + 40.0 * cases[i].n);
        CHECK_MSG(r.exit_code == 0 && !r.timed_out, SHOWW(r, "exit 0"));
        check_peers(&r, cases[i].spec, cases[i].n, "ucx");
        if (cases[i].ok)
            check_oks(&r, cases[i].ok, cases[i].n);
        run_free(&r);
    }
}

/* The last of 3 ranks, alone on its fake host, killed or stopped while it
 * sends 64 MiB to each: ucx_test checks the survivors' failure (naming the
 * rank and its host, within 15 s). */
static void test_rank_lost(void)
{
    if (!HAVE_UCX)
        return;
    const char *cases[] = {"UCXTEST=kill", "UCXTEST=stop", "UCXTEST=killheld"};
    for (int i = 0; i < 3; i++) {
        struct run_result r;
        char env[256];
        snprintf(env, sizeof env, "%s %s", UCX_ENV, cases[i]);
        run_fake(&r, "block:2", 3, env, "--keep-going", "tests/ranks/ucx_test", 120);
        CHECK_MSG(r.exit_code == 137 && !r.timed_out, SHOWW(r, cases[i]));
        check_oks(&r, "ucx_test: rank %d ok", 2);
        for (int w = 0; w < 2; w++) {
            char want[128];
            snprintf(want, sizeof want, "[rank %d INFO P2P] peer 2: ucx", w);
            CHECK_MSG(count_lines(r.err, want) == 1, SHOWW(r, want));
        }
        if (i == 1) /* nothing closed: the heartbeats found it */
            CHECK_MSG(count_matching(r.err, "unreachable: nothing heard from it for") >= 2,
                      SHOWW(r, "unreachable: nothing heard"));
        run_free(&r);
    }
}

/* A large send whose receive is never posted, its data held by the
 * receiver's UCX: at CADRE_TIMEOUT it fails naming the call and the peer,
 * and is withdrawn (the engine's NACK, rreq 0): no hang waiting for UCX to
 * give its buffer back, and the message is gone at the receiver. */
static void test_send_withdrawn(void)
{
    if (!HAVE_UCX)
        return;
    struct run_result r;
    run_fake(&r, "block:2", 2, UCX_ENV " UCXTEST=withdraw CADRE_TIMEOUT=3", "",
             "tests/ranks/ucx_test", 60);
    CHECK_MSG(r.exit_code == 0 && !r.timed_out, SHOWW(r, "exit 0"));
    check_oks(&r, "ucx_test: rank %d ok", 2);
    const char *want = "rank 1: cadre_send: cadre_send to rank 0 (tag 30, 3145728 bytes) on "
                       "WORLD made no progress for 3 s (CADRE_TIMEOUT): the receiver never "
                       "posted a matching receive";
    CHECK_MSG(count_matching(r.err, want) == 1, SHOWW(r, want));
    run_free(&r);
}

/* The last of 3 ranks stopped until the others fail it, then continued:
 * alive, failed by the others; its own pending receive fails soon after
 * it resumes (ucx_test checks: within 15 s), not at CADRE_TIMEOUT (100 s
 * here, and the run's limit 90 s). */
static void test_rank_revived(void)
{
    if (!HAVE_UCX)
        return;
    struct run_result r;
    run_fake(&r, "block:2", 3, UCX_ENV " UCXTEST=revive CADRE_TIMEOUT=100", "--keep-going",
             "tests/ranks/ucx_test", 90);
    CHECK_MSG(r.exit_code == 0 && !r.timed_out, SHOWW(r, "exit 0"));
    check_oks(&r, "ucx_test: rank %d ok", 3);
    CHECK_MSG(count_matching(r.out, "ucx_test: rank 2 saw CADRE_ERR_PEER") == 1,
              SHOWW(r, "rank 2 saw CADRE_ERR_PEER"));
    run_free(&r);
}

/* UCX's UD timeout (30 s, software acknowledgements: a stopped peer's go
 * silent) below cadre's budget: raised to 2 x CADRE_UCX_PEER_TIMEOUT,
 * unless the user set it. */
static void test_ud_timeout(void)
{
    if (!HAVE_UCX)
        return;
    static const struct {
        const char *env;
        int lines;
    } cases[] = {
        {"CADRE_UCX_PEER_TIMEOUT=20", 2},
        {"CADRE_UCX_PEER_TIMEOUT=15", 0},
        {"CADRE_UCX_PEER_TIMEOUT=20 UCX_UD_TIMEOUT=25s", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct run_result r;
        char env[256];
        snprintf(env, sizeof env, "%s UCXTEST=bulk UCXBULK=1 %s", UCX_ENV, cases[i].env);
        run_fake(&r, "block:2", 2, env, "", "tests/ranks/ucx_test", 120);
        CHECK_MSG(r.exit_code == 0 && !r.timed_out, SHOWW(r, "exit 0"));
        CHECK_MSG(count_matching(r.err, "INFO P2P] ucx: UCX_UD_TIMEOUT=40s (2 x "
                                        "CADRE_UCX_PEER_TIMEOUT)") == cases[i].lines,
                  SHOWW(r, cases[i].env));
        run_free(&r);
    }
}

/* libucp that does not load: forced, every rank's cadre_init fails naming
 * ucx and the cause; by default (no RDMA here) the job runs on tcp between
 * hosts and never loads it. */
static void test_unavailable(void)
{
    struct run_result r;
    run_fake(&r, "block:2", 2, "CADRE_TRANSPORT=shm,ucx CADRE_UCX_LIB=" MISSING, "",
             "tests/ranks/init_basic", 60);
    CHECK_MSG(r.exit_code != 0 && !r.timed_out, SHOWW(r, "a failed start"));
    const char *want = HAVE_UCX ? "cannot load libucp: " MISSING ": cannot open shared object"
                                : "ucx: not built";
    CHECK_MSG(count_matching(r.err, "CADRE_TRANSPORT=\"shm,ucx\" asks for ucx, which cannot "
                                    "start on rank ") >= 1 &&
                  count_matching(r.err, want) >= 1,
              SHOWW(r, want));
    run_free(&r);
    run_fake(&r, "block:2", 4, "CADRE_UCX_LIB=" MISSING, "", "tests/ranks/ucx_test", 180);
    CHECK_MSG(r.exit_code == 0 && !r.timed_out, SHOWW(r, "exit 0"));
    check_peers(&r, "block:2", 4, "tcp");
    check_oks(&r, "ucx_test: rank %d ok", 4);
    if (HAVE_UCX)
        CHECK_MSG(count_matching(r.err, "INFO P2P] ucx: not used: no RDMA device here") == 4,
                  SHOWW(r, "ucx: not used"));
    CHECK_MSG(count_matching(r.err, "WARN") == 0, SHOWW(r, "no warning"));
    run_free(&r);
}

/* The default's choice where this node has an RDMA device and UCX offers an
 * RDMA transport: made true here by a private mount namespace with a fake
 * /sys/class/infiniband/mlx5_0 (fake_rdma.sh) and a libucp stand-in whose
 * resources include rc_verbs (ucp_shim.c, UCPSHIM=rdma; the data still goes
 * over UCX_TLS=tcp). UCX that starts: ucx between hosts. UCX that cannot
 * (libucp missing, ucp_init failing): one WARN per rank saying why, tcp
 * between hosts, the job correct. UCX failing on rank 0 only: rank 0 on
 * tcp with everyone, the others on ucx among themselves (both sides of
 * every pair agree, or the job would hang). Forced, the same failure fails
 * cadre_init naming it. */
static void test_default_choice(void)
{
    if (!HAVE_UCX)
        return;
    struct run_result r;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "sh %s true", src_path("tests/unit/fake_rdma.sh"));
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 30, &r) == 0);
    int can = r.exit_code == 0;
    run_free(&r);
    if (!can) {
        test_progress("skipped: no mount namespace here (fake_rdma.sh needs root)");
        return;
    }
    char shim[512];
    snprintf(shim, sizeof shim, "%s", build_path("tests/unit/.libs/libucpshim.so"));
    static const struct {
        const char *env, *across, *want;
        int warns, forced;
    } cases[] = {
        {"UCPSHIM=rdma", "ucx", "INFO P2P] ucx: UCX 1.", 0, 0},
        {"UCPSHIM=rdma CADRE_UCX_LIB=" MISSING, "tcp",
         "WARN P2P] transport ucx disabled: ucx: cannot load libucp: " MISSING, 4, 0},
        {"UCPSHIM=rdma,fail_init", "tcp",
         "WARN P2P] transport ucx disabled: ucx: ucp_init: No such device", 4, 0},
        {"UCPSHIM=rdma,fail_init UCPSHIM_RANKS=0", "ucx-but-0",
         "[rank 0 WARN P2P] transport ucx disabled: ucx: ucp_init: No such device", 1, 0},
        {"UCPSHIM=rdma,fail_init CADRE_TRANSPORT=shm,ucx", NULL, "ucp_init: No such device", 0,
         1},
        /* UCX starts everywhere, but rank 0 cannot make its endpoints
         * (ucp_ep_create: no common transport): its pairs with rank 2
         * and 3 take tcp, both sides warned before any message went. */
        {"UCPSHIM=rdma,fail_ep UCPSHIM_RANKS=0", "ucx-but-0", "WARN P2P] ucx: rank ", 4, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char env[1024];
        snprintf(env, sizeof env, "UCX_TLS=tcp UCX_NET_DEVICES=lo UCX_WARN_UNUSED_ENV_VARS=n "
                 "CADRE_UCX_LIB=%s %s sh %s", shim, cases[i].env,
                 src_path("tests/unit/fake_rdma.sh"));
        test_progress("default choice with RDMA offered: %s", cases[i].env);
        run_fake(&r, "block:2", 4, env, "", "tests/ranks/ucx_test", 180);
        if (cases[i].forced) {
            CHECK_MSG(r.exit_code != 0 && !r.timed_out &&
                          count_matching(r.err, "CADRE_TRANSPORT=\"shm,ucx\" asks for ucx, which "
                                                "cannot start on rank ") >= 1 &&
                          count_matching(r.err, cases[i].want) >= 1,
                      SHOWW(r, cases[i].want));
            run_free(&r);
            continue;
        }
        CHECK_MSG(r.exit_code == 0 && !r.timed_out, SHOWW(r, "exit 0"));
        check_oks(&r, "ucx_test: rank %d ok", 4);
        if (!strcmp(cases[i].across, "ucx-but-0")) {
            /* Hosts h0 (ranks 0, 1) and h1 (2, 3). */
            static const char *const want[] = {
                "[rank 0 INFO P2P] peer 2: tcp", "[rank 0 INFO P2P] peer 3: tcp",
                "[rank 2 INFO P2P] peer 0: tcp", "[rank 3 INFO P2P] peer 0: tcp",
                "[rank 1 INFO P2P] peer 2: ucx", "[rank 1 INFO P2P] peer 3: ucx",
                "[rank 2 INFO P2P] peer 1: ucx", "[rank 3 INFO P2P] peer 1: ucx"};
            for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
                CHECK_MSG(count_lines(r.err, want[k]) == 1, SHOWW(r, want[k]));
            if (strstr(cases[i].env, "fail_ep")) {
                /* Both sides of each pair say why, naming the peer. */
                char host[256] = "?", line[512];
                gethostname(host, sizeof host - 1);
                for (int w = 0; w < 4; w++) {
                    if (w == 1)
                        continue;
                    int peer = w ? 0 : 2;
                    for (; peer < 4; peer += w ? 4 : 1) {
                        snprintf(line, sizeof line, "[rank %d WARN P2P] ucx: rank %d (host %s) "
                                 "over tcp instead: UCX cannot make rank 0's endpoint to rank "
                                 "%d (host %s to host %s): ucp_ep_create: Destination is "
                                 "unreachable", w, peer, host, w ? w : peer, host, host);
                        CHECK_MSG(count_lines(r.err, line) == 1, SHOWW(r, line));
                    }
                }
            }
        } else {
            check_peers(&r, "block:2", 4, cases[i].across);
        }
        int nwant = cases[i].warns ? cases[i].warns : 4;
        CHECK_MSG(count_matching(r.err, cases[i].want) == nwant, SHOWW(r, cases[i].want));
        if (!cases[i].warns) {
            CHECK_MSG(count_matching(r.err, "RDMA offered; transports: ") == 4 &&
                          count_matching(r.err, "rc_verbs/mlx5_0:1") == 4,
                      SHOWW(r, "RDMA offered; transports: ...rc_verbs/mlx5_0:1"));
            /* Each process decides and says how device buffers go: Debian's
             * UCX takes no CUDA memory, so staged through host memory. */
            const char *staged = "INFO P2P] ucx: device buffers staged through host memory "
                                 "(UCX here takes no CUDA memory)";
            CHECK_MSG(count_matching(r.err, staged) == 4, SHOWW(r, staged));
        }
        CHECK_MSG(count_matching(r.err, "WARN") == cases[i].warns, SHOWW(r, "WARN lines"));
        run_free(&r);
    }
}

/* How device buffers go over ucx, decided by each process and logged: where
 * UCX takes CUDA memory (the stand-in says so, UCPSHIM=cuda: no UCX here is
 * built with CUDA) they go to UCX directly in a build with CUDA, else
 * staged; CADRE_UCX_DEVICE=staged stages them; another value fails the
 * forced transport naming it. Host buffers never take the direct path: the
 * data case passes with either choice. */
static void test_device_choice(void)
{
    if (!HAVE_UCX)
        return;
    static const struct {
        const char *env, *want;
        int fails;
    } cases[] = {
        {"UCPSHIM=cuda",
         HAVE_CUDA ? "INFO P2P] ucx: device buffers go to UCX directly (UCX here takes CUDA "
                     "memory): messages above the eager limit"
                   : "INFO P2P] ucx: device buffers staged through host memory (UCX here takes "
                     "CUDA memory, but this build has no CUDA)",
         0},
        {"UCPSHIM=cuda CADRE_UCX_DEVICE=staged",
         "INFO P2P] ucx: device buffers staged through host memory (CADRE_UCX_DEVICE=staged)", 0},
        {"UCPSHIM=", "INFO P2P] ucx: device buffers staged through host memory (UCX here takes "
                     "no CUDA memory)", 0},
        {"UCPSHIM=cuda CADRE_UCX_DEVICE=direct",
         "CADRE_UCX_DEVICE=\"direct\" is neither auto nor staged", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct run_result r;
        char env[1024];
        snprintf(env, sizeof env, "%s CADRE_UCX_LIB=%s %s", UCX_ENV,
                 build_path("tests/unit/.libs/libucpshim.so"), cases[i].env);
        test_progress("device buffers over ucx: %s", cases[i].env);
        run_fake(&r, "block:2", 4, env, "", "tests/ranks/ucx_test", 180);
        if (cases[i].fails) {
            CHECK_MSG(r.exit_code != 0 && !r.timed_out &&
                          count_matching(r.err, cases[i].want) >= 1,
                      SHOWW(r, cases[i].want));
            run_free(&r);
            continue;
        }
        CHECK_MSG(r.exit_code == 0 && !r.timed_out, SHOWW(r, "exit 0"));
        check_peers(&r, "block:2", 4, "ucx");
        check_oks(&r, "ucx_test: rank %d ok", 4);
        CHECK_MSG(count_matching(r.err, cases[i].want) == 4, SHOWW(r, cases[i].want));
        CHECK_MSG(count_matching(r.err, "ucx: device buffers ") == 4,
                  SHOWW(r, "one device-buffer line per rank"));
        run_free(&r);
    }
}

/* Forced ucx where UCX starts but cannot make rank 0's endpoint to rank 1
 * (the shim's fail_ep: ucp_ep_create "Destination is unreachable"):
 * cadre_init fails on both ranks, each naming the pair, the hosts and
 * UCX's reason, before any message went (not a peer failure at the first
 * send). The default's fallback to tcp: test_default_choice. */
static void test_no_endpoint(void)
{
    if (!HAVE_UCX)
        return;
    struct run_result r;
    char env[1024], host[256] = "?", want[768];
    gethostname(host, sizeof host - 1);
    snprintf(env, sizeof env, "%s CADRE_UCX_LIB=%s UCPSHIM=fail_ep UCPSHIM_RANKS=0", UCX_ENV,
             build_path("tests/unit/.libs/libucpshim.so"));
    run_fake(&r, "block:2", 2, env, "--keep-going", "tests/ranks/init_basic", 60);
    CHECK_MSG(r.exit_code != 0 && !r.timed_out, SHOWW(r, "a failed start"));
    for (int w = 0; w < 2; w++) {
        snprintf(want, sizeof want, "[rank %d WARN RUNTIME] cadre_init: CADRE_TRANSPORT=\"shm,ucx\" "
                 "asks for ucx, which cannot reach rank %d (host %s) from rank %d (host %s): UCX "
                 "cannot make rank 0's endpoint to rank 1 (host %s to host %s): ucp_ep_create: "
                 "Destination is unreachable (CADRE_ERR_UNSUPPORTED)", w, 1 - w, host, w, host,
                 host, host);
        CHECK_MSG(count_lines(r.err, want) == 1, SHOWW(r, want));
    }
    run_free(&r);
}

/* Ranks that exit without cadre_finalize, UCX's threads alive (ucx_test
 * nofinalize): each prints its ok and exits 0 (cadrerun says they skipped
 * it, and exits 1); in the sanitizers' build
 * LeakSanitizer's check at exit runs there, where it crashed ("Tracer
 * caught signal 11", reporting nothing) while UCX's memory hooks were on
 * (p2p_ucx.c, ucx_sanitizer_env), and finds no leak of cadre's own (UCX's
 * own, never freed without ucp_cleanup, make the exit status 1 there). */
static void test_exit_without_finalize(void)
{
    if (!HAVE_UCX)
        return;
    struct run_result r;
    run_fake(&r, "block:2", 2, UCX_ENV " UCXTEST=nofinalize", "--keep-going",
             "tests/ranks/ucx_test", 60);
    CHECK_MSG(!r.timed_out, SHOWW(r, "no time-out"));
    check_oks(&r, "ucx_test: rank %d ok", 2);
    CHECK_MSG(count_matching(r.err, "Tracer caught signal") == 0 &&
                  count_matching(r.err, "LeakSanitizer has encountered a fatal error") == 0,
              SHOWW(r, "no crash of LeakSanitizer"));
#ifdef __SANITIZE_ADDRESS__
    CHECK_MSG(count_matching(r.err, " in cadre") == 0 && count_matching(r.err, "libcadre.so") == 0,
              SHOWW(r, "no leak of cadre's own"));
#else
    /* cadrerun's own exit status says that they skipped it. */
    const char *want = "exited with status 0 without calling cadre_finalize";
    CHECK_MSG(count_matching(r.err, want) == 2, SHOWW(r, want));
#endif
    run_free(&r);
}

/* cadre-info's ucx row: built or not, usable or why not, what UCX offers. */
static void test_info_row(void)
{
    struct run_result r;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "env UCX_TLS=tcp %s --transports", build_path("tools/cadre-info"));
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 30, &r) == 0);
    const char *want = HAVE_UCX ? "ucx        yes    yes                          off-host peers "
                                  "over UCX 1."
                                : "ucx        no     no: not built";
    CHECK_MSG(r.exit_code == 0 && count_matching(r.out, want) == 1, SHOWW(r, want));
    if (HAVE_UCX)
        CHECK_MSG(count_matching(r.out, "transports: tcp/") == 1 &&
                      count_matching(r.out, "CUDA memory: ") == 1,
                  SHOWW(r, "transports: tcp/..., CUDA memory"));
    run_free(&r);
    snprintf(cmd, sizeof cmd, "env CADRE_UCX_LIB=%s %s --transports", MISSING,
             build_path("tools/cadre-info"));
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 30, &r) == 0);
    want = HAVE_UCX ? "ucx        yes    no: libucp unusable" : "ucx        no     no: not built";
    CHECK_MSG(r.exit_code == 0 && count_matching(r.out, want) == 1, SHOWW(r, want));
    run_free(&r);
}

void suite_ucx(void)
{
    CU_pSuite s = CU_add_suite("ucx", NULL, NULL);
    CU_add_test(s, "cadre-info's ucx row", test_info_row);
    CU_add_test(s, "UCX missing: forced fails, default on tcp", test_unavailable);
    CU_add_test(s, "RDMA offered: the default takes ucx, or tcp when it cannot start",
                test_default_choice);
    CU_add_test(s, "no endpoint to a peer: forced fails both ranks", test_no_endpoint);
    CU_add_test(s, "p2p, collectives, ANY_SOURCE, 64 MiB over ucx", test_programs_on_ucx);
    CU_add_test(s, "a rank killed or stopped: survivors fail within 15 s", test_rank_lost);
    CU_add_test(s, "a rank failed by the others while stopped: its receive fails on resuming",
                test_rank_revived);
    CU_add_test(s, "UCX_UD_TIMEOUT from CADRE_UCX_PEER_TIMEOUT", test_ud_timeout);
    CU_add_test(s, "a large send never received: CADRE_TIMEOUT, withdrawn", test_send_withdrawn);
    CU_add_test(s, "device buffers over ucx: direct where UCX takes CUDA memory, or staged",
                test_device_choice);
    CU_add_test(s, "ranks exit without cadre_finalize: no LeakSanitizer crash",
                test_exit_without_finalize);
}
