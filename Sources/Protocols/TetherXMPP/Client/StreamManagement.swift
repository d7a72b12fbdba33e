import TetherCore
import TetherXML

/// The client's XEP-0198 (version 3) state for one stream-management session, which outlives a
/// TCP connection while the session can be resumed.
///
/// Counters are `UInt32` with wrapping arithmetic (xs:unsignedInt: after 2^32 − 1 comes 0). The
/// outbound side keeps every stanza sent since `<enable/>` until the server acknowledges it; the
/// number sent is `acknowledged &+ unacknowledged.count`. The inbound side counts the stanzas
/// handled since `<enabled/>`.
struct StreamManagement: Sendable {
    /// The resumption id (nil: the server did not allow resumption).
    var resumptionID: String?
    /// Where the server prefers the resumption (XEP-0198 `location`).
    var location: Endpoint?
    /// Whether `<enabled/>` arrived (inbound counting starts then).
    var isEnabled = false
    /// Stanzas from the server handled since `<enabled/>`.
    var inbound: UInt32 = 0
    /// The last `h` the server acknowledged.
    var acknowledged: UInt32 = 0
    /// Stanzas sent and not yet acknowledged, oldest first.
    var unacknowledged = FIFOQueue<SentStanza>()
    /// Stanzas sent since the last `<r/>`.
    var sentSinceRequest = 0

    /// Whether the session can be resumed after the transport is lost.
    var isResumable: Bool { isEnabled && resumptionID != nil }

    /// The number of stanzas sent since `<enable/>` (mod 2^32).
    var sent: UInt32 { acknowledged &+ UInt32(truncatingIfNeeded: unacknowledged.count) }

    /// The outcome of an acknowledgement.
    enum Acknowledgement: Equatable {
        /// `count` more stanzas were acknowledged.
        case acknowledged(count: Int)
        /// The server acknowledged more than was sent (`h`, and what was sent).
        case tooHigh(h: UInt32, sent: UInt32)
    }

    /// Applies an `h` from `<a/>`, `<resumed/>` or `<failed/>`.
    mutating func acknowledge(_ h: UInt32) -> Acknowledgement {
        let newly = h &- acknowledged
        guard newly <= UInt32(truncatingIfNeeded: unacknowledged.count) else {
            return .tooHigh(h: h, sent: sent)
        }
        unacknowledged.removeFirst(Int(newly))
        acknowledged = h
        return .acknowledged(count: Int(newly))
    }

    /// Counts a stanza handled from the server.
    mutating func handledInbound() {
        if isEnabled { inbound &+= 1 }
    }

    /// Counts a stanza sent to the server.
    mutating func sentStanza(_ stanza: SentStanza) {
        unacknowledged.append(stanza)
        sentSinceRequest += 1
    }

    /// The app's stanzas among the unacknowledged ones, oldest first.
    var unacknowledgedAppStanzas: [XElement] {
        unacknowledged.elements.compactMap(\.appStanza)
    }

    /// The `h` attribute of an SM element, if present and a valid xs:unsignedInt.
    static func h(of element: XElement) -> UInt32? {
        element.attribute("h").flatMap { UInt32($0) }
    }
}

/// XEP-0199 auto-ping: after `interval` without receiving anything, ping the server; a ping
/// unanswered after `timeout` (with nothing else received meanwhile) is missed and the next one
/// goes out at once; `maximumMissed` misses in a row mean the stream is dead. So a dead link is
/// noticed at most `interval + maximumMissed × timeout` after the last byte arrived.
///
/// Not `TetherCore.Heartbeat`: that one follows SignalR's rules (a keep-alive after *send*
/// silence, a receive timeout), while XEP-0199 practice pings after *receive* silence and counts
/// any data that arrives during a ping as life (Smack #279/#296).
struct AutoPing: Sendable {
    let configuration: XMPPClientMachine.AutoPingConfiguration
    /// A ping out: its id and when it went.
    struct Ping: Sendable {
        var id: String
        var sentAt: Instant
    }

    /// The ping out, when its answer is due, and, for a probe (the network changed), the ping
    /// that was out before it (whose answer counts too). Anything else received meanwhile proves
    /// the link for an ordinary ping only: after a network change, bytes still on their way from
    /// the old path prove nothing.
    private(set) var outstanding: (ping: Ping, due: Instant, earlier: Ping?, probe: Bool)?
    private(set) var missed = 0
    /// The app is in the background: `backgroundInterval` applies.
    var inBackground = false

    /// The interval in force.
    var interval: Duration {
        inBackground ? (configuration.backgroundInterval ?? configuration.interval) : configuration.interval
    }

    init(configuration: XMPPClientMachine.AutoPingConfiguration) {
        self.configuration = configuration
    }

    /// When something is next due, if bytes last arrived at `lastReceived`.
    func deadline(lastReceived: Instant) -> Instant {
        if let outstanding { return outstanding.due }
        return lastReceived + interval
    }

    enum Due: Equatable {
        case nothing
        case sendPing
        /// The link is dead (`probe`: a probe after a network change went unanswered).
        case dead(probe: Bool)
    }

    mutating func pingSent(id: String, at now: Instant) {
        outstanding = (Ping(id: id, sentAt: now), now + configuration.timeout, nil, false)
    }

    /// A probe (the network changed): unanswered within `timeout` (or by the deadline of a ping
    /// already out, when sooner), the link is dead at once.
    mutating func probeSent(id: String, at now: Instant, timeout: Duration) {
        let earlier = outstanding
        let due = min(now + timeout, earlier?.due ?? now + timeout)
        outstanding = (Ping(id: id, sentAt: now), due, earlier?.ping, true)
    }

    /// Whether `id` answers the outstanding ping (or the one out before a probe).
    func awaits(answer id: String) -> Bool {
        guard let sent = outstanding else { return false }
        return sent.ping.id == id || sent.earlier?.id == id
    }

    /// When the outstanding ping went out, if `id` answers it (a result or an error: both
    /// prove liveness); nil otherwise.
    mutating func answered(id: String) -> Instant? {
        guard let sent = outstanding else { return nil }
        let answered = sent.ping.id == id ? sent.ping : sent.earlier?.id == id ? sent.earlier : nil
        guard let answered else { return nil }
        outstanding = nil
        missed = 0
        return answered.sentAt
    }

    /// What is due at `now`, if bytes last arrived at `lastReceived` (anything that arrives
    /// proves the link alive).
    mutating func check(now: Instant, lastReceived: Instant) -> Due {
        if let sent = outstanding {
            guard now >= sent.due else { return .nothing }
            outstanding = nil
            if sent.probe { return .dead(probe: true) }
            if lastReceived > sent.ping.sentAt {
                // Something else arrived meanwhile: the link works, the reply is merely late.
                missed = 0
                return now >= lastReceived + interval ? .sendPing : .nothing
            }
            missed += 1
            return missed >= configuration.maximumMissed ? .dead(probe: false) : .sendPing
        }
        return now >= lastReceived + interval ? .sendPing : .nothing
    }
}
