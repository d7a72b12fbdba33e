import COpenSSL
public import TetherCore

/// Why TLS failed: `message` is OpenSSL's explanation (for example "certificate verify failed:
/// hostname mismatch").
public typealias TLSError = TetherError<TLSErrorKind>

/// What kind of TLS failure (`TLSError`).
public enum TLSErrorKind: String, ErrorKind {
    /// The server's certificate was not accepted: an unknown CA, an expired certificate, a
    /// host name it is not for.
    case certificateRejected
    /// The handshake failed otherwise (no common protocol version or cipher, an alert).
    case handshakeFailed
    /// The peer broke the TLS protocol after the handshake (a bad record, a MAC failure).
    case protocolError
    /// The configuration cannot work (an unreadable CA file, an invalid server name).
    case configuration
    /// The app's `TLSTrust` refused the certificate (no pinned key in the chain, or the
    /// evaluator said no).
    case peerRejected
}

/// The client side of a TLS connection as a sans-IO value: ciphertext in, plaintext out, and
/// back; OpenSSL 3 over memory BIOs, no socket.
///
/// ```swift
/// var tls = try TLSClient(configuration: .init(serverName: "example.com"))
/// try tls.start();  socket.write(tls.takeOutput())                 // ClientHello
/// let plaintext = try tls.receive(bytesFromSocket.span)             // drives the handshake too
/// socket.write(tls.takeOutput())                                    // whatever TLS wants sent
/// if tls.isEstablished { … }                                       // then send(…) plaintext
/// ```
///
/// The server's certificate is verified by default against the system's trust store (and an
/// extra CA file when configured), for the configured server name (SNI and host-name
/// verification; an IP address is matched against the certificate's IP entries). Plaintext sent
/// before the handshake ends waits inside and goes out once it has. TLS 1.2 and 1.3. Sessions
/// made with `init(serverName:context:)` share one `TLSContext` (the trust store loaded once).
public struct TLSClient: ~Copyable {
    /// What to connect to and what to trust.
    public struct Configuration: Sendable, Hashable {
        /// The TLS protocol versions.
        public enum Version: Sendable, Hashable {
            /// TLS 1.2.
            case tls12
            /// TLS 1.3.
            case tls13

            var openSSL: Int32 {
                switch self {
                case .tls12: TLS1_2_VERSION
                case .tls13: TLS1_3_VERSION
                }
            }
        }

        /// The name the certificate must be for (a DNS name or an IP address), sent as SNI.
        public var serverName: String
        /// A PEM file of CA certificates trusted in addition to the system's (for a private CA).
        public var additionalTrustedCertificates: String?
        /// The lowest version accepted (default TLS 1.2).
        public var minimumVersion: Version
        /// The highest version offered (nil: the highest OpenSSL has, TLS 1.3).
        public var maximumVersion: Version?

        /// A configuration.
        public init(
            serverName: String,
            additionalTrustedCertificates: String? = nil,
            minimumVersion: Version = .tls12,
            maximumVersion: Version? = nil
        ) {
            self.serverName = serverName
            self.additionalTrustedCertificates = additionalTrustedCertificates
            self.minimumVersion = minimumVersion
            self.maximumVersion = maximumVersion
        }
    }

    /// Shared settings (trust, versions): kept alive as long as the session.
    private let context: TLSContext
    private let trust: TLSTrust
    private let serverName: String
    private let ssl: OpaquePointer
    private let incoming: OpaquePointer
    private let outgoing: OpaquePointer
    private var waiting: [UInt8] = []
    /// Whether the handshake completed.
    public private(set) var isEstablished = false
    /// Whether the server sent its close_notify (the TLS stream's orderly end).
    public private(set) var peerClosed = false
    private var failed = false

    /// A session for `configuration`, with a context of its own (which loads the trust store:
    /// for many sessions, make one `TLSContext` and use `init(serverName:context:)`). The
    /// handshake starts with `start()`.
    public init(configuration: Configuration) throws(TLSError) {
        try self.init(
            serverName: configuration.serverName,
            context: TLSContext(
                additionalTrustedCertificates: configuration.additionalTrustedCertificates,
                minimumVersion: configuration.minimumVersion,
                maximumVersion: configuration.maximumVersion
            )
        )
    }

    /// A session to `serverName` (a DNS name, sent as SNI and verified against the certificate,
    /// or an IP address, matched against its IP entries) with `context`'s trust and versions.
    /// The handshake starts with `start()`.
    public init(serverName: String, context: TLSContext, trust: TLSTrust = TLSTrust()) throws(TLSError) {
        ERR_clear_error()
        guard let ssl = SSL_new(context.pointer) else {
            throw TLSError(.configuration, Self.openSSLErrors("SSL_new failed"))
        }
        guard let incoming = BIO_new(BIO_s_mem()), let outgoing = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            throw TLSError(.configuration, Self.openSSLErrors("BIO_new failed"))
        }
        SSL_set_bio(ssl, incoming, outgoing)  // the SSL object owns both BIOs now
        SSL_set_connect_state(ssl)
        let named =
            if Self.isIPAddress(serverName) {
                // No SNI for addresses (RFC 6066 §3); the certificate's IP entries must match.
                X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), serverName) == 1
            } else {
                tether_ssl_set_server_name(ssl, serverName) == 1 && SSL_set1_host(ssl, serverName) == 1
            }
        guard named else {
            SSL_free(ssl)
            throw TLSError(.configuration, Self.openSSLErrors("the server name '\(serverName)' cannot be used"))
        }
        // With an evaluator the handshake completes whatever the trust store says; the evaluator
        // then decides, knowing what it said.
        if trust.evaluator != nil { SSL_set_verify(ssl, SSL_VERIFY_NONE, nil) }
        self.trust = trust
        self.serverName = serverName
        self.context = context
        self.ssl = ssl
        self.incoming = incoming
        self.outgoing = outgoing
    }

    deinit {
        SSL_free(ssl)
    }

    /// Starts the handshake; the ClientHello is then in `takeOutput()`.
    public mutating func start() throws(TLSError) {
        try advanceHandshake()
    }

    /// Feeds `ciphertext` from the server and returns the plaintext it decrypts to (empty during
    /// the handshake, or when a record is incomplete). Check `isEstablished` and `takeOutput()`
    /// after each call.
    public mutating func receive(_ ciphertext: Span<UInt8>) throws(TLSError) -> [UInt8] {
        guard !failed else { throw TLSError(.protocolError, "the TLS session already failed") }
        if !ciphertext.isEmpty {
            let written = ciphertext.withUnsafeBytes { BIO_write(incoming, $0.baseAddress, Int32($0.count)) }
            precondition(written == ciphertext.count, "a memory BIO takes every byte")
        }
        if !isEstablished {
            try advanceHandshake()
            guard isEstablished else { return [] }
        }
        return try readPlaintext()
    }

    /// Feeds `ciphertext` from the server (see `receive(_:)` for spans).
    public mutating func receive(_ ciphertext: [UInt8]) throws(TLSError) -> [UInt8] {
        let whole = ciphertext[...]  // ArraySlice.span back-deploys; Array.span needs the 2025 systems
        return try receive(whole.span)
    }

    /// Encrypts `plaintext` (held back until the handshake ends); the records are then in
    /// `takeOutput()`.
    public mutating func send(_ plaintext: [UInt8]) throws(TLSError) {
        guard !failed else { throw TLSError(.protocolError, "the TLS session already failed") }
        guard isEstablished else {
            waiting += plaintext
            return
        }
        try write(plaintext)
    }

    /// The ciphertext to send to the server now (empty when there is none).
    public mutating func takeOutput() -> [UInt8] {
        let pending = Int(BIO_ctrl_pending(outgoing))
        guard pending > 0 else { return [] }
        var bytes = [UInt8](repeating: 0, count: pending)
        let read = bytes.withUnsafeMutableBytes { BIO_read(outgoing, $0.baseAddress, Int32($0.count)) }
        if read < pending { bytes.removeLast(pending - max(0, Int(read))) }
        return bytes
    }

    /// Sends close_notify (in `takeOutput()`); nothing can be sent afterwards.
    public mutating func close() {
        guard isEstablished, !failed else { return }
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
        failed = true
    }

    /// The negotiated protocol version ("TLSv1.3"), once established.
    public var protocolVersion: String {
        String(cString: SSL_get_version(ssl))
    }

    /// The channel-binding data of the connection (RFC 5929, RFC 9266), once established:
    /// tls-exporter on TLS 1.3, tls-unique before it, tls-server-end-point on both.
    public var channelBindings: TLSChannelBindings {
        guard isEstablished else { return .none }
        var data: [ChannelBindingType: [UInt8]] = [:]
        var buffer = [UInt8](repeating: 0, count: 64)
        if unsafe buffer.withUnsafeMutableBufferPointer({
            unsafe tether_ssl_export_channel_binding(ssl, $0.baseAddress)
        }) == 1 {
            data[.tlsExporter] = Array(buffer[..<32])
        }
        let unique = Int(
            unsafe buffer.withUnsafeMutableBufferPointer { unsafe tether_ssl_tls_unique(ssl, $0.baseAddress) }
        )
        if unique > 0 { data[.tlsUnique] = Array(buffer[..<unique]) }
        let endPoint = Int(
            unsafe buffer.withUnsafeMutableBufferPointer { unsafe tether_ssl_server_end_point(ssl, $0.baseAddress) }
        )
        if endPoint > 0 { data[.tlsServerEndPoint] = Array(buffer[..<endPoint]) }
        return TLSChannelBindings(protocolVersion: protocolVersion, data: data)
    }

    // MARK: - Internals

    private mutating func advanceHandshake() throws(TLSError) {
        ERR_clear_error()
        let result = SSL_do_handshake(ssl)
        if result == 1 {
            if trust.evaluator != nil || !trust.pinnedPublicKeys.isEmpty, let reason = trust.check(peer()) {
                failed = true
                throw TLSError(.peerRejected, reason)
            }
            isEstablished = true
            if !waiting.isEmpty {
                let held = waiting
                waiting = []
                try write(held)
            }
            return
        }
        let error = SSL_get_error(ssl, result)
        if error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE { return }
        failed = true
        let verification = SSL_get_verify_result(ssl)
        if verification != X509_V_OK {
            let reason = String(cString: X509_verify_cert_error_string(verification))
            throw TLSError(.certificateRejected, "certificate verify failed: \(reason)")
        }
        throw TLSError(.handshakeFailed, Self.openSSLErrors("the TLS handshake failed"))
    }

    /// What the server presented (after the handshake).
    func peer() -> TLSPeer {
        var certificates: [[UInt8]] = []
        var hashes: [String] = []
        for index in 0..<tether_ssl_peer_chain_count(ssl) {
            guard let certificate = tether_ssl_peer_chain_certificate(ssl, index) else { continue }
            let length = Int(tether_x509_der_length(certificate))
            if length > 0 {
                var der = [UInt8](repeating: 0, count: length)
                _ = unsafe der.withUnsafeMutableBufferPointer { unsafe tether_x509_der(certificate, $0.baseAddress) }
                certificates.append(der)
            }
            var digest = [UInt8](repeating: 0, count: 32)
            let hashed = unsafe digest.withUnsafeMutableBufferPointer {
                unsafe tether_x509_public_key_sha256(certificate, $0.baseAddress)
            }
            if hashed == 1 { hashes.append(Base64.encode(digest)) }
        }
        let verification = SSL_get_verify_result(ssl)
        return TLSPeer(
            serverName: serverName,
            certificates: certificates,
            publicKeyHashes: hashes,
            isTrustedBySystem: verification == X509_V_OK,
            verificationError: verification == X509_V_OK
                ? nil : String(cString: X509_verify_cert_error_string(verification))
        )
    }

    private mutating func readPlaintext() throws(TLSError) -> [UInt8] {
        var plaintext: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16384)
        while true {
            ERR_clear_error()
            let count = buffer.withUnsafeMutableBytes { SSL_read(ssl, $0.baseAddress, Int32($0.count)) }
            if count > 0 {
                plaintext += buffer[..<Int(count)]
                continue
            }
            let error = SSL_get_error(ssl, count)
            switch error {
            case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
                return plaintext
            case SSL_ERROR_ZERO_RETURN:
                peerClosed = true
                return plaintext
            default:
                failed = true
                throw TLSError(.protocolError, Self.openSSLErrors("reading a TLS record failed"))
            }
        }
    }

    private mutating func write(_ plaintext: [UInt8]) throws(TLSError) {
        guard !plaintext.isEmpty else { return }
        ERR_clear_error()
        let written = plaintext.withUnsafeBytes { SSL_write(ssl, $0.baseAddress, Int32($0.count)) }
        // A memory BIO takes everything: a partial or refused write is a broken session.
        guard written == plaintext.count else {
            failed = true
            throw TLSError(.protocolError, Self.openSSLErrors("writing a TLS record failed"))
        }
    }

    /// `context`, with OpenSSL's queued error texts when there are any.
    static func openSSLErrors(_ context: String) -> String {
        var texts: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            texts.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return texts.isEmpty ? context : context + ": " + texts.joined(separator: "; ")
    }

    static func isIPAddress(_ name: String) -> Bool {
        name.contains(":") || (!name.isEmpty && name.allSatisfy { $0.isNumber || $0 == "." } && name.contains("."))
    }
}

/// What TLS sessions share: the trusted certificates (the system's trust store, plus an extra CA
/// file when given) and the protocol versions; an OpenSSL `SSL_CTX`.
///
/// Making one loads and parses the whole system trust store (milliseconds of CPU and a few
/// hundred kilobytes), so a context is made once and used for every session with the same
/// settings: each connection and reconnect. A context is immutable once made and may be used
/// from any thread (OpenSSL allows concurrent `SSL_new` on a context that is no longer changed).
/// The CA file is read when the context is made; make a new context to pick up a changed file.
public final class TLSContext: @unchecked Sendable {
    // Sendable: the SSL_CTX is fully configured in `init` and never changed afterwards.
    let pointer: OpaquePointer

    /// A context trusting the system's trust store and `additionalTrustedCertificates` (a PEM
    /// file of CA certificates, for a private CA), accepting TLS `minimumVersion` (default 1.2)
    /// up to `maximumVersion` (nil: the highest OpenSSL has, TLS 1.3).
    public init(
        additionalTrustedCertificates: String? = nil,
        minimumVersion: TLSClient.Configuration.Version = .tls12,
        maximumVersion: TLSClient.Configuration.Version? = nil
    ) throws(TLSError) {
        ERR_clear_error()
        guard let context = SSL_CTX_new(TLS_client_method()) else {
            throw TLSError(.configuration, TLSClient.openSSLErrors("SSL_CTX_new failed"))
        }
        func fail(_ message: String) -> TLSError {
            let error = TLSError(.configuration, TLSClient.openSSLErrors(message))
            SSL_CTX_free(context)
            return error
        }
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        guard SSL_CTX_set_default_verify_paths(context) == 1 else { throw fail("cannot load the system's trust store") }
        if let file = additionalTrustedCertificates {
            guard SSL_CTX_load_verify_file(context, file) == 1 else {
                throw fail("cannot load the CA certificates in \(file)")
            }
        }
        guard tether_ssl_ctx_set_min_version(context, minimumVersion.openSSL) == 1 else {
            throw fail("cannot set the minimum TLS version")
        }
        if let maximumVersion {
            guard tether_ssl_ctx_set_max_version(context, maximumVersion.openSSL) == 1 else {
                throw fail("cannot set the maximum TLS version")
            }
        }
        pointer = context
    }

    deinit {
        SSL_CTX_free(pointer)
    }
}
