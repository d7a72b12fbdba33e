/// The options both connection commands (`tether xmpp`, `tether signalr`) take, parsed the same
/// way: the reconnect policy, TLS trust, logging, the network monitor and health lines.
struct ConnectionArguments: Sendable, Equatable {
    var reconnect = ReconnectChoice.default
    /// `--ca-file`: CA certificates (PEM) trusted in addition to the system's.
    var caFile: String?
    /// `--pin`: SHA-256 public-key pins (base64).
    var pins: [String] = []
    var verbose = false
    /// `--network-watch`: feed the Linux network monitor to the connection.
    var networkWatch = false
    /// `--health`: print the health every this many seconds.
    var healthInterval: Double?

    /// What became of an argument.
    enum Outcome {
        /// An option, taken (with its value).
        case taken
        /// Not such an option: another's, or a word of the COMMAND.
        case notTaken
        /// The option with a bad value.
        case usageError(String)
    }

    /// Takes `argument` if it is one of the shared options, its value from `value()`.
    mutating func take(_ argument: String, value: () -> String?) -> Outcome {
        switch argument {
        case "--reconnect":
            guard let choice = value().flatMap(ReconnectChoice.init(rawValue:)) else {
                return .usageError(ReconnectChoice.usage)
            }
            reconnect = choice
        case "--ca-file":
            guard let file = nonEmpty(value()) else { return .usageError("--ca-file needs a file") }
            caFile = file
        case "--pin":
            guard let pin = value(), PinArgument.isValid(pin) else { return .usageError(PinArgument.usage) }
            pins.append(pin)
        case "--verbose":
            verbose = true
        case "--network-watch":
            networkWatch = true
        case "--health":
            guard let seconds = value().flatMap(Double.init), seconds > 0 else {
                return .usageError("--health needs a positive number of seconds")
            }
            healthInterval = seconds
        default:
            return .notTaken
        }
        return .taken
    }
}

/// `text` when it is there and not empty (an option's value that names something).
func nonEmpty(_ text: String?) -> String? {
    guard let text, !text.isEmpty else { return nil }
    return text
}

/// What parsing a connection command's arguments gave.
enum ParsedCommand<Command: Equatable>: Equatable {
    case help
    case command(Command)
    case usageError(String)
}

/// A connection command (`tether xmpp`, `tether signalr`): its options (its own and the shared
/// ones), then a COMMAND with its words.
protocol ConnectionCommand: Equatable {
    associatedtype Action
    /// The options both commands take.
    var shared: ConnectionArguments { get set }
    /// What to do once connected.
    var action: Action { get set }
    /// The action COMMAND names, with its words.
    static func action(_ command: String, _ words: CommandWords) -> Result<Action, CommandWords.UsageError>
    /// The help text.
    static var usage: String { get }
    /// Parses the arguments after the command's name.
    static func parse(_ arguments: [String]) -> ParsedCommand<Self>
    /// Runs the command; `output` and `errorOutput` take whole lines.
    func run(
        environment: [String: String],
        output: @escaping @Sendable (String) -> Void,
        errorOutput: @escaping @Sendable (String) -> Void
    ) async -> Int32
}

extension ConnectionCommand {
    /// `tether NAME ARGUMENTS…` (`arguments` starts with NAME): the help, a usage error (status
    /// 2), or the command run.
    static func main(
        _ arguments: [String],
        environment: [String: String],
        output: @escaping @Sendable (String) -> Void,
        errorOutput: @escaping @Sendable (String) -> Void
    ) async -> Int32 {
        switch parse(Array(arguments.dropFirst())) {
        case .help:
            output(usage)
            return 0
        case .usageError(let message):
            errorOutput("tether \(arguments.first ?? ""): \(message)\n" + usage)
            return 2
        case .command(let command):
            return await command.run(environment: environment, output: output, errorOutput: errorOutput)
        }
    }
}

extension ConnectionCommand {
    /// Parses `arguments` into `options`: `--help`; the command's own options (`own` takes
    /// them); the shared ones; `check` then says what is wrong with the options, if anything;
    /// the rest is the COMMAND and its words.
    static func parse(
        _ arguments: [String],
        into options: Self,
        own: (inout Self, String, () -> String?) -> ConnectionArguments.Outcome,
        check: (inout Self) -> String?
    ) -> ParsedCommand<Self> {
        if arguments.contains("--help") || arguments.contains("-h") { return .help }
        var options = options
        var rest: [String] = []
        var index = 0
        func value() -> String? {
            guard index + 1 < arguments.count else { return nil }
            index += 1
            return arguments[index]
        }
        while index < arguments.count {
            let argument = arguments[index]
            var outcome = own(&options, argument, value)
            if case .notTaken = outcome { outcome = options.shared.take(argument, value: value) }
            switch outcome {
            case .taken: break
            case .notTaken: rest.append(argument)
            case .usageError(let text): return .usageError(text)
            }
            index += 1
        }
        if let problem = check(&options) { return .usageError(problem) }
        switch CommandWords.parseCommand(rest).flatMap(action) {
        case .success(let action): options.action = action
        case .failure(let error): return .usageError(error.description)
        }
        return .command(options)
    }
}

extension ConnectionCommand {
    var reconnect: ReconnectChoice { shared.reconnect }
    var caFile: String? { shared.caFile }
    var pins: [String] { shared.pins }
    var verbose: Bool { shared.verbose }
    var networkWatch: Bool { shared.networkWatch }
    var healthInterval: Double? { shared.healthInterval }
}
