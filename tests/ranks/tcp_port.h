/* The TCP port of this process's listening sockets, for the test programs
 * that dial the ranks' transport themselves (tcp_intruder, tcp_flood). */
#ifndef CADRE_TCP_PORT_H
#define CADRE_TCP_PORT_H

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "rank_util.h"

/* The port of this process's AF_INET listening sockets (the transport has
 * one on each address it publishes, all on one port); 0 when none. */
static int my_port(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 0;
    int port = 0, found = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] < '0' || e->d_name[0] > '9' || fd == dirfd(d))
            continue;
        int acc = 0;
        socklen_t l = sizeof acc;
        struct sockaddr_in sa;
        socklen_t sl = sizeof sa;
        if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &l) != 0 || !acc)
            continue;
        if (getsockname(fd, (struct sockaddr *)&sa, &sl) != 0 || sa.sin_family != AF_INET)
            continue;
        EXPECT(port == 0 || port == ntohs(sa.sin_port), "listeners on ports %d and %d", port,
               ntohs(sa.sin_port));
        port = ntohs(sa.sin_port);
        found++;
    }
    closedir(d);
    EXPECT(found >= 1, "no AF_INET listening socket");
    return port;
}

#endif
