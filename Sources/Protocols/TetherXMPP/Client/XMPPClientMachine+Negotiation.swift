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
        while acceptsXML(from: generation) {
            var next: XMLStreamEvent?
            do throws(XMLStreamError) {
                next = try parser.next()
            } catch {
                return xmlFailed(error, generation: generation, now: now)
            }
            guard var event = next.take() else { return }
            if overWebSocket {
                guard let translated = webSocketEvent(event, generation: generation, now: now) else { continue }
                event = translated
            }
            switch state {
            case .negotiating(let negotiation): negotiationEvent(event, negotiation, now: now)
            case .connected(let session): onlineEvent(event, session, now: now)
            case .closing: closingEvent(event, now: now)
            case .disconnected, .connectingTransport, .reconnectWaiting, .suspended: return
            }
        }
    }

    /// The server's bytes are not acceptable XML (or exceed a limit).
    mutating func xmlFailed(_ error: XMLStreamError, generation: TransportGeneration, now: Instant) {
        if case .closing = state {
            enqueue(.closeTransport(generation: generation))
            return closingEnded(now: now)
        }
        let condition = StreamError.Condition(rawValue: error.condition.rawValue) ?? .notWellFormed
        protocolViolation(condition, "The server sent \(error)", generation: generation, now: now)
    }

    // MARK: - Negotiation

    mutating func negotiationEvent(_ event: XMLStreamEvent, _ negotiation: Negotiation, now: Instant) {
        let generation = negotiation.attempt.generation
        var negotiation = negotiation
        if !negotiation.heardServer {
            // The target answers: it is not failing (whatever comes next).
            negotiation.heardServer = true
            failingTargets.removeAll { $0 == negotiation.attempt.target }
            state = .negotiating(negotiation)
        }
        switch event {
        case .streamOpen(let header):
            streamHeaderReceived(header, negotiation, now: now)
        case .streamClose:
            sendStreamClose(generation: generation)
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
                // The limits app stanzas meet are those of the logged-in stream (prosody's are 10,000
                // bytes before the login, 262,144 after); a queued stanza waits for those.
                if negotiation.authenticated { serverLimits = features.limits }
                featuresReceived(features, negotiation, now: now)
            case .awaitingProceed:
                proceedReceived(element, negotiation, now: now)
            case .authenticating(let exchange):
                if negotiation.sasl2 != nil {
                    sasl2Received(element, exchange, negotiation, now: now)
                } else {
                    saslReceived(element, exchange, negotiation, now: now)
                }
            case .awaitingSASL2Features(var outcome):
                guard let features = StreamFeatures(element) else {
                    // The session exists already (resumed or bound): keep its elements for when it
                    // is online.
                    guard outcome.resumedH != nil || outcome.boundJID != nil,
                        outcome.early.count < SASL2Outcome.maximumEarly
                    else {
                        return unexpected(
                            element,
                            while: "waiting for the features after SASL2",
                            generation: generation,
                            now: now
                        )
                    }
                    outcome.early.append(element)
                    var negotiation = negotiation
                    negotiation.step = .awaitingSASL2Features(outcome)
                    state = .negotiating(negotiation)
                    return
                }
                serverLimits = features.limits
                var negotiation = negotiation
                negotiation.features = features
                sasl2Completed(outcome, negotiation, now: now)
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
    mutating func unexpected(_ element: XElement, while doing: String, generation: TransportGeneration, now: Instant) {
        protocolViolation(
            .undefinedCondition,
            "The server sent <\(element.localName) xmlns='\(element.namespace ?? "")'> while \(doing).",
            generation: generation,
            now: now
        )
    }

    /// The server's stream header (RFC 6120 §4.7): the streams namespace, `jabber:client`, and
    /// version 1.0 or later.
    mutating func streamHeaderReceived(_ header: XMLStreamHeader, _ negotiation: Negotiation, now: Instant) {
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
    mutating func featuresReceived(_ features: StreamFeatures, _ negotiation: Negotiation, now: Instant) {
        var negotiation = negotiation
        negotiation.features = features
        let generation = negotiation.attempt.generation
        // Over WebSocket the URL's scheme decided TLS; STARTTLS has no place (RFC 7395 §3.8).
        if !negotiation.secured && !negotiation.authenticated && !overWebSocket {
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
    func unsupportedRequiredFeature(_ features: StreamFeatures) -> String? {
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

    mutating func proceedReceived(_ element: XElement, _ negotiation: Negotiation, now: Instant) {
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
                .request(
                    .startTLS(serverName: configuration.jid.domainpart, generation: generation, bufferedBytes: buffered)
                )
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

}
