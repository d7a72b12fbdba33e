import Foundation

let decodeUsage = """
    usage: tether decode --format FORMAT [--chunk N] [FILE]

    Decodes captured SignalR or XMPP traffic from FILE (or standard input) and prints one line of
    compact JSON per message (XMPP: per stream event). FORMAT is one of:
      \(DecodeCommand.Format.allCases.map(\.rawValue).joined(separator: ", "))
    --chunk N feeds the decoder N bytes at a time (default 65536); the output is the same for any N.

    SignalR messages print with the JSON hub protocol's property names in canonical order (type,
    headers if not empty, invocationId if present, target, arguments, streamIds if present, item,
    result, error, allowReconnect if true, sequenceId); a void Completion has neither result nor
    error; "result":null is kept; unknown message types print nothing. MessagePack values map to
    JSON: binary as a base64 string, an extension as {"ext":TYPE,"data":"BASE64"}, a timestamp as
    {"timestamp":SECONDS,"nanoseconds":N}, NaN and infinities as the strings "NaN", "Infinity",
    "-Infinity", a map key that is not a string as its JSON text (keys that are maps or arrays
    nest at most four levels deep). Handshakes print {"protocol":…,"version":…}, or {} or
    {"error":…}. A capture of what a hub sent starts with the handshake response: decode that part
    with signalr-handshake-response.

    XMPP prints {"event":"stream-open","name":"{NS}local","attributes":{…}}, then
    {"event":"element","xml":"…"} per top-level element (a standalone serialisation) and
    {"event":"stream-close"}. Input that simply ends, even inside an element, exits 0 after the
    last complete element.

    On the first error it prints {"error":"TEXT"} (XMPP: {"event":"error","condition":…}) and exits
    1; a partial SignalR message at the end of the input is the error "Message is incomplete.".

    Example:
      printf '{"type":1,"target":"Send","arguments":[1]}\\x1e' | tether decode --format signalr-json
      {"type":1,"target":"Send","arguments":[1]}
    """

/// Parses `arguments` (without the program name) into a decode command and an optional path.
func parseDecodeArguments(_ arguments: [String]) -> (command: DecodeCommand, path: String?)? {
    var format: DecodeCommand.Format?
    var chunkSize = DecodeCommand.defaultChunkSize
    var path: String?
    var index = 0
    while index < arguments.count {
        let argument = arguments[index]
        switch argument {
        case "--format":
            guard index + 1 < arguments.count, let value = DecodeCommand.Format(rawValue: arguments[index + 1]) else {
                return nil
            }
            format = value
            index += 2
        case "--chunk":
            guard index + 1 < arguments.count, let value = Int(arguments[index + 1]), value > 0 else { return nil }
            chunkSize = value
            index += 2
        default:
            guard path == nil, !argument.hasPrefix("--") || argument == "-" else { return nil }
            path = argument == "-" ? nil : argument
            index += 1
        }
    }
    guard let format else { return nil }
    return (DecodeCommand(format: format, chunkSize: chunkSize), path)
}

/// `tether decode`: reads the input, prints the lines.
func runDecode(_ arguments: [String]) -> Int32 {
    if arguments.contains("--help") || arguments.contains("-h") {
        FileHandle.standardOutput.write(Data((decodeUsage + "\n").utf8))
        return 0
    }
    guard let (command, path) = parseDecodeArguments(arguments) else {
        FileHandle.standardError.write(Data((decodeUsage + "\n").utf8))
        return 2
    }
    let data: Data
    if let path {
        guard let contents = FileManager.default.contents(atPath: path) else {
            FileHandle.standardError.write(Data("tether: cannot read \(path)\n".utf8))
            return 2
        }
        data = contents
    } else {
        data = FileHandle.standardInput.readDataToEndOfFile()
    }
    var output: [UInt8] = []
    let status = command.run(input: [UInt8](data)) { line in
        output.append(contentsOf: line.utf8)
        output.append(0x0A)
        if output.count >= 1 << 16 {
            FileHandle.standardOutput.write(Data(output))
            output.removeAll(keepingCapacity: true)
        }
    }
    FileHandle.standardOutput.write(Data(output))
    return status
}

let usage = """
    usage: tether COMMAND ...

    Commands:
      decode   decode captured SignalR or XMPP traffic to JSON lines (tether decode --help)
      xmpp     connect to an XMPP server: send, listen, ping, roster (tether xmpp --help)
      signalr  connect to a SignalR hub: invoke, stream, listen (tether signalr --help)
      network  print the device's network as the Linux monitor sees it (tether network --help)

    """

/// Runs the command line `arguments` (without the program name); returns the exit status.
func runCommandLine(
    _ arguments: [String],
    environment: [String: String],
    output: @escaping @Sendable (String) -> Void,
    errorOutput: @escaping @Sendable (String) -> Void
) async -> Int32 {
    switch arguments.first {
    case "decode":
        return runDecode(Array(arguments.dropFirst()))
    case "xmpp":
        return await XMPPCommand.main(arguments, environment: environment, output: output, errorOutput: errorOutput)
    case "signalr":
        return await SignalRCommand.main(arguments, environment: environment, output: output, errorOutput: errorOutput)
    case "network":
        return await NetworkCommand.run(Array(arguments.dropFirst()), output: output, errorOutput: errorOutput)
    case "--help", "-h", "help":
        output(usage)
        return 0
    default:
        errorOutput(usage)
        return 2
    }
}

/// A command's words after its name: positional arguments and the options `--count N` (at least
/// 1) and `--seconds S` (positive), shared by the connection commands.
struct CommandWords {
    struct UsageError: Error, CustomStringConvertible {
        let description: String
    }

    var arguments: [String] = []
    var count: Int?
    var seconds: Double?

    /// A COMMAND and its words (`send TO TEXT --count 3`).
    static func parseCommand(_ words: [String]) -> Result<(String, CommandWords), UsageError> {
        guard let command = words.first else { return .failure(UsageError(description: "a COMMAND is required")) }
        return parse(words.dropFirst()).map { (command, $0) }
    }

    static func parse(_ words: ArraySlice<String>) -> Result<CommandWords, UsageError> {
        var parsed = CommandWords()
        var index = words.startIndex
        while index < words.endIndex {
            switch words[index] {
            case "--count":
                guard index + 1 < words.endIndex, let value = Int(words[index + 1]), value >= 1 else {
                    return .failure(UsageError(description: "--count needs a count of at least 1"))
                }
                parsed.count = value
                index += 2
            case "--seconds":
                guard index + 1 < words.endIndex, let value = Double(words[index + 1]), value > 0, value < 1e9 else {
                    return .failure(UsageError(description: "--seconds needs a positive number"))
                }
                parsed.seconds = value
                index += 2
            case let word where word.hasPrefix("--"):
                return .failure(UsageError(description: "unknown option \(word)"))
            case let word:
                parsed.arguments.append(word)
                index += 1
            }
        }
        return .success(parsed)
    }
}
