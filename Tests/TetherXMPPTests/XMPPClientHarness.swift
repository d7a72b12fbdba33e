import Foundation
import Testing
import TetherCore
import TetherSimulation
import TetherTLS
import TetherXML

@testable import TetherXMPP

typealias Machine = XMPPClientMachine

/// Drives an `XMPPClientMachine` against a scripted server on a virtual clock, recording a
/// transcript of action names: `connect`, `send:header`, `send:auth`, `send:iq`, `send:footer`,
/// `send:stream-error`, `starttls`, `close`, `event:connected`, ….
final class XMPPClientHarness {
    var machine: Machine
    var now = Instant.zero
    /// Names of every action taken, in order.
    var transcript: [String] = []
    /// Every event, in order.
    var events: [Machine.Event] = []
    /// Every send action's text, in order (with the generation it went to).
    var sent: [(text: String, generation: TransportGeneration)] = []
    /// Whether a send carried credentials, per send.
    var sentWithCredentials: [Bool] = []
    /// The generation of the last connect action, and the endpoints connected to.
    var generation: TransportGeneration?
    var endpoints: [Endpoint] = []
    var webSocketURLs: [ServerURL] = []
    /// The direct-TLS server name of each connect action.
    var directTLSNames: [String?] = []
    /// Generations the machine asked to close.
    var closed: [TransportGeneration] = []
    /// The last startTLS action's buffered bytes.
    var tlsBuffered: [UInt8]?
    /// A SCRAM server for the harness's SCRAM logins.
    var scramServer = ScriptedSCRAMServer()

    static let domain = "example.com"
    static let jid = JID("alice@example.com")!
    static let serverHeader =
        "<?xml version='1.0'?><stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' id='s1' from='example.com' version='1.0' xml:lang='en'>"
    static func mechanisms(_ names: [String]) -> String {
        "<stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>"
            + names.map { "<mechanism>\($0)</mechanism>" }.joined() + "</mechanisms></stream:features>"
    }
    static let boundFeatures =
        "<stream:features><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><required/></bind><session xmlns='urn:ietf:params:xml:ns:xmpp-session'><optional/></session><sm xmlns='urn:xmpp:sm:3'><optional/></sm></stream:features>"

    init(_ configure: (inout Machine.Configuration) -> Void = { _ in }) {
        var configuration = Machine.Configuration(
            jid: Self.jid,
            password: "secret-password",
            serviceLookup: false,  // the table's rows with a lookup turn it on
            tls: .disabled,
            allowPlainOnCleartext: true,
            reconnectPolicy: .fixed(.seconds(1)),
            fetchRosterOnConnect: false,
            initialPresence: nil
        )
        configuration.archiveCatchUp = nil  // the catch-up's own tests turn it on
        configure(&configuration)
        machine = Machine(
            configuration: configuration,
            hashProvider: OpenSSLHashProvider(),
            randomSeed: 1,
            makeNonce: { "clientnonce" }
        )
    }

    var state: Machine.StateName { machine.stateName }
    var jid: JID? { machine.jid }
    var timeout: Instant? { machine.pollTimeout() }
    var unacknowledged: Int { machine.unacknowledgedCount }
    var smEnabled: Bool { machine.isStreamManagementEnabled }
    var parserReleased: Bool { machine.parser.buffersReleased }

    // MARK: - Driving

    /// Collects the machine's pending actions; returns their names.
    @discardableResult
    func drain() -> [String] {
        var names: [String] = []
        while let action = machine.pollAction() {
            switch action {
            case .openTransport(let request, let generation):
                self.generation = generation
                switch request.kind {
                case .tcp(let endpoint, let directTLSName):
                    endpoints.append(endpoint)
                    directTLSNames.append(directTLSName)
                case .webSocket(let url, let subprotocol):
                    #expect(subprotocol == "xmpp")
                    webSocketURLs.append(url)
                case .serverSentEvents, .longPolling:
                    Issue.record("an HTTP transport: \(request)")
                }
                names.append("open")
            case .send(let bytes, let generation, let containsCredentials):
                let text = String(decoding: bytes, as: UTF8.self)
                sent.append((text, generation))
                sentWithCredentials.append(containsCredentials)
                names.append("send:" + Self.sendName(text))
            case .request(.startTLS(_, _, let buffered)):
                tlsBuffered = buffered
                names.append("starttls")
            case .request(.lookUpService(_, let generation)):
                self.generation = generation
                names.append("lookup")
            case .closeTransport(let generation):
                closed.append(generation)
                names.append("close")
            case .event(let event):
                events.append(event)
                names.append("event:" + Self.eventName(event))
            }
        }
        transcript += names
        return names
    }

    static func sendName(_ text: String) -> String {
        if text.hasPrefix("<?xml") { return "header" }
        if text == "</stream:stream>" { return "footer" }
        if text.hasPrefix("<stream:error") { return "stream-error" }
        if text.hasPrefix("<open xmlns='urn:ietf:params:xml:ns:xmpp-framing'") { return "open-frame" }
        if text.hasPrefix("<close xmlns='urn:ietf:params:xml:ns:xmpp-framing'") { return "close-frame" }
        let name = text.dropFirst().prefix { $0 != " " && $0 != ">" && $0 != "/" }
        return String(name)
    }

    static func eventName(_ event: Machine.Event) -> String {
        switch event {
        case .lifecycle(let change): lifecycleName(change)
        case .resumeFailed: "resumefailed"
        case .authenticated: "authenticated"
        case .fastToken: "fasttoken"
        case .fastTokenRefused: "fasttokenrefused"
        case .stateChanged: "state"
        case .caughtUp: "caughtup"
        case .pushEnabled: "pushenabled"
        case .pushDisabled: "pushdisabled"
        case .pushRefused: "pushrefused"
        case .streamManagementEnabled: "smenabled"
        case .message: "message"
        case .presence: "presence"
        case .subscriptionRequest: "subscription"
        case .iqRequest: "iqrequest"
        case .iqResponse: "iqresponse"
        case .roster: "roster"
        case .rosterPush: "rosterpush"
        case .unacknowledgedStanzas: "unacknowledged"
        }
    }

    func start() {
        machine.start(now: now)
        drain()
    }

    /// The lifecycle events, in order.
    var lifecycle: [Machine.Lifecycle] { events.compactMap(\.lifecycle) }

    func connected() {
        machine.transportConnected(generation: generation!, now: now)
        drain()
    }

    /// The server sends `text` on the current transport.
    func server(_ text: String) {
        machine.transportReceived(Array(text.utf8), generation: generation!, now: now)
        drain()
    }

    func transportClosed(_ error: TransportError? = TransportError(.connectionLost, "reset")) {
        machine.transportClosed(generation: generation!, error: error, now: now)
        drain()
    }

    /// The transport closed with `reason` (a lost connection), or in order (nil).
    func transportClosed(_ reason: String?) {
        transportClosed(reason.map { TransportError(.connectionLost, $0) })
    }

    /// Moves the clock forward by `duration`, firing every timer due on the way at its deadline.
    func advance(by duration: Duration) {
        let end = now + duration
        while let deadline = machine.pollTimeout(), deadline <= end {
            now = max(now, deadline)
            machine.handleTimeout(now: now)
            drain()
        }
        now = end
    }

    /// The last text sent.
    var lastSent: String { sent.last?.text ?? "" }

    /// The id attribute of the last sent element.
    var lastSentID: String {
        guard let range = lastSent.range(of: "id='") else { return "" }
        return String(lastSent[range.upperBound...].prefix { $0 != "'" })
    }

    // MARK: - Scripted negotiation

    /// Starts, connects, and sends the server's header with `features`.
    func open(_ features: String) {
        start()
        connected()
        server(Self.serverHeader + features)
    }

    /// Opens with PLAIN offered, succeeds, and sends the restarted stream's header with
    /// `features`.
    func authenticate(_ features: String) {
        open(Self.mechanisms(["PLAIN"]))
        server("<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>")
        server(Self.serverHeader + features)
    }

    /// Connects and authenticates with PLAIN, then answers bind (and SM enable when the
    /// features offer it); ends online.
    func login(features: String = boundFeatures, enableSM: Bool = true, resumable: Bool = true) {
        if generation == nil || machine.stateName == .disconnected { start() }
        connected()
        server(Self.serverHeader + Self.mechanisms(["PLAIN"]))
        server("<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>")
        server(Self.serverHeader + features)
        let bindID = lastSentID
        server(
            "<iq type='result' id='\(bindID)'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><jid>alice@example.com/phone</jid></bind></iq>"
        )
        if enableSM && features.contains("urn:xmpp:sm:3") {
            server("<enabled xmlns='urn:xmpp:sm:3' id='sm-1' resume='\(resumable)' max='600'/>")
        }
    }

    /// After a loss: reconnect (the timer), authenticate, and answer `<resume/>`.
    func resume(h: Int) {
        connected()
        server(Self.serverHeader + Self.mechanisms(["PLAIN"]))
        server("<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>")
        server(Self.serverHeader + Self.boundFeatures)
        server("<resumed xmlns='urn:xmpp:sm:3' previd='sm-1' h='\(h)'/>")
    }
}

/// The server side of SCRAM-SHA-1/256 for the harness: a fixed salt and server nonce, the real
/// computation (through OpenSSL) for the proof check and the signature.
struct ScriptedSCRAMServer {
    var algorithm = SCRAMHashAlgorithm.sha1
    var password = "secret-password"
    var salt = Array("saltsaltsalt".utf8)
    var iterations = 4096
    var clientFirstBare = ""
    var serverFirst = ""
    /// The client's GS2 header (`n,,`, `y,,`, `p=TYPE,,`).
    var gs2Header = ""
    /// The channel-binding data of the server's side of the connection (for `p=`).
    var bindingData: [UInt8] = []

    /// The server-first-message for the base64 client-first-message of an `<auth>`.
    mutating func challenge(forAuth base64: String) -> String {
        let clientFirst = String(decoding: Base64.decode(base64)!, as: UTF8.self)
        let parts = clientFirst.split(separator: ",", maxSplits: 2, omittingEmptySubsequences: false)
        gs2Header = parts[0] + "," + parts[1] + ","
        clientFirstBare = String(parts[2])
        let nonce = clientFirstBare.components(separatedBy: ",r=")[1]
        serverFirst = "r=\(nonce)SERVERNONCE,s=\(Base64.encode(salt)),i=\(iterations)"
        return Base64.encode(Array(serverFirst.utf8))
    }

    /// The expected client-final-message and the server-final-message (`v=…`).
    func final(signatureTampered: Bool = false) -> (clientFinal: String, serverFinal: String) {
        let provider = OpenSSLHashProvider()
        let salted = provider.pbkdf2(algorithm, password: Array(password.utf8), salt: salt, iterations: iterations)
        let clientKey = provider.hmac(algorithm, key: salted, data: Array("Client Key".utf8))
        let storedKey = provider.hash(algorithm, clientKey)
        let serverKey = provider.hmac(algorithm, key: salted, data: Array("Server Key".utf8))
        let nonce = serverFirst.components(separatedBy: ",")[0].dropFirst(2)
        let cbind = Array(gs2Header.utf8) + (gs2Header.hasPrefix("p=") ? bindingData : [])
        let withoutProof = "c=\(Base64.encode(cbind)),r=\(nonce)"
        let authMessage = Array("\(clientFirstBare),\(serverFirst),\(withoutProof)".utf8)
        let signature = provider.hmac(algorithm, key: storedKey, data: authMessage)
        let proof = zip(clientKey, signature).map { $0 ^ $1 }
        var serverSignature = provider.hmac(algorithm, key: serverKey, data: authMessage)
        if signatureTampered { serverSignature[0] ^= 1 }
        return (withoutProof + ",p=" + Base64.encode(proof), "v=" + Base64.encode(serverSignature))
    }
}

/// The base64 text inside the last `<auth>`/`<response>` sent.
func saslPayload(_ text: String) -> String {
    guard let start = text.firstIndex(of: ">"), let end = text.range(of: "</", options: .backwards) else { return "" }
    return String(text[text.index(after: start)..<end.lowerBound])
}

/// The error of the last event when it is `closed(error)`; records an issue otherwise.
func closedError(_ events: [Machine.Event], sourceLocation: SourceLocation = #_sourceLocation) throws -> XMPPClientError
{
    let error: XMPPClientError? = if case .lifecycle(.closed(let error?)) = events.last { error } else { nil }
    return try #require(
        error,
        "the last event is not closed(error): \(String(describing: events.last))",
        sourceLocation: sourceLocation
    )
}

/// A `reconnecting` event's attempt and delay (its last error aside).
struct ReconnectStep: Equatable {
    var attempt: Int
    var delay: Duration
}

extension Machine.Event {
    /// The delay of a `reconnecting` event.
    var reconnectDelay: Duration? {
        if case .lifecycle(.reconnecting(_, let delay, _)) = self { delay } else { nil }
    }

    /// The attempt and delay of a `reconnecting` event.
    var reconnect: ReconnectStep? {
        if case .lifecycle(.reconnecting(let attempt, let delay, _)) = self {
            ReconnectStep(attempt: attempt, delay: delay)
        } else {
            nil
        }
    }
}

/// Records an issue (returns Void, for `guard … else { return fail("…") }`).
func fail(_ comment: Comment, sourceLocation: SourceLocation = #_sourceLocation) {
    Issue.record(comment, sourceLocation: sourceLocation)
}
