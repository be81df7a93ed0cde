/* Bursts of small messages to a rank that sleeps (issue 17): rank 0 pauses
 * before each window, so that rank 1, waiting in cadre_waitall for the
 * window's 64 receives, has gone to sleep on its doorbell (run with
 * CADRE_WAIT=sleep); then rank 0 sends the window in a burst and waits for
 * one acknowledgment. Every byte is checked. What the wake-ups cost is read
 * from the INFO line of cadre_finalize by the wait suite
 * (tests/unit/test_wait.c): a burst wakes the sleeper once, not once per
 * message, and the receives' long waits never wake the idle progress
 * thread (their messages wait whole in the transport).
 * Usage: wake_test [windows] [pause_us] */
#include <unistd.h>

#include "rank_util.h"

#define W CADRE_COMM_WORLD
#define WIN 64

int main(int argc, char **argv)
{
    int windows = argc > 1 ? atoi(argv[1]) : 20;
    int pause_us = argc > 2 ? atoi(argv[2]) : 3000;
    int me;
    if (!ru_init_np(&argc, &argv, "wake_test", 2, &me))
        return 2;
    uint64_t buf[WIN];
    cadre_request_t reqs[WIN];
    char ack = 0;
    for (int w = 0; w < windows; w++) {
        if (me == 0) {
            usleep((useconds_t)pause_us);
            for (int k = 0; k < WIN; k++) {
                buf[k] = ((uint64_t)w << 32) | (uint64_t)k;
                OK(cadre_isend(&buf[k], 1, CADRE_UINT64, 1, 7, W, &reqs[k]));
            }
            OK(cadre_waitall(WIN, reqs, NULL));
            OK(cadre_recv(&ack, 1, CADRE_UINT8, 1, 8, W, CADRE_STATUS_IGNORE));
        } else {
            for (int k = 0; k < WIN; k++) {
                buf[k] = ~0ull;
                OK(cadre_irecv(&buf[k], 1, CADRE_UINT64, 0, 7, W, &reqs[k]));
            }
            OK(cadre_waitall(WIN, reqs, NULL));
            for (int k = 0; k < WIN; k++)
                EXPECT(buf[k] == (((uint64_t)w << 32) | (uint64_t)k),
                       "window %d message %d: %#llx", w, k, (unsigned long long)buf[k]);
            OK(cadre_send(&ack, 1, CADRE_UINT8, 0, 8, W));
        }
    }
    OK(cadre_finalize());
    if (ru_failures)
        fprintf(stderr, "[rank %d] wake_test: %d checks failed\n", me, ru_failures);
    return ru_failures != 0;
}
