/// The device's network as the app (Network.framework's `NWPathMonitor`) or the driver's monitor
/// (rtnetlink on Linux) sees it: whether a usable path exists, and over which interfaces. Both
/// machines take it with `networkChanged(_:now:)`.
public struct NetworkPath: Hashable, Sendable, CustomStringConvertible {
    /// A usable interface (not loopback) with a route exists.
    public var isAvailable: Bool
    /// The interfaces the path uses (`wlan0`, `en0`, `pdp_ip0`, …); a different set while
    /// available means the device moved to another network (Wi-Fi to cellular).
    public var interfaces: Set<String>

    /// A path; `interfaces` empty when the source does not tell them.
    public init(isAvailable: Bool, interfaces: Set<String> = []) {
        self.isAvailable = isAvailable
        self.interfaces = isAvailable ? interfaces : []
    }

    /// No usable path.
    public static let unavailable = NetworkPath(isAvailable: false)

    public var description: String {
        isAvailable ? "available (\(interfaces.sorted().joined(separator: ", ")))" : "unavailable"
    }
}

/// Where the app stands, as UIKit's and SwiftUI's scene phases say it; both machines take it with
/// `applicationStateChanged(_:now:)`.
public enum ApplicationState: String, Hashable, Sendable, CaseIterable {
    /// In the foreground, in use.
    case active
    /// In the foreground, not receiving events (a call, the app switcher): passing.
    case inactive
    /// In the background: the user does not see it; the system may suspend it.
    case background
}

/// What a machine does when the device's network changes (both machines'
/// `Configuration.network`). Every default is on.
public struct NetworkPolicy: Hashable, Sendable {
    /// While there is no path, no reconnect attempt is made and none is counted: the back-off
    /// pauses (`waitingForNetwork`).
    public var waitForPath: Bool
    /// When the path comes back (or the device moves to another network) while waiting to
    /// reconnect or given up: reconnect at once, the current tier of the policy restarted.
    public var reconnectWhenPathReturns: Bool
    /// When the path is lost or its interfaces change while connected: probe the link at once
    /// (an XMPP ping, a SignalR ping) instead of waiting for the next interval; a probe that
    /// gets nothing back within `probeTimeout` drops the link (and resumes on the new path).
    public var probeOnPathChange: Bool
    /// How long a probe waits for anything from the server (default 5 s).
    public var probeTimeout: Duration

    /// A policy.
    public init(
        waitForPath: Bool = true,
        reconnectWhenPathReturns: Bool = true,
        probeOnPathChange: Bool = true,
        probeTimeout: Duration = .seconds(5)
    ) {
        precondition(probeTimeout > .zero, "probeTimeout must be positive")
        self.waitForPath = waitForPath
        self.reconnectWhenPathReturns = reconnectWhenPathReturns
        self.probeOnPathChange = probeOnPathChange
        self.probeTimeout = probeTimeout
    }
}

extension NetworkPolicy {
    /// Where a connection stands when the device's network changes, as far as the policy cares.
    public enum Standing: Hashable, Sendable {
        /// Connected: the link can be probed.
        case connected
        /// A connect attempt (or a resume) is under way.
        case attempting
        /// Waiting to retry; `timerArmed` false when the wait is paused for the network already.
        case waitingToRetry(timerArmed: Bool)
        /// The reconnect policy gave up, or the connection was closed for the background
        /// (`forBackground`: only the foreground opens it again).
        case suspended(forBackground: Bool)
        /// Not connecting: never started, stopped or closing.
        case idle
    }
}

extension NetworkPolicy.Standing {
    /// Where a machine in `phase` stands. `retryTimerArmed`: the timer of its wait to retry (a
    /// reconnect, or a resume's next try) is set; `waitingToResume`: resuming, between tries;
    /// `closedForBackground`: suspended because the app went to the background.
    public init(
        _ phase: ConnectionPhase,
        retryTimerArmed: Bool,
        waitingToResume: Bool = false,
        closedForBackground: Bool = false
    ) {
        switch phase {
        case .connected: self = .connected
        case .connecting: self = .attempting
        case .resuming: self = waitingToResume ? .waitingToRetry(timerArmed: retryTimerArmed) : .attempting
        case .reconnectWaiting: self = .waitingToRetry(timerArmed: retryTimerArmed)
        case .suspended: self = .suspended(forBackground: closedForBackground)
        case .disconnected, .closing: self = .idle
        }
    }
}

extension NetworkPolicy {
    /// What a network change calls for. Both machines carry it out in their own terms, so the
    /// rules are these, written once.
    public enum Response: Hashable, Sendable {
        /// Nothing.
        case nothing
        /// Probe the link: a ping, and something must arrive within `probeTimeout`.
        case probe
        /// Pause the wait: the retry timer stops and `waitingForNetwork` is reported (no attempt
        /// is made, none is counted).
        case pauseRetries
        /// End the attempt at once as failed (the network was lost); the wait for the network
        /// follows.
        case endAttempt
        /// The path is back but the policy does not reconnect at once: the paused wait goes on
        /// where it was.
        case continueRetries
        /// Try again at once, the policy's current tier started again.
        case retryNow
        /// Start the attempt under way again, on the new network.
        case restartAttempt
    }

    /// What `change` calls for while the connection stands as `standing`.
    public func response(to change: DeviceState.PathChange, in standing: Standing) -> Response {
        switch (change, standing) {
        case (.none, _), (_, .idle):
            return .nothing
        case (_, .connected):
            return probeOnPathChange ? .probe : .nothing
        case (.lost, .waitingToRetry(let timerArmed)):
            return waitForPath && timerArmed ? .pauseRetries : .nothing
        case (.lost, .attempting):
            return waitForPath ? .endAttempt : .nothing
        case (.lost, .suspended):
            return .nothing
        case (.returned, .waitingToRetry(let timerArmed)), (.moved, .waitingToRetry(let timerArmed)):
            if reconnectWhenPathReturns { return .retryNow }
            return timerArmed ? .nothing : .continueRetries
        case (.returned, .suspended(let forBackground)), (.moved, .suspended(let forBackground)):
            return reconnectWhenPathReturns && !forBackground ? .retryNow : .nothing
        case (.moved, .attempting):
            return reconnectWhenPathReturns ? .restartAttempt : .nothing
        case (.returned, .attempting):
            return .nothing
        }
    }
}

/// The device as a machine knows it: the last path and application state it was told, and what a
/// new path means. Until told otherwise a machine assumes a path and an active app.
public struct DeviceState: Hashable, Sendable {
    /// What a new path changes.
    public enum PathChange: Hashable, Sendable {
        /// Nothing that matters (the same path again).
        case none
        /// The path went away.
        case lost
        /// A path is there again after none.
        case returned
        /// Still available, over other interfaces (another network).
        case moved
    }

    /// The last path reported (nil: none yet; a path is assumed).
    public private(set) var path: NetworkPath?
    /// The last application state reported.
    public var application: ApplicationState = .active

    /// The state of a device with a network and the app active.
    public init() {}

    /// Whether a path is there (assumed until a report says otherwise).
    public var hasPath: Bool { path?.isAvailable ?? true }

    /// Records `new` and says what changed.
    public mutating func pathChanged(to new: NetworkPath) -> PathChange {
        let old = path
        path = new
        let wasAvailable = old?.isAvailable ?? true
        switch (wasAvailable, new.isAvailable) {
        case (true, false): return .lost
        case (false, true): return .returned
        case (false, false): return .none
        case (true, true):
            guard let old, !old.interfaces.isEmpty || !new.interfaces.isEmpty else { return .none }
            return old.interfaces == new.interfaces ? .none : .moved
        }
    }

    /// Records `new` and says whether the app went to the background (`true`) or came back to
    /// the foreground (`false`); nil when neither (`inactive` counts as the foreground).
    public mutating func applicationChanged(to new: ApplicationState) -> Bool? {
        let wasBackground = application == .background
        application = new
        let isBackground = new == .background
        return wasBackground == isBackground ? nil : isBackground
    }
}
