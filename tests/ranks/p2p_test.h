/* What p2p_test's two files share: W, this rank and the world's size (set by
 * main, p2p_test.c), rank_util.h's checks counted once for the program
 * (RU_SHARED_STATE: p2p_test.c defines the count), and the cases of
 * p2p_test_edges.c that main runs. */
#ifndef CADRE_P2P_TEST_H
#define CADRE_P2P_TEST_H

#define RU_SHARED_STATE
#include "rank_util.h"

#define W CADRE_COMM_WORLD
extern int me, np;

/* p2p_test_edges.c */
void test_blocking_order(void);
void test_threads(void);
void test_background(void);
void test_wait_timeout(void);
void test_no_progress_timeout(void);
void test_bad_input(void);
void test_small_lanes(void);

#endif
