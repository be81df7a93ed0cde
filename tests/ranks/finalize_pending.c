/* cadre_finalize with work left undone (issue 40): it returns success at
 * once, and says in one WARN block what it dropped. Run with 2 ranks
 * (tests/unit/test_diag.c checks the block on stderr, over shared memory
 * and over TCP).
 *
 * Rank 0 leaves a 16 MiB isend to rank 1 (tag 5, rendezvous: rank 1 never
 * receives it) and an irecv from rank 1 (tag 6, 40 bytes, never sent), and
 * sends rank 1 a 12-byte message on WORLD (tag 7) that rank 1 never
 * receives. Rank 1 leaves an irecv from any rank (tag 9, 100 bytes), and
 * sends rank 0 a 3-byte message on a duplicate of WORLD (tag 11) that rank 0
 * never receives. Then each sends the other a message on WORLD with tag 8
 * and receives the other's: messages between two ranks arrive in the order
 * they were sent, so the unreceived ones are here by then. A message with
 * tag 3 that each rank receives, and an isend with tag 4 that completed but
 * was never waited for (nothing lost), are not named.
 *
 * FINALIZE_MANY=n: rank 0 also leaves n irecvs from rank 1 (tags 100 and
 * up, 8 bytes each) and rank 1 sends it n messages (tags 200 and up, 4
 * bytes each) that it never receives, past the lines the block lists.
 *
 * Each rank checks that cadre_finalize returns CADRE_SUCCESS, and prints
 * "finalize_pending: rank r ok". */
#include "rank_util.h"

#define W CADRE_COMM_WORLD
#define BIG ((size_t)16 << 20)

int main(int argc, char **argv)
{
    if (cadre_init(&argc, &argv) != CADRE_SUCCESS) {
        fprintf(stderr, "finalize_pending: cadre_init: %s\n", cadre_last_error());
        return 1;
    }
    int me, np;
    cadre_comm_rank(W, &me);
    cadre_comm_size(W, &np);
    ru_rank = me;
    if (np != 2) {
        fprintf(stderr, "finalize_pending: run with 2 ranks\n");
        return 1;
    }
    int other = 1 - me;
    cadre_comm_t dup;
    OK(cadre_comm_dup(W, &dup));
    char *big = calloc(BIG, 1), small[100] = {0}, word[4] = "abc";
    int32_t three[3] = {1, 2, 3}, got = -1, one = me;
    cadre_request_t left[2] = {CADRE_REQUEST_NULL, CADRE_REQUEST_NULL}, done = CADRE_REQUEST_NULL;
    /* Received, and waited for: not named. */
    OK(cadre_sendrecv(&one, 1, other, 3, &got, 1, other, 3, CADRE_INT32, W, NULL));
    EXPECT(got == other, "tag 3: got %d", got);
    /* Complete at once (a small message), never waited for: not named. */
    OK(cadre_isend(word, 1, CADRE_UINT8, other, 4, W, &done));
    if (me == 0) {
        OK(cadre_isend(big, BIG, CADRE_UINT8, 1, 5, W, &left[0]));
        OK(cadre_irecv(small, 10, CADRE_INT32, 1, 6, W, &left[1]));
        OK(cadre_send(three, 3, CADRE_INT32, 1, 7, W));
    } else {
        OK(cadre_irecv(small, 100, CADRE_UINT8, CADRE_ANY_SOURCE, 9, W, &left[0]));
        OK(cadre_send(word, 3, CADRE_UINT8, 0, 11, dup));
    }
    const char *many_env = getenv("FINALIZE_MANY");
    int many = many_env ? atoi(many_env) : 0;
    cadre_request_t *more = calloc((size_t)many + 1, sizeof *more);
    int32_t value = 42;
    for (int i = 0; i < many; i++) {
        if (me == 0)
            OK(cadre_irecv(big + 8 * i, 8, CADRE_UINT8, 1, 100 + i, W, &more[i]));
        else
            OK(cadre_send(&value, 1, CADRE_INT32, 0, 200 + i, W));
    }
    /* Tag 4's message, then the order marker. */
    char w4 = 0;
    OK(cadre_recv(&w4, 1, CADRE_UINT8, other, 4, W, NULL));
    EXPECT(w4 == 'a', "tag 4: got %d", w4);
    OK(cadre_sendrecv(&one, 1, other, 8, &got, 1, other, 8, CADRE_INT32, W, NULL));
    EXPECT(got == other, "tag 8: got %d", got);
    int rc = cadre_finalize();
    EXPECT(rc == CADRE_SUCCESS, "finalize: %s", cadre_last_error());
    free(big);
    free(more);
    if (!ru_failures)
        printf("finalize_pending: rank %d ok\n", me);
    return ru_failures ? 1 : 0;
}
