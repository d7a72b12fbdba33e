import Testing

@testable import TetherXMPPClient

/// The trace log hides FAST tokens however the reads split the server's `<token token='…'/>`.
struct TokenRedactionTests {
    static let secret = "qzxjwkvbmf"
    static let success =
        "<success xmlns='urn:xmpp:sasl:2'><token xmlns='urn:xmpp:fast:0' token='\(secret)' expiry='2026-12-24T12:00:00Z'/></success>"

    /// Whether any three letters of the secret in a row show in `text`.
    func leaks(_ text: String) -> Bool {
        let letters = Array(Self.secret)
        return (0...(letters.count - 3)).contains { text.contains(String(letters[$0..<($0 + 3)])) }
    }

    @Test func oneRead() {
        var redaction = TokenRedaction()
        let text = String(decoding: redaction.redact(Array(Self.success.utf8)), as: UTF8.self)
        #expect(text.contains("token='[hidden]' expiry='2026-12-24T12:00:00Z'"), "\(text)")
        #expect(!leaks(text))
        // What follows is shown again.
        let next = String(decoding: redaction.redact(Array("<r xmlns='urn:xmpp:sm:3'/>".utf8)), as: UTF8.self)
        #expect(next == "<r xmlns='urn:xmpp:sm:3'/>")
    }

    @Test func everySplitOfTheRead() {
        let bytes = Array(Self.success.utf8)
        for cut in 0...bytes.count {
            var redaction = TokenRedaction()
            let first = String(decoding: redaction.redact(Array(bytes[..<cut])), as: UTF8.self)
            let second = String(decoding: redaction.redact(Array(bytes[cut...])), as: UTF8.self)
            #expect(!leaks(first) && !leaks(second), "cut at \(cut): \(first) | \(second)")
            #expect((first + second).contains("expiry='2026-12-24T12:00:00Z'"), "cut at \(cut)")
        }
    }

    @Test func doubleQuotesAndOtherText() {
        var redaction = TokenRedaction()
        let text = String(
            decoding: redaction.redact(Array("<token token=\"\(Self.secret)\"/> tokens='x'".utf8)),
            as: UTF8.self
        )
        #expect(text == "<token token=\"[hidden]\"/> tokens='x'")
    }
}
