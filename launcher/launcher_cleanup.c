/*
 * Nothing left behind, even when cadrerun is SIGKILLed: a small cleaner
 * process, forked before anything else exists, blocks reading a pipe from
 * cadrerun. EOF on that pipe means cadrerun finished or died; the cleaner
 * then kills the ranks' process group (unless cadrerun said they are all
 * reaped), waits for it to empty, and removes the job temp dir and the
 * job's /dev/shm entries. cadrerun waits for it on a normal exit, so there is
 * one cleanup path. The cleaner keeps cadrerun's stderr open until it is
 * done: whoever reads that stream to its end has seen the cleanup finish.
 *
 * Messages on the pipe (each one write, under PIPE_BUF):
 *   "G<pgid>\n"  the ranks' process group
 *   "D\n"        every rank is reaped: leave the group alone
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launcher.h"

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (flag == FTW_DP)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

static void remove_job_files(const char *tmpdir, const char *shm_prefix)
{
    if (tmpdir[0])
        nftw(tmpdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
    DIR *d = opendir("/dev/shm");
    if (!d)
        return;
    size_t plen = strlen(shm_prefix);
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, shm_prefix, plen))
            unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
}

/* The state, parent and process group of the process whose /proc name is
 * `pid` (a directory entry of /proc): 0, or -1 when it is gone or not a
 * process. "pid (comm) state ppid pgrp ..."; comm may hold anything. */
int cadre__launcher_proc_stat(const char *pid, char *state, int *ppid, int *pgrp)
{
    if (pid[0] < '1' || pid[0] > '9')
        return -1;
    char path[300], buf[512];
    snprintf(path, sizeof path, "/proc/%s/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *rp = strrchr(buf, ')');
    return rp && sscanf(rp + 1, " %c %d %d", state, ppid, pgrp) == 3 ? 0 : -1;
}

/* Whether any process of group pgid is still running. Zombies count as
 * gone: where init does not reap orphans they stay forever. */
static int group_running(pid_t pgid)
{
    DIR *d = opendir("/proc");
    if (!d)
        return kill(-pgid, 0) == 0;
    int running = 0;
    struct dirent *e;
    while (!running && (e = readdir(d))) {
        char state;
        int ppid, pgrp;
        if (cadre__launcher_proc_stat(e->d_name, &state, &ppid, &pgrp) == 0 && pgrp == pgid &&
            state != 'Z' && state != 'X')
            running = 1;
    }
    closedir(d);
    return running;
}

/* What the job's processes left: processes of the ranks' group that still
 * run, and cadrerun's children that are not ranks (a subreaper, it adopts
 * what orphans the job makes, wherever they moved: another group, another
 * session). Sends sig to the latter (0: none) and reaps those that are
 * zombies; returns how many of either still run. */
int cadre__launcher_leftovers(struct cadre__launcher_job *job, int sig)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    pid_t self = getpid();
    int left = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char state;
        int ppid, pgrp;
        if (cadre__launcher_proc_stat(e->d_name, &state, &ppid, &pgrp) != 0)
            continue;
        pid_t pid = (pid_t)atol(e->d_name);
        int dead = state == 'Z' || state == 'X';
        int stray = ppid == self && pid != job->cleaner_pid;
        /* Not a rank (rank 0's zombie is kept on purpose), nor the cleaner. */
        for (int r = 0; stray && r < job->nranks; r++)
            stray = job->ranks[r].state == RANK_REAPED || job->ranks[r].pid != pid;
        if (stray && dead)
            waitpid(pid, NULL, WNOHANG);
        else if (stray && sig)
            kill(pid, sig);
        left += !dead && (stray || (job->pgid > 0 && pgrp == job->pgid));
    }
    closedir(d);
    return left;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static _Noreturn void cleaner_main(const struct cadre__launcher_job *job, int fd)
{
    /* Out of the terminal's reach (no ^C, no hangup) and deaf to the
     * signals aimed at cadrerun's group: it must outlive cadrerun. */
    setsid();
    static const int ignored[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGTSTP,
                                  SIGTTIN, SIGTTOU, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++)
        signal(ignored[i], SIG_IGN);
    prctl(PR_SET_NAME, "cadrerun-clean", 0, 0, 0);
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        if (null > 2)
            close(null);
    }
    if (fd > 3)
        close_range(3, (unsigned)fd - 1, 0);
    close_range((unsigned)fd + 1, ~0u, 0);

    pid_t pgid = 0;
    int done = 0;
    char buf[256], msg[64];
    size_t mlen = 0;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] != '\n') {
                if (mlen < sizeof msg - 1)
                    msg[mlen++] = buf[i];
                continue;
            }
            msg[mlen] = '\0';
            if (msg[0] == 'G')
                pgid = (pid_t)atol(msg + 1);
            else if (msg[0] == 'D')
                done = 1;
            mlen = 0;
        }
    }
    if (pgid > 0 && !done) {
        /* cadrerun died with ranks unreaped: they hold the group's id, so
         * it cannot have been reused. Their PDEATHSIG is on the way; this
         * also catches what they forked. Files go only once nothing of the
         * job can create more. */
        kill(-pgid, SIGKILL);
        for (int i = 0; i < 300 && group_running(pgid); i++)
            sleep_ms(10);
    }
    remove_job_files(job->tmpdir, job->nspace);
    _exit(0);
}

int cadre__launcher_cleanup_start(struct cadre__launcher_job *job)
{
    unsigned rnd;
    if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != sizeof rnd)
        rnd = (unsigned)time(NULL) ^ ((unsigned)getpid() << 16) ^ (unsigned)clock();
    /* The fixed-width tail keeps one job's prefix from being a prefix of
     * another's: the cleaner removes /dev/shm entries by prefix. */
    snprintf(job->jobid, sizeof job->jobid, "%d-%08x", (int)getpid(), rnd);
    snprintf(job->nspace, sizeof job->nspace, "cadre-%s", job->jobid);
    if (gethostname(job->hostname, sizeof job->hostname) != 0 || !job->hostname[0])
        snprintf(job->hostname, sizeof job->hostname, "localhost");
    job->hostname[sizeof job->hostname - 1] = '\0';

    const char *base = getenv("TMPDIR");
    if (!base || base[0] != '/')
        base = "/tmp";
    snprintf(job->tmpdir, sizeof job->tmpdir, "%s/%s", base, job->nspace);
    if (mkdir(job->tmpdir, 0700) != 0) {
        cadre__launcher_say("cannot create the job directory %s: %s", job->tmpdir,
                            strerror(errno));
        job->tmpdir[0] = '\0';
        return -1;
    }

    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        cadre__launcher_say("cannot create a pipe: %s", strerror(errno));
        rmdir(job->tmpdir);
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        cadre__launcher_say("cannot fork: %s", strerror(errno));
        close(p[0]);
        close(p[1]);
        rmdir(job->tmpdir);
        return -1;
    }
    if (pid == 0) {
        close(p[1]);
        cleaner_main(job, p[0]);
    }
    close(p[0]);
    job->cleaner_pid = pid;
    job->cleaner_fd = p[1];
    CADRE_INFO(LAUNCHER, "job %s, temp dir %s, cleaner pid %d", job->jobid, job->tmpdir, (int)pid);
    return 0;
}

static void tell_cleaner(struct cadre__launcher_job *job, const char *msg)
{
    if (job->cleaner_fd < 0)
        return;
    size_t len = strlen(msg);
    ssize_t w;
    do
        w = write(job->cleaner_fd, msg, len);
    while (w < 0 && errno == EINTR);
}

void cadre__launcher_cleanup_pgid(struct cadre__launcher_job *job)
{
    char msg[32];
    snprintf(msg, sizeof msg, "G%d\n", (int)job->pgid);
    tell_cleaner(job, msg);
}

void cadre__launcher_cleanup_finish(struct cadre__launcher_job *job, int ranks_reaped)
{
    if (ranks_reaped)
        tell_cleaner(job, "D\n");
    if (job->cleaner_fd >= 0) {
        close(job->cleaner_fd);
        job->cleaner_fd = -1;
    }
    int st = 0;
    pid_t w = -1;
    if (job->cleaner_pid > 0) {
        do
            w = waitpid(job->cleaner_pid, &st, 0);
        while (w < 0 && errno == EINTR);
    }
    if (w != job->cleaner_pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        CADRE_WARN(LAUNCHER, "the cleaner process did not finish; cleaning up in cadrerun");
        remove_job_files(job->tmpdir, job->nspace);
    }
    job->cleaner_pid = 0;
}
