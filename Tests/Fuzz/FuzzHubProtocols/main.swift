// libFuzzer target: every decoder that reads SignalR bytes from a peer. The first input byte
// picks the decoder and the chunk size, so that splits are exercised too. Any input must give
// messages or a typed error, never a crash or a hang.
import TetherCore
import TetherMessagePack
import TetherSignalR

@c(LLVMFuzzerTestOneInput)
func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let selector = bytes[0]
    let input = Array(bytes.dropFirst())
    let chunk = Int(selector >> 3) + 1
    switch selector & 7 {
    case 0: drive(JSONHubProtocol(maximumMessageSize: 4096).makeParser(), input, chunk: chunk)
    case 1: drive(MessagePackHubProtocol(maximumMessageSize: 4096).makeParser(), input, chunk: chunk)
    case 2: _ = try? HandshakeRequest.parse(input.span)
    case 3: _ = try? HandshakeResponse.parse(input.span)
    case 4: _ = try? Negotiate.parse(input)
    case 5:
        var reader = MessagePackReader(input, maximumDepth: 32)
        if let value = try? reader.readValue() {
            var out: [UInt8] = []
            _ = try? CanonicalJSON.appendMessagePack(value, to: &out)
        }
    case 6:
        if let value = try? EncodedValue(json: input) {
            _ = try? value.decode([String: Int].self)
            _ = try? value.decode([String].self)
            _ = try? CanonicalJSON.render(value)
        }
    default:
        if let value = try? EncodedValue(messagePack: input) {
            _ = try? value.decode([String: Int].self)
            _ = try? value.decode([Double].self)
            _ = try? CanonicalJSON.render(value)
            // The fast path and Codable must agree on every input: the same value or both an error.
            let fast = try? value.decode(Probe.self)
            let codable = try? viaCodable(value, Probe.self)
            if fast != codable {
                fatalError("fast path \(String(describing: fast)) != Codable \(String(describing: codable))")
            }
        }
    }
    return 0
}

/// A type with both decoding paths, written as the fast-path documentation recommends (the
/// first of duplicate keys wins, as it does for Codable).
struct Probe: Codable, Equatable, MessagePackDecodable {
    var name: String
    var count: Int
    var note: String?

    static let keys = KeySet(["name", "count", "note"])

    init(messagePack reader: inout MessagePackReader) throws {
        var name: String?
        var count: Int?
        var note: String?
        var found: UInt8 = 0
        for _ in 0..<(try reader.readMapHeader()) {
            guard let key = try reader.readKey(in: Self.keys), found & 1 << key == 0 else {
                try reader.skipValue()
                continue
            }
            found |= 1 << key
            switch key {
            case 0: name = try reader.readString()
            case 1: count = try reader.readInteger(Int.self)
            default: note = reader.readNilIfPresent() ? nil : try reader.readString()
            }
        }
        guard let name else { throw Self.keys.missingKey(0) }
        guard let count else { throw Self.keys.missingKey(1) }
        self.name = name
        self.count = count
        self.note = note
    }
}

/// Decodes through Codable (code generic over `Decodable` takes that path).
func viaCodable<T: Decodable>(_ value: EncodedValue, _ type: T.Type) throws -> T {
    try value.decode(type)
}

func drive<P: HubMessageParser>(_ parser: P, _ input: [UInt8], chunk: Int) {
    var parser = parser
    var offset = 0
    while offset < input.count {
        let end = min(offset + chunk, input.count)
        parser.append(input.span.extracting(offset..<end))
        offset = end
        while let message = try? parser.next() {
            _ = try? CanonicalJSON.render(message)
            if case .invocation(let invocation) = message {
                for argument in invocation.arguments { _ = try? argument.decode([String: String].self) }
            }
        }
    }
}
