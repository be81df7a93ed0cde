/* Every suite of the CUnit runner: X(register_function). One line per file. */
X(suite_runtime)
X(suite_ranks)
X(suite_man)
X(suite_tcp)
X(suite_launcher)
X(suite_examples)
X(suite_perf)
X(suite_diag)
