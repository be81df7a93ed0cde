/* The TCP transport on its own: every scenario of tcp_transport_test (two
 * or three forked processes talking through p2p/p2p_tcp.c with a mock
 * engine), and the plain-socket reference benchmark as a smoke test. */
#include <stdio.h>
#include <string.h>

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
}
