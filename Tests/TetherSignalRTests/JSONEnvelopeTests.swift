import Foundation
import Testing
import TetherCore

@testable import TetherSignalR

/// The JSON record's property names: written as the writers write them (`"name":`, matched as
/// bytes) or any other valid way (escapes, whitespace before the colon), they must read the same.
struct JSONEnvelopeTests {
    static func decode(_ text: String) -> (messages: [HubMessage], error: HubProtocolError?) {
        let result = decodeAll(JSONHubProtocol().makeParser(), Array((text + "\u{1E}").utf8), .whole)
        return (result.messages, result.error)
    }

    @Test func everySpellingOfEveryPropertyReadsTheSame() {
        let records = [
            #"{"type":1,"invocationId":"7","target":"Send","arguments":[1,"a"]}"#,
            #"{"type":1,"headers":{"a":"b"},"target":"Send","arguments":[],"streamIds":["s"]}"#,
            #"{"type":2,"invocationId":"3","item":{"x":1}}"#,
            #"{"type":3,"invocationId":"4","result":[true]}"#,
            #"{"type":3,"invocationId":"5","error":"bad"}"#,
            #"{"type":7,"error":"gone","allowReconnect":true}"#,
            #"{"type":8,"sequenceId":12}"#,
        ]
        let names = [
            "type", "headers", "invocationId", "target", "arguments", "streamIds", "item", "result", "error",
            "allowReconnect", "sequenceId",
        ]
        for record in records {
            let expected = Self.decode(record)
            #expect(expected.error == nil && expected.messages.count == 1, "\(record)")
            for name in names where record.contains("\"\(name)\":") {
                let escaped = "\\u00" + String(name.utf8.first!, radix: 16) + name.dropFirst()
                for spelling in ["\"\(escaped)\":", "\"\(name)\" :", "\"\(name)\"\t:", " \"\(name)\":"] {
                    let variant = record.replacingOccurrences(of: "\"\(name)\":", with: spelling)
                    let decoded = Self.decode(variant)
                    #expect(decoded.messages == expected.messages && decoded.error == nil, "\(variant)")
                }
            }
        }
        // Near misses of the names are other (ignored) properties, not the property itself.
        for other in [#""typ":1"#, #""types":2"#, #""Type":2"#, #""targets":"x""#, #""item ":3"#] {
            let decoded = Self.decode(#"{"type":6,"# + other + "}")
            #expect(decoded.messages == [.ping] && decoded.error == nil, "\(other)")
        }
        #expect(Self.decode(#"{"type":6,"type":"x"}"#).error != nil)
    }
}
