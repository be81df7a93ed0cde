/* Helpers for the CUnit runner: running commands (cadrerun jobs among them)
 * with a time limit and capturing what they print. */
#ifndef CADRE_TESTUTIL_H
#define CADRE_TESTUTIL_H

#include <stddef.h>
#include <sys/types.h>

#include <CUnit/CUnit.h>

struct run_result {
    int status;      /* raw wait status; -1 when the command could not start */
    int exit_code;   /* WEXITSTATUS, or 128+signal when killed */
    int timed_out;   /* the limit ran out and the command was killed */
    double seconds;  /* wall time */
    char *out, *err; /* NUL-terminated captured stdout and stderr (malloc'ed) */
    size_t out_len, err_len;
};

/* Runs "sh -c cmd" in its own process group with stdin from `input` (may be
 * NULL), killing the group after `limit` seconds. */
int run_cmd(const char *cmd, const char *input, double limit, struct run_result *r);
void run_free(struct run_result *r);

/* The same in steps, to act on a command while it runs: start it, wait for
 * `count` stdout lines containing `needle` (returns whether they came before
 * the limit), then collect the rest and its status. */
struct run_job {
    pid_t pid; /* sh, or what it exec'ed */
    int out_fd, err_fd;
    double t0, limit;
    size_t ocap, ecap;
    struct run_result r;
};
int run_start(const char *cmd, const char *input, double limit, struct run_job *j);
int run_wait_output(struct run_job *j, const char *needle, int count);
/* The same for stderr lines. */
int run_wait_stderr(struct run_job *j, const char *needle, int count);
int run_finish(struct run_job *j, struct run_result *r);

/* Absolute paths inside the build and source trees (from CADRE_BUILDDIR /
 * CADRE_SRCDIR, set by make check). Returned strings are static rotating
 * buffers: use them before calling again eight times. */
const char *build_path(const char *rel);
const char *src_path(const char *rel);
/* The cadrerun binary of the build tree. */
#define CADRERUN build_path("launcher/cadrerun")

/* Counts lines of text that contain `needle`. */
int count_matching(const char *text, const char *needle);
/* Counts lines of text that equal `line` exactly. */
int count_lines(const char *text, const char *line);
/* Entries in /dev/shm whose names start with "cadre". */
int count_shm_leftovers(void);

/* make check keeps what the runner prints in tests/unit/cadre-tests.log and
 * shows nothing until it ends; it also gives the runner the terminal's (or
 * CI's) stderr as fd CADRE_TEST_PROGRESS_FD (tests/Makefile.am). One line
 * "cadre-tests: ..." goes there, and nowhere else, for progress as it
 * happens; without that variable (the runner started by hand, its output
 * already in view) this does nothing. */
void test_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same line without the "cadre-tests: " prefix (the runner's summary). */
void test_progress_plain(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The programs of ranks.list as they end, for the runner's closing summary
 * ("what": name, rank count, environment; failed ones are named there). */
void test_note_program(const char *what, int ok);
/* How many were noted, how many failed; names[i] (i < *nfailed) the failed. */
int test_programs(int *nfailed, const char *const **names);

/* Report and print on failure; keeps CUnit's messages readable. */
#define CHECK_MSG(cond, ...)                          \
    do {                                              \
        if (!(cond)) {                                \
            fprintf(stderr, "\n  FAILED: " __VA_ARGS__); \
            fprintf(stderr, "\n");                    \
        }                                             \
        CU_ASSERT(cond);                              \
    } while (0)

#endif
