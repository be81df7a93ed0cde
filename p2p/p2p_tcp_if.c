/*
 * p2p_tcp_if.c - which interfaces the TCP transport listens on and
 * publishes: CADRE_SOCKET_IFNAME's syntax (NCCL_SOCKET_IFNAME's: a comma
 * list of interface-name prefixes; a leading ^ excludes them, a leading =
 * makes them exact names, ^= both) and the choice among a host's
 * interfaces. Pure functions of their arguments (the unit tests call them
 * with made-up interface lists); p2p_tcp_conn.c reads the real ones.
 */
#include "config.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "p2p/p2p_tcp_if.h"

/* Bridges and virtual ends of containers and VMs: their addresses are
 * often the same on every host (docker0's 172.17.0.1) or reach only this
 * host, so the default skips them while another interface exists. */
static const char *const skipped_default[] = {"docker", "virbr", "veth", "br-", "lxcbr",
                                              "lxdbr", "cni", "flannel", "cali", "kube-ipvs"};

int cadre__p2p_tcp_ifspec_parse(const char *s, struct tcp_ifspec *spec, char *err, size_t errlen)
{
    memset(spec, 0, sizeof *spec);
    if (!s || !s[0])
        return 0; /* the default */
    spec->set = 1;
    const char *p = s;
    if (*p == '^') {
        spec->exclude = 1;
        p++;
    }
    if (*p == '=') {
        spec->exact = 1;
        p++;
    }
    while (*p) {
        size_t l = strcspn(p, ",");
        if (l > 0) {
            if (l >= TCP_IFNAMSIZ) {
                snprintf(err, errlen, "CADRE_SOCKET_IFNAME=\"%s\": \"%.*s\" is longer than an "
                                      "interface name (%d characters at most)",
                         s, (int)l, p, TCP_IFNAMSIZ - 1);
                return -1;
            }
            if (spec->n == TCP_IFSPEC_MAX) {
                snprintf(err, errlen, "CADRE_SOCKET_IFNAME=\"%s\": more than %d names", s,
                         TCP_IFSPEC_MAX);
                return -1;
            }
            memcpy(spec->name[spec->n], p, l);
            spec->name[spec->n][l] = '\0';
            spec->n++;
        }
        p += l;
        if (*p == ',')
            p++;
    }
    if (spec->n == 0) {
        snprintf(err, errlen, "CADRE_SOCKET_IFNAME=\"%s\" names no interface", s);
        return -1;
    }
    return 0;
}

static int listed(const struct tcp_ifspec *spec, const char *ifname)
{
    for (int i = 0; i < spec->n; i++)
        if (spec->exact ? !strcmp(ifname, spec->name[i])
                        : !strncmp(ifname, spec->name[i], strlen(spec->name[i])))
            return 1;
    return 0;
}

int cadre__p2p_tcp_ifspec_match(const struct tcp_ifspec *spec, const char *ifname)
{
    return listed(spec, ifname) != spec->exclude;
}

static int skipped_by_default(const char *ifname)
{
    for (size_t i = 0; i < sizeof skipped_default / sizeof *skipped_default; i++)
        if (!strncmp(ifname, skipped_default[i], strlen(skipped_default[i])))
            return 1;
    return 0;
}

/* Appends all[i] to out unless its address is there already. */
static void add(struct tcp_if *out, int *n, int max, const struct tcp_if *a)
{
    for (int k = 0; k < *n; k++)
        if (out[k].addr == a->addr)
            return;
    if (*n < max)
        out[(*n)++] = *a;
}

int cadre__p2p_tcp_if_select(const struct tcp_if *all, int n, const struct tcp_ifspec *spec,
                             const char *specstr, struct tcp_if *out, int max, char *err,
                             size_t errlen)
{
    int k = 0;
    if (spec->set) {
        /* Loopback only where an include list names it: an exclude list
         * says which of the host's network interfaces not to use. */
        for (int i = 0; i < n; i++)
            if ((!all[i].loopback || !spec->exclude) &&
                cadre__p2p_tcp_ifspec_match(spec, all[i].name))
                add(out, &k, max, &all[i]);
    } else {
        /* Not loopback; not a bridge or container end while another
         * interface exists. */
        for (int pass = 0; pass < 2 && k == 0; pass++)
            for (int i = 0; i < n; i++)
                if (!all[i].loopback && (pass || !skipped_by_default(all[i].name)))
                    add(out, &k, max, &all[i]);
    }
    if (k == 0 && spec->set) {
        int l = snprintf(err, errlen, "CADRE_SOCKET_IFNAME=\"%s\" selects none of this host's "
                                      "interfaces (",
                         specstr);
        for (int i = 0; i < n && l > 0 && (size_t)l < errlen; i++) {
            char ip[INET_ADDRSTRLEN];
            struct in_addr ia = {.s_addr = all[i].addr};
            l += snprintf(err + l, errlen - (size_t)l, "%s%s %s", i ? ", " : "", all[i].name,
                          inet_ntop(AF_INET, &ia, ip, sizeof ip) ? ip : "?");
        }
        if (l > 0 && (size_t)l < errlen)
            snprintf(err + l, errlen - (size_t)l, "%s)", n ? "" : "none with an IPv4 address up");
        return -1;
    }
    /* Loopback last, for peers in this network namespace (p2p_tcp_conn.c
     * gives it to those only), and as the only address of a host that has
     * no other. */
    for (int i = 0; i < n; i++)
        if (all[i].loopback)
            add(out, &k, max, &all[i]);
    return k;
}
