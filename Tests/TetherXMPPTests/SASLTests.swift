import Testing
import TetherCore
import TetherTLS
import TetherTestSupport
import TetherXMPP

/// A provider that implements only `hash` (through OpenSSL): HMAC and PBKDF2 then come from the
/// protocol's default implementations, which must agree with OpenSSL's.
struct HashOnlyProvider: SCRAMHashProvider {
    func hash(_ algorithm: SCRAMHashAlgorithm, _ data: [UInt8]) -> [UInt8] {
        OpenSSLHashProvider().hash(algorithm, data)
    }
}

struct SCRAMVectorTests {
    struct Vector: Sendable, CustomTestStringConvertible {
        var mechanism: SCRAMClient.Mechanism
        var nonce: String
        var serverFirst: String
        var clientFinal: String
        var serverFinal: String
        var testDescription: String { mechanism.rawValue }
    }

    /// RFC 5802 §5 (SHA-1), RFC 7677 §3 (SHA-256), and SHA-512 computed with Python's hashlib on
    /// the RFC 7677 inputs with 10,000 iterations (no published vector exists).
    static let vectors = [
        Vector(
            mechanism: .sha1,
            nonce: "fyko+d2lbbFgONRv9qkxdawL",
            serverFirst: "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
            clientFinal: "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
            serverFinal: "v=rmF9pqV8S7suAoZWja4dJRkFsKQ="
        ),
        Vector(
            mechanism: .sha256,
            nonce: "rOprNGfwEbeRWgbNEkqO",
            serverFirst: "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
            clientFinal:
                "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
            serverFinal: "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        ),
        Vector(
            mechanism: .sha512,
            nonce: "rOprNGfwEbeRWgbNEkqO",
            serverFirst: "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=10000",
            clientFinal:
                "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=sScffJ11LZ4TfY4PVI/6/9rMIHpix12AijdjQOPWK26er2vRtW/osDSi/hegaCFWfI91sJZd0bevncVEhUg0wQ==",
            serverFinal:
                "v=RjtcFh+1kT0TmNH2klLiCXHiJLvMLwWuSSjecIns8FBSn0XXRb3iv2qU96STCkYC2Go0feONylPqhw46oweC5A=="
        ),
    ]

    @Test(arguments: vectors, [true, false])
    func publishedVector(_ vector: Vector, openSSLForEverything: Bool) throws {
        let provider: any SCRAMHashProvider = openSSLForEverything ? OpenSSLHashProvider() : HashOnlyProvider()
        var client = try SCRAMClient(
            mechanism: vector.mechanism,
            username: "user",
            password: "pencil",
            nonce: vector.nonce,
            hashProvider: provider
        )
        #expect(String(decoding: client.clientFirstMessage, as: UTF8.self) == "n,,n=user,r=" + vector.nonce)
        let final = try client.clientFinalMessage(serverFirst: Array(vector.serverFirst.utf8))
        #expect(String(decoding: final, as: UTF8.self) == vector.clientFinal)
        #expect(client.awaitsServerFinal && !client.isVerified)
        try client.verifyServerFinal(Array(vector.serverFinal.utf8))
        #expect(client.isVerified)
    }

    /// The RFC 5802 intermediate values (spec §12.1), step by step.
    @Test func intermediateValuesSHA1() {
        let provider = OpenSSLHashProvider()
        let salted = provider.pbkdf2(
            .sha1,
            password: Array("pencil".utf8),
            salt: Base64.decode("QSXCR+Q6sek8bf92")!,
            iterations: 4096
        )
        #expect(hex(salted) == "1d96ee3a529b5a5f9e47c01f229a2cb8a6e15f7d")
        let clientKey = provider.hmac(.sha1, key: salted, data: Array("Client Key".utf8))
        #expect(hex(clientKey) == "e234c47bf6c36696dd6d852b99aaa2ba26555728")
        #expect(hex(provider.hash(.sha1, clientKey)) == "e9d94660c39d65c38fbad91c358f14da0eef2bd6")
        #expect(
            hex(provider.hmac(.sha1, key: salted, data: Array("Server Key".utf8)))
                == "0fe09258b3ac852ba502cc62ba903eaacdbf7d31"
        )
    }

    @Test(arguments: SCRAMHashAlgorithm.allCases)
    func defaultImplementationsMatchOpenSSL(_ algorithm: SCRAMHashAlgorithm) {
        let openSSL = OpenSSLHashProvider()
        let fallback = HashOnlyProvider()
        var generator = SeededRandomNumberGenerator(seed: 7)
        for keyLength in [0, 1, 20, 64, 65, 128, 129, 300] {
            let key = (0..<keyLength).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let data = (0..<(keyLength * 3 % 200)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            #expect(openSSL.hmac(algorithm, key: key, data: data) == fallback.hmac(algorithm, key: key, data: data))
        }
        let salt = Array("salt".utf8)
        #expect(
            openSSL.pbkdf2(algorithm, password: Array("pw".utf8), salt: salt, iterations: 1)
                == fallback.pbkdf2(algorithm, password: Array("pw".utf8), salt: salt, iterations: 1)
        )
        #expect(
            openSSL.pbkdf2(algorithm, password: [], salt: salt, iterations: 50)
                == fallback.pbkdf2(algorithm, password: [], salt: salt, iterations: 50)
        )
    }

    func client(nonce: String = "abc", limits: SCRAMClient.Limits = .init()) throws -> SCRAMClient {
        try SCRAMClient(
            mechanism: .sha1,
            username: "user",
            password: "pencil",
            nonce: nonce,
            hashProvider: OpenSSLHashProvider(),
            limits: limits
        )
    }

    @Test func rejectsAForeignNonce() throws {
        var scram = try client(nonce: "fyko+d2lbbFgONRv9qkxdawL")
        #expect(throws: SCRAMError(.nonceMismatch, "The server's nonce does not extend the client's nonce.")) {
            try scram.clientFinalMessage(
                serverFirst: Array("r=XXXX+d2lbbFgONRv9qkxdawL3rfc,s=QSXCR+Q6sek8bf92,i=4096".utf8)
            )
        }
        var bare = try client(nonce: "abc")
        expectThrows(\SCRAMError.kind, .nonceMismatch) {
            try bare.clientFinalMessage(serverFirst: Array("r=abc,s=QSXCR+Q6sek8bf92,i=4096".utf8))
        }
    }

    @Test func rejectsAWrongServerSignature() throws {
        var scram = try client(nonce: "fyko+d2lbbFgONRv9qkxdawL")
        _ = try scram.clientFinalMessage(serverFirst: Array(Self.vectors[0].serverFirst.utf8))
        do {
            try scram.verifyServerFinal(Array("v=rmF9pqV8S7suAoZWja4dJRkFsKX=".utf8))
            Issue.record("a wrong v= was accepted")
        } catch {
            #expect(error.kind == .serverSignatureMismatch || error.kind == .malformedServerMessage)
        }
        #expect(!scram.isVerified)
        var other = try client(nonce: "fyko+d2lbbFgONRv9qkxdawL")
        _ = try other.clientFinalMessage(serverFirst: Array(Self.vectors[0].serverFirst.utf8))
        #expect(
            throws: SCRAMError(
                .serverSignatureMismatch,
                "The server's signature does not match: it does not know the password, or someone is in the middle."
            )
        ) {
            try other.verifyServerFinal(Array("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=".utf8))
        }
        var erred = try client(nonce: "fyko+d2lbbFgONRv9qkxdawL")
        _ = try erred.clientFinalMessage(serverFirst: Array(Self.vectors[0].serverFirst.utf8))
        #expect(throws: SCRAMError(.serverError, "The server reported the SCRAM error 'invalid-proof'.")) {
            try erred.verifyServerFinal(Array("e=invalid-proof".utf8))
        }
    }

    @Test(arguments: [
        "", "r=abcd", "r=abcd,s=!!!!,i=4096", "r=abcd,s=QSXCR+Q6sek8bf92,i=x", "r=abcd,s=QSXCR+Q6sek8bf92,i=-1",
        "m=ext,r=abcd,s=QSXCR+Q6sek8bf92,i=4096", "s=QSXCR+Q6sek8bf92,r=abcd,i=4096", "r=abcd,,i=4096", "x",
    ])
    func rejectsMalformedServerFirst(_ text: String) throws {
        var scram = try client()
        expectThrows(\SCRAMError.kind, .malformedServerMessage) {
            try scram.clientFinalMessage(serverFirst: Array(text.utf8))
        }
        // The exchange is over after a failure: no second try with the same nonce.
        expectThrows(\SCRAMError.kind, .unexpectedMessage) {
            try scram.clientFinalMessage(serverFirst: Array("r=abcd,s=QSXCR+Q6sek8bf92,i=4096".utf8))
        }
    }

    @Test func enforcesIterationBounds() throws {
        var low = try client()
        expectThrows(\SCRAMError.kind, .iterationCountRejected) {
            try low.clientFinalMessage(serverFirst: Array("r=abcd,s=QSXCR+Q6sek8bf92,i=4095".utf8))
        }
        var high = try client(limits: .init(minimumIterations: 1, maximumIterations: 10_000))
        expectThrows(\SCRAMError.kind, .iterationCountRejected) {
            try high.clientFinalMessage(serverFirst: Array("r=abcd,s=QSXCR+Q6sek8bf92,i=10001".utf8))
        }
        var fine = try client(limits: .init(minimumIterations: 1, maximumIterations: 10_000))
        _ = try fine.clientFinalMessage(serverFirst: Array("r=abcd,s=QSXCR+Q6sek8bf92,i=10".utf8))
    }

    @Test func serverFinalBeforeClientFinalIsRejected() throws {
        var scram = try client()
        expectThrows(\SCRAMError.kind, .unexpectedMessage) {
            try scram.verifyServerFinal(Array("v=rmF9pqV8S7suAoZWja4dJRkFsKQ=".utf8))
        }
    }

    @Test func escapesSASLNames() throws {
        #expect(SCRAMClient.saslname("a=b,c") == "a=3Db=2Cc")
        let scram = try SCRAMClient(
            mechanism: .sha256,
            username: "us=er,x",
            password: "p",
            nonce: "n",
            hashProvider: OpenSSLHashProvider()
        )
        #expect(String(decoding: scram.clientFirstMessage, as: UTF8.self) == "n,,n=us=3Der=2Cx,r=n")
    }

    @Test func prohibitedCharactersAreRejected() {
        expectThrows(\SCRAMError.kind, .prohibitedCharacter) {
            _ = try SCRAMClient(
                mechanism: .sha1,
                username: "a\u{7}b",
                password: "x",
                nonce: "n",
                hashProvider: OpenSSLHashProvider()
            )
        }
        expectThrows(\SCRAMError.kind, .prohibitedCharacter) {
            _ = try SCRAMClient(
                mechanism: .sha1,
                username: "a",
                password: "x\u{E000}",
                nonce: "n",
                hashProvider: OpenSSLHashProvider()
            )
        }
    }
}

struct SASLPrepTests {
    @Test func mapsAndProhibits() {
        #expect(SASLPrep.prepare("user") == "user")
        #expect(SASLPrep.prepare("I\u{AD}X") == "IX")  // RFC 4013 §3 example 1: soft hyphen mapped to nothing
        #expect(SASLPrep.prepare("user\u{A0}name") == "user name")  // non-ASCII space → space
        #expect(SASLPrep.prepare("\u{7}") == nil)  // RFC 4013 §3 example 6: prohibited
        #expect(SASLPrep.prepare("pässwörd") == "pässwörd")
        #expect(SASLPrep.prepare("a\u{FFFF}") == nil)
        #expect(SASLPrep.prepare("a\u{200E}") == nil)
    }

    @Test func plainMessage() {
        // RFC 4616 PLAIN: NUL authcid NUL passwd, base64 (Specs/xmpp/sasl.md): alice/alicepass.
        let expected = "AGFsaWNlAGFsaWNlcGFzcw=="
        #expect(Base64.encode([0] + Array("alice".utf8) + [0] + Array("alicepass".utf8)) == expected)
    }
}

struct Base64DecodingTests {
    @Test func roundTripsAndRejects() {
        var generator = SeededRandomNumberGenerator(seed: 3)
        for length in 0..<40 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            #expect(Base64.decode(Base64.encode(bytes)) == bytes)
        }
        for bad in ["a", "ab=c", "abc", "a===", "====", "ab!d", "ab==ab==", "QQ=A", "QR==", "QUI=\n"] {
            #expect(Base64.decode(bad) == nil, "\(bad)")
        }
        #expect(Base64.decode("QQ==") == [0x41])
        #expect(Base64.decode("") == [])
    }
}

func hex(_ bytes: [UInt8]) -> String {
    bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
}
