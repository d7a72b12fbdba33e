@_spi(TetherInternal) import TetherCore
@_spi(TetherInternal) import TetherText

/// The members of a map: string keys of the first members are indexed at creation
/// (`MemberIndex`, inline), so lookups never rescan values; the rest (and integer keys) are
/// found by a scan that starts where the index stops, or, for large maps, in a `MemberTable`.
/// Not generic, so that its code is compiled once and specialized, whatever `CodingKey` type
/// looks it up.
struct MessagePackMapIndex {
    let bytes: [UInt8]
    let count: Int
    var index: MemberIndex
    /// Where the first member that is not indexed starts.
    var overflowStart: Int
    /// The members past the index by key, when there are more than `MemberTable.scanLimit`.
    /// (It costs every lookup about 3 % of MessagePack decoding, since the container is copied
    /// on each; folding it into one enum with `overflowStart` cost the same.)
    var table: MemberTable?

    init(bytes: [UInt8], position: Int) throws {
        self.bytes = bytes
        var reader = MessagePackReader(bytes, range: position..<bytes.count)
        count = try convertingErrors([String: Any].self) { () throws(MessagePackError) in try reader.readMapHeader() }
        index = MemberIndex(base: position)
        overflowStart = reader.position
        // Fast path for the common shape (short string keys, scalar values), straight on the
        // bytes; anything else continues in the general loop below.
        let span = bytes.backDeployedSpan
        var offset = reader.position
        while index.count < count, offset < span.count {
            let keyByte = span[offset]
            guard keyByte >= 0xa0 && keyByte <= 0xbf else { break }
            let keyStart = offset + 1
            let keyLength = Int(keyByte & 0x1f)
            guard let valueEnd = Self.endOfScalar(span, keyStart + keyLength), valueEnd <= span.count,
                Self.isValidKey(span, keyStart, keyLength),
                index.append(keyStart: keyStart, keyLength: keyLength, valueStart: keyStart + keyLength, in: span)
            else { break }
            offset = valueEnd
        }
        reader.position = offset
        overflowStart = offset
        var scanned = index.count
        while index.count < count {
            let entry = try Self.readEntry(&reader)
            scanned += 1
            guard entry.keyLength >= 0,
                index.append(
                    keyStart: entry.keyStart,
                    keyLength: entry.keyLength,
                    valueStart: entry.valueStart,
                    in: bytes.backDeployedSpan
                )
            else { break }
            overflowStart = reader.position
        }
        // Every key is checked now, so that a key that is not UTF-8 is an error rather than
        // silently missing from `allKeys`; past the scan limit the members go into a table.
        if count - index.count > MemberTable.scanLimit {
            table = try Self.table(bytes, from: overflowStart, members: count - index.count)
        } else {
            while scanned < count {
                _ = try Self.readEntry(&reader)
                scanned += 1
            }
        }
    }

    /// Whether a string key's bytes are UTF-8 (keys are short and almost always ASCII).
    @inline(__always)
    static func isValidKey(_ span: Span<UInt8>, _ start: Int, _ length: Int) -> Bool {
        !ByteScanning.textClass(in: span, from: start, to: start + length).hasNonASCII
            || UTF8Validation.check(span.extracting(start..<(start + length))) != .invalid
    }

    /// The end of the scalar (nil, bool, number, str, bin) starting at `offset` of validated
    /// bytes, or nil for containers and extensions.
    @inline(__always)
    static func endOfScalar(_ span: Span<UInt8>, _ offset: Int) -> Int? {
        guard offset < span.count else { return nil }
        let byte = span[offset]
        switch byte {
        case 0x00...0x7f, 0xe0...0xff, 0xc0, 0xc2, 0xc3: return offset + 1
        case 0xa0...0xbf: return offset + 1 + Int(byte & 0x1f)
        case 0xcc, 0xd0: return offset + 2
        case 0xcd, 0xd1: return offset + 3
        case 0xca, 0xce, 0xd2: return offset + 5
        case 0xcb, 0xcf, 0xd3: return offset + 9
        case 0xd9, 0xc4:
            guard offset + 1 < span.count else { return nil }
            return offset + 2 + Int(span[offset + 1])
        case 0xda, 0xc5:
            guard offset + 2 < span.count else { return nil }
            return offset + 3 + (Int(span[offset + 1]) << 8 | Int(span[offset + 2]))
        default: return nil
        }
    }

    struct Entry {
        /// Start of the key's UTF-8 bytes, or the integer key itself when `keyLength < 0`.
        var keyStart: Int
        var keyLength: Int
        var valueStart: Int
    }

    /// Reads one key and skips its value (the input's structure was validated, so reads only
    /// fail on keys that are neither strings nor integers, or not UTF-8).
    static func readEntry(_ reader: inout MessagePackReader) throws -> Entry {
        let keyStart: Int
        let keyLength: Int
        do throws(MessagePackError) {
            if try reader.peekType() == .integer {
                keyStart = Int(truncatingIfNeeded: try reader.readInt64())
                keyLength = -1
            } else {
                let start = reader.position
                let range = try reader.readStringRange()
                guard isValidKey(reader.bytes.backDeployedSpan, range.lowerBound, range.count) else {
                    throw .invalidUTF8(offset: start)
                }
                keyStart = range.lowerBound
                keyLength = range.count
            }
            let valueStart = reader.position
            try reader.skipValue()
            return Entry(keyStart: keyStart, keyLength: keyLength, valueStart: valueStart)
        } catch {
            throw decodingError(error, for: String.self)
        }
    }

    /// A table of the `members` members from `start` (their keys checked on the way).
    @inline(never)
    static func table(_ bytes: [UInt8], from start: Int, members: Int) throws -> MemberTable {
        var entries: [(name: String?, integer: Int?, valueStart: Int)] = []
        entries.reserveCapacity(members)
        var reader = MessagePackReader(bytes, range: start..<bytes.count)
        for _ in 0..<members {
            let entry = try readEntry(&reader)
            entries.append(
                entry.keyLength < 0
                    ? (nil, entry.keyStart, entry.valueStart) : (keyString(bytes, entry), nil, entry.valueStart)
            )
        }
        return MemberTable(entries, start: start)
    }

    /// The string of a string key that `readEntry` checked (so never the empty fallback).
    static func keyString(_ bytes: [UInt8], _ entry: Entry) -> String {
        MessagePackReader.string(bytes, entry.keyStart..<(entry.keyStart + entry.keyLength)) ?? ""
    }

    func matches(_ entry: Entry, _ name: Span<UInt8>, _ intValue: Int?) -> Bool {
        if entry.keyLength < 0 { return intValue == entry.keyStart }
        guard name.count == entry.keyLength else { return false }
        let span = bytes.backDeployedSpan
        var offset = 0
        while offset < entry.keyLength {
            if name[offset] != span[entry.keyStart + offset] { return false }
            offset += 1
        }
        return true
    }

    /// The offset of the value whose key is `name` (or the integer `intValue()`, asked only when
    /// the indexed members do not have `name`), or nil.
    func valueStart(_ name: String, _ intValue: () -> Int?) -> Int? {
        name.withUTF8Span { utf8 in
            if let start = index.valueStart(forKey: utf8, in: bytes.backDeployedSpan) { return start }
            guard count > index.count else { return nil }
            if let table { return table.byName[name] ?? intValue().flatMap { table.byInteger[$0] } }
            let intValue = intValue()
            var reader = MessagePackReader(bytes, range: overflowStart..<bytes.count)
            for _ in index.count..<count {
                guard let entry = try? Self.readEntry(&reader) else { return nil }
                if matches(entry, utf8, intValue) { return entry.valueStart }
            }
            return nil
        }
    }

    /// Every key, as (string, integer) pairs in wire order.
    var keys: [(string: String?, int: Int?)] {
        var keys: [(string: String?, int: Int?)] = []
        for position in 0..<index.count {
            keys.append((MessagePackReader.string(bytes, index.member(position).key), nil))
        }
        var reader = MessagePackReader(bytes, range: overflowStart..<bytes.count)
        for _ in index.count..<count {
            guard let entry = try? Self.readEntry(&reader) else { break }
            if entry.keyLength < 0 {
                keys.append((nil, entry.keyStart))
            } else {
                keys.append((Self.keyString(bytes, entry), nil))
            }
        }
        return keys
    }
}

/// A map seen as a keyed container (a thin generic shell around `MessagePackMapIndex`).
struct MessagePackKeyedContainer<Key: CodingKey>: ValueKeyedDecoding {
    let index: MessagePackMapIndex

    init(bytes: [UInt8], position: Int) throws {
        index = try MessagePackMapIndex(bytes: bytes, position: position)
    }

    func valueStart(_ key: Key) -> Int? {
        index.valueStart(key.stringValue) { key.intValue }
    }

    var allKeys: [Key] {
        index.keys.compactMap { key in
            key.string.flatMap(Key.init(stringValue:)) ?? key.int.flatMap(Key.init(intValue:))
        }
    }

    func valueDecoder(at start: Int) -> MessagePackValueDecoder {
        MessagePackValueDecoder(bytes: index.bytes, position: start)
    }

    /// Reads the value for `key` with `read` straight from the bytes (no decoder value in between).
    @inline(__always)
    func read<T>(_ type: T.Type, _ key: Key, _ read: (Span<UInt8>, Int, Int) throws(MessagePackError) -> T) throws -> T
    {
        do {
            let start = try valueOffset(key)
            do {
                return try read(index.bytes.backDeployedSpan, start, index.bytes.count)
            } catch {
                throw decodingError(error, for: type)
            }
        } catch {
            throw CodingPathPrefix.prefixing(error, with: key)
        }
    }

    func decode(_ type: String.Type, forKey key: Key) throws -> String {
        try read(type, key) { (span, start, end) throws(MessagePackError) in
            try MessagePackReader.string(span, start, end).0
        }
    }

    @inline(__always)
    func decodeInteger<T: FixedWidthInteger>(_ type: T.Type, forKey key: Key) throws -> T {
        try read(type, key) { (span, start, end) throws(MessagePackError) in
            try MessagePackReader.integer(T.self, span, start, end).0
        }
    }

}

/// An array seen as an unkeyed container.
struct MessagePackUnkeyedContainer: ElementUnkeyedDecoding {
    let bytes: [UInt8]
    var position: Int
    let total: Int
    var currentIndex: Int = 0

    var count: Int? { total }
    var isAtEnd: Bool { currentIndex >= total }

    init(bytes: [UInt8], position: Int) throws {
        self.bytes = bytes
        var reader = MessagePackReader(bytes, range: position..<bytes.count)
        total = try convertingErrors([Any].self) { () throws(MessagePackError) in try reader.readArrayHeader() }
        self.position = reader.position
    }

    var element: MessagePackValueDecoder { MessagePackValueDecoder(bytes: bytes, position: position) }

    mutating func skipElement() {
        var reader = MessagePackReader(bytes, range: position..<bytes.count)
        try? reader.skipValue()
        position = reader.position
        currentIndex += 1
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, bytes[position] == 0xc0 else { return false }
        position += 1
        currentIndex += 1
        return true
    }
}
