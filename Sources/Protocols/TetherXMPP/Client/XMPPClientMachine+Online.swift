public import TetherCore
public import TetherXML

extension XMPPClientMachine {
    // MARK: - App sends

    /// Sends a message. While no stream is online (connecting, waiting to reconnect, suspended)
    /// it waits in a queue and goes out once one is; with XEP-0198 it is kept until the server
    /// acknowledges it. Throws `notConnected` when disconnected or closing, `sendQueueFull` at
    /// `maximumQueuedStanzas`.
    public mutating func send(_ message: XMPPMessage, now: Instant) throws(XMPPClientError) {
        // Every message gets an id (receipts, corrections and duplicate detection need one). A new
        // one goes on the wire, not into a copy of the tree (`SentStanza.app`), as an iq's does.
        try sendAppStanza(message.element, addingID: message.id == nil ? makeID("m") : nil, now: now)
    }

    /// Sends a presence (queued like a message while offline).
    public mutating func send(_ presence: XMPPPresence, now: Instant) throws(XMPPClientError) {
        try sendAppStanza(presence.element, now: now)
    }

    /// Sends an iq and returns its id. A request (`get`/`set`) is tracked: exactly one
    /// `iqResponse` event ends it (the answer, `timedOut` after `timeout` — default
    /// `iqTimeout` — or `notDelivered`). A reply (`result`/`error`, built with `iq.result()` or
    /// `iq.error(…)`) is just sent. An id is added when the iq has none.
    @discardableResult
    public mutating func send(_ iq: XMPPIQ, timeout: Duration? = nil, now: Instant) throws(XMPPClientError) -> String {
        let id = iq.id ?? makeID("iq")
        // A new id goes on the wire, not into a copy of the tree (`SentStanza.app`).
        let addedID = iq.id == nil ? id : nil
        guard iq.type.isRequest else {
            try sendAppStanza(iq.element, addingID: addedID, now: now)
            return id
        }
        precondition(pendingIQs[id] == nil, "an iq request with the id '\(id)' is already pending")
        // The server ping `XMPPIQ.ping()` returns (the app's round-trip measure) is written from
        // its known bytes, as the auto-ping is.
        let serialized =
            addedID != nil && iq.isTheServerPing ? Self.serverPingBytes(id: id, overWebSocket: overWebSocket) : nil
        try sendAppStanza(iq.element, addingID: addedID, serialized: serialized, now: now)
        awaitIQ(id, PendingIQ(deadline: now + (timeout ?? configuration.iqTimeout), to: iq.to, purpose: .app))
        return id
    }

    /// Sends any stanza (`<message/>`, `<presence/>` or `<iq/>` in `jabber:client`; an iq sent
    /// this way is not tracked). Precondition: `stanza` is one of those.
    public mutating func send(stanza: XElement, now: Instant) throws(XMPPClientError) {
        precondition(Stanza(stanza) != nil, "only <message/>, <presence/> and <iq/> of jabber:client are stanzas")
        try sendAppStanza(stanza, now: now)
    }

    /// Asks the server to acknowledge what it received so far (XEP-0198 `<r/>`), when anything
    /// is unacknowledged; for an app that wants its messages confirmed soon (before closing).
    public mutating func requestAcknowledgement(now: Instant) {
        guard case .connected(let session) = state, let sm = streamManagement, sm.isEnabled,
            !sm.unacknowledged.isEmpty
        else { return }
        requestAck(generation: session.generation)
    }

    /// Sends a stanza of the app's (`addedID`: an id the connection gave it, added on the wire).
    /// (`serialized`: its bytes with that id, when already written.)
    mutating func sendAppStanza(
        _ element: XElement,
        addingID addedID: String? = nil,
        serialized: [UInt8]? = nil,
        now: Instant
    )
        throws(XMPPClientError)
    {
        switch state {
        case .disconnected:
            throw XMPPClientError(.notConnected, "The connection is not started.")
        case .closing:
            throw XMPPClientError(.notConnected, "The connection is closing.")
        case .connectingTransport, .negotiating, .connected, .reconnectWaiting, .suspended:
            break
        }
        guard unacknowledgedCount < configuration.maximumQueuedStanzas else {
            throw XMPPClientError(
                .sendQueueFull,
                "\(configuration.maximumQueuedStanzas) stanzas are waiting to be sent or acknowledged."
            )
        }
        var bytes = serialized ?? []
        if let limit = serverLimits?.maximumBytes {
            if bytes.isEmpty {
                bytes = Self.stanzaBuffer()
                XMLSerializer.write(element, in: elementScope, adding: addedID.map { ("id", $0) }, into: &bytes)
            }
            guard bytes.count <= limit else {
                throw XMPPClientError(
                    .stanzaTooLarge,
                    "The stanza is \(bytes.count) bytes; the server accepts at most \(limit) (XEP-0478)."
                )
            }
        }
        // (The generation kept for this: binding the session would copy it.)
        if let generation = onlineGeneration {
            sendStanza(element, addingID: addedID, serialized: bytes, generation: generation, now: now)
        } else {
            outbox.append(addedID.map { element.settingAttribute("id", to: $0) } ?? element)
        }
    }

    /// The server's idle time passed a third with nothing sent: a whitespace keep-alive (RFC
    /// 6120 §4.6.1; over WebSocket, where whitespace is not a message, an unwatched ping), so that
    /// the stream is never silent for the server's whole `idle-seconds` (XEP-0478), whatever the
    /// auto-ping configuration.
    mutating func keepAliveDue(now: Instant) {
        guard case .connected(let session) = state, let idle = serverLimits?.idleSeconds else { return }
        if health.bytesSent == bytesSentAtKeepAliveCheck {
            if overWebSocket {
                sendPing(id: makeID("ping"), session: session)
            } else {
                sendRaw(" ", generation: session.generation)
            }
        }
        bytesSentAtKeepAliveCheck = health.bytesSent
        timers.set(.keepAlive, at: now + .seconds(max(1, idle / 3)))
    }

    /// Writes a stanza of the app's on the online stream, counting it for XEP-0198.
    /// (`addedID`: as in `sendAppStanza`.)
    mutating func sendStanza(
        _ element: XElement,
        addingID addedID: String? = nil,
        serialized: [UInt8] = [],
        generation: TransportGeneration,
        now: Instant
    ) {
        health.messagesSent += 1
        if serialized.isEmpty {
            send(element, addingID: addedID, generation: generation)
        } else {
            enqueue(.send(serialized, generation: generation, containsCredentials: false))
        }
        track(.app(element, addedID: addedID), generation: generation, now: now)
    }

    /// Writes a stanza the machine sends on its own (an answer, the roster request, the initial
    /// presence), counting it for XEP-0198.
    mutating func sendOwnStanza(_ element: XElement, secret: Bool = false, session: Session, now: Instant) {
        var bytes = Self.stanzaBuffer()
        XMLSerializer.write(element, in: elementScope, into: &bytes)
        sendOwnStanza(bytes: bytes, secret: secret, session: session, now: now)
    }

    /// Writes the bytes of a stanza the machine sends on its own (`secret`: logs must not show
    /// them).
    mutating func sendOwnStanza(bytes: [UInt8], secret: Bool = false, session: Session, now: Instant) {
        health.messagesSent += 1
        enqueue(.send(bytes, generation: session.generation, containsCredentials: secret))
        track(.own(bytes, secret: secret), generation: session.generation, now: now)
    }

    /// Keeps a sent stanza until acknowledged and asks for an acknowledgement when due.
    mutating func track(_ stanza: SentStanza, generation: TransportGeneration, now: Instant) {
        guard streamManagement != nil, let configuration = configuration.streamManagement else { return }
        streamManagement!.sentStanza(stanza)
        if streamManagement!.sentSinceRequest >= configuration.requestAckAfterStanzas {
            requestAck(generation: generation)
        } else if !timers.isArmed(.ackRequest) {
            timers.set(.ackRequest, at: now + configuration.requestAckAfter)
        }
    }

    mutating func flushOutbox(_ session: Session, now: Instant) {
        for stanza in outbox.removeAll() { sendStanza(stanza, generation: session.generation, now: now) }
    }

    mutating func requestAck(generation: TransportGeneration) {
        sendRaw("<r xmlns='urn:xmpp:sm:3'/>", generation: generation)
        streamManagement?.sentSinceRequest = 0
        timers.cancel(.ackRequest)
    }

    // MARK: - Online input

    mutating func onlineEvent(_ event: XMLStreamEvent, _ session: Session, now: Instant) {
        switch event {
        case .streamOpen:
            protocolViolation(.invalidXML, "A second stream header.", generation: session.generation, now: now)
        case .streamClose:
            // Not a clean end for us: the server (or a proxy) went away; reconnect (jicoco#87).
            sendStreamClose(generation: session.generation)
            lost(XMPPClientError(.connectionLost, "The server closed the stream."), closeTransport: true, now: now)
        case .element(let element):
            // (The namespace compared in place, not copied out for a `switch`.)
            if element.isIn(namespace: XMPPNamespace.client) {
                stanzaReceived(element, session, now: now)
            } else if element.isIn(namespace: XMPPNamespace.streamManagement3) {
                streamManagementElement(element, session, now: now)
            } else if element.isIn(namespace: XMPPNamespace.streams) {
                if let streamError = StreamError(element) {
                    streamErrorReceived(
                        streamError,
                        generation: session.generation,
                        endpoint: session.endpoint,
                        now: now
                    )
                }
            }
        // Anything else: nonzas of extensions this client does not speak, not addressed to it.
        }
    }

    mutating func closingEvent(_ event: XMLStreamEvent, now: Instant) {
        guard case .closing(let generation) = state else { return }
        switch event {
        case .streamOpen:
            break
        case .streamClose:
            enqueue(.closeTransport(generation: generation))
            closingEnded(now: now)
        case .element(let element):
            if StreamError(element) != nil {
                enqueue(.closeTransport(generation: generation))
                return closingEnded(now: now)
            }
            if element.namespace == XMPPNamespace.streamManagement3, element.localName == "a",
                let h = StreamManagement.h(of: element)
            {
                _ = streamManagement?.acknowledge(h)
            } else if let message = XMPPMessage(element) {
                emit(.message(message))
            } else if let presence = XMPPPresence(element) {
                emit(.presence(presence))
            }
        }
    }

    /// A stream error from the server: the stream is over; reconnect unless the condition says
    /// it cannot help, and to the named host after `see-other-host`.
    mutating func streamErrorReceived(
        _ streamError: StreamError,
        generation: TransportGeneration,
        endpoint: Endpoint,
        now: Instant
    ) {
        sendStreamClose(generation: generation)
        var message = "The server ended the stream with \(streamError.condition.rawValue)"
        if let text = streamError.text, !text.isEmpty { message += ": \(text)" }
        if !message.hasSuffix(".") { message += "." }
        let redirect =
            streamError.condition == .seeOtherHost
            ? streamError.otherHost.flatMap { Endpoint(parsing: $0, defaultPort: endpoint.port) } : nil
        lost(
            XMPPClientError(.streamError, message, streamError: streamError),
            closeTransport: true,
            redirect: redirect,
            now: now
        )
    }

    // MARK: - Stream management online

    mutating func streamManagementElement(_ element: XElement, _ session: Session, now: Instant) {
        // Changed in place (`streamManagement!`): a copy changed and stored back would copy every
        // unacknowledged stanza at each <a/>, which a fast sender gets every few stanzas.
        guard streamManagement != nil else { return }
        switch element.localName {
        case "r":
            if streamManagement!.isEnabled {
                sendRaw("<a xmlns='urn:xmpp:sm:3' h='\(streamManagement!.inbound)'/>", generation: session.generation)
            }
        case "a":
            guard let h = StreamManagement.h(of: element) else {
                return protocolViolation(
                    .undefinedCondition,
                    "<a/> without h.",
                    generation: session.generation,
                    now: now
                )
            }
            if case .tooHigh(let h, let sent) = streamManagement!.acknowledge(h) {
                return handledCountTooHigh(h: h, sent: sent, generation: session.generation, now: now)
            }
            if streamManagement!.unacknowledged.isEmpty { timers.cancel(.ackRequest) }
        case "enabled":
            guard !streamManagement!.isEnabled else { return }
            streamManagement!.isEnabled = true
            if element.attribute("resume") == "true" || element.attribute("resume") == "1" {
                streamManagement!.resumptionID = element.attribute("id")
            }
            streamManagement!.location = element.attribute("location").flatMap {
                Endpoint(parsing: $0, defaultPort: session.endpoint.port)
            }
            emit(.streamManagementEnabled(resumable: streamManagement!.isResumable))
        case "failed":
            // Enabling failed: the stream goes on without acknowledgements.
            if !streamManagement!.isEnabled {
                streamManagement = nil
                timers.cancel(.ackRequest)
            }
        default:
            break
        }
    }

    /// The server acknowledged more than was sent (XEP-0198 §4): its counter cannot be trusted,
    /// so the session ends without resumption.
    mutating func handledCountTooHigh(h: UInt32, sent: UInt32, generation: TransportGeneration, now: Instant) {
        let unacknowledged = streamManagement?.unacknowledgedAppStanzas ?? []
        streamManagement = nil
        reportUnacknowledged(unacknowledged)
        let detail = XElement(
            XMLName("handled-count-too-high", namespace: XMPPNamespace.streamManagement3),
            attributes: [XMLAttribute(XMLName("h"), String(h)), XMLAttribute(XMLName("send-count"), String(sent))]
        )
        protocolViolation(
            .undefinedCondition,
            "The server acknowledged \(h) stanzas, but \(sent) were sent.",
            applicationCondition: detail,
            generation: generation,
            now: now
        )
    }

    // MARK: - iq timeouts

    /// Arms the iq timer at the earliest pending deadline (after the expired ones were removed;
    /// nothing pending: not armed).
    mutating func armIQTimer() {
        if let earliest = pendingIQs.values.lazy.map(\.deadline).min() {
            timers.set(.iqTimeout, at: earliest)
        } else {
            timers.cancel(.iqTimeout)
        }
    }

    /// Adds a pending iq request. The timer only moves sooner, so that a request costs the same
    /// however many others are pending; an answer leaves it armed (`iqAnswerReceived`), and when it fires
    /// before any deadline has passed, `expireIQs` finds nothing and arms it again.
    mutating func awaitIQ(_ id: String, _ pending: PendingIQ) {
        pendingIQs[id] = pending
        if let armed = timers.deadline(.iqTimeout), armed <= pending.deadline { return }
        timers.set(.iqTimeout, at: pending.deadline)
    }

    mutating func expireIQs(now: Instant) {
        let expired = pendingIQs.filter { $0.value.deadline <= now }.sorted {
            ($0.value.deadline, $0.key) < ($1.value.deadline, $1.key)
        }
        for (id, pending) in expired {
            pendingIQs[id] = nil
            switch pending.purpose {
            case .app: emit(.iqResponse(id: id, .timedOut))
            case .archive: finishCatchUp(complete: false)
            case .push:
                // Unanswered: the registration is not known to hold; the app is told.
                emit(.pushRefused(StanzaError(type: nil, condition: .remoteServerTimeout)))
            case .rosterFetch, .carbons: break
            }
        }
        armIQTimer()
    }
}
