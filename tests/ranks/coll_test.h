/* What coll_test's two files share (coll_test.c, coll_test_v.c): W, this
 * rank, the world's size and the counts (set by main, coll_test.c),
 * rank_util.h's checks counted once for the program (RU_SHARED_STATE:
 * coll_test.c defines the count), coll_data.h, the checking and calling
 * macros, coll_test.c's helpers and the cases of coll_test_v.c that main
 * runs. */
#ifndef CADRE_COLL_TEST_H
#define CADRE_COLL_TEST_H

#define RU_SHARED_STATE
#include "rank_util.h"

#define W CADRE_COMM_WORLD
extern int me, np;
extern size_t big_count;
/* The counts every case runs: {0, 1, 7, 1000, big_count}, those not over
 * big_count. */
extern size_t counts[5];
extern int ncounts;

#include "coll_data.h"

/* n * es bytes (and 16 spare) filled with 0xA5; exits when out of memory. */
void *alloc(size_t n, size_t es);
/* Whether rc is CADRE_SUCCESS; a failed check with what otherwise. */
int ok_call(int rc, const char *what);
/* The data movers' values: who sent it and where it belongs. */
double tagval(int from, size_t i, int to);

/* Every check compares with a reference and reports the first mismatch. */
#define COMPARE(label, got, want, dt, op)                                                  \
    do {                                                                                  \
        int bad_ = 0;                                                                     \
        for (size_t i_ = 0; i_ < n && !bad_; i_++) {                                      \
            double g_ = get((got), (dt), i_), w_ = (want);                                \
            if (!close_enough(g_, w_, (dt), (op))) {                                      \
                EXPECT(0, "%s %s/%s n=%zu: element %zu is %g, expected %g", (label),      \
                       dt_names[di], (op) >= 0 ? op_names[op] : "-", n, i_, g_, w_);      \
                bad_ = 1;                                                                 \
            }                                                                             \
        }                                                                                 \
    } while (0)

/* Runs call blocking, or nonblocking and waits. */
#define RUN(blocking, nonblocking)                                                        \
    do {                                                                                  \
        if (nb) {                                                                         \
            cadre_request_t rq_ = CADRE_REQUEST_NULL;                                    \
            if (ok_call(nonblocking, #nonblocking))                                       \
                ok_call(cadre_wait(&rq_, NULL), "cadre_wait");                            \
        } else {                                                                          \
            ok_call(blocking, #blocking);                                                 \
        }                                                                                 \
    } while (0)

/* coll_test_v.c */
void test_vvariants(int nb);
void test_vslots(int nb);

#endif
