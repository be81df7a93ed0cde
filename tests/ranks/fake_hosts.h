/* Fake hosts on one machine for the multi-rank tests: FAKE_HOSTS sets this
 * rank's CADRE_HOSTID before cadre_init, from CADRE_RANK and
 * CADRE_WORLD_SIZE (which cadrerun gives every rank; RANK and WORLD_SIZE
 * in a start without a launcher):
 *   block:H    H hosts, consecutive ranks together (5 ranks on 2: 0-2, 3-4)
 *   cyclic:H   H hosts, rank r on host r % H
 *   list:a,b,  rank r on the host named by the r-th entry
 * Ranks on different fake hosts then reach each other over TCP, and the
 * collectives see several hosts. fake_host_of gives the host index the
 * library should derive (hosts numbered by their lowest rank). */
#ifndef CADRE_FAKE_HOSTS_H
#define CADRE_FAKE_HOSTS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The fake host name of rank r of n (in out), 0 when FAKE_HOSTS is unset. */
static inline int fake_host_name(int r, int n, char *out, size_t len)
{
    const char *spec = getenv("FAKE_HOSTS");
    if (!spec || !*spec || n <= 0)
        return 0;
    int h = 0;
    if (!strncmp(spec, "block:", 6)) {
        int nh = atoi(spec + 6);
        if (nh < 1)
            nh = 1;
        h = (int)((long)r * nh / n);
    }
    else if (!strncmp(spec, "cyclic:", 7)) {
        int nh = atoi(spec + 7);
        h = r % (nh < 1 ? 1 : nh);
    }
    else if (!strncmp(spec, "list:", 5)) {
        const char *p = spec + 5;
        for (int i = 0; i < r && p; i++) {
            p = strchr(p, ',');
            if (p)
                p++;
        }
        if (!p)
            return 0;
        snprintf(out, len, "%.*s", (int)strcspn(p, ","), p);
        return 1;
    }
    else
        return 0;
    snprintf(out, len, "h%d", h);
    return 1;
}

static inline int fake_hosts_setenv(void)
{
    const char *r = getenv("CADRE_RANK"), *n = getenv("CADRE_WORLD_SIZE");
    if (!r || !n) { /* a start without a launcher (torchrun's names) */
        r = getenv("RANK");
        n = getenv("WORLD_SIZE");
    }
    char name[64];
    if (!r || !n || !fake_host_name(atoi(r), atoi(n), name, sizeof name))
        return 0;
    setenv("CADRE_HOSTID", name, 1);
    return 1;
}

/* The dense index of rank r's host among n ranks, -1 without FAKE_HOSTS. */
static inline int fake_host_of(int r, int n)
{
    char mine[64], other[64];
    if (!fake_host_name(r, n, mine, sizeof mine))
        return -1;
    int h = 0;
    for (int v = 0; v < r; v++) {
        fake_host_name(v, n, other, sizeof other);
        int seen = 0;
        for (int u = 0; u < v && !seen; u++) {
            char o2[64];
            fake_host_name(u, n, o2, sizeof o2);
            seen = !strcmp(o2, other);
        }
        if (!strcmp(other, mine))
            return h;
        h += !seen;
    }
    return h;
}

#endif
