@_spi(TetherInternal) public import TetherCore

extension HubConnectionMachine {
    // MARK: - Access token, negotiate, transport, handshake

    func requestHeaders(_ accessToken: String?) -> [String: String] {
        var headers = configuration.headers
        if let accessToken { headers["Authorization"] = "Bearer " + accessToken }
        return headers
    }

    var usesStatefulReconnect: Bool { configuration.statefulReconnect }

    /// Whether `attempt`'s connection uses stateful reconnect: asked for, agreed by the server,
    /// and over WebSockets (the one transport the servers resume).
    func usesStatefulReconnect(_ attempt: Attempt) -> Bool {
        usesStatefulReconnect && attempt.negotiated?.useStatefulReconnect == true && attempt.transport == .webSockets
    }

    mutating func beginAttempt(isReconnect: Bool, now: Instant) {
        if configuration.network.waitForPath && !device.hasPath {
            // No attempt without a network: a reconnect waits for it; a first start, which is not
            // retried, fails at once.
            guard isReconnect || (configuration.retriesFailedStart && schedule != nil) else {
                let error = HubConnectionError(.connectionFailed, "The device has no network.")
                emit(.attemptFailed(error))
                return finish(error: error)
            }
            state = .reconnectWaiting
            return emit(.waitingForNetwork)
        }
        let attempt = Attempt(
            generation: makeGeneration(),
            url: configuration.url,
            accessToken: configuration.accessToken,
            isReconnect: isReconnect,
            untried: configuration.skipNegotiation ? [] : configuration.transports
        )
        timers.set(.connectAttempt, at: now + configuration.connectTimeout)
        if configuration.asksForAccessToken {
            state = .fetchingAccessToken(attempt)
            return enqueue(.request(.fetchAccessToken(generation: attempt.generation)))
        }
        connect(attempt, now: now)
    }

    /// What opens `transport` to `url` (`ws(s)://` for WebSockets, `http(s)://` for the others):
    /// messages in the hub protocol's format (JSON is taken in either frame type, as servers send
    /// it), at most the protocol's largest message. Nil for a URL that is not absolute.
    func transportRequest(_ transport: HubTransport, url: String, headers: [String: String]) -> TransportRequest? {
        guard let parsed = ServerURL(url) else { return nil }
        let kind: TransportRequest.Kind =
            switch transport {
            case .webSockets: .webSocket(parsed, subprotocol: nil)
            case .serverSentEvents: .serverSentEvents(parsed)
            case .longPolling: .longPolling(parsed)
            }
        return TransportRequest(
            kind,
            headers: headers,
            messageFormat: hubProtocol.transferFormat,
            acceptsEitherFormat: true,
            maximumMessageSize: hubProtocol.maximumMessageSize
        )
    }

    /// Asks for the negotiate request of `attempt`, or fails it when the URL is not absolute (a
    /// redirect's).
    private mutating func sendNegotiate(_ attempt: Attempt, now: Instant) {
        let url = Negotiate.negotiateURL(for: attempt.url, statefulReconnect: usesStatefulReconnect)
        guard let parsed = ServerURL(url) else {
            return attemptFailed(
                HubConnectionError(
                    .negotiation,
                    "The URL '\(ServerURL.redacted(url))' is not an absolute http(s) URL."
                ),
                now: now
            )
        }
        enqueue(
            .request(
                .negotiate(url: parsed, headers: requestHeaders(attempt.accessToken), generation: attempt.generation)
            )
        )
    }

    /// Negotiates, or opens the WebSocket at once when negotiation is skipped.
    private mutating func connect(_ attempt: Attempt, now: Instant) {
        var attempt = attempt
        if configuration.skipNegotiation {
            attempt.negotiated = nil
            attempt.transport = .webSockets
            state = .connectingTransport(attempt)
            return openTransport(attempt, url: Negotiate.webSocketURL(for: configuration.url), now: now)
        }
        state = .negotiating(attempt)
        sendNegotiate(attempt, now: now)
    }

    /// The app's token provider answered (nil: no token).
    public mutating func accessTokenFetched(_ token: String?, generation: TransportGeneration, now: Instant) {
        guard case .fetchingAccessToken(var attempt) = state, attempt.generation == generation else { return }
        attempt.accessToken = token
        attempt.generation = makeGeneration()
        guard attempt.retryAfterUnauthorized == .transport, let negotiated = attempt.negotiated else {
            return connect(attempt, now: now)
        }
        // The transport was refused: open it again with the new token (same negotiated connection).
        state = .connectingTransport(attempt)
        openTransport(attempt, negotiated: negotiated, now: now)
    }

    /// Opens `attempt.transport` for the negotiated connection.
    private mutating func openTransport(_ attempt: Attempt, negotiated: NegotiateResponse, now: Instant) {
        let url = Negotiate.connectURL(for: attempt.url, connectionToken: negotiated.connectionToken)
        openTransport(attempt, url: attempt.transport == .webSockets ? Negotiate.webSocketURL(for: url) : url, now: now)
    }

    /// Opens `attempt.transport` to `url`, or fails the attempt when the URL is not absolute.
    private mutating func openTransport(_ attempt: Attempt, url: String, now: Instant) {
        guard let request = transportRequest(attempt.transport, url: url, headers: requestHeaders(attempt.accessToken))
        else {
            return attemptFailed(
                HubConnectionError(.negotiation, "The URL '\(ServerURL.redacted(url))' is not an absolute URL."),
                now: now
            )
        }
        enqueue(.openTransport(request, generation: attempt.generation))
    }

    /// A 401 refused `step` of the current attempt: the token provider is asked once more and the
    /// step retried; a second 401, or one without a provider to ask, fails the attempt with
    /// `unauthorized` (no other transport is tried: the token, not the transport, was refused).
    mutating func refusedAsUnauthorized(_ step: UnauthorizedStep, now: Instant) {
        let attempt: Attempt
        switch state {
        case .negotiating(let current) where step == .negotiate: attempt = current
        case .connectingTransport(let current) where step == .transport: attempt = current
        case .handshaking(let current) where step == .transport: attempt = current
        default: return
        }
        timers.cancel(.handshake)
        let what = step == .negotiate ? "negotiate" : "opening the \(attempt.transport)"
        guard configuration.asksForAccessToken, attempt.retryAfterUnauthorized == nil else {
            let again = attempt.retryAfterUnauthorized == nil ? "" : "; a new token from the provider was refused too"
            return attemptFailed(
                HubConnectionError(
                    .authenticationFailed,
                    "Unauthorized: the server answered 401 to \(what)\(again)."
                ),
                now: now
            )
        }
        var retry = attempt
        retry.retryAfterUnauthorized = step
        retry.generation = makeGeneration()
        state = .fetchingAccessToken(retry)
        enqueue(.request(.fetchAccessToken(generation: retry.generation)))
    }

    /// The app's token provider failed (`description` must not contain secrets).
    public mutating func accessTokenFailed(_ description: String, generation: TransportGeneration, now: Instant) {
        guard case .fetchingAccessToken(let attempt) = state, attempt.generation == generation else { return }
        attemptFailed(HubConnectionError(.negotiation, "The access token provider failed: " + description), now: now)
    }

    /// The negotiate request's HTTP response.
    public mutating func negotiateResponse(
        status: Int,
        body: [UInt8],
        generation: TransportGeneration,
        now: Instant
    ) {
        guard case .negotiating(var attempt) = state, attempt.generation == generation else { return }
        if status == 401 { return refusedAsUnauthorized(.negotiate, now: now) }
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
                guard attempt.redirects <= configuration.maximumNegotiateRedirects else {
                    return attemptFailed(
                        HubConnectionError(.negotiation, Negotiate.redirectLimitExceeded.message),
                        now: now
                    )
                }
                attempt.url = Negotiate.redirectURL(url, keepingQueryOf: configuration.url)
                if let accessToken { attempt.accessToken = accessToken }
                attempt.generation = makeGeneration()
                state = .negotiating(attempt)
                sendNegotiate(attempt, now: now)
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
                guard let transport = chooseTransport(&attempt, offered: response) else {
                    return attemptFailed(
                        HubConnectionError(.negotiation, Self.noTransportMessage(attempt.transportFailures)),
                        now: now
                    )
                }
                attempt.negotiated = response
                attempt.transport = transport
                attempt.generation = makeGeneration()
                state = .connectingTransport(attempt)
                openTransport(attempt, negotiated: response, now: now)
            }
        } catch {
            attemptFailed(HubConnectionError(.negotiation, error.message), now: now)
        }
    }

    /// The first of the attempt's untried transports that the server offers and that carries the
    /// hub protocol's format (taken off the list); the ones passed over are noted with why.
    func chooseTransport(_ attempt: inout Attempt, offered response: NegotiateResponse) -> HubTransport? {
        let format = hubProtocol.transferFormat
        while !attempt.untried.isEmpty {
            let candidate = attempt.untried.removeFirst()
            guard let offered = response.transport(named: candidate.rawValue) else {
                attempt.transportFailures.append("'\(candidate.rawValue)' is not offered by the server.")
                continue
            }
            guard candidate.carries(format), offered.supports(format) else {
                attempt.transportFailures.append(
                    "'\(candidate.rawValue)' does not support \(format == .text ? "Text" : "Binary")."
                )
                continue
            }
            return candidate
        }
        return nil
    }

    /// The official clients' text when no transport could be used, with the reasons.
    static func noTransportMessage(_ failures: [String]) -> String {
        (["Unable to connect to the server with any of the available transports."] + failures).joined(separator: " ")
    }

    /// The negotiate request failed without a response: it could not connect, TLS failed, or the
    /// app's trust settings refused the certificate (fatal, whatever the reconnect policy).
    public mutating func negotiateFailed(_ error: TransportError, generation: TransportGeneration, now: Instant) {
        guard case .negotiating = state, currentGeneration == generation else { return }
        let text = "Failed to complete negotiation with the server: " + error.message
        let failure =
            switch error.kind {
            case .certificateRefused: HubConnectionError(.certificateRefused, text)
            case .tlsFailed: HubConnectionError(.tlsFailed, text)
            case .connectionFailed, .connectionLost, .timedOut: HubConnectionError(.connectionFailed, text)
            case .unauthorized, .rejected, .protocolViolation: HubConnectionError(.negotiation, text)
            }
        attemptFailed(failure, now: now)
    }

    /// The WebSocket of `generation` is open.
    public mutating func transportConnected(generation: TransportGeneration, tls: TLSChannelBindings, now: Instant) {
        switch state {
        case .connectingTransport(let attempt):
            guard attempt.generation == generation else { return }
            let stateful = usesStatefulReconnect(attempt)
            var bytes: [UInt8] = []
            HandshakeRequest(protocolName: hubProtocol.name, version: stateful ? 2 : 1).write(into: &bytes)
            // The handshake is JSON, but goes in the transfer format's frame type.
            enqueue(.send(bytes, generation: generation))
            handshakeReceived = []
            state = .handshaking(attempt)
            timers.set(.handshake, at: now + configuration.handshakeTimeout)
        case .resuming(let session, .opening, _):
            guard session.generation == generation, var live = takeLive() else { return }
            guard let stateful = live.link.stateful else { return restore(live) }
            // Stateful reconnect: no handshake; tell the peer where to resume, then replay.
            var bytes: [UInt8] = []
            hubProtocol.write(.sequence(sequenceId: stateful.resumeSequenceId), into: &bytes)
            enqueue(.send(bytes, generation: generation))
            for message in stateful.unacknowledged.elements {
                enqueue(.send(message.bytes, generation: generation))
            }
            timers.cancel(.handshake)
            live.link.parser = hubProtocol.makeParser()
            live.link.heartbeat = Heartbeat(configuration: heartbeatConfiguration, now: now)
            live.link.resumedAt = now
            health.resumes += 1
            health.onlineSince = now
            live.link.receivedAtResume = stateful.latestReceived
            live.resumeStep = nil
            armLivenessTimers(live.link)
            emit(.resumed(HubSession(connectionId: live.session.connectionId, transport: live.session.transport)))
            restore(live)
        case .disconnected, .fetchingAccessToken, .negotiating, .handshaking, .connected, .reconnectWaiting, .suspended,
            .resuming(_, .waiting, _):
            return
        case .modifying:
            Self.modifyingObserved()
        }
    }

    /// Bytes received in one WebSocket message of `generation` (Text or Binary: JSON is accepted
    /// in either).
    public mutating func transportReceived(_ bytes: Span<UInt8>, generation: TransportGeneration, now: Instant) {
        switch state {
        case .handshaking(let attempt):
            guard attempt.generation == generation else { return }
            health.bytesReceived += bytes.count
            handshakeReceived.append(copying: bytes)
            let parsed: (response: HandshakeResponse, consumed: Int)?
            do {
                parsed = try HandshakeResponse.parse(handshakeReceived.backDeployedSpan)
            } catch {
                handshakeReceived = []
                enqueue(.closeTransport(generation: generation))
                return attemptFailed(HubConnectionError(.handshake, error.message), now: now)
            }
            guard let parsed else {
                if handshakeReceived.count > configuration.maximumHandshakeSize {
                    handshakeReceived = []
                    enqueue(.closeTransport(generation: generation))
                    attemptFailed(HubConnectionError(.handshake, "Handshake was canceled."), now: now)
                }
                return
            }
            let received = handshakeReceived
            handshakeReceived = []
            timers.cancel(.handshake)
            if let error = parsed.response.error {
                enqueue(.closeTransport(generation: generation))
                return attemptFailed(
                    HubConnectionError(.handshake, "Server returned handshake error: " + error),
                    now: now
                )
            }
            handshakeCompleted(attempt, now: now)
            let rest = Array(received[parsed.consumed...])
            if !rest.isEmpty { processReceived(count: rest.count, now: now) { $0.append(rest) } }
        case .connected(let session, _):
            guard session.generation == generation else { return }
            processReceived(count: bytes.count, now: now) { $0.append(bytes) }
        case .disconnected, .fetchingAccessToken, .negotiating, .connectingTransport, .reconnectWaiting, .suspended,
            .resuming:
            return
        case .modifying:
            Self.modifyingObserved()
        }
    }

    /// Bytes received in one WebSocket message of `generation`: once connected, the hub parser
    /// keeps the array instead of copying it (`HubMessageParser.append(_:)`).
    public mutating func transportReceived(_ bytes: [UInt8], generation: TransportGeneration, now: Instant) {
        guard case .connected(let session, _) = state else {
            return transportReceived(bytes.backDeployedSpan, generation: generation, now: now)
        }
        guard session.generation == generation else { return }
        processReceived(count: bytes.count, now: now) { $0.append(bytes) }
    }

    /// Bytes received in one WebSocket message of `generation`.
    public mutating func transportReceived(_ bytes: ArraySlice<UInt8>, generation: TransportGeneration, now: Instant) {
        transportReceived(bytes.span, generation: generation, now: now)
    }

    mutating func handshakeCompleted(_ attempt: Attempt, now: Instant) {
        timers.cancel(.connectAttempt)
        let negotiated = attempt.negotiated
        let stateful = usesStatefulReconnect(attempt)
        let url =
            negotiated.map {
                Negotiate.webSocketURL(for: Negotiate.connectURL(for: attempt.url, connectionToken: $0.connectionToken))
            } ?? Negotiate.webSocketURL(for: configuration.url)
        let session = Session(
            generation: attempt.generation,
            connectionId: negotiated?.connectionId,
            transport: attempt.transport,
            url: attempt.url,
            // Only WebSockets resume, on the URL this connection opened with (valid: it was opened).
            transportRequest: transportRequest(.webSockets, url: url, headers: requestHeaders(attempt.accessToken))
        )
        var live = LiveConnection(
            session: session,
            resumeStep: nil,
            linkStorage: LinkStorage(
                Link(
                    parser: hubProtocol.makeParser(),
                    stateful: stateful
                        ? StatefulReconnectBuffer(capacity: configuration.statefulReconnectBufferSize) : nil,
                    heartbeat: Heartbeat(
                        configuration: attempt.transport.hasInherentKeepAlive
                            ? Heartbeat.Configuration() : heartbeatConfiguration,
                        now: now
                    )
                )
            )
        )
        schedule?.connectionEstablished()
        reconnectAttemptOffset = 0
        health.onlineSince = now
        emit(.connected(HubSession(connectionId: session.connectionId, transport: session.transport)))
        // Like the TypeScript client: one Ping right after the handshake.
        send(.ping, live: &live, now: now)
        armLivenessTimers(live.link)
        restore(live)
    }

    mutating func armLivenessTimers(_ link: Link) {
        if let deadline = link.heartbeat.nextDeadline { timers.set(.liveness, at: deadline) }
    }

    /// The transport of `generation` closed, or could not be opened (`error` nil: an orderly
    /// close). A refused certificate ends the connection for good; a 401 while opening asks the
    /// token provider once more; a transport that fails to open is followed by the next one.
    public mutating func transportClosed(generation: TransportGeneration, error: TransportError?, now: Instant) {
        guard currentGeneration == generation else { return }
        let transport = self.transport ?? .webSockets
        if let error, error.kind == .certificateRefused {
            return certificateRefused(error.message, now: now)
        }
        if let error, error.kind == .unauthorized {
            switch state {
            case .connectingTransport, .handshaking: return refusedAsUnauthorized(.transport, now: now)
            default: break
            }
        }
        switch state {
        case .connectingTransport(var attempt):
            // The transport failed to start: the next one, after a new negotiate.
            let failure = HubConnectionError(
                error?.kind == .tlsFailed ? .tlsFailed : .connectionFailed,
                error.map { "\(transport.capitalizedDescription) closed with an error: \($0.message)" }
                    ?? "The \(transport) closed before it opened."
            )
            guard attempt.negotiated != nil else { return attemptFailed(failure, now: now) }
            attempt.transportFailures.append("\(transport.rawValue) failed: \(failure.message)")
            // Negotiate again only if the last answer offered a transport left to try.
            var rest = attempt
            guard let negotiated = attempt.negotiated, chooseTransport(&rest, offered: negotiated) != nil else {
                return attemptFailed(
                    HubConnectionError(failure.kind, Self.noTransportMessage(rest.transportFailures)),
                    now: now
                )
            }
            attempt.generation = makeGeneration()
            connect(attempt, now: now)
        case .handshaking:
            timers.cancel(.handshake)
            attemptFailed(
                HubConnectionError(
                    .connectionFailed,
                    "The \(transport) closed before the handshake completed" + (error.map { ": \($0.message)" } ?? ".")
                ),
                now: now
            )
        case .connected:
            guard let live = takeLive() else { return }
            connectionLost(live, error: lostError(error, transport: transport), allowReconnect: true, now: now)
        case .resuming(_, .opening(let attempt), _):
            timers.cancel(.handshake)
            guard let live = takeLive() else { return }
            resumeAttemptFailed(
                live,
                attempt: attempt,
                error: HubConnectionError(
                    .connectionFailed,
                    "The \(transport) could not be reopened" + (error.map { ": \($0.message)" } ?? ".")
                ),
                now: now
            )
        case .resuming(_, .waiting, _):
            return
        case .disconnected, .fetchingAccessToken, .negotiating, .reconnectWaiting, .suspended:
            return
        case .modifying:
            Self.modifyingObserved()
        }
    }

    /// The error of a connection lost because its transport closed (`error` nil: in order).
    func lostError(_ error: TransportError?, transport: HubTransport) -> HubConnectionError {
        guard let error else { return HubConnectionError(.connectionLost, "The server closed the \(transport).") }
        return HubConnectionError(
            error.kind == .unauthorized ? .authenticationFailed : .connectionLost,
            "\(transport.capitalizedDescription) closed with an error: \(error.message)"
        )
    }

    // MARK: - Timers

    /// Runs the timers due at `now` (extra calls are harmless).
    public mutating func handleTimeout(now: Instant) {
        guard let earliest = timers.earliest, earliest <= now else { return }
        for timer in timers.expired(at: now) {
            switch timer {
            case .handshake:
                if case .resuming(let session, .opening(let attempt), _) = state, let live = takeLive() {
                    enqueue(.closeTransport(generation: session.generation))
                    resumeAttemptFailed(
                        live,
                        attempt: attempt,
                        error: HubConnectionError(
                            .connectionFailed,
                            "The WebSocket could not be reopened within \(configuration.handshakeTimeout.components.seconds) seconds."
                        ),
                        now: now
                    )
                    continue
                }
                guard case .handshaking(let attempt) = state else { continue }
                enqueue(.closeTransport(generation: attempt.generation))
                attemptFailed(
                    HubConnectionError(
                        .handshake,
                        "The handshake timed out after \(configuration.handshakeTimeout.components.seconds) seconds."
                    ),
                    now: now
                )
            case .connectAttempt:
                let awaited: String
                switch state {
                case .fetchingAccessToken:
                    awaited = "the access token"
                case .negotiating(let attempt):
                    awaited = "the negotiate response"
                    enqueue(.closeTransport(generation: attempt.generation))
                case .connectingTransport(let attempt):
                    awaited = "the \(attempt.transport) to open"
                    enqueue(.closeTransport(generation: attempt.generation))
                case .handshaking(let attempt):
                    awaited = "the handshake response"
                    enqueue(.closeTransport(generation: attempt.generation))
                case .disconnected, .connected, .reconnectWaiting, .suspended, .resuming:
                    continue
                case .modifying:
                    Self.modifyingObserved()
                }
                attemptFailed(
                    HubConnectionError(
                        .connectTimeout,
                        "The connection attempt did not complete within "
                            + "\(configuration.connectTimeout.components.seconds) seconds (waiting for \(awaited))."
                    ),
                    now: now
                )
            case .liveness:
                guard case .connected = state, var live = takeLive() else { continue }
                switch live.link.heartbeat.check(now: now) {
                case .receiveTimedOut:
                    health.lastDeadLinkDetection = now - live.link.heartbeat.lastReceived
                    enqueue(.closeTransport(generation: live.session.generation))
                    connectionLost(live, error: .serverTimeout, allowReconnect: true, now: now)
                    continue
                case .awaitedNothingReceived:
                    health.lastDeadLinkDetection = now - live.link.heartbeat.lastReceived
                    enqueue(.closeTransport(generation: live.session.generation))
                    connectionLost(
                        live,
                        error: HubConnectionError(
                            .serverTimeout,
                            "Nothing arrived within \(configuration.network.probeTimeout) of a probe after the network changed."
                        ),
                        allowReconnect: true,
                        now: now
                    )
                    continue
                case .keepAlive:
                    send(.ping, live: &live, now: now)
                case nil:
                    break
                }
                if let deadline = live.link.heartbeat.nextDeadline { timers.set(.liveness, at: deadline) }
                restore(consume live)
            case .reconnect:
                guard case .reconnectWaiting = state else { continue }
                beginAttempt(isReconnect: true, now: now)
            case .resume:
                guard case .resuming(let session, .waiting(let attempt), _) = state, let live = takeLive() else {
                    continue
                }
                openResumedTransport(session, linkStorage: live.linkStorage, attempt: attempt + 1, now: now)
            case .ack:
                guard case .connected = state, var live = takeLive() else { continue }
                if live.link.stateful?.needsAck == true, let sequenceId = live.link.stateful?.acknowledge() {
                    send(.ack(sequenceId: sequenceId), live: &live, now: now)
                }
                restore(live)
            }
        }
    }

    // MARK: - Failures, loss, reconnect

    /// A connect attempt failed (`attemptFailed`): a fatal error closes; a first `start` is not
    /// retried (unless `retriesFailedStart`); a reconnect attempt goes on to the next delay.
    mutating func attemptFailed(_ error: HubConnectionError, now: Instant) {
        timers.cancel(.handshake)
        timers.cancel(.connectAttempt)
        let isReconnect: Bool
        switch state {
        case .fetchingAccessToken(let attempt), .negotiating(let attempt), .connectingTransport(let attempt),
            .handshaking(let attempt):
            isReconnect = attempt.isReconnect
        case .disconnected, .connected, .reconnectWaiting, .suspended, .resuming:
            isReconnect = false
        case .modifying:
            Self.modifyingObserved()
        }
        emit(.attemptFailed(error))
        if !error.isFatal, isReconnect || (configuration.retriesFailedStart && schedule != nil) {
            scheduleReconnect(error: error, now: now)
        } else {
            finish(error: error)
        }
    }

    /// The connection was lost (transport closed, server timeout, protocol violation, Close;
    /// reported as `connectionLost` unless `announced` already): under stateful reconnect its
    /// WebSocket is reopened, otherwise what is pending fails and the policy decides. `live` has
    /// been taken out of the state; a transition replaces it.
    mutating func connectionLost(
        _ live: LiveConnection,
        error: HubConnectionError,
        allowReconnect: Bool,
        now: Instant,
        resumable: Bool = true,
        announced: Bool = false,
        attemptsAnnounced: Int = 0
    ) {
        var live = live
        timers.cancel(.liveness)
        timers.cancel(.ack)
        if !announced { emit(.connectionLost(error)) }
        if resumable, allowReconnect, !error.isFatal, let stateful = live.link.stateful {
            // A resumed transport lost again within a handshake timeout with nothing new received
            // counts as a failed resume: the retry delays apply, and when they are used up the
            // connection is lost (a replayed message the client cannot take would otherwise
            // loop).
            let quick = live.link.resumedAt.map { now - $0 < configuration.handshakeTimeout } ?? false
            live.link.quickLosses =
                quick && stateful.latestReceived == live.link.receivedAtResume ? live.link.quickLosses + 1 : 0
            live.link.resumedAt = nil
            live.link.resumeTries = 0
            if live.link.quickLosses > configuration.resumeRetryDelays.count {
                health.failedResumes += 1
                live.link.stateful = nil
                return connectionLost(
                    live,
                    error: error,
                    allowReconnect: true,
                    now: now,
                    resumable: false,
                    announced: true
                )
            }
            // Stateful reconnect: reopen the same connection on a new transport; nothing pending
            // fails.
            live.link.stateful?.transportLost()
            var resuming = live.session
            resuming.generation = makeGeneration()
            let losses = live.link.quickLosses
            if configuration.network.waitForPath && !device.hasPath {
                // No network: the reopen waits for it (`networkChanged` starts it).
                state = .resuming(resuming, .waiting(attempt: losses), live.linkStorage)
                return emit(.waitingForNetwork)
            }
            live.link.resumeTries = 1
            guard losses > 0 else {
                emit(.reconnecting(attempt: 1, delay: .zero, lastError: error))
                return openResumedTransport(resuming, linkStorage: live.linkStorage, attempt: 1, now: now)
            }
            let delay = configuration.resumeRetryDelays[losses - 1]
            state = .resuming(resuming, .waiting(attempt: losses), live.linkStorage)
            timers.set(.resume, at: now + delay)
            emit(.reconnecting(attempt: 1, delay: delay, lastError: error))
            return
        }
        failPending(live.link)
        if allowReconnect, !error.isFatal, schedule != nil {
            reconnectAttemptOffset = attemptsAnnounced
            scheduleReconnect(error: error, now: now)
        } else {
            finish(error: error)
        }
    }

    /// Opens the WebSocket of `session.generation` to resume the same connection; it gets as long
    /// as a handshake would.
    mutating func openResumedTransport(_ session: Session, linkStorage: LinkStorage, attempt: Int, now: Instant) {
        state = .resuming(session, .opening(attempt: attempt), linkStorage)
        timers.set(.handshake, at: now + configuration.handshakeTimeout)
        if let request = session.transportRequest {
            enqueue(.openTransport(request, generation: session.generation))
        }
    }

    /// Reopening the WebSocket failed (`attemptFailed`): try again after the next retry delay
    /// (under a new generation, so that late input from the failed one is ignored); when none is
    /// left, the connection is lost as without stateful reconnect: what is pending fails and the
    /// ordinary path (a new connection under the reconnect policy, or closed) follows.
    mutating func resumeAttemptFailed(
        _ live: LiveConnection,
        attempt: Int,
        error: HubConnectionError,
        now: Instant
    ) {
        var live = live
        emit(.attemptFailed(error))
        guard attempt > configuration.resumeRetryDelays.count else {
            live.session.generation = makeGeneration()
            let waitsForPath = configuration.network.waitForPath && !device.hasPath
            if !waitsForPath { live.link.resumeTries += 1 }
            state = .resuming(live.session, .waiting(attempt: attempt), live.linkStorage)
            if waitsForPath { return emit(.waitingForNetwork) }
            let delay = configuration.resumeRetryDelays[attempt - 1]
            timers.set(.resume, at: now + delay)
            emit(.reconnecting(attempt: live.link.resumeTries, delay: delay, lastError: error))
            return
        }
        health.failedResumes += 1
        live.link.stateful = nil
        connectionLost(
            live,
            error: error,
            allowReconnect: true,
            now: now,
            announced: true,
            attemptsAnnounced: live.link.resumeTries
        )
    }

    /// Waits for the policy's next delay, or suspends when it gives up. `error` is why the last
    /// attempt (or the connection) ended; nil when the wait goes on after the network returned.
    mutating func scheduleReconnect(error: HubConnectionError?, now: Instant) {
        let lastError =
            error ?? HubConnectionError(.connectionLost, "The reconnect policy gave up while the network was away.")
        guard var schedule else { return finish(error: lastError) }
        schedule.connectionLost(at: now)
        if configuration.network.waitForPath && !device.hasPath {
            // No network: no attempt until it is back, and none counted.
            self.schedule = schedule
            state = .reconnectWaiting
            return emit(.waitingForNetwork)
        }
        let delay = schedule.nextDelay(now: now, reason: error?.message, using: &random)
        self.schedule = schedule
        if delay != nil { health.reconnecting(reason: error?.message) }
        guard let delay else { return suspend(.gaveUp(lastError: lastError)) }
        emit(.reconnecting(attempt: reconnectAttemptOffset + schedule.attempts, delay: delay, lastError: error))
        state = .reconnectWaiting
        timers.set(.reconnect, at: now + delay)
    }

    /// Fails every pending invocation and stream of the live connection ("exactly once"), with
    /// `canceled`: the connection closed first.
    mutating func failPending(_ link: Link) {
        for (id, kind) in link.pending.sorted(by: { Int($0.key) ?? 0 < Int($1.key) ?? 0 }) {
            switch kind {
            case .invocation:
                enqueue(.event(.completion(invocationId: id, result: .failure(.invocationCanceled))))
            case .stream:
                enqueue(.event(.streamCompleted(invocationId: id, error: .invocationCanceled)))
            case .canceledStream:
                continue
            }
        }
    }

    /// Nothing runs until `reconnectNow` (or `stop`, or the foreground after `background`).
    mutating func suspend(_ reason: SuspensionReason<HubConnectionError>) {
        timers.cancelAll()
        state = .suspended
        handshakeReceived = []
        emit(.suspended(reason))
    }

    /// The app's trust settings refused the server's certificate on the transport of the current
    /// generation: the connection closes with `certificateRefused`, whatever the reconnect policy
    /// (another attempt would meet the same certificate).
    mutating func certificateRefused(_ reason: String, now: Instant) {
        let error = HubConnectionError(.certificateRefused, "The server's certificate was refused: " + reason)
        switch state {
        case .fetchingAccessToken, .negotiating, .connectingTransport, .handshaking:
            if let generation = currentGeneration { enqueue(.closeTransport(generation: generation)) }
            attemptFailed(error, now: now)
        case .connected, .resuming:
            guard let live = takeLive() else { return }
            enqueue(.closeTransport(generation: live.session.generation))
            connectionLost(live, error: error, allowReconnect: false, now: now, resumable: false)
        case .disconnected, .reconnectWaiting, .suspended:
            return
        case .modifying:
            Self.modifyingObserved()
        }
    }

    /// Closed for good (`closed`; nil error: stopped by the app).
    mutating func finish(error: HubConnectionError?) {
        timers.cancelAll()
        state = .disconnected
        handshakeReceived = []
        schedule?.connectionEstablished()
        emit(.closed(error))
    }

    mutating func emit(_ change: Lifecycle) {
        enqueue(.event(.lifecycle(change)))
    }
}
