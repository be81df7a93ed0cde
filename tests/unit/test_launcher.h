/* What the launcher suite's two files share (test_launcher.c registers the
 * suite and holds these helpers; test_launcher_opts.c holds the cases on
 * stdio, command lines and --keep-going): the job runner with our TMPDIR,
 * the probes' "rank R ..." lines, the checks that nothing of a job remains,
 * and the report format of a failed check. */
#ifndef CADRE_TEST_LAUNCHER_H
#define CADRE_TEST_LAUNCHER_H

#include "testutil.h"

#define PROBE build_path("tests/ranks/launch_probe")
#define LIMIT 20.0

/* The suite's private TMPDIR (suite_init creates it). */
extern char tmpdir[64];

/* Runs cadrerun with args (and variables env, may be NULL) to the end. */
void launch(struct run_result *r, const char *input, const char *env, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Starts cadrerun with args; j->pid is cadrerun itself. */
void launch_start(struct run_job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

struct rank_line {
    int rank, size, local, pid, gpu;
    char prefix[64];
};

/* The "rank R size S ..." lines of the probes, by rank; returns how many
 * there were (a rank reporting twice counts twice). */
int parse_ranks(const char *out, struct rank_line *by_rank, int max);
/* Whether pid is a live launch_probe. */
int probe_running(int pid);
/* Nothing of the job may remain under our TMPDIR or in /dev/shm. */
void check_clean(const char *out);
/* A 3-rank job in which `action` fails rank `bad`: status and cause. */
void check_failure(const char *action, int bad, int want_code, const char *cause);

#define REPORT_FMT "exit %d%s\n--- stdout\n%s--- stderr\n%s"
#define REPORT_ARGS(r) (r).exit_code, (r).timed_out ? " (timed out)" : "", (r).out, (r).err
#define REPORT(r) REPORT_FMT, REPORT_ARGS(r)

/* test_launcher_opts.c */
void test_tag_output(void);
void test_stdin(void);
void test_output_dir(void);
void test_bad_input(void);
void test_exit_without_finalize(void);
void test_not_cadre_program(void);
void test_keep_going_timeout(void);
void test_keep_going_abort(void);
void test_bind_core_warning(void);
void test_readme_options(void);

/* test_launcher_guard.c */
void test_pmix_port_junk(void);
void test_pmix_port_junk_inside(void);
void test_pmix_client_below_rank(void);
void test_orphan_failed_job(void);
void test_orphan_ended_job(void);

#endif
