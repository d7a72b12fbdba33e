@_spi(TetherInternal) import TetherCore

/// A fixed set of object keys for hand-written decoders and encoders (the fast paths that skip
/// `Codable`: `MessagePackDecodable`, `JSONDecodable` and their encoding counterparts).
///
/// Readers match a key in the input against the set by its length and first eight bytes (one
/// comparison per candidate; one more for keys of up to sixteen bytes), starting with the key
/// expected next, without creating a string; writers append each key's pre-encoded bytes. Build
/// a set once (a `static let`) and share it.
public struct KeySet: Sendable {
    @usableFromInline struct Entry: Sendable {
        /// The first eight bytes of the key, little-endian, zero-padded.
        @usableFromInline var prefix: UInt64
        /// Bytes 8..<16 of the key, the same way.
        @usableFromInline var suffix: UInt64
        @usableFromInline var length: Int
    }

    /// A key's encoding (MessagePack str, or JSON member name and colon) of at most 32 bytes as
    /// four little-endian words and their masks, for readers that compare the key expected next
    /// before parsing anything and writers that store it a word at a time; `count` 0 for keys
    /// whose encoding is longer. Encodings of up to sixteen bytes use only the first two words.
    @usableFromInline struct EncodedKey: Sendable {
        @usableFromInline var first: UInt64
        @usableFromInline var firstMask: UInt64
        @usableFromInline var second: UInt64
        @usableFromInline var secondMask: UInt64
        @usableFromInline var third: UInt64
        @usableFromInline var thirdMask: UInt64
        @usableFromInline var fourth: UInt64
        @usableFromInline var fourthMask: UInt64
        @usableFromInline var count: Int

        /// The longest encoding held in words.
        static let capacity = 32

        init(_ encoded: [UInt8]) {
            func word(_ index: Int) -> (UInt64, UInt64) {
                let length = min(max(encoded.count - 8 * index, 0), 8)
                let mask: UInt64 = length >= 8 ? ~0 : (1 << (8 * UInt64(length))) - 1
                return (KeySet.prefix(of: encoded.backDeployedSpan, from: 8 * index, length: length), mask)
            }
            guard encoded.count <= Self.capacity else {
                (first, firstMask, second, secondMask) = (0, 0, 0, 0)
                (third, thirdMask, fourth, fourthMask, count) = (0, 0, 0, 0, 0)
                return
            }
            (first, firstMask) = word(0)
            (second, secondMask) = word(1)
            (third, thirdMask) = word(2)
            (fourth, fourthMask) = word(3)
            count = encoded.count
        }
    }

    /// Everything a set holds, in one object, so that copying a `KeySet` (a decoder's
    /// `let keys = Self.keys`) is one reference count, not one per table.
    @usableFromInline final class Tables: Sendable {
        /// The keys, in the order their indices refer to.
        @usableFromInline let names: [String]
        @usableFromInline let entries: [Entry]
        /// Each key's MessagePack encoding as words (see `EncodedKey`).
        @usableFromInline let encodedKeys: [EncodedKey]
        /// Each key's JSON member name (`"name":`) as words, the same way.
        @usableFromInline let encodedJSONNames: [EncodedKey]
        /// Each key's UTF-8 bytes.
        @usableFromInline let utf8: [[UInt8]]
        /// Each key as a JSON member name: the quoted, escaped string and the colon.
        @usableFromInline let jsonMemberNames: [[UInt8]]
        /// Each key as a MessagePack str value (header and UTF-8 bytes).
        @usableFromInline let messagePackNames: [[UInt8]]

        init(_ names: [String]) {
            self.names = names
            utf8 = names.map { Array($0.utf8) }
            entries = utf8.map { bytes in
                Entry(
                    prefix: KeySet.prefix(of: bytes.backDeployedSpan, from: 0, length: bytes.count),
                    suffix: KeySet.prefix(of: bytes.backDeployedSpan, from: 8, length: max(bytes.count - 8, 0)),
                    length: bytes.count
                )
            }
            messagePackNames = utf8.map { bytes in
                // The shortest str header: fixstr, str8, str16 or str32.
                switch bytes.count {
                case ..<32: [0xa0 | UInt8(bytes.count)] + bytes
                case ..<0x100: [0xd9, UInt8(bytes.count)] + bytes
                case ..<0x1_0000: [0xda, UInt8(bytes.count >> 8), UInt8(truncatingIfNeeded: bytes.count)] + bytes
                default:
                    [0xdb] + (0..<4).map { UInt8(truncatingIfNeeded: bytes.count >> (24 - 8 * $0)) } + bytes
                }
            }
            encodedKeys = messagePackNames.map(EncodedKey.init)
            jsonMemberNames = utf8.map(Self.jsonMemberName)
            encodedJSONNames = jsonMemberNames.map(EncodedKey.init)
        }

        /// A key as a JSON member name: the string literal (quotes, `"` and `\` and control
        /// characters escaped, short forms where JSON has them, as `JSONText` in TetherJSON writes
        /// them: a test keeps the two in step) and the colon.
        static func jsonMemberName(_ utf8: [UInt8]) -> [UInt8] {
            var bytes: [UInt8] = [UInt8(ascii: "\"")]
            for byte in utf8 {
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes += [UInt8(ascii: "\\"), byte]
                case 0x0A: bytes += Array(#"\n"#.utf8)
                case 0x0D: bytes += Array(#"\r"#.utf8)
                case 0x09: bytes += Array(#"\t"#.utf8)
                case 0x08: bytes += Array(#"\b"#.utf8)
                case 0x0C: bytes += Array(#"\f"#.utf8)
                case ..<0x20:
                    let hex = Array("0123456789abcdef".utf8)
                    bytes += Array(#"\u00"#.utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
                default: bytes.append(byte)
                }
            }
            bytes += [UInt8(ascii: "\""), UInt8(ascii: ":")]
            return bytes
        }
    }

    @usableFromInline let tables: Tables

    /// The keys, in the order their indices refer to.
    @inlinable public var names: [String] { tables.names }
    /// Each key's UTF-8 bytes.
    @inlinable public var utf8: [[UInt8]] { tables.utf8 }
    /// Each key as a JSON member name: the quoted, escaped string and the colon.
    @inlinable public var jsonMemberNames: [[UInt8]] { tables.jsonMemberNames }
    /// Each key as a MessagePack str value (header and UTF-8 bytes).
    @inlinable public var messagePackNames: [[UInt8]] { tables.messagePackNames }

    /// The keys `names`; readers return positions in this array. Precondition: no key appears
    /// twice.
    public init(_ names: [String]) {
        precondition(Set(names).count == names.count, "KeySet: a key appears twice")
        tables = Tables(names)
    }

    /// The string values of `K`'s cases, in `allCases` order: the keys a type's `Codable`
    /// conformance uses, so that both paths stay in step (index `i` is `K.allCases[i]`).
    public init<K: CodingKey & CaseIterable>(_ type: K.Type) {
        self.init(type.allCases.map(\.stringValue))
    }

    /// The number of keys.
    @inlinable public var count: Int { tables.names.count }

    /// The length of key `index`'s MessagePack encoding (`messagePackNames[index]`) if
    /// `bytes[offset..<end]` starts with it, else 0. Two word compares (four for encodings of
    /// 17–32 bytes), no parsing: readers try the key they expect next this way first. Longer
    /// keys, and keys too close to the end of `bytes` for the word loads, never match here (the
    /// reader then takes the general path).
    @inlinable @inline(__always)
    public func encodedMessagePackKeyLength(_ index: Int, in bytes: Span<UInt8>, at offset: Int, end: Int) -> Int {
        Self.encodedLength(tables.encodedKeys, index, in: bytes, at: offset, end: end)
    }

    /// The length of key `index` as a JSON member name and colon (`jsonMemberNames[index]`) if
    /// `bytes[offset..<end]` starts with it, else 0, compared as `encodedMessagePackKeyLength`
    /// compares.
    @inlinable @inline(__always)
    public func encodedJSONMemberNameLength(_ index: Int, in bytes: Span<UInt8>, at offset: Int, end: Int) -> Int {
        Self.encodedLength(tables.encodedJSONNames, index, in: bytes, at: offset, end: end)
    }

    @inlinable @inline(__always)
    static func encodedLength(
        _ words: [EncodedKey],
        _ index: Int,
        in bytes: Span<UInt8>,
        at offset: Int,
        end: Int
    ) -> Int {
        guard index >= 0 && index < words.count else { return 0 }
        let encoded = words[index]
        guard encoded.count > 0, offset >= 0, encoded.count <= end - offset, end <= bytes.count,
            offset + 16 <= bytes.count
        else { return 0 }
        let (first, second) = unsafe bytes.withUnsafeBytes { raw in
            unsafe (
                raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self),
                raw.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self)
            )
        }
        guard UInt64(littleEndian: first) & encoded.firstMask == encoded.first,
            UInt64(littleEndian: second) & encoded.secondMask == encoded.second
        else { return 0 }
        guard encoded.count > 16 else { return encoded.count }
        // 17–32 bytes (such as a sixteen-character name): two more words.
        guard offset + 32 <= bytes.count else { return 0 }
        let (third, fourth) = unsafe bytes.withUnsafeBytes { raw in
            unsafe (
                raw.loadUnaligned(fromByteOffset: offset + 16, as: UInt64.self),
                raw.loadUnaligned(fromByteOffset: offset + 24, as: UInt64.self)
            )
        }
        guard UInt64(littleEndian: third) & encoded.thirdMask == encoded.third,
            UInt64(littleEndian: fourth) & encoded.fourthMask == encoded.fourth
        else { return 0 }
        return encoded.count
    }

    /// Appends key `index` as a MessagePack str value (`messagePackNames[index]`) to `bytes`:
    /// for keys of up to 31 bytes two or four word stores into reserved space, with no per-byte
    /// work and no access to the nested arrays. Precondition: `index < count`.
    @inlinable
    public func appendMessagePackKey(_ index: Int, to bytes: inout [UInt8]) {
        Self.append(index, tables.encodedKeys, tables.messagePackNames, to: &bytes)
    }

    /// Appends key `index` as a JSON member name and its colon (`jsonMemberNames[index]`) to
    /// `bytes`, the same way as `appendMessagePackKey`. Precondition: `index < count`.
    @inlinable
    public func appendJSONMemberName(_ index: Int, to bytes: inout [UInt8]) {
        Self.append(index, tables.encodedJSONNames, tables.jsonMemberNames, to: &bytes)
    }

    /// Appends `encodings[index]`: two word stores into reserved space when it is at most
    /// sixteen bytes (`words[index]`), four when it is at most 32, else a copy.
    @inlinable @inline(__always)
    static func append(_ index: Int, _ words: [EncodedKey], _ encodings: [[UInt8]], to bytes: inout [UInt8]) {
        let encoded = words[index]
        guard encoded.count > 0 else {
            let encoding = encodings[index]
            bytes.append(contentsOf: encoding)  // longer than 32 bytes: rare
            return
        }
        let isLong = encoded.count > 16
        bytes.append(addingCapacity: isLong ? 32 : 16) { output in
            unsafe output.withUnsafeMutableBufferPointer { buffer, initialized in
                let target = UnsafeMutableRawPointer(buffer.baseAddress!)
                unsafe target.storeBytes(of: encoded.first.littleEndian, as: UInt64.self)
                unsafe target.storeBytes(of: encoded.second.littleEndian, toByteOffset: 8, as: UInt64.self)
                if isLong {
                    unsafe target.storeBytes(of: encoded.third.littleEndian, toByteOffset: 16, as: UInt64.self)
                    unsafe target.storeBytes(of: encoded.fourth.littleEndian, toByteOffset: 24, as: UInt64.self)
                }
                initialized = encoded.count
            }
        }
    }

    /// Whether the set has no keys.
    @inlinable public var isEmpty: Bool { tables.names.isEmpty }

    /// The error for an object without the key at `index`: `DecodingError.keyNotFound`, as
    /// `Codable` reports a missing key.
    public func missingKey(_ index: Int) -> DecodingError {
        .keyNotFound(
            NamedCodingKey(stringValue: names[index]),
            .init(codingPath: [], debugDescription: "No value for key '\(names[index])'.")
        )
    }

    /// The first eight bytes (or fewer) of `bytes[start..<start + length]` as a little-endian
    /// word, zero-padded.
    @inlinable @inline(__always)
    static func prefix(of bytes: Span<UInt8>, from start: Int, length: Int) -> UInt64 {
        unsafe bytes.withUnsafeBufferPointer { buffer in
            unsafe prefix(of: buffer, from: start, length: length)
        }
    }

    /// `prefix(of:from:length:)` on a buffer; `start + length <= buffer.count`.
    @inlinable @inline(__always)
    @unsafe static func prefix(of buffer: UnsafeBufferPointer<UInt8>, from start: Int, length: Int) -> UInt64 {
        let width = min(length, 8)
        if start + 8 <= buffer.count {
            let word = UInt64(
                littleEndian: unsafe UnsafeRawPointer(buffer.baseAddress! + start).loadUnaligned(as: UInt64.self)
            )
            return width == 8 ? word : word & ((1 << (8 * UInt64(width))) - 1)
        }
        var word: UInt64 = 0
        for offset in 0..<width {
            word |= UInt64(unsafe buffer[start + offset]) << (8 * UInt64(offset))
        }
        return word
    }

    /// The index of the key equal to `bytes[start..<start + length]`, or nil. The search starts
    /// at `hint` (the key expected next: objects usually list their keys in the same order each
    /// time) and wraps around.
    @inlinable @inline(__always)
    public func index(of bytes: Span<UInt8>, from start: Int, length: Int, hint: Int) -> Int? {
        precondition(start >= 0 && length >= 0 && start + length <= bytes.count, "key outside the bytes")
        let prefix = unsafe bytes.withUnsafeBufferPointer { buffer in
            unsafe Self.prefix(of: buffer, from: start, length: length)
        }
        let entries = tables.entries
        let count = entries.count
        var index = hint < count ? hint : 0
        for _ in 0..<count {
            let entry = entries[index]
            if entry.prefix == prefix && entry.length == length && (length <= 8 || restEqual(index, bytes, start)) {
                return index
            }
            index = index + 1 == count ? 0 : index + 1
        }
        return nil
    }

    /// Whether the bytes of key `index` past its first eight equal those at `start + 8...` of
    /// `bytes`. (Not inlined: only keys longer than eight bytes whose first eight match get here.)
    @usableFromInline @inline(never)
    func restEqual(_ index: Int, _ bytes: Span<UInt8>, _ start: Int) -> Bool {
        let keyBytes = tables.utf8[index]
        let key = keyBytes.backDeployedSpan
        guard tables.entries[index].suffix == Self.prefix(of: bytes, from: start + 8, length: key.count - 8) else {
            return false
        }
        return key.count <= 16 || KeySet.equalBytes(bytes, at: start, key)
    }
}

/// A coding key known by its name only (for errors about the keys of a `KeySet`).
struct NamedCodingKey: CodingKey {
    let stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// A `KeySet` made from a type's `CodingKey` enum, for hand-written decoders that name keys by
/// their cases (`.id`, `.text`) instead of by positions kept in step with an array: readers
/// return the case. (Writers take positions, `keySet`'s, which are `Key.allCases` order: finding
/// a case's position would hash or compare its string on every key written.)
///
/// ```swift
/// static let keys = CodingKeySet(CodingKeys.self)
/// switch try reader.readKey(in: Self.keys) {
/// case .id: id = try reader.readInteger(Int.self)
/// case .text: text = try reader.readString()
/// case nil: try reader.skipValue()
/// }
/// ```
public struct CodingKeySet<Key: CodingKey & CaseIterable & Sendable>: Sendable {
    /// The keys, in `Key.allCases` order.
    public let keySet: KeySet
    @usableFromInline let cases: [Key]

    /// The string values of `Key`'s cases, the keys its `Codable` conformance uses.
    public init(_ type: Key.Type = Key.self) {
        cases = Array(Key.allCases)
        keySet = KeySet(cases.map(\.stringValue))
    }

    /// The case at `index` of `keySet`.
    @inlinable public func key(at index: Int) -> Key { cases[index] }

    /// The error for an object without `key`: `DecodingError.keyNotFound`, as `Codable` reports
    /// a missing key.
    public func missingKey(_ key: Key) -> DecodingError {
        .keyNotFound(key, .init(codingPath: [], debugDescription: "No value for key '\(key.stringValue)'."))
    }
}

extension KeySet {
    /// Whether `bytes[start..<start + name.count]` equals `name` (1...255 bytes), compared a
    /// word at a time (overlapping words at the end, no byte loop): how the readers match a key's
    /// encoded name against their input.
    @inlinable @inline(__always)
    public static func equalBytes(_ bytes: Span<UInt8>, at start: Int, _ name: Span<UInt8>) -> Bool {
        let length = name.count
        guard start >= 0, length <= bytes.count - start else { return false }
        return unsafe bytes.withUnsafeBytes { bytes in
            unsafe name.withUnsafeBytes { name in
                let left = unsafe bytes.baseAddress! + start
                let right = name.baseAddress!
                if length >= 8 {
                    var offset = 0
                    while offset + 8 < length {
                        guard
                            unsafe left.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
                                == right.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
                        else { return false }
                        offset += 8
                    }
                    return unsafe left.loadUnaligned(fromByteOffset: length - 8, as: UInt64.self)
                        == right.loadUnaligned(fromByteOffset: length - 8, as: UInt64.self)
                }
                if length >= 4 {
                    return unsafe left.loadUnaligned(as: UInt32.self) == right.loadUnaligned(as: UInt32.self)
                        && left.loadUnaligned(fromByteOffset: length - 4, as: UInt32.self)
                            == right.loadUnaligned(fromByteOffset: length - 4, as: UInt32.self)
                }
                return unsafe left.load(as: UInt8.self) == right.load(as: UInt8.self)
                    && left.load(fromByteOffset: length / 2, as: UInt8.self)
                        == right.load(fromByteOffset: length / 2, as: UInt8.self)
                    && left.load(fromByteOffset: length - 1, as: UInt8.self)
                        == right.load(fromByteOffset: length - 1, as: UInt8.self)
            }
        }
    }
}
