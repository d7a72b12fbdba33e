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

    /// ASCII domains take a fast path on the bytes; it must agree with the rules (RFC 7622 §3.2:
    /// labels of 1 to 63 letters, digits, `-` or `_`, lowercased; one trailing dot dropped) on
    /// every string of a small alphabet, capitals and label lengths around 63 included.
    @Test func asciiDomainsFollowTheRules() {
        func expected(_ domain: String) -> String? {
            let trimmed = domain.hasSuffix(".") ? String(domain.dropLast()) : domain
            for label in trimmed.split(separator: ".", omittingEmptySubsequences: false) {
                guard !label.isEmpty, label.utf8.count <= 63,
                    label.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") })
                else { return nil }
            }
            return trimmed.lowercased()
        }
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("aZ0-_. +")
        var domains = ["example.com", "EXAMPLE.com", "a", "A.", "a..b", ".a", String(repeating: "x", count: 63) + ".y"]
        domains.append(String(repeating: "Q", count: 64))
        for _ in 0..<3000 {
            let length = Int.random(in: 1...12, using: &generator)
            domains.append(String((0..<length).map { _ in alphabet.randomElement(using: &generator)! }))
        }
        for domain in domains {
            #expect((try? JID(parsing: "a@" + domain))?.domainpart == expected(domain), "\(domain)")
        }
    }

    /// The localpart's check takes a fast path for ASCII; it must agree with RFC 7622's rules as
    /// written (no `"&'/:<>@`, no whitespace, no control character) on random mixes of ASCII and
    /// non-ASCII, whitespace (U+00A0, U+2003, U+0085) and controls included. The same bare JID
    /// comes back from `bare`.
    @Test func localpartsFollowTheRules() {
        func allowed(_ local: String) -> Bool {
            local.unicodeScalars.allSatisfy { scalar in
                !("\"&'/:<>@".unicodeScalars.contains(scalar) || scalar.properties.isWhitespace
                    || scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value))
            }
        }
        var generator = SystemRandomNumberGenerator()
        let alphabet: [Character] = [
            "a", "Z", "0", " ", "\t", "@", "&", "\u{7F}", "\u{85}", "\u{A0}", "\u{2003}", "é", "π", "-", ".",
        ]
        for _ in 0..<3000 {
            let length = Int.random(in: 1...8, using: &generator)
            let local = String((0..<length).map { _ in alphabet.randomElement(using: &generator)! })
            let jid = try? JID(localpart: local, domainpart: "example.com", resourcepart: "r")
            #expect((jid != nil) == allowed(local), "\(local.unicodeScalars.map { String($0.value, radix: 16) })")
            if let jid { #expect(jid.bare == (try? JID(localpart: local, domainpart: "example.com"))) }
        }
    }
}
