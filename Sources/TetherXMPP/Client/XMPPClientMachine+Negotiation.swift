import TetherCore
import TetherXML

extension XMPPClientMachine.Negotiation {
    /// Whether our XML stream is open on the transport (not while TLS is being inserted).
    var streamIsOpen: Bool {
        if case .awaitingTLS = step { return false }
        return true
    }
}

extension XMPPClientMachine {
    // MARK: - The parse loop

    /// Pulls events from the parser while the stream of `generation` is current and reads XML.
    /// A restart (after SASL success) happens inside the loop, at the exact byte where
    /// `<success/>` ended; after `<proceed/>` the loop stops, the rest being TLS data.
    mutating func processStream(generation: TransportGeneration, now: Instant) {
        while currentGeneration == generation, acceptsXML {
            let event: XMLStreamEvent?
            do throws(XMLStreamError) {
                event = try parser.next()
            } catch {
                return xmlFailed(error, generation: generation, now: now)
            }
            guard let event else { return }
            switch state {
            case .negotiating(let negotiation): negotiationEvent(event, negotiation, now: now)
            case .online(let session): onlineEvent(event, session, now: now)
            case .closing: closingEvent(event, now: now)
            case .idle, .connecting, .waitingToReconnect, .suspended: return
            }
        }
    }

    /// The server's bytes are not acceptable XML (or exceed a limit).
    mutating func xmlFailed(_ error: XMLStreamError, generation: TransportGeneration, now: Instant) {
        if case .closing = state {
            enqueue(.close(generation: generation))
            return closingEnded(now: now)
        }
        let condition = StreamError.Condition(rawValue: error.condition.rawValue) ?? .notWellFormed
        protocolViolation(condition, "The server sent \(error)", generation: generation, now: now)
    }

    // MARK: - Negotiation

    mutating func negotiationEvent(_ event: XMLStreamEvent, _ negotiation: Negotiation, now: Instant) {
        let generation = negotiation.attempt.generation
        switch event {
        case .streamOpen(let header):
            streamHeaderReceived(header, negotiation, now: now)
        case .streamClose:
            sendRaw("</stream:stream>", generation: generation)
            lost(
                XMPPClientError(.connectionLost, "The server closed the stream during negotiation."),
                closeTransport: true,
                now: now
            )
        case .element(let element):
            if let streamError = StreamError(element) {
                return streamErrorReceived(
                    streamError,
                    generation: generation,
                    endpoint: negotiation.attempt.endpoint,
                    now: now
                )
            }
            switch negotiation.step {
            case .awaitingHeader, .awaitingTLS:
                unexpected(element, while: "opening the stream", generation: generation, now: now)
            case .awaitingFeatures:
                guard let features = StreamFeatures(element) else {
                    return unexpected(element, while: "waiting for stream features", generation: generation, now: now)
                }
                featuresReceived(features, negotiation, now: now)
            case .awaitingProceed:
                proceedReceived(element, negotiation, now: now)
            case .authenticating(let exchange):
                saslReceived(element, exchange, negotiation, now: now)
            case .resuming:
                resumptionAnswer(element, negotiation, now: now)
            case .binding(let id):
                bindAnswer(element, id: id, negotiation, now: now)
            case .startingSession(let id, let jid):
                sessionAnswer(element, id: id, jid: jid, negotiation, now: now)
            }
        }
    }

    /// An element that has no place in the current step.
    mutating func unexpected(_ element: XMLElement, while doing: String, generation: TransportGeneration, now: Instant)
    {
        protocolViolation(
            .undefinedCondition,
            "The server sent <\(element.localName) xmlns='\(element.namespace ?? "")'> while \(doing).",
            generation: generation,
            now: now
        )
    }

    /// The server's stream header (RFC 6120 §4.7): the streams namespace, `jabber:client`, and
    /// version 1.0 or later.
    private mutating func streamHeaderReceived(_ header: XMLStreamHeader, _ negotiation: Negotiation, now: Instant) {
        let generation = negotiation.attempt.generation
        guard header.name.local == "stream", header.name.namespace == XMPPNamespace.streams,
            header.defaultNamespace == XMPPNamespace.client
        else {
            return protocolViolation(
                .invalidNamespace,
                "The server's stream header is not a jabber:client stream.",
                generation: generation,
                now: now
            )
        }
        let major = header.attribute("version").flatMap { $0.split(separator: ".").first.flatMap { Int($0) } }
        guard let major, major >= 1 else {
            return protocolViolation(
                .unsupportedVersion,
                "The server speaks a pre-1.0 XMPP stream (version '\(header.attribute("version") ?? "")').",
                generation: generation,
                now: now
            )
        }
        var negotiation = negotiation
        negotiation.step = .awaitingFeatures
        state = .negotiating(negotiation)
    }

    /// What to do with the features: STARTTLS, SASL, resumption or binding (RFC 6120 §9.1).
    private mutating func featuresReceived(_ features: StreamFeatures, _ negotiation: Negotiation, now: Instant) {
        var negotiation = negotiation
        negotiation.features = features
        let generation = negotiation.attempt.generation
        if !negotiation.secured && !negotiation.authenticated {
            if features.startTLS && configuration.tls != .disabled {
                sendRaw("<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>", generation: generation)
                negotiation.step = .awaitingProceed
                state = .negotiating(negotiation)
                return
            }
            if features.startTLSRequired {
                return failNegotiation(
                    XMPPClientError(.tlsUnavailable, "The server requires TLS, which the configuration disables."),
                    generation: generation,
                    now: now
                )
            }
            if configuration.tls == .required {
                return failNegotiation(
                    XMPPClientError(.tlsUnavailable, "TLS is required, but the server does not offer STARTTLS."),
                    generation: generation,
                    now: now
                )
            }
        }
        if let feature = unsupportedRequiredFeature(features) {
            return failNegotiation(
                XMPPClientError(.unsupportedRequiredFeature, "The server requires the stream feature \(feature)."),
                generation: generation,
                now: now
            )
        }
        if !negotiation.authenticated {
            return startAuthentication(features, negotiation, now: now)
        }
        if let sm = streamManagement, sm.isResumable {
            if configuration.streamManagement != nil, features.streamManagementVersions.contains(3),
                let previous = sm.resumptionID
            {
                sendRaw(
                    "<resume xmlns='urn:xmpp:sm:3' previd='\(Self.attributeText(previous))' h='\(sm.inbound)'/>",
                    generation: generation
                )
                negotiation.step = .resuming
                state = .negotiating(negotiation)
                return
            }
            resumptionImpossible(nil)
        }
        guard features.bind else {
            return protocolViolation(
                .undefinedCondition,
                "The server offers no resource binding after authentication.",
                generation: generation,
                now: now
            )
        }
        sendBind(negotiation)
    }

    /// The first feature the server marks `<required/>` that this client will not negotiate.
    private func unsupportedRequiredFeature(_ features: StreamFeatures) -> String? {
        for feature in features.element.children where feature.firstChild("required") != nil {
            switch (feature.namespace, feature.localName) {
            case (XMPPNamespace.tls, "starttls"), (XMPPNamespace.sasl, "mechanisms"), (XMPPNamespace.bind, "bind"),
                (XMPPNamespace.session, "session"):
                continue
            case (XMPPNamespace.streamManagement3, "sm") where configuration.streamManagement != nil:
                continue
            default:
                return "<\(feature.localName) xmlns='\(feature.namespace ?? "")'>"
            }
        }
        return nil
    }

    private mutating func proceedReceived(_ element: XMLElement, _ negotiation: Negotiation, now: Instant) {
        let generation = negotiation.attempt.generation
        guard element.namespace == XMPPNamespace.tls else {
            return unexpected(element, while: "waiting for STARTTLS to proceed", generation: generation, now: now)
        }
        switch element.localName {
        case "proceed":
            // TLS starts with the next byte: whatever followed <proceed/> belongs to it.
            let buffered = parser.restart()
            var negotiation = negotiation
            negotiation.step = .awaitingTLS
            state = .negotiating(negotiation)
            enqueue(
                .startTLS(serverName: configuration.jid.domainpart, generation: generation, bufferedBytes: buffered)
            )
        case "failure":
            lost(
                XMPPClientError(.tlsUnavailable, "The server refused STARTTLS."),
                closeTransport: true,
                now: now
            )
        default:
            unexpected(element, while: "waiting for STARTTLS to proceed", generation: generation, now: now)
        }
    }

    // MARK: - SASL

    private mutating func startAuthentication(_ features: StreamFeatures, _ negotiation: Negotiation, now: Instant) {
        let generation = negotiation.attempt.generation
        let chosen: SASLMechanism
        switch SASLMechanism.choose(
            offered: features.mechanisms,
            preferred: configuration.mechanisms,
            secured: negotiation.secured,
            allowPlainOnCleartext: configuration.allowPlainOnCleartext
        ) {
        case .success(let mechanism): chosen = mechanism
        case .failure(let error): return failNegotiation(error, generation: generation, now: now)
        }
        guard let username = configuration.jid.localpart else {
            return failNegotiation(
                XMPPClientError(.invalidConfiguration, "The JID \(configuration.jid) has no localpart to log in with."),
                generation: generation,
                now: now
            )
        }
        let exchange: SASLExchange
        let initialResponse: String
        if let scramMechanism = chosen.scram {
            do throws(SCRAMError) {
                let scram = try SCRAMClient(
                    mechanism: scramMechanism,
                    username: username,
                    password: configuration.password,
                    nonce: makeNonce(),
                    hashProvider: hashProvider,
                    limits: configuration.scramLimits
                )
                initialResponse = Base64.encode(scram.clientFirstMessage)
                exchange = .scram(scram)
            } catch {
                return failNegotiation(
                    XMPPClientError(.invalidConfiguration, error.message),
                    generation: generation,
                    now: now
                )
            }
        } else {
            guard let message = SASLMechanism.plainMessage(username: username, password: configuration.password) else {
                return failNegotiation(
                    XMPPClientError(
                        .invalidConfiguration,
                        "The user name or password contains a prohibited character."
                    ),
                    generation: generation,
                    now: now
                )
            }
            initialResponse = message
            exchange = .plain
        }
        send(
            SASLElement.auth(mechanism: chosen.rawValue, initialResponse: initialResponse).element,
            generation: generation,
            containsCredentials: true
        )
        var negotiation = negotiation
        negotiation.step = .authenticating(exchange)
        state = .negotiating(negotiation)
    }

    private mutating func saslReceived(
        _ element: XMLElement,
        _ exchange: SASLExchange,
        _ negotiation: Negotiation,
        now: Instant
    ) {
        let generation = negotiation.attempt.generation
        guard let sasl = SASLElement(element) else {
            return unexpected(element, while: "authenticating", generation: generation, now: now)
        }
        var negotiation = negotiation
        switch sasl {
        case .challenge(let text):
            guard case .scram(var scram) = exchange else {
                return unexpected(element, while: "authenticating with PLAIN", generation: generation, now: now)
            }
            guard let data = Self.saslData(text) else {
                return protocolViolation(
                    .badFormat,
                    "A SASL challenge is not base64.",
                    generation: generation,
                    now: now
                )
            }
            do throws(SCRAMError) {
                if scram.awaitsServerFinal {
                    // Some servers send the server-final-message as a challenge; the response
                    // is then empty and <success/> follows.
                    try scram.verifyServerFinal(data)
                    send(SASLElement.response("").element, generation: generation)
                } else {
                    let final = try scram.clientFinalMessage(serverFirst: data)
                    send(
                        SASLElement.response(Base64.encode(final)).element,
                        generation: generation,
                        containsCredentials: true
                    )
                }
            } catch {
                return serverAuthenticationFailed(error, generation: generation, now: now)
            }
            negotiation.step = .authenticating(.scram(scram))
            state = .negotiating(negotiation)
        case .success(let text):
            if case .scram(var scram) = exchange {
                if scram.awaitsServerFinal {
                    guard let data = text.flatMap(Self.saslData), !data.isEmpty else {
                        return serverAuthenticationFailed(
                            SCRAMError(.malformedServerMessage, "SASL success came without the server's signature."),
                            generation: generation,
                            now: now
                        )
                    }
                    do throws(SCRAMError) {
                        try scram.verifyServerFinal(data)
                    } catch {
                        return serverAuthenticationFailed(error, generation: generation, now: now)
                    }
                }
                guard scram.isVerified else {
                    return serverAuthenticationFailed(
                        SCRAMError(.unexpectedMessage, "SASL success came before the SCRAM exchange ended."),
                        generation: generation,
                        now: now
                    )
                }
            }
            // Restart the stream at the exact byte where <success/> ended (RFC 6120 §6.4.6).
            negotiation.authenticated = true
            negotiation.step = .awaitingHeader
            negotiation.features = nil
            state = .negotiating(negotiation)
            let rest = parser.restart()
            sendStreamHeader(generation: generation, secured: negotiation.secured)
            parser.append(rest.span)
        case .failure(let condition, let text):
            var message = "Authentication failed (\(condition))"
            if let text, !text.isEmpty { message += ": \(text)" }
            if !message.hasSuffix(".") { message += "." }
            failNegotiation(
                XMPPClientError(.authenticationFailed, message, saslCondition: condition),
                generation: generation,
                now: now
            )
        case .auth, .response, .abort:
            unexpected(element, while: "authenticating", generation: generation, now: now)
        }
    }

    /// SASL payload text: `=` (or nothing) is empty, anything else base64.
    static func saslData(_ text: String) -> [UInt8]? {
        text.isEmpty || text == "=" ? [] : Base64.decode(text)
    }

    private mutating func serverAuthenticationFailed(
        _ error: SCRAMError,
        generation: TransportGeneration,
        now: Instant
    ) {
        send(SASLElement.abort.element, generation: generation)
        failNegotiation(XMPPClientError(.serverAuthenticationFailed, error.message), generation: generation, now: now)
    }

    // MARK: - Resumption, binding, session

    private mutating func resumptionAnswer(_ element: XMLElement, _ negotiation: Negotiation, now: Instant) {
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
    private mutating func resumptionImpossible(_ condition: StanzaError.Condition?) {
        let unacknowledged = streamManagement?.unacknowledgedAppStanzas ?? []
        streamManagement = nil
        emit(.resumeFailed(condition))
        reportUnacknowledged(unacknowledged)
        failPendingIQs(XMPPClientError(.connectionLost, "The previous session could not be resumed."))
    }

    private mutating func sendBind(_ negotiation: Negotiation) {
        let id = makeID("bind")
        let resource = configuration.requestedResource.map {
            [XMLNode.element(XMLElement(XMLName("resource", namespace: XMPPNamespace.bind), children: [.text($0)]))]
        }
        let bind = XMLElement(XMLName("bind", namespace: XMPPNamespace.bind), children: resource ?? [])
        send(XMPPIQ.set(bind, id: id).element, generation: negotiation.attempt.generation)
        var negotiation = negotiation
        negotiation.step = .binding(id: id)
        state = .negotiating(negotiation)
    }

    /// The answer to our own iq during binding, or nil (and a protocol violation for anything
    /// else than a stanza, which is ignored: there is no session to deliver it to yet).
    private mutating func negotiationIQAnswer(
        _ element: XMLElement,
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

    private mutating func bindAnswer(_ element: XMLElement, id: String, _ negotiation: Negotiation, now: Instant) {
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
                XMPPIQ.set(XMLElement(XMLName("session", namespace: XMPPNamespace.session)), id: sessionID).element,
                generation: generation
            )
            var negotiation = negotiation
            negotiation.step = .startingSession(id: sessionID, jid: jid)
            state = .negotiating(negotiation)
            return
        }
        establishSession(negotiation, jid: jid, now: now)
    }

    private mutating func sessionAnswer(
        _ element: XMLElement,
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
    private mutating func establishSession(_ negotiation: Negotiation, jid: JID, now: Instant) {
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
    private mutating func goOnline(_ negotiation: Negotiation, jid: JID, resumed: Bool, now: Instant) {
        timers.cancel(.connectAttempt)
        schedule?.connectionEstablished()
        boundJID = jid
        let autoPing = configuration.autoPing.map { AutoPing(configuration: $0, now: now) }
        let session = Session(
            generation: negotiation.attempt.generation,
            endpoint: negotiation.attempt.endpoint,
            jid: jid,
            secured: negotiation.secured,
            autoPing: autoPing
        )
        state = .online(session)
        if let autoPing { timers.set(.ping, at: autoPing.deadline) }
        if resumed {
            emit(.resumed(jid))
            // Everything the server did not get is sent again, in order, with its old number.
            let resend = streamManagement?.unacknowledged.elements ?? []
            for stanza in resend {
                switch stanza {
                case .app(let element): send(element, generation: session.generation)
                case .own(let bytes): enqueue(.send(bytes, generation: session.generation, containsCredentials: false))
                }
            }
            flushOutbox(session, now: now)
            if !resend.isEmpty { requestAck(generation: session.generation) }
            return
        }
        emit(.connected(jid))
        if configuration.fetchRosterOnConnect {
            let id = makeID("roster")
            pendingIQs[id] = PendingIQ(deadline: now + configuration.iqTimeout, to: nil, purpose: .rosterFetch)
            armIQTimer()
            sendOwnStanza(RosterQuery.request().element.settingAttribute("id", to: id), session: session, now: now)
        }
        if let presence = configuration.initialPresence {
            sendOwnStanza(presence.element, session: session, now: now)
        }
        flushOutbox(session, now: now)
    }

    /// Text for a single-quoted attribute value.
    static func attributeText(_ value: String) -> String {
        var bytes: [UInt8] = []
        XMLSerializer.appendAttributeValue(value, &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }
}
