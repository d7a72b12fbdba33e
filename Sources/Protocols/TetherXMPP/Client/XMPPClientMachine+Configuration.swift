public import TetherCore
public import TetherXML

extension XMPPClientMachine {
    // MARK: - Configuration

    /// Whether and how the stream is protected by TLS.
    public enum TLSPolicy: String, Hashable, Sendable, CaseIterable {
        /// Never use TLS; fail when the server requires it.
        case disabled
        /// Use STARTTLS whenever the server offers it; cleartext otherwise.
        case optional
        /// Use STARTTLS; fail when the server does not offer it.
        case required
        /// TLS from the first byte (XEP-0368, port 5223 by default): the driver establishes TLS
        /// right after the TCP connection, before `transportConnected`.
        case direct
    }

    /// XEP-0199 auto-ping.
    public struct AutoPingConfiguration: Sendable, Hashable {
        /// Ping after this long without receiving anything (default 60 s).
        public var interval: Duration
        /// A ping unanswered this long is missed (default 10 s).
        public var timeout: Duration
        /// After this many misses in a row the stream is dead (default 2).
        public var maximumMissed: Int
        /// The interval while the app is in the background (default 300 s: a phone's radio stays
        /// asleep longer; nil: `interval`).
        public var backgroundInterval: Duration?

        /// A configuration.
        public init(
            interval: Duration = .seconds(60),
            timeout: Duration = .seconds(10),
            maximumMissed: Int = 2,
            backgroundInterval: Duration? = .seconds(300)
        ) {
            precondition(maximumMissed >= 1, "maximumMissed must be at least 1")
            precondition(interval > .zero && timeout > .zero, "ping interval and timeout must be positive")
            precondition(backgroundInterval.map { $0 > .zero } ?? true, "backgroundInterval must be positive")
            self.interval = interval
            self.timeout = timeout
            self.maximumMissed = maximumMissed
            self.backgroundInterval = backgroundInterval
        }
    }

    /// XEP-0198 stream management.
    public struct StreamManagementConfiguration: Sendable, Hashable {
        /// Ask for resumption (default on): after a lost connection the session continues where
        /// it stopped, with every unacknowledged stanza resent.
        public var resume: Bool
        /// The resumption time to ask the server for (`max`; nil: the server's default).
        public var preferredResumptionTime: Duration?
        /// Request an acknowledgement (`<r/>`) after this many unacknowledged stanzas (default 5).
        public var requestAckAfterStanzas: Int
        /// … or this long after sending a stanza that is still unacknowledged (default 2 s).
        public var requestAckAfter: Duration

        /// A configuration.
        public init(
            resume: Bool = true,
            preferredResumptionTime: Duration? = nil,
            requestAckAfterStanzas: Int = 5,
            requestAckAfter: Duration = .seconds(2)
        ) {
            precondition(requestAckAfterStanzas >= 1, "requestAckAfterStanzas must be at least 1")
            self.resume = resume
            self.preferredResumptionTime = preferredResumptionTime
            self.requestAckAfterStanzas = requestAckAfterStanzas
            self.requestAckAfter = requestAckAfter
        }
    }

    /// The catch-up from the account's archive (XEP-0313) at a new session.
    public struct ArchiveCatchUpConfiguration: Sendable, Hashable {
        /// Messages asked for per page (default 50).
        public var pageSize: Int
        /// The most messages one catch-up delivers (default 5,000; checked between pages): an
        /// account that was away longer continues at the next new session, from where this one
        /// stopped (`caughtUp(complete: false)`).
        public var maximumMessages: Int
        /// The most messages that arrive during the catch-up and wait for it to end, to come after
        /// the archive's (default 1,000); beyond it they are delivered at once.
        public var maximumHeldMessages: Int

        /// A configuration.
        public init(pageSize: Int = 50, maximumMessages: Int = 5000, maximumHeldMessages: Int = 1000) {
            precondition(pageSize >= 1 && maximumMessages >= 1, "pageSize and maximumMessages must be positive")
            precondition(maximumHeldMessages >= 0, "maximumHeldMessages must not be negative")
            self.pageSize = pageSize
            self.maximumMessages = maximumMessages
            self.maximumHeldMessages = maximumHeldMessages
        }
    }

    /// What the app configures. Every limit has a conservative default.
    public struct Configuration: Sendable {
        /// The account (`user@domain`); a resourcepart, if any, is the resource to request.
        public var jid: JID
        /// The password (never logged, never in an error or description).
        public var password: Secret
        /// Where to connect. Nil (the default): found through DNS when `serviceLookup` is on
        /// (RFC 6120 §3.2 and XEP-0368 SRV records), else the JID's domain on port 5222 (5223
        /// with direct TLS). An explicit endpoint skips the lookup.
        public var endpoint: Endpoint?
        /// XMPP over WebSocket (RFC 7395) to this `ws://` or `wss://` URL instead of TCP (nil,
        /// the default: TCP). With a URL, `endpoint`, `serviceLookup` and `tls` are not used: the
        /// stream is protected exactly when the scheme is `wss` (TLS from the first byte, the
        /// certificate checked for the URL's host), and STARTTLS is never negotiated.
        public var webSocket: ServerURL?
        /// Find the server through DNS when `endpoint` is nil (default true): the
        /// `lookUpService` action, answered with `serviceLookedUp`.
        public var serviceLookup: Bool
        /// TLS (default `required`).
        public var tls: TLSPolicy
        /// The resource to request (nil: the JID's resourcepart; nil there too: the server
        /// chooses one).
        public var resource: String?
        /// SASL mechanisms in order of preference (default: SCRAM-SHA-512, -256, -1, PLAIN).
        public var mechanisms: [SASLMechanism]
        /// Allow PLAIN on a stream without TLS (default off: it sends the password in clear).
        public var allowPlainOnCleartext: Bool
        /// Log in with XEP-0388 SASL2 where the server offers it (default on): the resource
        /// (XEP-0386 Bind 2), stream management and resumption then come inside the login, one
        /// exchange instead of four. Off: RFC 6120 SASL always.
        public var sasl2: Bool
        /// Ask for a FAST token (XEP-0484) at a password login where the server offers FAST
        /// (default on); the `fastToken` event hands it to the app.
        public var requestsFASTToken: Bool
        /// What the app kept from earlier launches (`stateChanged` hands it out): its FAST token
        /// logs in instead of the password (one round trip fewer, no password on the wire) where
        /// the server offers the token's mechanism on a TLS stream (refused, the login falls back
        /// to the password once: `fastTokenRefused`); its user-agent id names this installation;
        /// the catch-up of a new session starts at its archive position.
        public var state: XMPPClientState
        /// Who the client is, for SASL2's `<user-agent>` (its id is in `state`).
        public var userAgent: XMPPUserAgent
        /// Catch up from the account's archive (XEP-0313) when a new session starts (default on;
        /// nil: off): what arrived since the state's archive position, in order, before the
        /// messages that arrive meanwhile.
        public var archiveCatchUp: ArchiveCatchUpConfiguration?
        /// Ask the server for carbon copies (XEP-0280) of the messages the account's other
        /// clients send and receive (default off): inside a Bind 2 login where the server takes
        /// it there, else an iq once the session starts. They arrive as `message` events whose
        /// `origin` is `.carbon`.
        public var carbons: Bool
        /// Register this device for push notifications (XEP-0357) at every new session (nil, the
        /// default: none): the server then tells the app server about messages while the app's
        /// socket is suspended or gone. `XMPPClientMachine.setPush` changes it at run time.
        public var push: XMPPPushRegistration?
        /// Whether SCRAM logins are bound to the TLS connection (default `whenPossible`: a -PLUS
        /// mechanism whenever the server offers one and both sides have a channel-binding type).
        public var channelBinding: ChannelBindingPolicy
        /// Bounds on the SCRAM iteration count the server may ask for.
        public var scramLimits: SCRAMClient.Limits
        /// XEP-0199 auto-ping (nil: off).
        public var autoPing: AutoPingConfiguration?
        /// XEP-0198 stream management (nil: off).
        public var streamManagement: StreamManagementConfiguration?
        /// Reconnect after an accidental loss (nil: never). Default `defaultReconnectPolicy`:
        /// about 3 s apart at first, spread so that a fleet does not come back all at once.
        public var reconnectPolicy: ReconnectPolicy?
        /// Fetch the roster when a new session starts (default on).
        public var fetchRosterOnConnect: Bool
        /// Accept presence subscription requests from contacts already in the roster (default
        /// off). Other requests are only reported.
        public var autoAcceptSubscriptionsFromContacts: Bool
        /// The presence sent when a new session starts (default: available; nil: none).
        public var initialPresence: XMPPPresence?
        /// Payload namespaces of incoming iq requests the app answers (`iqRequest` events);
        /// others are answered `service-unavailable` at once (RFC 6120 §8.4).
        public var handledIQNamespaces: Set<String>
        /// A connect attempt (TCP, TLS, SASL, binding or resumption) must reach `connected` within
        /// this long, or it is abandoned (default 30 s).
        public var connectTimeout: Duration
        /// An iq request the server does not answer within this long ends `timedOut` (default 30 s).
        public var iqTimeout: Duration
        /// After `stop()`, wait this long for the server's `</stream:stream>` (default 2 s).
        public var closeTimeout: Duration
        /// The most stanzas kept unsent or unacknowledged (default 1,000). Beyond it the machine's
        /// `send` throws `sendQueueFull`; `XMPPClient.send` waits for room instead (cancelably,
        /// asking the server for an acknowledgement), unless its `Options.backPressure` is `.fail`.
        public var maximumQueuedStanzas: Int
        /// The most `see-other-host` redirects followed in a row (default 5).
        public var maximumRedirects: Int
        /// The stream's `xml:lang` (default `en`).
        public var language: String
        /// The XML limits for what the server sends (stanza size 256 KiB, depth 64, …).
        public var parserLimits: XMLStreamParser.Configuration
        /// After this long without receiving anything, the XML parser gives its buffers back
        /// (tens of KiB per connection; they return with the next byte; default 30 s, nil: never).
        /// For apps that hold many mostly idle connections.
        public var releaseBuffersAfterIdle: Duration?
        /// What the machine does when the device's network changes (`networkChanged`).
        public var network: NetworkPolicy
        /// Tell the server when the app goes to the background and comes back (XEP-0352
        /// `<inactive/>`, `<active/>`) where it offers client state indication (default on): it
        /// then holds back presence updates and other unimportant traffic.
        public var clientStateIndication: Bool

        /// A configuration with the defaults above.
        public init(
            jid: JID,
            password: Secret,
            endpoint: Endpoint? = nil,
            webSocket: ServerURL? = nil,
            serviceLookup: Bool = true,
            tls: TLSPolicy = .required,
            resource: String? = nil,
            mechanisms: [SASLMechanism] = SASLMechanism.allCases,
            allowPlainOnCleartext: Bool = false,
            channelBinding: ChannelBindingPolicy = .whenPossible,
            sasl2: Bool = true,
            requestsFASTToken: Bool = true,
            state: XMPPClientState = XMPPClientState(),
            userAgent: XMPPUserAgent = XMPPUserAgent(),
            archiveCatchUp: ArchiveCatchUpConfiguration? = ArchiveCatchUpConfiguration(),
            carbons: Bool = false,
            push: XMPPPushRegistration? = nil,
            scramLimits: SCRAMClient.Limits = .init(),
            autoPing: AutoPingConfiguration? = AutoPingConfiguration(),
            streamManagement: StreamManagementConfiguration? = StreamManagementConfiguration(),
            reconnectPolicy: ReconnectPolicy? = Configuration.defaultReconnectPolicy,
            fetchRosterOnConnect: Bool = true,
            autoAcceptSubscriptionsFromContacts: Bool = false,
            initialPresence: XMPPPresence? = XMPPPresence(),
            handledIQNamespaces: Set<String> = [],
            connectTimeout: Duration = .seconds(30),
            iqTimeout: Duration = .seconds(30),
            closeTimeout: Duration = .seconds(2),
            maximumQueuedStanzas: Int = 1000,
            maximumRedirects: Int = 5,
            language: String = "en",
            parserLimits: XMLStreamParser.Configuration = .init(),
            releaseBuffersAfterIdle: Duration? = .seconds(30),
            network: NetworkPolicy = NetworkPolicy(),
            clientStateIndication: Bool = true
        ) {
            self.network = network
            self.clientStateIndication = clientStateIndication
            self.jid = jid
            self.password = password
            precondition(webSocket?.isWebSocket ?? true, "webSocket must be a ws:// or wss:// URL")
            self.endpoint = endpoint
            self.webSocket = webSocket
            self.serviceLookup = serviceLookup
            self.tls = tls
            self.resource = resource
            self.mechanisms = mechanisms
            self.allowPlainOnCleartext = allowPlainOnCleartext
            self.channelBinding = channelBinding
            self.sasl2 = sasl2
            self.requestsFASTToken = requestsFASTToken
            self.state = state
            self.userAgent = userAgent
            self.archiveCatchUp = archiveCatchUp
            self.carbons = carbons
            self.push = push
            self.scramLimits = scramLimits
            self.autoPing = autoPing
            self.streamManagement = streamManagement
            self.reconnectPolicy = reconnectPolicy
            self.fetchRosterOnConnect = fetchRosterOnConnect
            self.autoAcceptSubscriptionsFromContacts = autoAcceptSubscriptionsFromContacts
            self.initialPresence = initialPresence
            self.handledIQNamespaces = handledIQNamespaces
            self.connectTimeout = connectTimeout
            self.iqTimeout = iqTimeout
            self.closeTimeout = closeTimeout
            self.maximumQueuedStanzas = maximumQueuedStanzas
            self.maximumRedirects = maximumRedirects
            self.language = language
            self.parserLimits = parserLimits
            self.releaseBuffersAfterIdle = releaseBuffersAfterIdle
        }

        /// The default reconnect policy: the standard tiers (5 attempts about 3 s apart, 5 about 9 s,
        /// 5 about 15 s), over again while the server stays away, each delay spread ±50 %
        /// (`ReconnectPolicy.Jitter.standard`). Back within seconds of a short outage, and a fleet
        /// that lost its server at once spreads its returns (`Specs/device.md`, "Spreading
        /// reconnects"). RFC 6120 §3.3's back-off (`.exponentialBackoff()`: a first wait of up to
        /// 60 s) remains a choice.
        public static let defaultReconnectPolicy = ReconnectPolicy.tiered(repeats: true)

        /// The resource bind asks for.
        var requestedResource: String? { resource ?? jid.resourcepart }

        /// Where a first attempt connects.
        var defaultEndpoint: Endpoint { endpoint ?? Endpoint(host: jid.domainpart, port: tls == .direct ? 5223 : 5222) }
    }
}

/// Who the client is, as SASL2 tells the server (XEP-0388 `<user-agent>`); the installation's id
/// is part of the state the app keeps (`XMPPClientState.userAgentID`).
public struct XMPPUserAgent: Hashable, Sendable, Codable {
    /// The software (default "Tether").
    public var software: String?
    /// The device, as the user would name it ("Alice's phone"), if the app knows it.
    public var device: String?

    /// A user agent.
    public init(software: String? = "Tether", device: String? = nil) {
        self.software = software
        self.device = device
    }
}

/// Where the account's server sends push notifications (XEP-0357): the app server's XMPP address
/// and the node that names this device there, with the publish options the app server wants back
/// (such as a `secret`; their values are never logged).
public struct XMPPPushRegistration: Hashable, Sendable {
    /// The app server (push service) JID.
    public var service: JID
    /// The node on the app server for this device.
    public var node: String
    /// `publish-options` fields (XEP-0357 §5): name and value.
    public var publishOptions: [String: Secret]

    /// A registration.
    public init(service: JID, node: String, publishOptions: [String: Secret] = [:]) {
        self.service = service
        self.node = node
        self.publishOptions = publishOptions
    }
}

// Names of earlier versions, kept so that the compiler names their replacements (CHANGELOG.md).
extension XMPPClientMachine.Configuration {
    /// Replaced by `state.fastToken` (the whole `XMPPClientState` is what an app keeps).
    @available(
        *,
        unavailable,
        message:
            "the FAST token is part of the state now: configuration.state.fastToken (keep the whole XMPPClientState the stateChanged event hands out)"
    )
    public var fastToken: XMPPFASTToken? {
        get { state.fastToken }
        set { state.fastToken = newValue }
    }
}

extension XMPPUserAgent {
    /// Replaced by `XMPPClientState.userAgentID` (made at the first SASL2 login and kept there).
    @available(
        *,
        unavailable,
        message:
            "the installation's id is XMPPClientState.userAgentID now (made at the first SASL2 login, reported in stateChanged)"
    )
    public var id: String {
        get { "" }
        set {}
    }

    /// Replaced by `init(software:device:)`: the id is `XMPPClientState.userAgentID`.
    @available(
        *,
        unavailable,
        message: "use XMPPUserAgent(software:device:); the installation's id is XMPPClientState.userAgentID"
    )
    public init(id: String, software: String? = "Tether", device: String? = nil) {
        self.init(software: software, device: device)
    }
}
