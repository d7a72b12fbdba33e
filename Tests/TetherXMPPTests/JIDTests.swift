import Testing
import TetherXMPP

struct JIDTests {
    static let valid: [(String, String?, String, String?, String)] = [
        ("juliet@example.com", "juliet", "example.com", nil, "juliet@example.com"),
        ("juliet@example.com/foo", "juliet", "example.com", "foo", "juliet@example.com/foo"),
        ("juliet@example.com/foo bar", "juliet", "example.com", "foo bar", "juliet@example.com/foo bar"),
        ("juliet@example.com/foo@bar", "juliet", "example.com", "foo@bar", "juliet@example.com/foo@bar"),
        ("juliet@example.com/foo/bar", "juliet", "example.com", "foo/bar", "juliet@example.com/foo/bar"),
        ("example.com", nil, "example.com", nil, "example.com"),
        ("example.com/foobar", nil, "example.com", "foobar", "example.com/foobar"),
        ("a.example.com/b@example.net", nil, "a.example.com", "b@example.net", "a.example.com/b@example.net"),
        ("Juliet@EXAMPLE.com", "Juliet", "example.com", nil, "Juliet@example.com"),
        ("juliet@example.com.", "juliet", "example.com", nil, "juliet@example.com"),
        ("πß@ℋℯℓℓℴ.example/♚", "πß", "ℋℯℓℓℴ.example", "♚", "πß@ℋℯℓℓℴ.example/♚"),
        ("user@[::1]/res", "user", "[::1]", "res", "user@[::1]/res"),
        ("user@192.168.0.1", "user", "192.168.0.1", nil, "user@192.168.0.1"),
    ]

    @Test func parsesValidJIDs() throws {
        for (text, local, domain, resource, formatted) in Self.valid {
            let jid = try JID(parsing: text)
            #expect(jid.localpart == local, "\(text)")
            #expect(jid.domainpart == domain, "\(text)")
            #expect(jid.resourcepart == resource, "\(text)")
            #expect(jid.description == formatted, "\(text)")
            #expect(JID(formatted) == jid)
            #expect(jid.bare.resourcepart == nil)
        }
    }

    static let invalid: [(String, JID.ParseError)] = [
        ("\"juliet\"@example.com", .forbiddenCharacterInLocalpart("\"")),
        ("foo bar@example.com", .forbiddenCharacterInLocalpart(" ")),
        ("juliet@example.com/", .emptyResourcepart),
        ("@example.com/", .emptyLocalpart),
        ("@example.com", .emptyLocalpart),
        ("juliet@", .emptyDomainpart),
        ("", .emptyDomainpart),
        ("/foo", .emptyDomainpart),
        ("a:b@example.com", .forbiddenCharacterInLocalpart(":")),
        ("a<b@example.com", .forbiddenCharacterInLocalpart("<")),
        ("a&b@example.com", .forbiddenCharacterInLocalpart("&")),
        ("a'b@example.com", .forbiddenCharacterInLocalpart("'")),
        ("juliet@exa mple.com", .invalidDomainpart),
        ("juliet@example..com", .invalidDomainpart),
        ("juliet@[zz]", .invalidDomainpart),
        ("juliet@example.com/a\u{7}b", .controlCharacterInResourcepart),
    ]

    @Test func rejectsInvalidJIDs() {
        for (text, error) in Self.invalid {
            #expect(throws: error, "\(text)") { try JID(parsing: text) }
        }
    }

    @Test func enforcesPartLengths() throws {
        let longest = String(repeating: "a", count: 1023)
        #expect(try JID(parsing: "\(longest)@example.com/\(longest)").localpart == longest)
        let tooLong = String(repeating: "a", count: 1024)
        #expect(throws: JID.ParseError.partTooLong(part: "localpart", bytes: 1024)) {
            try JID(parsing: "\(tooLong)@example.com")
        }
        #expect(throws: JID.ParseError.partTooLong(part: "resourcepart", bytes: 1024)) {
            try JID(parsing: "a@example.com/\(tooLong)")
        }
        let multibyte = String(repeating: "é", count: 512)  // 1024 bytes
        #expect(throws: JID.ParseError.partTooLong(part: "localpart", bytes: 1024)) {
            try JID(parsing: "\(multibyte)@example.com")
        }
    }
}
