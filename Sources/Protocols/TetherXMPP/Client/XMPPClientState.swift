/// What an app keeps between launches for one account: the FAST token, the installation's
/// user-agent id, the archive position. The machine takes it in `Configuration.state` and hands
/// the latest out in every `stateChanged` event (and `XMPPClientMachine.clientState`); an iOS
/// app stores it in the keychain (it holds a secret), a server process in a file only its user
/// can read. Its description never shows the token's secret.
public struct XMPPClientState: Codable, Hashable, Sendable {
    /// The FAST token (XEP-0484) for the next login, with its expiry; nil: log in with the
    /// password (and ask for a token).
    public var fastToken: XMPPFASTToken?
    /// This installation's id for SASL2's `<user-agent>` (a UUID made at the first SASL2 login
    /// when nil): the server tells this installation's sessions from others' by it.
    public var userAgentID: String?
    /// The last message from the account's archive (XEP-0313) the app was given: the catch-up
    /// of the next new session starts after it.
    public var archivePosition: XMPPArchivePosition?

    /// A state; empty for an installation that has never logged in.
    public init(
        fastToken: XMPPFASTToken? = nil,
        userAgentID: String? = nil,
        archivePosition: XMPPArchivePosition? = nil
    ) {
        self.fastToken = fastToken
        self.userAgentID = userAgentID
        self.archivePosition = archivePosition
    }
}

extension XMPPClientState: CustomStringConvertible {
    /// The state without the token's secret.
    public var description: String {
        var parts: [String] = []
        if let fastToken { parts.append("fastToken: \(fastToken)") }
        if let userAgentID { parts.append("userAgentID: \(userAgentID)") }
        if let archivePosition { parts.append("archivePosition: \(archivePosition.id)") }
        return "XMPPClientState(\(parts.joined(separator: ", ")))"
    }
}

/// A place in the account's message archive (XEP-0313): the archive's id of a message
/// (XEP-0359 `<stanza-id by='user@domain'>`) and, when known, when it was archived.
public struct XMPPArchivePosition: Codable, Hashable, Sendable {
    /// The archive's id of the message.
    public var id: String
    /// When the message was archived (XEP-0082 date-time), when the archive said: a catch-up
    /// whose `id` the archive no longer knows starts from this time instead.
    public var timestamp: String?

    /// A position.
    public init(id: String, timestamp: String? = nil) {
        self.id = id
        self.timestamp = timestamp
    }
}
