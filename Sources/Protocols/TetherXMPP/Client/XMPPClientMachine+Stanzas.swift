import TetherCore
import TetherXML

extension XMPPClientMachine {
    mutating func stanzaReceived(_ element: XElement, _ session: Session, now: Instant) {
        health.messagesReceived += 1
        // The machine answers some stanzas itself (pings, iq requests), and those wait for the
        // server's acknowledgement like any other: a server that never acknowledges must not make
        // that queue grow without bound.
        // (The count read in place: binding the stream management state would copy it.)
        if let unacknowledged = streamManagement?.unacknowledged.count,
            unacknowledged >= 2 * configuration.maximumQueuedStanzas, let sm = streamManagement
        {
            streamManagement = nil
            reportUnacknowledged(sm.unacknowledgedAppStanzas)
            return protocolViolation(
                .resourceConstraint,
                "The server left \(sm.unacknowledged.count) stanzas unacknowledged.",
                generation: session.generation,
                now: now
            )
        }
        // (The name compared in place, not copied out for a `switch`.)
        if element.hasLocalName("message") {
            streamManagement?.handledInbound()
            messageReceived(element, session, now: now)
        } else if element.hasLocalName("iq") {
            streamManagement?.handledInbound()
            guard let iq = XMPPIQ(element) else { return }  // an unknown type: nothing to answer
            if iq.type.isRequest {
                iqRequestReceived(iq, session, now: now)
            } else {
                iqAnswerReceived(iq, session, now: now)
            }
        } else if element.hasLocalName("presence") {
            streamManagement?.handledInbound()
            presenceReceived(XMPPPresence(element)!, session, now: now)
        }
        // Anything else is not a stanza (RFC 6120 §8): nothing to count or deliver.
    }

    mutating func presenceReceived(_ presence: XMPPPresence, _ session: Session, now: Instant) {
        guard presence.type == .subscribe, let from = presence.from else {
            return emit(.presence(presence))
        }
        let contact = from.bare
        let accept = configuration.autoAcceptSubscriptionsFromContacts && rosterContacts.contains(contact)
        if accept {
            sendOwnStanza(XMPPPresence(type: .subscribed, to: contact).element, session: session, now: now)
        }
        emit(.subscriptionRequest(from: contact, autoAccepted: accept))
    }

    mutating func iqRequestReceived(_ iq: XMPPIQ, _ session: Session, now: Instant) {
        guard let id = iq.id else { return }  // unanswerable (RFC 6120 §8.2.3 requires an id)
        let from = iq.element.attribute("from")
        guard let payload = iq.payload else {
            return sendOwnStanza(
                iq.error(StanzaError(type: .modify, condition: .badRequest)).element,
                session: session,
                now: now
            )
        }
        let namespace = payload.namespace
        if namespace == XMPPNamespace.ping, payload.localName == "ping", iq.type == .get {
            // The most frequent request of all, answered without building a tree.
            return sendOwnStanza(
                bytes: Self.emptyResult(to: from, id: id, standalone: overWebSocket),
                session: session,
                now: now
            )
        }
        if iq.type == .set, payload.localName == "query", namespace == XMPPNamespace.roster {
            // A roster push is valid only from the user's own account (RFC 6121 §2.1.6).
            guard iq.from == nil || iq.from == session.jid.bare || iq.from == session.jid else {
                return sendOwnStanza(
                    iq.error(StanzaError(type: .cancel, condition: .serviceUnavailable)).element,
                    session: session,
                    now: now
                )
            }
            guard let query = RosterQuery(payload), query.items.count == 1, let item = query.items.first else {
                return sendOwnStanza(
                    iq.error(StanzaError(type: .modify, condition: .badRequest)).element,
                    session: session,
                    now: now
                )
            }
            sendOwnStanza(
                bytes: Self.emptyResult(to: from, id: id, standalone: overWebSocket),
                session: session,
                now: now
            )
            updateContacts(with: [item])
            return emit(.rosterPush(item))
        }
        if let namespace, configuration.handledIQNamespaces.contains(namespace) {
            return emit(.iqRequest(iq))
        }
        sendOwnStanza(
            iq.error(StanzaError(type: .cancel, condition: .serviceUnavailable)).element,
            session: session,
            now: now
        )
    }

    /// `<iq type='result' to='…' id='…'/>`, the bytes `XMPPIQ.result()` would serialise to
    /// (`standalone`: with `xmlns='jabber:client'`, as over WebSocket).
    static func emptyResult(to: String?, id: String, standalone: Bool = false) -> [UInt8] {
        var bytes = Array((standalone ? "<iq xmlns='jabber:client' type='result'" : "<iq type='result'").utf8)
        if let to {
            bytes += " to='".utf8
            XMLSerializer.appendAttributeValue(to, &bytes)
            bytes.append(UInt8(ascii: "'"))
        }
        bytes += " id='".utf8
        XMLSerializer.appendAttributeValue(id, &bytes)
        bytes += "'/>".utf8
        return bytes
    }

    mutating func iqAnswerReceived(_ iq: XMPPIQ, _ session: Session, now: Instant) {
        guard let id = iq.id else { return }
        // (Asked before the auto-ping is copied out to be changed: most answers are the app's.)
        if session.autoPing?.awaits(answer: id) == true, var autoPing = session.autoPing,
            let sentAt = autoPing.answered(id: id)
        {
            health.roundTrip(now - sentAt)
            var session = session
            session.autoPing = autoPing
            state = .connected(session)
            timers.set(.ping, at: autoPing.deadline(lastReceived: lastReceived))
            return
        }
        // Only the addressee may answer (RFC 6120 §8.2.3); anything else is an unknown id.
        // Taken out at once (one lookup), and put back when it is not the addressee's answer.
        guard let pending = pendingIQs.removeValue(forKey: id) else { return }
        guard Self.answer(from: iq.element.attribute("from"), matches: pending.to, session: session.jid) else {
            pendingIQs[id] = pending
            return
        }
        if pendingIQs.isEmpty { timers.cancel(.iqTimeout) }  // the timer stops with the last one
        switch pending.purpose {
        case .app:
            emit(.iqResponse(id: id, iq.type == .result ? .result(iq) : .error(iq)))
        case .rosterFetch:
            // A server without a roster answers with an error: there is then nothing to report.
            guard iq.type == .result, let query = iq.payload.flatMap(RosterQuery.init) else { return }
            rosterContacts.removeAll()
            updateContacts(with: query.items)
            emit(.roster(query))
        case .archive:
            archivePageAnswered(iq, session, now: now)
        case .push(let registration, let enable):
            if iq.type == .result {
                emit(enable ? .pushEnabled(registration) : .pushDisabled(registration))
            } else {
                emit(.pushRefused(iq.error ?? StanzaError(type: nil, condition: .undefinedCondition)))
            }
        case .carbons:
            break  // a server that refuses carbons leaves the app without copies, nothing more
        }
    }

    /// Whether an answer from `from` may answer a request sent to `to`: the user's own server and
    /// account answer for themselves (with or without `from`), anyone else only from the address
    /// the request went to.
    static func answer(from: JID?, matches to: JID?, session jid: JID) -> Bool {
        if isOwn(to, jid) { return isOwn(from, jid) }
        return from == to
    }

    /// `answer(from:matches:session:)` for `from` as written (nil when absent): an answer from the
    /// user's own server written as this client spells its JIDs (the common case) is recognised
    /// without parsing it; anything else is parsed and compared.
    static func answer(from text: String?, matches to: JID?, session jid: JID) -> Bool {
        if isOwn(to, jid), let text, isOwn(written: text, jid) { return true }
        return answer(from: text.flatMap(JID.init), matches: to, session: jid)
    }

    /// Whether `address` is the user's bare JID, full JID or server (nil: the server), compared
    /// part by part (no JID is built for the comparison).
    static func isOwn(_ address: JID?, _ jid: JID) -> Bool {
        guard let address else { return true }
        guard address.domainpart == jid.domainpart else { return false }
        if address.localpart == nil && address.resourcepart == nil { return true }  // the server
        return address.localpart == jid.localpart
            && (address.resourcepart == nil || address.resourcepart == jid.resourcepart)
    }

    /// `isOwn` for a JID as written, when its parts are exactly those of `jid` (already
    /// normalized, so the text parses to that JID); false when they are not, which `JID` parsing
    /// may still find equal (another spelling of the same address).
    static func isOwn(written text: String, _ jid: JID) -> Bool {
        let slash = text.firstIndex(of: "/")
        let head = text[..<(slash ?? text.endIndex)]
        let resource = slash.map { text[text.index(after: $0)...] }
        let at = head.firstIndex(of: "@")
        let domain = at.map { head[head.index(after: $0)...] } ?? head
        guard domain == jid.domainpart else { return false }
        guard let at else { return resource == nil }  // the server
        guard let localpart = jid.localpart, head[..<at] == localpart else { return false }
        guard let resource else { return true }
        return jid.resourcepart.map { resource == $0 } ?? false
    }

    mutating func updateContacts(with items: [RosterItem]) {
        guard configuration.autoAcceptSubscriptionsFromContacts else { return }
        for item in items {
            if item.subscription == .remove {
                rosterContacts.remove(item.jid.bare)
            } else {
                rosterContacts.insert(item.jid.bare)
            }
        }
    }

}
