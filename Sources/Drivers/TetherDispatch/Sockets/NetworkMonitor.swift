public import Dispatch
@_spi(TetherInternal) public import TetherCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

#if os(Linux)
    /// The device's network on Linux, from rtnetlink: it listens for link, address and route
    /// changes (a `NETLINK_ROUTE` socket in the multicast groups for them), and after each burst
    /// of them (coalesced for `settleTime`) reads the state again and reports a `NetworkPath`
    /// when it differs from the last one: available when an interface other than loopback is up
    /// and running, has an address (IPv4, or IPv6 beyond link-local), and carries a route (beyond
    /// IPv6 link-local and multicast ones); its interfaces are those. Feed what it
    /// reports to `XMPPClient.networkChanged` or `HubConnection.networkChanged` (`tether xmpp
    /// --network-watch` does). On Apple platforms Network.framework's `NWPathMonitor` is the
    /// source instead (the README shows the wiring).
    ///
    /// `@unchecked Sendable`: every member is touched only on `queue`.
    public final class NetworkMonitor: @unchecked Sendable {
        /// A netlink failure (the socket could not be made or bound).
        public struct Failure: Error, CustomStringConvertible {
            public let description: String
        }

        private let queue: DispatchQueue
        private let settleTime: Duration
        private let onChange: @Sendable (NetworkPath) -> Void
        private let socket: Int32
        private var source: (any DispatchSourceRead)?
        private var settling = false
        private var last: NetworkPath?
        /// Set by `start()`: from then on the read source owns the socket (its cancel handler
        /// closes it), so `deinit` must not close it again.
        private var started = false

        /// A monitor whose reports go to `onChange` on `queue` (the first one at `start()`).
        public init(
            queue: DispatchQueue = DispatchQueue(label: "tether.network-monitor"),
            settleTime: Duration = .milliseconds(50),
            onChange: @escaping @Sendable (NetworkPath) -> Void
        ) throws(Failure) {
            self.queue = queue
            self.settleTime = settleTime
            self.onChange = onChange
            let fd = Glibc.socket(
                AF_NETLINK,
                Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue),
                0
            )
            guard fd >= 0 else { throw Failure(description: "netlink socket: \(String(cString: strerror(errno)))") }
            // struct sockaddr_nl { sa_family_t nl_family; unsigned short nl_pad; __u32 nl_pid;
            // __u32 nl_groups; }, the groups RTMGRP_LINK, _IPV4_IFADDR, _IPV4_ROUTE, _IPV6_IFADDR
            // and _IPV6_ROUTE.
            let groups: UInt32 = 0x1 | 0x10 | 0x40 | 0x100 | 0x400
            var address = [UInt8](repeating: 0, count: 12)
            address[0] = UInt8(AF_NETLINK & 0xFF)
            address[1] = UInt8(AF_NETLINK >> 8)
            withUnsafeBytes(of: groups.littleEndian) { address.replaceSubrange(8..<12, with: $0) }
            let bound = address.withUnsafeBytes {
                bind(fd, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(12))
            }
            guard bound == 0 else {
                let reason = String(cString: strerror(errno))
                close(fd)
                throw Failure(description: "netlink bind: \(reason)")
            }
            socket = fd
        }

        deinit {
            source?.cancel()
            if !started { close(socket) }
        }

        /// Reports the current path, then every change. Once: a cancelled monitor stays stopped.
        public func start() {
            queue.async { [self] in
                guard !started else { return }
                started = true
                let source = DispatchSource.makeReadSource(fileDescriptor: socket, queue: queue)
                source.setEventHandler { [weak self] in self?.readable() }
                let fd = socket
                source.setCancelHandler { close(fd) }
                self.source = source
                source.resume()
                report()
            }
        }

        /// Stops; no report follows.
        public func cancel() {
            queue.async { [self] in
                source?.cancel()
                source = nil
            }
        }

        /// The path now (read on the calling thread).
        public static func currentPath() -> NetworkPath {
            let routed = interfacesWithRoutes()
            var usable: Set<String> = []
            var list: UnsafeMutablePointer<ifaddrs>?
            guard getifaddrs(&list) == 0 else { return .unavailable }
            defer { freeifaddrs(list) }
            var cursor = list
            while let entry = cursor {
                defer { cursor = entry.pointee.ifa_next }
                let flags = Int32(bitPattern: entry.pointee.ifa_flags)
                guard flags & Int32(IFF_UP) != 0, flags & Int32(IFF_RUNNING) != 0,
                    flags & Int32(IFF_LOOPBACK) == 0, let address = entry.pointee.ifa_addr
                else { continue }
                let family = Int32(address.pointee.sa_family)
                guard family == AF_INET || family == AF_INET6 else { continue }
                if family == AF_INET6 {
                    // A link-local address (fe80::/10) reaches no server.
                    let bytes = UnsafeRawPointer(address).load(fromByteOffset: 8, as: (UInt8, UInt8).self)
                    if bytes.0 == 0xFE && bytes.1 & 0xC0 == 0x80 { continue }
                }
                let name = String(cString: entry.pointee.ifa_name)
                if routed.contains(name) { usable.insert(name) }
            }
            return NetworkPath(isAvailable: !usable.isEmpty, interfaces: usable)
        }

        /// The interfaces that carry an IPv4 or IPv6 route (`/proc/net/route`, `/proc/net/ipv6_route`).
        private static func interfacesWithRoutes() -> Set<String> {
            var names: Set<String> = []
            for (path, column) in [("/proc/net/route", 0), ("/proc/net/ipv6_route", 9)] {
                guard let file = fopen(path, "r") else { continue }
                defer { fclose(file) }
                var line: UnsafeMutablePointer<CChar>?
                var capacity = 0
                defer { free(line) }
                while getline(&line, &capacity, file) > 0, let line {
                    let fields = String(cString: line).split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" })
                    guard fields.count > column else { continue }
                    // IPv6 link-local and multicast routes exist on every interface that is up.
                    if column == 9, fields[0].hasPrefix("fe80") || fields[0].hasPrefix("ff") { continue }
                    let name = String(fields[column])
                    if name != "Iface", name != "lo" { names.insert(name) }
                }
            }
            return names
        }

        private func readable() {
            // The messages only say that something changed; the state is read again.
            var buffer = [UInt8](repeating: 0, count: 8192)
            while buffer.withUnsafeMutableBytes({ recv(socket, $0.baseAddress, $0.count, 0) }) > 0 {}
            guard !settling else { return }
            settling = true
            queue.asyncAfter(deadline: .now() + .nanoseconds(Int(settleTime.totalNanoseconds))) { [weak self] in
                guard let self else { return }
                settling = false
                report()
            }
        }

        private func report() {
            guard source != nil else { return }
            let path = Self.currentPath()
            guard path != last else { return }
            last = path
            onChange(path)
        }
    }
#endif
