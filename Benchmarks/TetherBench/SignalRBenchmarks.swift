import Foundation
import TetherCore
import TetherSignalR

/// SignalR benchmarks: decode (including typed ParamData decoding) and encode of the corpus with
/// both hub protocols, against Foundation's JSONDecoder on the same records.
struct SignalRBenchmarks {
    /// Every benchmark this group runs.
    static let names = [
        "foundation-jsondecoder (baseline)", "signalr-json-decode", "signalr-json-binder-decode",
        "signalr-json-codable-decode", "signalr-json-parse-only", "signalr-msgpack-decode",
        "signalr-msgpack-next-decode",
        "signalr-msgpack-codable-decode", "signalr-msgpack-parse-only", "codable-floor (ParamData from constants)",
        "signalr-json-encode", "signalr-json-codable-encode",
        "signalr-msgpack-encode", "signalr-msgpack-codable-encode",
    ]

    let corpus: SignalRCorpus
    let passes: Int
    /// The streams cut into arrays of `chunkSize` bytes (records split across them), as a
    /// transport hands received bytes over: the decode rows append these arrays, which the
    /// parsers keep instead of copying (`HubMessageParser.append(_:)`).
    let jsonChunks: [[UInt8]]
    let messagePackChunks: [[UInt8]]
    static let chunkSize = 65536

    init(corpus: SignalRCorpus, passes: Int) {
        self.corpus = corpus
        self.passes = passes
        jsonChunks = Self.chunks(of: corpus.json)
        messagePackChunks = Self.chunks(of: corpus.messagePack)
    }

    static func chunks(of stream: [UInt8]) -> [[UInt8]] {
        stride(from: 0, to: stream.count, by: chunkSize).map { Array(stream[$0..<min($0 + chunkSize, stream.count)]) }
    }

    /// How the decode benchmarks turn payloads into ParamData.
    enum Typing {
        /// No payload is decoded (framing, validation and the message model only).
        case none
        /// Through `Codable` (`init(from:)`) only.
        case codable
        /// With the fast paths the payload type offers (`init(json:)`, `init(messagePack:)`,
        /// `encode(json:)`, `encode(messagePack:)`), by the faster of the two ways below for the
        /// protocol: `bound` for MessagePack (one pass over the payload), `afterNext` for JSON
        /// (whose binder validates the record first, and costs about 2.5 % more instructions than
        /// decoding after `next()`: `Specs/performance.md`).
        case fastest
        /// The fast paths, each payload decoded from the message `next()` returned.
        case afterNext
        /// The fast paths, each payload read by a `HubMessageBinder` (`next(binding:)`).
        case bound

        /// The way `fastest` decodes `encoding`.
        static func fastest(for encoding: ValueEncoding) -> Typing {
            encoding == .messagePack ? .bound : .afterNext
        }
    }

    /// Decodes every message of the stream cut into `chunks` and the ParamData it carries;
    /// returns a checksum. (Not inlined, so that profilers can attribute its cost.)
    @inline(never)
    func decode<P: HubProtocol>(_ hubProtocol: P, _ chunks: [[UInt8]], typing: Typing = .fastest) throws -> Int {
        var parser = hubProtocol.makeParser()
        var checksum = 0
        let typing = typing == .fastest ? Typing.fastest(for: hubProtocol.valueEncoding) : typing
        for chunk in chunks {
            parser.append(chunk)
            if typing == .bound {
                var binder = ParamDataBinder()
                while let message = try parser.next(binding: &binder) {
                    checksum &+= framingSum(message)
                }
                if let failure = binder.failure { throw failure }
                checksum &+= binder.checksum
            } else {
                while let message = try parser.next() {
                    checksum &+= try sum(message, typing)
                }
            }
        }
        return checksum
    }

    /// Reads every payload of the corpus as a `ParamData` while the parser reads its message, and
    /// adds to the checksum what `sum(_:_:)` adds for it.
    struct ParamDataBinder: HubMessageBinder {
        var checksum = 0
        /// The first payload that could not be read as a `ParamData`, and why.
        var failure: (any Error)?

        mutating func bindArguments(of target: String, from arguments: inout HubPayloadReader) {
            do {
                checksum &+= try arguments.read(ParamData.self).userId
            } catch {
                failure = failure ?? error
            }
        }

        mutating func bindResult(of invocationId: String, from result: inout HubPayloadReader) {
            do {
                checksum &+= try result.read(ParamData.self).customerId
            } catch {
                failure = failure ?? error
            }
        }

        mutating func bindItem(of invocationId: String, from item: inout HubPayloadReader) {
            do {
                checksum &+= Int(try item.read(ParamData.self).time)
            } catch {
                failure = failure ?? error
            }
        }
    }

    /// What one message adds to the checksum beside its payload (which a `ParamDataBinder` adds):
    /// with the binder's, the same as `sum(_:_:)` with the fast paths.
    @inline(__always)
    func framingSum(_ message: borrowing HubMessage) -> Int {
        switch message {
        case .invocation(let invocation): invocation.arguments.count &+ invocation.target.utf8.count
        case .ping: 1
        default: 0
        }
    }

    /// What one message adds to the checksum. The message is borrowed: switching over it where
    /// the loop bound it copied it (a retain and a release of each of its references, about a
    /// tenth of the MessagePack row), which the C references' loops do not do either.
    @inline(__always)
    func sum(_ message: borrowing HubMessage, _ typing: Typing) throws -> Int {
        switch message {
        case .invocation(let invocation):
            var checksum = invocation.arguments.count &+ invocation.target.utf8.count
            if typing != .none {
                checksum &+= try payload(invocation.arguments, typing).userId
            }
            return checksum
        case .completion(let completion):
            if case .value(let value) = completion.result {
                return typing == .none ? value.bytes.count : try payload(value, typing).customerId
            }
            return 0
        case .streamItem(let item):
            return typing == .none ? item.item.bytes.count : Int(try payload(item.item, typing).time)
        case .ping:
            return 1
        default:
            return 0
        }
    }

    /// The ParamData of an invocation's first argument, decoded as `typing` says.
    @inline(__always)
    func payload(_ arguments: EncodedArguments, _ typing: Typing) throws -> ParamData {
        typing == .codable
            ? try arguments.decode(ViaCodable<ParamData>.self, at: 0).value
            : try arguments.decode(ParamData.self, at: 0)
    }

    /// The ParamData of a result or stream item, decoded as `typing` says.
    @inline(__always)
    func payload(_ value: EncodedValue, _ typing: Typing) throws -> ParamData {
        typing == .codable ? try value.decode(ViaCodable<ParamData>.self).value : try value.decode(ParamData.self)
    }

    /// Encodes every message of the corpus from its typed ParamData; returns the output size.
    /// (Not inlined, so that profilers can attribute its cost.)
    @inline(never)
    func encode<P: HubProtocol>(_ hubProtocol: P, into output: inout [UInt8], typing: Typing = .fastest) throws -> Int {
        output.removeAll(keepingCapacity: true)
        let encoding = hubProtocol.valueEncoding
        var payloads = corpus.payloads.makeIterator()
        for shape in corpus.shapes {
            let message: HubMessage
            switch shape.kind {
            case .invocation:
                let payload = payloads.next()!
                let arguments =
                    typing == .codable
                    ? try EncodedArguments(encoding: encoding, ViaCodable(value: payload))
                    : try EncodedArguments(encoding: encoding, payload)
                message = .invocation(
                    InvocationMessage(invocationId: shape.invocationId, target: shape.target, arguments: arguments)
                )
            case .completion:
                let value = try encodedValue(payloads.next()!, encoding, typing)
                message = .completion(CompletionMessage(invocationId: shape.invocationId!, result: .value(value)))
            case .streamItem:
                let value = try encodedValue(payloads.next()!, encoding, typing)
                message = .streamItem(StreamItemMessage(invocationId: shape.invocationId!, item: value))
            case .ping:
                message = .ping
            }
            hubProtocol.write(message, into: &output)
        }
        return output.count
    }

    /// `payload` encoded as `typing` says.
    @inline(__always)
    func encodedValue(_ payload: ParamData, _ encoding: ValueEncoding, _ typing: Typing) throws -> EncodedValue {
        typing == .codable
            ? try EncodedValue(ViaCodable(value: payload), encoding: encoding)
            : try EncodedValue(payload, encoding: encoding)
    }

    /// The record shape Foundation decodes in the baseline (the same information our decoder
    /// yields: type, ids, target, and the typed ParamData).
    struct FoundationRecord: Decodable {
        var type: Int
        var invocationId: String?
        var target: String?
        var arguments: [ParamData]?
        var result: ParamData?
        var item: ParamData?
    }

    /// Foundation's JSONDecoder on the same records (split at 0x1E); returns a checksum.
    func foundationDecode(_ stream: [UInt8]) throws -> Int {
        let decoder = JSONDecoder()
        var checksum = 0
        var start = 0
        let data = Data(stream)
        for index in stream.indices where stream[index] == 0x1E {
            let record = try decoder.decode(FoundationRecord.self, from: data[start..<index])
            checksum &+= record.arguments?.first?.userId ?? record.result?.customerId ?? 1
            start = index + 1
        }
        return checksum
    }

    func run(filter: (String) -> Bool, progress: (String) -> Void) throws -> [BenchmarkResult] {
        var results: [BenchmarkResult] = []
        let messages = corpus.messageCount
        var baseline: BenchmarkResult?
        if filter("foundation-jsondecoder (baseline)") {
            progress("Foundation JSONDecoder baseline")
            // The same number of passes as ours (fastest counts), so that the ratio compares
            // warm runs with warm runs.
            baseline = try measure(
                "foundation-jsondecoder (baseline)",
                bytes: corpus.json.count,
                messages: messages,
                passes: passes
            ) {
                try foundationDecode(corpus.json)
            }
            results.append(baseline!)
        }
        if filter("signalr-json-decode") {
            progress("signalr-json-decode")
            var result = try measure(
                "signalr-json-decode",
                bytes: corpus.json.count,
                messages: messages,
                passes: passes
            ) {
                try decode(JSONHubProtocol(), jsonChunks)
            }
            if let baseline { result.note = String(format: "%.1fx JSONDecoder", baseline.seconds / result.seconds) }
            results.append(result)
        }
        if filter("signalr-json-binder-decode") {
            progress("signalr-json-binder-decode")
            var result = try measure(
                "signalr-json-binder-decode",
                bytes: corpus.json.count,
                messages: messages,
                passes: passes
            ) {
                try decode(JSONHubProtocol(), jsonChunks, typing: .bound)
            }
            result.note = "ParamData by a binder (two passes)"
            results.append(result)
        }
        if filter("signalr-json-codable-decode") {
            progress("signalr-json-codable-decode")
            var result = try measure(
                "signalr-json-codable-decode",
                bytes: corpus.json.count,
                messages: messages,
                passes: passes
            ) {
                try decode(JSONHubProtocol(), jsonChunks, typing: .codable)
            }
            let ratio = baseline.map { String(format: "%.1fx JSONDecoder, ", $0.seconds / result.seconds) } ?? ""
            result.note = ratio + "ParamData through Codable"
            results.append(result)
        }
        if filter("signalr-json-parse-only") {
            progress("signalr-json-parse-only")
            results.append(
                try measure("signalr-json-parse-only", bytes: corpus.json.count, messages: messages, passes: passes) {
                    try decode(JSONHubProtocol(), jsonChunks, typing: .none)
                }
            )
        }
        if filter("signalr-msgpack-decode") {
            progress("signalr-msgpack-decode")
            let decodeMessagePack = try measure(
                "signalr-msgpack-decode",
                bytes: corpus.messagePack.count,
                messages: messages,
                passes: passes
            ) {
                try decode(MessagePackHubProtocol(), messagePackChunks)
            }
            results.append(decodeMessagePack)
        }
        if filter("signalr-msgpack-next-decode") {
            progress("signalr-msgpack-next-decode")
            var result = try measure(
                "signalr-msgpack-next-decode",
                bytes: corpus.messagePack.count,
                messages: messages,
                passes: passes
            ) {
                try decode(MessagePackHubProtocol(), messagePackChunks, typing: .afterNext)
            }
            result.note = "ParamData decoded after next()"
            results.append(result)
        }
        if filter("signalr-msgpack-codable-decode") {
            progress("signalr-msgpack-codable-decode")
            var result = try measure(
                "signalr-msgpack-codable-decode",
                bytes: corpus.messagePack.count,
                messages: messages,
                passes: passes
            ) {
                try decode(MessagePackHubProtocol(), messagePackChunks, typing: .codable)
            }
            result.note = "ParamData through Codable"
            results.append(result)
        }
        if filter("signalr-msgpack-parse-only") {
            progress("signalr-msgpack-parse-only")
            results.append(
                try measure(
                    "signalr-msgpack-parse-only",
                    bytes: corpus.messagePack.count,
                    messages: messages,
                    passes: passes
                ) {
                    try decode(MessagePackHubProtocol(), messagePackChunks, typing: .none)
                }
            )
        }
        if filter("codable-floor (ParamData from constants)") {
            progress("codable-floor")
            // One ParamData per message that carries one, against the MessagePack stream's bytes:
            // the throughput a decoder would reach if reading the input cost nothing.
            let payloads = corpus.payloads.count
            var result = try measure(
                "codable-floor (ParamData from constants)",
                bytes: corpus.messagePack.count,
                messages: messages,
                passes: passes
            ) {
                try decodeConstantParamData(count: payloads)
            }
            result.note = String(
                format: "%.0f ns per ParamData, Codable alone",
                result.seconds / Double(payloads) * 1e9
            )
            results.append(result)
        }
        var output: [UInt8] = []
        output.reserveCapacity(corpus.json.count + 1024)
        // Each encode row runs pass by pass in alternation with the decode row it is compared
        // with (which is timed again for it), so that the ratio in its note is not decided by a
        // slow spell of the machine or by the heap the rows before it left.
        let encodings: [(name: String, decodeName: String, json: Bool, typing: Typing)] = [
            ("signalr-json-encode", "decode", true, .fastest),
            ("signalr-json-codable-encode", "Codable decode", true, .codable),
            ("signalr-msgpack-encode", "decode", false, .fastest),
            ("signalr-msgpack-codable-encode", "Codable decode", false, .codable),
        ]
        for encoding in encodings where filter(encoding.name) {
            progress(encoding.name)
            let stream = encoding.json ? corpus.json : corpus.messagePack
            let typing = encoding.typing
            let encodeOnce = { () throws -> Int in
                encoding.json
                    ? try encode(JSONHubProtocol(), into: &output, typing: typing)
                    : try encode(MessagePackHubProtocol(), into: &output, typing: typing)
            }
            let decodeOnce = { () throws -> Int in
                encoding.json
                    ? try decode(JSONHubProtocol(), jsonChunks, typing: typing)
                    : try decode(MessagePackHubProtocol(), messagePackChunks, typing: typing)
            }
            let size = try encodeOnce()
            let pair = try measureAlternating(
                [
                    (encoding.decodeName, stream.count, messages, decodeOnce),
                    (encoding.name, size, messages, encodeOnce),
                ],
                passes: passes
            )
            var result = pair[1]
            result.note = String(format: "%.2fx ", pair[0].seconds / result.seconds) + encoding.decodeName + " speed"
            results.append(result)
        }
        return results
    }
}
