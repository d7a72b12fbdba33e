#include "tether_resolver.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <resolv.h>
#include <string.h>
#include <sys/socket.h>

int tether_system_nameservers(tether_nameserver *servers, int capacity) {
    struct __res_state state;
    memset(&state, 0, sizeof state);
    if (res_ninit(&state) != 0) return -1;
    int count = 0;
#if defined(__APPLE__)
    union res_sockaddr_union found[MAXNS];
    int total = res_getservers(&state, found, MAXNS);
    for (int i = 0; i < total && count < capacity; i++) {
        tether_nameserver *server = &servers[count];
        if (found[i].sin.sin_family == AF_INET &&
            inet_ntop(AF_INET, &found[i].sin.sin_addr, server->address, sizeof server->address)) {
            server->port = ntohs(found[i].sin.sin_port);
            count++;
        } else if (found[i].sin6.sin6_family == AF_INET6 &&
                   inet_ntop(AF_INET6, &found[i].sin6.sin6_addr, server->address, sizeof server->address)) {
            server->port = ntohs(found[i].sin6.sin6_port);
            count++;
        }
    }
#else
    for (int i = 0; i < state.nscount && i < MAXNS && count < capacity; i++) {
        tether_nameserver *server = &servers[count];
        // glibc keeps IPv4 servers in nsaddr_list and IPv6 ones in _u._ext.nsaddrs.
        if (state.nsaddr_list[i].sin_family == AF_INET &&
            inet_ntop(AF_INET, &state.nsaddr_list[i].sin_addr, server->address, sizeof server->address)) {
            server->port = ntohs(state.nsaddr_list[i].sin_port);
            count++;
        } else if (state._u._ext.nsaddrs[i] != NULL && state._u._ext.nsaddrs[i]->sin6_family == AF_INET6 &&
                   inet_ntop(AF_INET6, &state._u._ext.nsaddrs[i]->sin6_addr, server->address,
                             sizeof server->address)) {
            server->port = ntohs(state._u._ext.nsaddrs[i]->sin6_port);
            count++;
        }
    }
#endif
    res_nclose(&state);
    return count;
}
