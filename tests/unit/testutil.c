#define _GNU_SOURCE /* memmem */
#include "testutil.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void append(char **buf, size_t *len, size_t *cap, const char *data, size_t n)
{
    if (*len + n + 1 > *cap) {
        while (*len + n + 1 > *cap)
            *cap = *cap ? *cap * 2 : 4096;
        *buf = realloc(*buf, *cap);
    }
    memcpy(*buf + *len, data, n);
    *len += n;
    (*buf)[*len] = '\0';
}

int run_start(const char *cmd, const char *input, double limit, struct run_job *j)
{
    memset(j, 0, sizeof *j);
    j->r.status = -1;
    j->pid = -1;
    j->out_fd = j->err_fd = -1;
    int pout[2], perr[2], pin[2];
    if (pipe(pout) || pipe(perr) || pipe(pin))
        return -1;
    j->t0 = now();
    j->limit = limit;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        setpgid(0, 0);
        dup2(pin[0], 0);
        dup2(pout[1], 1);
        dup2(perr[1], 2);
        close(pin[0]); close(pin[1]); close(pout[0]); close(pout[1]); close(perr[0]); close(perr[1]);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid);
    j->pid = pid;
    close(pin[0]);
    close(pout[1]);
    close(perr[1]);
    if (input) {
        size_t n = strlen(input), off = 0;
        signal(SIGPIPE, SIG_IGN);
        while (off < n) {
            ssize_t w = write(pin[1], input + off, n - off);
            if (w <= 0)
                break;
            off += (size_t)w;
        }
    }
    close(pin[1]);
    append(&j->r.out, &j->r.out_len, &j->ocap, "", 0);
    append(&j->r.err, &j->r.err_len, &j->ecap, "", 0);
    j->out_fd = pout[0];
    j->err_fd = perr[0];
    return 0;
}

/* Collects output until both pipes close, the limit runs out, or (needle
 * given) stdout (stderr: on_err) holds `count` lines containing needle. */
static void pump(struct run_job *j, const char *needle, int count, int on_err)
{
    while (j->out_fd >= 0 || j->err_fd >= 0) {
        if (needle && count_matching(on_err ? j->r.err : j->r.out, needle) >= count)
            return;
        double left = j->limit - (now() - j->t0);
        if (left <= 0) {
            j->r.timed_out = 1;
            kill(-j->pid, SIGKILL);
            return;
        }
        struct pollfd pf[2] = {{j->out_fd, POLLIN, 0}, {j->err_fd, POLLIN, 0}};
        int n = poll(pf, 2, (int)(left * 1000) + 1);
        if (n < 0 && errno == EINTR)
            continue;
        for (int i = 0; i < 2; i++) {
            if (pf[i].fd >= 0 && (pf[i].revents & (POLLIN | POLLHUP | POLLERR))) {
                char buf[65536];
                ssize_t k = read(pf[i].fd, buf, sizeof buf);
                if (k <= 0) {
                    close(pf[i].fd);
                    *(i == 0 ? &j->out_fd : &j->err_fd) = -1;
                } else if (i == 0) {
                    append(&j->r.out, &j->r.out_len, &j->ocap, buf, (size_t)k);
                } else {
                    append(&j->r.err, &j->r.err_len, &j->ecap, buf, (size_t)k);
                }
            }
        }
    }
}

int run_wait_output(struct run_job *j, const char *needle, int count)
{
    pump(j, needle, count, 0);
    return count_matching(j->r.out, needle) >= count;
}

int run_wait_stderr(struct run_job *j, const char *needle, int count)
{
    pump(j, needle, count, 1);
    return count_matching(j->r.err, needle) >= count;
}

int run_finish(struct run_job *j, struct run_result *r)
{
    pump(j, NULL, 0, 0);
    if (j->out_fd >= 0)
        close(j->out_fd);
    if (j->err_fd >= 0)
        close(j->err_fd);
    /* Output closed: the command is ending, or it handed the pipes away. */
    for (;;) {
        pid_t w = waitpid(j->pid, &j->r.status, WNOHANG);
        if (w == j->pid)
            break;
        if (now() - j->t0 > j->limit) {
            j->r.timed_out = 1;
            kill(-j->pid, SIGKILL);
            waitpid(j->pid, &j->r.status, 0);
            break;
        }
        usleep(2000);
    }
    j->r.seconds = now() - j->t0;
    if (WIFEXITED(j->r.status))
        j->r.exit_code = WEXITSTATUS(j->r.status);
    else if (WIFSIGNALED(j->r.status))
        j->r.exit_code = 128 + WTERMSIG(j->r.status);
    *r = j->r;
    return 0;
}

int run_cmd(const char *cmd, const char *input, double limit, struct run_result *r)
{
    struct run_job j;
    if (run_start(cmd, input, limit, &j) != 0) {
        *r = j.r;
        return -1;
    }
    return run_finish(&j, r);
}

void run_free(struct run_result *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

static const char *path_in(const char *var, const char *fallback, const char *rel)
{
    static char bufs[8][4096];
    static int next;
    char *b = bufs[next++ % 8];
    const char *root = getenv(var);
    snprintf(b, sizeof bufs[0], "%s/%s", root ? root : fallback, rel);
    return b;
}

const char *build_path(const char *rel)
{
    return path_in("CADRE_BUILDDIR", "..", rel);
}

const char *src_path(const char *rel)
{
    return path_in("CADRE_SRCDIR", "..", rel);
}

int count_matching(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t l = nl ? (size_t)(nl - p) : strlen(p);
        if (memmem(p, l, needle, strlen(needle)))
            n++;
        p = nl ? nl + 1 : NULL;
    }
    return n;
}

int count_lines(const char *text, const char *line)
{
    int n = 0;
    size_t len = strlen(line);
    for (const char *p = text; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t l = nl ? (size_t)(nl - p) : strlen(p);
        if (l == len && !memcmp(p, line, len))
            n++;
        p = nl ? nl + 1 : NULL;
    }
    return n;
}

int count_shm_leftovers(void)
{
    DIR *d = opendir("/dev/shm");
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, "cadre", 5))
            n++;
    closedir(d);
    return n;
}

/* -1: not looked up yet; -2: none. */
static int progress_fd = -1;

static void progress_write(const char *prefix, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

void test_progress(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    progress_write("cadre-tests: ", fmt, ap);
    va_end(ap);
}

void test_progress_plain(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    progress_write("", fmt, ap);
    va_end(ap);
}

static void progress_write(const char *prefix, const char *fmt, va_list ap)
{
    if (progress_fd == -1) {
        const char *v = getenv("CADRE_TEST_PROGRESS_FD");
        char *end;
        long fd = v && *v ? strtol(v, &end, 10) : -1;
        progress_fd = -2;
        /* Only an fd that is open, and kept from the commands we start
         * (cadrerun and its ranks must not hold make's stderr open). */
        if (fd > 2 && fd < 1024 && !*end && fcntl((int)fd, F_SETFD, FD_CLOEXEC) == 0)
            progress_fd = (int)fd;
    }
    if (progress_fd < 0)
        return;
    char line[1024];
    int n = snprintf(line, sizeof line, "%s", prefix);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    /* One write: lines of tests run in parallel (make -j) stay whole. */
    ssize_t w = write(progress_fd, line, len);
    (void)w;
}

static struct {
    int run, nfailed;
    char **failed;
} programs;

void test_note_program(const char *what, int ok)
{
    programs.run++;
    if (ok)
        return;
    char **more = realloc(programs.failed, (size_t)(programs.nfailed + 1) * sizeof *more);
    if (!more)
        abort();
    programs.failed = more;
    if (!(programs.failed[programs.nfailed++] = strdup(what)))
        abort();
}

int test_programs(int *nfailed, const char *const **names)
{
    *nfailed = programs.nfailed;
    *names = (const char *const *)programs.failed;
    return programs.run;
}
