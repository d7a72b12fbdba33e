// Arrays, optionals and string-keyed dictionaries of JSON fast-path types are fast-path types
// too (see MessagePackDecodable+Collections.swift): an array, `null`, or an object, read and
// written as the `Codable` path does (the first of duplicate keys wins).

extension Array: JSONDecodable where Element: JSONDecodable {
    public init(json reader: inout JSONReader) throws {
        try reader.readArrayStart()
        self = []
        while reader.nextElement() { append(try Element(json: &reader)) }
    }
}

extension Array: JSONEncodable where Element: JSONEncodable {
    public func encode(json writer: inout JSONWriter) throws {
        writer.writeArrayStart()
        for element in self { try element.encode(json: &writer) }
        writer.writeArrayEnd()
    }
}

extension Optional: JSONDecodable where Wrapped: JSONDecodable {
    public init(json reader: inout JSONReader) throws {
        self = reader.readNilIfPresent() ? nil : try Wrapped(json: &reader)
    }
}

extension Optional: JSONEncodable where Wrapped: JSONEncodable {
    public func encode(json writer: inout JSONWriter) throws {
        if let self { try self.encode(json: &writer) } else { writer.writeNull() }
    }
}

extension Dictionary: JSONDecodable where Key == String, Value: JSONDecodable {
    public init(json reader: inout JSONReader) throws {
        try reader.readObjectStart()
        self = [:]
        while reader.nextMember() {
            let key = try reader.readMemberName()
            if self[key] == nil {
                self[key] = try Value(json: &reader)
            } else {
                reader.skipValue()
            }
        }
    }
}

extension Dictionary: JSONEncodable where Key == String, Value: JSONEncodable {
    public func encode(json writer: inout JSONWriter) throws {
        writer.writeObjectStart()
        for (key, value) in self {
            writer.writeKey(key)
            try value.encode(json: &writer)
        }
        writer.writeObjectEnd()
    }
}
