import TetherXML

/// A stanza sent under XEP-0198 and kept until the server acknowledges it.
enum SentStanza: Sendable {
    /// A stanza the app sent (handed back to it if it is never acknowledged).
    case app(XElement)
    /// A stanza the machine sent on its own (a ping, an answer), kept as the bytes to resend
    /// (`secret`: they hold a secret, such as a push registration's, that logs must not show).
    case own([UInt8], secret: Bool = false)
}
