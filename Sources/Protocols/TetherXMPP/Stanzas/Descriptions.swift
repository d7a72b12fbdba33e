// Readable one-line descriptions of what the XMPP machine hands out (events, stanzas, errors), for
// logs and debuggers. They name the stanza, its addresses, type and id, and say how long a body
// is without showing it: a description may end up in a log, and bodies, push options and tokens
// must not (`Secret` describes itself redacted).

/// The start every stanza's description shares: `KIND from FROM to TO, id ID` (each part only when
/// the stanza has it).
private func stanzaHeading(_ kind: String, from: JID?, to: JID?, id: String?) -> String {
    var text = kind
    if let from { text += " from \(from)" }
    if let to { text += " to \(to)" }
    if let id { text += ", id \(id)" }
    return text
}

extension XMPPMessage: CustomStringConvertible {
    /// `message chat from alice@example.com/phone to bob@example.com, id m1, body 12 characters`.
    public var description: String {
        var text = stanzaHeading("message \(type.rawValue)", from: from, to: to, id: id)
        if let body { text += ", body \(body.count) characters" }
        switch origin {
        case .live: break
        case .archive(let id, _): text += ", from the archive (\(id))"
        case .carbon(let sent): text += sent ? ", carbon of one sent" : ", carbon of one received"
        }
        if let error { text += ", error \(error)" }
        return text
    }
}

extension XMPPPresence: CustomStringConvertible {
    /// `presence available from alice@example.com/phone, show away`.
    public var description: String {
        var text = stanzaHeading("presence \(rawType ?? "available")", from: from, to: to, id: id)
        if let show { text += ", show \(show.rawValue)" }
        if let error { text += ", error \(error)" }
        return text
    }
}

extension XMPPIQ: CustomStringConvertible {
    /// `iq get to example.com, id iq1, <ping xmlns='urn:xmpp:ping'/>`.
    public var description: String {
        var text = stanzaHeading("iq \(type.rawValue)", from: from, to: to, id: id)
        if let payload {
            let namespace = payload.name.namespace.map { " xmlns='\($0)'" } ?? ""
            text += ", <\(payload.name.local)\(namespace)/>"
        }
        if let error { text += ", error \(error)" }
        return text
    }
}

extension StanzaError: CustomStringConvertible {
    /// `item-not-found (cancel): No such node`.
    public var description: String {
        var text = condition.rawValue
        if let type { text += " (\(type.rawValue))" }
        if let error = self.text { text += ": \(error)" }
        return text
    }
}

extension RosterItem: CustomStringConvertible {
    /// `bob@example.com ("Bob"), subscription both, groups Friends`.
    public var description: String {
        var text = jid.description
        if let name { text += " (\"\(name)\")" }
        text += ", subscription \(subscription.rawValue)"
        if !groups.isEmpty { text += ", groups \(groups.joined(separator: ", "))" }
        return text
    }
}

extension RosterQuery: CustomStringConvertible {
    /// `roster of 3 contacts (version 12)`.
    public var description: String {
        "roster of \(items.count) contacts" + (version.map { " (version \($0))" } ?? "")
    }
}

extension XMPPPushRegistration: CustomStringConvertible {
    /// `push to push.example.com, node n1` (its publish options, secrets, are not shown).
    public var description: String {
        "push to \(service), node \(node)"
            + (publishOptions.isEmpty ? "" : " (\(publishOptions.count) publish options)")
    }
}

extension XMPPClientMachine.IQOutcome: CustomStringConvertible {
    /// `result: iq result …`, `error: iq error …`, `timed out`, `not delivered: …`.
    public var description: String {
        switch self {
        case .result(let iq): "result: \(iq)"
        case .error(let iq): "error: \(iq)"
        case .timedOut: "timed out"
        case .notDelivered(let error): "not delivered: \(error)"
        }
    }
}

extension XMPPClientMachine.Event: CustomStringConvertible {
    /// One line per event: `connected: alice@example.com/phone`, `message chat from …`,
    /// `caught up: 12 messages`, `3 stanzas never acknowledged: message, message, iq`.
    public var description: String {
        switch self {
        case .lifecycle(let change): change.description
        case .resumeFailed(let condition): "resumption refused" + (condition.map { " (\($0.rawValue))" } ?? "")
        case .authenticated(let authentication): "authenticated: \(authentication)"
        case .fastToken(let token): "FAST token received: \(token)"
        case .stateChanged(let state): "state changed: \(state)"
        case .caughtUp(let count, let complete):
            "caught up: \(count) messages from the archive" + (complete ? "" : " (incomplete)")
        case .pushEnabled(let registration): "push enabled: \(registration)"
        case .pushDisabled(let registration): "push disabled: \(registration)"
        case .pushRefused(let error): "push refused: \(error)"
        case .fastTokenRefused(let condition): "FAST token refused (\(condition))"
        case .streamManagementEnabled(let resumable):
            "stream management enabled" + (resumable ? " (resumable)" : " (not resumable)")
        case .message(let message): message.description
        case .presence(let presence): presence.description
        case .subscriptionRequest(let from, let autoAccepted):
            "subscription request from \(from)" + (autoAccepted ? " (accepted)" : "")
        case .iqRequest(let iq): "request: \(iq)"
        case .iqResponse(let id, let outcome): "response to \(id): \(outcome)"
        case .roster(let roster): roster.description
        case .rosterPush(let item): "roster push: \(item)"
        case .unacknowledgedStanzas(let stanzas):
            "\(stanzas.count) stanzas never acknowledged: "
                + stanzas.map { $0.name.local }.joined(separator: ", ")
        }
    }
}
