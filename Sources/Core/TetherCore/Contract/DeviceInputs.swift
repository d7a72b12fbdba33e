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
}
