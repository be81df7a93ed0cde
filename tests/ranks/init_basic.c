/* Checks what cadre_init gives every rank, against the launcher's environment
 * when there is one. Exits non-zero with a reason on any mismatch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cadre.h"

static int failures;
#define EXPECT(cond, ...)                                   \
    do {                                                    \
        if (!(cond)) {                                      \
            fprintf(stderr, "init_basic: " __VA_ARGS__);    \
            fprintf(stderr, " [%s:%d]\n", __FILE__, __LINE__); \
            failures++;                                     \
        }                                                   \
    } while (0)

int main(int argc, char **argv)
{
    int flag = -1, x = -7;
    EXPECT(cadre_initialized(&flag) == CADRE_SUCCESS && flag == 0, "initialized before init");
    EXPECT(cadre_comm_rank(CADRE_COMM_WORLD, &x) == CADRE_ERR_STATE && x == -7, "rank before init");

    int rc = cadre_init(&argc, &argv);
    if (rc != CADRE_SUCCESS) {
        fprintf(stderr, "init_basic: cadre_init: %s: %s\n", cadre_error_string(rc), cadre_last_error());
        return 1;
    }
    EXPECT(cadre_init(&argc, &argv) == CADRE_ERR_STATE, "second cadre_init must fail");
    EXPECT(strstr(cadre_last_error(), "already") != NULL, "message: %s", cadre_last_error());
    EXPECT(cadre_initialized(&flag) == CADRE_SUCCESS && flag == 1, "initialized after init");

    int rank, size, lrank, lsize, dev;
    EXPECT(cadre_comm_rank(CADRE_COMM_WORLD, &rank) == CADRE_SUCCESS, "rank");
    EXPECT(cadre_comm_size(CADRE_COMM_WORLD, &size) == CADRE_SUCCESS, "size");
    EXPECT(cadre_local_rank(&lrank) == CADRE_SUCCESS, "local rank");
    EXPECT(cadre_local_size(&lsize) == CADRE_SUCCESS, "local size");
    EXPECT(cadre_device(&dev) == CADRE_SUCCESS, "device");
    EXPECT(size >= 1 && rank >= 0 && rank < size, "rank %d size %d", rank, size);
    EXPECT(lsize >= 1 && lrank >= 0 && lrank < lsize && lsize <= size, "local %d/%d", lrank, lsize);
    EXPECT(dev >= -1, "device %d", dev);

    /* Under cadrerun the environment must agree with PMIx ... */
    const char *er = getenv("CADRE_RANK"), *es = getenv("CADRE_WORLD_SIZE"),
               *el = getenv("CADRE_LOCAL_RANK");
    /* ... and so must a start without PMIx with torchrun's names. */
    if (!getenv("PMIX_NAMESPACE")) {
        er = er ? er : getenv("RANK");
        es = es ? es : getenv("WORLD_SIZE");
        el = el ? el : getenv("LOCAL_RANK");
    }
    const char *els = getenv("LOCAL_WORLD_SIZE");
    if (els && !getenv("PMIX_NAMESPACE"))
        EXPECT(atoi(els) == lsize, "LOCAL_WORLD_SIZE=%s but local size %d", els, lsize);
    if (er)
        EXPECT(atoi(er) == rank, "CADRE_RANK=%s but rank %d", er, rank);
    if (es)
        EXPECT(atoi(es) == size, "CADRE_WORLD_SIZE=%s but size %d", es, size);
    if (el)
        EXPECT(atoi(el) == lrank, "CADRE_LOCAL_RANK=%s but local rank %d", el, lrank);

    /* Bad handles and NULL outputs give status codes, not crashes. */
    EXPECT(cadre_comm_rank(CADRE_COMM_NULL, &x) == CADRE_ERR_STATE, "rank of COMM_NULL");
    EXPECT(strstr(cadre_last_error(), "CADRE_COMM_NULL") != NULL, "msg %s", cadre_last_error());
    EXPECT(cadre_comm_size(CADRE_COMM_WORLD, NULL) == CADRE_ERR_ARG, "size NULL");
    EXPECT(cadre_local_rank(NULL) == CADRE_ERR_ARG, "local_rank NULL");

    EXPECT(cadre_finalize() == CADRE_SUCCESS, "finalize: %s", cadre_last_error());
    EXPECT(cadre_finalize() == CADRE_ERR_STATE, "second finalize");
    EXPECT(strstr(cadre_last_error(), "after cadre_finalize") != NULL, "msg %s", cadre_last_error());
    EXPECT(cadre_comm_rank(CADRE_COMM_WORLD, &x) == CADRE_ERR_STATE, "rank after finalize");
    EXPECT(cadre_init(NULL, NULL) == CADRE_ERR_STATE, "init after finalize");
    EXPECT(cadre_initialized(&flag) == CADRE_SUCCESS && flag == 0, "initialized after finalize");
    if (failures)
        fprintf(stderr, "init_basic: rank %d: %d failure(s)\n", rank, failures);
    return failures ? 1 : 0;
}
