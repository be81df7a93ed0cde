/* The TCP transport on its own: every scenario of tcp_transport_test (two
 * or three forked processes talking through p2p/p2p_tcp.c with a mock
 * engine), and the plain-socket reference benchmark as a smoke test. */
#include <stdio.h>
#include <string.h>

#include <arpa/inet.h>

#include "p2p/p2p_tcp_if.h"
#include "testutil.h"

static void run_scenario(const char *name, double limit)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s", build_path("tests/unit/tcp_transport_test"), name);
    struct run_result r;
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, limit, &r) == 0);
    while (r.out_len > 0 && r.out[r.out_len - 1] == '\n')
        r.out[--r.out_len] = '\0';
    fprintf(stderr, "\n    %s: exit %d, %.2f s%s%s ", name, r.exit_code, r.seconds,
            r.out_len ? "; " : "", r.out);
    CHECK_MSG(r.exit_code == 0 && !r.timed_out, "tcp %s: exit %d%s\n--- stdout\n%s--- stderr\n%s",
              name, r.exit_code, r.timed_out ? " (timed out)" : "", r.out, r.err);
    run_free(&r);
}

static void test_basic(void) { run_scenario("basic", 30); }
static void test_eager(void) { run_scenario("eager", 60); }
static void test_fifo(void) { run_scenario("fifo", 90); }
static void test_data(void) { run_scenario("data", 60); }
static void test_burst(void) { run_scenario("burst", 90); }
static void test_badconn(void) { run_scenario("badconn", 60); }
static void test_corrupt(void) { run_scenario("corrupt", 30); }
static void test_kill_recv(void) { run_scenario("kill_recv", 30); }
static void test_kill_send(void) { run_scenario("kill_send", 30); }
static void test_bye(void) { run_scenario("bye", 30); }
static void test_many(void) { run_scenario("many", 90); }
static void test_sleepy(void) { run_scenario("sleepy", 90); }
static void test_stall(void) { run_scenario("stall", 90); }
static void test_claim(void) { run_scenario("claim", 60); }
static void test_crowd(void) { run_scenario("crowd", 90); }
static void test_retry(void) { run_scenario("retry", 60); }
static void test_decoy(void) { run_scenario("decoy", 60); }
static void test_farewell(void) { run_scenario("farewell", 30); }
static void test_late_bye(void) { run_scenario("late_bye", 30); }
static void test_duplex(void) { run_scenario("duplex", 90); }

static void test_bench_smoke(void)
{
    struct run_result r;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s -q -m 65536", build_path("tests/bench/tcp_pingpong"));
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 30, &r) == 0);
    CHECK_MSG(r.exit_code == 0 && strstr(r.out, "65536") != NULL, "tcp_pingpong: exit %d\n%s%s",
              r.exit_code, r.out, r.err);
    run_free(&r);
}

/* The alternated benchmark checks every message it moves: a short run on
 * TCP must end well with a row for every size. */
static void test_alternate_smoke(void)
{
    struct run_result r;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "CADRE_TRANSPORT=tcp %s -n 2 %s -q -b 1 -m 65536", CADRERUN,
             build_path("tests/bench/tcp_alternate"));
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 60, &r) == 0);
    int rows = 0;
    for (const char *p = r.out; (p = strstr(p, "\n| ")) != NULL; p++)
        rows += p[3] >= '0' && p[3] <= '9';
    CHECK_MSG(r.exit_code == 0 && rows == 17 && strstr(r.out, "| 65536 |") != NULL,
              "tcp_alternate: exit %d, %d rows\n%s%s", r.exit_code, rows, r.out, r.err);
    run_free(&r);
}

/* memcheck over a TCP job whose progress thread sleeps in poll while
 * intruders come and go: no error (once: the engine read the eventfd's
 * revents when it had skipped poll). Skipped without valgrind. */
static void test_valgrind(void)
{
#ifdef __SANITIZE_ADDRESS__
    /* memcheck cannot run what AddressSanitizer built (configure
     * --enable-sanitizers), which checks the same errors itself. */
    fprintf(stderr, "\n    skipped: an AddressSanitizer build ");
    return;
#endif
    struct run_result r;
    CU_ASSERT_FATAL(run_cmd("valgrind --version", NULL, 30, &r) == 0);
    int have = r.exit_code == 0;
    run_free(&r);
    if (!have) {
        fprintf(stderr, "\n    skipped: valgrind not found ");
        return;
    }
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "CADRE_TRANSPORT=tcp %s -n 3 valgrind -q --error-exitcode=9 %s", CADRERUN,
             build_path("tests/ranks/tcp_intruder"));
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 300, &r) == 0);
    fprintf(stderr, "\n    exit %d, %.2f s ", r.exit_code, r.seconds);
    CHECK_MSG(r.exit_code == 0 && !r.timed_out && strstr(r.out, "tcp_intruder: ok"),
              "valgrind tcp_intruder: exit %d%s\n--- stdout\n%s--- stderr\n%s", r.exit_code,
              r.timed_out ? " (timed out)" : "", r.out, r.err);
    run_free(&r);
}

/* ---- CADRE_SOCKET_IFNAME: parsing, matching, the choice of interfaces ---- */

static int parses(const char *text, struct tcp_ifspec *spec, char *err)
{
    err[0] = '\0';
    return cadre__p2p_tcp_ifspec_parse(text, spec, err, 256) == 0;
}

static void test_ifname_parse(void)
{
    struct tcp_ifspec s;
    char err[256];
    CU_ASSERT(parses(NULL, &s, err) && !s.set && s.n == 0);
    CU_ASSERT(parses("", &s, err) && !s.set && s.n == 0);
    CU_ASSERT(parses("eth", &s, err) && s.set && !s.exclude && !s.exact && s.n == 1 &&
              !strcmp(s.name[0], "eth"));
    CU_ASSERT(parses("eth,ib", &s, err) && s.n == 2 && !strcmp(s.name[1], "ib"));
    CU_ASSERT(parses("^docker,lo", &s, err) && s.exclude && !s.exact && s.n == 2 &&
              !strcmp(s.name[0], "docker") && !strcmp(s.name[1], "lo"));
    CU_ASSERT(parses("=eth0", &s, err) && !s.exclude && s.exact && s.n == 1 &&
              !strcmp(s.name[0], "eth0"));
    CU_ASSERT(parses("^=eth0,eth1", &s, err) && s.exclude && s.exact && s.n == 2);
    CU_ASSERT(parses("eth0,,ib0,", &s, err) && s.n == 2 && !strcmp(s.name[1], "ib0"));
    CU_ASSERT(parses("abcdefghijklmno", &s, err) && s.n == 1); /* 15 characters: IFNAMSIZ - 1 */
    /* Errors name the variable and what is wrong. */
    const char *bad[] = {"^", "=", "^=", ",", "^,,", "abcdefghijklmnop",
                         "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_MSG(!parses(bad[i], &s, err) && strstr(err, "CADRE_SOCKET_IFNAME") &&
                      strstr(err, bad[i]),
                  "\"%s\" parsed, or the error does not quote it: %s", bad[i], err);
    }
}

static int matches(const char *spec, const char *ifname)
{
    struct tcp_ifspec s;
    char err[256];
    CU_ASSERT_FATAL(parses(spec, &s, err));
    return cadre__p2p_tcp_ifspec_match(&s, ifname);
}

static void test_ifname_match(void)
{
    CU_ASSERT(matches("eth", "eth0") && matches("eth", "eth10") && matches("eth", "eth"));
    CU_ASSERT(!matches("eth", "veth0") && !matches("eth", "et") && !matches("eth", "lo"));
    CU_ASSERT(matches("ib,eth", "eth1") && matches("ib,eth", "ib0") && !matches("ib,eth", "em1"));
    CU_ASSERT(matches("=eth0", "eth0") && !matches("=eth0", "eth01") && !matches("=eth0", "eth"));
    CU_ASSERT(!matches("^docker", "docker0") && matches("^docker", "eth0") &&
              matches("^docker", "dock"));
    CU_ASSERT(!matches("^=eth0", "eth0") && matches("^=eth0", "eth01") &&
              matches("^=eth0", "lo"));
    CU_ASSERT(!matches("^docker,lo", "lo") && !matches("^docker,lo", "docker1") &&
              matches("^docker,lo", "ens3"));
}

/* Selects from a made-up host; the chosen names, space-separated, in got. */
static int pick(const char *spec, const struct tcp_if *all, int n, char *got, char *err)
{
    struct tcp_ifspec s;
    struct tcp_if out[16];
    char perr[256];
    CU_ASSERT_FATAL(parses(spec, &s, perr));
    err[0] = got[0] = '\0';
    int k = cadre__p2p_tcp_if_select(all, n, &s, spec ? spec : "", out, 16, err, 512);
    for (int i = 0; i < k; i++)
        snprintf(got + strlen(got), 256 - strlen(got), "%s%s", i ? " " : "", out[i].name);
    return k;
}

#define IF(name, ip, lo) {name, 0, lo}

static void test_ifname_select(void)
{
    struct tcp_if host[] = {IF("lo", "127.0.0.1", 1),       IF("eth0", "10.0.0.1", 0),
                            IF("docker0", "172.17.0.1", 0), IF("veth1a2b", "169.254.3.4", 0),
                            IF("virbr0", "192.168.122.1", 0), IF("ib0", "10.1.0.1", 0),
                            IF("eth0:1", "10.0.0.1", 0),    IF("br-5e1f", "172.18.0.1", 0)};
    const char *ips[] = {"127.0.0.1",     "10.0.0.1", "172.17.0.1", "169.254.3.4",
                         "192.168.122.1", "10.1.0.1", "10.0.0.1",   "172.18.0.1"};
    int n = (int)(sizeof host / sizeof *host);
    for (int i = 0; i < n; i++)
        CU_ASSERT_FATAL(inet_pton(AF_INET, ips[i], &host[i].addr) == 1);
    char got[256], err[512];
    /* The default: no loopback but for same-host peers (last), no bridges
     * or container ends, each address once (eth0:1 is eth0's). */
    CU_ASSERT(pick(NULL, host, n, got, err) == 3 && !strcmp(got, "eth0 ib0 lo"));
    CU_ASSERT(pick("", host, n, got, err) == 3 && !strcmp(got, "eth0 ib0 lo"));
    /* ... those only when nothing else is there; loopback alone last. */
    struct tcp_if bare[] = {host[0], host[2], host[4]};
    CU_ASSERT(pick(NULL, bare, 3, got, err) == 3 && !strcmp(got, "docker0 virbr0 lo"));
    CU_ASSERT(pick(NULL, host, 1, got, err) == 1 && !strcmp(got, "lo"));
    CU_ASSERT(pick(NULL, host, 0, got, err) == 0);
    /* Include lists: prefixes, exact names, loopback only where named
     * (a set list is obeyed: no loopback added for this host's peers). */
    CU_ASSERT(pick("ib", host, n, got, err) == 1 && !strcmp(got, "ib0"));
    CU_ASSERT(pick("docker,ib", host, n, got, err) == 2 && !strcmp(got, "docker0 ib0"));
    CU_ASSERT(pick("=eth0", host, n, got, err) == 1 && !strcmp(got, "eth0"));
    CU_ASSERT(pick("lo", host, n, got, err) == 1 && !strcmp(got, "lo"));
    /* Exclude lists: every other interface, bridges included (the list
     * replaces the default), never loopback. */
    CU_ASSERT(pick("^eth,ib,lo", host, n, got, err) == 4 &&
              !strcmp(got, "docker0 veth1a2b virbr0 br-5e1f"));
    CU_ASSERT(pick("^=docker0", host, n, got, err) == 5 &&
              !strcmp(got, "eth0 veth1a2b virbr0 ib0 br-5e1f"));
    CU_ASSERT(pick("lo,eth0", host, n, got, err) == 2 && !strcmp(got, "lo eth0"));
    /* Nothing selected: an error naming the variable and what there is. */
    const char *none[] = {"=eth", "wlan", "^e,d,v,i,b,l",
                          ("^=lo,eth0,eth0:1,docker0,veth1a2b,"
                           "virbr0,ib0,br-5e1f")};
    for (size_t i = 0; i < sizeof none / sizeof *none; i++) {
        CHECK_MSG(pick(none[i], host, n, got, err) == -1 && strstr(err, "CADRE_SOCKET_IFNAME") &&
                      strstr(err, none[i]) && strstr(err, "eth0 10.0.0.1") &&
                      strstr(err, "lo 127.0.0.1") && strstr(err, "ib0 10.1.0.1"),
                  "%s: got \"%s\", error \"%s\"", none[i], got, err);
    }
    CHECK_MSG(pick("eth", host, 0, got, err) == -1 && strstr(err, "none with an IPv4 address"),
              "no interfaces: %s", err);
    /* At most max addresses. */
    struct tcp_ifspec s;
    struct tcp_if out[2];
    CU_ASSERT_FATAL(parses("^x", &s, err));
    CU_ASSERT(cadre__p2p_tcp_if_select(host, n, &s, "^x", out, 2, err, sizeof err) == 2);
}

/* A CADRE_SOCKET_IFNAME that selects nothing fails cadre_init (not only
 * the TCP transport, which would leave the job to fail later without the
 * reason), naming the variable and the interfaces there are. */
static void test_ifname_init(void)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "CADRE_TRANSPORT=tcp CADRE_SOCKET_IFNAME='=nosuch0' %s -n 2 %s",
             CADRERUN, build_path("tests/ranks/init_basic"));
    struct run_result r;
    CU_ASSERT_FATAL(run_cmd(cmd, NULL, 60, &r) == 0);
    CHECK_MSG(r.exit_code != 0 && !r.timed_out &&
                  strstr(r.err, "cadre_init: CADRE_SOCKET_IFNAME=\"=nosuch0\" selects none of "
                                "this host's interfaces (") &&
                  strstr(r.err, "lo 127.0.0.1") &&
                  strstr(r.err, "init_basic: cadre_init: CADRE_ERR_ARG"),
              "exit %d%s\n--- stdout\n%s--- stderr\n%s", r.exit_code,
              r.timed_out ? " (timed out)" : "", r.out, r.err);
    run_free(&r);
}

void suite_tcp(void)
{
    CU_pSuite s = CU_add_suite("tcp", NULL, NULL);
    CU_add_test(s, "basic: blob, reachable, failed connects, no fd leak", test_basic);
    CU_add_test(s, "eager: sizes 0..max_payload both ways, byte for byte", test_eager);
    CU_add_test(s, "fifo: 10000 messages each way in order", test_fifo);
    CU_add_test(s, "data: DATA in place, buffered DATA, RTS/CTS/NACK", test_data);
    CU_add_test(s, "burst: full sockets both ways, staging and BUSY", test_burst);
    CU_add_test(s, "badconn: bad handshakes refused, peers unharmed", test_badconn);
    CU_add_test(s, "corrupt: corrupt header fails that peer", test_corrupt);
    CU_add_test(s, "kill_recv: a killed sender is reported", test_kill_recv);
    CU_add_test(s, "kill_send: sending to a killed peer fails, no SIGPIPE", test_kill_send);
    CU_add_test(s, "bye: EOF after BYE is orderly", test_bye);
    CU_add_test(s, "many: six processes all to all, sleeping in poll", test_many);
    CU_add_test(s, "sleepy: a pair sleeping in poll when idle", test_sleepy);
    CU_add_test(s, "stall: a reader that stops; staging, sends never block", test_stall);
    CU_add_test(s, "claim: payloads read into a receive, released part-way", test_claim);
    CU_add_test(s, "bench/tcp_pingpong runs", test_bench_smoke);
    CU_add_test(s, "bench/tcp_alternate runs on TCP, every message checked", test_alternate_smoke);
    CU_add_test(s, "valgrind: tcp_intruder at 3 ranks, no memcheck error", test_valgrind);
    CU_add_test(s, "crowd: 340 strangers' connections, a peer still gets in", test_crowd);
    CU_add_test(s, "retry: a connect reset twice is made again", test_retry);
    CU_add_test(s, "CADRE_SOCKET_IFNAME: every syntax form, bad ones named", test_ifname_parse);
    CU_add_test(s, "CADRE_SOCKET_IFNAME: prefixes, exact names, exclusions", test_ifname_match);
    CU_add_test(s, "interfaces chosen: default, include, exclude, none", test_ifname_select);
    CU_add_test(s, "decoy: a dropping, a wrong and a refusing address cost nothing", test_decoy);
    CU_add_test(s, "farewell: in cadre_finalize a refused connect is not tried again",
                test_farewell);
    CU_add_test(s, "late BYE: a send that meets a finalized peer's reset reads its BYE first",
                test_late_bye);
    CU_add_test(s, "duplex: the first sender's connection carries the answers too, in order",
                test_duplex);
    CU_add_test(s, "CADRE_SOCKET_IFNAME selecting nothing fails cadre_init", test_ifname_init);
}
