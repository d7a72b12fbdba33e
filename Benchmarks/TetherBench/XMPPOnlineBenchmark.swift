import Dispatch
import Foundation
import TetherCore
import TetherDispatch
import TetherXMPP
import TetherXMPPClient

#if canImport(Glibc)
    import Glibc
#endif

/// `tether-bench --xmpp online HOST:PORT JID CONTROL_PORT COUNT`: time to online through a slow
/// link (`Benchmarks/xmpp-online/run.sh` puts a relay that delays each chunk in front of prosody,
/// and runs slixmpp and libstrophe the same way). Each round logs in with the defaults an app
/// keeps (SCRAM, stream management, roster and presence), then cuts the link through the relay's
/// control port and measures until the session is resumed. One JSON line: the medians.
///
/// The login: `rfc6120` (SASL, a restart, bind, `<enable/>`: what slixmpp and libstrophe do, on
/// cleartext), `sasl2` (XEP-0388 with Bind 2 and stream management inside, cleartext), or
/// `sasl2-tls` (the same over direct TLS 1.3, certificate checked against `caFile`; the password
/// login asks for a FAST token, and the resumption after the cut logs in with it).
enum XMPPOnlineBenchmark {
    enum Login: String {
        case rfc6120, sasl2
        case sasl2TLS = "sasl2-tls"
    }

    static func run(
        _ server: XMPPDriverBenchmarks.Server,
        jid: String,
        controlPort: Int,
        count: Int,
        login: Login = .rfc6120,
        caFile: String? = nil
    ) async throws
        -> String
    {
        guard let parsed = JID(jid) else { throw BenchError("not a JID: \(jid)") }
        var configuration = XMPPClient.Configuration(
            jid: parsed,
            password: Secret(server.password),
            endpoint: Endpoint(host: server.host, port: server.port),
            tls: login == .sasl2TLS ? .direct : .disabled
        )
        configuration.mechanisms = [.scramSHA256, .scramSHA1]
        configuration.reconnectPolicy = .fixed(.milliseconds(1), maximumAttempts: 10)
        configuration.sasl2 = login != .rfc6120
        configuration.archiveCatchUp = nil  // the prosody here keeps no archive
        var options = XMPPClient.Options()
        options.caFile = caFile
        var logins: [Double] = []
        var resumptions: [Double] = []
        for _ in 0..<count {
            let client = try XMPPClient(configuration: configuration, options: options)
            let smEnabled = DispatchSemaphore(value: 0)
            let resumed = DispatchSemaphore(value: 0)
            let failure = XMPPDriverBenchmarks.Counter()
            client.setEventHandler(queue: DispatchQueue(label: "events")) { event in
                switch event {
                case .streamManagementEnabled: smEnabled.signal()
                case .lifecycle(.resumed): resumed.signal()
                case .resumeFailed, .lifecycle(.closed): _ = failure.increment()
                default: break
                }
            }
            let start = DispatchTime.now().uptimeNanoseconds
            try await client.connect()
            logins.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
            guard smEnabled.wait(timeout: .now() + 10) == .success else { throw BenchError("no stream management") }
            try await Task.sleep(for: .milliseconds(300))  // the session settles (roster, presence)
            let cut = DispatchTime.now().uptimeNanoseconds
            try cutLink(controlPort: controlPort)
            guard resumed.wait(timeout: .now() + 20) == .success, failure.value == 0 else {
                throw BenchError("the session was not resumed")
            }
            resumptions.append(Double(DispatchTime.now().uptimeNanoseconds - cut) / 1e6)
            let authentication = await client.authentication()
            guard authentication?.sasl2 == (login != .rfc6120), login != .sasl2TLS || authentication?.fast == true
            else { throw BenchError("the resumption logged in with \(String(describing: authentication))") }
            await client.disconnect()
        }
        let name = login == .rfc6120 ? "tether" : "tether-\(login.rawValue)"
        return String(
            format: #"{"client":"%@","count":%d,"login_ms":%.1f,"resume_ms":%.1f}"#,
            name,
            count,
            median(logins),
            median(resumptions)
        )
    }

    static func median(_ values: [Double]) -> Double {
        values.sorted()[values.count / 2]
    }

    /// A connection to the relay's control port cuts every relayed connection.
    static func cutLink(controlPort: Int) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw BenchError("socket failed") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(controlPort).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard status == 0 else { throw BenchError("cannot reach the relay's control port \(controlPort)") }
    }
}
