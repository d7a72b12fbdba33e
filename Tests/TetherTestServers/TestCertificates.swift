public import Foundation

/// A throw-away certificate authority and certificates it signed, made with the `openssl`
/// command in a temporary directory: for TLS tests that verify a server against a CA file.
public final class TestCertificates: Sendable {
    /// The directory holding every file (removed when released).
    public let directory: URL
    /// The CA's certificate (PEM): what a client trusts.
    public var caCertificate: String { directory.appendingPathComponent("ca.crt").path }
    /// A certificate for `localhost` and 127.0.0.1 signed by the CA, and its key (PEM).
    public var serverCertificate: String { directory.appendingPathComponent("localhost.crt").path }
    public var serverKey: String { directory.appendingPathComponent("localhost.key").path }
    /// A certificate for `other.test` only, signed by the CA, and its key (for host-name checks).
    public var otherCertificate: String { directory.appendingPathComponent("other.crt").path }
    public var otherKey: String { directory.appendingPathComponent("other.key").path }
    /// A self-signed certificate for `localhost` that no CA vouches for, and its key.
    public var selfSignedCertificate: String { directory.appendingPathComponent("self.crt").path }
    public var selfSignedKey: String { directory.appendingPathComponent("self.key").path }

    /// One set for the whole test process, made on first use (throws what `init()` threw).
    public static func shared() throws -> TestCertificates {
        try sharedResult.get()
    }

    private static let sharedResult = Result { try TestCertificates() }

    /// Makes the CA and the certificates (P-256 keys, valid for 30 days); throws, naming how to
    /// install it, when the `openssl` command is missing.
    public init() throws {
        guard RealServer.opensslCommand.isInstalled else {
            throw TestServerError(RealServer.opensslCommand.missingText)
        }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-certs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let d = directory.path
        let key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try run(
            "/usr/bin/openssl",
            ["req", "-x509"] + key + [
                "-days", "30", "-subj", "/CN=Tether Test CA", "-keyout", "\(d)/ca.key", "-out", "\(d)/ca.crt",
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            ]
        )
        try run(
            "/usr/bin/openssl",
            ["req"] + key + ["-subj", "/CN=localhost", "-keyout", "\(d)/localhost.key", "-out", "\(d)/localhost.csr"]
        )
        try "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
            .write(toFile: "\(d)/server.ext", atomically: true, encoding: .utf8)
        try run(
            "/usr/bin/openssl",
            [
                "x509", "-req", "-in", "\(d)/localhost.csr", "-CA", "\(d)/ca.crt", "-CAkey", "\(d)/ca.key",
                "-CAcreateserial", "-days", "30", "-out", "\(d)/localhost.crt", "-extfile", "\(d)/server.ext",
            ]
        )
        try run(
            "/usr/bin/openssl",
            ["req"] + key + ["-subj", "/CN=other.test", "-keyout", "\(d)/other.key", "-out", "\(d)/other.csr"]
        )
        try "subjectAltName=DNS:other.test\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
            .write(toFile: "\(d)/other.ext", atomically: true, encoding: .utf8)
        try run(
            "/usr/bin/openssl",
            [
                "x509", "-req", "-in", "\(d)/other.csr", "-CA", "\(d)/ca.crt", "-CAkey", "\(d)/ca.key",
                "-CAcreateserial", "-days", "30", "-out", "\(d)/other.crt", "-extfile", "\(d)/other.ext",
            ]
        )
        try run(
            "/usr/bin/openssl",
            ["req", "-x509"] + key + [
                "-days", "30", "-subj", "/CN=localhost", "-keyout", "\(d)/self.key", "-out", "\(d)/self.crt",
                "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
            ]
        )
    }

    /// The public key pin of the certificate at `path`, computed by the `openssl` command as RFC
    /// 7469 describes (base64 SHA-256 of the DER SubjectPublicKeyInfo): a check independent of
    /// the client's own computation.
    public func publicKeyPin(ofCertificate path: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = [
            "-c",
            "/usr/bin/openssl x509 -in '\(path)' -pubkey -noout | /usr/bin/openssl pkey -pubin -outform der"
                + " | /usr/bin/openssl dgst -sha256 -binary | base64",
        ]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let pin = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard process.terminationStatus == 0, pin.utf8.count == 44 else {
            throw TestServerError("could not compute the public key pin of \(path)")
        }
        return pin
    }

    deinit {
        try? FileManager.default.removeItem(at: directory)
    }
}
