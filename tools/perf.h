/* cadre-perf: what the main program (cadre_perf.c: options), the
 * point-to-point modes (perf_p2p.c), the collective modes (perf_coll.c and
 * perf_coll.h's files) and the output (perf_print.c) share. */
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
    double mintime;    /* -T: time each size for at least this long (0: -n iterations) */
    int check;         /* -c 0|1 */
    int each;          /* -t barrier (1) or loop (0) */
    int window;        /* -W, stream mode */
    int one_rbuf;      /* -R one: stream receives the window into one buffer */
    cadre_datatype_t dt; /* -d */
    cadre_op_t op;     /* -o */
    int root;          /* -r */
};

/* One measurement of one size: out-of-place or in-place. */
struct perf_result {
    double seconds, algbw, busbw; /* time of one call; GB/s */
    long wrong;                   /* wrong elements over the ranks; < 0: not checked (N/A) */
};

extern int perf_me, perf_np;

double perf_now(void);
/* Timed iterations for a message of `bytes` when -n is not given. */
int perf_default_iters(size_t bytes);
/* Advances *n to the next size of the -b/-e/-f/-i sweep; 0 after the last one. */
int perf_next_size(const struct perf_opts *o, size_t *n);
const char *perf_type_name(cadre_datatype_t dt);
const char *perf_op_name(cadre_op_t op);
/* nccl-tests' layout (perf_print.c). The header is collective (it gathers
 * each rank's pid, host and device); rank 0 prints the header, the lines
 * (res[0] out-of-place, res[1] in-place) and the footer, which closes with
 * the wrong elements and the mean bus bandwidth over the lines. */
void perf_print_header(const struct perf_opts *o, const char *what);
void perf_print_line(size_t bytes, size_t count, const char *type, const char *redop, int root,
                     const struct perf_result res[2]);
void perf_print_footer(void);

/* make check's proof that the checks can fail: with CADRE_PERF_CORRUPT=1 in
 * the environment, the first of n bytes to be checked is changed; b. */
unsigned char *perf_corrupt(unsigned char *b, size_t n);

/* sendrecv and stream over the sweep: the wrong bytes over all ranks and
 * sizes (perf_p2p.c). */
long perf_p2p_run(const struct perf_opts *o);

/* Collective modes: whether `mode` is one, and running it over the sweep.
 * perf_coll_run returns the wrong elements over all ranks and sizes. */
int perf_coll_known(const char *mode);
int perf_coll_needs_op(const char *mode);
long perf_coll_run(const struct perf_opts *o);

/* -G: the calls' buffers in device memory (perf_dev.c). perf_dev is 1 with
 * -G. perf_dev_built: whether this build has CUDA (-G is a usage error
 * otherwise). perf_dev_setup, after cadre_init: binds the device cadre_init
 * chose and gives WORLD a stream of cadre-perf's own; NULL, or why -G
 * cannot run on this rank. perf_dev_alloc: n bytes of device memory, zeroed
 * (NULL on failure). perf_dev_put enqueues a copy up; perf_dev_get copies
 * down and waits; perf_dev_sync waits for the stream (the calls on device
 * buffers only enqueue); each is a no-op without -G. */
extern int perf_dev;
int perf_dev_built(void);
const char *perf_dev_setup(void);
void *perf_dev_alloc(size_t n);
void perf_dev_free(void *p);
void perf_dev_put(void *dev, const void *host, size_t n);
void perf_dev_get(void *host, const void *dev, size_t n);
void perf_dev_sync(void);
void perf_dev_finish(void);

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
