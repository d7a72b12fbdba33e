import Foundation
import Testing
import TetherCore
import TetherDispatch
import TetherTestServers
import TetherTestSupport
import TetherXMPP
import TetherXMPPClient

/// TLS against a real prosody with a certificate from a throw-away CA: STARTTLS (required by
/// the server and by the client) and direct TLS, verified against the CA file; a wrong host name
/// and an unknown CA fail with a typed error and no retry; a server without STARTTLS is refused
/// when TLS is required (no downgrade); logins bound to the TLS connection (SCRAM-*-PLUS) and
/// XEP-0474's downgrade protection.
@Suite(
    .serialized,
    .timeLimit(.minutes(2)),
    .realServers(.prosody, .opensslCommand)
)
struct XMPPClientTLSTests {

    static func configuration(
        _ server: ProsodyServer,
        tls: XMPPClientMachine.TLSPolicy,
        domain: String = "localhost"
    ) -> XMPPClient.Configuration {
        var configuration = testConfiguration("alice", port: tls == .direct ? server.directTLSPort! : server.port)
        configuration.jid = JID("alice@\(domain)")!
        configuration.tls = tls
        configuration.mechanisms = [.plain]  // PLAIN is allowed here only because TLS protects it
        configuration.allowPlainOnCleartext = false
        return configuration
    }

    @Test func startTLSRequiredByBothSides() async throws {
        let certificates = try TestCertificates.shared()
        let server = try ProsodyServer(certificates: certificates, requireEncryption: true)
        try await server.start()
        let log = TrafficLog()
        let client = try XMPPClient(
            configuration: Self.configuration(server, tls: .required),
            options: .init(logLevel: .trace, logHandler: log.handler, caFile: certificates.caCertificate)
        )
        let jid = try await client.connect()
        #expect(jid.bare == JID("alice@localhost"))
        let sent = log.entries.filter { $0.direction == .sent }.map(\.text)
        #expect(sent.contains("<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>"))
        // The header after TLS names the account (RFC 6120 §4.7.1); the first one did not.
        let headers = sent.filter { $0.hasPrefix("<?xml") }
        #expect(headers.count >= 3)
        #expect(!headers[0].contains("from=") && headers[1].contains("from='alice@localhost'"))
        #expect(try await client.ping() > .zero)
        await client.disconnect()
    }

    @Test func optionalUsesStartTLSWhenOffered() async throws {
        let certificates = try TestCertificates.shared()
        let server = try ProsodyServer(certificates: certificates)
        try await server.start()
        let log = TrafficLog()
        var configuration = Self.configuration(server, tls: .optional)
        configuration.mechanisms = SASLMechanism.allCases
        let client = try XMPPClient(
            configuration: configuration,
            options: .init(logLevel: .trace, logHandler: log.handler, caFile: certificates.caCertificate)
        )
        try await client.connect()
        #expect(log.entries.contains { $0.direction == .sent && $0.text.hasPrefix("<starttls") })
        await client.disconnect()
    }

    @Test func directTLS() async throws {
        let certificates = try TestCertificates.shared()
        let server = try ProsodyServer(certificates: certificates)
        try await server.start()
        let log = TrafficLog()
        let client = try XMPPClient(
            configuration: Self.configuration(server, tls: .direct),
            options: .init(logLevel: .trace, logHandler: log.handler, caFile: certificates.caCertificate)
        )
        let jid = try await client.connect()
        #expect(jid.bare == JID("alice@localhost"))
        // No STARTTLS on a stream that is TLS from the first byte; the first header names the account.
        let sent = log.entries.filter { $0.direction == .sent }.map(\.text)
        #expect(!sent.contains { $0.hasPrefix("<starttls") })
        #expect(sent.first?.contains("from='alice@localhost'") == true)
        let health = await client.health()
        #expect(health.transport == "tls" && health.tlsVersion?.hasPrefix("TLSv1.") == true, "\(health)")
        await client.disconnect()
    }

    /// A login bound to the TLS connection (SCRAM-*-PLUS): prosody checks the binding data
    /// against its own view of the connection. TLS 1.3 binds with tls-exporter, TLS 1.2 (prosody
    /// capped there) with tls-unique; over STARTTLS and over direct TLS.
    @Test(arguments: [
        (XMPPClientMachine.TLSPolicy.required, false), (.direct, false), (.required, true), (.direct, true),
    ])
    func scramPlusBindsTheLogin(_ tls: XMPPClientMachine.TLSPolicy, tls12: Bool) async throws {
        let certificates = try TestCertificates.shared()
        let server = try ProsodyServer(
            certificates: certificates,
            extraConfiguration: tls12 ? #"ssl = { protocol = "tlsv1_2" }"# : ""
        )
        try await server.start()
        var configuration = Self.configuration(server, tls: tls)
        configuration.mechanisms = SASLMechanism.allCases
        configuration.channelBinding = .required
        let client = try XMPPClient(configuration: configuration, options: .init(caFile: certificates.caCertificate))
        try await client.connect()
        let authentication = await client.authentication()
        #expect(authentication?.mechanism == "SCRAM-SHA-256-PLUS", "\(String(describing: authentication))")
        #expect(authentication?.channelBinding == (tls12 ? .tlsUnique : .tlsExporter))
        let health = await client.health()
        #expect(health.tlsVersion == (tls12 ? "TLSv1.2" : "TLSv1.3"))
        #expect(try await client.ping() > .zero)
        await client.disconnect()
    }

    /// tls-server-end-point (RFC 5929) against prosody, which checks it against the configured
    /// hash of its certificate (`tls_server_end_point_hash`): a TLS layer that gives only the
    /// server's certificate (as an app's own TLS may) binds with it; a server configured with
    /// another certificate's hash refuses the login (the binding is really checked).
    @Test func tlsServerEndPointBindsToTheCertificate() async throws {
        let certificates = try TestCertificates.shared()
        let digest = try certificateDigest(certificates.serverCertificate)
        let endPointOnly: TLSSessionFactory = { configuration in
            CertificateBindingOnly(try defaultTLSSessionFactory!(configuration))
        }
        for (hash, succeeds) in [(digest, true), (String(repeating: "ab", count: 32), false)] {
            let server = try ProsodyServer(
                certificates: certificates,
                extraConfiguration: "tls_server_end_point_hash = \"\(hash)\""
            )
            try await server.start()
            var configuration = Self.configuration(server, tls: .required)
            configuration.mechanisms = SASLMechanism.allCases
            configuration.channelBinding = .required
            configuration.reconnectPolicy = nil
            let client = try XMPPClient(
                configuration: configuration,
                options: .init(caFile: certificates.caCertificate, tlsSessionFactory: endPointOnly)
            )
            if succeeds {
                try await client.connect()
                let authentication = await client.authentication()
                #expect(authentication?.mechanism == "SCRAM-SHA-256-PLUS", "\(String(describing: authentication))")
                #expect(authentication?.channelBinding == .tlsServerEndPoint)
                await client.disconnect()
            } else {
                await expectThrows(\XMPPClientError.kind, .authenticationFailed) { try await client.connect() }
            }
            server.stop()
        }
    }

    /// A server whose -PLUS mechanisms do not reach the client (prosody told not to list them,
    /// as someone in the middle would strip them) while it supports channel binding: the client
    /// says it could have bound (`y`), and prosody refuses the login (RFC 5802 §6) instead of
    /// being downgraded; with `required` the client refuses first; `disabled` logs in unbound.
    @Test func aListWithoutPLUSIsADowngradeTheServerCatches() async throws {
        let certificates = try TestCertificates.shared()
        let server = try ProsodyServer(
            certificates: certificates,
            extraConfiguration: #"disable_sasl_mechanisms = { "DIGEST-MD5"; "SCRAM-SHA-1-PLUS"; "SCRAM-SHA-256-PLUS" }"#
        )
        try await server.start()
        var configuration = Self.configuration(server, tls: .required)
        configuration.mechanisms = [.scramSHA256, .scramSHA1]
        let options = XMPPClient.Options(caFile: certificates.caCertificate)
        let refused = try XMPPClient(configuration: configuration, options: options)
        await expectThrows(\XMPPClientError.kind, .authenticationFailed) { try await refused.connect() }

        configuration.channelBinding = .required
        let strict = try XMPPClient(configuration: configuration, options: options)
        await expectThrows(\XMPPClientError.kind, .channelBindingUnavailable) { try await strict.connect() }
        #expect(await strict.state() == .disconnected)

        configuration.channelBinding = .disabled
        let unbound = try XMPPClient(configuration: configuration, options: options)
        try await unbound.connect()
        let authentication = await unbound.authentication()
        #expect(authentication == XMPPAuthentication(mechanism: "SCRAM-SHA-256", channelBinding: nil))
        await unbound.disconnect()
    }

    /// XEP-0474 against prosody's `sasl_ssdp`: the server-first-message carries `h=` over the
    /// mechanisms and channel-binding types it listed; the client checks it and logs in.
    @Test func downgradeProtectionHashIsChecked() async throws {
        let certificates = try TestCertificates.shared()
        let server = try ProsodyServer(certificates: certificates, extraModules: ["sasl_ssdp"])
        try await server.start()
        var configuration = Self.configuration(server, tls: .required)
        configuration.mechanisms = SASLMechanism.allCases
        let log = TrafficLog()
        let client = try XMPPClient(
            configuration: configuration,
            options: .init(logLevel: .trace, logHandler: log.handler, caFile: certificates.caCertificate)
        )
        try await client.connect()
        #expect(await client.authentication()?.channelBinding == .tlsExporter)
        let challenges = log.entries.filter { $0.direction == .received && $0.text.contains("<challenge") }
        let serverFirst = challenges.first.flatMap { entry -> String? in
            guard let start = entry.text.range(of: ">"), let end = entry.text.range(of: "</challenge>") else {
                return nil
            }
            return Base64.decode(String(entry.text[start.upperBound..<end.lowerBound]))
                .map { String(decoding: $0, as: UTF8.self) }
        }
        #expect(serverFirst?.contains(",h=") == true, "\(String(describing: serverFirst))")
        await client.disconnect()
    }

    @Test func unknownCAIsRejectedWithoutRetrying() async throws {
        let certificates = try TestCertificates.shared()
        let server = try ProsodyServer(certificates: certificates)
        try await server.start()
        for tls in [XMPPClientMachine.TLSPolicy.direct, .required] {
            let client = try XMPPClient(configuration: Self.configuration(server, tls: tls))  // no CA file
            let events = EventRecorder(client)
            do {
                try await client.connect()
                Issue.record("connected to a server whose CA is unknown (\(tls))")
            } catch {
                #expect(error.kind == .certificateRefused, "\(error)")
                #expect(error.message.contains("unable to get local issuer certificate"), "\(error)")
                #expect(error.isFatal)
            }
            #expect(
                !events.events.contains { if case .lifecycle(.reconnecting) = $0 { true } else { false } },
                "\(tls): \(events.events)"
            )
        }
    }

    /// Pinning over STARTTLS and direct TLS: the right pin connects; a wrong one fails with
    /// `certificateRefused`, fatal, without a retry.
    @Test func pinnedPublicKeys() async throws {
        let certificates = try TestCertificates.shared()
        let server = try ProsodyServer(certificates: certificates)
        try await server.start()
        let pin = try certificates.publicKeyPin(ofCertificate: certificates.serverCertificate)
        let wrong = try certificates.publicKeyPin(ofCertificate: certificates.otherCertificate)
        for tls in [XMPPClientMachine.TLSPolicy.direct, .required] {
            var options = XMPPClient.Options(caFile: certificates.caCertificate)
            options.trust.pinnedPublicKeys = [pin]
            let client = try XMPPClient(configuration: Self.configuration(server, tls: tls), options: options)
            _ = try await client.connect()
            await client.disconnect()

            options.trust.pinnedPublicKeys = [wrong]
            let refused = try XMPPClient(configuration: Self.configuration(server, tls: tls), options: options)
            let events = EventRecorder(refused)
            do {
                _ = try await refused.connect()
                Issue.record("connected with a wrong pin (\(tls))")
            } catch {
                #expect(error.kind == .certificateRefused, "\(error)")
                #expect(error.isFatal)
            }
            #expect(
                !events.events.contains { if case .lifecycle(.reconnecting) = $0 { true } else { false } },
                "\(tls)"
            )
        }
    }

    @Test func wrongHostNameIsRejected() async throws {
        let certificates = try TestCertificates.shared()
        let server = try ProsodyServer(certificates: certificates)
        try await server.start()
        // The server serves `misnamed.test` with a CA-signed certificate for `other.test`: the
        // chain is trusted, the name is not, and the client's own check must refuse it (over
        // STARTTLS and over direct TLS).
        for tls in [XMPPClientMachine.TLSPolicy.required, .direct] {
            let client = try XMPPClient(
                configuration: Self.configuration(server, tls: tls, domain: "misnamed.test"),
                options: .init(caFile: certificates.caCertificate)
            )
            do {
                try await client.connect()
                Issue.record("connected with a certificate for another host (\(tls))")
            } catch {
                #expect(error.kind == .certificateRefused)
                #expect(error.message.contains("hostname mismatch"), "\(error)")
            }
        }
    }

    /// The TLS layer is the app's choice (`Options.tlsSessionFactory`); without one, required and
    /// direct TLS refuse to connect, and optional TLS runs in cleartext.
    @Test func pluggableTLSLayer() async throws {
        let certificates = try TestCertificates.shared()
        let server = try ProsodyServer(certificates: certificates)
        try await server.start()
        let names = SessionNames()
        let plugged = try XMPPClient(
            configuration: Self.configuration(server, tls: .required),
            options: .init(
                caFile: certificates.caCertificate,
                tlsSessionFactory: { configuration in
                    names.append(configuration.serverName)
                    return try defaultTLSSessionFactory!(configuration)
                }
            )
        )
        try await plugged.connect()
        await plugged.disconnect()
        #expect(names.all == ["localhost"])
        // Without a TLS layer a client that requires TLS cannot even be made (never in cleartext).
        for tls in [XMPPClientMachine.TLSPolicy.required, .direct] {
            let error = expectThrows(\XMPPClientError.kind, .tlsUnavailable) {
                try XMPPClient(
                    configuration: Self.configuration(server, tls: tls),
                    options: .init(tlsSessionFactory: nil)
                )
            }
            #expect(error?.message.contains("tlsSessionFactory") == true, "\(String(describing: error))")
        }
    }

    /// TLS required, a server that does not offer STARTTLS: refused, not downgraded.
    @Test func noDowngrade() async throws {
        let certificates = try TestCertificates.shared()
        let server = try ProsodyServer()  // no certificates: no STARTTLS
        try await server.start()
        let log = TrafficLog()
        let client = try XMPPClient(
            configuration: Self.configuration(server, tls: .required),
            options: .init(logLevel: .trace, logHandler: log.handler, caFile: certificates.caCertificate)
        )
        do {
            try await client.connect()
            Issue.record("connected in cleartext although TLS was required")
        } catch {
            #expect(error.kind == .tlsUnavailable)
        }
        #expect(!log.entries.contains { $0.direction == .sent && $0.text.contains("<auth") })
    }
}

/// Server names a session factory was asked for.
final class SessionNames: @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var names: [String] = []

    func append(_ name: String) { lock.withLock { names.append(name) } }
    var all: [String] { lock.withLock { names } }
}

/// The hex SHA-256 of a PEM certificate's DER form (what prosody's `tls_server_end_point_hash`
/// takes), through the `openssl` command.
func certificateDigest(_ path: String) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/sh")
    process.arguments = ["-c", "openssl x509 -in \"$1\" -outform DER | openssl dgst -sha256 -r", "sh", path]
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    let digest = output.prefix { $0.isHexDigit }
    guard process.terminationStatus == 0, digest.count == 64 else {
        throw TestServerError("openssl could not hash \(path): \(output)")
    }
    return String(digest)
}

/// A TLS session that gives only the server certificate's channel binding (tls-server-end-point),
/// as a TLS layer without keying-material export would.
final class CertificateBindingOnly: TLSSession {
    let inner: any TLSSession
    init(_ inner: any TLSSession) { self.inner = inner }
    var isEstablished: Bool { inner.isEstablished }
    var peerClosed: Bool { inner.peerClosed }
    func start() throws { try inner.start() }
    func receive(_ ciphertext: [UInt8]) throws -> [UInt8] { try inner.receive(ciphertext) }
    func send(_ plaintext: [UInt8]) throws { try inner.send(plaintext) }
    func takeOutput() -> [UInt8] { inner.takeOutput() }
    func close() { inner.close() }
    var protocolVersion: String? { inner.protocolVersion }
    var channelBindings: TLSChannelBindings {
        let all = inner.channelBindings
        return TLSChannelBindings(
            protocolVersion: all.protocolVersion,
            data: all.data.filter { $0.key == .tlsServerEndPoint }
        )
    }
}
