import TetherCore
import TetherXML

extension XMPPClientMachine {
    // MARK: - Resumption, binding, session

    mutating func resumptionAnswer(_ element: XElement, _ negotiation: Negotiation, now: Instant) {
        let generation = negotiation.attempt.generation
        guard element.namespace == XMPPNamespace.streamManagement3, var sm = streamManagement else {
            return unexpected(element, while: "resuming the session", generation: generation, now: now)
        }
        switch element.localName {
        case "resumed":
            guard let h = StreamManagement.h(of: element) else {
                return protocolViolation(.undefinedCondition, "<resumed/> without h.", generation: generation, now: now)
            }
            if case .tooHigh(let h, let sent) = sm.acknowledge(h) {
                return handledCountTooHigh(h: h, sent: sent, generation: generation, now: now)
            }
            streamManagement = sm
            goOnline(negotiation, jid: boundJID ?? configuration.jid, resumed: true, now: now)
        case "failed":
            if let h = StreamManagement.h(of: element), case .acknowledged = sm.acknowledge(h) {
                streamManagement = sm
            }
            let condition = element.children.lazy.compactMap { StanzaError.Condition(rawValue: $0.localName) }.first
            resumptionImpossible(condition)
            guard negotiation.features?.bind == true else {
                return protocolViolation(
                    .undefinedCondition,
                    "The server offers no resource binding after a failed resumption.",
                    generation: generation,
                    now: now
                )
            }
            sendBind(negotiation)
        default:
            unexpected(element, while: "resuming the session", generation: generation, now: now)
        }
    }

    /// The old session cannot be resumed: report it, hand back what it never acknowledged, end
    /// its pending iq requests; a new session follows.
    mutating func resumptionImpossible(_ condition: StanzaError.Condition?) {
        let unacknowledged = streamManagement?.unacknowledgedAppStanzas ?? []
        streamManagement = nil
        health.failedResumes += 1
        emit(.resumeFailed(condition))
        reportUnacknowledged(unacknowledged)
        failPendingIQs(XMPPClientError(.connectionLost, "The previous session could not be resumed."))
    }

    mutating func sendBind(_ negotiation: Negotiation) {
        let id = makeID("bind")
        let resource = configuration.requestedResource.map {
            [XNode.element(XElement(XMLName("resource", namespace: XMPPNamespace.bind), children: [.text($0)]))]
        }
        let bind = XElement(XMLName("bind", namespace: XMPPNamespace.bind), children: resource ?? [])
        send(XMPPIQ.set(bind, id: id).element, generation: negotiation.attempt.generation)
        var negotiation = negotiation
        negotiation.step = .binding(id: id)
        state = .negotiating(negotiation)
    }

    /// The answer to our own iq during binding, or nil (and a protocol violation for anything
    /// else than a stanza, which is ignored: there is no session to deliver it to yet).
    mutating func negotiationIQAnswer(
        _ element: XElement,
        id: String,
        _ negotiation: Negotiation,
        doing: String,
        now: Instant
    ) -> XMPPIQ? {
        guard let iq = XMPPIQ(element), iq.id == id, !iq.type.isRequest else {
            if Stanza(element) == nil {
                unexpected(element, while: doing, generation: negotiation.attempt.generation, now: now)
            }
            return nil
        }
        return iq
    }

    mutating func bindAnswer(_ element: XElement, id: String, _ negotiation: Negotiation, now: Instant) {
        guard let iq = negotiationIQAnswer(element, id: id, negotiation, doing: "binding a resource", now: now) else {
            return
        }
        let generation = negotiation.attempt.generation
        guard iq.type == .result else {
            let error = iq.error ?? StanzaError(type: nil, condition: .undefinedCondition)
            return failNegotiation(
                XMPPClientError(
                    .bindFailed,
                    "Resource binding failed (\(error.condition.rawValue)).",
                    stanzaError: error
                ),
                generation: generation,
                now: now
            )
        }
        guard let text = iq.payload?.firstChild("jid", namespace: XMPPNamespace.bind)?.text,
            let jid = JID(text), jid.resourcepart != nil
        else {
            return protocolViolation(
                .undefinedCondition,
                "The bind result carries no full JID.",
                generation: generation,
                now: now
            )
        }
        if let features = negotiation.features, features.session, !features.sessionOptional {
            let sessionID = makeID("sess")
            send(
                XMPPIQ.set(XElement(XMLName("session", namespace: XMPPNamespace.session)), id: sessionID).element,
                generation: generation
            )
            var negotiation = negotiation
            negotiation.step = .startingSession(id: sessionID, jid: jid)
            state = .negotiating(negotiation)
            return
        }
        establishSession(negotiation, jid: jid, now: now)
    }

    mutating func sessionAnswer(
        _ element: XElement,
        id: String,
        jid: JID,
        _ negotiation: Negotiation,
        now: Instant
    ) {
        guard let iq = negotiationIQAnswer(element, id: id, negotiation, doing: "starting the session", now: now)
        else { return }
        guard iq.type == .result else {
            let error = iq.error ?? StanzaError(type: nil, condition: .undefinedCondition)
            return failNegotiation(
                XMPPClientError(
                    .sessionFailed,
                    "Session establishment failed (\(error.condition.rawValue)).",
                    stanzaError: error
                ),
                generation: negotiation.attempt.generation,
                now: now
            )
        }
        establishSession(negotiation, jid: jid, now: now)
    }

    /// A new session: XEP-0198 enabled when offered and configured, then online. Counting of
    /// our stanzas starts with `<enable/>` (XEP-0198 §4); the answer is handled online.
    mutating func establishSession(_ negotiation: Negotiation, jid: JID, now: Instant) {
        streamManagement = nil
        if let sm = configuration.streamManagement, negotiation.features?.streamManagementVersions.contains(3) == true {
            var enable = "<enable xmlns='urn:xmpp:sm:3'"
            if sm.resume { enable += " resume='true'" }
            if let time = sm.preferredResumptionTime { enable += " max='\(max(1, time.components.seconds))'" }
            sendRaw(enable + "/>", generation: negotiation.attempt.generation)
            streamManagement = StreamManagement()
        }
        goOnline(negotiation, jid: jid, resumed: false, now: now)
    }

    /// The stream is online: timers, events, the roster, initial presence, queued stanzas.
    mutating func goOnline(_ negotiation: Negotiation, jid: JID, resumed: Bool, now: Instant) {
        timers.cancel(.connectAttempt)
        schedule?.connectionEstablished()
        boundJID = jid
        health.onlineSince = now
        if resumed { health.resumes += 1 }
        let autoPing = configuration.autoPing.map { AutoPing(configuration: $0) }
        lastReceived = now
        let session = Session(
            generation: negotiation.attempt.generation,
            endpoint: negotiation.attempt.endpoint,
            jid: jid,
            secured: negotiation.secured,
            authentication: negotiation.authentication,
            autoPing: autoPing,
            clientStateIndication: negotiation.features?.clientStateIndication ?? false
        )
        state = .connected(session)
        if let autoPing { timers.set(.ping, at: autoPing.deadline(lastReceived: lastReceived)) }
        if let idle = serverLimits?.idleSeconds {
            bytesSentAtKeepAliveCheck = health.bytesSent
            timers.set(.keepAlive, at: now + .seconds(max(1, idle / 3)))
        } else {
            timers.cancel(.keepAlive)
        }
        if device.application == .background { applicationStateApplies(background: true) }
        if resumed {
            emit(.resumed(jid))
            // Everything the server did not get is sent again, in order, with its old number.
            let resend = streamManagement?.unacknowledged.elements ?? []
            for stanza in resend {
                switch stanza {
                case .app(let element, let addedID): send(element, addingID: addedID, generation: session.generation)
                case .own(let bytes, let secret):
                    enqueue(.send(bytes, generation: session.generation, containsCredentials: secret))
                }
            }
            flushOutbox(session, now: now)
            if !resend.isEmpty { requestAck(generation: session.generation) }
            return
        }
        emit(.connected(jid))
        // With a position, the catch-up first: what arrives from here on (the offline store's
        // messages, sent when the initial presence is) waits for it. Without one, the query for
        // the latest id goes after the presence: it delivers nothing, and a server that holds back
        // its offline store from sessions that asked the archive first (prosody) must still send
        // those messages.
        let catchUpFirst = archivePosition != nil
        if catchUpFirst { startCatchUp(session, now: now) }
        if configuration.fetchRosterOnConnect {
            let id = makeID("roster")
            awaitIQ(id, PendingIQ(deadline: now + configuration.iqTimeout, to: nil, purpose: .rosterFetch))
            sendOwnStanza(RosterQuery.request().element.settingAttribute("id", to: id), session: session, now: now)
        }
        if let presence = configuration.initialPresence {
            sendOwnStanza(presence.element, session: session, now: now)
        }
        if !catchUpFirst { startCatchUp(session, now: now) }
        let sasl2 = negotiation.sasl2
        startSessionServices(session, carbonsEnabled: sasl2?.bind == true && sasl2?.carbons == true, now: now)
        flushOutbox(session, now: now)
    }

    /// Text for a single-quoted attribute value.
    static func attributeText(_ value: String) -> String {
        var bytes: [UInt8] = []
        XMLSerializer.appendAttributeValue(value, &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }
}
