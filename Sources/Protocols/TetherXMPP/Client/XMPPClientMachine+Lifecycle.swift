public import TetherCore
import TetherXML

extension XMPPClientMachine {
    // MARK: - App commands

    /// Starts connecting. Precondition: the machine is disconnected (never started, or stopped).
    public mutating func start(now: Instant) {
        guard case .disconnected = state else { preconditionFailure("start() while \(stateName)") }
        schedule = configuration.reconnectPolicy.map(ReconnectSchedule.init(policy:))
        beginAttempt(to: nil, redirects: 0, now: now)
    }

    /// Disconnects on purpose: an online stream is closed cleanly (an SM acknowledgement, then
    /// `</stream:stream>`, then up to `closeTimeout` for the server's); anything else stops at
    /// once. No reconnect follows. Ends with `closed(nil)`. A no-op when disconnected or closing.
    public mutating func stop(now: Instant) {
        switch state {
        case .disconnected, .closing:
            return
        case .connected(let session):
            if let sm = streamManagement, sm.isEnabled {
                sendRaw("<a xmlns='urn:xmpp:sm:3' h='\(sm.inbound)'/>", generation: session.generation)
            }
            sendStreamClose(generation: session.generation)
            cancelSessionTimers()
            state = .closing(generation: session.generation)
            timers.set(.close, at: now + configuration.closeTimeout)
        case .connectingTransport(let attempt):
            enqueue(.closeTransport(generation: attempt.generation))
            finish(nil, now: now)
        case .negotiating(let negotiation):
            if negotiation.streamIsOpen {
                sendStreamClose(generation: negotiation.attempt.generation)
            }
            enqueue(.closeTransport(generation: negotiation.attempt.generation))
            finish(nil, now: now)
        case .reconnectWaiting, .suspended:
            finish(nil, now: now)
        }
    }

    /// Connect again now, for example because the user asked, the app came to the foreground or
    /// the network came back. While waiting to reconnect or suspended: a new attempt at once,
    /// with the back-off reset. While an attempt is under way: it is abandoned (it may hang on a
    /// dead network) and a fresh one starts. While online: a ping checks the link at once (a
    /// dead link is then noticed within the ping timeout). Otherwise a no-op.
    public mutating func reconnectNow(now: Instant) {
        switch state {
        case .disconnected, .closing:
            return
        case .reconnectWaiting(let next, let redirects):
            schedule?.connectionEstablished()
            timers.cancel(.reconnect)
            beginAttempt(to: next, redirects: redirects, now: now)
        case .suspended:
            schedule?.connectionEstablished()
            beginAttempt(to: resumptionEndpoint, redirects: 0, now: now)
        case .connectingTransport(let attempt):
            enqueue(.closeTransport(generation: attempt.generation))
            schedule?.connectionEstablished()
            beginAttempt(
                to: attempt.toConfiguredServer ? nil : attempt.endpoint,
                redirects: attempt.redirects,
                now: now
            )
        case .negotiating(let negotiation):
            enqueue(.closeTransport(generation: negotiation.attempt.generation))
            schedule?.connectionEstablished()
            let attempt = negotiation.attempt
            beginAttempt(
                to: attempt.toConfiguredServer ? nil : attempt.endpoint,
                redirects: attempt.redirects,
                now: now
            )
        case .connected(var session):
            let id = makeID("ping")
            guard var autoPing = session.autoPing else {
                // Without auto-ping the answer is not awaited; a dead link then shows as a
                // transport error on the write.
                return sendPing(id: id, session: session)
            }
            guard autoPing.outstanding == nil else { return }
            sendPing(id: id, session: session)
            autoPing.pingSent(id: id, at: now)
            session.autoPing = autoPing
            state = .connected(session)
            timers.set(.ping, at: autoPing.deadline(lastReceived: lastReceived))
        }
    }

    // MARK: - Transport inputs

    /// The TCP connection of `generation` is open (with direct TLS: and TLS is established, with
    /// the channel-binding data `tls`).
    public mutating func transportConnected(generation: TransportGeneration, tls: TLSChannelBindings, now: Instant) {
        guard case .connectingTransport(let attempt) = state, attempt.generation == generation, !attempt.lookingUp
        else { return }
        _ = restartParser()
        let secured = attempt.directTLS
        state = .negotiating(Negotiation(attempt: attempt, secured: secured, tls: secured ? tls : .none))
        sendStreamHeader(generation: generation, secured: secured)
    }

    /// TLS is established on the transport of `generation` (after a `startTLS` action), with the
    /// channel-binding data `tls`.
    public mutating func tlsEstablished(generation: TransportGeneration, tls: TLSChannelBindings, now: Instant) {
        guard case .negotiating(var negotiation) = state, negotiation.attempt.generation == generation,
            case .awaitingTLS = negotiation.step
        else { return }
        negotiation.secured = true
        negotiation.tls = tls
        negotiation.step = .awaitingHeader
        negotiation.features = nil
        state = .negotiating(negotiation)
        sendStreamHeader(generation: generation, secured: true)
    }

    /// Bytes arrived on the transport of `generation`.
    public mutating func transportReceived(_ bytes: Span<UInt8>, generation: TransportGeneration, now: Instant) {
        guard acceptsXML(from: generation) else { return }
        lastReceived = now
        if let idle = configuration.releaseBuffersAfterIdle { timers.set(.releaseBuffers, at: now + idle) }
        health.bytesReceived += bytes.count
        parser.append(bytes)
        processStream(generation: generation, now: now)
    }

    /// Bytes arrived on the transport of `generation`.
    public mutating func transportReceived(_ bytes: [UInt8], generation: TransportGeneration, now: Instant) {
        transportReceived(bytes.backDeployedSpan, generation: generation, now: now)
    }

    /// Bytes arrived on the transport of `generation`.
    public mutating func transportReceived(_ bytes: ArraySlice<UInt8>, generation: TransportGeneration, now: Instant) {
        transportReceived(bytes.span, generation: generation, now: now)
    }

    /// The transport of `generation` closed, or could not be opened (`error` nil: an orderly end
    /// of stream). A TLS failure (`tlsFailed`, `certificateRefused`) before the stream is online
    /// is fatal: another attempt would meet the same server.
    public mutating func transportClosed(generation: TransportGeneration, error: TransportError?, now: Instant) {
        guard currentGeneration == generation else { return }
        if let error, error.kind == .tlsFailed || error.kind == .certificateRefused {
            switch state {
            case .connectingTransport(let attempt) where error.kind == .tlsFailed && !attempt.remainingTargets.isEmpty:
                break  // a direct-TLS handshake that failed on this target: the next one (below)
            case .connectingTransport, .negotiating:
                return lost(
                    error.kind == .certificateRefused
                        ? XMPPClientError(.certificateRefused, "The server's certificate was refused: \(error.message)")
                        : XMPPClientError(.tlsFailed, "TLS failed: \(error.message)"),
                    closeTransport: true,
                    now: now
                )
            case .connected, .closing, .disconnected, .reconnectWaiting, .suspended:
                break  // a broken TLS record after the handshake: the stream is gone like a dropped link
            }
        }
        let reason = error?.message
        switch state {
        case .closing:
            closingEnded(now: now)
        case .connectingTransport(let attempt):
            targetFailed(attempt)
            guard attempt.remainingTargets.isEmpty else { return openNextTarget(attempt) }
            lost(
                XMPPClientError(
                    .connectionFailed,
                    "Could not connect to \(attempt.webSocket?.redacted ?? attempt.endpoint.description): \(reason ?? "closed")."
                ),
                closeTransport: false,
                now: now
            )
        case .negotiating, .connected:
            if case .negotiating(let negotiation) = state, !negotiation.heardServer {
                // Closed before the server said anything (a balancer with no server behind it):
                // the target failed, as if it had refused; the next one, if any.
                targetFailed(negotiation.attempt)
                if !negotiation.attempt.remainingTargets.isEmpty { return openNextTarget(negotiation.attempt) }
            }
            lost(
                XMPPClientError(.connectionLost, "The connection was lost: \(reason ?? "closed by the server")."),
                closeTransport: false,
                now: now
            )
        case .disconnected, .reconnectWaiting, .suspended:
            return
        }
    }

    /// Whether bytes received on the transport of `generation` go to the XML parser now: it is
    /// the current one, and its stream is not waiting for TLS. (Asked before every element; one
    /// switch that reads only the generations, no copy of the state's payload.)
    func acceptsXML(from generation: TransportGeneration) -> Bool {
        xmlGeneration == generation
    }

    // MARK: - Timers

    /// Handles the timers due at `now` (extra calls are harmless).
    public mutating func handleTimeout(now: Instant) {
        guard let earliest = timers.earliest, earliest <= now else { return }
        for timer in timers.expired(at: now) {
            switch timer {
            case .connectAttempt:
                switch state {
                case .connectingTransport, .negotiating:
                    lost(
                        XMPPClientError(
                            .connectTimeout,
                            "The connect attempt did not reach an online stream within \(configuration.connectTimeout)."
                        ),
                        closeTransport: true,
                        now: now
                    )
                case .disconnected, .connected, .closing, .reconnectWaiting, .suspended:
                    break
                }
            case .reconnect:
                if case .reconnectWaiting(let next, let redirects) = state {
                    beginAttempt(to: next, redirects: redirects, now: now)
                }
            case .ping:
                autoPingDue(now: now)
            case .keepAlive:
                keepAliveDue(now: now)
            case .ackRequest:
                if case .connected(let session) = state, let sm = streamManagement, !sm.unacknowledged.isEmpty {
                    requestAck(generation: session.generation)
                }
            case .iqTimeout:
                expireIQs(now: now)
            case .close:
                if case .closing(let generation) = state {
                    enqueue(.closeTransport(generation: generation))
                    closingEnded(now: now)
                }
            case .releaseBuffers:
                // Only between stanzas; with a stanza half received, look again later.
                if case .connected = state, !parser.releaseBuffersWhileIdle(),
                    let idle = configuration.releaseBuffersAfterIdle
                {
                    timers.set(.releaseBuffers, at: now + idle)
                }
            }
        }
    }

    private mutating func autoPingDue(now: Instant) {
        guard case .connected(var session) = state, var autoPing = session.autoPing else { return }
        switch autoPing.check(now: now, lastReceived: lastReceived) {
        case .nothing:
            break
        case .sendPing:
            let id = makeID("ping")
            sendPing(id: id, session: session)
            autoPing.pingSent(id: id, at: now)
        case .dead(let probe):
            health.lastDeadLinkDetection = now - lastReceived
            let configuration = autoPing.configuration
            return lost(
                XMPPClientError(
                    .serverTimeout,
                    probe
                        ? "A probe ping went unanswered after the network changed."
                        : "\(configuration.maximumMissed) pings in a row went unanswered for \(configuration.timeout) each."
                ),
                closeTransport: true,
                now: now
            )
        }
        session.autoPing = autoPing
        state = .connected(session)
        timers.set(.ping, at: autoPing.deadline(lastReceived: lastReceived))
    }

    // MARK: - Attempts, loss, reconnect

    /// Starts an attempt to `endpoint` (nil: the configured server: the configuration's endpoint,
    /// or the targets DNS names, or the domain's default).
    ///
    /// Over WebSocket the attempt goes to `webSocket` (a `see-other-uri`), else to the configured
    /// URL; `endpoint` is not used.
    mutating func beginAttempt(to endpoint: Endpoint?, webSocket: ServerURL? = nil, redirects: Int, now: Instant) {
        if configuration.network.waitForPath && !device.hasPath {
            // No attempt without a network: wait for it (or, with no reconnect policy to wait
            // under, fail at once).
            guard schedule != nil else {
                let error = XMPPClientError(.connectionFailed, "The device has no network.")
                emit(.attemptFailed(error))
                return finish(error, now: now)
            }
            state = .reconnectWaiting(next: endpoint, redirects: redirects)
            return emit(.waitingForNetwork)
        }
        lastGeneration = lastGeneration.next
        let generation = lastGeneration
        timers.set(.connectAttempt, at: now + configuration.connectTimeout)
        if let url = webSocket ?? configuration.webSocket {
            var attempt = Attempt(generation: generation, endpoint: url.endpoint, redirects: redirects)
            attempt.toConfiguredServer = webSocket == nil
            attempt.directTLS = url.isSecure
            attempt.webSocket = url
            return open(attempt)
        }
        var attempt = Attempt(
            generation: generation,
            endpoint: endpoint ?? configuration.defaultEndpoint,
            redirects: redirects,
            toConfiguredServer: endpoint == nil,
            directTLS: configuration.tls == .direct
        )
        if endpoint == nil, configuration.endpoint == nil, configuration.serviceLookup {
            attempt.lookingUp = true
            state = .connectingTransport(attempt)
            return enqueue(.request(.lookUpService(domain: configuration.jid.domainpart, generation: generation)))
        }
        open(attempt)
    }

    /// Opens the transport of `attempt`'s target.
    private mutating func open(_ attempt: Attempt) {
        state = .connectingTransport(attempt)
        if let url = attempt.webSocket {
            // RFC 7395: text messages, the subprotocol `xmpp`. One message is one element: the
            // parser's own bound (with its stream error) comes first, this one keeps memory bounded.
            let request = TransportRequest(
                .webSocket(url, subprotocol: "xmpp"),
                messageFormat: .text,
                maximumMessageSize: configuration.parserLimits.maximumElementSize + 4096
            )
            return enqueue(.openTransport(request, generation: attempt.generation))
        }
        let directTLS = attempt.directTLS ? configuration.jid.domainpart : nil
        enqueue(
            .openTransport(
                TransportRequest(.tcp(attempt.endpoint, tlsServerName: directTLS)),
                generation: attempt.generation
            )
        )
    }

    /// The SRV lookups of `generation` answered: the targets are tried in RFC 2782's order (those
    /// the TLS policy allows: no direct TLS when TLS is disabled, only direct TLS when it is
    /// `direct`), or the domain's default when there are none; a domain that publishes "no
    /// service" fails the attempt for good (`serviceUnavailable`), and so does a domain that does
    /// not exist (`domainExists` false: the driver's lookup of the domain's own name answered
    /// NXDOMAIN) and publishes no records.
    public mutating func serviceLookedUp(
        startTLS: XMPPServiceTargets.Lookup,
        directTLS: XMPPServiceTargets.Lookup,
        domainExists: Bool = true,
        generation: TransportGeneration,
        now: Instant
    ) {
        guard case .connectingTransport(var attempt) = state, attempt.generation == generation, attempt.lookingUp
        else { return }
        attempt.lookingUp = false
        var targets: [XMPPServiceTargets.Target]
        do throws(XMPPServiceTargets.NoService) {
            targets = try XMPPServiceTargets.targets(
                domain: configuration.jid.domainpart,
                startTLS: configuration.tls == .direct ? .none : startTLS,
                directTLS: configuration.tls == .disabled ? .none : directTLS,
                domainExists: domainExists,
                using: &random
            )
        } catch {
            state = .connectingTransport(attempt)
            return lost(XMPPClientError(.serviceUnavailable, error.message), closeTransport: false, now: now)
        }
        if configuration.tls == .direct, targets.allSatisfy({ !$0.directTLS }) {
            // Direct TLS asked for, and no direct-TLS records: the domain on 5223.
            targets = [XMPPServiceTargets.Target(host: configuration.jid.domainpart, port: 5223, directTLS: true)]
        }
        // Targets that failed on earlier attempts go after the others (in RFC 2782 order among
        // themselves), so that one broken server is not the first tried every time.
        let failing = Set(failingTargets)
        targets = targets.filter { !failing.contains($0) } + targets.filter { failing.contains($0) }
        targetOrder = targets
        let first = targets.removeFirst()
        attempt.endpoint = Endpoint(host: first.host, port: first.port)
        attempt.directTLS = first.directTLS
        attempt.remainingTargets = targets
        open(attempt)
    }

    /// A target of the lookup failed before a stream: later lookups try it after the others.
    mutating func targetFailed(_ attempt: Attempt) {
        guard attempt.toConfiguredServer, attempt.webSocket == nil, !attempt.lookingUp else { return }
        let target = attempt.target
        failingTargets.removeAll { $0 == target }
        failingTargets.append(target)
        if failingTargets.count > Self.maximumFailingTargets { failingTargets.removeFirst() }
    }

    /// The most failing targets remembered.
    static let maximumFailingTargets = 32

    /// The next target of the lookup, within the same attempt (and its deadline).
    mutating func openNextTarget(_ attempt: Attempt) {
        var attempt = attempt
        let next = attempt.remainingTargets.removeFirst()
        lastGeneration = lastGeneration.next
        attempt.generation = lastGeneration
        attempt.endpoint = Endpoint(host: next.host, port: next.port)
        attempt.directTLS = next.directTLS
        open(attempt)
    }

    /// Where a resumption should connect (XEP-0198 `location`), if the server named a place.
    var resumptionEndpoint: Endpoint? {
        // A `location` is a host and port: no place for a WebSocket URL.
        guard !overWebSocket, let sm = streamManagement, sm.isResumable else { return nil }
        return sm.location
    }

    /// The stream or attempt ended by accident (or by a fatal error): report it, then reconnect
    /// under the policy, or stop.
    mutating func lost(
        _ error: XMPPClientError,
        closeTransport: Bool,
        redirect: Endpoint? = nil,
        webSocketRedirect: ServerURL? = nil,
        now: Instant
    ) {
        var redirects = 0
        switch state {
        case .connected(let session):
            if closeTransport { enqueue(.closeTransport(generation: session.generation)) }
            emit(.connectionLost(error))
        case .connectingTransport(let attempt):
            if closeTransport { enqueue(.closeTransport(generation: attempt.generation)) }
            redirects = attempt.redirects
            emit(.attemptFailed(error))
        case .negotiating(let negotiation):
            if closeTransport { enqueue(.closeTransport(generation: negotiation.attempt.generation)) }
            redirects = negotiation.attempt.redirects
            emit(.attemptFailed(error))
        case .closing, .disconnected, .reconnectWaiting, .suspended:
            return
        }
        cancelSessionTimers()
        timers.cancel(.connectAttempt)
        guard !error.isFatal, let schedule else { return finish(error, now: now) }
        if let sm = streamManagement, !sm.isResumable {
            // Enabled without resumption (or enable unanswered): what was not acknowledged is
            // lost with this stream.
            streamManagement = nil
            reportUnacknowledged(sm.unacknowledgedAppStanzas)
        }
        if streamManagement == nil { failPendingIQs(error) }
        if let redirect, redirects < configuration.maximumRedirects {
            // see-other-host: at once, without counting as a reconnect attempt.
            return beginAttempt(to: redirect, redirects: redirects + 1, now: now)
        }
        if let webSocketRedirect, redirects < configuration.maximumRedirects {
            // see-other-uri (RFC 7395 §3.6.1): the same.
            return beginAttempt(to: nil, webSocket: webSocketRedirect, redirects: redirects + 1, now: now)
        }
        let next = resumptionEndpoint
        var running = schedule
        running.connectionLost(at: now)
        if configuration.network.waitForPath && !device.hasPath {
            // No network: no attempt until it is back, and none counted.
            self.schedule = running
            state = .reconnectWaiting(next: next, redirects: 0)
            emit(.waitingForNetwork)
            return
        }
        let delay = running.nextDelay(now: now, reason: error.message, using: &random)
        self.schedule = running
        if delay != nil { health.reconnecting(reason: error.message) }
        guard let delay else {
            state = .suspended
            emit(.suspended(.gaveUp(lastError: error)))
            return
        }
        state = .reconnectWaiting(next: next, redirects: 0)
        timers.set(.reconnect, at: now + delay)
        emit(.reconnecting(attempt: running.attempts, delay: delay, lastError: error))
    }

    /// The closing handshake ended (the server's `</stream:stream>`, the transport closed, or the
    /// close timeout).
    mutating func closingEnded(now: Instant) {
        finish(nil, now: now)
    }

    /// Stops for good: every timer off, queued and unacknowledged stanzas handed back, pending
    /// iq requests ended, `closed(error)`.
    mutating func finish(_ error: XMPPClientError?, now: Instant) {
        timers.cancelAll()
        var returned: [XElement] = []
        if let sm = streamManagement { returned += sm.unacknowledgedAppStanzas }
        returned += outbox.removeAll()
        streamManagement = nil
        reportUnacknowledged(returned)
        failPendingIQs(error ?? XMPPClientError(.canceled, "The connection was stopped before an answer came."))
        state = .disconnected
        emit(.closed(error))
    }

    mutating func reportUnacknowledged(_ stanzas: [XElement]) {
        if !stanzas.isEmpty { emit(.unacknowledgedStanzas(stanzas)) }
    }

    mutating func failPendingIQs(_ error: XMPPClientError) {
        guard !pendingIQs.isEmpty else { return }
        let ids = pendingIQs.filter { $0.value.purpose == .app }.map(\.key).sorted()
        pendingIQs.removeAll()
        timers.cancel(.iqTimeout)
        for id in ids { emit(.iqResponse(id: id, .notDelivered(error))) }
        finishCatchUp(complete: false)
    }

    mutating func cancelSessionTimers() {
        timers.cancel(.ping)
        timers.cancel(.ackRequest)
        timers.cancel(.close)
        timers.cancel(.releaseBuffers)
    }
}
