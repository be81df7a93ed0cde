/*
 * cadrerun: starts the ranks of a cadre job on this node and serves them as
 * their PMIx server. main() and the command line live here; see launcher.h
 * for the map of the other files.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "launcher.h"

static const char usage_text[] =
    "usage: cadrerun [options] program [args...]\n"
    "Start the ranks of a cadre job on this node.\n"
    "\n"
    "  -n, -np N             start N ranks (default: one per visible GPU times\n"
    "                        --ranks-per-gpu; with no GPU, one per CPU)\n"
    "  --ranks-per-gpu K     let K consecutive local ranks share each GPU\n"
    "  -x VAR[=VALUE]        set VAR in the ranks' environment (VAR alone: pass\n"
    "                        cadrerun's own value); repeatable\n"
    "  --keep-going          when a rank fails, let the others run on (the first\n"
    "                        failure still decides the exit status)\n"
    "  --tag-output          prefix every output line with \"[rank] \"\n"
    "  --output-dir DIR      write rank R's output to DIR/rank.R.stdout and\n"
    "                        DIR/rank.R.stderr instead of cadrerun's own\n"
    "  --timeout SEC         after SEC seconds, print every rank's state (its\n"
    "                        cadre operation) and kill the job; exit status 124\n"
    "                        (the first SIGINT, ^C, prints the states too, then\n"
    "                        passes the signal on; a second one stops the job)\n"
    "  --bind-to core|numa|none\n"
    "                        CPU binding of each rank (default: numa with GPUs,\n"
    "                        core when ranks fit the cores, else none)\n"
    "  -v, --verbose         say what cadrerun does\n"
    "  --version             print the version and exit\n"
    "  -h, --help            print this help and exit\n"
    "\n"
    "Exit status: 0 when every rank exits 0; otherwise the first failure's exit\n"
    "code (1 for a rank that exits 0 after cadre_init without cadre_finalize),\n"
    "128+N for a rank killed by signal N, or the code given to cadre_abort;\n"
    "124 on --timeout, 2 for a bad command line, 126/127 for a program that\n"
    "cannot be executed or found, 125 when cadrerun itself fails.\n"
    "See cadrerun(1).\n";

void cadre__launcher_say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cadre__vwrite_line(STDERR_FILENO, "cadrerun: ", fmt, ap);
    va_end(ap);
}

static int usage_error(const char *fmt, ...) CADRE_PRINTF(1, 2);
static int usage_error(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cadre__launcher_say("%s (see cadrerun --help)", msg);
    return -1;
}

static int parse_int(const char *opt, const char *s, int min, int max, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < min || v > max)
        return usage_error("%s: expected a whole number from %d to %d, got '%s'", opt, min, max,
                           s);
    *out = (int)v;
    return 0;
}

static int valid_var_name(const char *s, size_t len)
{
    if (len == 0 || !(s[0] == '_' || (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z')))
        return 0;
    for (size_t i = 1; i < len; i++)
        if (!(s[i] == '_' || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
              (s[i] >= '0' && s[i] <= '9')))
            return 0;
    return 1;
}

/* ---- an unknown option, and the one it may be a typo of ---------------------------- */
/* The options spelled out in full (one-letter ones are too short to guess). */
static const char *const long_options[] = {
    "-np",           "--np",        "--ranks-per-gpu", "--keep-going", "--tag-output",
    "--output-dir",  "--timeout",   "--bind-to",       "--verbose",    "--version",
    "--help",        "--host",      "--hostfile",      "--machinefile",
};

/* Edit distance between a[0..la) and b[0..lb) counting a swap of two
 * neighbours as one edit (optimal string alignment); 99 past 32 chars. */
static int edit_distance(const char *a, size_t la, const char *b, size_t lb)
{
    enum { MAX = 32 };
    if (la > MAX || lb > MAX)
        return 99;
    int d[MAX + 1][MAX + 1];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[la][lb];
}

/* The option `arg` (up to any '=') is most likely a typo of: one within two
 * edits, and within a third of its letters, closer than any other; NULL
 * when none is, or two are as close. */
static const char *closest_option(const char *arg)
{
    size_t len = strcspn(arg, "=");
    if (len < 3)
        return NULL;
    const char *best = NULL;
    int best_d = 99, ties = 0;
    for (size_t k = 0; k < sizeof long_options / sizeof long_options[0]; k++) {
        const char *o = long_options[k];
        int d = edit_distance(arg, len, o, strlen(o));
        if (d > 2 || 3 * d > (int)strlen(o) - 2)
            continue;
        if (d < best_d) {
            best = o;
            best_d = d;
            ties = 0;
        } else if (d == best_d) {
            ties++;
        }
    }
    return ties ? NULL : best;
}

static int unknown_option(const char *arg)
{
    const char *guess = closest_option(arg);
    if (guess)
        return usage_error("unknown option '%s'; did you mean '%s'?", arg, guess);
    return usage_error("unknown option '%s'", arg);
}

/* Option value: "--opt=value", "-nVALUE", or the next argument. */
static const char *take_value(int argc, char **argv, int *i, const char *attached)
{
    if (attached)
        return attached;
    if (*i + 1 >= argc)
        return NULL;
    return argv[++*i];
}

enum { OPT_DONE = 1, OPT_EXIT_OK = 2 };

/* Parses options up to the program. Returns 0, OPT_EXIT_OK (--help,
 * --version done) or -1 after saying why. */
static int parse_options(int argc, char **argv, struct cadre__launcher_opts *o)
{
    memset(o, 0, sizeof *o);
    o->exports = calloc((size_t)argc, sizeof *o->exports);
    if (!o->exports)
        return usage_error("out of memory");
    int i = 1;
    for (; i < argc; i++) {
        char *a = argv[i];
        if (a[0] != '-' || a[1] == '\0')
            break; /* the program */
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        /* Split "--name=value"; single-dash options take values attached
         * ("-n4", "-xVAR=1") or separately. */
        char name[64];
        const char *attached = NULL;
        if (a[1] == '-') {
            const char *eq = strchr(a, '=');
            size_t len = eq ? (size_t)(eq - a) : strlen(a);
            if (len >= sizeof name)
                return usage_error("unknown option '%s'", a);
            memcpy(name, a, len);
            name[len] = '\0';
            attached = eq ? eq + 1 : NULL;
        } else if (!strcmp(a, "-np")) {
            snprintf(name, sizeof name, "-np");
        } else {
            snprintf(name, sizeof name, "-%c", a[1]);
            attached = a[2] ? a + 2 : NULL;
        }

        const char *v;
#define NEED_VALUE()                                                             \
    do {                                                                         \
        v = take_value(argc, argv, &i, attached);                                \
        if (!v)                                                                  \
            return usage_error("option %s needs a value", name);                 \
    } while (0)
#define NO_VALUE()                                                               \
    do {                                                                         \
        if (attached && a[1] == '-')                                             \
            return usage_error("option %s takes no value", name);                \
        if (attached)                                                            \
            return unknown_option(a);                                            \
    } while (0)

        if (!strcmp(name, "-n") || !strcmp(name, "-np") || !strcmp(name, "--np")) {
            NEED_VALUE();
            /* Local ranks are 16-bit in PMIx. */
            if (parse_int(name, v, 1, 65535, &o->nranks))
                return -1;
        } else if (!strcmp(name, "--ranks-per-gpu")) {
            NEED_VALUE();
            if (parse_int(name, v, 1, 65535, &o->ranks_per_gpu))
                return -1;
        } else if (!strcmp(name, "-x")) {
            NEED_VALUE();
            const char *eq = strchr(v, '=');
            if (!valid_var_name(v, eq ? (size_t)(eq - v) : strlen(v)))
                return usage_error("-x: '%s' is not VAR or VAR=VALUE with a valid variable name",
                                   v);
            o->exports[o->nexports++] = (char *)v;
        } else if (!strcmp(name, "--keep-going")) {
            NO_VALUE();
            o->keep_going = 1;
        } else if (!strcmp(name, "--tag-output")) {
            NO_VALUE();
            o->tag_output = 1;
        } else if (!strcmp(name, "--output-dir")) {
            NEED_VALUE();
            if (!*v)
                return usage_error("--output-dir: empty directory name");
            o->output_dir = v;
        } else if (!strcmp(name, "--timeout")) {
            NEED_VALUE();
            char *end;
            errno = 0;
            double t = strtod(v, &end);
            if (!*v || *end || errno || !isfinite(t) || t <= 0 || t > 1e9)
                return usage_error("--timeout: expected a number of seconds > 0, got '%s'", v);
            o->timeout = t;
        } else if (!strcmp(name, "--bind-to")) {
            NEED_VALUE();
            if (!strcmp(v, "core"))
                o->bind = BIND_CORE;
            else if (!strcmp(v, "numa"))
                o->bind = BIND_NUMA;
            else if (!strcmp(v, "none"))
                o->bind = BIND_NONE;
            else
                return usage_error("--bind-to: expected core, numa or none, got '%s'", v);
        } else if (!strcmp(name, "-v") || !strcmp(name, "--verbose")) {
            NO_VALUE();
            o->verbose = 1;
        } else if (!strcmp(name, "--version")) {
            NO_VALUE();
            printf("cadrerun (cadre) %s\n", PACKAGE_VERSION);
            return OPT_EXIT_OK;
        } else if (!strcmp(name, "-h") || !strcmp(name, "--help")) {
            NO_VALUE();
            fputs(usage_text, stdout);
            return OPT_EXIT_OK;
        } else if (!strcmp(name, "--host") || !strcmp(name, "-H") ||
                   !strcmp(name, "--hostfile") || !strcmp(name, "--machinefile")) {
            /* Beyond one machine cadre runs under the launchers clusters
             * have (issue 15): say which, instead of "unknown option". */
            cadre__launcher_say("%s: cadrerun starts ranks on this machine only; on several hosts "
                                "start the job with Slurm (srun --mpi=pmix -N 2 -n 4 ./app) or "
                                "Open MPI (mpirun --host h1:2,h2:2 ./app): see cadre-nodes(7), "
                                "Running on several nodes", name);
            return -1;
        } else {
            return unknown_option(a);
        }
#undef NEED_VALUE
#undef NO_VALUE
    }
    if (i >= argc)
        return usage_error("no program given; usage: cadrerun [options] program [args...]");
    o->argv = argv + i;
    return 0;
}

/* Resolves the program as execvp would, so a missing program is reported
 * once, before anything starts, with the shell's statuses 127 and 126. */
static int resolve_program(struct cadre__launcher_opts *o)
{
    const char *prog = o->argv[0];
    struct stat st;
    if (!*prog) {
        cadre__launcher_say("program name is empty");
        return CADRERUN_EXIT_NOTFOUND;
    }
    if (strchr(prog, '/')) {
        if (stat(prog, &st) != 0) {
            cadre__launcher_say("program '%s' not found: %s", prog, strerror(errno));
            return CADRERUN_EXIT_NOTFOUND;
        }
        if (!S_ISREG(st.st_mode) || access(prog, X_OK) != 0) {
            cadre__launcher_say("cannot execute '%s': %s", prog,
                                S_ISDIR(st.st_mode) ? "is a directory" : "permission denied");
            return CADRERUN_EXIT_NOEXEC;
        }
        snprintf(o->program, sizeof o->program, "%s", prog);
        return 0;
    }
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    int seen_noexec = 0;
    for (const char *p = path;;) {
        const char *colon = strchr(p, ':');
        size_t len = colon ? (size_t)(colon - p) : strlen(p);
        char cand[PATH_MAX];
        int n = len ? snprintf(cand, sizeof cand, "%.*s/%s", (int)len, p, prog)
                    : snprintf(cand, sizeof cand, "./%s", prog);
        if (n > 0 && (size_t)n < sizeof cand && stat(cand, &st) == 0 && S_ISREG(st.st_mode)) {
            if (access(cand, X_OK) == 0) {
                snprintf(o->program, sizeof o->program, "%s", cand);
                return 0;
            }
            seen_noexec = 1;
        }
        if (!colon)
            break;
        p = colon + 1;
    }
    if (seen_noexec) {
        cadre__launcher_say("cannot execute '%s': permission denied", prog);
        return CADRERUN_EXIT_NOEXEC;
    }
    cadre__launcher_say("program '%s' not found in PATH", prog);
    return CADRERUN_EXIT_NOTFOUND;
}

/* A closed stdin/stdout/stderr would be reused by the first file we open
 * (a PMIx socket, say) and then handed to ranks as their stdio. */
static void ensure_std_fds(void)
{
    for (int fd = 0; fd < 3; fd++) {
        if (fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
            int n = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
            if (n >= 0 && n != fd) {
                dup2(n, fd);
                close(n);
            }
        }
    }
}

int main(int argc, char **argv)
{
    ensure_std_fds();
    cadre__log_set_prefix("cadrerun");

    struct cadre__launcher_opts opts;
    struct cadre__launcher_job job;
    memset(&job, 0, sizeof job);
    int rc = parse_options(argc, argv, &opts);
    if (rc != 0) {
        rc = rc == OPT_EXIT_OK ? 0 : CADRERUN_EXIT_USAGE;
        goto early;
    }
    if (opts.verbose)
        cadre__log_set_level(CADRE_LOG_INFO);
    if ((rc = resolve_program(&opts)) != 0)
        goto early;

    job.opts = &opts;
    job.cleaner_fd = job.stdin_fd = -1;
    job.ngpus = cadre__launcher_gpu_count();
    long n = opts.nranks ? opts.nranks
             : job.ngpus  ? (long)job.ngpus * (opts.ranks_per_gpu ? opts.ranks_per_gpu : 1)
                          : cadre__launcher_cpu_count();
    if (n > 65535) {
        cadre__launcher_say("%ld ranks by default is more than 65535; give -n", n);
        rc = CADRERUN_EXIT_USAGE;
        goto early;
    }
    job.nranks = (int)n;
    rc = CADRERUN_EXIT_INTERNAL;
    if (!(job.ranks = calloc((size_t)job.nranks, sizeof *job.ranks))) {
        cadre__launcher_say("out of memory for %d ranks", job.nranks);
        goto early;
    }
    CADRE_INFO(LAUNCHER, "%d rank(s) of %s, %d GPU(s) visible", job.nranks, opts.program,
               job.ngpus);
    if (cadre__launcher_plan(&job) != 0)
        goto early;

    /* Two fds per rank: lift the soft limit as far as allowed (the ranks get
     * the original back). */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        struct rlimit more = {rl.rlim_max, rl.rlim_max};
        setrlimit(RLIMIT_NOFILE, &more);
    }

    /* From here on, the job has a temp dir and a cleaner that removes it
     * whatever happens to us; every exit goes through `out`. */
    if (cadre__launcher_cleanup_start(&job) != 0)
        goto early;
    job.exit_code = CADRERUN_EXIT_INTERNAL;

    /* libpmix's thread wakes our loop (event_base_once); locking must be on
     * before the base exists. */
    if (evthread_use_pthreads() != 0 || !(job.base = event_base_new())) {
        cadre__launcher_say("cannot create the event loop");
        goto out;
    }
    if (cadre__launcher_signals_start(&job) != 0 || cadre__launcher_pmix_start(&job) != 0 ||
        cadre__launcher_iof_prepare(&job) != 0)
        goto out;
    job.exit_code = 0;
    cadre__launcher_spawn(&job);
    cadre__launcher_check_done(&job);
    event_base_dispatch(job.base);
    cadre__launcher_iof_drain_all(&job);

out:;
    int pmix_stuck = cadre__launcher_pmix_stop(&job) != 0;
    cadre__launcher_iof_free(&job);
    cadre__launcher_cleanup_finish(&job, job.nlive == 0);
    if (pmix_stuck) {
        fflush(NULL);
        _exit(job.exit_code);
    }
    for (size_t i = 0; i < sizeof job.sig_ev / sizeof job.sig_ev[0]; i++)
        if (job.sig_ev[i])
            event_free(job.sig_ev[i]);
    if (job.timeout_ev)
        event_free(job.timeout_ev);
    if (job.kill_ev)
        event_free(job.kill_ev);
    if (job.drain_ev)
        event_free(job.drain_ev);
    if (job.sweep_ev)
        event_free(job.sweep_ev);
    if (job.report_ev)
        event_free(job.report_ev);
    if (job.base)
        event_base_free(job.base);
    rc = job.exit_code;
early:
    free(job.ranks);
    free(opts.exports);
    return rc;
}
