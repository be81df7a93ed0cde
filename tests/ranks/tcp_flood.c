/*
 * tcp_flood - an unprivileged local user floods every rank's TCP listener
 * before the ranks first talk, and the job still does its work. Run with
 * CADRE_TRANSPORT=tcp and >= 2 ranks, as root (the intruder is a child that
 * drops to uid/gid 65534, "nobody"); not root: says so and skips.
 *
 * Every rank finds its own listening port (its AF_INET listening socket)
 * and writes it to a file of a directory the ranks share (in cadrerun's
 * directory of the job): cadre_init has made no TCP connection yet,
 * and the files, not cadre, carry the ports and the start signal. Each rank
 * then forks an intruder that, as nobody, opens FLOOD_IDLE idle connections
 * and FLOOD_HALF half handshakes to every rank's port on 127.0.0.1, holds
 * them, and dials again whichever the rank closes. When every intruder has
 * its connections up, the ranks exchange messages of eager and rendezvous
 * sizes with every other rank and check them byte for byte, then an
 * allreduce, FLOOD_ROUNDS times. Only then are the intruders stopped; each
 * reports how many connections it made, which must be all it tried (the
 * flood really happened).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rank_util.h"
#include "tcp_port.h"

#define FLOOD_IDLE 100 /* per intruder and port: 3 ranks make 300 per port */
#define FLOOD_HALF 20
#define FLOOD_ROUNDS 3
#define NOBODY 65534

/* ---- the shared directory: ports and "ready" marks, without cadre -------- */

static char dir[128];

static void mark(const char *what, int rank, int value)
{
    char path[256], tmp[300];
    snprintf(path, sizeof path, "%s/%s.%d", dir, what, rank);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    EXPECT(f != NULL, "%s: %s", tmp, strerror(errno));
    if (!f)
        return;
    fprintf(f, "%d\n", value);
    fclose(f);
    EXPECT(rename(tmp, path) == 0, "%s: %s", path, strerror(errno));
}

/* Waits (at most 60 s) for every rank's mark; returns its value. */
static void wait_marks(const char *what, int np, int *values)
{
    double end = ru_now() + 60;
    for (int r = 0; r < np; r++) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s.%d", dir, what, r);
        FILE *f;
        while (!(f = fopen(path, "r")) && ru_now() < end)
            usleep(10000);
        EXPECT(f != NULL, "no %s from rank %d in 60 s", what, r);
        values[r] = 0;
        if (f) {
            EXPECT(fscanf(f, "%d", &values[r]) == 1, "%s: unreadable", path);
            fclose(f);
        }
    }
}

static void unmark(const char *what, int rank)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s.%d", dir, what, rank);
    unlink(path);
}

/* ---- the intruder (a child, as nobody) ------------------------------------ */

struct conn {
    int fd, port, half;
};

static int dial(struct conn *c)
{
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)c->port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        if (c->fd >= 0)
            close(c->fd);
        c->fd = -1;
        return 0;
    }
    if (c->half) { /* the first 12 of a handshake's 24 bytes: magic, version, from */
        uint32_t part[3] = {0x43445443u, 1u, 0};
        (void)!send(c->fd, part, sizeof part, MSG_NOSIGNAL);
    }
    return 1;
}

/* Exit status: 0 when every connection was made (and at least once each);
 * messages go to stderr. `ctl` closes when the rank wants it to stop. */
static void intruder(const int *ports, int np, int ctl, int ready)
{
    if (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY)) {
        /* root without CAP_SETUID (a container): the test is skipped */
        fprintf(stderr, "[intruder] cannot become nobody: %s\n", strerror(errno));
        int none = -1;
        (void)!write(ready, &none, sizeof none);
        _exit(2);
    }
    if (setuid(0) == 0 || getuid() != NOBODY || geteuid() != NOBODY) {
        fprintf(stderr, "[intruder] still privileged\n");
        _exit(2);
    }
    int n = np * (FLOOD_IDLE + FLOOD_HALF);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)n + 64) {
        rl.rlim_cur = rl.rlim_max < (rlim_t)n + 64 ? rl.rlim_max : (rlim_t)n + 64;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    struct conn *c = calloc((size_t)n, sizeof *c);
    struct pollfd *pf = calloc((size_t)n + 1, sizeof *pf);
    long made = 0, redials = 0;
    for (int i = 0; i < n; i++) {
        c[i].port = ports[i % np];
        c[i].half = (i / np) >= FLOOD_IDLE;
        made += dial(&c[i]);
    }
    int up = 0;
    for (int i = 0; i < n; i++)
        up += c[i].fd >= 0;
    (void)!write(ready, &up, sizeof up);
    close(ready);
    /* Hold them; dial again those the rank closed, until told to stop. */
    for (;;) {
        int k = 0;
        for (int i = 0; i < n; i++)
            if (c[i].fd >= 0)
                pf[k++] = (struct pollfd){c[i].fd, POLLIN, 0};
        pf[k++] = (struct pollfd){ctl, POLLIN, 0};
        if (poll(pf, (nfds_t)k, 100) < 0 && errno != EINTR)
            break;
        if (pf[k - 1].revents)
            break;
        for (int i = 0, j = 0; i < n; i++) {
            if (c[i].fd < 0) {
                redials++;
                made += dial(&c[i]);
                continue;
            }
            if (pf[j++].revents) {
                char b[64];
                ssize_t r = recv(c[i].fd, b, sizeof b, MSG_DONTWAIT);
                if (r > 0) {
                    fprintf(stderr, "[intruder] port %d answered %zd bytes\n", c[i].port, r);
                    _exit(3);
                }
                if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
                    close(c[i].fd);
                    c[i].fd = -1;
                }
            }
        }
    }
    fprintf(stderr, "[intruder] %d of %d connections up at the start; %ld made, %ld dialled "
                    "again\n",
            up, n, made, redials);
    _exit(up == n ? 0 : 1);
}

/* ---- the job's traffic ---------------------------------------------------- */

static void exchange(int me, int np, uint64_t round)
{
    static const size_t sizes[] = {0, 13, 4096, 300000};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        uint64_t seq = round * 16 + s;
        unsigned char *out = malloc(n * (size_t)np + 1), *in = malloc(n * (size_t)np + 1);
        cadre_request_t *rq = calloc(2 * (size_t)np, sizeof *rq);
        int nr = 0;
        memset(in, 0xee, n * (size_t)np + 1);
        for (int p = 0; p < np; p++) {
            if (p == me)
                continue;
            ru_fill(out + (size_t)p * n, n, me, p, seq);
            OK(cadre_irecv(in + (size_t)p * n, n, CADRE_UINT8, p, 5, CADRE_COMM_WORLD, &rq[nr++]));
            OK(cadre_isend(out + (size_t)p * n, n, CADRE_UINT8, p, 5, CADRE_COMM_WORLD, &rq[nr++]));
        }
        OK(cadre_waitall(nr, rq, NULL));
        for (int p = 0; p < np; p++) {
            if (p == me)
                continue;
            size_t bad = ru_check(in + (size_t)p * n, n, p, me, seq);
            EXPECT(bad == n, "round %llu: %zu bytes from rank %d: byte %zu differs",
                   (unsigned long long)round, n, p, bad);
        }
        free(rq);
        free(in);
        free(out);
    }
    int v = me + 1, sum = 0;
    OK(cadre_allreduce(&v, &sum, 1, CADRE_INT32, CADRE_SUM, CADRE_COMM_WORLD));
    EXPECT(sum == np * (np + 1) / 2, "allreduce gave %d, expected %d", sum, np * (np + 1) / 2);
}

int main(int argc, char **argv)
{
    OK(cadre_init(&argc, &argv));
    int me, np;
    OK(cadre_comm_rank(CADRE_COMM_WORLD, &me));
    OK(cadre_comm_size(CADRE_COMM_WORLD, &np));
    ru_rank = me;
    EXPECT(np >= 2, "needs 2 ranks or more");
    if (geteuid() != 0) {
        if (me == 0)
            printf("tcp_flood: skipped: needs root to run its intruder as another user "
                   "(nobody)\n");
        OK(cadre_finalize());
        return ru_failures ? 1 : 0;
    }
    /* cadrerun's private directory of the job, which it removes at the
     * end, also when a rank failed */
    const char *jobdir = getenv("PMIX_SERVER_TMPDIR");
    if (jobdir && strlen(jobdir) < 80)
        snprintf(dir, sizeof dir, "%s/tcp-flood", jobdir);
    else
        snprintf(dir, sizeof dir, "/tmp/cadre-tcp-flood.%d", (int)getppid());
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        EXPECT(0, "%s: %s", dir, strerror(errno));
    int *ports = calloc((size_t)np, sizeof *ports), *up = calloc((size_t)np, sizeof *up);
    mark("port", me, my_port());
    wait_marks("port", np, ports);

    int ctl[2], ready[2];
    EXPECT(pipe2(ctl, O_CLOEXEC) == 0 && pipe2(ready, O_CLOEXEC) == 0, "pipe: %s",
           strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    EXPECT(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* Nothing of the rank's: its listener, its PMIx connection. */
        for (int fd = 3; fd < 4096; fd++)
            if (fd != ctl[0] && fd != ready[1])
                close(fd);
        intruder(ports, np, ctl[0], ready[1]);
    }
    close(ctl[0]);
    close(ready[1]);
    int n = 0;
    EXPECT(read(ready[0], &n, sizeof n) == sizeof n, "the intruder did not start");
    close(ready[0]);
    mark("ready", me, n);
    wait_marks("ready", np, up);
    int skipped = 0;
    for (int r = 0; r < np; r++)
        skipped |= up[r] < 0;
    for (int r = 0; r < np && !skipped; r++)
        EXPECT(up[r] == np * (FLOOD_IDLE + FLOOD_HALF), "rank %d's intruder has %d of %d up", r,
               up[r], np * (FLOOD_IDLE + FLOOD_HALF));

    /* The first TCP connections of the job, through the flood. */
    double t0 = ru_now();
    for (uint64_t round = 0; round < FLOOD_ROUNDS; round++)
        exchange(me, np, round);
    double took = ru_now() - t0;

    close(ctl[1]);
    int st = 0;
    EXPECT(waitpid(pid, &st, 0) == pid, "waitpid: %s", strerror(errno));
    EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == (up[me] < 0 ? 2 : 0),
           "the intruder ended with status %#x", st);
    unmark("port", me);
    unmark("ready", me);
    int one = 1, sum = 0; /* every rank's marks are gone before the directory */
    OK(cadre_allreduce(&one, &sum, 1, CADRE_INT32, CADRE_SUM, CADRE_COMM_WORLD));
    if (me == 0)
        rmdir(dir);
    free(ports);
    free(up);
    OK(cadre_finalize());
    if (ru_failures)
        return 1;
    if (me == 0 && skipped)
        printf("tcp_flood: skipped: root, but cannot run the intruder as user nobody\n");
    else if (me == 0)
        printf("tcp_flood: ok (%d ranks, %d connections per port held by intruders as uid %d; "
               "traffic took %.2f s)\n",
               np, np * (FLOOD_IDLE + FLOOD_HALF), NOBODY, took);
    return 0;
}
