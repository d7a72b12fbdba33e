import TetherCore
import TetherXML

extension XMPPClientMachine {
    // MARK: - Writing

    /// Our stream header (RFC 6120 §4.7): `to` the domain, version 1.0, our language; `from`
    /// only once the stream is protected (RFC 6120 §4.7.1).
    mutating func sendStreamHeader(generation: TransportGeneration, secured: Bool) {
        var attributes = [("to", configuration.jid.domainpart)]
        if secured { attributes.append(("from", configuration.jid.bare.description)) }
        attributes += [("version", "1.0"), ("xml:lang", configuration.language)]
        enqueue(
            .send(
                XMLSerializer.streamHeader(attributes: attributes),
                generation: generation,
                containsCredentials: false
            )
        )
    }

    mutating func sendRaw(_ text: String, generation: TransportGeneration, containsCredentials: Bool = false) {
        enqueue(.send(Array(text.utf8), generation: generation, containsCredentials: containsCredentials))
    }

    mutating func send(_ element: XElement, generation: TransportGeneration, containsCredentials: Bool = false) {
        var bytes: [UInt8] = []
        XMLSerializer.write(element, in: .clientStream, into: &bytes)
        enqueue(.send(bytes, generation: generation, containsCredentials: containsCredentials))
    }

    /// Sends an auto-ping, counted by XEP-0198 like any other stanza but without asking for an
    /// acknowledgement of its own (its answer shows the link works).
    mutating func sendPing(id: String, session: Session) {
        // The bytes `XMPPIQ.ping(to: server, id: id)` serialises to, without building the tree
        // (a server holding many idle connections sends these all the time).
        var bytes = Array("<iq type='get' to='".utf8)
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
        XMLSerializer.write(error.element, in: .clientStream, into: &bytes)
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
        sendRaw("</stream:stream>", generation: generation)
        lost(error, closeTransport: true, now: now)
    }
}
