import TetherCore
import TetherXML

extension XMPPClientMachine {
    // MARK: - SASL

    mutating func startAuthentication(_ features: StreamFeatures, _ negotiation: Negotiation, now: Instant) {
        let generation = negotiation.attempt.generation
        let sasl2Mechanisms = configuration.sasl2 ? features.sasl2Mechanisms : nil
        if sasl2Mechanisms != nil, startFASTLogin(features, negotiation) { return }
        let offered = sasl2Mechanisms ?? features.mechanisms
        let chosen: SASLMechanism
        let binding: SCRAMClient.ChannelBinding
        switch SASLMechanism.choose(
            offered: offered,
            preferred: configuration.mechanisms,
            secured: negotiation.secured,
            allowPlainOnCleartext: configuration.allowPlainOnCleartext,
            tls: negotiation.tls,
            serverBindingTypes: features.channelBindingTypes,
            policy: configuration.channelBinding
        ) {
        case .success(let choice): (chosen, binding) = choice
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
                    limits: configuration.scramLimits,
                    channelBinding: binding,
                    offered: (offered, features.channelBindingTypes)
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
        var boundType: ChannelBindingType?
        if case .bound(let type, _) = binding { boundType = type }
        let mechanismName = boundType == nil ? chosen.rawValue : chosen.rawValue + "-PLUS"
        var negotiation = negotiation
        if sasl2Mechanisms != nil {
            var request = sasl2Request(features)
            request.requestedTokenMechanism = fastMechanismToRequest(features, negotiation)
            send(
                sasl2Authenticate(mechanism: mechanismName, initialResponse: initialResponse, request),
                generation: generation,
                containsCredentials: true
            )
            negotiation.sasl2 = request
        } else {
            send(
                SASLElement.auth(mechanism: mechanismName, initialResponse: initialResponse).element,
                generation: generation,
                containsCredentials: true
            )
        }
        negotiation.step = .authenticating(exchange)
        negotiation.authentication = XMPPAuthentication(
            mechanism: mechanismName,
            channelBinding: boundType,
            sasl2: sasl2Mechanisms != nil
        )
        state = .negotiating(negotiation)
    }

    mutating func saslReceived(
        _ element: XElement,
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
                    send(Self.saslResponse("", sasl2: negotiation.sasl2 != nil), generation: generation)
                } else {
                    let final = try scram.clientFinalMessage(serverFirst: data)
                    send(
                        Self.saslResponse(Base64.encode(final), sasl2: negotiation.sasl2 != nil),
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
            guard verifiedSuccess(exchange, additionalData: text, generation: generation, now: now) else { return }
            if let authentication = negotiation.authentication { emit(.authenticated(authentication)) }
            // Restart the stream at the exact byte where <success/> ended (RFC 6120 §6.4.6).
            negotiation.authenticated = true
            negotiation.step = .awaitingHeader
            negotiation.features = nil
            state = .negotiating(negotiation)
            let rest = restartParser()
            sendStreamHeader(generation: generation, secured: negotiation.secured)
            parser.append(rest.backDeployedSpan)
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

    /// Whether a SASL success (RFC 6120's or SASL2's, its additional data `text`) ends the
    /// exchange: for SCRAM only with the server's signature, verified (else the attempt ends with
    /// `serverAuthenticationFailed` and false).
    mutating func verifiedSuccess(
        _ exchange: SASLExchange,
        additionalData text: String?,
        generation: TransportGeneration,
        now: Instant
    ) -> Bool {
        if case .fast(let expected) = exchange {
            let answer = text.flatMap(Self.saslData) ?? []
            var difference: UInt8 = answer.count == expected.count ? 0 : 1
            for (a, b) in zip(answer, expected) { difference |= a ^ b }
            guard difference == 0 else {
                serverAuthenticationFailed(
                    SCRAMError(
                        .serverSignatureMismatch,
                        "The server's answer to the FAST token login is not the token's: it does not know the token, "
                            + "or someone is in the middle."
                    ),
                    generation: generation,
                    now: now
                )
                return false
            }
            return true
        }
        guard case .scram(var scram) = exchange else { return true }
        if scram.awaitsServerFinal {
            guard let data = text.flatMap(Self.saslData), !data.isEmpty else {
                serverAuthenticationFailed(
                    SCRAMError(.malformedServerMessage, "SASL success came without the server's signature."),
                    generation: generation,
                    now: now
                )
                return false
            }
            do throws(SCRAMError) {
                try scram.verifyServerFinal(data)
            } catch {
                serverAuthenticationFailed(error, generation: generation, now: now)
                return false
            }
        }
        guard scram.isVerified else {
            serverAuthenticationFailed(
                SCRAMError(.unexpectedMessage, "SASL success came before the SCRAM exchange ended."),
                generation: generation,
                now: now
            )
            return false
        }
        return true
    }

    /// `<response>` with `text`, in SASL2's namespace or RFC 6120's.
    static func saslResponse(_ text: String, sasl2: Bool) -> XElement {
        guard sasl2 else { return SASLElement.response(text).element }
        return XElement(
            XMLName("response", namespace: XMPPNamespace.sasl2),
            children: text.isEmpty ? [] : [.text(text)]
        )
    }

    /// SASL payload text: `=` (or nothing) is empty, anything else base64.
    static func saslData(_ text: String) -> [UInt8]? {
        text.isEmpty || text == "=" ? [] : Base64.decode(text)
    }

    mutating func serverAuthenticationFailed(
        _ error: SCRAMError,
        generation: TransportGeneration,
        now: Instant
    ) {
        var sasl2 = false
        if case .negotiating(let negotiation) = state { sasl2 = negotiation.sasl2 != nil }
        send(
            sasl2 ? XElement(XMLName("abort", namespace: XMPPNamespace.sasl2)) : SASLElement.abort.element,
            generation: generation
        )
        let kind: XMPPClientError.Kind =
            error.kind == .downgradeDetected ? .downgradeDetected : .serverAuthenticationFailed
        failNegotiation(XMPPClientError(kind, error.message), generation: generation, now: now)
    }
}
