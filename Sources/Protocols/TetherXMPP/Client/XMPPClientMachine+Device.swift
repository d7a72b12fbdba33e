public import TetherCore

extension XMPPClientMachine {
    // MARK: - The device

    /// The device's network changed (the app's `NWPathMonitor`, the driver's rtnetlink monitor).
    /// With the default `NetworkPolicy`: the path lost while online probes the link at once (a
    /// ping that must be answered within `probeTimeout`); lost while waiting to reconnect pauses
    /// the back-off (`waitingForNetwork`: no attempt, none counted); lost while an attempt is under
    /// way ends it at once (`attemptFailed`, then the wait for the network), so that no step of
    /// it (the next target of a lookup) goes out without a network. The path back, or another
    /// network, while waiting or given up reconnects at once with the policy's current tier
    /// started again; while online it probes; while an attempt is under way on another network
    /// the attempt starts again on the new one.
    public mutating func networkChanged(_ path: NetworkPath, now: Instant) {
        let standing = NetworkPolicy.Standing(phase, retryTimerArmed: timers.isArmed(.reconnect))
        switch configuration.network.response(to: device.pathChanged(to: path), in: standing) {
        case .nothing:
            return
        case .probe:
            probe(now: now)
        case .pauseRetries:
            timers.cancel(.reconnect)
            emit(.waitingForNetwork)
        case .endAttempt:
            lost(
                XMPPClientError(.connectionFailed, "The device lost its network during the connect attempt."),
                closeTransport: true,
                now: now
            )
        case .continueRetries:
            guard case .reconnectWaiting(let next, _) = state else { return }
            resumeBackOff(next: next, now: now)
        case .retryNow:
            timers.cancel(.reconnect)
            schedule?.pathReturned(at: now)
            if case .reconnectWaiting(let next, let redirects) = state {
                beginAttempt(to: next, redirects: redirects, now: now)
            } else {
                beginAttempt(to: resumptionEndpoint, redirects: 0, now: now)
            }
        case .restartAttempt:
            let attempt: Attempt
            switch state {
            case .connectingTransport(let transport): attempt = transport
            case .negotiating(let negotiation): attempt = negotiation.attempt
            default: return
            }
            enqueue(.closeTransport(generation: attempt.generation))
            beginAttempt(
                to: attempt.toConfiguredServer ? nil : attempt.endpoint,
                redirects: attempt.redirects,
                now: now
            )
        }
    }

    /// The app moved between foreground and background. In the background, online: `<inactive/>`
    /// (XEP-0352, where the server offers it and `clientStateIndication` is on) and pings at the
    /// background interval. Back in the foreground: `<active/>`, the normal interval, and, when
    /// the connection was lost (waiting to reconnect or given up) and the device has a network,
    /// a reconnect at once. `inactive` (a passing interruption) counts as the foreground.
    public mutating func applicationStateChanged(_ application: ApplicationState, now: Instant) {
        guard let isBackground = device.applicationChanged(to: application) else { return }
        switch state {
        case .connected:
            applicationStateApplies(background: isBackground)
        case .reconnectWaiting, .suspended:
            guard !isBackground, device.hasPath || !configuration.network.waitForPath else { return }
            reconnectNow(now: now)
        case .disconnected, .connectingTransport, .negotiating, .closing:
            return
        }
    }

    /// Online, in the background or back: say so (XEP-0352 `<inactive/>`, `<active/>`) and ping
    /// at the interval that applies.
    mutating func applicationStateApplies(background: Bool) {
        guard case .connected(var session) = state else { return }
        if configuration.clientStateIndication && session.clientStateIndication {
            let element = background ? "inactive" : "active"
            sendRaw("<\(element) xmlns='\(XMPPNamespace.clientStateIndication)'/>", generation: session.generation)
        }
        guard var autoPing = session.autoPing else { return }
        autoPing.inBackground = background
        session.autoPing = autoPing
        state = .connected(session)
        timers.set(.ping, at: autoPing.deadline(lastReceived: lastReceived))
    }

    /// Checks the link now: a ping whose own answer must arrive within the probe timeout (or the
    /// ping timeout, when shorter; bytes still on their way from the old path prove nothing), or
    /// the stream is lost and resumed on the next attempt. Without auto-ping the ping goes out
    /// unwatched (a dead link then shows as a failed write).
    mutating func probe(now: Instant) {
        guard case .connected(var session) = state else { return }
        let id = makeID("ping")
        sendPing(id: id, session: session)
        guard var autoPing = session.autoPing else { return }
        // Never longer than an ordinary ping may take.
        autoPing.probeSent(
            id: id,
            at: now,
            timeout: min(configuration.network.probeTimeout, autoPing.configuration.timeout)
        )
        session.autoPing = autoPing
        state = .connected(session)
        timers.set(.ping, at: autoPing.deadline(lastReceived: lastReceived))
    }

    /// The path came back without `reconnectWhenPathReturns`: the back-off goes on where it was.
    private mutating func resumeBackOff(next: Endpoint?, now: Instant) {
        guard var running = schedule else { return }
        guard let delay = running.nextDelay(now: now, reason: nil, using: &random) else {
            schedule = running
            let error = XMPPClientError(.connectionLost, "The reconnect policy gave up while the network was away.")
            state = .suspended
            return emit(.suspended(.gaveUp(lastError: error)))
        }
        schedule = running
        timers.set(.reconnect, at: now + delay)
        emit(.reconnecting(attempt: running.attempts, delay: delay, lastError: nil))
    }
}
