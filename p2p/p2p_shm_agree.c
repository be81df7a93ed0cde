/* Agreement on shared memory, pair by pair, at cadre_init.
 *
 * A rank maps its peers' segments after the fence that brings their
 * addresses (shm_wireup), and one may fail there while its peers succeed:
 * a rank under an address-space limit (ulimit -v) maps its own segment and
 * then finds no room for theirs. It then has no shared memory and reaches
 * them by tcp, while they, having mapped its segment, would write into it
 * and close their tcp listeners as unused: its first message met
 * "Connection refused". So after wireup every rank that took part in shared
 * memory publishes a verdict, whether it mapped every peer's segment and,
 * if not, why; a rank whose verdict is negative has no shared memory at
 * all, and its peers drop it (a pair uses shared memory only where both
 * mapped each other's segment). The fence that exchanges the verdicts is
 * also the one that keeps a fast rank from finalizing while a slow one
 * still maps its segment. Every rank of the host names the cause, first.
 *
 * A rank without shared memory is then like one whose own segment failed:
 * every rank sees tcp between it and every other, so the collectives'
 * decisions that ask whether all of a communicator's pairs use shared
 * memory (coll_direct.c, coll_fast.c) come out the same on every member.
 * A negative verdict for one pair only would not: a third rank, with both
 * of its pairs in shared memory, would choose the shared-memory path
 * where the two others do not.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bootstrap/bootstrap.h"
#include "p2p_shm.h"

#define WHY_MAX 384

struct shm_verdict {
    int32_t ok;       /* mapped its own segment and every peer's of its host */
    int32_t reserved;
    char why[WHY_MAX]; /* else why not, naming the rank, the segment and the cause */
};

/* This rank's failure, and the peers dropped for theirs. */
static char own_why[WHY_MAX];
static struct lost {
    int w;
    char why[WHY_MAX];
} *lost;
static int nlost;

int cadre__shm_failed(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(own_why, sizeof own_why, fmt, ap);
    va_end(ap);
    return cadre__error(code, "%s", own_why);
}

const char *cadre__p2p_limit_note(int err)
{
    static char note[128];
    struct rlimit rl;
    const char *name = err == ENOMEM ? "ENOMEM" : err == EAGAIN ? "EAGAIN" : NULL;
    if (!name)
        return "";
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        snprintf(note, sizeof note, " (%s)", name);
    else
        snprintf(note, sizeof note,
                 " (%s; rank %d's address-space limit, RLIMIT_AS or ulimit -v, is %llu KiB)", name,
                 cadre__proc.rank, (unsigned long long)(rl.rlim_cur >> 10));
    return note;
}

static void remember(int w, const char *why)
{
    struct lost *l = realloc(lost, (size_t)(nlost + 1) * sizeof *lost);
    if (!l)
        return; /* only the text of a later error is lost */
    lost = l;
    lost[nlost].w = w;
    snprintf(lost[nlost].why, WHY_MAX, "%s", why);
    nlost++;
}

int cadre__shm_agree(int tried, int ok, int tcp)
{
    int nr = cadre__proc.size, me = cadre__proc.rank;
    if (tried) {
        struct shm_verdict v = {.ok = ok};
        if (!ok) {
            if (!own_why[0]) /* not a failure of ours to map: wireup's text */
                snprintf(own_why, sizeof own_why, "rank %d: %s", me, cadre_last_error());
            snprintf(v.why, sizeof v.why, "%s", own_why);
        }
        CADRE_CHECK(cadre__bootstrap_put("shm.ok", &v, sizeof v));
    }
    CADRE_CHECK(cadre__bootstrap_commit());
    CADRE_CHECK(cadre__bootstrap_fence());
    if (tried && !ok) {
        for (int w = 0; w < nr; w++)
            if (w != me && cadre__eng.peers[w].same_node)
                remember(w, own_why);
        if (tcp) /* else cadre_init fails, naming the cause (cadre__shm_lost) */
            CADRE_WARN(P2P, "%s; this rank reaches the other ranks of its host by tcp instead",
                       own_why);
        return CADRE_SUCCESS;
    }
    for (int w = 0; w < nr; w++) {
        /* A rank that did not take part (CADRE_TRANSPORT) published none:
         * asking for its verdict anyway waited out the bootstrap's lookup
         * timeout (2 s a peer under cadrerun) before the miss came. */
        if (w == me || !cadre__eng.peers[w].same_node || !cadre__eng.peers[w].shm_tried)
            continue;
        void *data;
        size_t len;
        if (cadre__bootstrap_get(w, "shm.ok", &data, &len) != CADRE_SUCCESS)
            continue;
        struct shm_verdict v = {.ok = 1};
        if (len == sizeof v)
            memcpy(&v, data, sizeof v);
        else
            snprintf(v.why, sizeof v.why, "rank %d published a %zu-byte verdict on shared "
                     "memory, not %zu (another cadre version?)", w, len, sizeof v), v.ok = 0;
        free(data);
        if (v.ok)
            continue;
        v.why[WHY_MAX - 1] = '\0';
        if (ok)
            cadre__shm_drop(w);
        remember(w, v.why);
        if (tcp)
            CADRE_WARN(P2P, "%s; rank %d and this rank (%d) use tcp between them instead",
                       v.why, w, me);
    }
    return CADRE_SUCCESS;
}

const char *cadre__shm_lost(int w)
{
    for (int i = 0; i < nlost; i++)
        if (lost[i].w == w)
            return lost[i].why;
    return NULL;
}

void cadre__shm_agree_free(void)
{
    free(lost);
    lost = NULL;
    nlost = 0;
    own_why[0] = '\0';
}
