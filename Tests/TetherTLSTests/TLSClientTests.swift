import COpenSSL
import Foundation
import Synchronization
import Testing
import TetherCore
import TetherTestServers
import TetherTestSupport

@testable import TetherTLS

/// The server side of a TLS session over memory BIOs (OpenSSL itself, as the peer of
/// `TLSClient` in these tests).
final class TLSTestServer {
    let context: OpaquePointer
    let ssl: OpaquePointer
    let incoming: OpaquePointer
    let outgoing: OpaquePointer

    init(certificate: String, key: String, maximumVersion: Int32? = nil) {
        context = SSL_CTX_new(TLS_server_method())!
        precondition(SSL_CTX_use_certificate_chain_file(context, certificate) == 1)
        precondition(SSL_CTX_use_PrivateKey_file(context, key, SSL_FILETYPE_PEM) == 1)
        if let maximumVersion { _ = tether_ssl_ctx_set_max_version(context, maximumVersion) }
        ssl = SSL_new(context)!
        incoming = BIO_new(BIO_s_mem())!
        outgoing = BIO_new(BIO_s_mem())!
        SSL_set_bio(ssl, incoming, outgoing)
        SSL_set_accept_state(ssl)
    }

    deinit {
        SSL_free(ssl)
        SSL_CTX_free(context)
    }

    /// Takes the client's bytes, advances, and returns the plaintext read.
    func receive(_ bytes: [UInt8]) -> [UInt8] {
        if !bytes.isEmpty { _ = bytes.withUnsafeBytes { BIO_write(incoming, $0.baseAddress, Int32($0.count)) } }
        if SSL_is_init_finished(ssl) == 0 { _ = SSL_do_handshake(ssl) }
        var plaintext: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16384)
        while SSL_is_init_finished(ssl) != 0 {
            let count = buffer.withUnsafeMutableBytes { SSL_read(ssl, $0.baseAddress, Int32($0.count)) }
            if count <= 0 { break }
            plaintext += buffer[..<Int(count)]
        }
        return plaintext
    }

    func send(_ plaintext: [UInt8]) {
        _ = plaintext.withUnsafeBytes { SSL_write(ssl, $0.baseAddress, Int32($0.count)) }
    }

    func shutdown() { _ = SSL_shutdown(ssl) }

    func output() -> [UInt8] {
        let pending = Int(BIO_ctrl_pending(outgoing))
        guard pending > 0 else { return [] }
        var bytes = [UInt8](repeating: 0, count: pending)
        _ = bytes.withUnsafeMutableBytes { BIO_read(outgoing, $0.baseAddress, Int32($0.count)) }
        return bytes
    }
}

@Suite(
    .timeLimit(.minutes(2)),
    .realServers(.opensslCommand)
)
struct TLSClientTests {

    /// Runs the handshake between `client` and `server`, handing bytes across in `chunk`-byte
    /// pieces; returns the client's error, if any.
    static func handshake(
        _ client: inout TLSClient,
        _ server: TLSTestServer,
        chunk: Int = .max,
        serverReceived: inout [UInt8]
    ) -> TLSError? {
        do throws(TLSError) {
            try client.start()
            for _ in 0..<20 {
                let toServer = client.takeOutput()
                serverReceived += server.receive(toServer)
                let toClient = server.output()
                if toClient.isEmpty && toServer.isEmpty { break }
                var offset = 0
                while offset < toClient.count {
                    let end = min(offset + chunk, toClient.count)
                    _ = try client.receive(Array(toClient[offset..<end]))
                    offset = end
                }
            }
            serverReceived += server.receive(client.takeOutput())
        } catch {
            return error
        }
        return nil
    }

    static func handshake(_ client: inout TLSClient, _ server: TLSTestServer, chunk: Int = .max) -> TLSError? {
        var ignored: [UInt8] = []
        return handshake(&client, server, chunk: chunk, serverReceived: &ignored)
    }

    static func configuration(_ name: String = "localhost", trusting: Bool = true) throws -> TLSClient.Configuration {
        .init(
            serverName: name,
            additionalTrustedCertificates: trusting ? try TestCertificates.shared().caCertificate : nil
        )
    }

    @Test(arguments: [Int.max, 1, 7, 100])
    func handshakeAndDataBothWays(_ chunk: Int) throws {
        let certificates = try TestCertificates.shared()
        var client = try TLSClient(configuration: try Self.configuration())
        let server = TLSTestServer(certificate: certificates.serverCertificate, key: certificates.serverKey)
        // Plaintext sent before the handshake ends waits for it.
        try client.send(Array("early".utf8))
        var early: [UInt8] = []
        #expect(Self.handshake(&client, server, chunk: chunk, serverReceived: &early) == nil)
        let established = client.isEstablished
        let version = client.protocolVersion
        #expect(established && version == "TLSv1.3")
        #expect(early == Array("early".utf8))
        let large = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try client.send(large)
        let encrypted = client.takeOutput()
        #expect(server.receive(encrypted) == large)
        server.send(Array("<stream:stream>".utf8))
        server.send(large)
        let records = server.output()
        var received: [UInt8] = []
        var offset = 0
        while offset < records.count {
            let end = min(offset + min(chunk, 5000), records.count)
            received += try client.receive(Array(records[offset..<end]))
            offset = end
        }
        #expect(received == Array("<stream:stream>".utf8) + large)
        // close_notify from the server.
        server.shutdown()
        let afterClose = try client.receive(server.output())
        let peerClosed = client.peerClosed
        #expect(afterClose.isEmpty && peerClosed)
    }

    @Test func tls12() throws {
        let certificates = try TestCertificates.shared()
        var client = try TLSClient(configuration: try Self.configuration())
        let server = TLSTestServer(
            certificate: certificates.serverCertificate,
            key: certificates.serverKey,
            maximumVersion: TLS1_2_VERSION
        )
        #expect(Self.handshake(&client, server) == nil)
        let version = client.protocolVersion
        #expect(version == "TLSv1.2")
    }

    /// The channel-binding data agrees with the server's own view of the connection: the same
    /// exported keying material on TLS 1.3 (RFC 9266), the client's Finished message on TLS 1.2
    /// (RFC 5929 tls-unique), and the certificate's SHA-256 as `openssl x509 -fingerprint` gives
    /// it (tls-server-end-point, the test CA signs with SHA-256).
    @Test(arguments: [nil, TLS1_2_VERSION])
    func channelBindingsMatchTheServersView(_ maximumVersion: Int32?) throws {
        let certificates = try TestCertificates.shared()
        var client = try TLSClient(configuration: try Self.configuration())
        #expect(client.channelBindings == .none)  // nothing before the handshake
        let server = TLSTestServer(
            certificate: certificates.serverCertificate,
            key: certificates.serverKey,
            maximumVersion: maximumVersion
        )
        #expect(Self.handshake(&client, server) == nil)
        let bindings = client.channelBindings
        if maximumVersion == nil {
            #expect(bindings.protocolVersion == "TLSv1.3")
            #expect(bindings.types == [.tlsExporter, .tlsServerEndPoint])
            var exported = [UInt8](repeating: 0, count: 32)
            let label = "EXPORTER-Channel-Binding"
            #expect(SSL_export_keying_material(server.ssl, &exported, 32, label, label.utf8.count, nil, 0, 0) == 1)
            #expect(bindings.data[.tlsExporter] == exported)
        } else {
            #expect(bindings.protocolVersion == "TLSv1.2")
            #expect(bindings.types == [.tlsUnique, .tlsServerEndPoint])
            var finished = [UInt8](repeating: 0, count: 64)
            let length = SSL_get_peer_finished(server.ssl, &finished, 64)
            #expect(length == 12 && bindings.data[.tlsUnique] == Array(finished[..<length]))
        }
        let fingerprint = try runOpenSSL([
            "x509", "-in", certificates.serverCertificate, "-noout", "-fingerprint", "-sha256",
        ])
        let hexDigits = fingerprint.split(separator: "=").last.map { $0.filter(\.isHexDigit) } ?? ""
        #expect(bindings.data[.tlsServerEndPoint].map(hex) == hexDigits.lowercased())
    }

    func runOpenSSL(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: output, as: UTF8.self)
    }

    func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    @Test func anIPAddressIsVerifiedAgainstTheCertificatesAddresses() throws {
        let certificates = try TestCertificates.shared()
        var client = try TLSClient(configuration: try Self.configuration("127.0.0.1"))
        let server = TLSTestServer(certificate: certificates.serverCertificate, key: certificates.serverKey)
        #expect(Self.handshake(&client, server) == nil)
        var wrong = try TLSClient(configuration: try Self.configuration("127.0.0.2"))
        let other = TLSTestServer(certificate: certificates.serverCertificate, key: certificates.serverKey)
        #expect(Self.handshake(&wrong, other)?.kind == .certificateRejected)
    }

    @Test func unknownCAIsRejected() throws {
        let certificates = try TestCertificates.shared()
        var client = try TLSClient(configuration: try Self.configuration(trusting: false))
        let server = TLSTestServer(certificate: certificates.serverCertificate, key: certificates.serverKey)
        let error = Self.handshake(&client, server)
        #expect(error?.kind == .certificateRejected)
        #expect(
            error?.message.contains("unable to get local issuer certificate") == true,
            "\(String(describing: error))"
        )
        let established = client.isEstablished
        #expect(!established)
        // After a failure nothing more is accepted.
        expectThrows(\TLSError.kind, .protocolError) { try client.send([1]) }
    }

    @Test func selfSignedIsRejected() throws {
        let certificates = try TestCertificates.shared()
        var client = try TLSClient(configuration: try Self.configuration())
        let server = TLSTestServer(
            certificate: certificates.selfSignedCertificate,
            key: certificates.selfSignedKey
        )
        #expect(Self.handshake(&client, server)?.kind == .certificateRejected)
    }

    @Test func aPinnedPublicKeyInTheChainIsAccepted() throws {
        let certificates = try TestCertificates.shared()
        let server = { TLSTestServer(certificate: certificates.serverCertificate, key: certificates.serverKey) }
        let context = try TLSContext(additionalTrustedCertificates: certificates.caCertificate)
        // The server's own key, or the CA's (the server sends only its own certificate, so the
        // CA's pin does not match what was sent).
        let leaf = try certificates.publicKeyPin(ofCertificate: certificates.serverCertificate)
        var pinned = try TLSClient(serverName: "localhost", context: context, trust: TLSTrust(pinnedPublicKeys: [leaf]))
        #expect(Self.handshake(&pinned, server()) == nil)
        let pinnedEstablished = pinned.isEstablished
        #expect(pinnedEstablished)
        let other = try certificates.publicKeyPin(ofCertificate: certificates.otherCertificate)
        var mismatched = try TLSClient(
            serverName: "localhost",
            context: context,
            trust: TLSTrust(pinnedPublicKeys: [other])
        )
        let error = Self.handshake(&mismatched, server())
        #expect(error?.kind == .peerRejected)
        #expect(error?.message.contains("no pinned public key matches") == true, "\(String(describing: error))")
        #expect(error?.message.contains(leaf) == true)  // it names the key the server has
        let mismatchedEstablished = mismatched.isEstablished
        #expect(!mismatchedEstablished)
        expectThrows(\TLSError.kind, .protocolError) { try mismatched.send([1]) }
        // Pins come on top of the trust store: a pinned key on an untrusted chain is refused.
        let selfPin = try certificates.publicKeyPin(ofCertificate: certificates.selfSignedCertificate)
        var untrusted = try TLSClient(
            serverName: "localhost",
            context: context,
            trust: TLSTrust(pinnedPublicKeys: [selfPin])
        )
        let selfSigned = TLSTestServer(certificate: certificates.selfSignedCertificate, key: certificates.selfSignedKey)
        #expect(Self.handshake(&untrusted, selfSigned)?.kind == .certificateRejected)
    }

    @Test func anEvaluatorDecidesForASelfSignedServer() throws {
        let certificates = try TestCertificates.shared()
        let known = try certificates.publicKeyPin(ofCertificate: certificates.selfSignedCertificate)
        let seen = Mutex<[TLSPeer]>([])
        let trust = TLSTrust(evaluator: { peer in
            seen.withLock { $0.append(peer) }
            return peer.publicKeyHashes.first == known
        })
        let context = try TLSContext(additionalTrustedCertificates: nil)
        let selfSigned = {
            TLSTestServer(certificate: certificates.selfSignedCertificate, key: certificates.selfSignedKey)
        }
        var accepted = try TLSClient(serverName: "localhost", context: context, trust: trust)
        #expect(Self.handshake(&accepted, selfSigned()) == nil)
        let acceptedEstablished = accepted.isEstablished
        #expect(acceptedEstablished)
        let peer = try #require(seen.withLock { $0.first })
        #expect(peer.serverName == "localhost" && !peer.isTrustedBySystem && peer.verificationError != nil)
        #expect(peer.certificates.count == 1 && peer.certificates[0].first == 0x30)  // DER: a SEQUENCE
        // The evaluator refuses another server's key.
        var refused = try TLSClient(serverName: "localhost", context: context, trust: trust)
        let other = TLSTestServer(certificate: certificates.serverCertificate, key: certificates.serverKey)
        #expect(Self.handshake(&refused, other)?.kind == .peerRejected)
        // Through the drivers' session type, the refusal is the typed TLSPeerRejected.
        let session = try OpenSSLTLSSession(TLSSessionConfiguration(serverName: "localhost", trust: trust))
        let server = TLSTestServer(certificate: certificates.serverCertificate, key: certificates.serverKey)
        try session.start()
        var rejection: (any Error)?
        for _ in 0..<20 where rejection == nil {
            _ = server.receive(session.takeOutput())
            let reply = server.output()
            if reply.isEmpty { break }
            do { _ = try session.receive(reply) } catch { rejection = error }
        }
        #expect(rejection is TLSPeerRejected, "\(String(describing: rejection))")
    }

    @Test func wrongHostNameIsRejected() throws {
        let certificates = try TestCertificates.shared()
        var client = try TLSClient(configuration: try Self.configuration("example.com"))
        let server = TLSTestServer(certificate: certificates.serverCertificate, key: certificates.serverKey)
        let error = Self.handshake(&client, server)
        #expect(error?.kind == .certificateRejected)
        #expect(error?.message.contains("hostname mismatch") == true, "\(String(describing: error))")
    }

    @Test func garbageFromTheServerFailsTheHandshake() throws {
        var client = try TLSClient(configuration: try Self.configuration())
        try client.start()
        _ = client.takeOutput()
        expectThrows(\TLSError.kind, .handshakeFailed) {
            _ = try client.receive(Array("<stream:stream xmlns='jabber:client'>".utf8))
        }
    }

    /// One context, many sessions at once on several threads, each verifying its own name.
    @Test func oneContextServesManySessionsAtOnce() throws {
        let certificates = try TestCertificates.shared()
        let context = try TLSContext(additionalTrustedCertificates: certificates.caCertificate)
        // Behind an `NSLock`: ThreadSanitizer reported a `Mutex` here (captured by the closure,
        // and again as a class's stored property) as a Swift access race, its exclusivity
        // instrumentation seeing `withLock` as a modifying access from every thread; the lock
        // itself was never torn, and the report came once in several runs.
        final class Outcomes: @unchecked Sendable {
            // `results` is guarded by `lock`.
            private let lock = NSLock()
            private var results: [Int: TLSError.Kind?] = [:]

            func record(_ kind: TLSError.Kind?, at index: Int) { lock.withLock { results[index] = .some(kind) } }
            var byIndex: [Int: TLSError.Kind?] { lock.withLock { results } }
        }
        let outcomes = Outcomes()
        DispatchQueue.concurrentPerform(iterations: 8) { index in
            // Odd sessions ask for a name the certificate is not for.
            let name = index % 2 == 0 ? "localhost" : "example.com"
            let server = TLSTestServer(
                certificate: certificates.serverCertificate,
                key: certificates.serverKey
            )
            do {
                var client = try TLSClient(serverName: name, context: context)
                let error = Self.handshake(&client, server)
                outcomes.record(error?.kind, at: index)
            } catch {
                outcomes.record((error as? TLSError)?.kind, at: index)
            }
        }
        let results = outcomes.byIndex
        for index in 0..<8 {
            #expect(results[index] == .some(index % 2 == 0 ? nil : .certificateRejected), "session \(index)")
        }
    }

    /// The driver's factory loads a trust setting once and shares it; a CA file changed on disk
    /// is read again.
    @Test func theFactorySharesAContextUntilTheCAFileChanges() throws {
        let certificates = try TestCertificates.shared()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("tether-ca-\(UUID().uuidString).pem")
        defer { try? FileManager.default.removeItem(at: file) }
        let authority = try Data(contentsOf: URL(fileURLWithPath: certificates.caCertificate))
        try authority.write(to: file)
        let first = try OpenSSLTLSSession.sharedContext(trusting: file.path)
        #expect(try OpenSSLTLSSession.sharedContext(trusting: file.path) === first)
        #expect(try OpenSSLTLSSession.sharedContext(trusting: nil) === OpenSSLTLSSession.sharedContext(trusting: nil))
        try (authority + authority).write(to: file)
        let second = try OpenSSLTLSSession.sharedContext(trusting: file.path)
        #expect(second !== first)
        // Sessions from the factory verify with it.
        var client = try TLSClient(serverName: "localhost", context: second)
        let server = TLSTestServer(certificate: certificates.serverCertificate, key: certificates.serverKey)
        #expect(Self.handshake(&client, server) == nil)
        try FileManager.default.removeItem(at: file)
        expectThrows(\TLSError.kind, .configuration) { try OpenSSLTLSSession.sharedContext(trusting: file.path) }
    }

    @Test func aMissingCAFileIsAConfigurationError() {
        expectThrows(\TLSError.kind, .configuration) {
            _ = try TLSClient(
                configuration: .init(serverName: "localhost", additionalTrustedCertificates: "/nonexistent.pem")
            )
        }
    }
}
