import TetherCore

/// The SASL mechanisms the client can use, strongest first (the default preference).
public enum SASLMechanism: String, Hashable, Sendable, CaseIterable {
    case scramSHA512 = "SCRAM-SHA-512"
    case scramSHA256 = "SCRAM-SHA-256"
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
}
