/*
 * The ranks as processes: fork/exec with their environment, binding and
 * death signal; reaping; the first failure and stopping the job; signals to
 * cadrerun (the state report before SIGINT is in launcher_report.c).
 *
 * Every rank is in one process group, led by rank 0, apart from cadrerun's:
 * a terminal's ^C reaches cadrerun alone, which forwards it once, and a
 * signal to the group also reaches what ranks forked. Rank 0 is reaped last
 * (its exit is seen with WNOWAIT) so that the group id cannot be reused
 * while we may still signal it. cadrerun is a subreaper: what the ranks
 * started and left (in the group or out of it, daemons too) becomes its
 * child when orphaned. Nothing outlives the job: once every rank has
 * exited, the rest gets SIGTERM, then SIGKILL after the grace period, and
 * only then is rank 0 reaped.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "launcher.h"

extern char **environ;

static void signame(int sig, char *buf, size_t len)
{
    const char *abbrev = sigabbrev_np(sig);
    if (abbrev)
        snprintf(buf, len, "SIG%s", abbrev);
    else
        snprintf(buf, len, "signal %d", sig);
}

/* After the last rank: how often we look for what it left, and how long
 * past SIGKILL we wait for it to go. */
#define SWEEP_POLL_S 0.02
#define SWEEP_KILLED_POLLS 150

/* ---- signalling and stopping ------------------------------------------------- */
/* To the ranks' group (everything in it, what ranks forked too) and to the
 * orphans of the job we adopted. */
void cadre__launcher_signal_ranks(struct cadre__launcher_job *job, int sig)
{
    if (job->pgid > 0 && job->ranks[0].state != RANK_REAPED) {
        kill(-job->pgid, sig);
    } else {
        for (int r = 0; r < job->nranks; r++)
            if (job->ranks[r].state == RANK_RUNNING)
                kill(job->ranks[r].pid, sig);
    }
    cadre__launcher_leftovers(job, sig);
}

int cadre__launcher_running(const struct cadre__launcher_job *job)
{
    int n = 0;
    for (int r = 0; r < job->nranks; r++)
        n += job->ranks[r].state == RANK_RUNNING;
    return n;
}

static void on_kill_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct cadre__launcher_job *job = arg;
    job->killing = 1;
    int n = cadre__launcher_running(job), left = cadre__launcher_leftovers(job, 0);
    if (n || left) {
        CADRE_INFO(LAUNCHER, "%d rank(s) and %d process(es) in all still running after the grace "
                   "period: SIGKILL", n, left);
        cadre__launcher_signal_ranks(job, SIGKILL);
    }
}

void cadre__launcher_stop(struct cadre__launcher_job *job)
{
    if (job->stopping)
        return;
    job->stopping = 1;
    if (cadre__launcher_running(job))
        CADRE_INFO(LAUNCHER, "stopping %d running rank(s): SIGTERM", cadre__launcher_running(job));
    cadre__launcher_signal_ranks(job, SIGTERM);
    job->kill_ev = evtimer_new(job->base, on_kill_timer, job);
    struct timeval tv = cadre__launcher_tv(cadre__config_dbl(CADRE_CFG_LAUNCHER_KILL_GRACE));
    if (!job->kill_ev || evtimer_add(job->kill_ev, &tv) != 0) {
        job->killing = 1;
        cadre__launcher_signal_ranks(job, SIGKILL);
    }
}

/* The first failure decides the exit status; later ones do not change it. */
void cadre__launcher_decide(struct cadre__launcher_job *job, int code)
{
    if (!job->decided) {
        job->decided = 1;
        job->exit_code = code;
    }
}

void cadre__launcher_fail(struct cadre__launcher_job *job, int code, const char *fmt, ...)
{
    /* Once the job is stopping, every other exit is a consequence. A failure
     * that --keep-going let pass has decided the status but stopped nothing:
     * this one still stops the job and is said. */
    if (job->stopping)
        return;
    cadre__launcher_decide(job, code);
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cadre__launcher_say("%s", msg);
    cadre__launcher_stop(job);
}

/* A rank failed: the job stops, unless --keep-going lets the others finish;
 * either way the first failure decides the exit status and each is said. */
static void rank_failed(struct cadre__launcher_job *job, int code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!job->opts->keep_going) {
        cadre__launcher_fail(job, code, "%s", msg);
        return;
    }
    cadre__launcher_decide(job, code);
    cadre__launcher_say("%s (--keep-going: the other ranks go on)", msg);
}

void cadre__launcher_abort(struct cadre__launcher_job *job, int rank, int code)
{
    if (rank < 0 || rank >= job->nranks)
        return;
    struct cadre__launcher_rank *r = &job->ranks[rank];
    cadre__launcher_iof_drain(r);
    /* An abort is a failure even when its code is 0 modulo 256. */
    int status = code & 255 ? code & 255 : 1;
    cadre__launcher_fail(job, status, "rank %d (pid %d) called cadre_abort(%d)", rank, (int)r->pid,
                         code);
}

/* ---- reaping ---------------------------------------------------------------------- */
static void on_drain_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct cadre__launcher_job *job = arg;
    CADRE_INFO(LAUNCHER, "%d output pipe(s) still open after the last rank exited; not waiting",
               job->open_streams);
    event_base_loopexit(job->base, NULL);
}

void cadre__launcher_check_done(struct cadre__launcher_job *job)
{
    if (job->nlive > 0)
        return;
    if (job->open_streams == 0) {
        event_base_loopexit(job->base, NULL);
        return;
    }
    /* Descendants of ranks may hold the pipes: keep forwarding a while. */
    if (!job->drain_ev) {
        job->drain_ev = evtimer_new(job->base, on_drain_timer, job);
        struct timeval tv = cadre__launcher_tv(cadre__config_dbl(CADRE_CFG_LAUNCHER_DRAIN));
        if (!job->drain_ev || evtimer_add(job->drain_ev, &tv) != 0)
            event_base_loopexit(job->base, NULL);
    }
}

static void rank_exited(struct cadre__launcher_job *job, struct cadre__launcher_rank *r)
{
    /* Its last words come before our line about it. */
    cadre__launcher_iof_drain(r);
    /* A rank that initialized (connected to our PMIx server) and did not
     * finalize (PMIx_Finalize, which cadre_finalize calls and which waits
     * for our client_finalized callback) left its peers waiting for it,
     * whatever its status; a program that never called cadre_init never
     * connected and is judged by its status alone. */
    int unfinalized = atomic_load(&r->connected) && !atomic_load(&r->finalized);
    const char *nofin = unfinalized ? " without calling cadre_finalize" : "";
    char name[32] = "";
    if (r->term_signal) {
        signame(r->term_signal, name, sizeof name);
        CADRE_INFO(LAUNCHER, "rank %d (pid %d) killed by %s", r->rank, (int)r->pid, name);
    } else {
        CADRE_INFO(LAUNCHER, "rank %d (pid %d) exited with status %d%s", r->rank, (int)r->pid,
                   r->exit_status, nofin);
    }
    /* Ranks that we are stopping end because of it: no failures of their
     * own (the line that stopped the job is already said). */
    if (job->stopping)
        return;
    if (r->term_signal)
        rank_failed(job, 128 + r->term_signal, "rank %d (pid %d) killed by %s%s", r->rank,
                    (int)r->pid, name, r->core_dumped ? " (core dumped)" : "");
    else if (r->exit_status || unfinalized)
        /* Status 0 without cadre_finalize is a failure with status 1. */
        rank_failed(job, r->exit_status ? r->exit_status : 1,
                    "rank %d (pid %d) exited with status %d%s", r->rank, (int)r->pid,
                    r->exit_status, nofin);
}

/* Orphans of the job that died: adopted, so ours to reap. Cheaper than
 * cadre__launcher_leftovers, for every SIGCHLD: the first dead child that
 * the kernel shows is taken if it is one, until none is left or it is a
 * rank (a rank's zombie, kept: the sweep takes what lies behind it). */
static void reap_strays(struct cadre__launcher_job *job)
{
    for (;;) {
        siginfo_t si;
        si.si_pid = 0;
        if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == 0 ||
            si.si_pid == job->cleaner_pid)
            return;
        for (int r = 0; r < job->nranks; r++)
            if (job->ranks[r].state != RANK_REAPED && job->ranks[r].pid == si.si_pid)
                return;
        waitpid(si.si_pid, NULL, WNOHANG);
    }
}

static void on_sweep_timer(evutil_socket_t fd, short what, void *arg);

/* Every rank has exited; their zombies still hold their pids (rank 0's is
 * the group's id). What the ranks left still running is stopped as a job is
 * (SIGTERM, SIGKILL after the grace period); then the ranks are reaped and
 * the job is done. */
static void sweep(struct cadre__launcher_job *job)
{
    int left = cadre__launcher_leftovers(job, job->killing ? SIGKILL : 0);
    if (left && job->killing)
        kill(-job->pgid, SIGKILL);
    if (left && !job->sweep_ev) {
        CADRE_INFO(LAUNCHER, "%d process(es) that the ranks started still run: stopping them",
                   left);
        if (job->stopping)
            cadre__launcher_leftovers(job, SIGTERM); /* the group had it */
        else
            cadre__launcher_stop(job);
        job->sweep_ev = evtimer_new(job->base, on_sweep_timer, job);
    }
    if (left && job->sweep_ev && job->sweep_polls < SWEEP_KILLED_POLLS) {
        job->sweep_polls += job->killing;
        struct timeval tv = cadre__launcher_tv(SWEEP_POLL_S);
        if (evtimer_add(job->sweep_ev, &tv) == 0)
            return;
    }
    if (left)
        CADRE_WARN(LAUNCHER, "%d process(es) that the ranks started are still there after "
                   "SIGKILL; leaving them", left);
    if (job->kill_ev)
        evtimer_del(job->kill_ev);
    for (int i = 0; i < job->nranks; i++) {
        struct cadre__launcher_rank *r = &job->ranks[i];
        if (r->state != RANK_EXITED)
            continue;
        int st;
        while (waitpid(r->pid, &st, 0) < 0 && errno == EINTR)
            ;
        r->state = RANK_REAPED;
        job->nlive--;
    }
    cadre__launcher_check_done(job);
}

static void on_sweep_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    sweep(arg);
}

/* A rank that ends stays a zombie, seen with WNOWAIT, until every rank has
 * ended: its peers, which watch it through a pidfd, can then read from
 * /proc/PID/stat how it ended (killed by a signal, or its exit status) and
 * say so in their errors, and its pid (rank 0's: the process group's id) is
 * not given to another process while we may still signal the job. */
static void reap(struct cadre__launcher_job *job)
{
    for (int i = 0; i < job->nranks; i++) {
        struct cadre__launcher_rank *r = &job->ranks[i];
        if (r->state != RANK_RUNNING)
            continue;
        siginfo_t si;
        si.si_pid = 0;
        if (waitid(P_PID, (id_t)r->pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0 ||
            si.si_pid != r->pid)
            continue;
        r->state = RANK_EXITED;
        if (si.si_code == CLD_EXITED)
            r->exit_status = si.si_status;
        else
            r->term_signal = si.si_status;
        r->core_dumped = si.si_code == CLD_DUMPED;
        rank_exited(job, r);
    }
    /* Once every rank has ended: what they left is stopped, then they are
     * reaped (sweep). */
    if (cadre__launcher_running(job) == 0 && job->nlive > 0) {
        if (!job->sweep_ev)
            sweep(job);
        return;
    }
    reap_strays(job);
    cadre__launcher_check_done(job);
}

/* ---- signals to cadrerun ----------------------------------------------------------- */
static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    struct cadre__launcher_job *job = arg;
    if (sig == SIGCHLD) {
        reap(job);
        return;
    }
    char name[32];
    signame((int)sig, name, sizeof name);
    job->signals_seen++;
    if (job->nlive == 0)
        return;
    if (job->stopping) {
        CADRE_INFO(LAUNCHER, "%s while stopping: SIGKILL now", name);
        job->killing = 1;
        cadre__launcher_signal_ranks(job, SIGKILL);
    } else if (job->signals_seen == 1 && sig == SIGINT && !job->reporting) {
        /* ^C on a job that hangs: first what every rank is doing, then the
         * signal (report_done). */
        cadre__launcher_say("%s: %d rank(s) running, their states (another %s stops the job at "
                            "once):", name, cadre__launcher_running(job), name);
        cadre__launcher_report_start(job, REPORT_SIGINT);
    } else if (job->signals_seen == 1 && !job->reporting) {
        CADRE_INFO(LAUNCHER, "forwarding %s to %d rank(s)", name, cadre__launcher_running(job));
        cadre__launcher_signal_ranks(job, (int)sig);
    } else {
        cadre__launcher_report_cancel(job);
        cadre__launcher_fail(job, 128 + (int)sig, "%s received again: stopping %d rank(s)", name,
                             cadre__launcher_running(job));
    }
}

int cadre__launcher_signals_start(struct cadre__launcher_job *job)
{
    /* Writes to a rank's stdin or to a closed stdout report EPIPE instead. */
    signal(SIGPIPE, SIG_IGN);
    static const int sigs[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        job->sig_ev[i] = evsignal_new(job->base, sigs[i], on_signal, job);
        if (!job->sig_ev[i] || evsignal_add(job->sig_ev[i], NULL) != 0) {
            cadre__launcher_say("cannot handle signal %d", sigs[i]);
            return -1;
        }
    }
    return 0;
}

/* ---- environment ------------------------------------------------------------------- */
struct env {
    char **v;
    size_t n;
};

static int env_set(struct env *e, const char *name, const char *value)
{
    size_t nlen = strlen(name);
    char *s = malloc(nlen + strlen(value) + 2);
    if (!s)
        return -1;
    sprintf(s, "%s=%s", name, value);
    for (size_t i = 0; i < e->n; i++) {
        if (!strncmp(e->v[i], name, nlen) && e->v[i][nlen] == '=') {
            free(e->v[i]);
            e->v[i] = s;
            return 0;
        }
    }
    char **more = realloc(e->v, (e->n + 2) * sizeof *more);
    if (!more) {
        free(s);
        return -1;
    }
    e->v = more;
    e->v[e->n++] = s;
    e->v[e->n] = NULL;
    return 0;
}

static void env_free(struct env *e)
{
    for (size_t i = 0; i < e->n; i++)
        free(e->v[i]);
    free(e->v);
    e->v = NULL;
    e->n = 0;
}

static int env_copy(struct env *dst, char *const *src)
{
    dst->n = 0;
    while (src[dst->n])
        dst->n++;
    if (!(dst->v = calloc(dst->n + 1, sizeof *dst->v)))
        return -1;
    for (size_t i = 0; i < dst->n; i++) {
        if (!(dst->v[i] = strdup(src[i]))) {
            dst->n = i;
            env_free(dst);
            return -1;
        }
    }
    return 0;
}

/* cadrerun's environment with -x applied: what every rank starts from. */
static int base_env(struct cadre__launcher_job *job, struct env *e)
{
    if (env_copy(e, environ) != 0)
        return -1;
    for (int i = 0; i < job->opts->nexports; i++) {
        const char *x = job->opts->exports[i];
        const char *eq = strchr(x, '=');
        if (!eq) {
            /* Ranks inherit our environment on this node: VAR alone is
             * already there, or has nothing to export. */
            if (!getenv(x))
                CADRE_INFO(LAUNCHER, "-x %s: not set in cadrerun's environment", x);
            continue;
        }
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(eq - x), x);
        if (env_set(e, name, eq + 1) != 0)
            return -1;
    }
    return 0;
}

static int rank_env(struct cadre__launcher_job *job, struct cadre__launcher_rank *r,
                    const struct env *base, struct env *e)
{
    char num[5][16];
    snprintf(num[0], sizeof num[0], "%d", r->rank);
    snprintf(num[1], sizeof num[1], "%d", r->local_rank);
    snprintf(num[2], sizeof num[2], "%d", job->nranks);
    snprintf(num[3], sizeof num[3], "%d", job->nranks); /* one node: all ranks are local */
    snprintf(num[4], sizeof num[4], "%d", r->gpu);
    if (env_copy(e, base->v) != 0 || env_set(e, "CADRE_RANK", num[0]) != 0 ||
        env_set(e, "CADRE_LOCAL_RANK", num[1]) != 0 ||
        env_set(e, "CADRE_WORLD_SIZE", num[2]) != 0 ||
        env_set(e, "CADRE_LOCAL_SIZE", num[3]) != 0 || env_set(e, "CADRE_GPU", num[4]) != 0 ||
        env_set(e, "CADRE_SHM_PREFIX", job->nspace) != 0) {
        cadre__launcher_say("out of memory for the environment of rank %d", r->rank);
        return -1;
    }
    if (cadre__launcher_pmix_setup_fork(job, r->rank, &e->v) != 0)
        return -1;
    e->n = 0;
    while (e->v[e->n])
        e->n++;
    return 0;
}

/* ---- fork and exec ------------------------------------------------------------------ */
static struct rlimit orig_nofile;

/* Between fork and exec in a threaded parent: async-signal-safe calls only. */
static _Noreturn void child_exec(struct cadre__launcher_job *job, struct cadre__launcher_rank *r,
                                 char **env, pid_t parent, int errfd)
{
    /* Signals are blocked since before fork: reset what cadrerun catches or
     * ignores before any can arrive, or a signal meant for the rank would
     * run libevent's handler here and reach cadrerun instead. */
    static const int reset[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGPIPE};
    for (size_t i = 0; i < sizeof reset / sizeof reset[0]; i++)
        signal(reset[i], SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    setpgid(0, job->pgid);
    /* Die with cadrerun, even by SIGKILL; if it is already gone, the
     * signal will never come. */
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (getppid() != parent)
        _exit(CADRERUN_EXIT_INTERNAL);
    for (int fd = 0; fd < 3; fd++)
        if (r->stdio[fd] != fd)
            dup2(r->stdio[fd], fd);
    /* Whatever cadrerun and libpmix hold stays out of the rank. */
    close_range(3, ~0u, CLOSE_RANGE_CLOEXEC);
    setrlimit(RLIMIT_NOFILE, &orig_nofile);
    if (r->bound)
        sched_setaffinity(0, sizeof r->cpus, &r->cpus);
    execve(job->opts->program, job->opts->argv, env);
    int err = errno;
    ssize_t w = write(errfd, &err, sizeof err);
    (void)w;
    _exit(CADRERUN_EXIT_NOTFOUND);
}

static int start_rank(struct cadre__launcher_job *job, struct cadre__launcher_rank *r,
                      const struct env *base, int *errfd)
{
    struct env e = {0};
    int p[2] = {-1, -1};
    if (rank_env(job, r, base, &e) != 0 || cadre__launcher_iof_open(job, r) != 0)
        goto fail;
    if (pipe2(p, O_CLOEXEC) != 0) {
        cadre__launcher_fail(job, CADRERUN_EXIT_INTERNAL, "cannot start rank %d: pipe: %s",
                             r->rank, strerror(errno));
        goto fail;
    }
    pid_t parent = getpid();
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid_t pid = fork();
    if (pid == 0)
        child_exec(job, r, e.v, parent, p[1]);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (pid < 0) {
        cadre__launcher_fail(job, CADRERUN_EXIT_INTERNAL, "cannot start rank %d: fork: %s",
                             r->rank, strerror(errno));
        goto fail;
    }
    if (job->pgid == 0) {
        job->pgid = pid;
        cadre__launcher_cleanup_pgid(job);
    }
    /* Both sides set the group, so it is right before either goes on. */
    setpgid(pid, job->pgid);
    r->pid = pid;
    cadre__launcher_guard_rank(r->rank, pid);
    r->state = RANK_RUNNING;
    job->nlive++;
    close(p[1]);
    *errfd = p[0];
    cadre__launcher_iof_started(job, r);
    env_free(&e);
    return 0;
fail:
    if (p[0] >= 0) {
        close(p[0]);
        close(p[1]);
    }
    env_free(&e);
    return -1;
}

int cadre__launcher_spawn(struct cadre__launcher_job *job)
{
    getrlimit(RLIMIT_NOFILE, &orig_nofile);
    /* What the ranks orphan comes to us, not to init: see sweep(). */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
        CADRE_INFO(LAUNCHER, "PR_SET_CHILD_SUBREAPER: %s", strerror(errno));
    struct env base = {0};
    int *errfd = malloc((size_t)job->nranks * sizeof *errfd);
    if (!errfd || base_env(job, &base) != 0) {
        free(errfd);
        env_free(&base);
        cadre__launcher_fail(job, CADRERUN_EXIT_INTERNAL, "out of memory");
        return -1;
    }
    /* Fork everything first, then collect exec results: the ranks' exec
     * overlap instead of running one after another. */
    int started = 0;
    while (started < job->nranks &&
           start_rank(job, &job->ranks[started], &base, &errfd[started]) == 0)
        started++;
    env_free(&base);
    for (int i = 0; i < started; i++) {
        int err;
        ssize_t n;
        do
            n = read(errfd[i], &err, sizeof err);
        while (n < 0 && errno == EINTR);
        close(errfd[i]);
        if (n == (ssize_t)sizeof err)
            cadre__launcher_fail(job,
                                 err == ENOENT ? CADRERUN_EXIT_NOTFOUND : CADRERUN_EXIT_NOEXEC,
                                 "rank %d: cannot execute %s: %s", i, job->opts->program,
                                 strerror(err));
    }
    free(errfd);
    if (started < job->nranks)
        return -1;
    CADRE_INFO(LAUNCHER, "started %d rank(s), process group %d", started, (int)job->pgid);
    if (job->opts->timeout > 0) {
        if (cadre__launcher_timeout_start(job) != 0) {
            cadre__launcher_fail(job, CADRERUN_EXIT_INTERNAL, "cannot arm the timeout");
            return -1;
        }
    }
    return 0;
}
