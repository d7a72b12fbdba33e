#ifndef TETHER_RESOLVER_H
#define TETHER_RESOLVER_H

/// One nameserver of the system's resolver configuration: its address as text (IPv4 or IPv6)
/// and its port.
typedef struct {
    char address[64];
    unsigned short port;
} tether_nameserver;

/// The nameservers the platform's resolver is configured with, read through its API
/// (`res_ninit`: glibc; `res_9_ninit` and `res_getservers`: Apple's libresolv, which is how an iOS
/// app must learn them), at most `capacity`, in order. Returns how many were written, or -1 when
/// the resolver could not be initialised.
int tether_system_nameservers(tether_nameserver *servers, int capacity);

#endif
