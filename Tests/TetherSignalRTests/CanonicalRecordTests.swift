import Testing
import TetherCore
import TetherTestSupport
@_spi(TetherInternal) import TetherText

@testable import TetherSignalR

/// JSON records written as the writers write them are read by a short path
/// (`JSONHubRecord.readCanonicalObject`); every other record, and every record the short path
/// gives up on, by the general reader. Both must give the same message, or the same error.
struct CanonicalRecordTests {
    /// The message the short path reads from `record` (nil when it gives up) and what the general
    /// reader makes of it.
    static func bothPaths(
        _ bytes: [UInt8]
    ) -> (
        canonical: Result<HubMessage?, HubProtocolError>?, general: Result<HubMessage?, HubProtocolError>
    ) {
        let record = String(decoding: bytes, as: UTF8.self)
        var targets = StringInterner(capacity: 8)
        var fields = JSONHubRecord.Fields()
        var canonical: Result<HubMessage?, HubProtocolError>?
        if let end = JSONHubRecord.readCanonicalObject(
            bytes,
            from: 0,
            end: bytes.count,
            maximumDepth: 8,
            targets: &targets,
            into: &fields
        ) {
            #expect(end == bytes.count, "\(record)")
            canonical = Result { () throws(HubProtocolError) in try JSONHubRecord.message(from: fields, bytes) }
        }
        let general = Result { () throws(HubProtocolError) in
            try JSONHubRecord.parse(bytes, 0..<bytes.count, maximumDepth: 8, targets: &targets)
        }
        return (canonical, general)
    }

    static let canonical = [
        #"{"type":1,"target":"Send","arguments":[]}"#,
        #"{"type":1,"target":"Send","arguments":[1,"a",{"k":[true,null]},-2.5e3]}"#,
        #"{"type":1,"invocationId":"42","target":"Send","arguments":["x"]}"#,
        #"{"type":1,"invocationId":"","target":"Send","arguments":["x"]}"#,
        #"{"type":1,"target":"Séñd日本","arguments":["x"]}"#,
        #"{"type":4,"invocationId":"7","target":"Stream","arguments":[1]}"#,
        #"{"type":2,"invocationId":"7","item":{"a":"b\n"}}"#,
        #"{"type":2,"invocationId":"7","item":null}"#,
        #"{"type":3,"invocationId":"7","result":[1,2]}"#,
        #"{"type":3,"invocationId":"7"}"#,
        #"{"type":6}"#,
        #"{"type":5,"invocationId":"7"}"#,
        // Read the short way, and refused by the type's rules as by the general reader.
        #"{"type":1,"arguments":[]}"#,
        #"{"type":2,"invocationId":"7"}"#,
        #"{"type":0}"#,
        #"{"type":1,"target":"a","target":"b","arguments":[]}"#,
        // The arguments' values are validated by the same skip, with the same depth limit.
        #"{"type":1,"target":"Send","arguments":["\ud800"]}"#,
        #"{"type":1,"target":"Send","arguments":[[[[[[[[1]]]]]]]]}"#,
        #"{"type":1,"target":"Send","arguments":[[[[[[[[[1]]]]]]]]]}"#,
    ].map { Array($0.utf8) }

    static let general =
        [
            #" {"type":1,"target":"Send","arguments":[]}"#,
            #"{ "type":1,"target":"Send","arguments":[]}"#,
            #"{"type" :1,"target":"Send","arguments":[]}"#,
            #"{"type": 1,"target":"Send","arguments":[]}"#,
            #"{"type":1 ,"target":"Send","arguments":[]}"#,
            #"{"type":1,"target":"Send","arguments":[ 1 ]}"#,
            #"{"type":1,"target":"Send","arguments":[1 ,2]}"#,
            #"{"type":1,"target":"Se\u006ed","arguments":[]}"#,
            #"{"t\u0079pe":1,"target":"Send","arguments":[]}"#,
            #"{"type":1,"invocationId":"\u0034","target":"Send","arguments":[]}"#,
            #"{"type":1,"invocationId":"é","target":"Send","arguments":[]}"#,
            #"{"type":1,"invocationId":null,"target":"Send","arguments":[]}"#,
            #"{"type":1,"target":null,"arguments":[]}"#,
            #"{"type":1,"target":"Send","arguments":{}}"#,
            #"{"type":1,"target":"Send","arguments":[],"streamIds":["1"]}"#,
            #"{"type":1,"headers":{"a":"b"},"target":"Send","arguments":[]}"#,
            #"{"type":1,"target":"Send","arguments":[],"extra":1}"#,
            #"{"type":3,"invocationId":"7","error":"bad"}"#,
            #"{"type":3,"invocationId":"7","result": 1}"#,
            #"{"type":7,"allowReconnect":true}"#,
            #"{"type":8,"sequenceId":3}"#,
            #"{"type":10,"target":"Send","arguments":[]}"#,
            #"{"type":01,"target":"Send","arguments":[]}"#,
            #"{"type":-1}"#,
            #"{"type":1.0,"target":"Send","arguments":[]}"#,
            #"{"type":"1","target":"Send","arguments":[]}"#,
            // Malformed: the general reader's errors.
            #"{"type":1,"target":"Send","arguments":[}"#,
            #"{"type":1,"target":"Send","arguments":[1,]}"#,
            #"{"type":1,"target":"Send","arguments":[1]"#,
            #"{"type":1,"target":"Se"# + "\u{1}" + #"nd","arguments":[]}"#,
            #"{"type":1,"target":"Send","arguments":["\x"]}"#,
            #"{"type":2,"invocationId":"7","item":}"#,
            #"{"type":2,"invocationId":"7","item":[[[[[[[[[1]]]]]]]]]}"#,
            #"{"type":1,"target":"Send","arguments":[[[[[[[[[[1]]]]]]]]]]}"#,
            #"{"type":1,"#,
            #"{"#,
        ].map { Array($0.utf8) } + [
            // A target that is not UTF-8.
            Array(#"{"type":1,"target":""#.utf8) + [0xFF] + Array(#"","arguments":[]}"#.utf8)
        ]

    @Test func recordsAsTheWritersWriteThemAreReadTheShortWayAndTheSame() {
        for record in Self.canonical {
            let (canonical, general) = Self.bothPaths(record)
            let text = String(decoding: record, as: UTF8.self)
            #expect(canonical != nil, "not read the short way: \(text)")
            #expect(canonical == general, "\(text)")
        }
    }

    @Test func everyOtherRecordIsLeftToTheGeneralReader() {
        for record in Self.general {
            let (canonical, _) = Self.bothPaths(record)
            #expect(canonical == nil, "read the short way: \(String(decoding: record, as: UTF8.self))")
        }
    }

    /// Through the parser: fed whole (records parsed before their separator is found: the short
    /// path first) and byte by byte (the separator first: the general reader), every record gives
    /// the same messages and errors.
    @Test func bothWaysThroughTheParserAgree() throws {
        let trailing = [Array(#"{"type":1,"target":"Send","arguments":[]} "#.utf8)]
        for record in Self.canonical + Self.general + trailing {
            let bytes = record + Array(("\u{1E}" + #"{"type":6}"# + "\u{1E}").utf8)
            let whole = decodeAll(JSONHubProtocol(maximumDepth: 8).makeParser(), bytes, .whole)
            let split = decodeAll(JSONHubProtocol(maximumDepth: 8).makeParser(), bytes, .byteByByte)
            let same = whole.messages == split.messages && whole.error == split.error && whole.partial == split.partial
            #expect(same, "\(String(decoding: record, as: UTF8.self))")
        }
        // Random messages as the writer writes them (headers and stream ids included): the same
        // messages either way.
        var rng = SeededRandomNumberGenerator(seed: 11)
        var stream: [UInt8] = []
        for _ in 0..<300 {
            JSONHubProtocol().write(try HubProtocolPropertyTests.randomMessage(&rng, .json), into: &stream)
        }
        let whole = decodeAll(JSONHubProtocol().makeParser(), stream, .whole)
        let split = decodeAll(JSONHubProtocol().makeParser(), stream, .byteByByte)
        let same = whole.messages == split.messages
        #expect(same && whole.error == nil && split.error == nil)
    }
}
