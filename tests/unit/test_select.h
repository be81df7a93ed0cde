/* The select suite's cases in test_select_jobs.c, which run programs
 * (tests/ranks/select_log, tools/cadre-info); test_select.c registers the
 * suite. */
#ifndef CADRE_TEST_SELECT_H
#define CADRE_TEST_SELECT_H

void test_log_lines(void);
void test_mismatched_choice(void);
void test_info_algorithms(void);

#endif
