/* bench/tcp_alternate.c built for the tests (a source of its own so that
 * out-of-tree builds place the object here). */
#include "../../bench/tcp_alternate.c"
