import TetherCore
import TetherXML

extension XMPPNamespace {
    /// XEP-0388 Extensible SASL Profile (SASL2).
    public static let sasl2 = "urn:xmpp:sasl:2"
    /// XEP-0386 Bind 2, inside SASL2.
    public static let bind2 = "urn:xmpp:bind:0"
    /// XEP-0484 FAST tokens, inside SASL2.
    public static let fast = "urn:xmpp:fast:0"
}

extension XMPPClientMachine {
    // MARK: - SASL2 (XEP-0388), with Bind 2 (XEP-0386) and resumption inside the login

    /// What to ask for inside a SASL2 login: the previous session's resumption when there is
    /// one to resume and the server takes `<resume/>` inline; a new session's resource (Bind 2)
    /// with `<enable/>` when the server's Bind 2 takes it inline. Both when both apply: the server
    /// binds when resumption fails.
    func sasl2Request(_ features: StreamFeatures) -> SASL2Request {
        var request = SASL2Request()
        let wantsStreamManagement = configuration.streamManagement != nil
        request.resume =
            wantsStreamManagement && features.sasl2StreamManagement && streamManagement?.isResumable == true
        request.bind = features.sasl2Bind
        request.enable =
            request.bind && wantsStreamManagement
            && features.sasl2BindInlineFeatures.contains(XMPPNamespace.streamManagement3)
        request.carbons =
            request.bind && configuration.carbons && features.sasl2BindInlineFeatures.contains(XMPPNamespace.carbons)
        return request
    }

    /// `<authenticate xmlns='urn:xmpp:sasl:2'>` with the initial response, the user agent and the
    /// inline requests.
    mutating func sasl2Authenticate(
        mechanism: String,
        initialResponse: String,
        _ request: SASL2Request,
        withToken: Bool = false
    ) -> XElement {
        if userAgentID == nil {
            userAgentID = makeUserAgentID()
            clientStateChanged()
        }
        var agent: [XNode] = []
        if let software = configuration.userAgent.software {
            agent.append(.element("software", XMPPNamespace.sasl2, [], [.text(software)]))
        }
        if let device = configuration.userAgent.device {
            agent.append(.element("device", XMPPNamespace.sasl2, [], [.text(device)]))
        }
        var children: [XNode] = [
            .element("initial-response", XMPPNamespace.sasl2, [], [.text(initialResponse)]),
            .element("user-agent", XMPPNamespace.sasl2, [("id", userAgentID!)], agent),
        ]
        if request.resume, let sm = streamManagement, let previous = sm.resumptionID {
            children.append(
                .element("resume", XMPPNamespace.streamManagement3, [("previd", previous), ("h", String(sm.inbound))])
            )
        }
        if request.bind {
            var bind: [XNode] = [
                .element("tag", XMPPNamespace.bind2, [], [.text(configuration.requestedResource ?? "tether")])
            ]
            if request.enable {
                var attributes = [("resume", String(configuration.streamManagement?.resume ?? false))]
                if let time = configuration.streamManagement?.preferredResumptionTime {
                    attributes.append(("max", String(max(1, time.components.seconds))))
                }
                bind.append(.element("enable", XMPPNamespace.streamManagement3, attributes))
            }
            if request.carbons {
                bind.append(.element("enable", XMPPNamespace.carbons))
            }
            if device.application == .background && configuration.clientStateIndication {
                bind.append(.element("inactive", XMPPNamespace.clientStateIndication))
            }
            children.append(.element("bind", XMPPNamespace.bind2, [], bind))
        }
        if withToken {
            children.append(.element("fast", XMPPNamespace.fast))
        } else if let requestToken = request.requestedTokenMechanism {
            children.append(.element("request-token", XMPPNamespace.fast, [("mechanism", requestToken)]))
        }
        return XElement(
            XMLName("authenticate", namespace: XMPPNamespace.sasl2),
            attributes: [XMLAttribute(XMLName("mechanism"), mechanism)],
            children: children
        )
    }

    /// A SASL2 element during the login: challenges as in RFC 6120 SASL; `<success>` with the
    /// server's SCRAM signature and what the inline requests brought (the features follow with no
    /// restart); `<failure>`; `<continue>` (tasks this client cannot do).
    mutating func sasl2Received(_ element: XElement, _ exchange: SASLExchange, _ negotiation: Negotiation, now: Instant)
    {
        let generation = negotiation.attempt.generation
        guard element.namespace == XMPPNamespace.sasl2 else {
            return unexpected(element, while: "authenticating (SASL2)", generation: generation, now: now)
        }
        switch element.localName {
        case "challenge":
            // The same exchange as RFC 6120 SASL's, in SASL2's namespace.
            let translated = XElement(
                XMLName("challenge", namespace: XMPPNamespace.sasl),
                children: [.text(element.text)]
            )
            saslReceived(translated, exchange, negotiation, now: now)
        case "success":
            let data = element.firstChild("additional-data")?.text
            guard verifiedSuccess(exchange, additionalData: data, generation: generation, now: now) else { return }
            var outcome = SASL2Outcome()
            if let resumed = element.firstChild("resumed", namespace: XMPPNamespace.streamManagement3) {
                guard let h = StreamManagement.h(of: resumed) else {
                    return protocolViolation(
                        .undefinedCondition,
                        "<resumed/> without h.",
                        generation: generation,
                        now: now
                    )
                }
                outcome.resumedH = h
            } else if let failed = element.firstChild("failed", namespace: XMPPNamespace.streamManagement3) {
                outcome.resumeFailed = .some(
                    failed.children.lazy.compactMap { StanzaError.Condition(rawValue: $0.localName) }.first
                )
            }
            if let bound = element.firstChild("bound", namespace: XMPPNamespace.bind2), outcome.resumedH == nil {
                let identifier = element.firstChild("authorization-identifier")?.text ?? ""
                guard let jid = JID(identifier), jid.resourcepart != nil else {
                    return protocolViolation(
                        .undefinedCondition,
                        "The SASL2 success with <bound/> names no full JID.",
                        generation: generation,
                        now: now
                    )
                }
                outcome.boundJID = jid
                outcome.streamManagementAnswer = bound.children.first {
                    $0.namespace == XMPPNamespace.streamManagement3
                }
            }
            if let authentication = negotiation.authentication { emit(.authenticated(authentication)) }
            if let issued = element.firstChild("token", namespace: XMPPNamespace.fast),
                let secret = issued.attribute("token"), !secret.isEmpty,
                let mechanism = negotiation.sasl2?.requestedTokenMechanism
                    ?? (negotiation.authentication?.fast == true ? fastToken?.mechanism : nil)
            {
                let token = XMPPFASTToken(
                    mechanism: mechanism,
                    secret: Secret(secret),
                    expiry: issued.attribute("expiry") ?? ""
                )
                fastToken = token
                emit(.fastToken(token))
                clientStateChanged()
            }
            var negotiation = negotiation
            negotiation.authenticated = true
            negotiation.features = nil
            negotiation.step = .awaitingSASL2Features(outcome)
            state = .negotiating(negotiation)
        case "failure":
            let condition = element.children.first { $0.namespace == XMPPNamespace.sasl }?.localName ?? "not-authorized"
            if case .fast = exchange, let features = negotiation.features {
                // The token is no good any more: drop it, say so, and log in with the password on
                // the same stream (a SASL2 failure leaves the stream as it was).
                fastToken = nil
                emit(.fastTokenRefused(condition: condition))
                clientStateChanged()
                var negotiation = negotiation
                negotiation.sasl2 = nil
                negotiation.authentication = nil
                return startAuthentication(features, negotiation, now: now)
            }
            var message = "Authentication failed (\(condition))"
            if let text = element.firstChild("text")?.text, !text.isEmpty { message += ": \(text)" }
            if !message.hasSuffix(".") { message += "." }
            failNegotiation(
                XMPPClientError(.authenticationFailed, message, saslCondition: condition),
                generation: generation,
                now: now
            )
        case "continue":
            let tasks = element.firstChild("tasks")?.children("task").map(\.text) ?? []
            send(XElement(XMLName("abort", namespace: XMPPNamespace.sasl2)), generation: generation)
            failNegotiation(
                XMPPClientError(
                    .authenticationFailed,
                    "The server asks for further steps after the login (\(tasks.joined(separator: ", "))), "
                        + "which this client cannot take.",
                    saslCondition: "continue"
                ),
                generation: generation,
                now: now
            )
        default:
            unexpected(element, while: "authenticating (SASL2)", generation: generation, now: now)
        }
    }

    /// The features after a SASL2 success: the resumed or bound session goes online; with
    /// nothing inline, negotiation goes on as after RFC 6120 SASL (bind, resume or enable).
    mutating func sasl2Completed(_ outcome: SASL2Outcome, _ negotiation: Negotiation, now: Instant) {
        let generation = negotiation.attempt.generation
        let request = negotiation.sasl2 ?? SASL2Request()
        if let h = outcome.resumedH, var sm = streamManagement {
            if case .tooHigh(let h, let sent) = sm.acknowledge(h) {
                return handledCountTooHigh(h: h, sent: sent, generation: generation, now: now)
            }
            streamManagement = sm
            goOnline(negotiation, jid: boundJID ?? configuration.jid, resumed: true, now: now)
            return handleEarly(outcome.early, generation: generation, now: now)
        }
        if request.resume {
            resumptionImpossible(outcome.resumeFailed ?? nil)
        }
        guard let jid = outcome.boundJID else {
            var negotiation = negotiation
            negotiation.sasl2 = nil
            return featuresReceived(negotiation.features!, negotiation, now: now)
        }
        streamManagement = request.enable ? StreamManagement() : nil
        goOnline(negotiation, jid: jid, resumed: false, now: now)
        if request.enable, case .connected(let session) = state {
            if let answer = outcome.streamManagementAnswer {
                streamManagementElement(answer, session, now: now)
            } else {
                streamManagement = nil  // asked for, not answered: the server did not enable it
            }
        }
        handleEarly(outcome.early, generation: generation, now: now)
    }

    /// The session's elements that came before the features, now that it is online.
    mutating func handleEarly(_ elements: [XElement], generation: TransportGeneration, now: Instant) {
        for element in elements {
            guard currentGeneration == generation, case .connected(let session) = state else { return }
            onlineEvent(.element(element), session, now: now)
        }
    }

    // MARK: - FAST (XEP-0484)

    /// Logs in with the FAST token when the server offers its mechanism on this protected stream
    /// and the channel binding it needs is there: `authcid NUL HMAC-SHA-256(token, "Initiator" +
    /// binding data)`, with `<fast/>`; the server's answer must be the HMAC of "Responder". False
    /// when the token cannot be used here (the password login follows).
    mutating func startFASTLogin(_ features: StreamFeatures, _ negotiation: Negotiation) -> Bool {
        guard negotiation.secured, let token = fastToken, features.sasl2FASTMechanisms.contains(token.mechanism),
            let binding = XMPPFASTToken.channelBinding(of: token.mechanism),
            let username = configuration.jid.localpart.flatMap(SASLPrep.prepare)
        else { return false }
        let bindingData: [UInt8]
        if let binding {
            guard let data = negotiation.tls.data[binding] else { return false }
            bindingData = data
        } else {
            bindingData = []
        }
        let key = token.secret.utf8
        let initiator = hashProvider.hmac(.sha256, key: key, data: Array("Initiator".utf8) + bindingData)
        let responder = hashProvider.hmac(.sha256, key: key, data: Array("Responder".utf8) + bindingData)
        let request = sasl2Request(features)
        send(
            sasl2Authenticate(
                mechanism: token.mechanism,
                initialResponse: Base64.encode(Array(username.utf8) + [0] + initiator),
                request,
                withToken: true
            ),
            generation: negotiation.attempt.generation,
            containsCredentials: true
        )
        var negotiation = negotiation
        negotiation.sasl2 = request
        negotiation.step = .authenticating(.fast(expected: responder))
        negotiation.authentication = XMPPAuthentication(
            mechanism: token.mechanism,
            channelBinding: binding,
            sasl2: true,
            fast: true
        )
        state = .negotiating(negotiation)
        return true
    }

    /// The token mechanism to ask for at a password login: the strongest the server offers that
    /// this connection can bind (tls-exporter, tls-unique, the certificate, none); nil without TLS,
    /// FAST or `requestsFASTToken`.
    func fastMechanismToRequest(_ features: StreamFeatures, _ negotiation: Negotiation) -> String? {
        guard configuration.requestsFASTToken, negotiation.secured else { return nil }
        let offered = features.sasl2FASTMechanisms
        let candidates: [(String, ChannelBindingType?)] = [
            ("HT-SHA-256-EXPR", .tlsExporter), ("HT-SHA-256-UNIQ", .tlsUnique), ("HT-SHA-256-ENDP", .tlsServerEndPoint),
            ("HT-SHA-256-NONE", nil),
        ]
        return candidates.first { name, binding in
            offered.contains(name) && (binding.map { negotiation.tls.data[$0] != nil } ?? true)
        }?.0
    }
}
