#include "testutil.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
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

int run_cmd(const char *cmd, const char *input, double limit, struct run_result *r)
{
    memset(r, 0, sizeof *r);
    r->status = -1;
    int pout[2], perr[2], pin[2];
    if (pipe(pout) || pipe(perr) || pipe(pin))
        return -1;
    double t0 = now();
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
    size_t ocap = 0, ecap = 0;
    append(&r->out, &r->out_len, &ocap, "", 0);
    append(&r->err, &r->err_len, &ecap, "", 0);
    int open_fds = 2;
    struct pollfd pf[2] = {{pout[0], POLLIN, 0}, {perr[0], POLLIN, 0}};
    while (open_fds > 0) {
        double left = limit - (now() - t0);
        if (left <= 0) {
            r->timed_out = 1;
            kill(-pid, SIGKILL);
            break;
        }
        int n = poll(pf, 2, (int)(left * 1000) + 1);
        if (n < 0 && errno == EINTR)
            continue;
        for (int i = 0; i < 2; i++) {
            if (pf[i].fd >= 0 && (pf[i].revents & (POLLIN | POLLHUP | POLLERR))) {
                char buf[65536];
                ssize_t k = read(pf[i].fd, buf, sizeof buf);
                if (k <= 0) {
                    close(pf[i].fd);
                    pf[i].fd = -1;
                    open_fds--;
                } else if (i == 0) {
                    append(&r->out, &r->out_len, &ocap, buf, (size_t)k);
                } else {
                    append(&r->err, &r->err_len, &ecap, buf, (size_t)k);
                }
            }
        }
    }
    for (int i = 0; i < 2; i++)
        if (pf[i].fd >= 0)
            close(pf[i].fd);
    /* Output closed: the command is ending, or it handed the pipes away. */
    for (;;) {
        pid_t w = waitpid(pid, &r->status, WNOHANG);
        if (w == pid)
            break;
        if (now() - t0 > limit) {
            r->timed_out = 1;
            kill(-pid, SIGKILL);
            waitpid(pid, &r->status, 0);
            break;
        }
        usleep(2000);
    }
    r->seconds = now() - t0;
    if (WIFEXITED(r->status))
        r->exit_code = WEXITSTATUS(r->status);
    else if (WIFSIGNALED(r->status))
        r->exit_code = 128 + WTERMSIG(r->status);
    return 0;
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
