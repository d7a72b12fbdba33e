import Testing
import TetherCore
import TetherTestSupport
import TetherText

@testable import TetherJSON
@testable import TetherSignalR

/// `JSONReader` and `JSONWriter`, the JSON fast path's cursor and writer.
struct JSONReaderWriterTests {
    /// Runs a mutating step of `reader` (outside `#expect`, which cannot mutate its operands).
    func step(_ reader: inout JSONReader, _ body: (inout JSONReader) -> Bool) -> Bool { body(&reader) }

    static let keys = KeySet(["id", "tags", "ratio", "ok", "note", "nested", "a long key name"])

    /// A reader over `text`, validated as a hub message's value would be.
    func reader(_ text: String) throws -> JSONReader {
        let value = try EncodedValue(json: Array(text.utf8))
        return JSONReader(bytes: value.storage, position: value.range.lowerBound, end: value.range.upperBound)
    }

    @Test func stringsAreMarkedASCIIWhenTheyAre() throws {
        // A String not marked ASCII counts its UTF-16 length (and bridges) by walking it; the
        // readers know from their scans, escapes included, and say so.
        let texts = [
            "plain", "a string longer than a couple of words", #"esc\"aped"#, #"tab\tand\\"#, #"\u0041"#,
            "é", "long enough to have é in the second word", #"\u00e9"#, #"x\ud83d\ude00"#, "",
        ]
        for text in texts {
            var reader = try reader("\"\(text)\"")
            let string = try reader.readString()
            #expect(string.utf8Span.isKnownASCII == string.utf8.allSatisfy { $0 < 0x80 }, "\(text)")
            let viaCodable = try EncodedValue(json: Array("\"\(text)\"".utf8)).decode(String.self)
            #expect(viaCodable == string)
            #expect(viaCodable.utf8Span.isKnownASCII == string.utf8.allSatisfy { $0 < 0x80 }, "\(text) (Codable)")
        }
        // Dictionary keys through Codable (member names from the object index and its overflow).
        // (Longer than fifteen bytes: shorter strings are stored inline and always marked right.)
        let members = (0..<40).map { "\"a longer member name \($0)\($0 % 3 == 0 ? "é" : "")\":\($0)" }
            .joined(separator: ",")
        let dictionary = try EncodedValue(json: Array("{\(members)}".utf8)).decode([String: Int].self)
        #expect(dictionary.count == 40)
        for key in dictionary.keys {
            #expect(key.utf8Span.isKnownASCII == key.utf8.allSatisfy { $0 < 0x80 }, "\(key)")
        }
        // A keyed container's allKeys.
        let names = try EncodedValue(json: Array("{\(members)}".utf8)).decode(MemberNames.self).names
        #expect(names.count == 40)
        for name in names {
            #expect(name.utf8Span.isKnownASCII == name.utf8.allSatisfy { $0 < 0x80 }, "\(name)")
        }
    }

    /// The member names of an object, through `allKeys`.
    struct MemberNames: Decodable {
        struct Name: CodingKey {
            let stringValue: String
            init(stringValue: String) { self.stringValue = stringValue }
            var intValue: Int? { nil }
            init?(intValue: Int) { nil }
        }
        let names: [String]
        init(from decoder: any Decoder) throws {
            names = try decoder.container(keyedBy: Name.self).allKeys.map(\.stringValue)
        }
    }

    @Test func readsEveryKindOfValueWithWhitespaceAndEscapes() throws {
        var reader = try reader(
            #" { "id" : -42 , "tags":[ "a\"b" , "\u00e9\ud83d\ude00" ], "ratio": 2.5e-1, "ok" :true, "note": null, "#
                + #""\u0061 long key name": 7, "unknown": {"x": [1, {"y": null}]}, "nested": {"id": 1}} "#
        )
        var seen: [String] = []
        try reader.readObjectStart()
        while reader.nextMember() {
            switch try reader.readKey(in: Self.keys) {
            case 0: #expect(try reader.readInteger(Int8.self) == -42)
            case 1:
                var tags: [String] = []
                try reader.readArrayStart()
                while reader.nextElement() { tags.append(try reader.readString()) }
                #expect(tags == ["a\"b", "é😀"])
            case 2: #expect(try reader.readDouble() == 0.25)
            case 3: #expect(try reader.readBool() == true)
            case 4: #expect(step(&reader, { $0.readNilIfPresent() }))
            case 5:
                try reader.readObjectStart()
                #expect(step(&reader, { $0.nextMember() }))
                #expect(try reader.readKey(in: Self.keys) == 0)
                #expect(try reader.readInteger(UInt64.self) == 1)
                #expect(!step(&reader, { $0.nextMember() }))
            case 6: #expect(try reader.readInteger(Int.self) == 7)  // the escaped key matched
            default: reader.skipValue()
            }
            seen.append("member")
        }
        #expect(seen.count == 8)
        #expect(!step(&reader, { $0.nextMember() }))  // at the end: nothing more, no trap
    }

    @Test func expectedKeysAreMatchedOnlyWhenTheWholeNameMatches() throws {
        // readKey first compares the bytes of the key expected next ("id": here each time);
        // a longer key that starts the same, a colon after whitespace, an escaped spelling and
        // the end of the object must all still read right.
        let keys = KeySet(["id", "idx", "i\"d"])
        var object = try reader(#"{"idx":1,"id" :2,"\u0069d":3,"id":4,"i\"d":5,"i":6}"#)
        try object.readObjectStart()
        var read: [String] = []
        while step(&object, { $0.nextMember() }) {
            let index = try object.readKey(in: keys)
            read.append("\(index.map { keys.names[$0] } ?? "-")=\(try object.readInteger(Int.self))")
        }
        #expect(read == ["idx=1", "id=2", "id=3", "id=4", "i\"d=5", "-=6"])
    }

    @Test func memberNamesReadAsStrings() throws {
        var object = try reader(#"{ "\u0061b" : 1 , "plain":2}"#)
        try object.readObjectStart()
        var names: [String] = []
        while step(&object, { $0.nextMember() }) {
            names.append(try object.readMemberName())
            object.skipValue()
        }
        #expect(names == ["ab", "plain"])
        var notAnObject = try reader("[1]")
        expectThrows(\DecodingError.kind, .typeMismatch) { try notAnObject.readMemberName() }
    }

    @Test func wrongTypesAreDecodingErrorsAndTheCursorStays() throws {
        var reader = try reader(#"{"id": "text", "ok": 300, "ratio": 1.5}"#)
        try reader.readObjectStart()
        #expect(step(&reader, { $0.nextMember() }))
        _ = try reader.readKey(in: Self.keys)
        _ = reader.nextByte()  // (whitespace before the value is skipped by any read)
        let before = reader.position
        expectThrows(\DecodingError.kind, .typeMismatch) { try reader.readInteger(Int.self) }
        expectThrows(\DecodingError.kind, .typeMismatch) { try reader.readBool() }
        expectThrows(\DecodingError.kind, .typeMismatch) { try reader.readObjectStart() }
        expectThrows(\DecodingError.kind, .typeMismatch) { try reader.readArrayStart() }
        expectThrows(\DecodingError.kind, .typeMismatch) { try reader.readKey(in: Self.keys) }
        #expect(!step(&reader, { $0.readNilIfPresent() }))
        #expect(reader.position == before)
        #expect(try reader.readString() == "text")
        #expect(step(&reader, { $0.nextMember() }))
        _ = try reader.readKey(in: Self.keys)
        #expect {
            try reader.readInteger(UInt8.self)
        } throws: { error in
            guard case DecodingError.dataCorrupted(let context) = error else { return false }
            return context.debugDescription == "Number 300 does not fit in UInt8."
        }
        #expect(try reader.readInteger(Int16.self) == 300)
        #expect(step(&reader, { $0.nextMember() }))
        _ = try reader.readKey(in: Self.keys)
        expectThrows(\DecodingError.kind, .dataCorrupted) { try reader.readInteger(Int.self) }  // 1.5 is not integral
        #expect(try reader.readDouble() == 1.5)
        #expect(!step(&reader, { $0.nextMember() }))
        expectThrows(\DecodingError.kind, .typeMismatch) { try reader.readString() }  // nothing left
        expectThrows(\DecodingError.kind, .typeMismatch) { try reader.readInteger(Int.self) }
    }

    @Test func integersOfEverySpellingReadExactly() throws {
        let cases: [(String, Int64?)] = [
            ("0", 0), ("-0", 0), ("7", 7), ("999999999999999999", 999_999_999_999_999_999),
            ("-999999999999999999", -999_999_999_999_999_999), ("1000000000000000000", 1_000_000_000_000_000_000),
            ("9223372036854775807", .max), ("-9223372036854775808", .min), ("9223372036854775808", nil),
            ("2.0", 2), ("1e2", 100), ("-25E-1", nil), ("0.5", nil), ("\"1\"", nil), ("true", nil),
        ]
        for (text, expected) in cases {
            // A number that is no Int64 is corrupt data for it; a string or a bool, the wrong type.
            let failure: DecodingError.Kind = ["\"1\"", "true"].contains(text) ? .typeMismatch : .dataCorrupted
            var reader = try reader("[" + text + ", 1]")
            try reader.readArrayStart()
            _ = reader.nextElement()
            if let expected {
                #expect(try reader.readInteger(Int64.self) == expected, "\(text)")
            } else {
                expectThrows(\DecodingError.kind, failure, "\(text)") { try reader.readInteger(Int64.self) }
                reader.skipValue()
            }
            // Codable reads the same numbers the same way.
            let value = try EncodedValue(json: Array(text.utf8))
            if let expected {
                #expect(try value.decode(Int64.self) == expected, "\(text)")
            } else {
                expectThrows(\DecodingError.kind, failure, "\(text)") { try value.decode(Int64.self) }
            }
            // The cursor is after the number either way: the next element reads.
            _ = reader.nextElement()
            #expect(try reader.readInteger(UInt8.self) == 1, "\(text)")
        }
        var large = try reader("18446744073709551615")
        #expect(try large.readInteger(UInt64.self) == .max)
        var negative = try reader("-1")
        expectThrows(\DecodingError.kind, .dataCorrupted) { try negative.readInteger(UInt32.self) }
        #expect(try negative.readInteger(Int8.self) == -1)
    }

    @Test func writerPlacesCommasAndEscapes() throws {
        struct Sample: JSONEncodable {
            func encode(json writer: inout JSONWriter) throws {
                writer.writeObjectStart()
                writer.writeKey(0, of: JSONReaderWriterTests.keys)
                writer.writeInt(-1)
                writer.writeKey(1, of: JSONReaderWriterTests.keys)
                writer.writeArrayStart()
                writer.writeString("q\"\n")
                writer.writeUInt(UInt64.max)
                writer.writeArrayStart()
                writer.writeArrayEnd()
                writer.writeObjectStart()
                writer.writeObjectEnd()
                writer.writeNull()
                writer.writeArrayEnd()
                writer.writeKey("é\u{1}")
                try writer.writeDouble(0.5)
                writer.writeKey(3, of: JSONReaderWriterTests.keys)
                writer.writeBool(false)
                writer.writeObjectEnd()
            }
            func encode(to encoder: any Encoder) throws {}
        }
        var bytes: [UInt8] = []
        try JSONWriter.encode(Sample(), into: &bytes)
        #expect(
            String(decoding: bytes, as: UTF8.self)
                == #"{"id":-1,"tags":["q\"\n",18446744073709551615,[],{},null],"é\u0001":0.5,"ok":false}"#
        )
        var writer = JSONWriter()
        writer.writeArrayStart()
        expectThrows(\EncodingError.kind, .invalidValue) { try writer.writeDouble(.nan) }
        expectThrows(\EncodingError.kind, .invalidValue) { try writer.writeDouble(-.infinity) }
        writer.writeArrayEnd()
        #expect(writer.bytes == Array("[]".utf8))
    }

    @Test func deeplyNestedValuesWrite() throws {
        // Past 64 levels the writer keeps its container bits in an array: objects and arrays
        // alternate, 200 deep, and close in order.
        var writer = JSONWriter()
        for level in 0..<200 {
            if level % 2 == 0 {
                writer.writeArrayStart()
            } else {
                writer.writeObjectStart()
                writer.writeKey("k")
            }
        }
        writer.writeInt(1)
        for level in (0..<200).reversed() {
            if level % 2 == 0 { writer.writeArrayEnd() } else { writer.writeObjectEnd() }
        }
        let expected = String(repeating: #"[{"k":"#, count: 100) + "1" + String(repeating: "}]", count: 100)
        #expect(String(decoding: writer.bytes, as: UTF8.self) == expected)
        _ = try EncodedValue(json: writer.bytes, maximumDepth: 200)
    }

    @Test func misusingTheWriterTraps() async {
        // A conformance cannot put invalid JSON on the wire: each misuse stops the process.
        await #expect(processExitsWith: .failure) {
            var writer = JSONWriter()
            writer.writeObjectStart()
            writer.writeString("value without a key")
        }
        await #expect(processExitsWith: .failure) {
            var writer = JSONWriter()
            writer.writeArrayStart()
            writer.writeKey("key in an array")
        }
        await #expect(processExitsWith: .failure) {
            var writer = JSONWriter()
            writer.writeObjectStart()
            writer.writeArrayEnd()
        }
        await #expect(processExitsWith: .failure) {
            var writer = JSONWriter()
            writer.writeInt(1)
            writer.writeInt(2)
        }
    }
}
