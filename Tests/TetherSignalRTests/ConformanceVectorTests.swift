import Foundation
import Testing
import TetherCore
import TetherMessagePack
import TetherTestSupport

@testable import TetherSignalR

/// Every conformance vector of the hub protocols (`Specs/signalr/README.md`), read from the data
/// files in Specs/signalr/ and run whole, byte by byte and in random chunks, with trailing bytes.
struct JSONVectorTests {
    struct Message: Decodable, CustomTestStringConvertible {
        var vector: Int
        var text: String
        var expect: String
        var write: Bool?
        var testDescription: String { "vector \(vector): \(text)" }
    }
    struct Stream: Decodable {
        var vector: Int
        var input: String
        var messages: [String]
    }
    struct Failure: Decodable, CustomTestStringConvertible {
        var vector: Int
        var text: String
        var error: String
        var testDescription: String { "vector \(vector): \(text)" }
    }
    struct File: Decodable {
        var messages: [Message]
        var streams: [Stream]
        var errors: [Failure]
    }

    static let file: File = try! loadVector("json-messages.json")
    static let trailing = Array(#"{"type":6}"#.utf8) + [0x1E, UInt8(ascii: "{")]

    @Test(arguments: file.messages)
    func decodesAndWrites(_ vector: Message) throws {
        let record = Array(vector.text.utf8) + [0x1E]
        for feeding in Feeding.allCases {
            let result = decodeAll(JSONHubProtocol().makeParser(), record + Self.trailing, feeding)
            #expect(result.error == nil, "\(feeding)")
            #expect(try result.messages.map(CanonicalJSON.render) == [vector.expect, #"{"type":6}"#], "\(feeding)")
            #expect(result.partial, "the trailing '{' stays buffered (\(feeding))")
        }
        if vector.write == true {
            let message = try parseJSONRecord(vector.text)
            var written: [UInt8] = []
            JSONHubProtocol().write(message, into: &written)
            #expect(String(decoding: written, as: UTF8.self) == vector.text + "\u{1E}")
        }
    }

    @Test(arguments: file.streams.map(\.vector))
    func decodesStreams(_ number: Int) throws {
        let vector = Self.file.streams.first { $0.vector == number }!
        for feeding in Feeding.allCases {
            let result = decodeAll(JSONHubProtocol().makeParser(), Array(vector.input.utf8), feeding)
            #expect(result.error == nil)
            #expect(try result.messages.map(CanonicalJSON.render) == vector.messages, "\(feeding)")
            #expect(!result.partial)
        }
    }

    @Test(arguments: file.errors)
    func rejectsWithExactText(_ vector: Failure) {
        let record = Array(vector.text.utf8) + [0x1E]
        for feeding in Feeding.allCases {
            let result = decodeAll(JSONHubProtocol().makeParser(), record + Self.trailing, feeding)
            #expect(result.messages.isEmpty, "\(feeding)")
            #expect(result.error == HubProtocolError(.invalidMessage, vector.error), "\(feeding)")
        }
    }

    @Test func textRecordsAndIncompleteInput() throws {
        struct Record: Decodable {
            var input: String
            var records: [String]?
        }
        struct Framing: Decodable {
            var textRecords: [Record]
            var textIncomplete: [Record]
        }
        let framing: Framing = try loadVector("framing.json")
        // The parser splits at 0x1E; the records of these vectors are not JSON objects, so the
        // first one fails to parse, which shows that the split happened (and nothing waited).
        for vector in framing.textRecords {
            let result = decodeAll(JSONHubProtocol().makeParser(), Array(vector.input.utf8), .byteByByte)
            #expect(result.error?.message == "Error reading JSON.")
        }
        // Each record on its own, wrapped in a JSON string, shows where the separators cut.
        for vector in framing.textRecords {
            let wrapped = vector.records!.map { #"{"type":7,"error":""# + $0 + #""}"# + "\u{1E}" }.joined()
            let result = decodeAll(JSONHubProtocol().makeParser(), Array(wrapped.utf8), .randomChunks)
            #expect(result.messages == vector.records!.map { .close(CloseMessage(error: $0)) })
        }
        for vector in framing.textIncomplete {
            var parser = JSONHubProtocol().makeParser()
            let bytes = Array(vector.input.utf8)
            parser.append(bytes.backDeployedSpan)
            if vector.records == nil {
                #expect(try parser.next() == nil)
                #expect(parser.hasPartialMessage == !bytes.isEmpty)
            } else {
                expectThrows(\HubProtocolError.kind, .invalidMessage) { try parser.next() }
            }
        }
    }
}

struct MessagePackVectorTests {
    struct Message: Decodable, CustomTestStringConvertible {
        var vector: Int
        var hex: String
        var framed: Bool?
        var expect: String
        var write: Bool?
        var testDescription: String { "vector \(vector): \(hex)" }
        var frame: [UInt8] {
            let bytes = hexBytes(hex)
            return framed == true ? bytes : VarInt.encode(bytes.count) + bytes
        }
    }
    struct Stream: Decodable {
        var vector: Int
        var hex: String
        var messages: [String]
    }
    struct Size: Decodable, CustomTestStringConvertible {
        var vector: Int
        var json: String
        var framedSize: Int
        var testDescription: String { json }
    }
    struct Failure: Decodable, CustomTestStringConvertible {
        var vector: Int
        var hex: String
        var framed: Bool?
        var error: String
        var testDescription: String { "vector \(vector): \(hex)" }
        var frame: [UInt8] {
            let bytes = hexBytes(hex)
            return framed == true ? bytes : VarInt.encode(bytes.count) + bytes
        }
    }
    struct File: Decodable {
        var messages: [Message]
        var streams: [Stream]
        var framedSizes: [Size]
        var errors: [Failure]
    }

    static let file: File = try! loadVector("msgpack-messages.json")
    static let trailing: [UInt8] = [0x02, 0x91, 0x06, 0x05]

    @Test(arguments: file.messages)
    func decodesAndWrites(_ vector: Message) throws {
        for feeding in Feeding.allCases {
            let result = decodeAll(MessagePackHubProtocol().makeParser(), vector.frame + Self.trailing, feeding)
            #expect(result.error == nil, "\(feeding)")
            #expect(try result.messages.map(CanonicalJSON.render) == [vector.expect, #"{"type":6}"#], "\(feeding)")
            #expect(result.partial, "the trailing prefix stays buffered (\(feeding))")
        }
        if vector.write == true {
            let result = decodeAll(MessagePackHubProtocol().makeParser(), vector.frame, .whole)
            var written: [UInt8] = []
            MessagePackHubProtocol().write(try #require(result.messages.first), into: &written)
            #expect(hexString(written) == hexString(vector.frame))
        }
    }

    @Test func decodesStreams() throws {
        for vector in Self.file.streams {
            for feeding in Feeding.allCases {
                let result = decodeAll(MessagePackHubProtocol().makeParser(), hexBytes(vector.hex), feeding)
                #expect(result.error == nil)
                #expect(try result.messages.map(CanonicalJSON.render) == vector.messages, "\(feeding)")
            }
        }
    }

    @Test(arguments: file.framedSizes)
    func writesCSharpFramedSizes(_ vector: Size) throws {
        let message = try messagePackMessage(try parseJSONRecord(vector.json))
        var written: [UInt8] = []
        MessagePackHubProtocol().write(message, into: &written)
        #expect(written.count == vector.framedSize, "\(hexString(written))")
        let decoded = decodeAll(MessagePackHubProtocol().makeParser(), written, .byteByByte)
        #expect(decoded.messages == [message])
    }

    @Test(arguments: file.errors)
    func rejectsWithExactText(_ vector: Failure) {
        for feeding in Feeding.allCases {
            let result = decodeAll(MessagePackHubProtocol().makeParser(), vector.frame + Self.trailing, feeding)
            #expect(result.messages.isEmpty, "\(feeding)")
            #expect(result.error == HubProtocolError(.invalidMessage, vector.error), "\(feeding)")
        }
    }
}

struct FramingVectorTests {
    struct VarIntCase: Decodable {
        var value: Int
        var hex: String
    }
    struct FrameCase: Decodable {
        var hex: String
        var frames: [String]
    }
    struct FrameError: Decodable {
        var hex: String
        var stream: String
        var error: String?
    }
    struct File: Decodable {
        var varint: [VarIntCase]
        var binaryFrames: [FrameCase]
        var binaryFrameErrors: [FrameError]
    }

    static let file: File = try! loadVector("framing.json")

    /// Splits `bytes` into frame bodies the way the MessagePack parser does.
    static func frames(_ bytes: [UInt8]) throws(HubProtocolError) -> (bodies: [[UInt8]], needMoreData: Bool) {
        var bodies: [[UInt8]] = []
        var offset = 0
        while offset < bytes.count {
            guard
                case .value(let length, let prefix) = try VarInt.read(
                    bytes.backDeployedSpan.extracting(offset..<bytes.count)
                ),
                bytes.count - offset - prefix >= length
            else { return (bodies, true) }
            bodies.append(Array(bytes[(offset + prefix)..<(offset + prefix + length)]))
            offset += prefix + length
        }
        return (bodies, false)
    }

    @Test func varInts() throws {
        for vector in Self.file.varint {
            #expect(hexString(VarInt.encode(vector.value)) == vector.hex)
            #expect(
                try VarInt.read(hexBytes(vector.hex).span) == .value(vector.value, length: hexBytes(vector.hex).count)
            )
            let truncated = Array(hexBytes(vector.hex).dropLast())
            #expect(try VarInt.read(truncated.span) == .needMoreData)
        }
    }

    @Test func binaryFrames() throws {
        for vector in Self.file.binaryFrames {
            let result = try Self.frames(hexBytes(vector.hex))
            #expect(result.bodies.map(hexString) == vector.frames.map { hexString(hexBytes($0)) })
            #expect(!result.needMoreData)
        }
    }

    @Test func binaryFrameErrors() {
        for vector in Self.file.binaryFrameErrors {
            let bytes = hexBytes(vector.hex)
            if let error = vector.error {
                #expect(throws: HubProtocolError(.messageTooLarge, error)) { _ = try Self.frames(bytes) }
                let result = decodeAll(MessagePackHubProtocol().makeParser(), bytes, .byteByByte)
                #expect(result.error == HubProtocolError(.messageTooLarge, error))
            } else {
                #expect((try? Self.frames(bytes))?.needMoreData == true, "\(vector.hex)")
            }
        }
    }
}
