public import TetherCore

extension HubConnectionMachine {
    /// What happens to the connection while the app is in the background.
    public enum BackgroundPolicy: String, Hashable, Sendable, CaseIterable {
        /// Nothing: the connection stays as it is (a server app, or one the system lets run).
        case keepConnection
        /// Close gracefully when the app goes to the background (pending invocations and streams
        /// fail, as on `stop`; the event is `suspended(.background)`), and start a new connection when it
        /// is active again, announced as `connected`, so the app's "on connected" work (joining
        /// groups) runs again. What the maintainers of the Swift SignalR clients advise: iOS
        /// suspends a backgrounded app's sockets anyway.
        case closeUntilActive
    }

    /// The device's network changed (the app's `NWPathMonitor`, the driver's rtnetlink monitor).
    /// With the default `NetworkPolicy`: the path lost while connected probes the link (a ping,
    /// and something must arrive within `probeTimeout`); lost while waiting to reconnect pauses
    /// the back-off (`waitingForNetwork`: no attempt, none counted); lost while an attempt (or a
    /// resume) is under way ends it at once (`attemptFailed`, then the wait for the network), so
    /// that no step of it (the transport after negotiate) goes out without a network. The path back, or another
    /// network: waiting or given up, a new attempt at once with the policy's current tier
    /// started again; a stateful-reconnect resume waiting to retry reopens at once; an attempt
    /// under way on another network starts again; connected, another network drops a link that
    /// can resume (stateful reconnect reopens it on the new network at once) and probes one
    /// that cannot.
    public mutating func networkChanged(_ path: NetworkPath, now: Instant) {
        let change = device.pathChanged(to: path)
        switch configuration.network.response(to: change, in: networkStanding) {
        case .nothing:
            return
        case .probe:
            if change == .moved, case .connected(_, let storage) = state, storage.link.stateful != nil,
                let live = takeLive()
            {
                // The old socket belongs to the old network: reopen on the new one now.
                enqueue(.closeTransport(generation: live.session.generation))
                let error = HubConnectionError(
                    .connectionLost,
                    "The device moved to another network; the connection is reopened on it."
                )
                return connectionLost(live, error: error, allowReconnect: true, now: now)
            }
            probe(now: now)
        case .pauseRetries:
            if case .resuming = state { timers.cancel(.resume) } else { timers.cancel(.reconnect) }
            emit(.waitingForNetwork)
        case .endAttempt:
            if case .resuming(let session, .opening(let attempt), _) = state {
                guard let live = takeLive() else { return }
                timers.cancel(.handshake)
                enqueue(.closeTransport(generation: session.generation))
                return resumeAttemptFailed(live, attempt: attempt, error: Self.networkLostError, now: now)
            }
            if let generation = currentGeneration { enqueue(.closeTransport(generation: generation)) }
            attemptFailed(Self.networkLostError, now: now)
        case .continueRetries:
            guard case .resuming(_, .waiting(let attempt), _) = state else {
                return scheduleReconnect(error: nil, now: now)
            }
            let delays = configuration.resumeRetryDelays
            timers.set(
                .resume,
                at: now + (attempt > 0 && !delays.isEmpty ? delays[min(attempt, delays.count) - 1] : .zero)
            )
        case .retryNow:
            guard case .resuming = state else {
                timers.cancel(.reconnect)
                schedule?.pathReturned(at: now)
                reconnectAttemptOffset = 0
                return beginAttempt(isReconnect: true, now: now)
            }
            // The network's return starts the count of tries again (as the policy's).
            if var live = takeLive() {
                live.link.resumeTries = 0
                restore(live)
            }
            reconnectNow(now: now)
        case .restartAttempt:
            switch state {
            case .fetchingAccessToken(let attempt), .negotiating(let attempt):
                timers.cancel(.handshake)
                beginAttempt(isReconnect: attempt.isReconnect, now: now)
            case .connectingTransport(let attempt), .handshaking(let attempt):
                timers.cancel(.handshake)
                handshakeReceived = []
                enqueue(.closeTransport(generation: attempt.generation))
                beginAttempt(isReconnect: attempt.isReconnect, now: now)
            default:
                return  // a resume under way goes on: it reopens the same connection on any network
            }
        }
    }

    /// Where the connection stands, as the network policy sees it.
    private var networkStanding: NetworkPolicy.Standing {
        var waitingToResume = false
        if case .resuming(_, .waiting, _) = state { waitingToResume = true }
        return NetworkPolicy.Standing(
            phase,
            retryTimerArmed: timers.isArmed(waitingToResume ? .resume : .reconnect),
            waitingToResume: waitingToResume,
            closedForBackground: closedForBackground
        )
    }

    /// The app moved between foreground and background (`inactive`, a passing interruption,
    /// counts as the foreground). With `closeUntilActive`, the background closes the connection
    /// gracefully (or ends an attempt or a wait) and the foreground starts a new one. With either
    /// policy, back in the foreground while waiting to reconnect or given up (and with a network),
    /// a new attempt starts at once.
    public mutating func applicationStateChanged(_ application: ApplicationState, now: Instant) {
        guard let isBackground = device.applicationChanged(to: application) else { return }
        if isBackground {
            guard configuration.backgroundPolicy == .closeUntilActive else { return }
            switch state {
            case .disconnected, .suspended:
                return
            case .modifying:
                Self.modifyingObserved()
            case .connected, .resuming, .fetchingAccessToken, .negotiating, .connectingTransport, .handshaking,
                .reconnectWaiting:
                closeForBackground(now: now)
            }
            return
        }
        let hasPath = device.hasPath || !configuration.network.waitForPath
        if closedForBackground {
            closedForBackground = false
            guard case .suspended = state else { return }
            schedule?.connectionEstablished()
            // A new connection, announced as `connected`: the app's "on connected" work runs
            // again. Without a network it waits for one.
            guard hasPath else {
                state = .reconnectWaiting
                return emit(.waitingForNetwork)
            }
            return beginAttempt(isReconnect: true, now: now)
        }
        switch state {
        case .reconnectWaiting, .suspended:
            if hasPath { reconnectNow(now: now) }
        case .disconnected, .fetchingAccessToken, .negotiating, .connectingTransport, .handshaking, .connected,
            .resuming:
            return
        case .modifying:
            Self.modifyingObserved()
        }
    }

    /// The background with `closeUntilActive`: a graceful close (a Close message when connected),
    /// what is pending fails, and the machine waits, suspended, for the foreground.
    private mutating func closeForBackground(now: Instant) {
        closeGracefully(now: now)
        closedForBackground = true
        suspend(.background)
    }

    static let networkLostError = HubConnectionError(
        .connectionFailed,
        "The device lost its network during the connect attempt."
    )

    /// Checks a connected link now: a ping, and something must arrive within the probe timeout,
    /// or the link is lost (and, with stateful reconnect, reopened).
    mutating func probe(now: Instant) {
        guard case .connected = state, var live = takeLive() else { return }
        send(.ping, live: &live, now: now)
        live.link.heartbeat.expectSomething(at: now, within: configuration.network.probeTimeout)
        armLivenessTimers(live.link)
        restore(consume live)
    }
}
