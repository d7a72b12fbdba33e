import TetherCore
package import TetherDNS

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A resolved socket address.
package struct SocketAddress: Sendable {
    package let family: Int32
    package let bytes: [UInt8]

    package enum Resolution: Sendable {
        case success([SocketAddress])
        case failure(String)
    }

    /// `host` when it is an IPv4 or IPv6 address literal (no lookup needed), else nil.
    package static func literal(host: String, port: Int) -> SocketAddress? {
        var v4 = sockaddr_in()
        if inet_pton(AF_INET, host, &v4.sin_addr) == 1 {
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = UInt16(port).bigEndian
            return withUnsafeBytes(of: &v4) { SocketAddress(family: AF_INET, bytes: Array($0)) }
        }
        var v6 = sockaddr_in6()
        if inet_pton(AF_INET6, host, &v6.sin6_addr) == 1 {
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = UInt16(port).bigEndian
            return withUnsafeBytes(of: &v6) { SocketAddress(family: AF_INET6, bytes: Array($0)) }
        }
        return nil
    }

    /// Resolves `host` for TCP (blocking).
    package static func resolve(host: String, port: Int) -> Resolution {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Darwin)
            hints.ai_socktype = SOCK_STREAM
        #else
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #endif
        hints.ai_flags = AI_ADDRCONFIG
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            return .failure(String(cString: gai_strerror(status)))
        }
        defer { freeaddrinfo(first) }
        var result: [SocketAddress] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let entry = cursor {
            if let address = entry.pointee.ai_addr {
                let raw = UnsafeRawBufferPointer(start: address, count: Int(entry.pointee.ai_addrlen))
                result.append(SocketAddress(family: entry.pointee.ai_family, bytes: Array(raw)))
            }
            cursor = entry.pointee.ai_next
        }
        return result.isEmpty ? .failure("no addresses") : .success(result)
    }

    /// `addresses` with the families alternating, starting with the first address's family and
    /// otherwise in the resolver's order (RFC 8305 §4), so that a family that does not work costs
    /// one attempt delay, not one per address.
    package static func interleavingFamilies(_ addresses: [SocketAddress]) -> [SocketAddress] {
        guard let first = addresses.first else { return [] }
        let preferred = addresses.filter { $0.family == first.family }
        let others = addresses.filter { $0.family != first.family }
        var result: [SocketAddress] = []
        result.reserveCapacity(addresses.count)
        for index in 0..<max(preferred.count, others.count) {
            if index < preferred.count { result.append(preferred[index]) }
            if index < others.count { result.append(others[index]) }
        }
        return result
    }

    /// A non-blocking, close-on-exec stream socket of this family with TCP_NODELAY (and no
    /// SIGPIPE on Darwin); -1 on failure.
    package func makeSocket() -> Int32 {
        #if canImport(Darwin)
            let fd = socket(family, SOCK_STREAM, 0)
        #else
            let fd = socket(family, Int32(SOCK_STREAM.rawValue), 0)
        #endif
        guard fd >= 0 else { return -1 }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        #if canImport(Darwin)
            _ = setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
        return fd
    }

    func withSockaddr<Result>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> Result) -> Result {
        bytes.withUnsafeBytes { raw in
            body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
        }
    }
}

// The system calls under names of their own, because `TCPConnection` has methods named
// `connect`, `read`, `send` and `close` (at file scope the plain names are the C library's).
func systemConnect(_ fd: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> Int32 {
    connect(fd, address, length)
}
/// Reads from a socket: `recv`, which goes to the socket layer directly (`read` passes through the
/// file layer first: position, permission and notification checks, on every input).
func systemRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int { recv(fd, buffer, count, 0) }
func systemSend(_ fd: Int32, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int {
    #if canImport(Darwin)
        write(fd, buffer, count)  // SO_NOSIGPIPE is set on the socket
    #else
        send(fd, buffer, count, Int32(MSG_NOSIGNAL))
    #endif
}
func systemClose(_ fd: Int32) -> Int32 { close(fd) }

extension SocketAddress {
    /// The address of an A or AAAA record, on `port` (nil for other records).
    package init?(_ record: DNSRecordData, port: Int) {
        switch record {
        case .a(let bytes) where bytes.count == 4: break
        case .aaaa(let bytes) where bytes.count == 16: break
        default: return nil
        }
        guard let address = Self.literal(host: record.description, port: port) else { return nil }
        self = address
    }
}
