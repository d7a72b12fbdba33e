// Codable asks every container for fifteen overloads (one per primitive type) that a codec
// implements with a handful of operations: its value coders read and write integers of any
// width through one generic method, and its keyed and unkeyed containers hand each entry or
// element to a value coder. These protocols write the overloads once for every codec (JSON and
// MessagePack); the defaults are inlinable, so each codec's containers get them specialized for
// their own types, as if written out there.

/// Tether's coders keep no coding path while they run (a container prefixes its key to the path
/// of an error on its way out, `CodingPathPrefix`: no allocation per nested value) and take no
/// user info.
@_spi(TetherInternal) public protocol PathlessCoding {}

extension PathlessCoding {
    @_spi(TetherInternal) @inlinable @inline(__always) public var codingPath: [any CodingKey] { [] }
    @_spi(TetherInternal) @inlinable @inline(__always) public var userInfo: [CodingUserInfoKey: Any] { [:] }
}

// MARK: - Encoding

/// A single-value encoder (a codec's value encoder) that writes every integer width through
/// `encodeInteger`.
@_spi(TetherInternal) public protocol IntegerValueEncoding: SingleValueEncodingContainer, PathlessCoding {
    /// Writes `value` (after specialization, a signed or unsigned 64-bit write).
    func encodeInteger<T: FixedWidthInteger>(_ value: T)
}

extension IntegerValueEncoding {
    @_spi(TetherInternal) @inlinable @inline(__always) public func encode(_ value: Int) { encodeInteger(value) }
    @_spi(TetherInternal) @inlinable @inline(__always) public func encode(_ value: Int8) { encodeInteger(value) }
    @_spi(TetherInternal) @inlinable @inline(__always) public func encode(_ value: Int16) { encodeInteger(value) }
    @_spi(TetherInternal) @inlinable @inline(__always) public func encode(_ value: Int32) { encodeInteger(value) }
    @_spi(TetherInternal) @inlinable @inline(__always) public func encode(_ value: Int64) { encodeInteger(value) }
    @_spi(TetherInternal) @inlinable @inline(__always) public func encode(_ value: UInt) { encodeInteger(value) }
    @_spi(TetherInternal) @inlinable @inline(__always) public func encode(_ value: UInt8) { encodeInteger(value) }
    @_spi(TetherInternal) @inlinable @inline(__always) public func encode(_ value: UInt16) { encodeInteger(value) }
    @_spi(TetherInternal) @inlinable @inline(__always) public func encode(_ value: UInt32) { encodeInteger(value) }
    @_spi(TetherInternal) @inlinable @inline(__always) public func encode(_ value: UInt64) { encodeInteger(value) }
}

/// A keyed encoding container that starts each entry (its key written) and hands the value to
/// the codec's value encoder.
@_spi(TetherInternal) public protocol EntryKeyedEncoding: KeyedEncodingContainerProtocol, PathlessCoding {
    associatedtype Entry: Encoder & SingleValueEncodingContainer
    /// Starts the entry for `key` and returns the encoder for its value.
    func entry(_ key: Key) -> Entry
}

extension EntryKeyedEncoding {
    @_spi(TetherInternal) @inlinable @inline(__always) public func encodeEntry(
        _ key: Key,
        _ write: (inout Entry) throws -> Void
    ) rethrows {
        var entry = entry(key)
        try write(&entry)
    }

    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encodeNil(forKey key: Key) throws {
        try encodeEntry(key) { try $0.encodeNil() }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encode(
        _ value: Bool,
        forKey key: Key
    ) throws {
        try encodeEntry(key) { try $0.encode(value) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encode(
        _ value: String,
        forKey key: Key
    ) throws {
        try encodeEntry(key) { try $0.encode(value) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encode(
        _ value: Double,
        forKey key: Key
    ) throws {
        try encodeEntry(key) { try $0.encode(value) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encode(
        _ value: Float,
        forKey key: Key
    ) throws {
        try encodeEntry(key) { try $0.encode(value) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encode(_ value: Int, forKey key: Key) throws
    {
        try encodeEntry(key) { try $0.encode(value) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encode(
        _ value: Int8,
        forKey key: Key
    ) throws {
        try encodeEntry(key) { try $0.encode(value) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encode(
        _ value: Int16,
        forKey key: Key
    ) throws {
        try encodeEntry(key) { try $0.encode(value) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encode(
        _ value: Int32,
        forKey key: Key
    ) throws {
        try encodeEntry(key) { try $0.encode(value) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encode(
        _ value: Int64,
        forKey key: Key
    ) throws {
        try encodeEntry(key) { try $0.encode(value) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encode(
        _ value: UInt,
        forKey key: Key
    ) throws {
        try encodeEntry(key) { try $0.encode(value) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encode(
        _ value: UInt8,
        forKey key: Key
    ) throws {
        try encodeEntry(key) { try $0.encode(value) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encode(
        _ value: UInt16,
        forKey key: Key
    ) throws {
        try encodeEntry(key) { try $0.encode(value) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encode(
        _ value: UInt32,
        forKey key: Key
    ) throws {
        try encodeEntry(key) { try $0.encode(value) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encode(
        _ value: UInt64,
        forKey key: Key
    ) throws {
        try encodeEntry(key) { try $0.encode(value) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encode<T: Encodable>(
        _ value: T,
        forKey key: Key
    ) throws {
        try encodeEntry(key) { try $0.encode(value) }
    }

    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type,
        forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        entry(key).container(keyedBy: keyType)
    }

    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func nestedUnkeyedContainer(
        forKey key: Key
    ) -> any UnkeyedEncodingContainer {
        entry(key).unkeyedContainer()
    }

    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func superEncoder(forKey key: Key) -> any Encoder
    { entry(key) }
}

/// An unkeyed encoding container that starts each element and hands it to the codec's value
/// encoder.
@_spi(TetherInternal) public protocol ElementUnkeyedEncoding: UnkeyedEncodingContainer, PathlessCoding {
    associatedtype Element: Encoder & SingleValueEncodingContainer
    /// Starts the next element and returns the encoder for it.
    func element() -> Element
}

extension ElementUnkeyedEncoding {
    @_spi(TetherInternal) @inlinable @inline(__always) public func encodeElement(
        _ write: (inout Element) throws -> Void
    ) rethrows {
        var element = element()
        try write(&element)
    }

    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encodeNil() throws {
        try encodeElement { try $0.encodeNil() }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encode(_ value: Bool) throws {
        try encodeElement { try $0.encode(value) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encode(_ value: String) throws {
        try encodeElement { try $0.encode(value) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encode(_ value: Double) throws {
        try encodeElement { try $0.encode(value) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encode(_ value: Float) throws {
        try encodeElement { try $0.encode(value) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encode(_ value: Int) throws {
        try encodeElement { try $0.encode(value) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encode(_ value: Int8) throws {
        try encodeElement { try $0.encode(value) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encode(_ value: Int16) throws {
        try encodeElement { try $0.encode(value) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encode(_ value: Int32) throws {
        try encodeElement { try $0.encode(value) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encode(_ value: Int64) throws {
        try encodeElement { try $0.encode(value) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encode(_ value: UInt) throws {
        try encodeElement { try $0.encode(value) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encode(_ value: UInt8) throws {
        try encodeElement { try $0.encode(value) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encode(_ value: UInt16) throws {
        try encodeElement { try $0.encode(value) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encode(_ value: UInt32) throws {
        try encodeElement { try $0.encode(value) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encode(_ value: UInt64) throws {
        try encodeElement { try $0.encode(value) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func encode<T: Encodable>(_ value: T) throws {
        try encodeElement { try $0.encode(value) }
    }

    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type
    ) -> KeyedEncodingContainer<NestedKey> {
        element().container(keyedBy: keyType)
    }

    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func nestedUnkeyedContainer()
        -> any UnkeyedEncodingContainer
    {
        element().unkeyedContainer()
    }

    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func superEncoder() -> any Encoder { element() }
}

// MARK: - Decoding

/// A single-value decoder (a codec's value decoder) that reads every integer width through
/// `decodeInteger`, which checks that the value fits.
@_spi(TetherInternal) public protocol IntegerValueDecoding: SingleValueDecodingContainer, PathlessCoding {
    /// The value as a `T`, a type mismatch if it is not an integer or does not fit.
    func decodeInteger<T: FixedWidthInteger>(_ type: T.Type) throws -> T
}

extension IntegerValueDecoding {
    @_spi(TetherInternal) @inlinable @inline(__always) public func decode(_ type: Int.Type) throws -> Int {
        try decodeInteger(type)
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public func decode(_ type: Int8.Type) throws -> Int8 {
        try decodeInteger(type)
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public func decode(_ type: Int16.Type) throws -> Int16 {
        try decodeInteger(type)
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public func decode(_ type: Int32.Type) throws -> Int32 {
        try decodeInteger(type)
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public func decode(_ type: Int64.Type) throws -> Int64 {
        try decodeInteger(type)
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public func decode(_ type: UInt.Type) throws -> UInt {
        try decodeInteger(type)
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public func decode(_ type: UInt8.Type) throws -> UInt8 {
        try decodeInteger(type)
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public func decode(_ type: UInt16.Type) throws -> UInt16 {
        try decodeInteger(type)
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public func decode(_ type: UInt32.Type) throws -> UInt32 {
        try decodeInteger(type)
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public func decode(_ type: UInt64.Type) throws -> UInt64 {
        try decodeInteger(type)
    }
}

/// A keyed decoding container that hands each value to the codec's value decoder (its key
/// prefixed to the coding path of an error), and reads every integer width through
/// `decodeInteger(_:forKey:)`.
@_spi(TetherInternal) public protocol ValueKeyedDecoding: KeyedDecodingContainerProtocol, PathlessCoding {
    associatedtype Value: Decoder & SingleValueDecodingContainer
    /// Where the value of `key` starts, nil when the container has no such key.
    func valueStart(_ key: Key) -> Int?
    /// The decoder for the value that starts at `start`.
    func valueDecoder(at start: Int) -> Value
    /// The value for `key` as a `T`: `keyNotFound`, or a type mismatch if it is not an integer or
    /// does not fit.
    func decodeInteger<T: FixedWidthInteger>(_ type: T.Type, forKey key: Key) throws -> T
}

extension ValueKeyedDecoding {
    @_spi(TetherInternal) @inlinable @inline(__always) public func contains(_ key: Key) -> Bool {
        valueStart(key) != nil
    }

    /// Where the value of `key` starts, `keyNotFound` when the container has no such key.
    @_spi(TetherInternal) @inlinable @inline(__always) public func valueOffset(_ key: Key) throws -> Int {
        guard let start = valueStart(key) else { throw DecodingError.noValue(for: key) }
        return start
    }

    /// The decoder for the value of `key`, `keyNotFound` when the container has no such key.
    @_spi(TetherInternal) @inlinable @inline(__always) public func valueDecoder(_ key: Key) throws -> Value {
        valueDecoder(at: try valueOffset(key))
    }

    /// Decodes the value of `key` with `body`, prefixing `key` to the path of an error.
    @_spi(TetherInternal) @inlinable @inline(__always) public func decodeValue<T>(
        _ key: Key,
        _ body: (Value) throws -> T
    ) throws -> T {
        do { return try body(valueDecoder(key)) } catch { throw CodingPathPrefix.prefixing(error, with: key) }
    }

    @_spi(TetherInternal) @inlinable @inline(__always) public func decodeNil(forKey key: Key) throws -> Bool {
        try decodeValue(key) { $0.decodeNil() }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public func decode(
        _ type: Bool.Type,
        forKey key: Key
    ) throws -> Bool {
        try decodeValue(key) { try $0.decode(type) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public func decode(
        _ type: Double.Type,
        forKey key: Key
    ) throws -> Double {
        try decodeValue(key) { try $0.decode(type) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public func decode(
        _ type: Float.Type,
        forKey key: Key
    ) throws -> Float {
        try decodeValue(key) { try $0.decode(type) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public func decode<T: Decodable>(
        _ type: T.Type,
        forKey key: Key
    ) throws -> T {
        try decodeValue(key) { try $0.decode(type) }
    }

    @_spi(TetherInternal) @inlinable @inline(__always) public func decode(
        _ type: Int.Type,
        forKey key: Key
    ) throws -> Int {
        try decodeInteger(type, forKey: key)
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public func decode(
        _ type: Int8.Type,
        forKey key: Key
    ) throws -> Int8 {
        try decodeInteger(type, forKey: key)
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public func decode(
        _ type: Int16.Type,
        forKey key: Key
    ) throws -> Int16 {
        try decodeInteger(type, forKey: key)
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public func decode(
        _ type: Int32.Type,
        forKey key: Key
    ) throws -> Int32 {
        try decodeInteger(type, forKey: key)
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public func decode(
        _ type: Int64.Type,
        forKey key: Key
    ) throws -> Int64 {
        try decodeInteger(type, forKey: key)
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public func decode(
        _ type: UInt.Type,
        forKey key: Key
    ) throws -> UInt {
        try decodeInteger(type, forKey: key)
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public func decode(
        _ type: UInt8.Type,
        forKey key: Key
    ) throws -> UInt8 {
        try decodeInteger(type, forKey: key)
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public func decode(
        _ type: UInt16.Type,
        forKey key: Key
    ) throws -> UInt16 {
        try decodeInteger(type, forKey: key)
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public func decode(
        _ type: UInt32.Type,
        forKey key: Key
    ) throws -> UInt32 {
        try decodeInteger(type, forKey: key)
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public func decode(
        _ type: UInt64.Type,
        forKey key: Key
    ) throws -> UInt64 {
        try decodeInteger(type, forKey: key)
    }

    @_spi(TetherInternal) @inlinable @inline(__always) public func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type,
        forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        try decodeValue(key) { try $0.container(keyedBy: type) }
    }

    @_spi(TetherInternal) @inlinable @inline(__always) public func nestedUnkeyedContainer(
        forKey key: Key
    ) throws -> any UnkeyedDecodingContainer {
        try decodeValue(key) { try $0.unkeyedContainer() }
    }

    @_spi(TetherInternal) @inlinable @inline(__always) public func superDecoder() throws -> any Decoder {
        guard let key = Key(stringValue: "super") else {
            throw DecodingError.keyNotFound(
                CodingIndexKey(0),
                .init(codingPath: [], debugDescription: "No 'super' key.")
            )
        }
        return try valueDecoder(key)
    }

    @_spi(TetherInternal) @inlinable @inline(__always) public func superDecoder(forKey key: Key) throws -> any Decoder {
        try valueDecoder(key)
    }
}

extension DecodingError {
    /// `keyNotFound` for `key`, as the codecs' keyed containers report a missing key.
    @_spi(TetherInternal) @inlinable @inline(__always) public static func noValue(
        for key: some CodingKey
    ) -> DecodingError {
        .keyNotFound(key, .init(codingPath: [], debugDescription: "No value for key '\(key.stringValue)'."))
    }
}

/// An unkeyed decoding container that hands each element to the codec's value decoder.
@_spi(TetherInternal) public protocol ElementUnkeyedDecoding: UnkeyedDecodingContainer, PathlessCoding {
    associatedtype Element: Decoder & SingleValueDecodingContainer
    /// The decoder for the element at the current position (only called when not `isAtEnd`).
    var element: Element { get }
    /// Moves past the current element (and counts it in `currentIndex`).
    mutating func skipElement()
}

extension ElementUnkeyedDecoding {
    /// Decodes the next element with `body` and moves past it (its index prefixed to the coding
    /// path of an error; `valueNotFound` at the end).
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func next<T>(
        _ type: T.Type,
        _ body: (Element) throws -> T
    ) throws -> T {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                type,
                .init(codingPath: [CodingIndexKey(currentIndex)], debugDescription: "Unkeyed container is at end.")
            )
        }
        let value: T
        do {
            value = try body(element)
        } catch {
            throw CodingPathPrefix.prefixing(error, with: CodingIndexKey(currentIndex))
        }
        skipElement()
        return value
    }

    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func decode(_ type: Bool.Type) throws -> Bool {
        try next(type) { try $0.decode(type) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func decode(_ type: String.Type) throws -> String
    {
        try next(type) { try $0.decode(type) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func decode(_ type: Double.Type) throws -> Double
    {
        try next(type) { try $0.decode(type) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func decode(_ type: Float.Type) throws -> Float {
        try next(type) { try $0.decode(type) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func decode(_ type: Int.Type) throws -> Int {
        try next(type) { try $0.decode(type) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func decode(_ type: Int8.Type) throws -> Int8 {
        try next(type) { try $0.decode(type) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func decode(_ type: Int16.Type) throws -> Int16 {
        try next(type) { try $0.decode(type) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func decode(_ type: Int32.Type) throws -> Int32 {
        try next(type) { try $0.decode(type) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func decode(_ type: Int64.Type) throws -> Int64 {
        try next(type) { try $0.decode(type) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func decode(_ type: UInt.Type) throws -> UInt {
        try next(type) { try $0.decode(type) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func decode(_ type: UInt8.Type) throws -> UInt8 {
        try next(type) { try $0.decode(type) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func decode(_ type: UInt16.Type) throws -> UInt16
    {
        try next(type) { try $0.decode(type) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func decode(_ type: UInt32.Type) throws -> UInt32
    {
        try next(type) { try $0.decode(type) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func decode(_ type: UInt64.Type) throws -> UInt64
    {
        try next(type) { try $0.decode(type) }
    }
    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func decode<T: Decodable>(
        _ type: T.Type
    ) throws -> T {
        try next(type) { try $0.decode(type) }
    }

    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type
    ) throws -> KeyedDecodingContainer<NestedKey> {
        try next(KeyedDecodingContainer<NestedKey>.self) { try $0.container(keyedBy: type) }
    }

    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func nestedUnkeyedContainer() throws
        -> any UnkeyedDecodingContainer
    {
        try next((any UnkeyedDecodingContainer).self) { try $0.unkeyedContainer() }
    }

    @_spi(TetherInternal) @inlinable @inline(__always) public mutating func superDecoder() throws -> any Decoder {
        try next((any Decoder).self) { $0 }
    }
}

extension CodingKey {
    /// The key `superDecoder()` reads, "super"; `keyNotFound` for a key type that has no such key.
    package static func superKey() throws -> Self {
        guard let key = Self(stringValue: "super") else {
            throw DecodingError.keyNotFound(
                CodingIndexKey(0),
                .init(codingPath: [], debugDescription: "No 'super' key.")
            )
        }
        return key
    }
}
