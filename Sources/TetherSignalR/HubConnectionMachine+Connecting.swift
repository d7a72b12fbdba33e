public import TetherCore

extension HubConnectionMachine {
    // MARK: - Negotiate, transport, handshake

    func requestHeaders(_ accessToken: String?) -> [String: String] {
        var headers = configuration.headers
        if let accessToken { headers["Authorization"] = "Bearer " + accessToken }
        return headers
    }

    var usesStatefulReconnect: Bool { configuration.statefulReconnect }

    mutating func beginAttempt(isReconnect: Bool, now: Instant) {
        var attempt = Attempt(url: configuration.url, accessToken: configuration.accessToken, isReconnect: isReconnect)
        if configuration.skipNegotiation {
            let url = Negotiate.webSocketURL(for: configuration.url)
            attempt.negotiated = nil
            state = .connectingTransport(attempt)
            enqueue(.openTransport(url: url, headers: requestHeaders(attempt.accessToken)))
            return
        }
        state = .negotiating(attempt)
        enqueue(
            .sendNegotiate(
                url: Negotiate.negotiateURL(for: attempt.url, statefulReconnect: usesStatefulReconnect),
                headers: requestHeaders(attempt.accessToken)
            )
        )
    }

    /// The negotiate request's HTTP response.
    public mutating func negotiateResponse(status: Int, body: [UInt8], now: Instant) {
        guard case .negotiating(var attempt) = state else { return }
        guard status == 200 else {
            let message =
                (200..<300).contains(status)
                ? "Unexpected status code returned from negotiate '\(status)'"
                : "Failed to complete negotiation with the server: Status code '\(status)'"
                    + (status == 404
                        ? " Either this is not a SignalR endpoint or there is a proxy blocking the connection." : "")
            return attemptFailed(HubConnectionError(.negotiation, message), now: now)
        }
        do throws(HubProtocolError) {
            switch try Negotiate.parse(body) {
            case .redirect(let url, let accessToken):
                attempt.redirects += 1
                guard attempt.redirects <= Negotiate.maximumRedirects else {
                    return attemptFailed(
                        HubConnectionError(.negotiation, Negotiate.redirectLimitExceeded.message),
                        now: now
                    )
                }
                attempt.url = url
                if let accessToken { attempt.accessToken = accessToken }
                state = .negotiating(attempt)
                enqueue(
                    .sendNegotiate(
                        url: Negotiate.negotiateURL(for: url, statefulReconnect: usesStatefulReconnect),
                        headers: requestHeaders(attempt.accessToken)
                    )
                )
            case .connect(let response):
                if response.useStatefulReconnect && !usesStatefulReconnect {
                    return attemptFailed(
                        HubConnectionError(
                            .negotiation,
                            "Client didn't negotiate Stateful Reconnect but the server did."
                        ),
                        now: now
                    )
                }
                guard response.transport(named: "WebSockets")?.supports(hubProtocol.transferFormat) == true else {
                    return attemptFailed(
                        HubConnectionError(
                            .negotiation,
                            "Unable to connect to the server with any of the available transports."
                        ),
                        now: now
                    )
                }
                attempt.negotiated = response
                state = .connectingTransport(attempt)
                let url = Negotiate.webSocketURL(
                    for: Negotiate.connectURL(for: attempt.url, connectionToken: response.connectionToken)
                )
                enqueue(.openTransport(url: url, headers: requestHeaders(attempt.accessToken)))
            }
        } catch {
            attemptFailed(HubConnectionError(.negotiation, error.message), now: now)
        }
    }

    /// The negotiate request failed without a response (network error); `description` must not
    /// contain secrets.
    public mutating func negotiateFailed(_ description: String, now: Instant) {
        guard case .negotiating = state else { return }
        attemptFailed(
            HubConnectionError(.negotiation, "Failed to complete negotiation with the server: " + description),
            now: now
        )
    }

    /// The WebSocket is open.
    public mutating func transportOpened(now: Instant) {
        switch state {
        case .connectingTransport(let attempt):
            let stateful = attempt.negotiated?.useStatefulReconnect == true && usesStatefulReconnect
            var bytes: [UInt8] = []
            HandshakeRequest(protocolName: hubProtocol.name, version: stateful ? 2 : 1).write(into: &bytes)
            // The handshake is JSON, but goes in the transfer format's frame type.
            enqueue(.send(bytes, format: hubProtocol.transferFormat))
            state = .handshaking(attempt, received: [])
            timers.set(.handshake, at: now + configuration.handshakeTimeout)
        case .resuming(var session):
            // Stateful reconnect: no handshake; tell the peer where to resume, then replay.
            guard let stateful = session.stateful else { return }
            let resumeAt = stateful.resumeSequenceId
            var bytes: [UInt8] = []
            hubProtocol.write(.sequence(sequenceId: resumeAt), into: &bytes)
            enqueue(.send(bytes, format: hubProtocol.transferFormat))
            for message in stateful.unacknowledged {
                enqueue(.send(message.bytes, format: hubProtocol.transferFormat))
            }
            session.parser = hubProtocol.makeParser()
            session.heartbeat = Heartbeat(configuration: heartbeatConfiguration, now: now)
            state = .connected(session)
            armLivenessTimers(session)
        default:
            return
        }
    }

    /// Bytes received in one WebSocket message (Text or Binary: JSON is accepted in either).
    public mutating func receive(_ bytes: Span<UInt8>, now: Instant) {
        switch state {
        case .handshaking(let attempt, var received):
            received.append(copying: bytes)
            let parsed: (response: HandshakeResponse, consumed: Int)?
            do {
                parsed = try HandshakeResponse.parse(received.span)
            } catch {
                enqueue(.closeTransport)
                return attemptFailed(HubConnectionError(.handshake, error.message), now: now)
            }
            guard let parsed else {
                if received.count > 64 * 1024 {
                    enqueue(.closeTransport)
                    return attemptFailed(HubConnectionError(.handshake, "Handshake was canceled."), now: now)
                }
                state = .handshaking(attempt, received: received)
                return
            }
            timers.cancel(.handshake)
            if let error = parsed.response.error {
                enqueue(.closeTransport)
                return attemptFailed(
                    HubConnectionError(.handshake, "Server returned handshake error: " + error),
                    now: now
                )
            }
            handshakeCompleted(attempt, now: now)
            let rest = Array(received[parsed.consumed...])
            if !rest.isEmpty { processReceived(rest.span, now: now) }
        case .connected:
            processReceived(bytes, now: now)
        default:
            return
        }
    }

    mutating func handshakeCompleted(_ attempt: Attempt, now: Instant) {
        let negotiated = attempt.negotiated
        let stateful = negotiated?.useStatefulReconnect == true && usesStatefulReconnect
        let url =
            negotiated.map {
                Negotiate.webSocketURL(for: Negotiate.connectURL(for: attempt.url, connectionToken: $0.connectionToken))
            } ?? Negotiate.webSocketURL(for: configuration.url)
        var session = Session(
            connectionId: negotiated?.connectionId,
            transportURL: url,
            headers: requestHeaders(attempt.accessToken),
            parser: hubProtocol.makeParser(),
            stateful: stateful ? StatefulReconnectBuffer(capacity: configuration.statefulReconnectBufferSize) : nil,
            heartbeat: Heartbeat(configuration: heartbeatConfiguration, now: now)
        )
        schedule?.connectionEstablished()
        enqueue(
            .event(
                attempt.isReconnect
                    ? .reconnected(connectionId: session.connectionId) : .connected(connectionId: session.connectionId)
            )
        )
        // Like the TypeScript client: one Ping right after the handshake.
        send(.ping, in: &session, now: now)
        state = .connected(session)
        armLivenessTimers(session)
    }

    mutating func armLivenessTimers(_ session: Session) {
        if let deadline = session.heartbeat.nextDeadline { timers.set(.liveness, at: deadline) }
    }

    /// The WebSocket closed (`error` is nil for a normal close). Must not contain secrets.
    public mutating func transportClosed(error description: String?, now: Instant) {
        let error = description.map { HubConnectionError(.transport, "WebSocket closed with an error: " + $0) }
        switch state {
        case .connectingTransport, .handshaking:
            timers.cancel(.handshake)
            attemptFailed(
                error ?? HubConnectionError(.transport, "The WebSocket closed before the handshake completed."),
                now: now
            )
        case .connected(let session):
            connectionLost(session, error: error, allowReconnect: true, now: now)
        case .resuming(let session):
            // The same connection could not be resumed: a brand-new one may still be possible.
            var lost = session
            lost.stateful = nil
            connectionLost(lost, error: error, allowReconnect: true, now: now)
        case .disconnected, .negotiating, .reconnectWaiting:
            return
        }
    }

    // MARK: - Timers

    /// Runs the timers due at `now` (extra calls are harmless).
    public mutating func handleTimeout(now: Instant) {
        for timer in timers.expired(at: now) {
            switch timer {
            case .handshake:
                guard case .handshaking = state else { continue }
                enqueue(.closeTransport)
                attemptFailed(
                    HubConnectionError(
                        .handshake,
                        "The handshake timed out after \(configuration.handshakeTimeout.components.seconds) seconds."
                    ),
                    now: now
                )
            case .liveness:
                guard case .connected(var session) = state else { continue }
                switch session.heartbeat.check(now: now) {
                case .receiveTimedOut, .probesExhausted:
                    enqueue(.closeTransport)
                    connectionLost(session, error: .serverTimeout, allowReconnect: true, now: now, resumable: false)
                    continue
                case .keepAlive, .probeUnanswered:
                    send(.ping, in: &session, now: now)
                case nil:
                    break
                }
                state = .connected(session)
                armLivenessTimers(session)
            case .reconnect:
                guard case .reconnectWaiting = state else { continue }
                beginAttempt(isReconnect: true, now: now)
            case .ack:
                guard case .connected(var session) = state, var stateful = session.stateful, stateful.needsAck else {
                    continue
                }
                let sequenceId = stateful.acknowledge()
                session.stateful = stateful
                send(.ack(sequenceId: sequenceId), in: &session, now: now)
                state = .connected(session)
            }
        }
    }

    // MARK: - Failures, loss, reconnect

    /// A connect attempt failed: a first `start` is not retried; a reconnect attempt goes on to
    /// the next delay.
    mutating func attemptFailed(_ error: HubConnectionError, now: Instant) {
        timers.cancel(.handshake)
        let isReconnect: Bool
        switch state {
        case .negotiating(let attempt), .connectingTransport(let attempt), .handshaking(let attempt, _):
            isReconnect = attempt.isReconnect
        default:
            isReconnect = false
        }
        if isReconnect {
            scheduleReconnect(error: error, announce: false, now: now)
        } else {
            finish(error: error)
        }
    }

    /// The connection was lost (transport closed, server timeout, protocol violation, Close).
    mutating func connectionLost(
        _ session: Session,
        error: HubConnectionError?,
        allowReconnect: Bool,
        now: Instant,
        resumable: Bool = true
    ) {
        timers.cancel(.liveness)
        timers.cancel(.ack)
        if resumable, allowReconnect, var stateful = session.stateful {
            // Stateful reconnect: reopen the same connection; nothing pending fails.
            stateful.transportLost()
            var resuming = session
            resuming.stateful = stateful
            state = .resuming(resuming)
            enqueue(.openTransport(url: session.transportURL, headers: session.headers))
            return
        }
        failPending(session)
        if allowReconnect, schedule != nil {
            scheduleReconnect(error: error, announce: true, now: now)
        } else {
            finish(error: error)
        }
    }

    /// Waits for the policy's next delay, or closes when it gives up.
    mutating func scheduleReconnect(error: HubConnectionError?, announce: Bool, now: Instant) {
        guard var schedule else { return finish(error: error) }
        schedule.connectionLost(at: now)
        let delay = schedule.nextDelay(now: now, reason: error?.message, using: &random)
        self.schedule = schedule
        guard let delay else { return finish(error: error) }
        if announce { enqueue(.event(.reconnecting(error))) }
        state = .reconnectWaiting(lastError: error)
        timers.set(.reconnect, at: now + delay)
    }

    /// Fails every pending invocation and stream ("exactly once").
    mutating func failPending(_ session: Session) {
        for (id, kind) in session.pending.sorted(by: { Int($0.key) ?? 0 < Int($1.key) ?? 0 }) {
            switch kind {
            case .invocation:
                enqueue(
                    .event(.completion(invocationId: id, result: .error(HubConnectionError.invocationCanceled.message)))
                )
            case .stream:
                enqueue(
                    .event(.streamCompleted(invocationId: id, error: HubConnectionError.invocationCanceled.message))
                )
            case .canceledStream:
                continue
            }
        }
    }

    /// Closed for good.
    mutating func finish(error: HubConnectionError?) {
        timers.cancelAll()
        state = .disconnected
        schedule?.connectionEstablished()
        enqueue(.event(.closed(error)))
    }
}
