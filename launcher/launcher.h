/*
 * launcher.h - internals of cadrerun, shared by its files:
 *   cadrerun.c           main and the command line
 *   launcher_topo.c      GPUs and CPUs of this node, rank binding
 *   launcher_cleanup.c   job temp dir and the cleaner process
 *   launcher_pmix.c      the PMIx server and its module of callbacks
 *   launcher_guard.c     who may connect to the PMIx server (cadrerun's accept)
 *   launcher_proc.c      starting, reaping, signalling and stopping ranks
 *   launcher_report.c    the ranks' state report (--timeout, SIGINT)
 *   launcher_iof.c       ranks' stdin, stdout and stderr
 * Everything runs on the main thread's event loop, except the PMIx module
 * callbacks, which run on libpmix's thread and only hand work to the loop.
 */
#ifndef CADRE_LAUNCHER_H
#define CADRE_LAUNCHER_H

#include <limits.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/time.h>
#include <sys/types.h>

#include "runtime/runtime.h"

struct event;
struct event_base;

/* Exit statuses of cadrerun itself (rank failures give theirs). */
enum {
    CADRERUN_EXIT_USAGE = 2,      /* bad command line */
    CADRERUN_EXIT_TIMEOUT = 124,  /* --timeout expired, as timeout(1) */
    CADRERUN_EXIT_INTERNAL = 125, /* cadrerun could not run the job */
    CADRERUN_EXIT_NOEXEC = 126,   /* program found but not executable */
    CADRERUN_EXIT_NOTFOUND = 127, /* program not found */
};

/* Why cadrerun asks the ranks for their states: then it stops the job, or
 * passes SIGINT on. */
enum { REPORT_TIMEOUT = 1, REPORT_SIGINT = 2 };

enum cadre__launcher_bind { BIND_DEFAULT, BIND_NONE, BIND_CORE, BIND_NUMA };

struct cadre__launcher_opts {
    int nranks;        /* 0: one per GPU (times ranks_per_gpu), else one per CPU */
    int ranks_per_gpu; /* 0: not given */
    char **exports;    /* -x arguments, as given */
    int nexports;
    int tag_output;
    const char *output_dir;
    double timeout; /* seconds, 0 = none */
    int keep_going; /* a rank's failure does not stop the others */
    int bind;
    int verbose;
    char **argv;         /* program and its arguments */
    char program[PATH_MAX]; /* argv[0] resolved against PATH */
};

/* One of a rank's output pipes, forwarded line by line. */
struct cadre__launcher_stream {
    struct cadre__launcher_job *job;
    struct cadre__launcher_rank *rank;
    int fd;     /* read end, -1 once closed */
    int to_fd;  /* 1 or 2 */
    struct event *ev, *flush_ev;
    char *buf;
    size_t len;
    int counted; /* in job->open_streams */
};

enum { RANK_NEW, RANK_RUNNING, RANK_EXITED, RANK_REAPED };

struct cadre__launcher_rank {
    struct cadre__launcher_job *job;
    int rank, local_rank, gpu;
    pid_t pid;
    int state;
    int exit_status, term_signal, core_dumped; /* valid from RANK_EXITED on */
    atomic_int connected, finalized;
    atomic_int reported; /* answered the --timeout state report */
    int bound;   /* cpus holds the rank's binding */
    cpu_set_t cpus;
    int stdio[3]; /* the child's ends, closed in cadrerun after fork */
    struct cadre__launcher_stream out, err;
};

struct cadre__launcher_job {
    struct cadre__launcher_opts *opts;
    struct event_base *base;
    char jobid[32];
    char nspace[64];     /* PMIx namespace, also CADRE_SHM_PREFIX: "cadre-<jobid>" */
    char tmpdir[PATH_MAX];
    char hostname[256];
    int nranks, ngpus;
    struct cadre__launcher_rank *ranks;
    pid_t pgid; /* process group of every rank; rank 0 leads it */

    pid_t cleaner_pid;
    int cleaner_fd; /* write end of the cleaner's pipe */

    int nlive;        /* ranks not yet reaped */
    int open_streams; /* output pipes not yet at EOF */
    int stopping;     /* ranks were told to stop: their exits are no news */
    int decided;      /* exit_code is final */
    int exit_code;
    int signals_seen; /* INT/TERM/HUP received, for escalation */
    int killing;      /* the grace period is over: SIGKILL whatever is left */
    int sweep_polls;  /* polls since every rank exited and leftovers ran */

    struct event *sig_ev[4], *timeout_ev, *kill_ev, *drain_ev, *sweep_ev;
    struct event *report_ev; /* the ranks' state reports are awaited */
    int reporting;           /* 0, or why: REPORT_TIMEOUT, REPORT_SIGINT */
    /* stdin forwarding to rank 0 when cadrerun's stdin is a terminal */
    struct event *stdin_ev, *stdin_out_ev;
    int stdin_fd; /* write end towards rank 0, -1 when not forwarding */
    char stdin_buf[4096];
    size_t stdin_len, stdin_off;
    int stdin_eof;
};

/* cadrerun.c */
/* One line on stderr: "cadrerun: <message>", written with one write(2). */
void cadre__launcher_say(const char *fmt, ...) CADRE_PRINTF(1, 2);

static inline struct timeval cadre__launcher_tv(double s)
{
    struct timeval tv;
    tv.tv_sec = (time_t)s;
    tv.tv_usec = (suseconds_t)((s - (double)tv.tv_sec) * 1e6);
    return tv;
}

/* launcher_topo.c */
int cadre__launcher_gpu_count(void);
int cadre__launcher_cpu_count(void);
/* Fills every rank's gpu and cpu binding; returns -1 after saying why. */
int cadre__launcher_plan(struct cadre__launcher_job *job);

/* launcher_cleanup.c */
/* Creates the job temp dir and forks the cleaner; before any thread. */
int cadre__launcher_cleanup_start(struct cadre__launcher_job *job);
void cadre__launcher_cleanup_pgid(struct cadre__launcher_job *job);
/* The state, parent and process group of /proc entry `pid`: 0, or -1 when
 * it is gone or no process (launcher_cleanup.c). */
int cadre__launcher_proc_stat(const char *pid, char *state, int *ppid, int *pgrp);
/* Processes of the job that still run besides its ranks: members of the
 * ranks' group, and children of cadrerun other than ranks and the cleaner
 * (orphans it adopted as subreaper), to which it sends sig (0: none);
 * reaps the adopted ones that died. */
int cadre__launcher_leftovers(struct cadre__launcher_job *job, int sig);
/* Tells the cleaner whether ranks may survive, then waits for it to finish. */
void cadre__launcher_cleanup_finish(struct cadre__launcher_job *job, int ranks_reaped);

/* launcher_guard.c */
/* Arms the check of connections to the PMIx server; before PMIx_server_init. */
int cadre__launcher_guard_start(struct cadre__launcher_job *job);
/* Rank `rank` is process `pid` (after fork). */
void cadre__launcher_guard_rank(int rank, pid_t pid);
/* How many connections the check let through to libpmix. */
int cadre__launcher_guard_admitted(void);

/* launcher_pmix.c */
int cadre__launcher_pmix_start(struct cadre__launcher_job *job);
/* Asks every rank that is connected and not finalized to write its state
 * (cadrerun --timeout, SIGINT); returns how many were asked. Their answers arrive
 * through cadre__launcher_state_answered on the loop. */
int cadre__launcher_pmix_state_query(struct cadre__launcher_job *job);
/* Adds the PMIx client variables for `rank` to env (a malloc'ed argv). */
int cadre__launcher_pmix_setup_fork(struct cadre__launcher_job *job, int rank, char ***env);
/* Returns -1 when libpmix did not shut down: the process must then end with
 * _exit, as its thread may still hold locks that exit handlers need. */
int cadre__launcher_pmix_stop(struct cadre__launcher_job *job);

/* launcher_proc.c */
int cadre__launcher_signals_start(struct cadre__launcher_job *job);
/* Forks and execs every rank; returns -1 (job stopping) on failure. */
int cadre__launcher_spawn(struct cadre__launcher_job *job);
void cadre__launcher_abort(struct cadre__launcher_job *job, int rank, int code);
/* Ends the job: SIGTERM, then SIGKILL after the grace period. */
void cadre__launcher_stop(struct cadre__launcher_job *job);
/* Records the first failure: says `why` and decides the exit status. */
void cadre__launcher_fail(struct cadre__launcher_job *job, int code, const char *fmt, ...)
    CADRE_PRINTF(3, 4);
/* Signals every running rank (their process group while rank 0 lives). */
void cadre__launcher_signal_ranks(struct cadre__launcher_job *job, int sig);
int cadre__launcher_running(const struct cadre__launcher_job *job);
/* The first failure decides the exit status; later ones do not change it. */
void cadre__launcher_decide(struct cadre__launcher_job *job, int code);

/* launcher_report.c */
/* Asks the ranks for their states; then stops the job (REPORT_TIMEOUT) or
 * forwards SIGINT (REPORT_SIGINT). */
void cadre__launcher_report_start(struct cadre__launcher_job *job, int why);
/* A second signal: the report is not waited for. */
void cadre__launcher_report_cancel(struct cadre__launcher_job *job);
/* A rank answered the state report (main loop). */
void cadre__launcher_state_answered(struct cadre__launcher_job *job);
/* Arms --timeout; -1 when it cannot. */
int cadre__launcher_timeout_start(struct cadre__launcher_job *job);
/* Leaves the loop once every rank is reaped and its output drained. */
void cadre__launcher_check_done(struct cadre__launcher_job *job);

/* launcher_iof.c */
/* Decides where stdin goes and creates --output-dir. */
int cadre__launcher_iof_prepare(struct cadre__launcher_job *job);
/* Opens the fds a rank's stdio gets (pipes or --output-dir files). */
int cadre__launcher_iof_open(struct cadre__launcher_job *job, struct cadre__launcher_rank *r);
/* After fork: closes the child's ends and starts forwarding. */
void cadre__launcher_iof_started(struct cadre__launcher_job *job, struct cadre__launcher_rank *r);
/* Reads what a rank already wrote, without waiting. */
void cadre__launcher_iof_drain(struct cadre__launcher_rank *r);
void cadre__launcher_iof_drain_all(struct cadre__launcher_job *job);
void cadre__launcher_iof_free(struct cadre__launcher_job *job);

#endif /* CADRE_LAUNCHER_H */
