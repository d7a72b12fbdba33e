import Foundation
import TetherCore
import TetherSignalR
import TetherText

/// tether-bench: generates the benchmark corpus in memory and prints throughput, allocations per
/// message and peak RSS for each benchmark, with same-run baselines and ratios.
struct Options {
    var filter: String?
    var sizeMiB = 64.0
    var csv = false
    var passes = 3
    /// `--echo-latency URL`: time sequential Echo invocations against that hub instead.
    var echoLatencyURL: String?
    var echoCount = 1000
    var echoEncoding = ValueEncoding.json
    var echoTransport = HubTransport.webSockets
    /// `--executor`: make the Echo calls from a task on the connection's executor.
    var echoOnExecutor = false
    /// `--echo-floor URL`: the raw floor client's Echo latency instead.
    var echoFloorURL: String?
    /// `--kernels FORM` (`--portable-kernels`: `--kernels portable`): the text kernels' form, at
    /// most the widest this processor runs (`TextKernels.form`).
    var kernelForm: TextKernels.Form?
    /// `--corpus DIR`: read the corpus files (`Benchmarks/README.md`) instead of generating them.
    var corpusDirectory: String?
    /// `--write-corpus DIR`: write the generated corpus files there instead of benchmarking.
    var writeCorpusDirectory: String?
    /// `--chart FILE.svg`: also draw the run.
    var chartPath: String?
    /// `--soak [MINUTES]`: the simulated soak instead of the benchmarks.
    var soakMinutes: Int?
    var deviceSeeds: Int?
    /// `--fleet`: the fleet through a server restart, with this many clients.
    var fleetClients: Int?
    /// `--xmpp MODE HOST:PORT ARGUMENTS…`: `XMPPClient` against a running server instead.
    var xmppDriver: [String]?

    static let usage = """
        usage: tether-bench [--filter TEXT] [--size MIB] [--passes N] [--csv] [--corpus DIR] [--chart FILE.svg]
                            [--kernels portable|avx2|avx512]
               tether-bench --write-corpus DIR [--size MIB]
               tether-bench --echo-latency URL [--count N] [--protocol json|messagepack]
                            [--transport websockets|sse|long-polling] [--executor]
               tether-bench --echo-floor URL [--count N]
               tether-bench --soak [MINUTES]
               tether-bench --fleet [CLIENTS] [--chart FILE]
               tether-bench --xmpp latency|latency-executor|latency-callback HOST:PORT JID COUNT
               tether-bench --xmpp throughput|throughput-executor HOST:PORT FROM_JID TO_JID COUNT
               tether-bench --xmpp throughput-sm|throughput-sm-executor HOST:PORT FROM_JID TO_JID COUNT
               tether-bench --xmpp idle HOST:PORT ACCOUNT_JID COUNT
               tether-bench --xmpp online HOST:PORT JID CONTROL_PORT COUNT
               tether-bench --xmpp online-sasl2 HOST:PORT JID CONTROL_PORT COUNT
               tether-bench --xmpp online-sasl2-tls HOST:PORT JID CONTROL_PORT CA_FILE COUNT

          --filter TEXT  run only the benchmarks whose name contains TEXT
          --size MIB     size of the generated corpus streams (default 64)
          --passes N     timed passes per benchmark; the fastest counts (default 3)
          --csv          print CSV instead of a table
          --corpus DIR   read signalr.json.bin, signalr.msgpack.bin and xmpp.xml from DIR (as
                         --write-corpus writes them, or another generator of the same format; see
                         Benchmarks/README.md) instead of generating the corpus
          --write-corpus DIR
                         instead of the benchmarks: write the generated corpus (--size MIB per
                         stream) as those three files to DIR, for other libraries and fuzz seeds
          --chart FILE   also write the results as an SVG bar chart to FILE
          --kernels portable|avx2|avx512
                         the text kernels' form: the portable 16-byte one, the 32-byte AVX2 one or
                         the 64-byte AVX-512BW one (default: the widest this processor runs; a
                         wider one than it runs gives that; TextKernels.form); --portable-kernels
                         is --kernels portable
          --echo-latency URL
                         instead of the benchmarks: N sequential Echo invocations (default 1000)
                         against the running hub at URL; prints p50 and p99 as a JSON line
                         (Benchmarks/signalr-latency/run.sh compares them with pysignalr's and
                         signalrcore's, per transport); with --executor, from a task on the
                         connection's executor (HubConnection.executor)
          --echo-floor URL
                         the same calls from the simplest raw WebSocket client (prebuilt frames,
                         a byte search for the answer): the floor under any client
          --xmpp MODE HOST:PORT …
                         instead of the benchmarks: XMPPClient against the running server (password
                         from TETHER_PASSWORD, cleartext): COUNT sequential pings (p50, p99; with
                         latency-executor from a task on the client's executor, with
                         latency-callback each from the last one's completion), COUNT messages
                         from one account to another without stream management (messages/s), or
                         COUNT idle clients in this process (memory per connection, threads,
                         descriptors; TETHER_IDLE_RELEASE_MS, default 250, is how soon they give
                         their parser buffers back); one JSON line (Benchmarks/xmpp-driver/run.sh
                         compares libstrophe; its turns.py sets BENCH_TURNS=IN,OUT,BATCH for the
                         ping modes to take turns of BATCH pings with other harnesses);
                         online: COUNT logins and resumptions through a slow relay, the median times
                         (Benchmarks/xmpp-online/run.sh compares slixmpp and libstrophe);
                         online-sasl2: the same with SASL2 and Bind 2 (XEP-0388, XEP-0386);
                         online-sasl2-tls: over direct TLS, the resumption with a FAST token
          --device [SEEDS]
                         instead of the benchmarks: the device in the network simulations, both
                         protocols, SEEDS seeds (default 20): how soon after the path comes back,
                         and after a move to another network under a live link, the machine is
                         online again, against the targets
          --fleet [CLIENTS]
                         instead of the benchmarks: CLIENTS XMPPClients (default 2000) in this
                         process on one local prosody, then CLIENTS HubConnections on one local
                         aiosignalr hub, each server started by the benchmark (needs Debian's
                         prosody and prosodyctl, and aiosignalr 0.1.1 in .build/venv-aiosignalr,
                         run from the package's directory: Tests/run.sh installs both), killed
                         and started again: when each is back (median, p99 after the server
                         listens again), the largest share of the fleet back in any 100 ms,
                         clients still offline, the XMPP stanzas sent during the outage
                         (delivered or handed back); with the default reconnect policies and the
                         same schedules unspread; --chart FILE writes the arrivals as an SVG
                         histogram
          --soak [MINUTES]
                         instead of the benchmarks: both connection machines and all codecs on a
                         simulated network for MINUTES virtual minutes (default 60) with cuts and
                         stalls every few minutes; fails unless every invariant held and memory and
                         open descriptors at the end equal those after the first minute
        """

    init?(_ arguments: [String]) {
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            let value = index + 1 < arguments.count ? arguments[index + 1] : nil
            switch argument {
            case "--filter":
                guard let value else { return nil }
                filter = value
                index += 2
            case "--size":
                guard let value, let size = Double(value), size > 0 else { return nil }
                sizeMiB = size
                index += 2
            case "--passes":
                guard let value, let count = Int(value), count > 0 else { return nil }
                passes = count
                index += 2
            case "--csv":
                csv = true
                index += 1
            case "--portable-kernels":
                kernelForm = .portable
                index += 1
            case "--kernels":
                guard let value, let form = TextKernels.Form.allCases.first(where: { $0.description == value })
                else { return nil }
                kernelForm = form
                index += 2
            case "--corpus":
                guard let value else { return nil }
                corpusDirectory = value
                index += 2
            case "--write-corpus":
                guard let value else { return nil }
                writeCorpusDirectory = value
                index += 2
            case "--chart":
                guard let value else { return nil }
                chartPath = value
                index += 2
            case "--fleet":
                if let value, let clients = Int(value), clients > 0 {
                    fleetClients = clients
                    index += 2
                } else {
                    fleetClients = 2000
                    index += 1
                }
            case "--device":
                if let value, let seeds = Int(value), seeds > 0 {
                    deviceSeeds = seeds
                    index += 2
                } else {
                    deviceSeeds = 20
                    index += 1
                }
            case "--soak":
                if let value, let minutes = Int(value), minutes > 0 {
                    soakMinutes = minutes
                    index += 2
                } else {
                    soakMinutes = 60
                    index += 1
                }
            case "--xmpp":
                let rest = Array(arguments[(index + 1)...])
                let arity = [
                    "latency": 4, "latency-executor": 4, "latency-callback": 4, "idle": 4, "throughput": 5,
                    "throughput-sm": 5,
                    "throughput-executor": 5, "throughput-sm-executor": 5, "online": 5,
                    "online-sasl2": 5,
                    "online-sasl2-tls": 6,
                ]
                guard let mode = rest.first, let expected = arity[mode], rest.count == expected
                else { return nil }
                xmppDriver = rest
                index = arguments.count
            case "--echo-latency":
                guard let value else { return nil }
                echoLatencyURL = value
                index += 2
            case "--echo-floor":
                guard let value else { return nil }
                echoFloorURL = value
                index += 2
            case "--executor":
                echoOnExecutor = true
                index += 1
            case "--transport":
                switch value {
                case "websockets": echoTransport = .webSockets
                case "sse": echoTransport = .serverSentEvents
                case "long-polling": echoTransport = .longPolling
                default: return nil
                }
                index += 2
            case "--count":
                guard let value, let count = Int(value), count > 0 else { return nil }
                echoCount = count
                index += 2
            case "--protocol":
                switch value {
                case "json": echoEncoding = .json
                case "messagepack": echoEncoding = .messagePack
                default: return nil
                }
                index += 2
            default:
                return nil
            }
        }
    }

    func includes(_ name: String) -> Bool {
        guard let filter else { return true }
        return name.contains(filter)
    }
}

func progress(_ text: String) {
    FileHandle.standardError.write(Data("… \(text)\n".utf8))
}

/// A CSV field (RFC 4180): quoted, with quotes doubled, when it holds a comma, quote or newline.
func csvField(_ text: String) -> String {
    guard text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" }) else { return text }
    return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
}

func format(_ results: [BenchmarkResult], csv: Bool) -> String {
    if csv {
        var lines = ["name,bytes,messages,seconds,MB_per_s,messages_per_s,mallocs_per_message,peak_rss_bytes,note"]
        for result in results {
            lines.append(
                [
                    result.name, String(result.bytes), String(result.messages), String(format: "%.6f", result.seconds),
                    String(format: "%.1f", result.megabytesPerSecond), String(format: "%.0f", result.messagesPerSecond),
                    String(format: "%.2f", result.mallocsPerMessage), String(result.peakRSS), result.note,
                ].map(csvField).joined(separator: ",")
            )
        }
        return lines.joined(separator: "\n")
    }
    let header = ["benchmark", "MB/s", "msgs/s", "mallocs/msg", "peak RSS", "note"]
    let rows = results.map { result in
        [
            result.name, String(format: "%.1f", result.megabytesPerSecond),
            String(format: "%.0f", result.messagesPerSecond),
            String(format: "%.2f", result.mallocsPerMessage),
            String(format: "%.0f MiB", Double(result.peakRSS) / 1_048_576),
            result.note,
        ]
    }
    let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max()! }
    func line(_ cells: [String]) -> String {
        cells.indices.map { column in
            let cell = cells[column]
            let padding = String(repeating: " ", count: widths[column] - cell.count)
            return column == 0 || column == cells.count - 1 ? cell + padding : padding + cell
        }.joined(separator: "  ")
    }
    return ([line(header), widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")] + rows.map(line))
        .joined(separator: "\n")
}

guard let options = Options(Array(CommandLine.arguments.dropFirst())) else {
    FileHandle.standardError.write(Data((Options.usage + "\n").utf8))
    exit(2)
}

if let form = options.kernelForm { TextKernels.form = form }
FileHandle.standardError.write(
    Data("tether-bench: text kernels in the \(TextKernels.form) form (widest here: \(TextKernels.widestForm))\n".utf8)
)

if let clients = options.fleetClients {
    exit(await FleetBenchmark.run(clients: clients, chartPath: options.chartPath) ? 0 : 1)
}

if let seeds = options.deviceSeeds {
    exit(DeviceBenchmark.run(seeds: seeds) ? 0 : 1)
}

if let minutes = options.soakMinutes {
    exit(Soak.run(minutes: minutes) ? 0 : 1)
}

if let directory = options.writeCorpusDirectory {
    do {
        try CorpusFiles.write(to: directory, targetBytes: Int(options.sizeMiB * 1_048_576))
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("tether-bench: \(error)\n".utf8))
        exit(1)
    }
}

if let arguments = options.xmppDriver {
    do {
        let address = arguments[1]
        guard let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]),
            let count = Int(arguments.last!), count > 0
        else { throw BenchError("expected HOST:PORT and a positive COUNT") }
        let server = XMPPDriverBenchmarks.Server(
            host: String(address[..<colon]),
            port: port,
            password: ProcessInfo.processInfo.environment["TETHER_PASSWORD"] ?? ""
        )
        switch arguments[0] {
        case "latency", "latency-executor":
            print(
                try await XMPPDriverBenchmarks.latency(
                    server,
                    jid: arguments[2],
                    count: count,
                    onExecutor: arguments[0] == "latency-executor"
                )
            )
        case "latency-callback":
            print(try await XMPPDriverBenchmarks.callbackLatency(server, jid: arguments[2], count: count))
        case "online", "online-sasl2", "online-sasl2-tls":
            guard let controlPort = Int(arguments[3]) else { throw BenchError("expected CONTROL_PORT") }
            let login: XMPPOnlineBenchmark.Login =
                arguments[0] == "online" ? .rfc6120 : arguments[0] == "online-sasl2" ? .sasl2 : .sasl2TLS
            print(
                try await XMPPOnlineBenchmark.run(
                    server,
                    jid: arguments[2],
                    controlPort: controlPort,
                    count: count,
                    login: login,
                    caFile: login == .sasl2TLS ? arguments[4] : nil
                )
            )
        case "throughput", "throughput-sm", "throughput-executor", "throughput-sm-executor":
            print(
                try await XMPPDriverBenchmarks.throughput(
                    server,
                    from: arguments[2],
                    to: arguments[3],
                    count: count,
                    streamManagement: arguments[0].hasPrefix("throughput-sm"),
                    onExecutor: arguments[0].hasSuffix("-executor")
                )
            )
        default: print(try await XMPPDriverBenchmarks.idle(server, account: arguments[2], count: count))
        }
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("tether-bench: \(error)\n".utf8))
        exit(1)
    }
}

if let url = options.echoFloorURL {
    do {
        print(try EchoFloor.run(url: url, count: options.echoCount))
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("tether-bench: \(error)\n".utf8))
        exit(1)
    }
}

if let url = options.echoLatencyURL {
    do {
        print(
            try await EchoLatency.run(
                url: url,
                count: options.echoCount,
                encoding: options.echoEncoding,
                transport: options.echoTransport,
                onExecutor: options.echoOnExecutor
            )
        )
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("tether-bench: \(error)\n".utf8))
        exit(1)
    }
}

var results: [BenchmarkResult] = []
var signalRCorpus: SignalRCorpus?
if SignalRBenchmarks.names.contains(where: options.includes)
    || HubConnectionBenchmarks.names.contains(where: options.includes)
    || WebSocketBenchmarks.names.contains(where: options.includes)
{
    if let directory = options.corpusDirectory {
        progress("reading the SignalR corpus from \(directory)")
        do {
            signalRCorpus = try SignalRCorpus(directory: directory)
        } catch {
            FileHandle.standardError.write(Data("tether-bench: \(error)\n".utf8))
            exit(1)
        }
    } else {
        progress(String(format: "generating the SignalR corpus (%.0f MiB JSON stream)", options.sizeMiB))
        signalRCorpus = SignalRCorpus(targetBytes: Int(options.sizeMiB * 1_048_576))
    }
}
if SignalRBenchmarks.names.contains(where: options.includes), let corpus = signalRCorpus {
    progress(
        String(
            format: "corpus: %d messages, JSON %.1f MiB, MessagePack %.1f MiB",
            corpus.messageCount,
            Double(corpus.json.count) / 1_048_576,
            Double(corpus.messagePack.count) / 1_048_576
        )
    )
    let benchmarks = SignalRBenchmarks(corpus: corpus, passes: options.passes)
    do {
        results += try benchmarks.run(filter: options.includes, progress: progress)
    } catch {
        FileHandle.standardError.write(Data("tether-bench: \(error)\n".utf8))
        exit(1)
    }
}
if WebSocketBenchmarks.names.contains(where: options.includes), let corpus = signalRCorpus {
    do {
        results += try WebSocketBenchmarks(corpus: corpus, passes: options.passes).run(
            filter: options.includes,
            progress: progress
        )
    } catch {
        FileHandle.standardError.write(Data("tether-bench: \(error)\n".utf8))
        exit(1)
    }
}
if HubConnectionBenchmarks.names.contains(where: options.includes), let corpus = signalRCorpus {
    results += HubConnectionBenchmarks(machineCount: 100_000, passes: options.passes, corpus: corpus)
        .run(filter: options.includes, progress: progress)
    signalRCorpus = nil
}
if XMPPBenchmarks.names.contains(where: options.includes)
    || XMPPClientBenchmarks.names.contains(where: options.includes)
{
    let corpus: XMPPCorpus
    if let directory = options.corpusDirectory {
        progress("reading the XMPP corpus from \(directory)")
        do {
            corpus = try XMPPCorpus(directory: directory)
        } catch {
            FileHandle.standardError.write(Data("tether-bench: \(error)\n".utf8))
            exit(1)
        }
    } else {
        progress(String(format: "generating the XMPP corpus (%.0f MiB stream)", options.sizeMiB))
        corpus = XMPPCorpus(targetBytes: Int(options.sizeMiB * 1_048_576))
    }
    progress(
        "corpus: \(corpus.stanzaCount) stanzas, \(corpus.counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))"
    )
    do {
        if XMPPBenchmarks.names.contains(where: options.includes) {
            results += try XMPPBenchmarks(corpus: corpus, passes: options.passes).run(
                filter: options.includes,
                progress: progress
            )
        }
        if XMPPClientBenchmarks.names.contains(where: options.includes) {
            results += try XMPPClientBenchmarks(machineCount: 100_000, passes: options.passes, corpus: corpus).run(
                filter: options.includes,
                progress: progress
            )
        }
    } catch {
        FileHandle.standardError.write(Data("tether-bench: \(error)\n".utf8))
        exit(1)
    }
}
print(format(results, csv: options.csv))
if let path = options.chartPath {
    let source =
        options.corpusDirectory.map { "the corpus in \($0)" }
        ?? String(format: "the generated %.0f MiB corpus", options.sizeMiB)
    let chart = Chart.svg(results, title: "tether-bench on \(source) (fastest of \(options.passes) passes)")
    do {
        try chart.write(toFile: path, atomically: true, encoding: .utf8)
    } catch {
        FileHandle.standardError.write(Data("tether-bench: cannot write \(path): \(error)\n".utf8))
        exit(1)
    }
}
