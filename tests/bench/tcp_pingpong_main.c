/* The plain-socket ping-pong of bench/ built for the tests (a source of its
 * own so that out-of-tree builds place the object here). */
#include "../../bench/tcp_pingpong.c"
