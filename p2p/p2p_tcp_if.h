/*
 * p2p_tcp_if.h - CADRE_SOCKET_IFNAME and the choice of the interfaces the
 * TCP transport listens on (p2p_tcp_if.c): pure functions, also compiled
 * into the unit tests.
 */
#ifndef CADRE_P2P_TCP_IF_H
#define CADRE_P2P_TCP_IF_H

#include <stddef.h>
#include <stdint.h>

#define TCP_IFNAMSIZ 16 /* IFNAMSIZ, with its terminating NUL */
#define TCP_IFSPEC_MAX 16

/* A parsed CADRE_SOCKET_IFNAME; set 0 = unset or empty (the default). */
struct tcp_ifspec {
    int set, exclude, exact, n;
    char name[TCP_IFSPEC_MAX][TCP_IFNAMSIZ];
};

/* An IPv4 address of an interface that is up; addr in network order. */
struct tcp_if {
    char name[TCP_IFNAMSIZ];
    uint32_t addr;
    int loopback;
};

/* 0, or -1 with err naming the variable and what is wrong. */
int cadre__p2p_tcp_ifspec_parse(const char *s, struct tcp_ifspec *spec, char *err, size_t errlen);
/* Whether a set spec selects the interface (prefixes, or exact names;
 * negated by ^). */
int cadre__p2p_tcp_ifspec_match(const struct tcp_ifspec *spec, const char *ifname);
/* The interfaces of all[n] to listen on and publish, each address once,
 * loopback ones last: with a set spec, those it selects (loopback only when
 * an include list names it); by default every one but loopback and the
 * bridges and container ends (docker*, virbr*, veth*, br-*, ...), those
 * only when nothing else is left. Loopback addresses follow in both cases.
 * Returns how many (at most max; 0 when all[] has none to offer), or -1
 * when a set spec (its text: specstr) selects nothing, with err listing
 * the interfaces there are. */
int cadre__p2p_tcp_if_select(const struct tcp_if *all, int n, const struct tcp_ifspec *spec,
                             const char *specstr, struct tcp_if *out, int max, char *err,
                             size_t errlen);

#endif /* CADRE_P2P_TCP_IF_H */
