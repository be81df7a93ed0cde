/*
 * The selection tables: for every collective, rules in order, the first
 * that holds picks the algorithm; every threshold of the choice is here.
 * Also the names (CADRE_ALGO, the log, cadre-info --algorithms) and the
 * number each algorithm has in the call signature.
 *
 * Pure: calls nothing of cadre's other layers (the facts about the
 * communicator come through in->ask), so cadre-info and the unit tests
 * link this file alone. Its callers: coll_call.c (every collective),
 * tools/cadre_info.c, tests/unit/test_select.c.
 */
#include <stdint.h>
#include <string.h>

#include "coll_select.h"
#include "coll_share.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define ANY SIZE_MAX

/* Conditions of a rule besides the size (need). */
enum {
    R_BLOCKING = 1, /* a blocking call */
    R_HOST = 2,     /* host memory: no GPU bound in this process */
    R_SLOTS = 4,    /* the communicator has shared-memory slots (coll_fast.c) */
    R_LOCAL = 8,    /* every member on this node, through shm (coll_direct.c) */
    R_EQUAL = 16,   /* equal counts: not the v-variant */
    R_POW2 = 32,    /* a power-of-two number of ranks */
    R_FEW = 64,     /* fewer elements than ranks */
    R_ANYWAY = 128, /* holds under CADRE_ALGO too */
    R_VECTOR = 256, /* the v-variant (gatherv, scatterv, alltoallv) */
};
enum ranks_cond { RK_ANY, RK_2, RK_NOT2, RK_GT2, RK_LE2, RK_GT8 };
static const char *const rk_text[] = {"", "ranks=2", "ranks!=2", "ranks>2", "ranks<=2", "ranks>8"};
enum measure { M_BYTES, M_BLOCK };

struct rule {
    enum coll_algo algo;
    unsigned need;
    enum ranks_cond ranks;
    enum measure m;
    size_t min, max;   /* the measure in [min, max] (bytes) */
    size_t share_max;  /* allreduce: rank 0's share of the vector at most (0: not asked) */
};

/* An algorithm CADRE_ALGO may force: it runs where `when` holds (sizes
 * ignored), elsewhere `otherwise` does (COLL_ALGO_NONE: the table without
 * the rules that need the slots). */
struct forcible {
    enum coll_algo algo;
    unsigned when;
    enum ranks_cond ranks;
    size_t share_max;
    enum coll_algo otherwise;
};

#define NRULES 10
#define NFORCE 6
struct table {
    const char *name;
    const char *bytes; /* what `bytes` is for this collective */
    struct forcible force[NFORCE]; /* in signature order: the first is 1 */
    struct rule rules[NRULES];     /* the last has no condition */
};

/* The shared-memory slots hold FAST_BYTES (1 MiB, coll_fast.h) per rank:
 * no slot rule may pass it (tests/unit/test_select.c checks). On two ranks
 * one message each way is as quick from 4 KiB on. */
#define SLOTS_2 {COLL_ALGO_SLOTS, R_BLOCKING | R_HOST | R_SLOTS, RK_2, M_BYTES, 0, 4 * KiB, 0}
#define SLOTS_N {COLL_ALGO_SLOTS, R_BLOCKING | R_HOST | R_SLOTS, RK_NOT2, M_BYTES, 0, MiB, 0}
/* gatherv, scatterv, alltoallv: a rank knows its own counts only, so every
 * rank must choose without them: the slots for every blocking call, and
 * each writer moves its part by message within the call where it is over
 * what the equal-count rules above it keep in the slots (coll_fast_v.c,
 * cadre__coll_slots_max). */
#define SLOTS_V {COLL_ALGO_SLOTS, R_BLOCKING | R_HOST | R_SLOTS | R_VECTOR, RK_ANY, M_BYTES, 0, ANY, 0}
/* scan, exscan: recursive doubling on more than 8 ranks up to this size. */
#define SCAN_RD_MAX (64 * KiB)
#define OTHERWISE(a) {a, 0, RK_ANY, M_BYTES, 0, ANY, 0}
#define ALWAYS(a) {a, 0, RK_ANY, 0, COLL_ALGO_NONE}

static const struct table tables[COLL_NKINDS] = {
    [COLL_BARRIER] = {"barrier", "0 (no data)",
                      {ALWAYS(COLL_ALGO_DISSEMINATION)},
                      {{COLL_ALGO_SLOTS, R_BLOCKING | R_HOST | R_SLOTS | R_ANYWAY, RK_ANY, M_BYTES,
                        0, ANY, 0},
                       OTHERWISE(COLL_ALGO_DISSEMINATION)}},
    [COLL_BCAST] = {"bcast", "the buffer",
                    {ALWAYS(COLL_ALGO_BINOMIAL), ALWAYS(COLL_ALGO_PIPELINE),
                     {COLL_ALGO_DIRECT, R_HOST | R_LOCAL, RK_ANY, 0, COLL_ALGO_NONE}},
                    {SLOTS_2, SLOTS_N,
                     {COLL_ALGO_DIRECT, R_HOST | R_LOCAL, RK_ANY, M_BYTES, 8 * MiB, ANY, 0},
                     {COLL_ALGO_BINOMIAL, 0, RK_ANY, M_BYTES, 0, 256 * KiB, 0},
                     {COLL_ALGO_BINOMIAL, 0, RK_LE2, M_BYTES, 0, ANY, 0},
                     OTHERWISE(COLL_ALGO_PIPELINE)}},
    /* Split past the slots on more than two ranks while a rank's share fits
     * its slot: 4 ranks on 2 cores, float32 sum, 2 and 4 MiB about half of
     * binomial's time, the call and the whole iteration, barrier and loop
     * timing (issue 45, 2026-12-02). Two ranks keep binomial (split no
     * faster); direct (messages around its reads and writes) only when
     * forced: behind binomial at 4 MiB on 4 ranks. (The slots of a
     * communicator need two ranks or more: split never runs on one.) */
    [COLL_REDUCE] = {"reduce", "the vector",
                     {ALWAYS(COLL_ALGO_BINOMIAL),
                      {COLL_ALGO_DIRECT, R_HOST | R_LOCAL, RK_ANY, 0, COLL_ALGO_NONE},
                      {COLL_ALGO_SPLIT, R_BLOCKING | R_HOST | R_SLOTS, RK_ANY, MiB,
                       COLL_ALGO_NONE}},
                     {{COLL_ALGO_SLOTS, R_BLOCKING | R_HOST | R_SLOTS, RK_2, M_BYTES, 0, MiB, 0},
                      SLOTS_N,
                      {COLL_ALGO_SPLIT, R_BLOCKING | R_HOST | R_SLOTS, RK_GT2, M_BYTES, MiB + 1,
                       ANY, MiB},
                      /* Two ranks: both reduce a half, the other's streamed to
                       * the root (coll_direct_pair.c): ahead of binomial and
                       * Open MPI from 4 MiB in both loops, mixed at 2 MiB
                       * (bench/RESULTS.md, issue 45). */
                      {COLL_ALGO_DIRECT, R_HOST | R_LOCAL, RK_2, M_BYTES, 4 * MiB, ANY, 0},
                      OTHERWISE(COLL_ALGO_BINOMIAL)}},
    /* Direct from 1 MiB on more than two ranks: ahead of the slots, the ring
     * and recursive doubling on 4 ranks (bench/HISTORY.md, 2026-11-24). The
     * split serves blocking calls from 64 KiB while a rank's share fits its
     * slot. */
    [COLL_ALLREDUCE] = {"allreduce", "the vector",
                        {ALWAYS(COLL_ALGO_RD), ALWAYS(COLL_ALGO_RING),
                         {COLL_ALGO_DIRECT, R_HOST | R_LOCAL, RK_ANY, 0, COLL_ALGO_NONE},
                         {COLL_ALGO_SPLIT, R_BLOCKING | R_HOST | R_SLOTS, RK_GT2, MiB,
                          COLL_ALGO_NONE}},
                        {{COLL_ALGO_SPLIT, R_BLOCKING | R_HOST | R_SLOTS, RK_GT2, M_BYTES,
                          64 * KiB, ANY, MiB},
                         SLOTS_2, SLOTS_N,
                         {COLL_ALGO_DIRECT, R_HOST | R_LOCAL, RK_2, M_BYTES, 64 * KiB, ANY, 0},
                         {COLL_ALGO_DIRECT, R_HOST | R_LOCAL, RK_NOT2, M_BYTES, MiB, ANY, 0},
                         {COLL_ALGO_RD, 0, RK_GT2, M_BYTES, 0, MiB, 0},
                         {COLL_ALGO_RD, 0, RK_LE2, M_BYTES, 0, 64 * KiB, 0},
                         {COLL_ALGO_RD, R_FEW, RK_ANY, M_BYTES, 0, ANY, 0},
                         OTHERWISE(COLL_ALGO_RING)}},
    /* gather and scatter through the slots as allgather does: no message,
     * no request (issue 45's standard loop); their v-variants too (SLOTS_V). */
    [COLL_GATHER] = {"gather", "this rank's block",
                     {ALWAYS(COLL_ALGO_LINEAR)},
                     {{COLL_ALGO_SLOTS, R_BLOCKING | R_HOST | R_SLOTS | R_EQUAL, RK_2, M_BYTES, 0,
                       4 * KiB, 0},
                      {COLL_ALGO_SLOTS, R_BLOCKING | R_HOST | R_SLOTS | R_EQUAL, RK_NOT2, M_BYTES,
                       0, MiB, 0},
                      SLOTS_V, OTHERWISE(COLL_ALGO_LINEAR)}},
    /* Direct on two ranks: one process_vm_readv of the peer's half is ahead
     * of the pipelined messages from 2 MiB (bench/HISTORY.md, 2026-11-24);
     * more ranks keep the messages (not measured). */
    [COLL_ALLGATHER] = {"allgather", "the result; block = the largest rank's part",
                        {ALWAYS(COLL_ALGO_RING),
                         {COLL_ALGO_RD, R_EQUAL | R_POW2, RK_ANY, 0, COLL_ALGO_RING},
                         {COLL_ALGO_DIRECT, R_HOST | R_LOCAL, RK_ANY, 0, COLL_ALGO_NONE}},
                        {{COLL_ALGO_SLOTS, R_BLOCKING | R_HOST | R_SLOTS, RK_2, M_BLOCK, 0, 4 * KiB,
                          0},
                         {COLL_ALGO_SLOTS, R_BLOCKING | R_HOST | R_SLOTS, RK_NOT2, M_BLOCK, 0, MiB,
                          0},
                         {COLL_ALGO_DIRECT, R_HOST | R_LOCAL, RK_2, M_BYTES, 2 * MiB, ANY, 0},
                         {COLL_ALGO_RD, R_EQUAL | R_POW2, RK_ANY, M_BYTES, 0, 64 * KiB, 0},
                         OTHERWISE(COLL_ALGO_RING)}},
    /* Two algorithms at most: number 3 is the direct one's through the
     * slots (SCATTER_DIRECT_SLOTS_CODE). Direct on two ranks (bound to a
     * core each) from 16 KiB: against linear in 7 comparisons (barrier and
     * loop timing, 3 turns each, loads 2-10; issue 45, 2026-12-02) it was
     * ahead at every size in most (1 MiB and 8 MiB in all; up to 3x), and
     * the single losses were scattered over sizes and runs (16-64 KiB in
     * one quiet loop run, 512 KiB in both loaded loop runs but none of the
     * quiet ones). On 4 ranks on 2 cores the root, which waits for its
     * readers, was behind the slots up to 1 MiB and mixed against linear
     * above: only when forced there. */
    [COLL_SCATTER] = {"scatter", "the root's buffer, every rank's block",
                      {ALWAYS(COLL_ALGO_LINEAR),
                       {COLL_ALGO_DIRECT, R_HOST | R_LOCAL, RK_ANY, 0, COLL_ALGO_NONE}},
                      {{COLL_ALGO_SLOTS, R_BLOCKING | R_HOST | R_SLOTS | R_EQUAL, RK_2, M_BYTES, 0,
                        8 * KiB, 0},
                       {COLL_ALGO_SLOTS, R_BLOCKING | R_HOST | R_SLOTS | R_EQUAL, RK_NOT2, M_BYTES,
                        0, MiB, 0},
                       SLOTS_V,
                       {COLL_ALGO_DIRECT, R_BLOCKING | R_HOST | R_LOCAL | R_EQUAL, RK_2, M_BYTES,
                        16 * KiB, ANY, 0},
                       OTHERWISE(COLL_ALGO_LINEAR)}},
    [COLL_REDUCE_SCATTER] = {"reduce_scatter", "the input, every rank's block",
                             {ALWAYS(COLL_ALGO_RING),
                              {COLL_ALGO_DIRECT, R_HOST | R_LOCAL, RK_ANY, 0, COLL_ALGO_NONE}},
                             {SLOTS_2, SLOTS_N,
                              {COLL_ALGO_DIRECT, R_HOST | R_LOCAL, RK_ANY, M_BYTES, 64 * KiB, ANY,
                               0},
                              OTHERWISE(COLL_ALGO_RING)}},
    /* Linear (every block at once, one wait; Open MPI 4.1's choice on 3 to
     * 7 ranks from blocks of 1 MiB) only when forced: against pairwise on
     * 4 ranks on 2 cores it was not told apart on a loaded machine
     * (bench/RESULTS.md, issue 45). */
    [COLL_ALLTOALL] = {"alltoall", "the input, every rank's block",
                       {ALWAYS(COLL_ALGO_PAIRWISE), ALWAYS(COLL_ALGO_LINEAR)},
                       {{COLL_ALGO_SLOTS, R_BLOCKING | R_HOST | R_SLOTS | R_EQUAL, RK_2, M_BYTES, 0,
                         4 * KiB, 0},
                        {COLL_ALGO_SLOTS, R_BLOCKING | R_HOST | R_SLOTS | R_EQUAL, RK_NOT2, M_BYTES,
                         0, MiB, 0},
                        SLOTS_V, OTHERWISE(COLL_ALGO_PAIRWISE)}},
    /* Recursive doubling takes log2(n) rounds and sends the vector in each;
     * the chain (linear, in segments) takes n-1 steps and sends it once. The
     * chain was as fast or faster at 3, 4 and 8 ranks from 1 KiB to 4 MiB
     * (float32 sum, a busy 2-core machine, 2026-12-01: 4 ranks 1 KiB 7 us
     * against 27, 64 KiB 126 against 637, 4 MiB 14 ms against 31; 8 ranks
     * 1 KiB 54 against 201, 16 KiB 658 against 412, 256 KiB 2.2 ms against
     * 4.2); recursive doubling keeps small vectors on more than 8 ranks,
     * where its log2(n) rounds beat n-1 steps (not measured here). */
    [COLL_SCAN] = {"scan", "the vector",
                   {ALWAYS(COLL_ALGO_RD), ALWAYS(COLL_ALGO_LINEAR)},
                   {{COLL_ALGO_RD, 0, RK_GT8, M_BYTES, 0, SCAN_RD_MAX, 0},
                    OTHERWISE(COLL_ALGO_LINEAR)}},
    [COLL_EXSCAN] = {"exscan", "the vector",
                     {ALWAYS(COLL_ALGO_RD), ALWAYS(COLL_ALGO_LINEAR)},
                     {{COLL_ALGO_RD, 0, RK_GT8, M_BYTES, 0, SCAN_RD_MAX, 0},
                      OTHERWISE(COLL_ALGO_LINEAR)}},
};

static const char *const algo_names[COLL_NALGOS] = {
    [COLL_ALGO_NONE] = "auto",
    [COLL_ALGO_SLOTS] = "slots",
    [COLL_ALGO_DISSEMINATION] = "dissemination",
    [COLL_ALGO_BINOMIAL] = "binomial",
    [COLL_ALGO_PIPELINE] = "pipeline",
    [COLL_ALGO_DIRECT] = "direct",
    [COLL_ALGO_RD] = "recursive_doubling",
    [COLL_ALGO_RING] = "ring",
    [COLL_ALGO_SPLIT] = "split",
    [COLL_ALGO_LINEAR] = "linear",
    [COLL_ALGO_PAIRWISE] = "pairwise",
    [COLL_ALGO_HIER_LEADER] = "hier_leader",
    [COLL_ALGO_HIER_SPLIT] = "hier_split",
    [COLL_ALGO_HIER_RING] = "hier_ring",
    [COLL_ALGO_GPU_KERNEL] = "gpu_kernel",
};

/* ---- the device stage ---------------------------------------------------------------- */
enum coll_algo cadre__coll_select_device(enum coll_kind k, size_t bytes, int staged,
                                         const char **why)
{
    (void)bytes;
    if (staged) {
        *why = "CADRE_GPU_ALGO=staged";
        return COLL_ALGO_NONE;
    }
    switch (k) {
    case COLL_ALLREDUCE:
    case COLL_REDUCE_SCATTER:
    case COLL_ALLGATHER: *why = "device buffers"; return COLL_ALGO_GPU_KERNEL;
    default: *why = "no device kernel: staged"; return COLL_ALGO_NONE;
    }
}

/* ---- the two-level stage ------------------------------------------------------------- */
/* Sizes up to which the leader algorithms are chosen: there one message per
 * rank within the host and one per host across beat a ring's n-1 steps. */
#define HIER_LEADER_MAX_ALLREDUCE (64 * KiB)
#define HIER_LEADER_MAX_BCAST (256 * KiB)
/* With one rank per host, the allreduce from this size is the chunked ring
 * (hier_ring: the flat ring's steps in chunks of 64 KiB messages, chunk c's
 * step j in round c + j), which keeps a chunk crossing the network while the
 * last one is reduced: 2 hosts, alternated in one run (2026-11-27, 100
 * iterations), 512 KiB 0.19-0.22 ms against 0.14-0.43 flat, 1 MiB 0.40-0.48
 * against 0.76-0.86, 8 MiB 3.8-4.1 against 5.0-6.1. */
#define HIER_RING_MIN_ALLREDUCE_1PPN (256 * KiB)

enum coll_algo cadre__coll_select_hosts(enum coll_kind k, size_t bytes, int nhosts, int minl,
                                        int maxl, const char **why)
{
    if (nhosts < 2) {
        *why = "one host";
        return COLL_ALGO_NONE;
    }
    if (maxl < 2) {
        if (k == COLL_ALLREDUCE && bytes >= HIER_RING_MIN_ALLREDUCE_1PPN) {
            *why = "one rank per host, bytes>=262144: the ring in chunks";
            return COLL_ALGO_HIER_RING;
        }
        *why = "one rank per host: the flat algorithms cross the network once per host";
        return COLL_ALGO_NONE;
    }
    switch (k) {
    case COLL_BARRIER:
    case COLL_REDUCE: *why = "several ranks on a host"; return COLL_ALGO_HIER_LEADER;
    case COLL_BCAST:
        *why = bytes <= HIER_LEADER_MAX_BCAST ? "bytes<=262144" : "bytes>262144: a chain in host order";
        return bytes <= HIER_LEADER_MAX_BCAST ? COLL_ALGO_HIER_LEADER : COLL_ALGO_HIER_RING;
    case COLL_ALLREDUCE:
        if (bytes <= HIER_LEADER_MAX_ALLREDUCE) {
            *why = "bytes<=65536";
            return COLL_ALGO_HIER_LEADER;
        }
        *why = minl == maxl ? "bytes>65536, the same ranks on every host"
                            : "bytes>65536, hosts of different sizes";
        return minl == maxl ? COLL_ALGO_HIER_SPLIT : COLL_ALGO_HIER_RING;
    case COLL_ALLGATHER:
    case COLL_REDUCE_SCATTER: *why = "a ring in host order"; return COLL_ALGO_HIER_RING;
    default: *why = "no two-level algorithm"; return COLL_ALGO_NONE;
    }
}

const char *cadre__coll_kind_name(enum coll_kind k)
{
    return (unsigned)k < COLL_NKINDS ? tables[k].name : "?";
}

const char *cadre__coll_algo_name(enum coll_algo a)
{
    return (unsigned)a < COLL_NALGOS && algo_names[a] ? algo_names[a] : "?";
}

int cadre__coll_algo_code(enum coll_kind k, enum coll_algo a)
{
    if (a == COLL_ALGO_SLOTS)
        return 7;
    if (a == COLL_ALGO_HIER_LEADER)
        return 5;
    if (a == COLL_ALGO_HIER_SPLIT || a == COLL_ALGO_HIER_RING)
        return 6;
    for (int i = 0; i < NFORCE && tables[k].force[i].algo; i++)
        if (tables[k].force[i].algo == a)
            return i + 1;
    return 0;
}

static int fact(struct coll_in *in, enum coll_fact f)
{
    int *v = f == COLL_FACT_SLOTS ? &in->slots : &in->local;
    if (*v < 0)
        *v = in->ask ? in->ask(in, f) != 0 : 0;
    return *v;
}

static int ranks_hold(enum ranks_cond r, int n)
{
    switch (r) {
    case RK_2: return n == 2;
    case RK_NOT2: return n != 2;
    case RK_GT2: return n > 2;
    case RK_LE2: return n <= 2;
    case RK_GT8: return n > 8;
    default: return 1;
    }
}

static int share_fits(const struct coll_in *in, size_t most)
{
    size_t lo, hi;
    if (in->n < 1 || !in->elsize)
        return 0;
    cadre__share(in->count, in->elsize, in->n, 0, &lo, &hi);
    return (hi - lo) * in->elsize <= most;
}

/* The cheap conditions first; the facts last, asked only when the rest hold. */
static int holds(struct coll_in *in, unsigned need, enum ranks_cond rk, size_t share_max)
{
    if (((need & R_BLOCKING) && in->nb) || ((need & R_HOST) && in->device) ||
        ((need & R_EQUAL) && !in->equal) || ((need & R_VECTOR) && in->equal) ||
        ((need & R_POW2) && (in->n & (in->n - 1))) ||
        ((need & R_FEW) && in->count >= (size_t)in->n) || !ranks_hold(rk, in->n) ||
        (share_max && !share_fits(in, share_max)))
        return 0;
    return (!(need & R_SLOTS) || fact(in, COLL_FACT_SLOTS)) &&
           (!(need & R_LOCAL) || fact(in, COLL_FACT_LOCAL));
}

static int rule_holds(struct coll_in *in, const struct rule *r)
{
    size_t v = r->m == M_BLOCK ? in->block : in->bytes;
    return v >= r->min && v <= r->max && holds(in, r->need, r->ranks, r->share_max);
}

/* The first rule that holds, passing over those that need `skip`. Every
 * table ends with a rule without conditions. */
static int first_rule(struct coll_in *in, const struct table *t, unsigned skip)
{
    int i = 0;
    while (t->rules[i + 1].algo && ((t->rules[i].need & skip) || !rule_holds(in, &t->rules[i])))
        i++;
    return i;
}

size_t cadre__coll_slots_max(enum coll_kind k, int n)
{
    const struct table *t = &tables[k];
    for (int i = 0; i < NRULES && t->rules[i].algo; i++) {
        const struct rule *r = &t->rules[i];
        if (r->algo == COLL_ALGO_SLOTS && (r->need & R_EQUAL) && ranks_hold(r->ranks, n))
            return r->max;
    }
    return 0;
}

void cadre__coll_select(struct coll_in *in, enum coll_algo forced, struct coll_choice *out)
{
    const struct table *t = &tables[in->kind];
    out->forced = COLL_ALGO_NONE;
    const struct forcible *f = NULL;
    for (int i = 0; forced && i < NFORCE && t->force[i].algo; i++)
        if (t->force[i].algo == forced)
            f = &t->force[i];
    if (!f) {
        out->rule = first_rule(in, t, 0);
        out->algo = t->rules[out->rule].algo;
        return;
    }
    out->forced = forced;
    /* A rule that holds whatever CADRE_ALGO says (the barrier's slots). */
    for (int i = 0; i < NRULES && t->rules[i].algo; i++)
        if ((t->rules[i].need & R_ANYWAY) && rule_holds(in, &t->rules[i])) {
            out->rule = i;
            out->algo = t->rules[i].algo;
            return;
        }
    if (holds(in, f->when, f->ranks, f->share_max)) {
        out->rule = -1;
        out->algo = forced;
    } else if (f->otherwise) {
        out->rule = -1;
        out->algo = f->otherwise;
    } else {
        out->rule = first_rule(in, t, R_SLOTS);
        out->algo = t->rules[out->rule].algo;
    }
}

/* "blocking, host, slots, ranks=2, bytes<=4096" */
static size_t need_text(char *buf, size_t len, unsigned need, enum ranks_cond rk, size_t share_max)
{
    static const char *const words[] = {"blocking", "host", "slots", "local", "equal counts",
                                        "power-of-two ranks", "count<ranks", NULL,
                                        "v-variant (a part over the equal rule's bytes: messages)"};
    size_t n = 0;
    buf[0] = '\0';
#define ADD(...)                                                                           \
    do {                                                                                   \
        if (n < len)                                                                       \
            n += (size_t)snprintf(buf + n, len - n, __VA_ARGS__);                          \
    } while (0)
    for (unsigned i = 0; i < sizeof words / sizeof *words; i++)
        if ((need & (1u << i)) && words[i])
            ADD("%s%s", n ? ", " : "", words[i]);
    if (rk != RK_ANY)
        ADD("%s%s", n ? ", " : "", rk_text[rk]);
    if (share_max)
        ADD("%sshare<=%zu", n ? ", " : "", share_max);
    return n < len ? n : len;
}

static void rule_text(char *buf, size_t len, const struct rule *r)
{
    size_t n = need_text(buf, len, r->need & ~(unsigned)R_ANYWAY, r->ranks, r->share_max);
    const char *what = r->m == M_BLOCK ? "block" : "bytes";
    if (r->min)
        ADD("%s%s>=%zu", n ? ", " : "", what, r->min);
    if (r->max != ANY)
        ADD("%s%s<=%zu", n ? ", " : "", what, r->max);
    if (!n)
        ADD("otherwise");
}

void cadre__coll_select_why(const struct coll_in *in, const struct coll_choice *ch, char *buf,
                            size_t len)
{
    const struct table *t = &tables[in->kind];
    size_t n = 0;
    if (ch->forced && ch->rule >= 0 && (t->rules[ch->rule].need & R_ANYWAY))
        ADD("CADRE_ALGO does not apply to it, ");
    else if (ch->forced && ch->algo == ch->forced) {
        ADD("CADRE_ALGO=%s=%s", t->name, cadre__coll_algo_name(ch->forced));
        return;
    } else if (ch->forced) {
        const struct forcible *f = t->force;
        while (f->algo != ch->forced)
            f++;
        char need[128];
        need_text(need, sizeof need, f->when, f->ranks, f->share_max);
        ADD("CADRE_ALGO=%s=%s needs %s%s", t->name, cadre__coll_algo_name(ch->forced), need,
            ch->rule < 0 ? "" : ", ");
    }
    if (ch->rule < 0)
        return;
    ADD("rule %d: ", ch->rule + 1);
    if (n < len)
        rule_text(buf + n, len - n, &t->rules[ch->rule]);
}

void cadre__coll_algo_parse(const char *value, enum coll_algo forced[COLL_NKINDS],
                            void (*bad)(const char *entry))
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", value ? value : "");
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        int ok = 0;
        if (eq && !strncmp(eq + 1, "hier_", 5))
            continue; /* the two-level algorithms: coll_hier.c reads them */
        if (eq) {
            *eq = '\0';
            const char *name = !strcmp(eq + 1, "rd") ? "recursive_doubling" : eq + 1;
            for (int k = 0; k < COLL_NKINDS; k++) {
                if (strcmp(tok, tables[k].name))
                    continue;
                /* auto leaves an earlier entry for the collective as it was. */
                ok = !strcmp(name, "auto");
                for (int i = 0; i < NFORCE && tables[k].force[i].algo; i++)
                    if (!strcmp(name, algo_names[tables[k].force[i].algo]))
                        forced[k] = tables[k].force[i].algo, ok = 1;
            }
            *eq = '=';
        }
        if (!ok && bad)
            bad(tok);
    }
}

void cadre__coll_select_print(FILE *f)
{
    char text[256];
    fprintf(f, "Each collective takes the algorithm of the first rule that holds.\n"
               "  blocking: a blocking call; host: no GPU bound in this process;\n"
               "  slots: the communicator has shared-memory slots (all members on this node);\n"
               "  local: every member is on this node, reached through shared memory;\n"
               "  share: the part of the vector one rank reduces; sizes in bytes.\n"
               "CADRE_ALGO=collective=algorithm forces one of those listed under it\n"
               "(the log names the choice: CADRE_DEBUG=INFO CADRE_DEBUG_SUBSYS=COLL).\n");
    for (int k = 0; k < COLL_NKINDS; k++) {
        const struct table *t = &tables[k];
        fprintf(f, "\n%s: bytes = %s\n", t->name, t->bytes);
        for (int i = 0; i < NRULES && t->rules[i].algo; i++) {
            rule_text(text, sizeof text, &t->rules[i]);
            fprintf(f, "  %2d  %-19s %s%s\n", i + 1, algo_names[t->rules[i].algo], text,
                    t->rules[i].need & R_ANYWAY ? " (also under CADRE_ALGO)" : "");
        }
        for (int i = 0; i < NFORCE && t->force[i].algo; i++) {
            const struct forcible *fo = &t->force[i];
            need_text(text, sizeof text, fo->when, fo->ranks, fo->share_max);
            fprintf(f, "  CADRE_ALGO=%s=%s", t->name, algo_names[fo->algo]);
            if (text[0])
                fprintf(f, ": where %s, else %s", text,
                        fo->otherwise ? algo_names[fo->otherwise] : "the rules without slots");
            fprintf(f, "\n");
        }
    }
    fprintf(f, "\nA communicator over several hosts with more than one rank on some host asks\n"
               "the two-level stage first; where it names no algorithm, the table above holds.\n"
               "  barrier, reduce                       hier_leader\n"
               "  bcast      bytes<=%-8zu             hier_leader, else hier_ring (a chain)\n"
               "  allreduce  bytes<=%-8zu             hier_leader, else hier_split (the same\n"
               "                                        ranks on every host) or hier_ring\n"
               "  allgather, reduce_scatter             hier_ring (a ring in host order)\n"
               "  gather, scatter, alltoall             the table (each byte crosses once)\n"
               "With one rank on every host, only the allreduce of bytes>=%zu takes\n"
               "hier_ring (the ring in chunks); the rest is the table above.\n"
               "CADRE_ALGO=collective=hier_leader|hier_split|hier_ring forces one where the\n"
               "collective has it.\n",
            (size_t)HIER_LEADER_MAX_BCAST, (size_t)HIER_LEADER_MAX_ALLREDUCE,
            (size_t)HIER_RING_MIN_ALLREDUCE_1PPN);
    fprintf(f, "\nDevice buffers (a CUDA build, a GPU bound) on a communicator of 1 to 16 ranks of\n"
               "one node whose GPUs reach each other ask the device stage before anything else:\n"
               "  allreduce, reduce_scatter, allgather    gpu_kernel (one kernel per GPU, run\n"
               "                                          by its leader rank, over every rank's\n"
               "                                          buffers; a copy for one rank)\n"
               "  the others, or CADRE_GPU_ALGO=staged    staged through host memory: the\n"
               "                                          tables above\n");
}
