import CSystemResolver
import Dispatch
public import TetherCore
public import TetherDNS

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The driver's DNS: `DNSResolverMachine` over real sockets on a queue of its own: a non-blocking
/// UDP socket per query (its datagrams read by a Dispatch source, each reported with the address
/// it came from, which the machine checks), a TCP connection (the driver's `TCPConnection`) when an answer is
/// truncated, and one timer at the machine's earliest deadline (`Specs/dns.md`).
///
/// `@unchecked Sendable`: every member is read and written only on `queue`.
public final class DNSLookup: @unchecked Sendable {
    /// The nameservers the platform's resolver is configured with, in order, read through its
    /// API (`res_ninit` on Linux, `res_9_ninit` on Apple platforms, where an app cannot read
    /// `/etc/resolv.conf`); empty when there are none or the resolver cannot say.
    public static func systemNameServers() -> [Endpoint] {
        var found = [tether_nameserver](repeating: tether_nameserver(), count: 8)
        let count = found.withUnsafeMutableBufferPointer {
            tether_system_nameservers($0.baseAddress, Int32($0.count))
        }
        guard count > 0 else { return [] }
        return found.prefix(Int(count)).map { server in
            let address = withUnsafeBytes(of: server.address) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            return Endpoint(host: address, port: server.port == 0 ? 53 : Int(server.port))
        }
    }

    /// The nameservers of a `resolv.conf` file (its `nameserver` lines, port 53), in order: for
    /// tools that are handed such a file (the system's own come from `systemNameServers()`).
    public static func nameServers(resolvConf path: String = "/etc/resolv.conf") -> [Endpoint] {
        guard let file = fopen(path, "r") else { return [] }
        defer { fclose(file) }
        var servers: [Endpoint] = []
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        while getline(&line, &capacity, file) > 0, let line {
            let words = String(cString: line).split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" })
            if words.count >= 2, words[0] == "nameserver" {
                // A scope on a link-local IPv6 address (fe80::1%eth0) is not usable here: dropped.
                let address = String(words[1].split(separator: "%").first ?? words[1])
                servers.append(Endpoint(host: address, port: 53))
            }
        }
        return servers
    }

    private let queue: DispatchQueue
    private var machine: DNSResolverMachine
    private let timer: DeadlineTimer
    private var completions: [Int: (Result<DNSResponse, DNSResolverMachine.Failure>) -> Void] = [:]
    private var sockets: [Int: (fd: Int32, source: any DispatchSourceRead)] = [:]
    private var connections: [Int: any Transport] = [:]

    /// A resolver asking `nameServers` (nil: the system resolver's, `systemNameServers()`); only IP addresses are
    /// kept (a nameserver named by a name would need DNS to be found).
    public init(nameServers: [Endpoint]? = nil, timeout: Duration = .seconds(2), attempts: Int = 2) {
        queue = DispatchQueue(label: "tether.dns")
        let servers = (nameServers ?? Self.systemNameServers()).compactMap(Self.canonical)
        machine = DNSResolverMachine(
            configuration: .init(nameServers: servers, timeout: timeout, attempts: attempts),
            randomSeed: UInt64.random(in: 0...UInt64.max)
        )
        timer = DeadlineTimer(queue: queue)
        timer.onFire = { [unowned self] in
            machine.handleTimeout(now: DeadlineTimer.now())
            drain()
        }
    }

    deinit {
        timer.cancel()
        for entry in sockets.values { entry.source.cancel() }
        for connection in connections.values { connection.close() }
    }

    /// Looks `question` up.
    public func resolve(_ question: DNSQuestion) async -> Result<DNSResponse, DNSResolverMachine.Failure> {
        await withCheckedContinuation { continuation in
            resolve(question) { continuation.resume(returning: $0) }
        }
    }

    /// Looks `question` up; `completion` runs on the resolver's queue.
    public func resolve(
        _ question: DNSQuestion,
        completion: @escaping @Sendable (Result<DNSResponse, DNSResolverMachine.Failure>) -> Void
    ) {
        queue.async { [self] in
            let handle = machine.resolve(question, now: DeadlineTimer.now())
            completions[handle] = completion
            drain()
        }
    }

    private func drain() {
        while let action = machine.pollAction() {
            switch action {
            case .sendUDP(let bytes, let server, let query):
                sendUDP(bytes, to: server, query: query)
            case .openTCP(let server, let query):
                let connection = TCPTransport(
                    endpoint: server,
                    tlsServerName: nil,
                    options: ConnectionOptions(tlsSessionFactory: nil),
                    queue: queue
                ) { [weak self] event in
                    self?.tcpEvent(event, query: query)
                }
                connections[query] = connection
                connection.start()
            case .sendTCP(let bytes, let query):
                connections[query]?.send(bytes)
            case .closeTCP(let query):
                connections.removeValue(forKey: query)?.close()
            case .answered(let query, let result):
                if let entry = sockets.removeValue(forKey: query) { entry.source.cancel() }
                connections.removeValue(forKey: query)?.close()
                completions.removeValue(forKey: query)?(result)
            }
        }
        timer.arm(at: machine.pollTimeout())
    }

    private func tcpEvent(_ event: TransportEvent, query: Int) {
        let now = DeadlineTimer.now()
        switch event {
        case .connected: machine.tcpConnected(query: query, now: now)
        case .received(let bytes): machine.tcpReceived(bytes, query: query, now: now)
        case .closed(let error):
            connections[query] = nil
            machine.tcpClosed(query: query, error: error?.message, now: now)
        case .tlsEstablished, .drained: break
        }
        drain()
    }

    /// Sends a datagram on the query's socket (made on first use, for the server's family).
    private func sendUDP(_ bytes: [UInt8], to server: Endpoint, query: Int) {
        // Nameservers are addresses (`init` keeps only those).
        guard let address = SocketAddress.literal(host: server.host, port: server.port) else { return }
        if sockets[query] == nil {
            #if canImport(Darwin)
                let fd = socket(address.family, SOCK_DGRAM, 0)
            #else
                let fd = socket(address.family, Int32(SOCK_DGRAM.rawValue), 0)
            #endif
            guard fd >= 0 else { return }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
            source.setEventHandler { [weak self] in self?.readDatagrams(fd, query: query) }
            source.setCancelHandler { close(fd) }
            source.resume()
            sockets[query] = (fd, source)
        }
        guard let fd = sockets[query]?.fd else { return }
        _ = address.withSockaddr { pointer, length in
            bytes.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, 0, pointer, length) }
        }
    }

    private func readDatagrams(_ fd: Int32, query: Int) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let count = buffer.withUnsafeMutableBytes { raw in
                withUnsafeMutablePointer(to: &storage) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        recvfrom(fd, raw.baseAddress, raw.count, 0, $0, &length)
                    }
                }
            }
            guard count >= 0 else { break }
            machine.udpReceived(
                Array(buffer[..<count]),
                from: Self.endpoint(storage),
                query: query,
                now: DeadlineTimer.now()
            )
        }
        drain()
    }

    /// `server` with its address written as the answers' sources are (`inet_ntop`'s form:
    /// `0:0:0:0:0:0:0:1` is `::1`), so that the machine's check of where an answer came from
    /// matches; nil when it is not an IP address.
    package static func canonical(_ server: Endpoint) -> Endpoint? {
        guard let address = SocketAddress.literal(host: server.host, port: server.port) else { return nil }
        return address.bytes.withUnsafeBytes { raw in
            var storage = sockaddr_storage()
            withUnsafeMutableBytes(of: &storage) {
                $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw.prefix($0.count)))
            }
            return endpoint(storage)
        }
    }

    private static func string(_ text: [CChar]) -> String {
        String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The address and port a datagram came from (numeric, without an IPv6 scope, as the
    /// configured nameservers are written).
    static func endpoint(_ storage: sockaddr_storage) -> Endpoint {
        var storage = storage
        let length: Int
        switch Int32(storage.ss_family) {
        case AF_INET: length = MemoryLayout<sockaddr_in>.size
        case AF_INET6: length = MemoryLayout<sockaddr_in6>.size
        default: return Endpoint(host: "", port: 0)
        }
        var host = [CChar](repeating: 0, count: 1025)  // NI_MAXHOST
        var service = [CChar](repeating: 0, count: 32)  // NI_MAXSERV
        let status = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                getnameinfo(
                    $0,
                    socklen_t(length),
                    &host,
                    socklen_t(host.count),
                    &service,
                    socklen_t(service.count),
                    NI_NUMERICHOST | NI_NUMERICSERV
                )
            }
        }
        guard status == 0 else { return Endpoint(host: "", port: 0) }
        let address = Self.string(host)
        return Endpoint(host: String(address.prefix { $0 != "%" }), port: Int(Self.string(service)) ?? 0)
    }
}
