// libFuzzer target: XMPPClientMachine driven by fuzz-chosen sequences of inputs. Each input
// byte is an operation: app commands (start, stop, reconnect now, send a message, send an iq,
// ask for an acknowledgement), transport events (connected, closed, TLS failed), server bytes
// (a menu of the stanzas a server sends, a reply to the last iq the client sent, or raw bytes
// taken from the input), time passing, and any of these on a stale transport generation.
//
// Invariants: no bytes after the machine reported `closed` (until it connects again), none on
// a transport other than the one open (from its connect action to its close action); every iq the app sent ends exactly once (a
// response, an error, a time-out or not delivered), by the end of a stop at the latest; the
// machine never asks for a timer at or before the present once its due timers have run; the
// stanzas it keeps for stream management stay within `maximumQueuedStanzas`; at most a bounded
// number of actions per input (no busy loop); at most one `caughtUp` per new session, and no
// archive id delivered twice by one catch-up.
//
// The first byte also chooses the archive catch-up (with a position, tiny limits), carbons and
// push; the server's archive results answer the last query the client sent (its `queryid`).
import FuzzSupport
import TetherCore
import TetherTLS
import TetherXML
import TetherXMPP

let header =
    "<?xml version='1.0'?><stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' id='s1' from='example.com' version='1.0'>"
let menu: [String] = [
    header,
    "<stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>PLAIN</mechanism></mechanisms></stream:features>",
    "<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>",
    "<failure xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><not-authorized/></failure>",
    "<stream:features><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'/><sm xmlns='urn:xmpp:sm:3'/></stream:features>",
    "<enabled xmlns='urn:xmpp:sm:3' id='sm-1' resume='true' max='60'/>",
    "<r xmlns='urn:xmpp:sm:3'/>",
    "<a xmlns='urn:xmpp:sm:3' h='1'/>",
    "<a xmlns='urn:xmpp:sm:3' h='7'/>",
    "<resumed xmlns='urn:xmpp:sm:3' previd='sm-1' h='0'/>",
    "<failed xmlns='urn:xmpp:sm:3'><item-not-found xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></failed>",
    "<message from='bob@example.com/x' type='chat'><body>hi</body></message>",
    "<presence from='bob@example.com/x'/>",
    "<presence from='carol@example.com' type='subscribe'/>",
    "<iq type='get' id='q1' from='example.com'><ping xmlns='urn:xmpp:ping'/></iq>",
    "<iq type='get' id='q2' from='example.com'><query xmlns='jabber:iq:version'/></iq>",
    "<stream:error><conflict xmlns='urn:ietf:params:xml:ns:xmpp-streams'/></stream:error>",
    "<stream:error><see-other-host xmlns='urn:ietf:params:xml:ns:xmpp-streams'>other.example.com:5222</see-other-host></stream:error>",
    "</stream:stream>",
    "<proceed xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>",
    // SASL2 (XEP-0388) with Bind 2 and stream management inside the login.
    "<stream:features><authentication xmlns='urn:xmpp:sasl:2'><mechanism>PLAIN</mechanism><inline><bind xmlns='urn:xmpp:bind:0'><inline><feature var='urn:xmpp:sm:3'/></inline></bind><sm xmlns='urn:xmpp:sm:3'/></inline></authentication></stream:features>",
    "<success xmlns='urn:xmpp:sasl:2'><bound xmlns='urn:xmpp:bind:0'><enabled xmlns='urn:xmpp:sm:3' id='sm-2' resume='1'/></bound><authorization-identifier>alice@example.com/x~1</authorization-identifier></success>",
    "<success xmlns='urn:xmpp:sasl:2'><resumed xmlns='urn:xmpp:sm:3' h='0' previd='sm-2'/><authorization-identifier>alice@example.com/x~1</authorization-identifier></success>",
    "<success xmlns='urn:xmpp:sasl:2'><failed xmlns='urn:xmpp:sm:3'/><authorization-identifier>alice@example.com</authorization-identifier></success>",
    "<failure xmlns='urn:xmpp:sasl:2'><not-authorized xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/></failure>",
    "<continue xmlns='urn:xmpp:sasl:2'><tasks><task>TOTP</task></tasks></continue>",
    // Carbons (XEP-0280), from the account and forged.
    "<message from='alice@example.com'><received xmlns='urn:xmpp:carbons:2'><forwarded xmlns='urn:xmpp:forward:0'><message xmlns='jabber:client' from='bob@example.com/x' id='c1'><body>c</body></message></forwarded></received></message>",
    "<message from='mallory@example.net'><sent xmlns='urn:xmpp:carbons:2'><forwarded xmlns='urn:xmpp:forward:0'><message xmlns='jabber:client' from='alice@example.com/x'/></forwarded></sent></message>",
    "<message from='bob@example.com/x' id='l1'><body>live</body><stanza-id xmlns='urn:xmpp:sid:0' by='alice@example.com' id='B2'/></message>",
].map { $0 }

/// The value of `attribute='…'` after the last `marker` in `text`.
func lastAttribute(_ attribute: String, after marker: String, in text: [UInt8]) -> String? {
    let open = Array(marker.utf8)
    let key = Array("\(attribute)='".utf8)
    guard text.count >= open.count,
        let start = (0...(text.count - open.count)).reversed().first(where: {
            text[$0..<($0 + open.count)].elementsEqual(open)
        })
    else { return nil }
    let rest = Array(text[start...])
    guard rest.count >= key.count,
        let at = (0...(rest.count - key.count)).first(where: { rest[$0..<($0 + key.count)].elementsEqual(key) })
    else { return nil }
    let value = rest[(at + key.count)...]
    guard let end = value.firstIndex(of: UInt8(ascii: "'")) else { return nil }
    return String(decoding: value[..<end], as: UTF8.self)
}

/// The id of the last `<iq` the client sent, taken from its bytes.
func lastIQID(in text: [UInt8]) -> String? {
    let open = Array("<iq ".utf8)
    guard text.count >= open.count else { return nil }
    guard
        let start = (0...(text.count - open.count)).reversed().first(where: {
            text[$0..<($0 + open.count)].elementsEqual(open)
        })
    else { return nil }
    let rest = text[(start + open.count)...]
    guard let tagEnd = rest.firstIndex(of: UInt8(ascii: ">")) else { return nil }
    let tag = rest[..<tagEnd]
    for quote in [UInt8(ascii: "'"), UInt8(ascii: "\"")] {
        let key = Array("id=".utf8) + [quote]
        guard tag.count >= key.count,
            let at = (tag.startIndex...(tag.endIndex - key.count)).first(where: {
                tag[$0..<($0 + key.count)].elementsEqual(key)
            })
        else { continue }
        let value = tag[(at + key.count)...]
        if let end = value.firstIndex(of: quote) { return String(decoding: value[..<end], as: UTF8.self) }
    }
    return nil
}

@c(LLVMFuzzerTestOneInput)
func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let flags = input.byte()
    var configuration = XMPPClientMachine.Configuration(
        jid: JID("alice@example.com/phone")!,
        password: "secret",
        endpoint: Endpoint(host: "127.0.0.1", port: 5222),
        tls: flags & 1 == 0 ? .disabled : .required,
        allowPlainOnCleartext: true,
        streamManagement: flags & 2 == 0 ? .init() : nil,
        reconnectPolicy: flags & 4 == 0 ? .fixed(.seconds(2)) : nil,
        fetchRosterOnConnect: flags & 8 == 0,
        initialPresence: nil,
        iqTimeout: .seconds(5),
        maximumQueuedStanzas: 8,
        parserLimits: .init(maximumElementSize: 4096, maximumDepth: 8, maximumAttributes: 8, maximumElements: 64)
    )
    configuration.archiveCatchUp =
        flags & 16 == 0 ? nil : .init(pageSize: 2, maximumMessages: 4, maximumHeldMessages: 2)
    if flags & 32 != 0 {
        configuration.state.archivePosition = XMPPArchivePosition(id: "A0", timestamp: "2026-01-01T00:00:00Z")
    }
    if flags & 64 != 0 {
        configuration.carbons = true
        configuration.push = XMPPPushRegistration(
            service: JID("push.example")!,
            node: "n",
            publishOptions: ["secret": "s"]
        )
    }
    var machine = XMPPClientMachine(
        configuration: configuration,
        hashProvider: OpenSSLHashProvider(),
        randomSeed: UInt64(flags),
        makeNonce: { "fuzznonce" }
    )
    var now = Instant.zero
    var generation = TransportGeneration(0)
    // The transport the driver holds open: from the connect action to the close action.
    var live: TransportGeneration?
    var closed = true
    var sentText: [UInt8] = []
    var pendingIQs: Set<String> = []
    var endedIQs: Set<String> = []
    // New sessions and catch-ups seen; archive ids delivered since the last new session.
    var sessions = 0
    var catchUps = 0
    var archived: Set<String> = []

    func drain() {
        var count = 0
        while let action = machine.pollAction() {
            count += 1
            require(count < 10_000, "more than 10,000 actions for one input")
            switch action {
            case .request(.lookUpService):
                require(false, "a lookup although a TCP endpoint is configured")
            case .openTransport(let request, let next):
                if case .tcp = request.kind {
                } else {
                    require(false, "a WebSocket although a TCP endpoint is configured")
                }
                require(next > generation, "a connect action reused generation \(next)")
                generation = next
                live = next
                closed = false
            case .closeTransport(let on):
                if on == live { live = nil }
            case .send(let bytes, let on, _):
                require(!closed, "bytes sent after closed")
                require(on == live, "bytes sent on generation \(on), which is not open")
                sentText += bytes
                if sentText.count > 1 << 16 { sentText = Array(sentText.suffix(4096)) }
            case .event(.lifecycle(.closed)):
                closed = true
            case .event(.lifecycle(.connected)):
                sessions += 1
                archived = []
            case .event(.caughtUp):
                catchUps += 1
                require(catchUps <= sessions, "more catch-ups than new sessions")
            case .event(.message(let message)):
                if case .archive(let id, _) = message.origin {
                    require(archived.insert(id).inserted, "archive id \(id) delivered twice")
                }
            case .event(.iqResponse(let id, _)):
                require(!endedIQs.contains(id), "iq \(id) ended twice")
                if pendingIQs.remove(id) != nil { endedIQs.insert(id) }
            default: break
            }
        }
        // The driver runs due timers; after that none may be due.
        if let due = machine.pollTimeout(), due <= now {
            machine.handleTimeout(now: now)
            drain()
            if let next = machine.pollTimeout() {
                require(next > now, "a timer at or before the present after handling timers")
            }
        }
        require(
            machine.unacknowledgedCount <= configuration.maximumQueuedStanzas,
            "stream management queue over its limit"
        )
    }

    machine.start(now: now)
    drain()
    while !input.isAtEnd {
        let operation = input.byte()
        let target = operation & 0x80 == 0 ? generation : TransportGeneration(generation.value &- 1)
        switch operation % 16 {
        case 0: if machine.stateName == .disconnected { machine.start(now: now) }  // start's precondition
        case 1: machine.stop(now: now)
        case 2: machine.reconnectNow(now: now)
        case 3: machine.transportConnected(generation: target, now: now)
        case 4:
            let error = operation & 16 == 0 ? nil : TransportError(.connectionLost, "reset")
            machine.transportClosed(generation: target, error: error, now: now)
        case 5: machine.transportClosed(generation: target, error: TransportError(.tlsFailed, "handshake"), now: now)
        case 6: machine.tlsEstablished(generation: target, now: now)
        case 7, 8, 9:
            let text = menu[Int(operation >> 2) % menu.count]
            machine.transportReceived(Array(text.utf8), generation: target, now: now)
        case 10:
            // A reply to the last iq the client sent (bind, session, roster, ping, the app's).
            if let id = lastIQID(in: sentText) {
                let reply =
                    operation & 16 == 0
                    ? "<iq type='result' id='\(id)'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><jid>alice@example.com/phone</jid></bind></iq>"
                    : "<iq type='error' id='\(id)'><error type='cancel'><conflict xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></error></iq>"
                machine.transportReceived(Array(reply.utf8), generation: target, now: now)
            }
        case 11 where operation & 16 != 0:
            // The archive answers the last query: a result, or the end of a page.
            guard let queryID = lastAttribute("queryid", after: "<query xmlns='urn:xmpp:mam:2'", in: sentText),
                let iqID = lastIQID(in: sentText)
            else { break }
            let id = "B\(input.byte() % 4)"
            let text: String
            switch operation & 0x60 {
            case 0:
                text =
                    "<message><result xmlns='urn:xmpp:mam:2' queryid='\(queryID)' id='\(id)'><forwarded xmlns='urn:xmpp:forward:0'><message xmlns='jabber:client' from='bob@example.com/x' id='\(id)'><body>a</body></message></forwarded></result></message>"
            case 0x20:
                text =
                    "<iq type='result' id='\(iqID)'><fin xmlns='urn:xmpp:mam:2' complete='false'><set xmlns='http://jabber.org/protocol/rsm'><last>\(id)</last></set></fin></iq>"
            case 0x40:
                text = "<iq type='result' id='\(iqID)'><fin xmlns='urn:xmpp:mam:2' complete='true'/></iq>"
            default:
                text =
                    "<iq type='error' id='\(iqID)'><error type='cancel'><item-not-found xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></error></iq>"
            }
            machine.transportReceived(Array(text.utf8), generation: target, now: now)
        case 11:
            let raw = input.take(Int(input.byte() % 64))
            machine.transportReceived(raw, generation: target, now: now)
        case 12:
            _ = try? machine.send(XMPPMessage(to: JID("bob@example.com"), body: "m"), now: now)
        case 13:
            if let id = try? machine.send(XMPPIQ.get(XElement(XMLName("ping", namespace: "urn:xmpp:ping"))), now: now) {
                pendingIQs.insert(id)
            }
        case 14: machine.requestAcknowledgement(now: now)
        default:
            now = now + .milliseconds(Int64(input.number() % 20_000))
            machine.handleTimeout(now: now)
        }
        drain()
    }
    // Stopping ends whatever is still pending.
    machine.stop(now: now)
    drain()
    for _ in 0..<4 {
        now = now + .seconds(10)
        machine.handleTimeout(now: now)
        drain()
    }
    require(pendingIQs.isEmpty, "iqs never ended: \(pendingIQs.sorted())")
    return 0
}
