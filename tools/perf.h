/* cadre-perf: what the main program (cadre_perf.c: options, send/recv modes)
 * and the collective modes (perf_coll.c) share. */
#ifndef CADRE_PERF_H
#define CADRE_PERF_H

#include <stddef.h>
#include <stdio.h>

#include "cadre.h"

struct perf_opts {
    const char *mode;
    size_t minb, maxb; /* -b -e */
    double factor;     /* -f */
    size_t stepb;      /* -i: add instead of multiplying when non-zero */
    int iters, warmup; /* -n -w: -1 = by size */
    int check;         /* -c 0|1 */
    int window;        /* -W, stream mode */
    cadre_datatype_t dt; /* -d */
    cadre_op_t op;     /* -o */
    int root;          /* -r */
    int in_place;      /* -P 0|1 */
};

extern int perf_me, perf_np;

double perf_now(void);
/* Timed iterations for a message of `bytes` when -n is not given. */
int perf_default_iters(size_t bytes);
/* Advances *n to the next size of the -b/-e/-f/-i sweep; 0 after the last one. */
int perf_next_size(const struct perf_opts *o, size_t *n);
const char *perf_type_name(cadre_datatype_t dt);
const char *perf_op_name(cadre_op_t op);
/* The three header lines and one result line, in nccl-tests' columns; rank 0 only.
 * wrong < 0 prints N/A (checking off), as nccl-tests does. */
void perf_print_columns(void);
void perf_print_line(size_t bytes, size_t count, const char *type, const char *redop, int root,
                     double seconds, double algbw, double busbw, long wrong);

/* Collective modes: whether `mode` is one, and running it over the sweep.
 * perf_coll_run returns the wrong elements over all ranks and sizes. */
int perf_coll_known(const char *mode);
int perf_coll_needs_op(const char *mode);
long perf_coll_run(const struct perf_opts *o);

#define PERF_CK(call)                                                                     \
    do {                                                                                  \
        int ck_rc_ = (call);                                                              \
        if (ck_rc_ != CADRE_SUCCESS) {                                                    \
            fprintf(stderr, "cadre-perf: rank %d: %s failed: %s\n", perf_me, #call,       \
                    cadre_last_error());                                                  \
            cadre_abort(CADRE_COMM_WORLD, 1);                                             \
        }                                                                                 \
    } while (0)

#endif
