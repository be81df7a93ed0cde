/*
 * The ranks' state report: before cadrerun stops the job at --timeout, and
 * before it passes the first SIGINT on, every rank that runs a cadre
 * program writes what it is doing (asked through PMIx, launcher_pmix.c),
 * within STATE_REPORT_S; the ranks that gave no answer are named.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>

#include <event2/event.h>

#include "launcher.h"

#define STATE_REPORT_S 1.0

/* The ranks have written their states, or had their time to: name those
 * that did not, then stop the job (--timeout) or pass the signal on. */
static void report_done(struct cadre__launcher_job *job)
{
    int why = job->reporting;
    if (!why)
        return;
    job->reporting = 0;
    if (job->report_ev)
        evtimer_del(job->report_ev);
    /* Each rank wrote its line before answering: it is in the pipe. */
    cadre__launcher_iof_drain_all(job);
    for (int i = 0; i < job->nranks; i++) {
        struct cadre__launcher_rank *r = &job->ranks[i];
        if (r->state != RANK_RUNNING || atomic_load(&r->reported))
            continue;
        cadre__launcher_say("rank %d (pid %d): %s", i, (int)r->pid,
                            !atomic_load(&r->connected)
                                ? "no state: not connected (before cadre_init, or not a cadre "
                                  "program)"
                            : atomic_load(&r->finalized) ? "no state: has called cadre_finalize"
                                                         : "no state: did not answer in time");
    }
    if (why == REPORT_TIMEOUT) {
        cadre__launcher_say("stopping %d rank(s) after the timeout", cadre__launcher_running(job));
        cadre__launcher_stop(job);
    } else if (!job->stopping && job->nlive) {
        cadre__launcher_say("forwarding SIGINT to %d rank(s)", cadre__launcher_running(job));
        cadre__launcher_signal_ranks(job, SIGINT);
    }
}

/* A second signal: no report to finish, the job stops now. */
void cadre__launcher_report_cancel(struct cadre__launcher_job *job)
{
    job->reporting = 0;
    if (job->report_ev)
        evtimer_del(job->report_ev);
}

void cadre__launcher_state_answered(struct cadre__launcher_job *job)
{
    if (!job->reporting)
        return;
    for (int i = 0; i < job->nranks; i++) {
        struct cadre__launcher_rank *r = &job->ranks[i];
        if (r->state == RANK_RUNNING && atomic_load(&r->connected) &&
            !atomic_load(&r->finalized) && !atomic_load(&r->reported))
            return;
    }
    report_done(job);
}

static void on_report_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    report_done(arg);
}

/* Each rank says what it is doing, within STATE_REPORT_S at most. */
void cadre__launcher_report_start(struct cadre__launcher_job *job, int why)
{
    job->reporting = why;
    struct timeval tv = cadre__launcher_tv(STATE_REPORT_S);
    if (!job->report_ev)
        job->report_ev = evtimer_new(job->base, on_report_timer, job);
    if (cadre__launcher_pmix_state_query(job) == 0 || !job->report_ev ||
        evtimer_add(job->report_ev, &tv) != 0)
        report_done(job);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct cadre__launcher_job *job = arg;
    /* Already stopping for a failure, which decides the status. A failure
     * that --keep-going let pass decides it too, but the job must still
     * stop now. */
    if (job->stopping || job->nlive == 0)
        return;
    cadre__launcher_decide(job, CADRERUN_EXIT_TIMEOUT);
    cadre__launcher_say("timeout: the job ran longer than %g s; %d rank(s) running, their "
                        "states:",
                        job->opts->timeout, cadre__launcher_running(job));
    cadre__launcher_report_start(job, REPORT_TIMEOUT);
}

int cadre__launcher_timeout_start(struct cadre__launcher_job *job)
{
    struct timeval tv = cadre__launcher_tv(job->opts->timeout);
    job->timeout_ev = evtimer_new(job->base, on_timeout, job);
    return !job->timeout_ev || evtimer_add(job->timeout_ev, &tv) != 0 ? -1 : 0;
}
