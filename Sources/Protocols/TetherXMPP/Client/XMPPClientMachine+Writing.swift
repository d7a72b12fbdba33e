import TetherCore
import TetherXML

extension XMPPClientMachine {
    // MARK: - Writing

    /// Our stream header (RFC 6120 §4.7): `to` the domain, version 1.0, our language; `from`
    /// only once the stream is protected (RFC 6120 §4.7.1).
    /// Over WebSocket: `<open/>` with the same attributes (RFC 7395 §3.3.1).
    mutating func sendStreamHeader(generation: TransportGeneration, secured: Bool) {
        var attributes = [("to", configuration.jid.domainpart)]
        if secured { attributes.append(("from", configuration.jid.bare.description)) }
        attributes += [("version", "1.0"), ("xml:lang", configuration.language)]
        if overWebSocket {
            var bytes = Array("<open xmlns='\(XMPPNamespace.framing)'".utf8)
            for (name, value) in attributes {
                bytes += " \(name)='".utf8
                XMLSerializer.appendAttributeValue(value, &bytes)
                bytes += "'".utf8
            }
            bytes += "/>".utf8
            return enqueue(.send(bytes, generation: generation, containsCredentials: false))
        }
        enqueue(
            .send(
                XMLSerializer.streamHeader(attributes: attributes),
                generation: generation,
                containsCredentials: false
            )
        )
    }

    /// Ends our stream: `</stream:stream>`, or over WebSocket `<close/>` (RFC 7395 §3.6).
    mutating func sendStreamClose(generation: TransportGeneration) {
        sendRaw(
            overWebSocket ? "<close xmlns='\(XMPPNamespace.framing)'/>" : "</stream:stream>",
            generation: generation
        )
    }

    /// Whether the stream runs over WebSocket (RFC 7395): `<open/>` and `<close/>` instead of the
    /// stream's tags, and each element a message of its own.
    var overWebSocket: Bool { configuration.webSocket != nil }

    /// Where elements are written: inside the stream's tag, or over WebSocket on their own, every
    /// namespace declared (`<message xmlns='jabber:client'>`, RFC 7395 §3.3.3).
    var elementScope: XMLNamespaceScope { overWebSocket ? XMLNamespaceScope() : .clientStream }

    /// A fresh parser for a new stream, returning what the old one had not consumed. Over
    /// WebSocket the parser first reads a stream tag of our own making, so the server's messages
    /// parse as its children (`webSocketEvent` reads them).
    mutating func restartParser() -> [UInt8] {
        let rest = parser.restart()
        if overWebSocket { parser.append(Self.webSocketStreamTag) }
        return rest
    }

    static let webSocketStreamTag = Array(
        "<stream:stream xmlns='\(XMPPNamespace.client)' xmlns:stream='\(XMPPNamespace.streams)'>".utf8
    )

    /// Over WebSocket: the event the parser's event stands for. Our own stream tag is dropped;
    /// the server's `<open/>` is its stream header, its `<close/>` the stream's end, and a
    /// `<close/>` with `see-other-uri` (to a URL no less secure) sends the attempt there.
    mutating func webSocketEvent(
        _ event: XMLStreamEvent,
        generation: TransportGeneration,
        now: Instant
    )
        -> XMLStreamEvent?
    {
        guard case .element(let element) = event else {
            if case .streamOpen = event { return nil }
            return event
        }
        guard element.namespace == XMPPNamespace.framing else { return event }
        switch element.localName {
        case "open":
            return .streamOpen(
                XMLStreamHeader(
                    name: XMLName("stream", namespace: XMPPNamespace.streams, prefix: "stream"),
                    attributes: element.attributes,
                    namespaceDeclarations: [
                        XMLNamespaceDeclaration(prefix: nil, uri: XMPPNamespace.client),
                        XMLNamespaceDeclaration(prefix: "stream", uri: XMPPNamespace.streams),
                    ]
                )
            )
        case "close":
            guard let other = element.attribute("see-other-uri") else { return .streamClose }
            let current = configuration.webSocket!
            guard let url = ServerURL(other), url.isWebSocket, url.isSecure || !current.isSecure else {
                return .streamClose
            }
            switch state {
            case .negotiating, .connected:
                sendStreamClose(generation: generation)
                lost(
                    XMPPClientError(.connectionLost, "The server moved the stream to \(url) (see-other-uri)."),
                    closeTransport: true,
                    webSocketRedirect: url,
                    now: now
                )
                return nil
            case .disconnected, .connectingTransport, .closing, .reconnectWaiting, .suspended:
                return .streamClose
            }
        default:
            return event
        }
    }

    /// An empty buffer with room for a typical stanza, so that serializing one does not grow
    /// the array several times over (it doubles past that).
    static func stanzaBuffer() -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256)
        return bytes
    }

    mutating func sendRaw(_ text: String, generation: TransportGeneration, containsCredentials: Bool = false) {
        enqueue(.send(Array(text.utf8), generation: generation, containsCredentials: containsCredentials))
    }

    /// Writes `element`; with `addedID`, that id on its root (an id the connection chose for a
    /// stanza that had none, `sendAppStanza`).
    mutating func send(
        _ element: XElement,
        addingID addedID: String? = nil,
        generation: TransportGeneration,
        containsCredentials: Bool = false
    ) {
        var bytes = Self.stanzaBuffer()
        XMLSerializer.write(element, in: elementScope, adding: addedID.map { ("id", $0) }, into: &bytes)
        enqueue(.send(bytes, generation: generation, containsCredentials: containsCredentials))
    }

    /// The bytes `XMPPIQ.ping()` with the id `id` serialises to in the stream's scope (over
    /// WebSocket every stanza declares its namespace), written without the tree.
    static func serverPingBytes(id: String, overWebSocket: Bool) -> [UInt8] {
        var bytes = stanzaBuffer()
        if overWebSocket {
            XMLSerializer.appendLiteral("<iq xmlns='jabber:client' type='get' id='", to: &bytes)
        } else {
            XMLSerializer.appendLiteral("<iq type='get' id='", to: &bytes)
        }
        XMLSerializer.appendAttributeValue(id, &bytes)
        XMLSerializer.appendLiteral("'><ping xmlns='urn:xmpp:ping'/></iq>", to: &bytes)
        return bytes
    }

    /// Sends an auto-ping, counted by XEP-0198 like any other stanza but without asking for an
    /// acknowledgement of its own (its answer shows the link works).
    mutating func sendPing(id: String, session: Session) {
        // The bytes `XMPPIQ.ping(to: server, id: id)` serialises to, without building the tree
        // (a server holding many idle connections sends these all the time).
        var bytes = Array((overWebSocket ? "<iq xmlns='jabber:client' type='get' to='" : "<iq type='get' to='").utf8)
        XMLSerializer.appendAttributeValue(configuration.jid.domainpart, &bytes)
        bytes += "' id='".utf8
        XMLSerializer.appendAttributeValue(id, &bytes)
        bytes += "'><ping xmlns='urn:xmpp:ping'/></iq>".utf8
        enqueue(.send(bytes, generation: session.generation, containsCredentials: false))
        streamManagement?.sentStanza(.own(bytes))
    }

    /// Sends a stream error and closes (RFC 6120 §4.9.1.1).
    mutating func sendStreamError(_ error: StreamError, generation: TransportGeneration) {
        var bytes: [UInt8] = []
        XMLSerializer.write(error.element, in: elementScope, into: &bytes)
        if overWebSocket {
            enqueue(.send(bytes, generation: generation, containsCredentials: false))
            return sendStreamClose(generation: generation)
        }
        bytes += XMLSerializer.streamFooter
        enqueue(.send(bytes, generation: generation, containsCredentials: false))
    }

    /// The peer broke the protocol: send `condition`, close, and treat it as a loss.
    mutating func protocolViolation(
        _ condition: StreamError.Condition,
        _ message: String,
        applicationCondition: XElement? = nil,
        generation: TransportGeneration,
        now: Instant
    ) {
        let streamError = StreamError(condition, text: nil, applicationCondition: applicationCondition)
        sendStreamError(streamError, generation: generation)
        lost(
            XMPPClientError(.protocolViolation, message, streamError: streamError),
            closeTransport: true,
            now: now
        )
    }

    /// A fatal problem on our side of the negotiation: close the stream and stop.
    mutating func failNegotiation(_ error: XMPPClientError, generation: TransportGeneration, now: Instant) {
        sendStreamClose(generation: generation)
        lost(error, closeTransport: true, now: now)
    }
}
