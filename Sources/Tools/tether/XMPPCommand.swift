import Dispatch
import Foundation
@_spi(TetherInternal) import TetherCore
import TetherDispatch
import TetherJSON
import TetherXML
import TetherXMPP
import TetherXMPPClient

/// `tether xmpp`: connects with `XMPPClient` and sends, listens, pings or prints the roster,
/// reporting lifecycle events and messages as JSON lines on standard output.
///
/// Exit status: 0 on success; 1 on any error (printed to standard error); 2 for a usage error or
/// an authentication failure (at once, whatever the reconnect policy).
struct XMPPCommand: ConnectionCommand, Sendable, Equatable {
    static let usage = """
        usage: tether xmpp --jid JID [--password-env VAR] [--host H] [--port P] [--nameserver HOST:PORT]...
                           [--tls disabled|optional|required|direct] [--websocket URL]
                           [--ca-file F] [--pin SHA256_BASE64]...
                           [--resource R] [--allow-plain] [--channel-binding when-possible|required|disabled] [--no-sasl2]
                           [--state-file PATH] [--carbons] [--push-service JID --push-node NODE]
                           [--ping-interval S] [--ping-timeout S] [--max-missed-pings N]
                           [--reconnect none|default|tiered] [--no-stream-management] [--network-watch]
                           [--health S] [--verbose] COMMAND

        Connects to the XMPP server of JID (found through its DNS SRV records, RFC 6120 and
        XEP-0368; --host H and --port P name it instead, default port 5222; --websocket URL
        speaks XMPP over WebSocket, RFC 7395, to a ws:// or wss:// URL instead, TLS from its
        scheme, and replaces --host, --port and --tls) and runs COMMAND:
          send TO TEXT [--count N]     send N chat messages (bodies "TEXT 1" … "TEXT N" when N > 1),
                                       wait until the server acknowledged or received them, close
          listen [--count N] [--seconds S]
                                       print received messages; stop after N messages or S seconds
          ping [JID]                   ping JID (default: the server) and print the round trip
          roster                       print the roster

        The password comes from the environment variable VAR (default TETHER_PASSWORD), never
        from the command line. --verbose logs the XML traffic to standard error, SASL credentials
        hidden. SCRAM logins are bound to the TLS connection (SCRAM-*-PLUS: tls-exporter on TLS
        1.3, tls-unique on 1.2, tls-server-end-point where that is what the server has) whenever the
        server offers it; --channel-binding required refuses to log in otherwise (status 1),
        disabled never binds. TLS: required (STARTTLS, refused when not offered; the
        default), optional (STARTTLS when offered), direct (TLS from the first byte, port 5223),
        disabled; the certificate must be valid for the JID's domain, against the system's CAs
        and F (--ca-file, a PEM file); with --pin, one certificate of the chain must also have
        one of the pinned public keys (base64 SHA-256 of its SubjectPublicKeyInfo; a mismatch
        ends the command with status 1, without retrying). Defaults: ping every 60 s with a 10 s timeout, 2 missed
        pings end the stream, --reconnect default (about 5×3 s, 5×9 s, 5×15 s, each spread ±50 %,
        over again while the server stays away; tiered: the same once, then stop), stream
        management on.

        --network-watch feeds the device's network (the Linux monitor, rtnetlink) to the client:
        no reconnect attempts while there is none, one at once when it is back, a ping probing
        the link when it changes; each change prints {"event":"network","available":BOOL,
        "interfaces":[…]} (as `tether network`).
        \(HealthLine.help)

        \(LifecycleLine.help) SESSION is "jid":JID,"mechanism":M,"channel_binding":T,"sasl2":BOOL,"fast":BOOL
        (the SASL mechanism the stream logged in with, e.g. "SCRAM-SHA-256-PLUS", the
        channel-binding type of a -PLUS mechanism, e.g. "tls-exporter", or null, and whether the
        login was XEP-0388 SASL2, which also binds and resumes inside the login, and whether it used
        a FAST token; --no-sasl2 logs in the RFC 6120 way even where SASL2 is offered). A FAST token
        the server gives prints {"event":"fast-token","mechanism":…,"expiry":…} (never the secret);
        a refused one {"event":"fast-token-refused","condition":…}.

        --state-file PATH keeps what the next run needs in PATH (JSON, created with mode 0600,
        never printed): the FAST token, this installation's SASL2 user-agent id, the position in
        the account's message archive (XEP-0313). A run with the file logs in with the token and,
        at a new session, catches up from the archive: those messages print with "archived":true,
        then {"event":"caught-up","count":N,"complete":BOOL}. --carbons asks for copies of what the
        account's other clients send and receive (XEP-0280; "carbon":"sent" or "received").
        --push-service JID --push-node NODE registers for push notifications (XEP-0357) through
        that app server at every new session: {"event":"push-enabled",…} or
        {"event":"push-refused","condition":…}.
        Beside them: {"event":"stream-management","resumable":BOOL} (XEP-0198 enabled: with
        resumable true, a drop can be resumed), {"event":"resume-failed"},
        {"event":"message","from":…,"id":…,"body":…} (with "archived":true or "carbon":… as above),
        {"event":"pong","rtt_ms":…} (an error reply is an answer too),
        {"event":"roster","items":[{"jid":…,"name":…,"subscription":…},…]}.
        Exit status: 0 done; 1 an error (on standard error), for example no connection; 2 wrong
        credentials (at once, whatever the reconnect policy) or a usage error.

        Example:
          TETHER_PASSWORD=alicepass tether xmpp --jid alice@localhost --host 127.0.0.1 --ca-file ca.pem ping
          {"event":"connected","jid":"alice@localhost/hBjXi7P1i0ma","mechanism":"SCRAM-SHA-256-PLUS","channel_binding":"tls-exporter","sasl2":false,"fast":false}
          {"event":"pong","rtt_ms":1.581888}
          {"event":"closed","reason":null}
        """

    enum Action: Equatable, Sendable {
        case send(to: JID, text: String, count: Int)
        case listen(count: Int?, seconds: Double?)
        case ping(JID?)
        case roster
    }

    typealias Parsed = ParsedCommand<XMPPCommand>

    var jid: JID
    var passwordVariable = "TETHER_PASSWORD"
    var host: String?
    /// `--nameserver`: replaces the system's nameservers for the lookups.
    var nameServers: [Endpoint] = []
    var port: Int?
    /// `--websocket`: XMPP over WebSocket to this URL.
    var webSocket: ServerURL?
    var tls = XMPPClientMachine.TLSPolicy.required
    var resource: String?
    var allowPlain = false
    /// `--channel-binding`: whether SCRAM logins are bound to the TLS connection.
    var channelBinding = ChannelBindingPolicy.whenPossible
    /// `--no-sasl2`: RFC 6120 SASL even where SASL2 is offered.
    var sasl2 = true
    /// `--state-file`: where the state the next run needs is kept.
    var stateFile: String?
    /// `--carbons`: ask for carbon copies (XEP-0280).
    var carbons = false
    /// `--push-service` and `--push-node`: the push registration (XEP-0357).
    var pushService: JID?
    var pushNode: String?
    var pingInterval: Double = 60
    var pingTimeout: Double = 10
    var maximumMissedPings = 2
    var streamManagement = true
    /// The options both connection commands take.
    var shared = ConnectionArguments()
    var action: Action

    // MARK: - Parsing

    static func parse(_ arguments: [String]) -> Parsed {
        var jid: JID?
        var explicitTLS = false
        return parse(
            arguments,
            into: XMPPCommand(jid: JID("x@example.com")!, action: .roster),
            own: { options, argument, value in
                switch argument {
                case "--jid":
                    guard let text = value(), let parsed = JID(text), parsed.localpart != nil else {
                        return .usageError("--jid needs a JID of the form user@domain[/resource]")
                    }
                    jid = parsed
                case "--password-env":
                    guard let name = nonEmpty(value()) else { return .usageError("--password-env needs a name") }
                    options.passwordVariable = name
                case "--nameserver":
                    guard let text = value(), let server = Endpoint(parsing: text, defaultPort: 53) else {
                        return .usageError("--nameserver needs HOST:PORT (an IP address)")
                    }
                    options.nameServers.append(server)
                case "--host":
                    guard let host = nonEmpty(value()) else { return .usageError("--host needs a host") }
                    options.host = host
                case "--port":
                    guard let text = value(), let port = Int(text), (1...65535).contains(port) else {
                        return .usageError("--port needs a port number")
                    }
                    options.port = port
                case "--tls":
                    guard let text = value(), let tls = XMPPClientMachine.TLSPolicy(rawValue: text) else {
                        return .usageError("--tls takes disabled, optional, required or direct")
                    }
                    options.tls = tls
                    explicitTLS = true
                case "--websocket":
                    guard let text = value(), let url = ServerURL(text), url.isWebSocket else {
                        return .usageError("--websocket needs a ws:// or wss:// URL")
                    }
                    options.webSocket = url
                case "--resource":
                    guard let resource = nonEmpty(value()) else { return .usageError("--resource needs a name") }
                    options.resource = resource
                case "--allow-plain":
                    options.allowPlain = true
                case "--no-sasl2":
                    options.sasl2 = false
                case "--state-file":
                    guard let path = nonEmpty(value()) else { return .usageError("--state-file needs a path") }
                    options.stateFile = path
                case "--carbons":
                    options.carbons = true
                case "--push-service":
                    guard let text = value(), let service = JID(text) else {
                        return .usageError("--push-service needs the app server's JID")
                    }
                    options.pushService = service
                case "--push-node":
                    guard let node = nonEmpty(value()) else { return .usageError("--push-node needs a node") }
                    options.pushNode = node
                case "--channel-binding":
                    let names: [String: ChannelBindingPolicy] = [
                        "when-possible": .whenPossible, "required": .required, "disabled": .disabled,
                    ]
                    guard let policy = value().flatMap({ names[$0] }) else {
                        return .usageError("--channel-binding takes when-possible, required or disabled")
                    }
                    options.channelBinding = policy
                case "--ping-interval", "--ping-timeout":
                    guard let text = value(), let seconds = Double(text), seconds > 0, seconds < 1e6 else {
                        return .usageError("\(argument) needs a positive number of seconds")
                    }
                    if argument == "--ping-interval" {
                        options.pingInterval = seconds
                    } else {
                        options.pingTimeout = seconds
                    }
                case "--max-missed-pings":
                    guard let text = value(), let count = Int(text), count >= 1 else {
                        return .usageError("--max-missed-pings needs a count of at least 1")
                    }
                    options.maximumMissedPings = count
                case "--no-stream-management":
                    options.streamManagement = false
                default:
                    return .notTaken
                }
                return .taken
            },
            check: { options in
                guard let jid else { return "--jid is required" }
                if options.webSocket != nil, options.host != nil || options.port != nil || explicitTLS {
                    return "--websocket replaces --host, --port and --tls (TLS comes from the URL's scheme)"
                }
                if (options.pushService == nil) != (options.pushNode == nil) {
                    return "--push-service and --push-node go together"
                }
                options.jid = jid
                return nil
            }
        )
    }

    typealias UsageError = CommandWords.UsageError

    /// The action `command` names, with its words.
    static func action(_ command: String, _ words: CommandWords) -> Result<Action, UsageError> {
        let (arguments, count, seconds) = (words.arguments, words.count, words.seconds)
        switch command {
        case "send":
            guard arguments.count == 2, let to = JID(arguments[0]), seconds == nil else {
                return .failure(UsageError(description: "usage: send TO TEXT [--count N]"))
            }
            return .success(.send(to: to, text: arguments[1], count: count ?? 1))
        case "listen":
            guard arguments.isEmpty else {
                return .failure(UsageError(description: "usage: listen [--count N] [--seconds S]"))
            }
            return .success(.listen(count: count, seconds: seconds))
        case "ping":
            guard arguments.count <= 1, count == nil, seconds == nil else {
                return .failure(UsageError(description: "usage: ping [JID]"))
            }
            guard let text = arguments.first else { return .success(.ping(nil)) }
            guard let target = JID(text) else {
                return .failure(UsageError(description: "ping: '\(text)' is not a JID"))
            }
            return .success(.ping(target))
        case "roster":
            guard arguments.isEmpty, count == nil, seconds == nil else {
                return .failure(UsageError(description: "usage: roster"))
            }
            return .success(.roster)
        default:
            return .failure(UsageError(description: "unknown command '\(command)'"))
        }
    }

    // MARK: - Running

    /// The client configuration for these options.
    func configuration(password: Secret, state: XMPPClientState = XMPPClientState()) -> XMPPClient.Configuration {
        var configuration = XMPPClient.Configuration(jid: jid, password: password, state: state)
        configuration.carbons = carbons
        if let pushService, let pushNode {
            configuration.push = XMPPPushRegistration(service: pushService, node: pushNode)
        }
        if host != nil || port != nil {
            configuration.endpoint = Endpoint(
                host: host ?? jid.domainpart,
                port: port ?? (tls == .direct ? 5223 : 5222)
            )
        }
        configuration.tls = tls
        configuration.webSocket = webSocket
        configuration.resource = resource
        configuration.allowPlainOnCleartext = allowPlain
        configuration.channelBinding = channelBinding
        configuration.sasl2 = sasl2
        configuration.autoPing = .init(
            interval: .milliseconds(Int64(pingInterval * 1000)),
            timeout: .milliseconds(Int64(pingTimeout * 1000)),
            maximumMissed: maximumMissedPings
        )
        switch reconnect {
        case .none: configuration.reconnectPolicy = nil
        case .tiered: configuration.reconnectPolicy = .tiered(repeats: false)
        case .default: configuration.reconnectPolicy = XMPPClient.Configuration.defaultReconnectPolicy
        }
        if !streamManagement { configuration.streamManagement = nil }
        configuration.fetchRosterOnConnect = false
        return configuration
    }

    /// Runs the command; `output` and `errorOutput` take whole lines (called from any thread,
    /// one at a time).
    func run(
        environment: [String: String],
        output: @escaping @Sendable (String) -> Void,
        errorOutput: @escaping @Sendable (String) -> Void
    ) async -> Int32 {
        guard let password = environment[passwordVariable] else {
            errorOutput("tether: the environment variable \(passwordVariable) (the password) is not set")
            return 2
        }
        var options = XMPPClient.Options(caFile: caFile)
        options.trust.pinnedPublicKeys = pins
        if !nameServers.isEmpty { options.nameServers = nameServers }
        if verbose {
            // The traffic at `trace`, SASL credentials hidden, and the connection's steps.
            options.logLevel = .trace
            options.logHandler = { level, text in errorOutput("tether: \(level): \(text)") }
        }
        var state = XMPPClientState()
        if let stateFile {
            switch StateFile.read(stateFile) {
            case .success(let saved): state = saved ?? state
            case .failure(let problem):
                errorOutput("tether: \(problem)")
                return 1
            }
        }
        let client: XMPPClient
        do throws(XMPPClientError) {
            client = try XMPPClient(
                configuration: configuration(password: Secret(password), state: state),
                options: options
            )
        } catch {
            errorOutput("tether: \(error.message)")
            return 2
        }
        let listener = Listener(
            output: output,
            errorOutput: errorOutput,
            printsMessages: { if case .listen = action { true } else { false } }(),
            stateFile: stateFile
        )
        client.setEventHandler(queue: listener.queue) { event in listener.handle(event) }
        guard let watchers = ClientWatchers(shared, watching: client, output: output, errorOutput: errorOutput) else {
            return 1
        }
        defer { watchers.stop() }
        do throws(XMPPClientError) {
            try await client.connect()
            switch action {
            case .send(let to, let text, let count):
                for n in 1...count {
                    try await client.send(XMPPMessage(to: to, body: count > 1 ? "\(text) \(n)" : text))
                }
                try await client.flush()
            case .listen(let count, let seconds):
                if let error = await listener.waitForReceived(count: count, seconds: seconds) { throw error }
            case .ping(let target):
                let rtt = try await client.ping(target)
                var line = Array(#"{"event":"pong","rtt_ms":"#.utf8)
                JSONText.appendDouble(Double(rtt.totalNanoseconds) / 1e6, to: &line)
                line.append(UInt8(ascii: "}"))
                output(String(decoding: line, as: UTF8.self))
            case .roster:
                output(Self.rosterLine(try await client.fetchRoster()))
            }
        } catch {
            errorOutput("tether: \(error.message)")
            await client.disconnect()
            listener.flush()
            return error.kind == .authenticationFailed ? 2 : 1
        }
        await client.disconnect()
        listener.flush()
        return 0
    }

    static func rosterLine(_ roster: RosterQuery) -> String {
        var line = Array(#"{"event":"roster","items":["#.utf8)
        for (index, item) in roster.items.enumerated() {
            if index > 0 { line.append(UInt8(ascii: ",")) }
            line += #"{"jid":"#.utf8
            JSONText.appendString(item.jid.description, to: &line)
            line += #","name":"#.utf8
            appendOptional(item.name, to: &line)
            line += #","subscription":"#.utf8
            JSONText.appendString(item.subscription.rawValue, to: &line)
            line.append(UInt8(ascii: "}"))
        }
        line += "]}".utf8
        return String(decoding: line, as: UTF8.self)
    }

    static func appendOptional(_ text: String?, to line: inout [UInt8]) {
        LifecycleLine.appendOptional(text, to: &line)
    }
}

/// Prints the client's events as JSON lines (on its own queue) and counts messages.
final class Listener: EventPrinter<XMPPClientError>, @unchecked Sendable {
    private let printsMessages: Bool
    private let stateFile: String?
    private let errorOutput: @Sendable (String) -> Void

    init(
        output: @escaping @Sendable (String) -> Void,
        errorOutput: @escaping @Sendable (String) -> Void,
        printsMessages: Bool,
        stateFile: String?
    ) {
        self.printsMessages = printsMessages
        self.stateFile = stateFile
        self.errorOutput = errorOutput
        super.init(label: "tether.cli-events", output: output)
    }

    /// How the latest stream logged in (the `authenticated` event before `connected`).
    private var authentication: XMPPAuthentication?

    func handle(_ event: XMPPClient.Event) {
        var line: [UInt8] = []
        switch event {
        case .lifecycle(let change):
            let authentication = authentication
            return printLifecycle(change) { jid, line in
                line += #""jid":"#.utf8
                JSONText.appendString(jid.description, to: &line)
                guard let authentication else { return }
                line += #","mechanism":"#.utf8
                JSONText.appendString(authentication.mechanism, to: &line)
                line += #","channel_binding":"#.utf8
                XMPPCommand.appendOptional(authentication.channelBinding?.rawValue, to: &line)
                line += #","sasl2":\#(authentication.sasl2),"fast":\#(authentication.fast)"#.utf8
            }
        case .authenticated(let login):
            authentication = login
            return
        case .fastToken(let token):
            // The secret is never printed.
            line = Array(#"{"event":"fast-token","mechanism":"#.utf8)
            JSONText.appendString(token.mechanism, to: &line)
            line += #","expiry":"#.utf8
            JSONText.appendString(token.expiry, to: &line)
            line.append(UInt8(ascii: "}"))
        case .fastTokenRefused(let condition):
            line = Array(#"{"event":"fast-token-refused","condition":"#.utf8)
            JSONText.appendString(condition, to: &line)
            line.append(UInt8(ascii: "}"))
        case .resumeFailed:
            line = Array(#"{"event":"resume-failed"}"#.utf8)
        case .message(let message):
            guard printsMessages, message.body != nil else { return }
            countReceived()
            line = Array(#"{"event":"message","from":"#.utf8)
            XMPPCommand.appendOptional(message.from?.description, to: &line)
            line += #","id":"#.utf8
            XMPPCommand.appendOptional(message.id, to: &line)
            line += #","body":"#.utf8
            XMPPCommand.appendOptional(message.body, to: &line)
            switch message.origin {
            case .live: break
            case .archive: line += #","archived":true"#.utf8
            case .carbon(let sent): line += (sent ? #","carbon":"sent""# : #","carbon":"received""#).utf8
            }
            line.append(UInt8(ascii: "}"))
        case .stateChanged(let state):
            // Written, never printed: it holds the FAST token.
            if let stateFile, let problem = StateFile.save(state, to: stateFile) { errorOutput("tether: \(problem)") }
            return
        case .caughtUp(let count, let complete):
            line = Array(#"{"event":"caught-up","count":\#(count),"complete":\#(complete)}"#.utf8)
        case .pushEnabled(let registration), .pushDisabled(let registration):
            let enabled = if case .pushEnabled = event { true } else { false }
            line = Array(
                (enabled ? #"{"event":"push-enabled","service":"# : #"{"event":"push-disabled","service":"#).utf8
            )
            JSONText.appendString(registration.service.description, to: &line)
            line += #","node":"#.utf8
            JSONText.appendString(registration.node, to: &line)
            line.append(UInt8(ascii: "}"))
        case .pushRefused(let error):
            line = Array(#"{"event":"push-refused","condition":"#.utf8)
            JSONText.appendString(error.condition.rawValue, to: &line)
            line.append(UInt8(ascii: "}"))
        case .streamManagementEnabled(let resumable):
            line = Array(#"{"event":"stream-management","resumable":\#(resumable)}"#.utf8)
        case .presence, .subscriptionRequest, .iqRequest, .iqResponse, .roster,
            .rosterPush, .unacknowledgedStanzas:
            return
        }
        output(String(decoding: line, as: UTF8.self))
    }
}

/// `--state-file`: the client's state as JSON in a file only its owner can read.
enum StateFile {
    /// The saved state; nil when the file does not exist yet.
    static func read(_ path: String) -> Result<XMPPClientState?, StateFileProblem> {
        guard FileManager.default.fileExists(atPath: path) else { return .success(nil) }
        guard let data = FileManager.default.contents(atPath: path) else {
            return .failure(StateFileProblem(description: "cannot read the state file \(path)"))
        }
        do {
            return .success(try JSONDecoder().decode(XMPPClientState.self, from: data))
        } catch {
            return .failure(StateFileProblem(description: "the state file \(path) is not a saved state"))
        }
    }

    /// Writes `state` to `path` through a new file of mode 0600 renamed over it (a reader never
    /// sees half a file, and the file is never readable by others, even for a moment); the
    /// problem, if any.
    static func save(_ state: XMPPClientState, to path: String) -> StateFileProblem? {
        guard let data = try? JSONEncoder().encode(state) else {
            return StateFileProblem(description: "cannot encode the state")
        }
        let temporary = path + ".tmp"
        unlink(temporary)
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return StateFileProblem(description: "cannot create \(temporary)") }
        let written = data.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        let synced = fsync(descriptor) == 0
        close(descriptor)
        guard written == data.count, synced, rename(temporary, path) == 0 else {
            unlink(temporary)
            return StateFileProblem(description: "cannot write the state file \(path)")
        }
        return nil
    }
}

/// Why the state file could not be used.
struct StateFileProblem: Error, CustomStringConvertible {
    let description: String
}
