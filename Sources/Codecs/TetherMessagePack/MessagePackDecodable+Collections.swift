// Arrays, optionals and string-keyed dictionaries of fast-path types are fast-path types too, so
// that `[ChatMessage]`, `ChatMessage?` and `[String: ChatMessage]` skip `Codable` as their
// elements do. Each reads and writes what the `Codable` path does for the same value: an array,
// nil, or a map with string keys (integer keys read as their decimal text, as `Codable` reads
// them into a `[String: V]`; the first of duplicate keys wins, as in the `Codable` decoder; a map
// holding both an integer key and the same number as a string key is the one case where the two
// paths may pick different values).

/// The most elements a decoded collection reserves room for before reading them: a peer's count
/// bounds the elements by input bytes (at least one each), but an element may be far larger in
/// memory than its encoding (a nil for an optional struct), so a count-sized reservation could
/// ask for many times the message size before the first element fails; beyond this the
/// collection grows as its elements arrive.
let collectionReservationLimit = 1024

extension Array: MessagePackDecodable where Element: MessagePackDecodable {
    public init(messagePack reader: inout MessagePackReader) throws {
        let count = try reader.readArrayHeader()
        self = []
        // The declared count is the peer's: reserve no more than a bounded head start.
        reserveCapacity(Swift.min(count, reader.end - reader.position, collectionReservationLimit))
        for _ in 0..<count { append(try Element(messagePack: &reader)) }
    }
}

extension Array: MessagePackEncodable where Element: MessagePackEncodable {
    public func encode(messagePack writer: inout MessagePackWriter) throws {
        writer.writeArrayHeader(count: count)
        for element in self { try element.encode(messagePack: &writer) }
    }
}

extension Optional: MessagePackDecodable where Wrapped: MessagePackDecodable {
    public init(messagePack reader: inout MessagePackReader) throws {
        self = reader.readNilIfPresent() ? nil : try Wrapped(messagePack: &reader)
    }
}

extension Optional: MessagePackEncodable where Wrapped: MessagePackEncodable {
    public func encode(messagePack writer: inout MessagePackWriter) throws {
        if let self { try self.encode(messagePack: &writer) } else { writer.writeNil() }
    }
}

extension Dictionary: MessagePackDecodable where Key == String, Value: MessagePackDecodable {
    public init(messagePack reader: inout MessagePackReader) throws {
        let count = try reader.readMapHeader()
        self = [:]
        reserveCapacity(Swift.min(count, (reader.end - reader.position) / 2, collectionReservationLimit))
        for _ in 0..<count {
            // Integer keys become their decimal text, as `Codable`'s `[String: V]` makes them.
            let key = try reader.peekType() == .integer ? String(try reader.readInt64()) : try reader.readString()
            if self[key] == nil {
                self[key] = try Value(messagePack: &reader)
            } else {
                try reader.skipValue()
            }
        }
    }
}

extension Dictionary: MessagePackEncodable where Key == String, Value: MessagePackEncodable {
    public func encode(messagePack writer: inout MessagePackWriter) throws {
        writer.writeMapHeader(count: count)
        for (key, value) in self {
            writer.writeString(key)
            try value.encode(messagePack: &writer)
        }
    }
}
