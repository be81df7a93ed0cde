/* launch_probe: a rank program for the launcher tests. After cadre_init it
 * prints
 *     rank R size S local L pid P gpu G prefix X
 * (G and X from CADRE_GPU and CADRE_SHM_PREFIX), then runs its arguments as
 * actions, in order; ACTION@R runs on rank R only:
 *   exit=C    exit with status C at once, without cadre_finalize
 *   segv      die of SIGSEGV (core dumps off)
 *   abort=C   cadre_abort(CADRE_COMM_WORLD, C)
 *   sleep=S   sleep S seconds
 *   write=K   write K KiB of 64-byte lines "rank R line NNNNNN ...", each line
 *             in two write(2) calls, so a launcher that forwarded raw bytes
 *             would mix ranks' lines
 *   echo      copy stdin to stdout as "rank R stdin: LINE", then print
 *             "rank R stdin EOF after N lines"
 *   sigwait   print "rank R ready", wait for SIGINT, SIGTERM or SIGHUP,
 *             print "rank R got SIGxxx", cadre_finalize and exit 0 (an exit
 *             without cadre_finalize is a failure to cadrerun)
 *   env=VAR   print "rank R env VAR=VALUE" or "rank R env VAR unset"
 *   shm       create /dev/shm/<prefix>-probe-R, leave it, print "rank R shm NAME"
 *   err=TEXT  print TEXT on stderr
 *   orphan=K  leave a process behind that ignores SIGTERM and sleeps 60 s,
 *             its stdio on /dev/null: K=child, a child in the rank's process
 *             group; K=daemon, a grandchild in a session of its own, whose
 *             parent exits; print "rank R left pid P"
 *   pmixjunk  send each message of pmix_junk.h to cadrerun's PMIx port on a
 *             connection of its own (the forged connect messages name the
 *             next rank); print "rank R junk K refused" when cadrerun closed
 *             it, else "rank R junk K not refused: WHAT"
 * Then cadre_finalize and exit 0. Every line goes out with one write(2). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cadre.h"
#include "pmix_junk.h"

static int rank = -1;

static void say_fd(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say_fd(int fd, const char *fmt, ...)
{
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (n > (int)sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    for (int off = 0; off < n;) {
        ssize_t w = write(fd, line + off, (size_t)(n - off));
        if (w <= 0)
            return;
        off += (int)w;
    }
}

static void write_all(const char *p, size_t len)
{
    while (len) {
        ssize_t w = write(1, p, len);
        if (w <= 0)
            exit(9);
        p += w;
        len -= (size_t)w;
    }
}

static void write_lines(int kib)
{
    static const char pad[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    for (int i = 0; i < kib * 16; i++) {
        char line[65];
        int n = snprintf(line, sizeof line, "rank %d line %06d ", rank, i);
        memcpy(line + n, pad, (size_t)(63 - n));
        line[63] = '\n';
        write_all(line, 20);
        write_all(line + 20, 44);
    }
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* orphan=K: see the top. The pid comes back through a pipe. */
static void leave_orphan(const char *kind)
{
    int p[2];
    if (pipe(p) != 0)
        exit(8);
    pid_t pid = fork();
    if (pid < 0)
        exit(8);
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        signal(SIGTERM, SIG_IGN);
        if (!strcmp(kind, "daemon")) {
            setsid();
            if (fork() != 0)
                _exit(0);
        }
        pid_t me = getpid();
        if (write(p[1], &me, sizeof me) != (ssize_t)sizeof me)
            _exit(1);
        close(p[1]);
        sleep_s(60);
        _exit(0);
    }
    close(p[1]);
    pid_t left = 0;
    if (read(p[0], &left, sizeof left) != (ssize_t)sizeof left)
        exit(8);
    close(p[0]);
    say_fd(1, "rank %d left pid %d", rank, (int)left);
}

static void waited_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
}

static void run(const char *act, const char *arg)
{
    if (!strcmp(act, "exit")) {
        exit(atoi(arg));
    } else if (!strcmp(act, "segv")) {
        struct rlimit none = {0, 0};
        setrlimit(RLIMIT_CORE, &none);
        /* Die of the signal itself, whatever handler is installed (ASan's
         * reports the SEGV and exits 1 in a --enable-sanitizers build). */
        signal(SIGSEGV, SIG_DFL);
        raise(SIGSEGV);
    } else if (!strcmp(act, "abort")) {
        cadre_abort(CADRE_COMM_WORLD, atoi(arg));
        say_fd(2, "rank %d: cadre_abort returned", rank);
        exit(99);
    } else if (!strcmp(act, "sleep")) {
        sleep_s(atof(arg));
    } else if (!strcmp(act, "write")) {
        write_lines(atoi(arg));
    } else if (!strcmp(act, "echo")) {
        char line[1024];
        int n = 0;
        while (fgets(line, sizeof line, stdin)) {
            line[strcspn(line, "\n")] = '\0';
            say_fd(1, "rank %d stdin: %s", rank, line);
            n++;
        }
        say_fd(1, "rank %d stdin EOF after %d lines", rank, n);
    } else if (!strcmp(act, "sigwait")) {
        sigset_t set;
        waited_signals(&set);
        say_fd(1, "rank %d ready", rank);
        int sig = 0;
        sigwait(&set, &sig);
        say_fd(1, "rank %d got SIG%s", rank, sigabbrev_np(sig));
        exit(cadre_finalize() == CADRE_SUCCESS ? 0 : 1);
    } else if (!strcmp(act, "env")) {
        const char *v = getenv(arg);
        if (v)
            say_fd(1, "rank %d env %s=%s", rank, arg, v);
        else
            say_fd(1, "rank %d env %s unset", rank, arg);
    } else if (!strcmp(act, "shm")) {
        const char *prefix = getenv("CADRE_SHM_PREFIX");
        char name[256];
        snprintf(name, sizeof name, "/%s-probe-%d", prefix ? prefix : "cadre-none", rank);
        int fd = shm_open(name, O_CREAT | O_RDWR, 0600);
        if (fd < 0 || ftruncate(fd, 4096) != 0) {
            say_fd(2, "rank %d: shm_open %s failed", rank, name);
            exit(8);
        }
        close(fd);
        say_fd(1, "rank %d shm %s", rank, name + 1);
    } else if (!strcmp(act, "orphan")) {
        leave_orphan(arg);
    } else if (!strcmp(act, "pmixjunk")) {
        int port = pmix_junk_port(getenv("PMIX_SERVER_URI41"));
        const char *ns = getenv("CADRE_SHM_PREFIX");
        int size = 1;
        cadre_comm_size(CADRE_COMM_WORLD, &size);
        for (int k = 0; k < PMIX_JUNK_COUNT; k++) {
            unsigned char m[1024];
            const char *what;
            size_t len = pmix_junk_make(k, ns ? ns : "", (uint32_t)((rank + 1) % size), m, &what);
            if (pmix_junk_send(port, m, len, 20000) == 1)
                say_fd(1, "rank %d junk %d refused", rank, k);
            else
                say_fd(1, "rank %d junk %d not refused: %s", rank, k, what);
        }
    } else if (!strcmp(act, "err")) {
        say_fd(2, "%s", arg);
    } else {
        say_fd(2, "launch_probe: unknown action '%s'", act);
        exit(64);
    }
}

int main(int argc, char **argv)
{
    /* sigwait needs the signals blocked in every thread, libpmix's among
     * them: block before cadre_init starts it. */
    for (int i = 1; i < argc; i++) {
        if (!strncmp(argv[i], "sigwait", 7)) {
            sigset_t set;
            waited_signals(&set);
            pthread_sigmask(SIG_BLOCK, &set, NULL);
        }
    }
    if (cadre_init(&argc, &argv) != CADRE_SUCCESS) {
        say_fd(2, "launch_probe: cadre_init: %s", cadre_last_error());
        return 1;
    }
    int size, local;
    cadre_comm_rank(CADRE_COMM_WORLD, &rank);
    cadre_comm_size(CADRE_COMM_WORLD, &size);
    cadre_local_rank(&local);
    const char *gpu = getenv("CADRE_GPU"), *prefix = getenv("CADRE_SHM_PREFIX");
    say_fd(1, "rank %d size %d local %d pid %d gpu %s prefix %s", rank, size, local, (int)getpid(),
           gpu ? gpu : "unset", prefix ? prefix : "unset");
    for (int i = 1; i < argc; i++) {
        char act[256];
        snprintf(act, sizeof act, "%s", argv[i]);
        char *at = strrchr(act, '@');
        if (at) {
            *at = '\0';
            if (atoi(at + 1) != rank)
                continue;
        }
        char *eq = strchr(act, '=');
        const char *arg = "";
        if (eq) {
            *eq = '\0';
            arg = eq + 1;
        }
        run(act, arg);
    }
    return cadre_finalize() == CADRE_SUCCESS ? 0 : 1;
}
