import TetherXML

/// A stanza sent under XEP-0198 and kept until the server acknowledges it.
enum SentStanza: Sendable {
    /// A stanza the app sent (handed back to it if it is never acknowledged), with the id the
    /// connection gave it when it had none (written on the wire, added to the tree only when
    /// handed back).
    case app(XElement, addedID: String? = nil)
    /// A stanza the machine sent on its own (a ping, an answer), kept as the bytes to resend
    /// (`secret`: they hold a secret, such as a push registration's, that logs must not show).
    case own([UInt8], secret: Bool = false)

    /// The app's stanza as sent: with the id the connection added. Nil for the machine's own.
    var appStanza: XElement? {
        guard case .app(let element, let addedID) = self else { return nil }
        return addedID.map { element.settingAttribute("id", to: $0) } ?? element
    }
}
