import Testing
import TetherJSON
import TetherMessagePack
import TetherSignalR
import TetherTestSupport

/// `EncodedValue.decode` and `EncodedArguments.decode` throw `DecodingError` only, whichever path
/// (Codable, JSON fast path, MessagePack fast path) and whatever the type's initializer throws.
struct DecodeErrorTests {
    struct Refusal: Error, Equatable {}

    /// Reads itself on both fast paths and refuses every value with its own error.
    struct Refusing: Decodable, JSONDecodable, MessagePackDecodable {
        init(from decoder: any Decoder) throws { throw Refusal() }
        init(json reader: inout JSONReader) throws { throw Refusal() }
        init(messagePack reader: inout MessagePackReader) throws { throw Refusal() }
    }

    /// Only `Codable`, refusing with its own error.
    struct RefusingCodable: Decodable {
        init(from decoder: any Decoder) throws { throw Refusal() }
    }

    static func values() throws -> [EncodedValue] {
        [try EncodedValue(json: Array("[1]".utf8)), try EncodedValue(messagePack: [0x91, 0x01])]
    }

    @Test func anotherErrorBecomesDataCorruptedWithItUnderneath() throws {
        for value in try Self.values() {
            let typed: (EncodedValue) throws(DecodingError) -> Void = { value throws(DecodingError) in
                _ = try value.decode(Refusing.self)
            }
            let codable: (EncodedValue) throws(DecodingError) -> Void = { value throws(DecodingError) in
                _ = try value.decode(RefusingCodable.self)
            }
            for decode in [typed, codable] {
                do {
                    try decode(value)
                    Issue.record("decoded a refusing type")
                } catch {
                    guard case .dataCorrupted(let context) = error else {
                        Issue.record("expected dataCorrupted, got \(error)")
                        continue
                    }
                    #expect(context.underlyingError as? Refusal == Refusal())
                    #expect(context.debugDescription.contains("Refusing"))
                }
            }
        }
    }

    @Test func decodingErrorsPassUnchanged() throws {
        for value in try Self.values() {
            // An array is not a String: the decoders' own typeMismatch, not wrapped.
            do {
                _ = try value.decode(String.self)
                Issue.record("decoded an array as a String")
            } catch {
                guard case .typeMismatch = error else {
                    Issue.record("expected typeMismatch, got \(error)")
                    continue
                }
            }
            let arguments = EncodedArguments(encoding: value.encoding, values: [value])
            expectThrows(\DecodingError.kind, .dataCorrupted) { _ = try arguments.decode(Refusing.self, at: 0) }
            expectThrows(\DecodingError.kind, .dataCorrupted) { _ = try arguments.decode(RefusingCodable.self, at: 0) }
        }
    }
}
