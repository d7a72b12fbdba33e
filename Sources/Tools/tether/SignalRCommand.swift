import Dispatch
import Foundation
import TetherCore
import TetherDispatch
import TetherJSON
import TetherSignalR
import TetherSignalRClient

/// `tether signalr`: connects with `HubConnection` and invokes, streams or listens, printing
/// results, items, calls and lifecycle events as JSON lines on standard output.
///
/// Exit status: 0 on success; 1 when the connection cannot be made or is lost for good, or on a
/// hub error (printed as `{"error":…}`); 2 for a usage error.
struct SignalRCommand: ConnectionCommand, Sendable, Equatable {
    static let usage = """
        usage: tether signalr --url URL [--protocol json|messagepack] [--transport LIST] [--stateful]
                              [--header NAME:VALUE]... [--access-token-env VAR | --access-token-command CMD]
                              [--reconnect none|default|tiered] [--ca-file F] [--pin SHA256_BASE64]...
                              [--network-watch] [--health S] [--verbose] COMMAND

        Connects to the SignalR hub at URL (http, https, ws or wss) and runs COMMAND:
          invoke METHOD [JSON_ARRAY_OF_ARGS] [--count N]
                                  invoke N times in sequence; print {"result":…} per completion,
                                  or {"error":…} on a hub error (exit status 1)
          stream METHOD [JSON_ARRAY_OF_ARGS]
                                  print {"item":…} per item, then {"completed":true}
          listen TARGET... [--count N] [--seconds S]
                                  print {"target":…,"arguments":[…]} per server call of a TARGET;
                                  stop after N calls or S seconds

        --network-watch feeds the device's network (the Linux monitor, rtnetlink) to the
        connection: no reconnect attempts while there is none, one at once when it is back, a
        probe (or with --stateful a reopen) when it changes; each change prints
        {"event":"network","available":BOOL,"interfaces":[…]} (as `tether network`).
        \(HealthLine.help)

        \(LifecycleLine.help) SESSION is "transport":T,"connection_id":ID (null when negotiation is
        skipped); T is "websockets", "sse" or "long-polling". --transport LIST: the transports allowed, a
        comma-separated subset of websockets,sse,long-polling in fallback order (default: all
        three; Server-Sent Events carry text only, so not with --protocol messagepack).
        --access-token-command CMD runs CMD (through sh -c) before every connection attempt and
        again when the hub answers 401; its standard output, trimmed, is the token. The access token comes from the environment
        variable VAR, never from the command line, and is never printed. --reconnect: none, default
        (about 0, 2, 10, 30 s, each spread ±50 %, the first within 1 s: the default) or tiered (about 5×3 s, 5×9 s, 5×15 s, spread the same way). --stateful asks for stateful
        reconnect. --ca-file trusts the CA certificates in F (PEM) for TLS, in addition to the
        system's. --pin (repeatable): one certificate of the server's chain must also have one of
        these public keys (base64 SHA-256 of its SubjectPublicKeyInfo); a mismatch ends the
        command with status 1, without retrying. --verbose logs the connection's steps and traffic to standard error.

        JSON_ARRAY_OF_ARGS is a JSON array of the arguments (re-encoded for --protocol messagepack);
        values print as compact JSON whatever the protocol. Exit status: 0 done; 1 the connection
        could not be made or closed first (the error on standard error), or a hub error; 2 a usage
        error (bad JSON arguments included).

        Example:
          tether signalr --url http://127.0.0.1:5000/hub --protocol messagepack invoke Add '[2, 3]' --count 2
          {"event":"connected","transport":"websockets","connection_id":"dcOKJ4i7yWsNBmkiLqUxxw"}
          {"result":5}
          {"result":5}
          {"event":"closed","reason":null}
        """

    enum Action: Equatable, Sendable {
        case invoke(method: String, arguments: String, count: Int)
        case stream(method: String, arguments: String)
        case listen(targets: [String], count: Int?, seconds: Double?)
    }

    typealias Parsed = ParsedCommand<SignalRCommand>

    var url: String
    var encoding = ValueEncoding.json
    var stateful = false
    var transports = HubTransport.allCases
    var headers: [String: String] = [:]
    var accessTokenVariable: String?
    var accessTokenCommand: String?
    /// The options both connection commands take.
    var shared = ConnectionArguments()
    var action: Action

    // MARK: - Parsing

    static func parse(_ arguments: [String]) -> Parsed {
        var url: String?
        return parse(
            arguments,
            into: SignalRCommand(url: "", action: .listen(targets: [], count: nil, seconds: nil)),
            own: { options, argument, value in
                switch argument {
                case "--url":
                    guard let text = value(), Self.hasHubScheme(text) else {
                        return .usageError("--url needs an http, https, ws or wss URL")
                    }
                    url = text
                case "--protocol":
                    switch value() {
                    case "json": options.encoding = .json
                    case "messagepack": options.encoding = .messagePack
                    default: return .usageError("--protocol takes json or messagepack")
                    }
                case "--transport":
                    guard let list = value().flatMap(Self.parseTransports) else {
                        return .usageError(
                            "--transport takes a comma-separated list of websockets, sse and long-polling"
                        )
                    }
                    options.transports = list
                case "--stateful":
                    options.stateful = true
                case "--header":
                    guard let text = value(), let colon = text.firstIndex(of: ":"), colon != text.startIndex else {
                        return .usageError("--header needs NAME:VALUE")
                    }
                    let name = String(text[..<colon])
                    let headerValue = String(text[text.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
                    options.headers[name] = headerValue
                case "--access-token-env":
                    guard let name = nonEmpty(value()) else { return .usageError("--access-token-env needs a name") }
                    options.accessTokenVariable = name
                case "--access-token-command":
                    guard let command = nonEmpty(value()) else {
                        return .usageError("--access-token-command needs a command")
                    }
                    options.accessTokenCommand = command
                default:
                    return .notTaken
                }
                return .taken
            },
            check: { options in
                guard let url else { return "--url is required" }
                if options.accessTokenVariable != nil && options.accessTokenCommand != nil {
                    return "--access-token-env and --access-token-command exclude each other"
                }
                options.url = url
                if !options.transports.contains(where: { $0.carries(options.encoding == .json ? .text : .binary) }) {
                    return "Server-Sent Events carry text only: --transport sse cannot carry --protocol messagepack"
                }
                return nil
            }
        )
    }

    /// The command line's name of each transport.
    static let transportNames: [(name: String, transport: HubTransport)] = [
        ("websockets", .webSockets), ("sse", .serverSentEvents), ("long-polling", .longPolling),
    ]

    static func name(of transport: HubTransport) -> String {
        transportNames.first { $0.transport == transport }!.name
    }

    /// `websockets,sse` → the transports, in order; nil for an unknown or repeated name.
    static func parseTransports(_ list: String) -> [HubTransport]? {
        var transports: [HubTransport] = []
        for name in list.split(separator: ",", omittingEmptySubsequences: false) {
            guard let transport = transportNames.first(where: { $0.name == name })?.transport,
                !transports.contains(transport)
            else { return nil }
            transports.append(transport)
        }
        return transports.isEmpty ? nil : transports
    }

    static func hasHubScheme(_ url: String) -> Bool {
        let lowered = url.lowercased()
        return ["http://", "https://", "ws://", "wss://"].contains { lowered.hasPrefix($0) && lowered.count > $0.count }
    }

    typealias UsageError = CommandWords.UsageError

    /// The action `command` names, with its words.
    static func action(_ command: String, _ words: CommandWords) -> Result<Action, UsageError> {
        let (arguments, count, seconds) = (words.arguments, words.count, words.seconds)
        switch command {
        case "invoke":
            guard (1...2).contains(arguments.count), seconds == nil else {
                return .failure(UsageError(description: "usage: invoke METHOD [JSON_ARRAY_OF_ARGS] [--count N]"))
            }
            return .success(
                .invoke(method: arguments[0], arguments: arguments.dropFirst().first ?? "[]", count: count ?? 1)
            )
        case "stream":
            guard (1...2).contains(arguments.count), count == nil, seconds == nil else {
                return .failure(UsageError(description: "usage: stream METHOD [JSON_ARRAY_OF_ARGS]"))
            }
            return .success(.stream(method: arguments[0], arguments: arguments.dropFirst().first ?? "[]"))
        case "listen":
            guard !arguments.isEmpty else {
                return .failure(UsageError(description: "usage: listen TARGET... [--count N] [--seconds S]"))
            }
            return .success(.listen(targets: arguments, count: count, seconds: seconds))
        default:
            return .failure(UsageError(description: "unknown command '\(command)'"))
        }
    }

    // MARK: - Running

    /// The connection for these options.
    func connection(
        accessToken: String?,
        printer: Printer,
        errorOutput: @escaping @Sendable (String) -> Void
    ) throws(HubConnectionError) -> HubConnection {
        var builder = HubConnectionBuilder(url: url)
            .withHeaders(headers)
            .withHubProtocol(encoding)
            .withCallbackQueue(printer.queue)
            .withLogging(verbose ? .trace : .warning) { level, text in errorOutput("tether: \(level): \(text)") }
        if let accessToken { builder = builder.withAccessToken(accessToken) }
        if let accessTokenCommand {
            builder = builder.withAccessTokenProvider { try await TokenCommand.run(accessTokenCommand) }
        }
        if stateful { builder = builder.withStatefulReconnect() }
        builder = builder.withTransports(transports)
        if let caFile { builder = builder.withCAFile(caFile) }
        if !pins.isEmpty { builder = builder.withPinnedPublicKeys(pins) }
        switch reconnect {
        case .none: break
        case .tiered: builder = builder.withAutomaticReconnect(.tiered(repeats: false))
        case .default: builder = builder.withAutomaticReconnect()
        }
        return try builder.build()
    }

    /// Runs the command; `output` and `errorOutput` take whole lines.
    func run(
        environment: [String: String],
        output: @escaping @Sendable (String) -> Void,
        errorOutput: @escaping @Sendable (String) -> Void
    ) async -> Int32 {
        var accessToken: String?
        if let accessTokenVariable {
            guard let token = environment[accessTokenVariable] else {
                errorOutput("tether: the environment variable \(accessTokenVariable) (the access token) is not set")
                return 2
            }
            accessToken = token
        }
        let printer = Printer(output: output)
        let connection: HubConnection
        do throws(HubConnectionError) {
            connection = try self.connection(accessToken: accessToken, printer: printer, errorOutput: errorOutput)
        } catch {
            errorOutput("tether: \(error.message)")
            return 2
        }
        let arguments: EncodedArguments
        switch action {
        case .invoke(_, let text, _), .stream(_, let text):
            do {
                arguments = try JSONArguments.encode(text, as: encoding)
            } catch {
                errorOutput("tether: the arguments must be a JSON array: \(error)")
                return 2
            }
        case .listen(let targets, _, _):
            arguments = .empty(encoding)
            for target in targets {
                connection.on(target) { arguments in printer.call(target: target, arguments: arguments) }
            }
        }
        connection.setEventHandler(queue: printer.queue) { event in printer.handle(event) }
        guard let watchers = ClientWatchers(shared, watching: connection, output: output, errorOutput: errorOutput)
        else { return 1 }
        defer { watchers.stop() }
        do throws(HubConnectionError) {
            try await connection.start()
        } catch {
            printer.flush()
            errorOutput("tether: \(error.message)")
            return 1
        }
        printer.flush()
        let status: Int32
        switch action {
        case .invoke(let method, _, let count):
            status = await invoke(connection, method: method, arguments: arguments, count: count, printer: printer)
        case .stream(let method, _):
            status = await stream(connection, method: method, arguments: arguments, printer: printer)
        case .listen(_, let count, let seconds):
            if let error = await printer.waitForReceived(count: count, seconds: seconds) {
                errorOutput("tether: \(error.message)")
                await connection.stop()
                printer.flush()
                return 1
            }
            status = 0
        }
        await connection.stop()
        printer.flush()
        return status
    }

    private func invoke(
        _ connection: HubConnection,
        method: String,
        arguments: EncodedArguments,
        count: Int,
        printer: Printer
    ) async -> Int32 {
        for _ in 0..<count {
            do throws(HubConnectionError) {
                let result = try await connection.invoke(method, arguments: arguments)
                printer.print(Self.line("result", result.map(Self.render) ?? "null"))
            } catch {
                printer.print(Self.errorLine(error.message))
                return 1
            }
        }
        return 0
    }

    private func stream(
        _ connection: HubConnection,
        method: String,
        arguments: EncodedArguments,
        printer: Printer
    ) async -> Int32 {
        do {
            for try await item in connection.stream(method, arguments: arguments) {
                printer.print(Self.line("item", Self.render(item)))
            }
            printer.print(#"{"completed":true}"#)
            return 0
        } catch {
            printer.print(Self.errorLine((error as? HubConnectionError)?.message ?? "\(error)"))
            return 1
        }
    }

    static func render(_ value: EncodedValue) -> String {
        (try? CanonicalJSON.render(value)) ?? #""(a value with no JSON rendering)""#
    }

    static func line(_ key: String, _ json: String) -> String {
        "{\"\(key)\":\(json)}"
    }

    static func errorLine(_ message: String) -> String {
        var text: [UInt8] = []
        JSONText.appendString(message, to: &text)
        return line("error", String(decoding: text, as: UTF8.self))
    }
}

/// Prints lines on one queue (the connection's callback queue), so that lifecycle events, calls
/// and results come out in the order they happened; counts the calls `listen` waits for.
final class Printer: EventPrinter<HubConnectionError>, @unchecked Sendable {
    init(output: @escaping @Sendable (String) -> Void) {
        super.init(label: "tether.cli-signalr", output: output)
    }

    /// On `queue`: an event.
    func handle(_ event: HubConnection.Event) {
        switch event {
        case .lifecycle(let change):
            printLifecycle(change) { session, line in
                line += #""transport":"\#(SignalRCommand.name(of: session.transport))","connection_id":"#.utf8
                LifecycleLine.appendOptional(session.connectionId, to: &line)
            }
        case .unhandledInvocation:
            break  // logged with --verbose
        }
    }

    /// On `queue`: a server call of a listened-to target.
    func call(target: String, arguments: EncodedArguments) {
        countReceived()
        var line = Array(#"{"target":"#.utf8)
        JSONText.appendString(target, to: &line)
        line += #","arguments":["#.utf8
        for (index, argument) in arguments.enumerated() {
            if index > 0 { line.append(UInt8(ascii: ",")) }
            line += SignalRCommand.render(argument).utf8
        }
        line += "]}".utf8
        output(String(decoding: line, as: UTF8.self))
    }
}

/// The command line's JSON array of arguments, re-encoded in the connection's encoding.
enum JSONArguments {
    /// Any JSON value, decoded from the command line and encoded again.
    enum Value: Codable {
        case null
        case bool(Bool)
        case integer(Int64)
        case number(Double)
        case string(String)
        case array([Value])
        case object([String: Value])

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if container.decodeNil() {
                self = .null
            } else if let value = try? container.decode(Bool.self) {
                self = .bool(value)
            } else if let value = try? container.decode(Int64.self) {
                self = .integer(value)
            } else if let value = try? container.decode(Double.self) {
                self = .number(value)
            } else if let value = try? container.decode(String.self) {
                self = .string(value)
            } else if let value = try? container.decode([Value].self) {
                self = .array(value)
            } else {
                self = .object(try container.decode([String: Value].self))
            }
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .null: try container.encodeNil()
            case .bool(let value): try container.encode(value)
            case .integer(let value): try container.encode(value)
            case .number(let value): try container.encode(value)
            case .string(let value): try container.encode(value)
            case .array(let value): try container.encode(value)
            case .object(let value): try container.encode(value)
            }
        }
    }

    static func encode(_ text: String, as encoding: ValueEncoding) throws -> EncodedArguments {
        let array = try EncodedValue(json: Array(text.utf8))
        let values = try array.decode([Value].self)
        return EncodedArguments(encoding: encoding, values: try values.map { try EncodedValue($0, encoding: encoding) })
    }
}

/// `--access-token-command`: runs the command through `sh -c` and takes its standard output,
/// trimmed, as the token. Failures name the exit status, never the output (it may hold a token).
enum TokenCommand {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    static func run(_ command: String) async throws -> String {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: "/bin/sh")
                process.arguments = ["-c", command]
                let output = Pipe()
                process.standardOutput = output
                do {
                    try process.run()
                } catch {
                    return continuation.resume(throwing: Failure(description: "the access token command did not start"))
                }
                let data = output.fileHandleForReading.readDataToEndOfFile()
                process.waitUntilExit()
                guard process.terminationStatus == 0 else {
                    return continuation.resume(
                        throwing: Failure(
                            description: "the access token command exited with status \(process.terminationStatus)"
                        )
                    )
                }
                let token = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                guard !token.isEmpty else {
                    return continuation.resume(
                        throwing: Failure(description: "the access token command printed nothing")
                    )
                }
                continuation.resume(returning: token)
            }
        }
    }
}

/// `--pin`, shared by both commands: a base64 SHA-256 (44 characters, one `=` of padding).
enum PinArgument {
    static let usage = "--pin needs a public key hash: base64 SHA-256 of a SubjectPublicKeyInfo (44 characters)"

    static func isValid(_ pin: String) -> Bool {
        pin.utf8.count == 44 && pin.hasSuffix("=")
            && pin.dropLast().allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "+" || $0 == "/") }
    }
}
