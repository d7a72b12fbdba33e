/// The cost of `Codable` itself, measured in the same run: a `Decoder` whose keyed container
/// reads no input and returns constants, decoding the benchmark's `ParamData`. No decoder built
/// on `Codable` can decode `ParamData` faster than this; the benchmark reports it next to the
/// real decoders as the floor their typed decoding stands on.
struct ConstantDecoder: Decoder {
    /// A reference the container holds, as real containers hold their input.
    let bytes: [UInt8]

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(ConstantKeyedContainer<Key>(bytes: bytes))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw DecodingError.typeMismatch([Any].self, .init(codingPath: [], debugDescription: "constants only"))
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        throw DecodingError.typeMismatch(Any.self, .init(codingPath: [], debugDescription: "constants only"))
    }
}

/// Answers every key of the basic types with a constant (small strings, so no allocation).
struct ConstantKeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let bytes: [UInt8]

    var codingPath: [any CodingKey] { [] }
    var allKeys: [Key] { [] }

    func contains(_ key: Key) -> Bool { true }
    func decodeNil(forKey key: Key) throws -> Bool { false }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { true }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { "constant" }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { 1 }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { Int(bytes.count) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { Int64(bytes.count) }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        throw DecodingError.typeMismatch(type, .init(codingPath: [key], debugDescription: "constants only"))
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type,
        forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        KeyedDecodingContainer(ConstantKeyedContainer<NestedKey>(bytes: bytes))
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        throw DecodingError.typeMismatch([Any].self, .init(codingPath: [key], debugDescription: "constants only"))
    }

    func superDecoder() throws -> any Decoder { ConstantDecoder(bytes: bytes) }
    func superDecoder(forKey key: Key) throws -> any Decoder { ConstantDecoder(bytes: bytes) }
}

/// Decodes `count` `ParamData` values from constants; returns a checksum.
@inline(never)
func decodeConstantParamData(count: Int) throws -> Int {
    let bytes: [UInt8] = [1, 2, 3]
    var checksum = 0
    for _ in 0..<count {
        let value = try ParamData(from: ConstantDecoder(bytes: bytes))
        checksum &+= value.userId &+ value.id.utf8.count
    }
    return checksum
}
