/*
 * coll_select.h - the named algorithms and the choice between them.
 *
 * Every collective has one ordered table of rules (coll_select.c); the
 * first rule whose conditions hold picks the algorithm, unless CADRE_ALGO
 * forces one. The tables are the only place that holds the thresholds.
 * coll_select.c is pure (no other cadre layer), so that cadre-info and the
 * unit tests link it on its own.
 */
#ifndef CADRE_COLL_SELECT_H
#define CADRE_COLL_SELECT_H

#include <stddef.h>
#include <stdio.h>

/* The collectives as CADRE_ALGO names them (the v-variants share). */
enum coll_kind {
    COLL_BARRIER, COLL_BCAST, COLL_REDUCE, COLL_ALLREDUCE, COLL_GATHER, COLL_ALLGATHER,
    COLL_SCATTER, COLL_REDUCE_SCATTER, COLL_ALLTOALL, COLL_SCAN, COLL_EXSCAN, COLL_NKINDS
};

/* Every algorithm, by the name CADRE_ALGO and the log use. */
enum coll_algo {
    COLL_ALGO_NONE,     /* no choice (CADRE_ALGO unset for the collective) */
    COLL_ALGO_SLOTS,    /* the shared-memory slots (coll_fast.c); never forced */
    COLL_ALGO_DISSEMINATION,
    COLL_ALGO_BINOMIAL,
    COLL_ALGO_PIPELINE,
    COLL_ALGO_DIRECT,   /* coll_direct.c */
    COLL_ALGO_RD,       /* recursive doubling */
    COLL_ALGO_RING,
    COLL_ALGO_SPLIT,    /* the split allreduce (coll_fast_reduce.c) */
    COLL_ALGO_LINEAR,
    COLL_ALGO_PAIRWISE,
    COLL_ALGO_HIER_LEADER, /* two-level (coll_hier*.c): within the host to one rank, across, within */
    COLL_ALGO_HIER_SPLIT,  /* two-level allreduce: each rank of a host carries 1/L across hosts */
    COLL_ALGO_HIER_RING,   /* one ring (or chain) over the members in host order */
    COLL_ALGO_GPU_KERNEL,  /* device buffers: the reduce_scatter or allgather kernel */
    COLL_NALGOS
};

/* What a rule may look at. `bytes` is the collective's size as its table
 * says (coll_select.c: the whole buffer, input or result); slots and local
 * are asked through ask() the first time a rule needs them (-1 until then)
 * so that a call that never reaches such a rule does not pay for them. */
enum coll_fact { COLL_FACT_SLOTS, COLL_FACT_LOCAL };
struct coll_in {
    enum coll_kind kind;
    int n;           /* ranks of the communicator */
    int hosts;       /* hosts it spans */
    int nb;          /* nonblocking call */
    int device;      /* memory kind: a GPU is bound, buffers may be device memory */
    int equal;       /* equal counts (not the v-variant) */
    size_t bytes;    /* the size the rules compare */
    size_t block;    /* allgather(v): the largest block */
    size_t count, elsize; /* allreduce: elements and their size */
    int slots;       /* this communicator has shared-memory slots */
    int local;       /* every member is on this node, reached through shm */
    int (*ask)(const struct coll_in *in, enum coll_fact f);
    void *comm;      /* for ask() */
};

struct coll_choice {
    enum coll_algo algo;
    int rule;        /* index in the collective's table; -1: forced by CADRE_ALGO */
    enum coll_algo forced; /* what CADRE_ALGO asked (COLL_ALGO_NONE: nothing) */
};

/* The choice for `in`, with `forced` from CADRE_ALGO (COLL_ALGO_NONE: none). */
void cadre__coll_select(struct coll_in *in, enum coll_algo forced, struct coll_choice *out);
/* "rule 3: blocking, slots, ranks!=2, bytes<=1048576" or "CADRE_ALGO" (...). */
void cadre__coll_select_why(const struct coll_in *in, const struct coll_choice *ch, char *buf,
                            size_t len);
/* The most bytes the equal-count call of k (gather, scatter, alltoall: its
 * `bytes`) keeps in the shared-memory slots on n ranks, 0 where none: what a
 * rank of the v-variant keeps in the slots (coll_fast_v.c). */
size_t cadre__coll_slots_max(enum coll_kind k, int n);
/* The number of algorithm a in the call signature (coll_sig.h): its place
 * in the collective's list from 1, and 7 for the slots. */
int cadre__coll_algo_code(enum coll_kind k, enum coll_algo a);
/* The number of scatter's direct algorithm in a blocking call through the
 * slots (coll_direct_scatter.c), which moves its data otherwise than the
 * same algorithm's schedule (2): past scatter's list of algorithms
 * (coll_select.c's table, whose entries must stay fewer). */
#define SCATTER_DIRECT_SLOTS_CODE 3
const char *cadre__coll_kind_name(enum coll_kind k);
const char *cadre__coll_algo_name(enum coll_algo a);
/* Parses a CADRE_ALGO value into forced[COLL_NKINDS]; calls bad() for each
 * entry it ignores. */
void cadre__coll_algo_parse(const char *value, enum coll_algo forced[COLL_NKINDS],
                            void (*bad)(const char *entry));
/* The two-level stage, asked before the table for a communicator whose
 * members span nhosts > 1 hosts with minl..maxl ranks on each: a
 * COLL_ALGO_HIER_* algorithm, or COLL_ALGO_NONE for the table's flat choice;
 * *why says which rule. */
enum coll_algo cadre__coll_select_hosts(enum coll_kind k, size_t bytes, int nhosts, int minl,
                                        int maxl, const char **why);
/* The device stage (device/device_direct_call.c), asked first for a call whose
 * buffers are device memory (staged: CADRE_GPU_ALGO=staged). Returns
 * COLL_ALGO_GPU_KERNEL (allreduce, reduce_scatter, allgather: one kernel per
 * GPU over every rank's buffers) or COLL_ALGO_NONE: staged through host
 * memory, where the table chooses. The caller runs the kernel only where it
 * can run (one node, 1 to 16 ranks, GPUs that reach each other). */
enum coll_algo cadre__coll_select_device(enum coll_kind k, size_t bytes, int staged,
                                         const char **why);
/* Prints every table (cadre-info --algorithms). */
void cadre__coll_select_print(FILE *f);

#endif
