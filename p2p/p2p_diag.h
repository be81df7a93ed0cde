/* Between the two halves of the diagnosis: p2p_diag.c asks the peers and
 * keeps what they said (the wire), p2p_diag_text.c writes the block. */
#ifndef CADRE_P2P_DIAG_H
#define CADRE_P2P_DIAG_H

#include "p2p_engine.h"

#define CADRE_DIAG_QUERY_WAIT_S 1.0

/* One world rank's answer to a query. */
struct cadre__diag_answer {
    int asked, got;
    int has_seq;       /* it has the queried communicator */
    uint32_t comm_seq; /* its collective count there */
    struct cadre_op_snapshot st;
};

/* What a peer said of itself when it asked this rank (its STATE_Q carries
 * its own state): a peer that gave up and left is remembered waiting. */
struct cadre__diag_note {
    int valid;
    int gave_up; /* it asked at its CADRE_TIMEOUT (not a stuck warning) */
    double at;   /* cadre__now() when it asked */
    struct cadre_op_snapshot st;
};

/* Why this rank asks: what the question tells the peers. */
enum { CADRE_DIAG_ASK_TIMEOUT = 1, CADRE_DIAG_ASK_WARN = 2 };

/* Sends STATE_Q about ctx to the world ranks marked asked in ans[0..nw),
 * with this rank's own state, and waits for their answers (at most
 * CADRE_DIAG_QUERY_WAIT_S). Lock NOT held. */
void cadre__diag_ask(struct cadre__diag_answer *ans, int nw, uint32_t ctx, int why);
/* The note world rank w left here; NULL if none. Lock held. */
const struct cadre__diag_note *cadre__diag_note(int w);
/* Whether world rank w left its final collective count on ctx at finalize
 * (into *seq). Lock held. */
int cadre__diag_final(int w, uint32_t ctx, uint32_t *seq);

#endif
