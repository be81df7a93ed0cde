/* Peer failure: a peer that fails or exits without its BYE fails the
 * requests that wait for it, and the layer above is told (the peer_died
 * upcall, cadre__p2p_deaths_settle); a peer that finalized is no failure.
 * May call: this folder's transports, engine and requests, runtime/. */
#include "config.h"

#include <errno.h>
#include <linux/futex.h>
#include <signal.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "p2p_engine.h"

/* ---- peers ----------------------------------------------------------------- */

struct fail_arg {
    int peer, failed;
};

static void fail_registered(struct cadre_request *r, void *arg)
{
    struct fail_arg *fa = arg;
    int peer = fa->peer;
    if (r->peer_world != peer || r->kind == REQ_GENERIC)
        return;
    if (r->state == RS_WAIT_CTS || r->state == RS_STREAM || r->state == RS_WAIT_DATA) {
        fa->failed++;
        cadre__req_complete(r, CADRE_ERR_PEER, "%s: peer rank %d %s", r->op, peer,
                            cadre__eng.peers[peer].why);
    }
}

int cadre__p2p_fail_peer_requests(int w)
{
    struct cadre_peer *p = &cadre__eng.peers[w];
    int failed = 0;
    while (p->outq) {
        failed++;
        struct outq_entry *q = p->outq;
        p->outq = q->next;
        eng_outstanding_add(-1);
        if (q->req)
            cadre__req_complete(q->req, CADRE_ERR_PEER, "%s: peer rank %d %s", q->req->op, w,
                                p->why);
        free(q);
    }
    p->outq_tail = NULL;
    struct fail_arg fa = {w, 0};
    cadre__req_foreach(fail_registered, &fa);
    return failed + fa.failed + cadre__p2p_match_fail_peer(w, p->why);
}

void cadre__p2p_peer_failed(int w, const char *why)
{
    struct cadre_engine *e = &cadre__eng;
    struct cadre_peer *p = &e->peers[w];
    if (p->state == PEER_DEAD)
        return;
    int was = p->state;
    p->state = PEER_DEAD;
    if (was == PEER_FINALIZED)
        snprintf(p->why, sizeof p->why, "has finalized");
    else if (why[0] == '(') /* "(host H) ...": one parenthesis with the pid */
        snprintf(p->why, sizeof p->why, "(pid %d, %s", (int)p->pid, why + 1);
    else
        snprintf(p->why, sizeof p->why, "(pid %d) %s", (int)p->pid, why);
    if (!p->said_bye) {
        /* A failure, not the end of a rank that finalized: receives from
         * any source on its communicators fail below, and those
         * communicators are poisoned at the next settle (not here: this
         * may run inside a walk of the communicator list, a POISON being
         * passed on). */
        e->ndead++;
        if (!e->finalizing) {
            p->poison_pending = 1;
            e->deaths_pending++;
        }
    }
    /* Its transport lets go of the buffers of its sends and receives
     * first (a zero-copy transfer in flight), so that failing them below
     * hands the user nothing a transport still reads or writes. */
    if (p->tp && p->tp->peer_gone)
        p->tp->peer_gone(w);
    int failed = cadre__p2p_fail_peer_requests(w);
    /* A peer that dies while we wait on it is worth a warning; one that
     * exits when the job ends, with nothing of ours pending, is not. */
    if (was == PEER_OK && failed && e->finalizing < 2)
        CADRE_WARN(P2P, "peer rank %d %s", w, p->why);
    else
        CADRE_INFO(P2P, "peer rank %d %s", w, p->why);
}

void cadre__p2p_peer_finalized(int w)
{
    struct cadre_peer *p = &cadre__eng.peers[w];
    p->said_bye = 1;
    if (p->state == PEER_OK) {
        p->state = PEER_FINALIZED;
        snprintf(p->why, sizeof p->why, "has called cadre_finalize");
    }
}

/* How the process `pid`, whose pidfd said it ended, ended: "killed by
 * SIGSEGV", "exited with status 3", or "exited" when nothing tells. Its
 * parent has not reaped it yet (cadrerun keeps every rank a zombie until the
 * job ends), so /proc/PID/stat still holds its wait status (field 52,
 * readable by its own user); a live process there is another one that took
 * the pid. */
static void exit_cause(pid_t pid, char *buf, size_t len)
{
    snprintf(buf, len, "exited");
    char path[64], stat[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    size_t n = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[n] = '\0';
    /* "pid (comm) S f4 f5 ... f52": comm may hold spaces and parentheses. */
    char *p = strrchr(stat, ')');
    if (!p || p[1] != ' ' || p[2] != 'Z')
        return;
    p += 2;
    for (int field = 3; field < 52 && p; field++) {
        p = strchr(p, ' ');
        if (p)
            p++;
    }
    char *end;
    long st = p ? strtol(p, &end, 10) : 0;
    if (!p || end == p || st < 0 || st > 0xffff)
        return;
    int status = (int)st;
    if (WIFSIGNALED(status)) {
        const char *abbrev = sigabbrev_np(WTERMSIG(status));
        char sig[32];
        if (abbrev)
            snprintf(sig, sizeof sig, "SIG%s", abbrev);
        else
            snprintf(sig, sizeof sig, "signal %d", WTERMSIG(status));
        snprintf(buf, len, "killed by %s%s", sig, WCOREDUMP(status) ? " (core dumped)" : "");
    } else if (WIFEXITED(status)) {
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
    }
}

void cadre__p2p_check_peers(void)
{
    struct cadre_engine *e = &cadre__eng;
    double now = cadre__now();
    if (now < e->next_peer_check) {
        if (e->deaths_pending)
            cadre__p2p_deaths_settle();
        return;
    }
    e->next_peer_check = now + 0.1;
    for (int w = 0; w < e->nranks; w++) {
        struct cadre_peer *p = &e->peers[w];
        if (p->pidfd < 0 || p->state == PEER_DEAD)
            continue;
        struct pollfd pf = {p->pidfd, POLLIN, 0};
        if (poll(&pf, 1, 0) == 1) {
            /* Before its parent may reap it. */
            char cause[64];
            exit_cause(p->pid, cause, sizeof cause);
            close(p->pidfd);
            p->pidfd = -1;
            /* Messages it sent before exiting may still be in our queues,
             * or on a connection not accepted yet (idle: accept on the next
             * call, which the one after it reads). Its BYE, which makes its
             * exit no failure, may come after a full ring (a call reads
             * part of it): read while messages come, within a bound. */
            cadre__p2p_tps_idle();
            for (int i = 0; i < e->ntps; i++)
                if (e->tps[i]->drain)
                    e->tps[i]->drain(w);
            for (int k = 0; k < 64; k++)
                if (cadre__p2p_progress_locked() == 0 && k > 0)
                    break;
            cadre__p2p_peer_failed(w, cause);
        }
    }
    if (e->deaths_pending)
        cadre__p2p_deaths_settle();
}

void cadre__p2p_peer_reported(int w, int by)
{
    struct cadre_engine *e = &cadre__eng;
    if (w < 0 || w >= e->nranks || w == cadre__proc.rank || e->finalizing)
        return;
    struct cadre_peer *p = &e->peers[w];
    if (p->same_node || p->state != PEER_OK || p->reported_by)
        return;
    p->reported_by = by + 1;
    e->deaths_pending++;
}

const char *cadre__p2p_host(int peer)
{
    const char *host = cadre__p2p_tcp_host(peer);
    return host ? host : cadre__p2p_ucx_host(peer);
}

/* What w sent before it went is read first (as for a death seen here),
 * while messages come, within a bound. */
static void peer_reported_settle(int w)
{
    struct cadre_peer *p = &cadre__eng.peers[w];
    int by = p->reported_by - 1;
    p->reported_by = 0;
    for (int k = 0; k < 64 && p->state == PEER_OK; k++)
        if (cadre__p2p_progress_locked() == 0 && k > 0)
            break;
    if (p->state != PEER_OK)
        return;
    char why[128];
    const char *host = cadre__p2p_host(w);
    snprintf(why, sizeof why, "%s%s%slost: rank %d found it failed", host ? "(host " : "",
             host ? host : "", host ? ") " : "", by);
    p->heard = 1;
    cadre__p2p_peer_failed(w, why);
}

void cadre__p2p_deaths_settle(void)
{
    struct cadre_engine *e = &cadre__eng;
    /* Poisoning sends POISON messages; a send that finds another peer gone
     * adds to the count, which this loop then takes too. */
    static int settling;
    if (settling)
        return;
    settling = 1;
    while (e->deaths_pending > 0) {
        for (int w = 0; w < e->nranks; w++) {
            struct cadre_peer *p = &e->peers[w];
            if (p->reported_by) {
                e->deaths_pending--;
                peer_reported_settle(w);
            }
            if (!p->poison_pending)
                continue;
            p->poison_pending = 0;
            e->deaths_pending--;
            if (!e->finalizing && cadre__p2p_up.peer_died)
                cadre__p2p_up.peer_died(w);
        }
    }
    settling = 0;
}

int cadre__p2p_comm_rank_of(const struct cadre_comm *c, int w)
{
    if (!c->world_ranks)
        return w >= 0 && w < c->size ? w : -1;
    for (int q = 0; q < c->size; q++)
        if (c->world_ranks[q] == w)
            return q;
    return -1;
}

int cadre__p2p_comm_dead_member(const struct cadre_comm *c)
{
    if (!cadre__eng.ndead)
        return -1;
    for (int q = 0; q < c->size; q++) {
        int w = cadre__world_rank(c, q);
        if (w != cadre__proc.rank && cadre__p2p_peer_died(w))
            return q;
    }
    return -1;
}

/* Which peers the device path hands device buffers directly (p2p_engine.h). */
int cadre__p2p_device_direct(int w, size_t bytes, int send)
{
    if (!cadre__p2p_ucx_direct())
        return 0;
    if (w < 0)
        return !send;
    if (w >= cadre__eng.nranks || w == cadre__proc.rank)
        return 0;
    const struct cadre_peer *p = &cadre__eng.peers[w];
    if (p->tp != &cadre__p2p_ucx || p->state != PEER_OK)
        return 0;
    return !send || (bytes > p->eager && bytes <= p->tp->max_payload(w));
}
