import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A real DNS server on 127.0.0.1 for the tests: dnsmasq (Debian: `dnsmasq-base`), authoritative
/// for the names it is given (`local`: others in those domains are NXDOMAIN), answering over UDP
/// and TCP on one free port, with no upstream. Started by `init`, stopped when released.
public final class DNSServer: @unchecked Sendable {
    /// A record to serve.
    public enum Record: Sendable {
        /// `name` has the IPv4 (and/or IPv6) `addresses`.
        case address(String, [String])
        /// `name` is an alias of `target`.
        case cname(String, target: String)
        /// An SRV record at `name` (`_service._tcp.domain`).
        case srv(String, target: String, port: Int, priority: Int, weight: Int)
    }

    public static let path = "/usr/sbin/dnsmasq"
    public static var isInstalled: Bool { access(path, X_OK) == 0 }

    public let port: Int
    private let process: ChildProcess
    private let output: String

    /// Serves `records` for the `local` domains on a free port (or `port`: 53 in a namespace of
    /// the test's own, where a `resolv.conf` can name it), and waits until it answers.
    /// In `namespace` (on its 127.0.0.1) when given.
    public init(
        local domains: [String],
        records: [Record],
        in namespace: NetworkNamespace? = nil,
        port fixedPort: Int? = nil
    ) async throws {
        guard Self.isInstalled else { throw TestServerError(RealServer.dnsmasq.missingText) }
        port = try fixedPort ?? freeLoopbackPort()
        output = FileManager.default.temporaryDirectory.appendingPathComponent("tether-dns-\(UUID().uuidString)").path
        var arguments = [
            "--keep-in-foreground", "--port=\(port)", "--listen-address=127.0.0.1", "--bind-interfaces", "--no-resolv",
            "--no-hosts", "--pid-file=", "--log-facility=-", "--log-queries",
        ]
        arguments += domains.map { "--local=/\($0)/" }
        for record in records {
            switch record {
            case .address(let name, let addresses):
                arguments.append("--host-record=" + ([name] + addresses).joined(separator: ","))
            case .cname(let name, let target):
                arguments.append("--cname=\(name),\(target)")
            case .srv(let name, let target, let port, let priority, let weight):
                arguments.append("--srv-host=\(name),\(target),\(port),\(priority),\(weight)")
            }
        }
        process = try ChildProcess.launch(Self.path, arguments, in: namespace, output: output)
        if await process.waitUntilAccepting(host: "127.0.0.1", port: port, in: namespace, timeout: 60) { return }
        process.terminate()
        throw TestServerError("dnsmasq did not start on port \(port): \(logTail)")
    }

    deinit {
        process.terminate()
        try? FileManager.default.removeItem(atPath: output)
    }

    /// The server's log (its queries), for failure messages and checks.
    public var logTail: String {
        String(((try? String(contentsOfFile: output, encoding: .utf8)) ?? "").suffix(4000))
    }
}
