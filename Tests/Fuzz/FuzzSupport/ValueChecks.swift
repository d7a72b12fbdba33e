// The value checks two targets share: UTF-8 validation and the JSON kernels against their
// references, and the fast paths against Codable on the same value.
@_spi(TetherInternal) import TetherCore
import TetherJSON
import TetherMessagePack
public import TetherSignalR
@_spi(TetherInternal) import TetherText

/// The vectorised UTF-8 check must give the standard library's verdict on every input (and on
/// its tail from `offset`, to move the block boundaries), and build the same string. The bytes
/// are checked in an allocation of exactly their size, so that AddressSanitizer reports any
/// read past the end.
public func checkUTF8(_ input: [UInt8], from offset: Int) {
    for bytes in [input, Array(input[min(offset, input.count)...])] {
        let exact = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(bytes.count, 1))
        defer { exact.deallocate() }
        _ = exact.initialize(fromContentsOf: bytes)
        let span = UnsafeBufferPointer(rebasing: exact[0..<bytes.count]).span
        let expected: UTF8Validation.Outcome =
            String(validating: bytes, as: UTF8.self) == nil
            ? .invalid : bytes.allSatisfy { $0 < 0x80 } ? .ascii : .multibyte
        let outcome = UTF8Validation.check(span)
        if outcome != expected { fatalError("UTF8Validation.check: \(outcome), standard library: \(expected)") }
        for form in UTF8Validation.runnableForms where UTF8Validation.check(span, form: form) != expected {
            fatalError("UTF8Validation.check, \(form) form: differs from the standard library")
        }
        let made = UTF8Validation.string(span)
        guard expected != .invalid else {
            if made != nil { fatalError("UTF8Validation.string accepted invalid UTF-8") }
            continue
        }
        let reference = String(decoding: bytes, as: UTF8.self)
        let validated = UTF8Validation.string(validated: span, isASCII: expected == .ascii)
        for string in [made, validated] where string != reference {
            fatalError("UTF8Validation.string differs")
        }
        // Short strings are built in their inline form: the very bits the standard library makes.
        if bytes.count <= SmallString.capacity {
            for string in [made, validated] where bits(string) != bits(reference) {
                fatalError("inline string bits differ")
            }
        }
    }
}

/// The C JSON kernels (validating skip, validated string scan) must agree with the Swift
/// reference on every input, read from an allocation of exactly its size (AddressSanitizer
/// reports any read past the end).
public func checkJSONKernels(_ input: [UInt8], cut: Int) {
    let exact = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(input.count, 1))
    defer { exact.deallocate() }
    _ = exact.initialize(fromContentsOf: input)
    let span = UnsafeBufferPointer(rebasing: exact[0..<input.count]).span
    for depth in [2, 64] where !JSONKernelCheck.agree(span, cut: cut, maximumDepth: depth) {
        fatalError("C JSON kernels and the Swift reference disagree (depth \(depth), cut \(cut))")
    }
}

/// The two words of a string value (or zeros for nil).
func bits(_ string: String?) -> (UInt64, UInt64) {
    guard let string else { return (0, 0) }
    return unsafe unsafeBitCast(string, to: (UInt64, UInt64).self)
}

/// The fast path and Codable must agree on every value: the same result, or both an error; and
/// what the fast path writes must read back the same and equal what Codable writes.
public func agree(_ value: EncodedValue) {
    let fast = try? value.decode(Probe.self)
    let codable = try? viaCodable(value, Probe.self)
    if fast != codable { fatalError("fast path \(String(describing: fast)) != Codable \(String(describing: codable))") }
    // Collections of fast types are fast types too, and must agree as well (dictionaries except
    // for maps that hold an integer key and the same number as a string key, where Codable's
    // `[String: V]` and the fast path may pick different duplicates; Specs/fast-paths.md).
    if (try? value.decode([Probe].self)) != (try? viaCodable(value, [Probe].self))
        || (try? value.decode(Probe?.self)) != (try? viaCodable(value, Probe?.self))
        || (!hasIntegerKeyTwin(value)
            && (try? value.decode([String: Probe].self)) != (try? viaCodable(value, [String: Probe].self)))
    {
        fatalError("fast path and Codable disagree on a collection of Probe")
    }
    if let fast {
        guard let written = try? EncodedValue(fast, encoding: value.encoding),
            (try? written.decode(Probe.self)) == fast,
            written == (try? EncodedValue(ViaCodable(fast), encoding: value.encoding))
        else { fatalError("fast path does not round-trip \(fast)") }
    }
}

/// Whether `value` is a MessagePack map with an integer key and a string key that spells the
/// same number.
func hasIntegerKeyTwin(_ value: EncodedValue) -> Bool {
    guard value.encoding == .messagePack else { return false }
    var reader = MessagePackReader(Array(value.bytes))
    guard case .map(let pairs)? = try? reader.readValue() else { return false }
    var numbers: Set<String> = []
    var strings: Set<String> = []
    for pair in pairs {
        switch pair.key {
        case .int(let number): numbers.insert(String(number))
        case .uint(let number): numbers.insert(String(number))
        case .string(let string): strings.insert(string)
        default: break
        }
    }
    return !numbers.isDisjoint(with: strings)
}

/// A type with both decoding paths, written as the fast-path documentation recommends (the
/// first of duplicate keys wins, as it does for Codable).
struct Probe: Codable, Equatable, MessagePackDecodable, MessagePackEncodable, JSONDecodable, JSONEncodable {
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

extension Probe {
    init(json reader: inout JSONReader) throws {
        var name: String?
        var count: Int?
        var note: String?
        var found: UInt8 = 0
        try reader.readObjectStart()
        while reader.nextMember() {
            guard let key = try reader.readKey(in: Self.keys), found & 1 << key == 0 else {
                reader.skipValue()
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

    func encode(json writer: inout JSONWriter) {
        writer.writeObjectStart()
        writer.writeKey(0, of: Self.keys)
        writer.writeString(name)
        writer.writeKey(1, of: Self.keys)
        writer.writeInt(Int64(count))
        if let note {
            writer.writeKey(2, of: Self.keys)
            writer.writeString(note)
        }
        writer.writeObjectEnd()
    }

    func encode(messagePack writer: inout MessagePackWriter) {
        writer.writeMapHeader(count: note == nil ? 2 : 3)
        writer.writeKey(0, of: Self.keys)
        writer.writeString(name)
        writer.writeKey(1, of: Self.keys)
        writer.writeInt(Int64(count))
        if let note {
            writer.writeKey(2, of: Self.keys)
            writer.writeString(note)
        }
    }
}

/// A `T` coded through Codable only.
struct ViaCodable<T: Codable>: Codable {
    var value: T
    init(_ value: T) { self.value = value }
    init(from decoder: any Decoder) throws { value = try T(from: decoder) }
    func encode(to encoder: any Encoder) throws { try value.encode(to: encoder) }
}

/// Decodes through Codable (code generic over `Decodable` takes that path).
func viaCodable<T: Decodable>(_ value: EncodedValue, _ type: T.Type) throws -> T {
    try value.decode(type)
}
