/* Call signatures: CADRE_CHECK, and the text of a mismatch. */
#include <pthread.h>
#include <stdio.h>

#include "coll.h"
#include "coll_sig.h"

static int enabled = -1;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void read_check(void)
{
    enabled = cadre__config_int(CADRE_CFG_CHECK) != 0;
}

int cadre__sig_enabled(void)
{
    if (__builtin_expect(enabled < 0, 0))
        pthread_once(&once, read_check);
    return enabled;
}

static const char *const kinds[] = {"?", "barrier", "bcast", "reduce", "allreduce", "gather",
                                    "gatherv", "allgather", "allgatherv", "scatter", "scatterv",
                                    "reduce_scatter", "alltoall", "alltoallv", "scan",
                                    "exscan"};
static const char *const dts[] = {"int8", "uint8", "int32", "uint32", "int64",
                                  "uint64", "float16", "bfloat16", "float32", "float64"};
static const char *const ops[] = {"sum", "prod", "max", "min", "avg"};

void cadre__sig_describe(uint64_t sig, char *buf, size_t len)
{
    unsigned kind = sig & 15, dt = (sig >> 4) & 15, op = (sig >> 8) & 7;
    unsigned root = (sig >> 14) & 0x1ffff, big = (sig >> 31) & 1;
    uint32_t count = (uint32_t)(sig >> 32);
    const char *k = kind < sizeof kinds / sizeof *kinds ? kinds[kind] : "?";
    int n = snprintf(buf, len, "%s(", k);
    const char *sep = "";
    if (kind != SIG_BARRIER && kind != SIG_GATHERV && kind != SIG_ALLGATHERV &&
        kind != SIG_SCATTERV && kind != SIG_ALLTOALLV) {
        n += snprintf(buf + n, len > (size_t)n ? len - (size_t)n : 0, "count=%s%u", big ? "(2^32 k)+" : "",
                      count);
        sep = ", ";
    } else if (kind == SIG_ALLGATHERV && count) {
        n += snprintf(buf + n, len > (size_t)n ? len - (size_t)n : 0, "recvcounts #%08x", count);
        sep = ", ";
    }
    if (dt && dt - 1 < sizeof dts / sizeof *dts) {
        n += snprintf(buf + n, len > (size_t)n ? len - (size_t)n : 0, "%s%s", sep, dts[dt - 1]);
        sep = ", ";
    }
    if (op && op - 1 < sizeof ops / sizeof *ops) {
        n += snprintf(buf + n, len > (size_t)n ? len - (size_t)n : 0, "%s%s", sep, ops[op - 1]);
        sep = ", ";
    }
    if (root)
        n += snprintf(buf + n, len > (size_t)n ? len - (size_t)n : 0, "%sroot=%s%u", sep,
                      root == 0x1ffff ? ">=" : "", root == 0x1ffff ? 131070 : root - 1);
    snprintf(buf + n, len > (size_t)n ? len - (size_t)n : 0, ")");
}

int cadre__sig_mismatch(const char *fn, int peer, uint64_t theirs, int me, uint64_t mine)
{
    char a[128], b[128];
    cadre__sig_describe(theirs, a, sizeof a);
    cadre__sig_describe(mine, b, sizeof b);
    if ((theirs ^ mine) == ((theirs ^ mine) & (7ull << 11)) && theirs != mine)
        return cadre__error(CADRE_ERR_MISMATCH,
                            "%s: rank %d and rank %d (this rank) chose different algorithms for "
                            "%s: is CADRE_ALGO the same on every rank?",
                            fn, peer, me, b);
    return cadre__error(CADRE_ERR_MISMATCH, "%s: rank %d called %s, rank %d (this rank) called %s",
                        fn, peer, a, me, b);
}
