public import TetherCore

/// Why a SCRAM exchange failed on the client's side (`message` never contains the password or
/// derived keys).
public typealias SCRAMError = TetherError<SCRAMErrorKind>

/// What went wrong in a SCRAM exchange (`SCRAMError`).
public enum SCRAMErrorKind: String, ErrorKind {
    /// The user name or password contains a character SASLprep prohibits (RFC 4013 §2.3).
    case prohibitedCharacter
    /// A server message is not in SCRAM's syntax (RFC 5802 §7).
    case malformedServerMessage
    /// The server's nonce does not start with the client's (RFC 5802 §5.1).
    case nonceMismatch
    /// The iteration count is outside the configured bounds.
    case iterationCountRejected
    /// The server's signature (`v=`) is not the expected one: the server does not know the
    /// password, or someone is in the middle.
    case serverSignatureMismatch
    /// The server reported an error (`e=`).
    case serverError
    /// A message arrived when the exchange did not expect one.
    case unexpectedMessage
    /// The server's hash of the mechanisms and channel-binding types it offered (XEP-0474 `h=`)
    /// does not match the lists the client saw: someone removed options on the way.
    case downgradeDetected
}

/// The client side of SCRAM (RFC 5802; SHA-256 in RFC 7677) as a value: three steps, no IO.
///
/// ```swift
/// var scram = try SCRAMClient(mechanism: .sha256, username: "user", password: "pencil",
///                             nonce: nonce, hashProvider: provider)
/// send(scram.clientFirstMessage)                                 // n,,n=user,r=…
/// send(try scram.clientFinalMessage(serverFirst: challenge))     // c=biws,r=…,p=…
/// try scram.verifyServerFinal(successData)                       // v=… must match
/// ```
///
/// The password is turned into the salted password as soon as the server's salt arrives and is
/// then dropped; the keys derived from it are dropped once the exchange ends.
///
/// Channel binding (RFC 5802 §6, the -PLUS mechanisms) is chosen with `channelBinding`: the GS2
/// header says `p=TYPE` and the client-final-message's `c=` carries the header and the TLS
/// connection's binding data, which the server compares with its own (`mechanismName` then ends
/// in `-PLUS`); `y` when the client could bind but the server offered no -PLUS mechanism (a
/// server that does support it then knows the list was cut on the way and fails the exchange);
/// `n` when the client cannot bind (no TLS, or no type both sides have).
public struct SCRAMClient: Sendable {
    /// The SCRAM mechanisms, strongest first.
    public enum Mechanism: String, Hashable, Sendable, CaseIterable {
        /// SCRAM-SHA-512 (RFC 7677's construction with SHA-512).
        case sha512 = "SCRAM-SHA-512"
        /// SCRAM-SHA-256 (RFC 7677).
        case sha256 = "SCRAM-SHA-256"
        /// SCRAM-SHA-1 (RFC 5802).
        case sha1 = "SCRAM-SHA-1"

        /// The hash function.
        public var algorithm: SCRAMHashAlgorithm {
            switch self {
            case .sha1: .sha1
            case .sha256: .sha256
            case .sha512: .sha512
            }
        }
    }

    /// Bounds on the server's iteration count: below the minimum a stolen exchange is cheap to
    /// attack, above the maximum a server (or someone in the middle) makes the client burn CPU.
    public struct Limits: Sendable, Hashable {
        /// The least accepted (default 4096, RFC 5802 §5.1's SHOULD and RFC 7677's minimum).
        public var minimumIterations: Int
        /// The most accepted (default 1,000,000: about a second of PBKDF2-SHA-512 on a phone).
        public var maximumIterations: Int

        /// Limits.
        public init(minimumIterations: Int = 4096, maximumIterations: Int = 1_000_000) {
            self.minimumIterations = minimumIterations
            self.maximumIterations = maximumIterations
        }
    }

    /// What the client says about channel binding: the GS2 header's flag (RFC 5802 §7).
    public enum ChannelBinding: Hashable, Sendable {
        /// `n`: the client does not bind (no TLS under it, or no type both sides have).
        case none
        /// `y`: the client could bind but the server offered no -PLUS mechanism.
        case serverOfferedNone
        /// `p=TYPE`: bound to the TLS connection's `data` of `type` (the -PLUS mechanisms).
        case bound(ChannelBindingType, data: [UInt8])

        /// The GS2 header: the flag, then no authorization identity.
        var gs2Header: String {
            switch self {
            case .none: "n,,"
            case .serverOfferedNone: "y,,"
            case .bound(let type, _): "p=\(type.rawValue),,"
            }
        }

        /// What `c=` carries, base64: the GS2 header, then the binding data when bound.
        var cbindInput: [UInt8] {
            if case .bound(_, let data) = self { return Array(gs2Header.utf8) + data }
            return Array(gs2Header.utf8)
        }
    }

    private enum Step: Sendable {
        case initial(password: Secret)
        case sentFinal(serverSignature: [UInt8])
        case verified
        case failed
    }

    /// The mechanism.
    public let mechanism: Mechanism
    private let hashProvider: any SCRAMHashProvider
    private let limits: Limits
    private let clientFirstBare: String
    private let nonce: String
    private var step: Step
    /// What the exchange says about channel binding.
    public let channelBinding: ChannelBinding
    /// The SASL mechanisms and channel-binding types (nil: not advertised) the client saw, for
    /// XEP-0474's check of the server's `h=` (nil: not checked).
    public let offered: (mechanisms: [String], channelBindingTypes: [String]?)?

    /// The mechanism's name as SASL lists it: `SCRAM-SHA-256`, or `SCRAM-SHA-256-PLUS` when bound.
    public var mechanismName: String {
        if case .bound = channelBinding { return mechanism.rawValue + "-PLUS" }
        return mechanism.rawValue
    }

    /// Starts an exchange for `username` (SASLprep'd and escaped as a saslname) with a fresh
    /// `nonce` (printable ASCII without commas; at least 16 random bytes' worth).
    public init(
        mechanism: Mechanism,
        username: String,
        password: Secret,
        nonce: String,
        hashProvider: any SCRAMHashProvider,
        limits: Limits = Limits(),
        channelBinding: ChannelBinding = .none,
        offered: (mechanisms: [String], channelBindingTypes: [String]?)? = nil
    ) throws(SCRAMError) {
        precondition(
            !nonce.isEmpty && nonce.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ",") },
            "a SCRAM nonce is printable ASCII without commas"
        )
        guard let preparedName = SASLPrep.prepare(username) else {
            throw SCRAMError(.prohibitedCharacter, "The user name contains a character SASLprep prohibits.")
        }
        guard password.withUnsafeText({ SASLPrep.prepare($0) }) != nil else {
            throw SCRAMError(.prohibitedCharacter, "The password contains a character SASLprep prohibits.")
        }
        self.mechanism = mechanism
        self.hashProvider = hashProvider
        self.limits = limits
        self.nonce = nonce
        self.channelBinding = channelBinding
        self.offered = offered
        clientFirstBare = "n=" + Self.saslname(preparedName) + ",r=" + nonce
        step = .initial(password: password)
    }

    /// `=` → `=3D` and `,` → `=2C` (RFC 5802 §5.1).
    public static func saslname(_ name: String) -> String {
        var result = ""
        result.reserveCapacity(name.utf8.count)
        for character in name.unicodeScalars {
            switch character {
            case "=": result += "=3D"
            case ",": result += "=2C"
            default: result.unicodeScalars.append(character)
            }
        }
        return result
    }

    /// `n,,n=USER,r=NONCE` (`y,,…` or `p=TYPE,,…` as `channelBinding` says).
    public var clientFirstMessage: [UInt8] { Array((channelBinding.gs2Header + clientFirstBare).utf8) }

    /// The client-final-message answering the server-first-message `serverFirst`
    /// (`r=…,s=…,i=…`).
    public mutating func clientFinalMessage(serverFirst: [UInt8]) throws(SCRAMError) -> [UInt8] {
        guard case .initial(let password) = step else {
            throw SCRAMError(.unexpectedMessage, "A second server-first-message arrived.")
        }
        step = .failed
        guard let text = String(validating: serverFirst, as: UTF8.self) else {
            throw SCRAMError(.malformedServerMessage, "The server-first-message is not UTF-8.")
        }
        let attributes = try Self.attributes(text)
        if attributes.first?.key == "m" {
            throw SCRAMError(.malformedServerMessage, "The server requires a SCRAM extension (m=) this client lacks.")
        }
        guard attributes.count >= 3, attributes[0].key == "r", attributes[1].key == "s", attributes[2].key == "i" else {
            throw SCRAMError(.malformedServerMessage, "The server-first-message is not r=…,s=…,i=….")
        }
        let combinedNonce = attributes[0].value
        guard combinedNonce.hasPrefix(nonce), combinedNonce.utf8.count > nonce.utf8.count else {
            throw SCRAMError(.nonceMismatch, "The server's nonce does not extend the client's nonce.")
        }
        guard combinedNonce.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ",") }) else {
            throw SCRAMError(.malformedServerMessage, "The server's nonce contains characters outside printable ASCII.")
        }
        guard let salt = Base64.decode(attributes[1].value), !salt.isEmpty else {
            throw SCRAMError(.malformedServerMessage, "The salt is not base64.")
        }
        guard let iterations = Int(attributes[2].value), iterations > 0 else {
            throw SCRAMError(.malformedServerMessage, "The iteration count is not a positive integer.")
        }
        guard iterations >= limits.minimumIterations, iterations <= limits.maximumIterations else {
            throw SCRAMError(
                .iterationCountRejected,
                "The iteration count \(iterations) is outside \(limits.minimumIterations)…\(limits.maximumIterations)."
            )
        }
        let algorithm = mechanism.algorithm
        let provider = hashProvider
        if let offered, let hash = attributes.dropFirst(3).first(where: { $0.key == "h" }) {
            let expected = Base64.encode(
                provider.hash(algorithm, Self.downgradeProtectionInput(offered.mechanisms, offered.channelBindingTypes))
            )
            guard hash.value == expected else {
                throw SCRAMError(
                    .downgradeDetected,
                    "The server's hash of what it offers does not match the mechanisms and channel-binding types "
                        + "this client saw: someone changed them on the way (XEP-0474)."
                )
            }
        }
        let passwordBytes = password.withUnsafeText { Array((SASLPrep.prepare($0) ?? "").utf8) }
        var saltedPassword = provider.pbkdf2(algorithm, password: passwordBytes, salt: salt, iterations: iterations)
        defer { Self.wipe(&saltedPassword) }
        var clientKey = provider.hmac(algorithm, key: saltedPassword, data: Array("Client Key".utf8))
        defer { Self.wipe(&clientKey) }
        let storedKey = provider.hash(algorithm, clientKey)
        var serverKey = provider.hmac(algorithm, key: saltedPassword, data: Array("Server Key".utf8))
        defer { Self.wipe(&serverKey) }
        let withoutProof = "c=" + Base64.encode(channelBinding.cbindInput) + ",r=" + combinedNonce
        let authMessage = Array((clientFirstBare + "," + text + "," + withoutProof).utf8)
        let clientSignature = provider.hmac(algorithm, key: storedKey, data: authMessage)
        var proof = clientKey
        for index in proof.indices { proof[index] ^= clientSignature[index] }
        step = .sentFinal(serverSignature: provider.hmac(algorithm, key: serverKey, data: authMessage))
        return Array((withoutProof + ",p=" + Base64.encode(proof)).utf8)
    }

    /// What XEP-0474 hashes: the mechanisms sorted (octet order) and joined by 0x1E, then, when
    /// the server advertised channel-binding types (XEP-0440), 0x1F and the types sorted and joined
    /// the same way.
    static func downgradeProtectionInput(_ mechanisms: [String], _ channelBindingTypes: [String]?) -> [UInt8] {
        func joined(_ names: [String]) -> [UInt8] {
            let sorted = names.map { Array($0.utf8) }.sorted { $0.lexicographicallyPrecedes($1) }
            return Array(sorted.joined(separator: [0x1E]))
        }
        var input = joined(mechanisms)
        if let channelBindingTypes { input += [0x1F] + joined(channelBindingTypes) }
        return input
    }

    /// Checks the server-final-message (`v=…`); throws unless it carries the expected signature.
    public mutating func verifyServerFinal(_ serverFinal: [UInt8]) throws(SCRAMError) {
        guard case .sentFinal(let expected) = step else {
            throw SCRAMError(.unexpectedMessage, "A server-final-message arrived before the client-final-message.")
        }
        step = .failed
        guard let text = String(validating: serverFinal, as: UTF8.self) else {
            throw SCRAMError(.malformedServerMessage, "The server-final-message is not UTF-8.")
        }
        let attributes = try Self.attributes(text)
        if let error = attributes.first, error.key == "e" {
            throw SCRAMError(.serverError, "The server reported the SCRAM error '\(error.value)'.")
        }
        guard let verifier = attributes.first, verifier.key == "v", let signature = Base64.decode(verifier.value)
        else {
            throw SCRAMError(.malformedServerMessage, "The server-final-message is not v=….")
        }
        // Compared in constant time: the signature is not secret, but nothing is lost.
        var difference: UInt8 = signature.count == expected.count ? 0 : 1
        for (a, b) in zip(signature, expected) { difference |= a ^ b }
        guard difference == 0 else {
            throw SCRAMError(
                .serverSignatureMismatch,
                "The server's signature does not match: it does not know the password, or someone is in the middle."
            )
        }
        step = .verified
    }

    /// Whether the server's signature was verified (the exchange ended successfully).
    public var isVerified: Bool {
        if case .verified = step { return true }
        return false
    }

    /// Whether the client-final-message was sent and the server's signature is awaited.
    public var awaitsServerFinal: Bool {
        if case .sentFinal = step { return true }
        return false
    }

    /// `a=value` pairs separated by commas (values may contain `=`).
    private static func attributes(_ text: String) throws(SCRAMError) -> [(key: String, value: String)] {
        var result: [(key: String, value: String)] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let bytes = part.utf8
            guard bytes.count >= 2, let first = bytes.first, bytes.dropFirst().first == UInt8(ascii: "="),
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(first)
                    || (UInt8(ascii: "A")...UInt8(ascii: "Z"))
                        .contains(first)
            else {
                throw SCRAMError(.malformedServerMessage, "A SCRAM attribute is not of the form a=value.")
            }
            result.append((String(part.prefix(1)), String(part.dropFirst(2))))
        }
        return result
    }

    private static func wipe(_ bytes: inout [UInt8]) {
        for index in bytes.indices { bytes[index] = 0 }
    }
}
