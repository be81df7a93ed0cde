/*
 * Ranks' stdio. stdout and stderr come back through pipes and leave cadrerun
 * a whole line per write, so lines of different ranks never mix; with
 * --tag-output each line gets "[rank] ". A line longer than the buffer is
 * cut (and, tagged, ended) at LINE_BUF bytes. Untagged, a partial line (a
 * prompt) goes out after PARTIAL_MS of quiet. --output-dir hands ranks their
 * files directly. Rank 0 gets cadrerun's stdin itself, except from a
 * terminal: ranks are not in the terminal's foreground group, so reading it
 * would stop them, and cadrerun forwards what it reads through a pipe.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "launcher.h"

#define LINE_BUF 65536
#define PARTIAL_MS 100

enum { STDIN_PASS, STDIN_FORWARD, STDIN_NULL };
static int stdin_mode;
static int devnull = -1;
static int out_broken[3]; /* cadrerun's stdout/stderr gave EPIPE: drop */

/* Scratch for tagged output. */
static char *scratch;
static size_t scratch_cap;

static void write_all(int fd, const char *p, size_t len)
{
    while (len > 0 && !out_broken[fd]) {
        ssize_t w = write(fd, p, len);
        if (w > 0) {
            p += w;
            len -= (size_t)w;
        } else if (w < 0 && errno == EAGAIN) {
            /* Someone made our stdout non-blocking: wait instead. */
            struct pollfd pfd = {fd, POLLOUT, 0};
            poll(&pfd, 1, -1);
        } else if (!(w < 0 && errno == EINTR)) {
            out_broken[fd] = 1; /* reader gone: the job goes on, unheard */
        }
    }
}

static int reserve(size_t need)
{
    if (need <= scratch_cap)
        return 0;
    size_t cap = scratch_cap ? scratch_cap : 4 * LINE_BUF;
    while (cap < need)
        cap *= 2;
    char *p = realloc(scratch, cap);
    if (!p)
        return -1;
    scratch = p;
    scratch_cap = cap;
    return 0;
}

/* Writes len bytes of s's buffer: whole lines, plus a cut line when `cut`
 * (ended with a newline when tagged). */
static void emit(struct cadre__launcher_stream *s, size_t len, int cut)
{
    if (!s->job->opts->tag_output) {
        write_all(s->to_fd, s->buf, len);
        return;
    }
    char tag[24];
    int tlen = snprintf(tag, sizeof tag, "[%d] ", s->rank->rank);
    size_t lines = cut ? 1 : 0;
    for (size_t i = 0; i < len; i++)
        lines += s->buf[i] == '\n';
    if (reserve(len + lines * (size_t)tlen + 1) != 0) {
        write_all(s->to_fd, s->buf, len); /* untagged beats lost */
        return;
    }
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(s->buf + i, '\n', len - i);
        size_t l = nl ? (size_t)(nl - (s->buf + i)) + 1 : len - i;
        memcpy(scratch + o, tag, (size_t)tlen);
        o += (size_t)tlen;
        memcpy(scratch + o, s->buf + i, l);
        o += l;
        i += l;
        if (!nl)
            scratch[o++] = '\n';
    }
    write_all(s->to_fd, scratch, o);
}

static void consume(struct cadre__launcher_stream *s, size_t n)
{
    memmove(s->buf, s->buf + n, s->len - n);
    s->len -= n;
}

static void on_partial_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct cadre__launcher_stream *s = arg;
    if (s->len) {
        emit(s, s->len, 1);
        s->len = 0;
    }
}

static void stream_close(struct cadre__launcher_stream *s)
{
    if (s->fd < 0)
        return;
    if (s->len) {
        emit(s, s->len, 1);
        s->len = 0;
    }
    if (s->ev)
        event_free(s->ev);
    if (s->flush_ev)
        event_free(s->flush_ev);
    s->ev = s->flush_ev = NULL;
    close(s->fd);
    s->fd = -1;
    if (s->counted) {
        s->counted = 0;
        s->job->open_streams--;
        cadre__launcher_check_done(s->job);
    }
}

/* One read. Returns 1 when data came, 0 when none is waiting, -1 at EOF. */
static int stream_read(struct cadre__launcher_stream *s)
{
    if (s->fd < 0)
        return -1;
    ssize_t n;
    do
        n = read(s->fd, s->buf + s->len, LINE_BUF - s->len);
    while (n < 0 && errno == EINTR);
    if (n < 0 && errno == EAGAIN)
        return 0;
    if (n <= 0) {
        stream_close(s);
        return -1;
    }
    s->len += (size_t)n;
    char *last = NULL;
    for (size_t i = s->len; i-- > 0;)
        if (s->buf[i] == '\n') {
            last = s->buf + i;
            break;
        }
    if (last) {
        size_t whole = (size_t)(last - s->buf) + 1;
        emit(s, whole, 0);
        consume(s, whole);
    }
    if (s->len == LINE_BUF) {
        emit(s, s->len, 1);
        s->len = 0;
    }
    if (s->len && s->flush_ev) {
        struct timeval tv = {0, PARTIAL_MS * 1000};
        evtimer_add(s->flush_ev, &tv);
    }
    return 1;
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    stream_read(arg);
}

void cadre__launcher_iof_drain(struct cadre__launcher_rank *r)
{
    /* Bounded: a descendant may keep writing to a dead rank's pipe. */
    for (int i = 0; i < 64 && stream_read(&r->out) > 0; i++)
        ;
    for (int i = 0; i < 64 && stream_read(&r->err) > 0; i++)
        ;
}

void cadre__launcher_iof_drain_all(struct cadre__launcher_job *job)
{
    for (int r = 0; r < job->nranks; r++)
        cadre__launcher_iof_drain(&job->ranks[r]);
}

/* ---- stdin forwarding from a terminal ------------------------------------------------ */
static void stdin_close(struct cadre__launcher_job *job)
{
    if (job->stdin_ev)
        event_free(job->stdin_ev);
    if (job->stdin_out_ev)
        event_free(job->stdin_out_ev);
    job->stdin_ev = job->stdin_out_ev = NULL;
    if (job->stdin_fd >= 0)
        close(job->stdin_fd);
    job->stdin_fd = -1;
}

static void on_stdin_writable(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct cadre__launcher_job *job = arg;
    while (job->stdin_off < job->stdin_len) {
        ssize_t w = write(job->stdin_fd, job->stdin_buf + job->stdin_off,
                          job->stdin_len - job->stdin_off);
        if (w > 0) {
            job->stdin_off += (size_t)w;
        } else if (w < 0 && errno == EAGAIN) {
            event_add(job->stdin_out_ev, NULL);
            return;
        } else if (!(w < 0 && errno == EINTR)) {
            stdin_close(job); /* rank 0 closed its stdin or exited */
            return;
        }
    }
    event_del(job->stdin_out_ev);
    if (job->stdin_eof)
        stdin_close(job);
    else
        event_add(job->stdin_ev, NULL);
}

static void on_stdin_readable(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    struct cadre__launcher_job *job = arg;
    ssize_t n = read((int)fd, job->stdin_buf, sizeof job->stdin_buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    /* Read only when rank 0 has taken what we have: a slow reader slows
     * the terminal, not our memory. */
    event_del(job->stdin_ev);
    job->stdin_off = 0;
    job->stdin_len = n > 0 ? (size_t)n : 0;
    job->stdin_eof = n <= 0;
    on_stdin_writable(-1, 0, job);
}

/* ---- set-up ------------------------------------------------------------------------ */
static int mkdir_p(const char *dir)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = path + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(path, 0777) != 0 && errno != EEXIST)
                return -1;
            *p = c;
            if (!c)
                break;
        }
    }
    struct stat st;
    if (stat(dir, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

int cadre__launcher_iof_prepare(struct cadre__launcher_job *job)
{
    const char *dir = job->opts->output_dir;
    if (dir && mkdir_p(dir) != 0) {
        cadre__launcher_say("--output-dir %s: %s", dir, strerror(errno));
        return -1;
    }
    if ((devnull = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
        cadre__launcher_say("cannot open /dev/null: %s", strerror(errno));
        return -1;
    }
    if (!isatty(STDIN_FILENO))
        stdin_mode = STDIN_PASS;
    else if (tcgetpgrp(STDIN_FILENO) == getpgrp())
        stdin_mode = STDIN_FORWARD;
    else
        stdin_mode = STDIN_NULL; /* in the background: reading would stop us */
    return 0;
}

static int open_output(struct cadre__launcher_job *job, struct cadre__launcher_rank *r, int fd)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/rank.%d.%s", job->opts->output_dir, r->rank,
             fd == 1 ? "stdout" : "stderr");
    r->stdio[fd] = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (r->stdio[fd] < 0) {
        cadre__launcher_fail(job, CADRERUN_EXIT_INTERNAL, "cannot open %s: %s", path,
                             strerror(errno));
        return -1;
    }
    return 0;
}

/* A pipe for rank r; cadrerun's end (`ours`) non-blocking. */
static int rank_pipe(struct cadre__launcher_job *job, struct cadre__launcher_rank *r, int p[2],
                     int ours)
{
    if (pipe2(p, O_CLOEXEC) != 0) {
        cadre__launcher_fail(job, CADRERUN_EXIT_INTERNAL, "cannot start rank %d: pipe: %s",
                             r->rank, strerror(errno));
        return -1;
    }
    fcntl(p[ours], F_SETFL, O_NONBLOCK);
    return 0;
}

static int open_pipe(struct cadre__launcher_job *job, struct cadre__launcher_rank *r, int fd)
{
    int p[2];
    if (rank_pipe(job, r, p, 0) != 0)
        return -1;
    struct cadre__launcher_stream *s = fd == 1 ? &r->out : &r->err;
    s->job = job;
    s->rank = r;
    s->fd = p[0];
    s->to_fd = fd;
    r->stdio[fd] = p[1];
    return 0;
}

int cadre__launcher_iof_open(struct cadre__launcher_job *job, struct cadre__launcher_rank *r)
{
    r->stdio[0] = devnull;
    if (r->rank == 0 && stdin_mode == STDIN_PASS) {
        r->stdio[0] = STDIN_FILENO;
    } else if (r->rank == 0 && stdin_mode == STDIN_FORWARD) {
        int p[2];
        if (rank_pipe(job, r, p, 1) != 0)
            return -1;
        r->stdio[0] = p[0];
        job->stdin_fd = p[1];
    }
    for (int fd = 1; fd <= 2; fd++) {
        int rc = job->opts->output_dir ? open_output(job, r, fd) : open_pipe(job, r, fd);
        if (rc != 0)
            return -1;
    }
    return 0;
}

static void stream_start(struct cadre__launcher_job *job, struct cadre__launcher_stream *s)
{
    if (s->fd < 0)
        return;
    s->buf = malloc(LINE_BUF);
    s->ev = event_new(job->base, s->fd, EV_READ | EV_PERSIST, on_readable, s);
    if (!job->opts->tag_output)
        s->flush_ev = evtimer_new(job->base, on_partial_timer, s);
    job->open_streams++;
    s->counted = 1;
    if (!s->buf || !s->ev || (!job->opts->tag_output && !s->flush_ev) ||
        event_add(s->ev, NULL) != 0) {
        cadre__launcher_fail(job, CADRERUN_EXIT_INTERNAL, "cannot forward the output of rank %d",
                             s->rank->rank);
        stream_close(s);
    }
}

void cadre__launcher_iof_started(struct cadre__launcher_job *job, struct cadre__launcher_rank *r)
{
    for (int fd = 0; fd < 3; fd++) {
        if (r->stdio[fd] > STDERR_FILENO && r->stdio[fd] != devnull)
            close(r->stdio[fd]);
        r->stdio[fd] = -1;
    }
    stream_start(job, &r->out);
    stream_start(job, &r->err);
    if (r->rank == 0 && job->stdin_fd >= 0) {
        job->stdin_ev = event_new(job->base, STDIN_FILENO, EV_READ, on_stdin_readable, job);
        job->stdin_out_ev = event_new(job->base, job->stdin_fd, EV_WRITE, on_stdin_writable, job);
        if (!job->stdin_ev || !job->stdin_out_ev || event_add(job->stdin_ev, NULL) != 0)
            stdin_close(job);
    }
}

void cadre__launcher_iof_free(struct cadre__launcher_job *job)
{
    for (int r = 0; r < job->nranks; r++) {
        struct cadre__launcher_rank *rk = &job->ranks[r];
        struct cadre__launcher_stream *ss[2] = {&rk->out, &rk->err};
        for (int i = 0; i < 2; i++) {
            struct cadre__launcher_stream *s = ss[i];
            if (s->fd >= 0 && s->job)
                stream_close(s);
            free(s->buf);
            s->buf = NULL;
        }
        for (int fd = 0; fd < 3; fd++)
            if (rk->stdio[fd] > STDERR_FILENO && rk->stdio[fd] != devnull)
                close(rk->stdio[fd]);
    }
    stdin_close(job);
    if (devnull >= 0)
        close(devnull);
    devnull = -1;
    free(scratch);
    scratch = NULL;
    scratch_cap = 0;
}
