import Foundation
import Testing

/// The conformance vector files hold exactly the cases `Specs/signalr/README.md` counts: a case
/// lost in an edit (a section renamed, so that an optional field decodes as empty, or a file cut
/// short) fails here instead of shrinking the suites that read the file without a trace.
struct VectorCountTests {
    static let expected: [String: [String: Int]] = [
        "framing.json": [
            "textRecords": 4, "textIncomplete": 3, "varint": 10, "binaryFrames": 5, "binaryFrameErrors": 10,
        ],
        "handshake.json": [
            "requests": 3, "responses": 5, "requestIncomplete": 1, "requestErrors": 9, "responseErrors": 6,
            "responseThenMessages": 1,
        ],
        "json-messages.json": ["messages": 36, "streams": 2, "errors": 37],
        "msgpack-messages.json": ["messages": 52, "streams": 1, "framedSizes": 14, "errors": 40],
        "negotiate.json": ["responses": 3, "redirects": 2, "errors": 8, "urls": 2],
        "stateful-reconnect.json": ["transcript": 14],
    ]

    @Test(arguments: expected.keys.sorted())
    func theFileHoldsTheCountedCases(_ name: String) throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let data = try Data(contentsOf: root.appendingPathComponent("Specs/signalr/\(name)"))
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        var counts: [String: Int] = [:]
        for (key, value) in object {
            if let list = value as? [Any] { counts[key] = list.count }
            if let map = value as? [String: Any] { counts[key] = map.count }
        }
        #expect(counts == Self.expected[name], "\(name)")
    }

    /// Every vector file is counted here.
    @Test func everyFileIsCounted() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let files = try FileManager.default.contentsOfDirectory(
            atPath: root.appendingPathComponent("Specs/signalr").path
        )
        #expect(Set(files.filter { $0.hasSuffix(".json") }) == Set(Self.expected.keys))
    }
}
