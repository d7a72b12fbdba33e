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
struct JSONKeyedContainer<Key: CodingKey>: ValueKeyedDecoding {
    let index: JSONObjectIndex

    init(bytes: [UInt8], position: Int) {
        index = JSONObjectIndex(bytes: bytes, position: position)
    }

    func valueStart(_ key: Key) -> Int? { index.valueStart(key.stringValue) }

    var allKeys: [Key] { index.names.compactMap(Key.init(stringValue:)) }

    func valueDecoder(at start: Int) -> JSONValueDecoder { JSONValueDecoder(bytes: index.bytes, position: start) }

    /// Reads the value for `key` with `read` straight from the bytes (no decoder value in between).
    @inline(__always)
    func read<T>(_ key: Key, _ read: ([UInt8], Int) throws -> T) throws -> T {
        do {
            let start = try valueOffset(key)
            return try read(index.bytes, start)
        } catch {
            throw CodingPathPrefix.prefixing(error, with: key)
        }
    }

    func decode(_ type: String.Type, forKey key: Key) throws -> String {
        try read(key) { bytes, start in try JSONValueDecoder.string(in: bytes, at: start) }
    }

    @inline(__always)
    func decodeInteger<T: FixedWidthInteger>(_ type: T.Type, forKey key: Key) throws -> T {
        try read(key) { bytes, start in try JSONValueDecoder.integer(type, in: bytes, at: start) }
    }

}

/// An array seen as an unkeyed container.
struct JSONUnkeyedContainer: ElementUnkeyedDecoding {
    let bytes: [UInt8]
    /// Offset of the next element (or of the closing bracket).
    var position: Int
    var currentIndex = 0
    var isAtEnd: Bool

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

    var element: JSONValueDecoder { JSONValueDecoder(bytes: bytes, position: position) }

    mutating func skipElement() {
        var scanner = JSONScanner(validated: bytes, range: position..<bytes.count)
        try? scanner.skipValue()
        _ = scanner.consume(UInt8(ascii: ","))
        isAtEnd = scanner.peek() == UInt8(ascii: "]")
        position = scanner.position
        currentIndex += 1
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, bytes[position] == UInt8(ascii: "n") else { return false }
        _ = try next(Bool.self) { _ in true }
        return true
    }
}
