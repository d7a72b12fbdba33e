import Foundation
import TetherCore
import TetherMessagePack

@testable import TetherSignalR

/// Loads `Specs/signalr/NAME` as `T`.
func loadVector<T: Decodable>(_ name: String, as type: T.Type = T.self) throws -> T {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    let data = try Data(contentsOf: root.appendingPathComponent("Specs/signalr/\(name)"))
    return try JSONDecoder().decode(T.self, from: data)
}

/// Bytes from "96 01 80 …" (spaces optional).
func hexBytes(_ hex: String) -> [UInt8] {
    let digits = Array(hex.replacingOccurrences(of: " ", with: "").utf8)
    return stride(from: 0, to: digits.count, by: 2).map {
        UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16)!
    }
}

func hexString(_ bytes: some Sequence<UInt8>) -> String {
    bytes.map { String(format: "%02x", $0) }.joined(separator: " ")
}

/// The ways every decode case is fed: whole, byte by byte, and in seeded random chunks.
enum Feeding: CaseIterable, CustomStringConvertible {
    case whole, byteByByte, randomChunks

    var description: String {
        switch self {
        case .whole: "whole"
        case .byteByByte: "byte by byte"
        case .randomChunks: "random chunks"
        }
    }

    func chunks(_ bytes: [UInt8], seed: UInt64 = 7) -> [ArraySlice<UInt8>] {
        switch self {
        case .whole: return [bytes[...]]
        case .byteByByte: return bytes.indices.map { bytes[$0..<$0 + 1] }
        case .randomChunks:
            var rng = SeededRandomNumberGenerator(seed: seed)
            var result: [ArraySlice<UInt8>] = []
            var start = 0
            while start < bytes.count {
                let length = Int.random(in: 1...17, using: &rng)
                result.append(bytes[start..<min(start + length, bytes.count)])
                start += length
            }
            return result
        }
    }
}

/// Feeds `bytes` to `parser` as `feeding` says and collects the messages (or the first error).
func decodeAll<P: HubMessageParser>(
    _ parser: P,
    _ bytes: [UInt8],
    _ feeding: Feeding
) -> (messages: [HubMessage], error: HubProtocolError?, partial: Bool) {
    var parser = parser
    var messages: [HubMessage] = []
    for chunk in feeding.chunks(bytes) {
        let copy = Array(chunk)
        parser.append(copy.backDeployedSpan)
        do {
            while let message = try parser.next() { messages.append(message) }
        } catch {
            return (messages, error, false)
        }
    }
    return (messages, nil, parser.hasPartialMessage)
}

/// Any JSON value, decoded with Foundation (for building MessagePack messages from JSON
/// descriptions in tests).
indirect enum TestJSON: Decodable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([TestJSON])
    case object([String: TestJSON])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .int(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([TestJSON].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: TestJSON].self))
        }
    }

    static func parse(_ text: String) throws -> TestJSON {
        try JSONDecoder().decode(TestJSON.self, from: Data(text.utf8))
    }

    var messagePack: MessagePackValue {
        switch self {
        case .null: .nil
        case .bool(let value): .bool(value)
        case .int(let value): value < 0 ? .int(value) : .uint(UInt64(value))
        case .double(let value): .double(value)
        case .string(let value): .string(value)
        case .array(let values): .array(values.map(\.messagePack))
        case .object(let members):
            .map(members.sorted { $0.key < $1.key }.map { MessagePackPair(.string($0.key), $0.value.messagePack) })
        }
    }
}

/// The `ParamData` of the motivating app (spec §"Arguments, results and stream items").
struct ParamData: Codable, Hashable {
    var id: String
    var userId: Int
    var niceName: String
    var time: Int64
    var dataType: String
    var jsonData: String
    var organizationCode: String
    var customerId: Int

    enum CodingKeys: String, CodingKey {
        case id = "Id"
        case userId = "UserId"
        case niceName = "NiceName"
        case time = "Time"
        case dataType = "DataType"
        case jsonData = "JsonData"
        case organizationCode = "OrganizationCode"
        case customerId = "CustomerId"
    }
}

/// A JSON payload value re-encoded as MessagePack.
func messagePackValue(_ value: EncodedValue) throws -> EncodedValue {
    var writer = MessagePackWriter()
    writer.write(try TestJSON.parse(String(decoding: value.bytes, as: UTF8.self)).messagePack)
    return try EncodedValue(messagePack: writer.bytes)
}

/// A message decoded from the JSON protocol with its payloads re-encoded as MessagePack.
func messagePackMessage(_ message: HubMessage) throws -> HubMessage {
    func arguments(_ arguments: EncodedArguments) throws -> EncodedArguments {
        EncodedArguments(encoding: .messagePack, values: try arguments.map(messagePackValue))
    }
    switch message {
    case .invocation(var invocation):
        invocation.arguments = try arguments(invocation.arguments)
        return .invocation(invocation)
    case .streamInvocation(var invocation):
        invocation.arguments = try arguments(invocation.arguments)
        return .streamInvocation(invocation)
    case .streamItem(var item):
        item.item = try messagePackValue(item.item)
        return .streamItem(item)
    case .completion(var completion):
        if case .value(let value) = completion.result { completion.result = .value(try messagePackValue(value)) }
        return .completion(completion)
    default:
        return message
    }
}

/// Parses one JSON record (without the separator).
func parseJSONRecord(_ text: String) throws -> HubMessage {
    var parser = JSONHubProtocol().makeParser()
    let bytes = Array(text.utf8) + [0x1E]
    parser.append(bytes.backDeployedSpan)
    guard let message = try parser.next() else { throw HubProtocolError.incomplete }
    return message
}

// The payloads of single cases, for `try #require(action.negotiateRequest)` instead of a
// `guard case` that could end a test silently.

extension HubConnectionMachine.Action {
    /// The URL and headers of a `negotiate` request.
    var negotiateRequest: (url: String, headers: [String: String])? {
        if case .request(.negotiate(let url, let headers, _)) = self { (url.description, headers) } else { nil }
    }

    /// The URL, headers and message format of an `openTransport`.
    var transportRequest: (url: String, headers: [String: String], format: MessageFormat)? {
        guard case .openTransport(let request, _) = self else { return nil }
        switch request.kind {
        case .webSocket(let url, _), .serverSentEvents(let url), .longPolling(let url):
            return (url.description, request.headers, request.messageFormat)
        case .tcp:
            return nil
        }
    }

    /// The bytes of a `send`.
    var sentBytes: [UInt8]? {
        if case .send(let bytes, _, _) = self { bytes } else { nil }
    }
}

extension HubConnectionMachine.Event {
    /// The message of an `unhandledInvocation`.
    var unhandledInvocation: InvocationMessage? {
        if case .unhandledInvocation(let message) = self { message } else { nil }
    }
}

extension HubMessage {
    /// The message of an `invocation`.
    var invocation: InvocationMessage? {
        if case .invocation(let message) = self { message } else { nil }
    }
}

extension NegotiateOutcome {
    /// The response of a `connect` outcome.
    var connectResponse: NegotiateResponse? {
        if case .connect(let response) = self { response } else { nil }
    }
}
