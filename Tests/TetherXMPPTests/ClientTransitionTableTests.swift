import Foundation
import Testing
import TetherCore
import TetherDNS
import TetherSimulation
import TetherXML

@testable import TetherXMPP

/// Walks every row of the transition table in Specs/xmpp/client-machine.md against the code.
struct ClientTransitionTableTests {
    typealias Row = TransitionRow

    /// The number of rows the table has; a row added or lost must be noticed.
    static let expectedRowCount = 153

    static let table = TransitionTable.rows("Specs/xmpp/client-machine.md", columns: 4)

    @Test func tableIsWellFormed() {
        #expect(Self.table.malformed.isEmpty, "malformed rows: \(Self.table.malformed)")
        #expect(Self.table.rows.count == Self.expectedRowCount)
        let states = Set(Machine.StateName.allCases.map(\.rawValue))
        for row in Self.table.rows {
            #expect(states.contains(row.next), "unknown next state in \(row.description)")
        }
    }

    @Test(arguments: table.rows)
    func row(_ row: Row) throws {
        guard let harness = Self.setUp(row.state) else {
            return fail("no setup for the state '\(row.state)'")
        }
        harness.drain()
        let before = harness.transcript.count
        guard Self.apply(row.input, to: harness) else {
            return fail("no input named '\(row.input)'")
        }
        harness.drain()
        #expect(Array(harness.transcript[before...]) == row.actions)
        #expect(harness.state.rawValue == row.next)
    }

    // MARK: - Setups

    static let header = XMPPClientHarness.serverHeader
    static let plainFeatures = XMPPClientHarness.mechanisms(["PLAIN"])
    /// SASL2 with PLAIN, Bind 2 taking `<enable/>` and stream management inline.
    static let sasl2Features =
        "<stream:features><authentication xmlns='urn:xmpp:sasl:2'><mechanism>PLAIN</mechanism><inline><bind xmlns='urn:xmpp:bind:0'><inline><feature var='urn:xmpp:sm:3'/></inline></bind><sm xmlns='urn:xmpp:sm:3'/></inline></authentication></stream:features>"

    /// An online session: XEP-0198 enabled and resumable, one iq request pending (its id is
    /// "pending"), nothing unacknowledged.
    static func online(_ configure: (inout Machine.Configuration) -> Void = { _ in }) -> XMPPClientHarness {
        let harness = XMPPClientHarness {
            $0.iqTimeout = .seconds(300)
            $0.handledIQNamespaces = ["urn:example:handled"]
            configure(&$0)
        }
        harness.login()
        _ = try! harness.machine.send(
            XMPPIQ.get(XElement(XMLName("q", namespace: "urn:x")), id: "pending"),
            now: harness.now
        )
        harness.drain()
        if harness.smEnabled {
            harness.advance(by: .seconds(2))
            harness.server("<a xmlns='urn:xmpp:sm:3' h='1'/>")
        }
        return harness
    }

    /// Online, one message sent and not acknowledged, then the link dropped.
    static func lostWithUnacknowledged(
        _ configure: (inout Machine.Configuration) -> Void = { _ in }
    ) -> XMPPClientHarness {
        let harness = online(configure)
        try! harness.machine.send(XMPPMessage(to: JID("bob@example.com"), body: "unacked", id: "u1"), now: harness.now)
        harness.drain()
        harness.transportClosed()
        return harness
    }

    static func afterHeader(
        _ configure: @escaping (inout Machine.Configuration) -> Void = { _ in }
    ) -> XMPPClientHarness {
        let harness = XMPPClientHarness(configure)
        harness.start()
        harness.connected()
        harness.server(header)
        return harness
    }

    static func scramAuthenticating() -> XMPPClientHarness {
        let harness = afterHeader { $0.mechanisms = [.scramSHA1] }
        harness.server(XMPPClientHarness.mechanisms(["SCRAM-SHA-1"]))
        return harness
    }

    static func setUp(_ state: String) -> XMPPClientHarness? {
        switch state {
        case "disconnected":
            return XMPPClientHarness()
        case "connectingTransport":
            let harness = XMPPClientHarness()
            harness.start()
            return harness
        case "disconnected with a service lookup":
            return XMPPClientHarness { $0.serviceLookup = true }
        case "looking up the service", "connecting to the first of two targets":
            let harness = XMPPClientHarness { $0.serviceLookup = true }
            harness.start()
            if state == "connecting to the first of two targets" { _ = apply("service records", to: harness) }
            harness.drain()
            return harness
        case "opening a stream on the first of two targets",
            "opening a stream on the first of two targets after the server's header":
            let harness = setUp("connecting to the first of two targets")!
            harness.connected()
            if state.hasSuffix("header") { harness.server(header) }
            return harness
        case "connectingTransport with direct TLS":
            let harness = XMPPClientHarness { $0.tls = .direct }
            harness.start()
            return harness
        case "openingStream":
            let harness = XMPPClientHarness()
            harness.start()
            harness.connected()
            return harness
        case "openingStream after the header":
            return afterHeader()
        case "openingStream after the header with TLS optional":
            return afterHeader { $0.tls = .optional }
        case "openingStream after the header with TLS required":
            return afterHeader { $0.tls = .required }
        case "openingStream after the header without PLAIN on cleartext":
            return afterHeader { $0.allowPlainOnCleartext = false }
        case "securing":
            let harness = afterHeader { $0.tls = .optional }
            harness.server("<stream:features><starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/></stream:features>")
            return harness
        case "securing after proceed":
            let harness = setUp("securing")!
            harness.server("<proceed xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>")
            return harness
        case "authenticating with PLAIN":
            let harness = afterHeader()
            harness.server(plainFeatures)
            return harness
        case "authenticating with SASL2":
            let harness = afterHeader()
            harness.server(sasl2Features)
            return harness
        case "authenticating with SASL2 after success":
            let harness = setUp("authenticating with SASL2")!
            _ = apply("SASL2 success with a bound session", to: harness)
            return harness
        case "authenticating with SCRAM":
            return scramAuthenticating()
        case "authenticating with SCRAM after the challenge":
            let harness = scramAuthenticating()
            let challenge = harness.scramServer.challenge(forAuth: saslPayload(harness.lastSent))
            harness.server("<challenge xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>\(challenge)</challenge>")
            return harness
        case "openingStream after authentication":
            let harness = setUp("authenticating with PLAIN")!
            harness.server("<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>" + header)
            return harness
        case "openingStream after authentication of a resumable session":
            let harness = lostWithUnacknowledged()
            harness.advance(by: .seconds(1))
            harness.connected()
            harness.server(header + plainFeatures)
            harness.server("<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>" + header)
            return harness
        case "resuming":
            let harness = setUp("openingStream after authentication of a resumable session")!
            harness.server(XMPPClientHarness.boundFeatures)
            return harness
        case "binding":
            let harness = setUp("openingStream after authentication")!
            harness.server(XMPPClientHarness.boundFeatures)
            return harness
        case "binding without stream management":
            let harness = setUp("openingStream after authentication")!
            harness.server("<stream:features><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'/></stream:features>")
            return harness
        case "binding with the session required", "binding the session":
            let harness = setUp("openingStream after authentication")!
            harness.server(
                "<stream:features><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'/><session xmlns='urn:ietf:params:xml:ns:xmpp-session'/><sm xmlns='urn:xmpp:sm:3'/></stream:features>"
            )
            if state == "binding the session" { answerBind(harness) }
            return harness
        case "connected":
            return online()
        case "binding with an archive position":
            let harness = XMPPClientHarness {
                $0.archiveCatchUp = .init()
                $0.state.archivePosition = XMPPArchivePosition(id: "A0")
            }
            harness.open(plainFeatures)
            harness.server("<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>" + header)
            harness.server(XMPPClientHarness.boundFeatures)
            return harness
        case "connected catching up", "connected catching up without stream management":
            return online {
                $0.archiveCatchUp = .init()
                $0.state.archivePosition = XMPPArchivePosition(id: "A0")
                if state.hasSuffix("without stream management") { $0.streamManagement = nil }
            }
        case "connected with carbons":
            return online { $0.carbons = true }
        case "connected with push":
            return online { $0.push = XMPPPushRegistration(service: JID("push.example.net")!, node: "device") }
        case "connected before stream management is enabled":
            let harness = XMPPClientHarness()
            harness.login(enableSM: false)
            return harness
        case "connected without stream management":
            return online { $0.streamManagement = nil }
        case "closing":
            let harness = online()
            harness.machine.stop(now: harness.now)
            return harness
        case "reconnectWaiting":
            let harness = online()
            harness.transportClosed()
            return harness
        case "disconnected over WebSocket", "connectingTransport over WebSocket", "openingStream over WebSocket":
            let harness = XMPPClientHarness { $0.webSocket = ServerURL("wss://example.com/xmpp")! }
            if state != "disconnected over WebSocket" { harness.start() }
            if state == "openingStream over WebSocket" { harness.connected() }
            return harness
        case "openingStream after the open over cleartext WebSocket with TLS required":
            let harness = XMPPClientHarness {
                $0.webSocket = ServerURL("ws://example.com/xmpp")!
                $0.tls = .required
            }
            harness.start()
            harness.connected()
            harness.server(WebSocketFramingTests.open)
            return harness
        case "connected over WebSocket", "closing over WebSocket":
            let harness = WebSocketFramingTests.harness("wss://example.com/xmpp")
            WebSocketFramingTests.login(harness)
            if state == "closing over WebSocket" { harness.machine.stop(now: harness.now) }
            return harness
        case "connected with a probe out":
            let harness = online()
            harness.machine.networkChanged(.unavailable, now: harness.now)
            return harness
        case "waiting for the network":
            let harness = online()
            harness.machine.networkChanged(.unavailable, now: harness.now)
            harness.transportClosed()
            return harness
        case "connected on Wi-Fi":
            let harness = online()
            harness.machine.networkChanged(NetworkPath(isAvailable: true, interfaces: ["wlan0"]), now: harness.now)
            return harness
        case "connectingTransport on Wi-Fi":
            let harness = XMPPClientHarness()
            harness.machine.networkChanged(NetworkPath(isAvailable: true, interfaces: ["wlan0"]), now: harness.now)
            harness.start()
            return harness
        case "connected with client state indication", "connected in the background with client state indication":
            let harness = XMPPClientHarness()
            harness.login(features: DeviceTests.csiFeatures)
            if state.contains("background") { harness.machine.applicationStateChanged(.background, now: harness.now) }
            return harness
        case "reconnectWaiting in the background":
            let harness = online()
            harness.machine.applicationStateChanged(.background, now: harness.now)
            harness.transportClosed()
            return harness
        case "suspended":
            let harness = XMPPClientHarness { $0.reconnectPolicy = .fixed(.seconds(1), maximumAttempts: 0) }
            harness.login()
            try! harness.machine.send(
                XMPPMessage(to: JID("bob@example.com"), body: "unacked", id: "u1"),
                now: harness.now
            )
            harness.drain()
            harness.transportClosed()
            return harness
        default:
            return nil
        }
    }

    static func answerBind(_ harness: XMPPClientHarness, jid: String = "alice@example.com/phone") {
        harness.server(
            "<iq type='result' id='\(harness.lastSentID)'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><jid>\(jid)</jid></bind></iq>"
        )
    }

    // MARK: - Inputs

    static func streamError(_ condition: String, _ text: String = "") -> String {
        "<stream:error><\(condition) xmlns='urn:ietf:params:xml:ns:xmpp-streams'>\(text)</\(condition)></stream:error>"
    }

    /// Applies the named input; false if there is no such input.
    static func apply(_ input: String, to harness: XMPPClientHarness) -> Bool {
        switch input {
        case "start": harness.machine.start(now: harness.now)
        case "stop": harness.machine.stop(now: harness.now)
        case "service records", "no service records", "no service":
            func srv(_ priority: UInt16, _ port: UInt16, _ target: String) -> DNSRecordData {
                .srv(priority: priority, weight: 0, port: port, target: target)
            }
            let (startTLS, directTLS): (XMPPServiceTargets.Lookup, XMPPServiceTargets.Lookup) =
                switch input {
                case "service records":
                    (
                        .records([srv(10, 5222, "xmpp.example.com"), srv(20, 5222, "xmpp2.example.com")]),
                        .records([srv(5, 5223, "tls.example.com")])  // dropped: TLS is disabled here
                    )
                case "no service": (.records([srv(0, 0, ".")]), .none)
                default: (.none, .none)
                }
            harness.machine.serviceLookedUp(
                startTLS: startTLS,
                directTLS: directTLS,
                generation: harness.generation!,
                now: harness.now
            )
        case "reconnect now": harness.machine.reconnectNow(now: harness.now)
        case "transport connected": harness.connected()
        case "transport closed": harness.transportClosed()
        case "connect timeout": harness.advance(by: .seconds(30))
        case "reconnect timer": harness.advance(by: .seconds(1))
        case "close timeout": harness.advance(by: .seconds(2))
        case "stale transport input":
            let stale = TransportGeneration(harness.generation!.value - 1)
            harness.machine.transportConnected(generation: stale, now: harness.now)
            harness.machine.transportReceived(Array("<junk".utf8), generation: stale, now: harness.now)
            harness.machine.transportClosed(
                generation: stale,
                error: TransportError(.connectionLost, "late"),
                now: harness.now
            )
        case "server header": harness.server(header)
        case "network lost": harness.machine.networkChanged(.unavailable, now: harness.now)
        case "network on cellular":
            harness.machine.networkChanged(NetworkPath(isAvailable: true, interfaces: ["rmnet0"]), now: harness.now)
        case "network lost and back":
            harness.machine.networkChanged(.unavailable, now: harness.now)
            harness.machine.networkChanged(NetworkPath(isAvailable: true, interfaces: ["rmnet0"]), now: harness.now)
        case "probe timeout": harness.advance(by: .seconds(5))
        case "app to background": harness.machine.applicationStateChanged(.background, now: harness.now)
        case "app to foreground": harness.machine.applicationStateChanged(.active, now: harness.now)
        case "server open": harness.server(WebSocketFramingTests.open)
        case "server close": harness.server(WebSocketFramingTests.close)
        case "server close with see-other-uri", "server close with see-other-uri to ws":
            let scheme = input.hasSuffix("to ws") ? "ws" : "wss"
            harness.server(
                "<close xmlns='urn:ietf:params:xml:ns:xmpp-framing' see-other-uri='\(scheme)://other.example/xmpp'/>"
            )
        case "server header of another namespace":
            harness.server(header.replacingOccurrences(of: "xmlns='jabber:client'", with: "xmlns='jabber:server'"))
        case "server header without version":
            harness.server(header.replacingOccurrences(of: " version='1.0'", with: ""))
        case "features with mechanisms": harness.server(plainFeatures)
        case "features with STARTTLS":
            harness.server("<stream:features><starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/></stream:features>")
        case "features with required STARTTLS and PLAIN":
            harness.server(
                "<stream:features xmlns:stream='http://etherx.jabber.org/streams'><starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'><required/></starttls><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>PLAIN</mechanism></mechanisms></stream:features>"
            )
        case "features with required STARTTLS":
            harness.server(
                "<stream:features><starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'><required/></starttls></stream:features>"
            )
        case "features without STARTTLS", "features with PLAIN only": harness.server(plainFeatures)
        case "features with an unknown required feature":
            harness.server(
                "<stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>PLAIN</mechanism></mechanisms><x xmlns='urn:example'><required/></x></stream:features>"
            )
        case "stream error system-shutdown": harness.server(streamError("system-shutdown"))
        case "stream error host-unknown": harness.server(streamError("host-unknown"))
        case "stream error conflict": harness.server(streamError("conflict"))
        case "stream error see-other-host": harness.server(streamError("see-other-host", "other.example"))
        case "unexpected element": harness.server("<message><body>too early</body></message>")
        case "malformed XML": harness.server("<a></b>")
        case "restricted XML": harness.server("<!-- comment -->")
        case "server closes the stream": harness.server("</stream:stream>")
        case "proceed": harness.server("<proceed xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>")
        case "STARTTLS failure": harness.server("<failure xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>")
        case "TLS established": harness.machine.tlsEstablished(generation: harness.generation!, now: harness.now)
        case "certificate refused":
            harness.machine.transportClosed(
                generation: harness.generation!,
                error: TransportError(
                    .certificateRefused,
                    "no pinned public key matches the server's certificate chain"
                ),
                now: harness.now
            )
        case "TLS failed":
            harness.machine.transportClosed(
                generation: harness.generation!,
                error: TransportError(.tlsFailed, "certificate verify failed"),
                now: harness.now
            )
        case "bytes": harness.server("\u{16}\u{03}\u{03}")
        case "success": harness.server("<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>")
        case "features with SASL2": harness.server(sasl2Features)
        case "SASL2 success with a bound session":
            harness.server(
                "<success xmlns='urn:xmpp:sasl:2'><bound xmlns='urn:xmpp:bind:0'><enabled xmlns='urn:xmpp:sm:3' id='sm-2' resume='1'/></bound><authorization-identifier>alice@example.com/x~1</authorization-identifier></success>"
            )
        case "SASL2 failure not-authorized":
            harness.server(
                "<failure xmlns='urn:xmpp:sasl:2'><not-authorized xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/></failure>"
            )
        case "SASL2 continue":
            harness.server("<continue xmlns='urn:xmpp:sasl:2'><tasks><task>TOTP</task></tasks></continue>")
        case "sm request": harness.server("<r xmlns='urn:xmpp:sm:3'/>")
        case "features after SASL2":
            harness.server("<stream:features><ver xmlns='urn:xmpp:features:rosterver'/></stream:features>")
        case "failure not-authorized":
            harness.server("<failure xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><not-authorized/></failure>")
        case "failure temporary-auth-failure":
            harness.server("<failure xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><temporary-auth-failure/></failure>")
        case "challenge":
            let challenge =
                harness.lastSent.contains("SCRAM")
                ? harness.scramServer.challenge(forAuth: saslPayload(harness.lastSent)) : Base64.encode([1, 2, 3])
            harness.server("<challenge xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>\(challenge)</challenge>")
        case "challenge with a foreign nonce":
            let foreign = Base64.encode(Array("r=someoneelse,s=c2FsdA==,i=4096".utf8))
            harness.server("<challenge xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>\(foreign)</challenge>")
        case "challenge that is not base64":
            harness.server("<challenge xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>!!!</challenge>")
        case "success with the server signature", "challenge with the server signature":
            let final = Base64.encode(Array(harness.scramServer.final().serverFinal.utf8))
            let name = input.hasPrefix("success") ? "success" : "challenge"
            harness.server("<\(name) xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>\(final)</\(name)>")
        case "success with a wrong signature":
            let final = Base64.encode(Array(harness.scramServer.final(signatureTampered: true).serverFinal.utf8))
            harness.server("<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>\(final)</success>")
        case "success without a signature": harness.server("<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>")
        case "features with bind": harness.server(XMPPClientHarness.boundFeatures)
        case "features without bind": harness.server("<stream:features/>")
        case "features with stream management": harness.server(XMPPClientHarness.boundFeatures)
        case "features without stream management":
            harness.server("<stream:features><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'/></stream:features>")
        case "bind result": answerBind(harness)
        case "bind result without a full JID": answerBind(harness, jid: "alice@example.com")
        case "bind error":
            harness.server(
                "<iq type='error' id='\(harness.lastSentID)'><error type='cancel'><conflict xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></error></iq>"
            )
        case "session result": harness.server("<iq type='result' id='\(harness.lastSentID)'/>")
        case "session error":
            harness.server(
                "<iq type='error' id='\(harness.lastSentID)'><error type='wait'><internal-server-error xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></error></iq>"
            )
        case "resumed": harness.server("<resumed xmlns='urn:xmpp:sm:3' previd='sm-1' h='1'/>")
        case "resumed with a too-high h": harness.server("<resumed xmlns='urn:xmpp:sm:3' previd='sm-1' h='5'/>")
        case "failed":
            harness.server(
                "<failed xmlns='urn:xmpp:sm:3'><item-not-found xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></failed>"
            )
        case "message": harness.server("<message from='bob@example.com/x' type='chat'><body>hi</body></message>")
        case "archive result", "archive page with more to come", "archive end", "archive refused":
            guard let query = ArchiveCatchUpTests.query(harness) else { return false }
            switch input {
            case "archive result": harness.server(ArchiveCatchUpTests.result(query.queryID, "B1", body: "old"))
            case "archive page with more to come":
                harness.server(ArchiveCatchUpTests.result(query.queryID, "B1", body: "old"))
                harness.server(ArchiveCatchUpTests.fin(query.iqID, complete: false, last: "B1"))
            case "archive end": harness.server(ArchiveCatchUpTests.fin(query.iqID, complete: true, last: nil))
            default:
                harness.server(
                    "<iq type='error' id='\(query.iqID)'><error type='cancel'><item-not-found xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></error></iq>"
                )
            }
        case "carbon copy":
            harness.server(
                "<message from='alice@example.com' type='chat'><received xmlns='urn:xmpp:carbons:2'><forwarded xmlns='urn:xmpp:forward:0'><message xmlns='jabber:client' from='bob@example.com/x' to='alice@example.com/laptop' type='chat'><body>copy</body></message></forwarded></received></message>"
            )
        case "push enabled", "push refused":
            guard let enable = harness.sent.last(where: { $0.text.contains("urn:xmpp:push:0") })?.text,
                let range = enable.range(of: "id='")
            else { return false }
            let id = enable[range.upperBound...].prefix { $0 != "'" }
            harness.server(
                input == "push enabled"
                    ? "<iq type='result' id='\(id)'/>"
                    : "<iq type='error' id='\(id)'><error type='cancel'><not-allowed xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></error></iq>"
            )
        case "presence": harness.server("<presence from='bob@example.com/x'/>")
        case "subscription request": harness.server("<presence type='subscribe' from='bob@example.com'/>")
        case "ping request":
            harness.server("<iq type='get' id='s1' from='example.com'><ping xmlns='urn:xmpp:ping'/></iq>")
        case "iq request in a handled namespace", "iq request in another namespace":
            let namespace = input.hasSuffix("handled namespace") ? "urn:example:handled" : "urn:example:other"
            harness.server("<iq type='get' id='r1' from='bob@example.com/x'><q xmlns='\(namespace)'/></iq>")
        case "roster push":
            harness.server(
                "<iq type='set' id='push'><query xmlns='jabber:iq:roster'><item jid='bob@example.com'/></query></iq>"
            )
        case "iq result": harness.server("<iq type='result' id='pending'/>")
        case "iq result from someone else":
            harness.server("<iq type='result' id='pending' from='mallory@evil.example'/>")
        case "iq result with an unknown id": harness.server("<iq type='result' id='unknown'/>")
        case "iq request timing out":
            _ = try? harness.machine.send(
                XMPPIQ.get(XElement(XMLName("q", namespace: "urn:x"))),
                timeout: .seconds(1),
                now: harness.now
            )
            harness.drain()
            harness.advance(by: .seconds(1))
        case "send message":
            _ = try? harness.machine.send(
                XMPPMessage(to: JID("bob@example.com"), body: "x", id: "s1"),
                now: harness.now
            )
        case "enabled": harness.server("<enabled xmlns='urn:xmpp:sm:3' id='sm-1' resume='true'/>")
        case "ack request": harness.server("<r xmlns='urn:xmpp:sm:3'/>")
        case "ack": harness.server("<a xmlns='urn:xmpp:sm:3' h='1'/>")
        case "ack too high": harness.server("<a xmlns='urn:xmpp:sm:3' h='5'/>")
        case "ping interval": harness.advance(by: .seconds(60))
        case "missed pings": harness.advance(by: .seconds(80))
        default:
            return false
        }
        return true
    }
}
