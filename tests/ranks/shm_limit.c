/* A rank under an address-space limit that leaves no room for its peers'
 * shared-memory segments (issue 40, item 4).
 *
 * The rank SHM_LIMIT_RANK names lowers its RLIMIT_AS (soft) inside
 * cadre_init, at the moment libcadre maps a peer's segment (this program's
 * mmap, which libcadre takes from it, as tcp_late_cts.c does with
 * sendmsg): to its current size and half that segment, so that the kernel
 * refuses this mapping with ENOMEM and the limit holds for the rest of the
 * run. SHM_LIMIT_MAPS peer segments (default 0) are mapped before that, so
 * that with 3 ranks the rank may hold one peer's segment and fail on the
 * next. (`ulimit -v` before the start does the same, but where its window
 * lies depends on libpmix, glibc and the build; this is where it hurts.)
 *
 * Before the fix the limited rank gave up shared memory and took tcp, its
 * peers kept shared memory to it and closed their tcp listeners: its first
 * message failed "cannot connect ... Connection refused", the peers saw it
 * exit. Now the ranks agree per pair (p2p_shm_agree.c): each rank checks
 * that the warning it wrote in cadre_init (stderr, read back here) names
 * the limited rank, the segment and ENOMEM with the limit first; then
 * messages between every pair (8 B and a window of 1 MiB sends, the size
 * that shared memory moves by cross-memory attach), allreduce at counts 1,
 * 7 and 100003, bcast from every root and allgather, on the world and on a
 * communicator without the limited rank (whose members keep shared memory
 * and its collectives' slots), all checked element by element.
 *
 * With SHM_LIMIT_EXPECT=fail (CADRE_TRANSPORT=shm: nothing else may take
 * over) cadre_init must fail instead, on every rank, with a message whose
 * first words name the limited rank's failed mapping.
 *
 * An AddressSanitizer build (configure --enable-sanitizers) cannot run
 * under an address-space limit: every rank says "skipped" and exits 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "rank_util.h"

#define W CADRE_COMM_WORLD
#define BIG ((size_t)1 << 20)

static int limited = -1, maps_allowed, seen_own, peers_mapped;
static atomic_int limit_set;
static size_t limit_kib;

#ifndef __SANITIZE_ADDRESS__
/* Whether fd is a segment of libcadre's shared memory (a memfd). */
static int is_cadre_segment(int fd)
{
    char path[64], target[128];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n < 0)
        return 0;
    target[n] = '\0';
    return !strncmp(target, "/memfd:cadre-shm", 16);
}

/* This process's address space in bytes (/proc/self/statm, in pages). */
static size_t vm_bytes(void)
{
    char buf[128];
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    return (size_t)strtoull(buf, NULL, 10) * (size_t)sysconf(_SC_PAGESIZE);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    if (limited == ru_rank && ru_rank >= 0 && !atomic_load(&limit_set) && fd >= 0 &&
        (flags & MAP_SHARED) && is_cadre_segment(fd)) {
        /* The first is this rank's own segment (shm_init), then its peers'. */
        if (!seen_own)
            seen_own = 1;
        else if (peers_mapped++ == maps_allowed) {
            struct rlimit rl;
            getrlimit(RLIMIT_AS, &rl);
            rl.rlim_cur = vm_bytes() + len / 2;
            if (rl.rlim_max != RLIM_INFINITY && rl.rlim_cur > rl.rlim_max)
                rl.rlim_cur = rl.rlim_max;
            if (setrlimit(RLIMIT_AS, &rl) == 0) {
                limit_kib = rl.rlim_cur >> 10;
                atomic_store(&limit_set, 1);
            }
        }
    }
    return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}
#endif

/* Runs cadre_init with stderr going to a file, then writes what it wrote
 * to stderr and returns it (malloc'ed). */
static char *init_captured(int *argc, char ***argv, int *rc)
{
    char tmpl[] = "/tmp/cadre-shm-limit-XXXXXX";
    int tmp = mkstemp(tmpl);
    if (tmp < 0) {
        perror("mkstemp");
        exit(2);
    }
    unlink(tmpl);
    fflush(stderr);
    int saved = dup(2);
    dup2(tmp, 2);
    *rc = cadre_init(argc, argv);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    off_t n = lseek(tmp, 0, SEEK_END);
    char *text = calloc(1, (size_t)n + 1);
    if (!text || pread(tmp, text, (size_t)n, 0) != n) {
        perror("pread");
        exit(2);
    }
    close(tmp);
    fputs(text, stderr);
    return text;
}

/* The cause, first: "rank L cannot map rank P's shared-memory segment
 * (X MiB): Cannot allocate memory (ENOMEM; rank L's ... RLIMIT_AS ... is
 * N KiB)". Returns the line's start, or NULL. */
static const char *cause_in(const char *text)
{
    char want[64];
    snprintf(want, sizeof want, "rank %d cannot map rank ", limited);
    const char *p = strstr(text, want);
    if (!p)
        return NULL;
    const char *end = strchr(p, '\n');
    size_t l = end ? (size_t)(end - p) : strlen(p);
    char line[1024];
    snprintf(line, sizeof line, "%.*s", (int)(l < sizeof line - 1 ? l : sizeof line - 1), p);
    char lim[96];
    snprintf(lim, sizeof lim, "is %zu KiB", limit_kib);
    if (!strstr(line, "shared-memory segment (") || !strstr(line, "Cannot allocate memory") ||
        !strstr(line, "ENOMEM") || !strstr(line, "RLIMIT_AS"))
        return NULL;
    /* The limited rank knows the limit it set; its peers read it too. */
    if (ru_rank == limited && !strstr(line, lim))
        return NULL;
    return p;
}

static void pairs(int n)
{
    unsigned char *out = malloc(2 * BIG), *in = malloc(2 * BIG);
    if (!out || !in) {
        EXPECT(0, "no memory for the messages");
        return;
    }
    for (int step = 1; step < n; step++) {
        int to = (ru_rank + step) % n, from = (ru_rank - step + n) % n;
        uint64_t small = 0x5100000000ull + (uint64_t)ru_rank * 1000 + (uint64_t)to, got = 0;
        OK(cadre_sendrecv(&small, 1, to, 1, &got, 1, from, 1, CADRE_UINT64, W, NULL));
        EXPECT(got == 0x5100000000ull + (uint64_t)from * 1000 + (uint64_t)ru_rank,
               "8-byte message from rank %d: %#lx", from, (unsigned long)got);
        /* Two large sends in flight: the second goes by cross-memory
         * attach where the pair has shared memory (p2p_cma.c). */
        ru_fill(out, BIG, ru_rank, to, 1);
        ru_fill(out + BIG, BIG, ru_rank, to, 2);
        memset(in, 0, 2 * BIG);
        cadre_request_t r[4];
        OK(cadre_irecv(in, BIG, CADRE_UINT8, from, 2, W, &r[0]));
        OK(cadre_irecv(in + BIG, BIG, CADRE_UINT8, from, 3, W, &r[1]));
        OK(cadre_isend(out, BIG, CADRE_UINT8, to, 2, W, &r[2]));
        OK(cadre_isend(out + BIG, BIG, CADRE_UINT8, to, 3, W, &r[3]));
        OK(cadre_waitall(4, r, NULL));
        size_t bad = ru_check(in, BIG, from, ru_rank, 1);
        EXPECT(bad == BIG, "1 MiB message 1 from rank %d: byte %zu wrong", from, bad);
        bad = ru_check(in + BIG, BIG, from, ru_rank, 2);
        EXPECT(bad == BIG, "1 MiB message 2 from rank %d: byte %zu wrong", from, bad);
    }
    free(out);
    free(in);
}

static void collectives(cadre_comm_t c, const char *name)
{
    int rank, n;
    OK(cadre_comm_rank(c, &rank));
    OK(cadre_comm_size(c, &n));
    static const size_t counts[] = {1, 7, 100003};
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
        size_t cnt = counts[k];
        int32_t *s = malloc(cnt * sizeof *s), *d = malloc(cnt * sizeof *d);
        int32_t *g = malloc(cnt * (size_t)n * sizeof *g);
        if (!s || !d || !g) {
            EXPECT(0, "no memory for %zu elements", cnt);
            free(s), free(d), free(g);
            return;
        }
        for (size_t i = 0; i < cnt; i++)
            s[i] = (int32_t)(i * 7 + (size_t)rank * 1000003u);
        OK(cadre_allreduce(s, d, cnt, CADRE_INT32, CADRE_SUM, c));
        for (size_t i = 0; i < cnt; i++) {
            int32_t want = 0;
            for (int r = 0; r < n; r++)
                want += (int32_t)(i * 7 + (size_t)r * 1000003u);
            if (d[i] != want) {
                EXPECT(0, "%s: allreduce of %zu: element %zu is %d, not %d", name, cnt, i, d[i],
                       want);
                break;
            }
        }
        for (int root = 0; root < n; root++) {
            for (size_t i = 0; i < cnt; i++)
                d[i] = rank == root ? (int32_t)(i ^ (size_t)root * 77) : -1;
            OK(cadre_bcast(d, cnt, CADRE_INT32, root, c));
            for (size_t i = 0; i < cnt; i++) {
                if (d[i] != (int32_t)(i ^ (size_t)root * 77)) {
                    EXPECT(0, "%s: bcast of %zu from %d: element %zu is %d", name, cnt, root, i,
                           d[i]);
                    break;
                }
            }
        }
        OK(cadre_allgather(s, g, cnt, CADRE_INT32, c));
        for (int r = 0; r < n; r++) {
            for (size_t i = 0; i < cnt; i++) {
                if (g[(size_t)r * cnt + i] != (int32_t)(i * 7 + (size_t)r * 1000003u)) {
                    EXPECT(0, "%s: allgather of %zu: rank %d's element %zu is %d", name, cnt, r,
                           i, g[(size_t)r * cnt + i]);
                    break;
                }
            }
        }
        free(s), free(d), free(g);
    }
    OK(cadre_barrier(c));
}

int main(int argc, char **argv)
{
    const char *e = getenv("CADRE_RANK");
    ru_rank = e ? atoi(e) : -1;
#ifdef __SANITIZE_ADDRESS__
    printf("shm_limit: rank %d skipped: an AddressSanitizer build cannot run under RLIMIT_AS\n",
           ru_rank);
    return 0;
#endif
    e = getenv("SHM_LIMIT_RANK");
    limited = e ? atoi(e) : 1;
    e = getenv("SHM_LIMIT_MAPS");
    maps_allowed = e ? atoi(e) : 0;
    e = getenv("SHM_LIMIT_EXPECT");
    int expect_fail = e && !strcmp(e, "fail");

    int rc;
    char *text = init_captured(&argc, &argv, &rc);
    if (ru_rank == limited && !atomic_load(&limit_set)) {
        EXPECT(0, "the limit was never set: libcadre mapped %d peer segments (own seen: %d)",
               peers_mapped, seen_own);
    }
    if (expect_fail) {
        EXPECT(rc == CADRE_ERR_BOOTSTRAP, "cadre_init -> %s, expected CADRE_ERR_BOOTSTRAP",
               cadre_error_string(rc));
        const char *msg = cadre_last_error();
        EXPECT(cause_in(msg) == msg, "cadre_init's message does not name the cause first: %s",
               msg);
        printf("shm_limit: rank %d %s\n", ru_rank, ru_failures ? "FAILED" : "ok");
        free(text);
        return ru_failures != 0;
    }
    if (rc != CADRE_SUCCESS) {
        fprintf(stderr, "[rank %d] cadre_init: %s: %s\n", ru_rank, cadre_error_string(rc),
                cadre_last_error());
        return 1;
    }
    int n;
    OK(cadre_comm_size(W, &n));
    /* Every rank of the host names the cause, first on its line. */
    const char *c = cause_in(text);
    EXPECT(c && (c == text || c[-1] == ' '), "no warning naming rank %d's failed mapping first "
           "(ENOMEM, RLIMIT_AS) in what cadre_init wrote:\n%s", limited, text);
    free(text);

    pairs(n);
    collectives(W, "world");
    cadre_comm_t sub;
    OK(cadre_comm_split(W, ru_rank == limited, ru_rank, &sub));
    collectives(sub, ru_rank == limited ? "alone" : "others");
    OK(cadre_comm_free(&sub));
    collectives(W, "world again");
    OK(cadre_finalize());
    printf("shm_limit: rank %d %s\n", ru_rank, ru_failures ? "FAILED" : "ok");
    return ru_failures != 0;
}
