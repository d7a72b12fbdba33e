/// A connection's health as values, for dashboards and logs: both clients report it
/// (`health()`, `healthUpdates(every:)`), `tether xmpp|signalr --health S` prints it.
public struct ConnectionHealth: Sendable, Equatable {
    /// Where the connection stands, in the words every machine shares.
    public var phase: ConnectionPhase
    /// The machine's own state name (`connected`, `resuming`, `reconnectWaiting`, …).
    public var state: String
    /// How long the current session or connection has been online (nil: not online).
    public var timeOnline: Duration?
    /// The last round trip measured (XMPP: a ping answered; SignalR: an invocation completed).
    public var lastRoundTrip: Duration?
    /// The smoothed round trip (RFC 6298's SRTT: each new sample weighs 1/8).
    public var smoothedRoundTrip: Duration?
    /// How long the last dead link took to be noticed: from the last byte received on it to the
    /// moment it was declared dead (a ping or server timeout, a failed probe).
    public var lastDeadLinkDetection: Duration?
    /// Reconnect attempts since the machine started, and the reasons of the last few losses and
    /// failed attempts (newest last).
    public var reconnectAttempts: Int
    /// Why the last reconnects happened (newest last, at most a few).
    public var recentReconnectReasons: [String]
    /// Sessions taken up again without loss (XEP-0198 resumption, SignalR stateful reconnect),
    /// and attempts to that refused or given up.
    public var resumes: Int
    /// Resumptions the server refused (a new session followed).
    public var failedResumes: Int
    /// Bytes and protocol messages (stanzas; hub messages) each way since the machine started.
    public var bytesSent: Int
    /// Bytes received since the connection started.
    public var bytesReceived: Int
    /// Messages (stanzas, hub messages) sent.
    public var messagesSent: Int
    /// Messages received.
    public var messagesReceived: Int
    /// Messages sent and not yet acknowledged (XEP-0198 stanzas; stateful-reconnect messages),
    /// plus those waiting for a connection.
    public var awaitingAcknowledgement: Int
    /// Bytes sent that the network has not taken yet (the driver's: written while the kernel's
    /// socket buffer was full, or queued behind an HTTP `POST`); past the driver's
    /// `maximumUnsentBytes` the app's sends wait.
    public var unsentBytes: Int
    /// App calls waiting for room (`BackPressure.wait`: the queue or the network was full), in
    /// order; they go out as the network takes bytes or the server acknowledges.
    public var callsWaitingForRoom: Int
    /// The transport in use (`tcp`, `tls`, `websocket`, `websocket-tls`; `websockets`, `sse`,
    /// `long-polling`), nil when not connected.
    public var transport: String?
    /// The TLS version in use (`TLSv1.3`; nil without TLS), as the driver's transport tells it.
    public var tlsVersion: String?
    /// The server the connection (or the attempt under way) is on: `host:port`, or the URL.
    public var server: String?
    /// Servers of the lookup that failed before a stream was established on them (XMPP SRV
    /// targets): later attempts try them after the others.
    public var failingServers: [String] = []

    /// A health snapshot with every value given (the machines make these; tests and custom machines may too).
    public init(
        phase: ConnectionPhase,
        state: String,
        timeOnline: Duration? = nil,
        lastRoundTrip: Duration? = nil,
        smoothedRoundTrip: Duration? = nil,
        lastDeadLinkDetection: Duration? = nil,
        reconnectAttempts: Int = 0,
        recentReconnectReasons: [String] = [],
        resumes: Int = 0,
        failedResumes: Int = 0,
        bytesSent: Int = 0,
        bytesReceived: Int = 0,
        messagesSent: Int = 0,
        messagesReceived: Int = 0,
        awaitingAcknowledgement: Int = 0,
        unsentBytes: Int = 0,
        callsWaitingForRoom: Int = 0,
        transport: String? = nil,
        tlsVersion: String? = nil
    ) {
        self.tlsVersion = tlsVersion
        self.phase = phase
        self.state = state
        self.timeOnline = timeOnline
        self.lastRoundTrip = lastRoundTrip
        self.smoothedRoundTrip = smoothedRoundTrip
        self.lastDeadLinkDetection = lastDeadLinkDetection
        self.reconnectAttempts = reconnectAttempts
        self.recentReconnectReasons = recentReconnectReasons
        self.resumes = resumes
        self.failedResumes = failedResumes
        self.bytesSent = bytesSent
        self.bytesReceived = bytesReceived
        self.messagesSent = messagesSent
        self.messagesReceived = messagesReceived
        self.awaitingAcknowledgement = awaitingAcknowledgement
        self.unsentBytes = unsentBytes
        self.callsWaitingForRoom = callsWaitingForRoom
        self.transport = transport
    }
}

/// What a machine counts for its `ConnectionHealth` (kept small: it lives in every machine).
public struct HealthCounters: Sendable {
    /// When the current session came online (nil while not connected).
    public var onlineSince: Instant?
    /// The last measured round trip.
    public var lastRoundTrip: Duration?
    /// The smoothed round trip (as TCP smooths it, weight 1/8).
    public var smoothedRoundTrip: Duration?
    /// How long the last dead link took to notice.
    public var lastDeadLinkDetection: Duration?
    /// Reconnect attempts since the connection started.
    public var reconnectAttempts = 0
    /// Why the last reconnects happened (newest last, at most a few).
    public var recentReconnectReasons: [String] = []
    /// Sessions resumed.
    public var resumes = 0
    /// Resumptions the server refused.
    public var failedResumes = 0
    /// Bytes sent.
    public var bytesSent = 0
    /// Bytes received.
    public var bytesReceived = 0
    /// Messages sent.
    public var messagesSent = 0
    /// Messages received.
    public var messagesReceived = 0

    /// How many reasons are kept.
    public static let reasonsKept = 5

    /// Counters at zero.
    public init() {}

    /// A round trip was measured.
    public mutating func roundTrip(_ sample: Duration) {
        lastRoundTrip = sample
        // RFC 6298 §2: SRTT <- 7/8 SRTT + 1/8 R'.
        smoothedRoundTrip = smoothedRoundTrip.map { ($0 * 7 + sample) / 8 } ?? sample
    }

    /// A reconnect attempt was scheduled (or a loss or failure happened) for `reason`.
    public mutating func reconnecting(reason: String?) {
        reconnectAttempts += 1
        if let reason {
            recentReconnectReasons.append(reason)
            if recentReconnectReasons.count > Self.reasonsKept { recentReconnectReasons.removeFirst() }
        }
    }

    /// The snapshot at `now`.
    public func snapshot(
        now: Instant,
        phase: ConnectionPhase,
        state: String,
        awaitingAcknowledgement: Int,
        transport: String?
    ) -> ConnectionHealth {
        ConnectionHealth(
            phase: phase,
            state: state,
            timeOnline: phase == .connected ? onlineSince.map { now - $0 } : nil,
            lastRoundTrip: lastRoundTrip,
            smoothedRoundTrip: smoothedRoundTrip,
            lastDeadLinkDetection: lastDeadLinkDetection,
            reconnectAttempts: reconnectAttempts,
            recentReconnectReasons: recentReconnectReasons,
            resumes: resumes,
            failedResumes: failedResumes,
            bytesSent: bytesSent,
            bytesReceived: bytesReceived,
            messagesSent: messagesSent,
            messagesReceived: messagesReceived,
            awaitingAcknowledgement: awaitingAcknowledgement,
            transport: transport,
            tlsVersion: nil
        )
    }
}
