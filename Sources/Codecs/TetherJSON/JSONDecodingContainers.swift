@_spi(TetherInternal) import TetherCore
@_spi(TetherInternal) import TetherText

/// The members of an object: the first members (with unescaped keys) are indexed at creation
/// (`MemberIndex`, inline), so lookups never rescan values; the rest are found by a scan that
/// starts where the index stops, or, for large objects, in a `MemberTable`. Not generic, so its
/// code is compiled once and specialized, whatever `CodingKey` type looks it up.
@_spi(TetherInternal) public struct JSONObjectIndex {
    let bytes: [UInt8]
    var index: MemberIndex
    /// The members that are not indexed, if any: where the first starts (found by a scan), or,
    /// when there are more than `MemberTable.scanLimit`, all of them by key. (One optional enum,
    /// the size of an optional offset: the container is copied on every lookup.)
    var overflow: Overflow?

    enum Overflow {
        case scan(from: Int)
        case table(MemberTable)

        var start: Int {
            switch self {
            case .scan(let start): start
            case .table(let table): table.start
            }
        }
    }

    init(bytes: [UInt8], position: Int) {
        self.bytes = bytes
        index = MemberIndex(base: position)
        // The object was validated, so the walk only needs to find each key and value start.
        let span = bytes.backDeployedSpan
        let end = bytes.count
        var offset = JSONScanner.skipWhitespace(span, position + 1, end)
        if offset < end, span[offset] == UInt8(ascii: "}") { return }
        while offset < end {
            let memberStart = offset
            guard let (key, afterKey) = try? JSONScanner.readString(span, offset, end, validated: true) else { return }
            let valueStart = JSONScanner.skipWhitespace(span, JSONScanner.skipWhitespace(span, afterKey, end) + 1, end)
            guard !key.hasEscapes,
                index.append(
                    keyStart: key.contents.lowerBound,
                    keyLength: key.contents.count,
                    valueStart: valueStart,
                    in: span
                ),
                let afterValue = try? JSONScanner.skipValue(
                    span,
                    valueStart,
                    end,
                    depth: 0,
                    maximumDepth: .max,
                    validated: true
                )
            else {
                overflow = Self.table(bytes, from: memberStart).map { .table($0) } ?? .scan(from: memberStart)
                return
            }
            offset = JSONScanner.skipWhitespace(span, afterValue, end)
            guard offset < end, span[offset] == UInt8(ascii: ",") else { return }
            offset = JSONScanner.skipWhitespace(span, offset + 1, end)
        }
    }

    struct Entry {
        var key: JSONStringToken
        var valueStart: Int
    }

    /// Reads `"key": value` of a validated object, leaving the scanner after the value.
    static func readMember(_ scanner: inout JSONScanner) -> Entry? {
        _ = scanner.peek()
        guard let key = try? scanner.readString(), scanner.consume(UInt8(ascii: ":")) else { return nil }
        _ = scanner.peek()
        let valueStart = scanner.position
        guard (try? scanner.skipValue()) != nil else { return nil }
        return Entry(key: key, valueStart: valueStart)
    }

    /// A table of the members from `start`, if there are more than `MemberTable.scanLimit`.
    static func table(_ bytes: [UInt8], from start: Int) -> MemberTable? {
        var scanner = JSONScanner(validated: bytes, range: start..<bytes.count)
        var members = 0
        repeat {
            guard readMember(&scanner) != nil else { return nil }
            members += 1
        } while members <= MemberTable.scanLimit && scanner.consume(UInt8(ascii: ","))
        guard members > MemberTable.scanLimit else { return nil }
        var all: [(name: String?, integer: Int?, valueStart: Int)] = []
        scanner = JSONScanner(validated: bytes, range: start..<bytes.count)
        repeat {
            guard let entry = readMember(&scanner) else { break }
            all.append((JSONScanner.string(bytes, entry.key), nil, entry.valueStart))
        } while scanner.consume(UInt8(ascii: ","))
        return MemberTable(all, start: start)
    }

    /// The offset of the value of member `name`, or nil.
    func valueStart(_ name: String) -> Int? {
        name.withUTF8Span { utf8 in
            if let start = index.valueStart(forKey: utf8, in: bytes.backDeployedSpan) { return start }
            guard let overflow else { return nil }
            if case .table(let table) = overflow { return table.byName[name] }
            let overflowStart = overflow.start
            var scanner = JSONScanner(validated: bytes, range: overflowStart..<bytes.count)
            repeat {
                guard let entry = Self.readMember(&scanner) else { return nil }
                if JSONScanner.stringEquals(bytes, entry.key, utf8) { return entry.valueStart }
            } while scanner.consume(UInt8(ascii: ","))
            return nil
        }
    }

    /// Every member name, in order.
    var names: [String] {
        var names: [String] = []
        for position in 0..<index.count {
            let key = index.member(position).key
            let isASCII = !ByteScanning.textClass(in: bytes.backDeployedSpan, from: key.lowerBound, to: key.upperBound)
                .hasNonASCII
            names.append(JSONScanner.string(bytes, JSONStringToken(contents: key, hasEscapes: false, isASCII: isASCII)))
        }
        if let overflow {
            var scanner = JSONScanner(validated: bytes, range: overflow.start..<bytes.count)
            repeat {
                guard let entry = Self.readMember(&scanner) else { break }
                names.append(JSONScanner.string(bytes, entry.key))
            } while scanner.consume(UInt8(ascii: ","))
        }
        return names
    }
}

/// An object seen as a keyed container (a thin generic shell around `JSONObjectIndex`).
struct JSONKeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let index: JSONObjectIndex

    var codingPath: [any CodingKey] { [] }

    init(bytes: [UInt8], position: Int) {
        index = JSONObjectIndex(bytes: bytes, position: position)
    }

    func valueStart(_ key: Key) -> Int? { index.valueStart(key.stringValue) }

    var allKeys: [Key] { index.names.compactMap(Key.init(stringValue:)) }

    func contains(_ key: Key) -> Bool { valueStart(key) != nil }

    func valueDecoder(_ key: Key) throws -> JSONValueDecoder {
        guard let start = valueStart(key) else {
            throw DecodingError.keyNotFound(
                key,
                .init(codingPath: [], debugDescription: "No value for key '\(key.stringValue)'.")
            )
        }
        return JSONValueDecoder(bytes: index.bytes, position: start)
    }

    /// Reads the value for `key` with `read` straight from the bytes (no decoder value in between).
    @inline(__always)
    func read<T>(_ key: Key, _ read: ([UInt8], Int) throws -> T) throws -> T {
        do {
            guard let start = valueStart(key) else {
                throw DecodingError.keyNotFound(
                    key,
                    .init(codingPath: [], debugDescription: "No value for key '\(key.stringValue)'.")
                )
            }
            return try read(index.bytes, start)
        } catch {
            throw CodingPathPrefix.prefixing(error, with: key)
        }
    }

    func decodeNil(forKey key: Key) throws -> Bool { try valueDecoder(key).decodeNil() }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
        do { return try valueDecoder(key).decode(type) } catch { throw CodingPathPrefix.prefixing(error, with: key) }
    }

    func decode(_ type: String.Type, forKey key: Key) throws -> String {
        try read(key) { bytes, start in try JSONValueDecoder.string(in: bytes, at: start) }
    }

    func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
        do { return try valueDecoder(key).decode(type) } catch { throw CodingPathPrefix.prefixing(error, with: key) }
    }

    func decode(_ type: Float.Type, forKey key: Key) throws -> Float {
        do { return try valueDecoder(key).decode(type) } catch { throw CodingPathPrefix.prefixing(error, with: key) }
    }

    func decode(_ type: Int.Type, forKey key: Key) throws -> Int {
        try read(key) { bytes, start in try JSONValueDecoder.integer(Int.self, in: bytes, at: start) }
    }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 {
        try read(key) { bytes, start in try JSONValueDecoder.integer(Int8.self, in: bytes, at: start) }
    }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 {
        try read(key) { bytes, start in try JSONValueDecoder.integer(Int16.self, in: bytes, at: start) }
    }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 {
        try read(key) { bytes, start in try JSONValueDecoder.integer(Int32.self, in: bytes, at: start) }
    }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 {
        try read(key) { bytes, start in try JSONValueDecoder.integer(Int64.self, in: bytes, at: start) }
    }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt {
        try read(key) { bytes, start in try JSONValueDecoder.integer(UInt.self, in: bytes, at: start) }
    }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 {
        try read(key) { bytes, start in try JSONValueDecoder.integer(UInt8.self, in: bytes, at: start) }
    }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 {
        try read(key) { bytes, start in try JSONValueDecoder.integer(UInt16.self, in: bytes, at: start) }
    }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 {
        try read(key) { bytes, start in try JSONValueDecoder.integer(UInt32.self, in: bytes, at: start) }
    }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 {
        try read(key) { bytes, start in try JSONValueDecoder.integer(UInt64.self, in: bytes, at: start) }
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        do { return try valueDecoder(key).decode(type) } catch { throw CodingPathPrefix.prefixing(error, with: key) }
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type,
        forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        do { return try valueDecoder(key).container(keyedBy: type) } catch {
            throw CodingPathPrefix.prefixing(error, with: key)
        }
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        do { return try valueDecoder(key).unkeyedContainer() } catch {
            throw CodingPathPrefix.prefixing(error, with: key)
        }
    }

    func superDecoder() throws -> any Decoder {
        guard let key = Key(stringValue: "super") else {
            throw DecodingError.keyNotFound(
                CodingIndexKey(0),
                .init(codingPath: [], debugDescription: "No 'super' key.")
            )
        }
        return try valueDecoder(key)
    }

    func superDecoder(forKey key: Key) throws -> any Decoder { try valueDecoder(key) }
}

/// An array seen as an unkeyed container.
struct JSONUnkeyedContainer: UnkeyedDecodingContainer {
    let bytes: [UInt8]
    /// Offset of the next element (or of the closing bracket).
    var position: Int
    var currentIndex = 0
    var isAtEnd: Bool

    var codingPath: [any CodingKey] { [] }
    var count: Int? {
        var scanner = JSONScanner(validated: bytes, range: position..<bytes.count)
        var remaining = 0
        while scanner.peek() != UInt8(ascii: "]"), (try? scanner.skipValue()) != nil {
            remaining += 1
            _ = scanner.consume(UInt8(ascii: ","))
        }
        return currentIndex + remaining
    }

    init(bytes: [UInt8], position: Int) {
        self.bytes = bytes
        var scanner = JSONScanner(validated: bytes, range: (position + 1)..<bytes.count)
        isAtEnd = scanner.peek() == UInt8(ascii: "]")
        self.position = scanner.position
    }

    mutating func next<T>(_ type: T.Type, _ body: (JSONValueDecoder) throws -> T) throws -> T {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                type,
                .init(codingPath: [CodingIndexKey(currentIndex)], debugDescription: "Unkeyed container is at end.")
            )
        }
        let value: T
        do {
            value = try body(JSONValueDecoder(bytes: bytes, position: position))
        } catch {
            throw CodingPathPrefix.prefixing(error, with: CodingIndexKey(currentIndex))
        }
        var scanner = JSONScanner(validated: bytes, range: position..<bytes.count)
        try? scanner.skipValue()
        _ = scanner.consume(UInt8(ascii: ","))
        isAtEnd = scanner.peek() == UInt8(ascii: "]")
        position = scanner.position
        currentIndex += 1
        return value
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, bytes[position] == UInt8(ascii: "n") else { return false }
        _ = try next(Bool.self) { _ in true }
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next(type) { try $0.decode(type) } }
    mutating func decode(_ type: String.Type) throws -> String { try next(type) { try $0.decode(type) } }
    mutating func decode(_ type: Double.Type) throws -> Double { try next(type) { try $0.decode(type) } }
    mutating func decode(_ type: Float.Type) throws -> Float { try next(type) { try $0.decode(type) } }
    mutating func decode(_ type: Int.Type) throws -> Int { try next(type) { try $0.decode(type) } }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next(type) { try $0.decode(type) } }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next(type) { try $0.decode(type) } }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next(type) { try $0.decode(type) } }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next(type) { try $0.decode(type) } }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next(type) { try $0.decode(type) } }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next(type) { try $0.decode(type) } }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next(type) { try $0.decode(type) } }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next(type) { try $0.decode(type) } }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next(type) { try $0.decode(type) } }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next(type) { try $0.decode(type) } }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type
    ) throws -> KeyedDecodingContainer<NestedKey> {
        try next(KeyedDecodingContainer<NestedKey>.self) { try $0.container(keyedBy: type) }
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try next((any UnkeyedDecodingContainer).self) { try $0.unkeyedContainer() }
    }

    mutating func superDecoder() throws -> any Decoder {
        try next((any Decoder).self) { $0 }
    }
}
