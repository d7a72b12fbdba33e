public import TetherCore

/// The SASL mechanisms the client can use, strongest first (the default preference).
public enum SASLMechanism: String, Hashable, Sendable, CaseIterable {
    /// SCRAM-SHA-512.
    case scramSHA512 = "SCRAM-SHA-512"
    /// SCRAM-SHA-256.
    case scramSHA256 = "SCRAM-SHA-256"
    /// SCRAM-SHA-1.
    case scramSHA1 = "SCRAM-SHA-1"
    /// RFC 4616: the password itself goes to the server, so only over TLS unless allowed.
    case plain = "PLAIN"

    /// The SCRAM variant, nil for PLAIN.
    var scram: SCRAMClient.Mechanism? {
        switch self {
        case .scramSHA512: .sha512
        case .scramSHA256: .sha256
        case .scramSHA1: .sha1
        case .plain: nil
        }
    }

    /// The first of `preferred` that the server offers and the stream's protection allows.
    static func choose(
        offered: [String],
        preferred: [SASLMechanism],
        secured: Bool,
        allowPlainOnCleartext: Bool
    ) -> Result<SASLMechanism, XMPPClientError> {
        let offeredSet = Set(offered.map { $0.uppercased() })
        var plainRefused = false
        for mechanism in preferred where offeredSet.contains(mechanism.rawValue) {
            if mechanism == .plain && !secured && !allowPlainOnCleartext {
                plainRefused = true
                continue
            }
            return .success(mechanism)
        }
        let list = offered.isEmpty ? "no SASL mechanisms" : offered.joined(separator: ", ")
        let hint =
            plainRefused
            ? " PLAIN would send the password in clear text: it needs TLS or allowPlainOnCleartext." : ""
        return .failure(
            XMPPClientError(.noAcceptableMechanism, "The server offers \(list); none of them is acceptable." + hint)
        )
    }

    /// The PLAIN message `\0authcid\0password` (RFC 4616), base64-encoded; nil if SASLprep
    /// rejects either part.
    static func plainMessage(username: String, password: Secret) -> String? {
        guard let name = SASLPrep.prepare(username),
            let secret = password.withUnsafeText({ SASLPrep.prepare($0) })
        else { return nil }
        var bytes: [UInt8] = [0]
        bytes += name.utf8
        bytes.append(0)
        bytes += secret.utf8
        defer { for index in bytes.indices { bytes[index] = 0 } }
        return Base64.encode(bytes)
    }

    /// What a login chooses: the mechanism and what it says about channel binding (XEP-0440,
    /// RFC 5802 §6; `Specs/xmpp/channel-binding.md`). With a binding possible (`tls` has the
    /// data of a type the server supports) and a -PLUS variant of a preferred SCRAM mechanism
    /// offered, that variant, before any mechanism without -PLUS; otherwise as `choose` says,
    /// with the GS2 flag `y` when the client could have bound but the server offered no -PLUS
    /// mechanism at all.
    static func choose(
        offered: [String],
        preferred: [SASLMechanism],
        secured: Bool,
        allowPlainOnCleartext: Bool,
        tls: TLSChannelBindings,
        serverBindingTypes: [String]?,
        policy: ChannelBindingPolicy
    ) -> Result<(SASLMechanism, SCRAMClient.ChannelBinding), XMPPClientError> {
        let offeredSet = Set(offered.map { $0.uppercased() })
        let plusOffered = offeredSet.contains { $0.hasSuffix("-PLUS") }
        let binding = policy == .disabled ? nil : Self.binding(tls, serverTypes: serverBindingTypes)
        if let binding {
            for mechanism in preferred where mechanism.scram != nil && offeredSet.contains(mechanism.rawValue + "-PLUS")
            {
                return .success((mechanism, .bound(binding.type, data: binding.data)))
            }
        }
        if policy == .required {
            let why =
                if tls.data.isEmpty {
                    secured ? "the TLS layer gives no channel-binding data" : "the stream has no TLS"
                } else if !plusOffered {
                    "the server offers no -PLUS mechanism (\(offered.joined(separator: ", ")))"
                } else {
                    Self.noCommonType(tls, serverBindingTypes)
                }
            return .failure(
                XMPPClientError(.channelBindingUnavailable, "Channel binding is required but not possible: \(why).")
            )
        }
        // Could have bound, but the server offered no -PLUS mechanism: `y` (a server that does
        // support binding then knows the list was cut on the way).
        let couldBind = policy != .disabled && !plusOffered && !tls.data.isEmpty
        return choose(
            offered: offered,
            preferred: preferred,
            secured: secured,
            allowPlainOnCleartext: allowPlainOnCleartext
        ).map { ($0, couldBind ? .serverOfferedNone : .none) }
    }

    private static func noCommonType(_ tls: TLSChannelBindings, _ serverTypes: [String]?) -> String {
        let ours = tls.types.map(\.rawValue).joined(separator: ", ")
        let theirs = serverTypes?.joined(separator: ", ") ?? "not said"
        return "no channel-binding type is on both sides (this connection: \(ours); the server: \(theirs))"
    }

    /// The channel binding to use on `tls` with a server that supports `serverTypes`: the best
    /// type both have (tls-exporter, tls-unique, tls-server-end-point). A server that does not
    /// say is taken to support the default of its TLS version: tls-exporter on TLS 1.3
    /// (RFC 9266 §3), tls-unique before it (RFC 5802 §6).
    static func binding(
        _ tls: TLSChannelBindings,
        serverTypes: [String]?
    ) -> (type: ChannelBindingType, data: [UInt8])? {
        let assumed: ChannelBindingType = tls.protocolVersion == "TLSv1.3" ? .tlsExporter : .tlsUnique
        for type in tls.types where serverTypes?.contains(type.rawValue) ?? (type == assumed) {
            if let data = tls.data[type] { return (type, data) }
        }
        return nil
    }
}

/// Whether SCRAM logins are bound to the TLS connection under them (the -PLUS mechanisms,
/// XEP-0440). A bound login fails when someone in the middle relays it, even with a certificate
/// the device trusts.
public enum ChannelBindingPolicy: String, Hashable, Sendable, CaseIterable {
    /// Bind whenever the server offers a -PLUS mechanism and both sides have a channel-binding
    /// type; otherwise log in without, saying whether the client could have bound (default).
    case whenPossible
    /// Only bound logins: fail with `channelBindingUnavailable` when none is possible.
    case required
    /// Never bind (the GS2 flag `n`), for a server that mishandles channel binding.
    case disabled
}

/// How a stream logged in: the SASL mechanism as sent (`SCRAM-SHA-256-PLUS`) and the
/// channel-binding type it was bound with (nil: not bound).
public struct XMPPAuthentication: Hashable, Sendable, CustomStringConvertible {
    /// The mechanism's name as sent to the server.
    public var mechanism: String
    /// The channel-binding type of a -PLUS mechanism.
    public var channelBinding: ChannelBindingType?
    /// Whether the login was XEP-0388 SASL2 (else RFC 6120 SASL).
    public var sasl2: Bool
    /// Whether it used a FAST token (XEP-0484) instead of the password.
    public var fast: Bool

    /// A login's description.
    public init(mechanism: String, channelBinding: ChannelBindingType?, sasl2: Bool = false, fast: Bool = false) {
        self.mechanism = mechanism
        self.channelBinding = channelBinding
        self.sasl2 = sasl2
        self.fast = fast
    }

    public var description: String {
        mechanism + (channelBinding.map { " (\($0.rawValue))" } ?? "") + (sasl2 ? " over SASL2" : "")
            + (fast ? " with a FAST token" : "")
    }
}

/// A FAST token (XEP-0484): what the server gave for logging in without the password next time,
/// with the mechanism it is bound to and its expiry. The app keeps it as it keeps a password (the
/// keychain, inside `XMPPClientState`) and hands it back in `Configuration.state`. Its description never shows the
/// secret.
public struct XMPPFASTToken: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The HT mechanism the token is for (`HT-SHA-256-EXPR`, `-UNIQ`, `-ENDP`, `-NONE`).
    public var mechanism: String
    /// The secret.
    public var secret: Secret
    /// When it expires (XEP-0082 DateTime, as the server wrote it).
    public var expiry: String

    public var description: String { "FAST token for \(mechanism) until \(expiry)" }
}

// Only the machine makes tokens (from the server's <token/>); an app gets them from the
// `fastToken` event and back from its own storage, through Codable.
extension XMPPFASTToken {
    enum CodingKeys: String, CodingKey { case mechanism, secret, expiry }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        mechanism = try container.decode(String.self, forKey: .mechanism)
        secret = Secret(try container.decode(String.self, forKey: .secret))
        expiry = try container.decode(String.self, forKey: .expiry)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(mechanism, forKey: .mechanism)
        try secret.withUnsafeText { try container.encode($0, forKey: .secret) }
        try container.encode(expiry, forKey: .expiry)
    }

    /// The channel binding an HT mechanism uses (nil: `-NONE`), or nil for a name that is not
    /// an HT-SHA-256 mechanism.
    static func channelBinding(of mechanism: String) -> ChannelBindingType?? {
        switch mechanism {
        case "HT-SHA-256-EXPR": .some(.tlsExporter)
        case "HT-SHA-256-UNIQ": .some(.tlsUnique)
        case "HT-SHA-256-ENDP": .some(.tlsServerEndPoint)
        case "HT-SHA-256-NONE": .some(nil)
        default: nil
        }
    }
}
