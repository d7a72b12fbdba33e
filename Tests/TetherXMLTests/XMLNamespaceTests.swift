import Testing
import TetherCore
import TetherTestSupport

@testable import TetherXML

/// The stream parser resolves qualified names itself (Namespaces in XML 1.0), Expat reading
/// without namespaces: the names it gives, and what it refuses as Expat's own namespace
/// processing did before (`FuzzXMLStream` compares the two on every input it makes).
struct XMLNamespaceTests {
    static let open = "<stream:stream xmlns='jabber:client' xmlns:stream='\(streamsNamespace)' xml:lang='en'>"
    static let xmlNamespace = XMLName.xmlNamespace

    /// The single top-level element of `stanza` (parsed every way of cutting it).
    func element(_ stanza: String) -> XElement? {
        let result = parseAllWays(Self.open + stanza)
        #expect(result.error == nil, "\(stanza): \(String(describing: result.error))")
        guard case .element(let element) = result.events.last else { return nil }
        return element
    }

    @Test func theHeaderResolvesItsOwnPrefixes() throws {
        let result = parseAllWays(Self.open)
        guard case .streamOpen(let header) = result.events.first else {
            Issue.record("no header")
            return
        }
        #expect(header.name == XMLName("stream", namespace: streamsNamespace))
        #expect(header.name.prefix == "stream")
        #expect(header.attributes == [XMLAttribute(XMLName("lang", namespace: Self.xmlNamespace), "en")])
        #expect(header.attributes.first?.name.prefix == "xml")
        #expect(
            header.namespaceDeclarations == [
                XMLNamespaceDeclaration(prefix: nil, uri: "jabber:client"),
                XMLNamespaceDeclaration(prefix: "stream", uri: streamsNamespace),
            ]
        )
    }

    /// `hasLocalName`, `isIn(namespace:)` and `isNamed(_:namespace:)` (compared in place) agree
    /// with `localName` and `namespace` on parsed elements and on built ones, prefixed or not,
    /// in no namespace, and on children.
    @Test func namesComparedInPlaceAgreeWithTheNamesCopiedOut() throws {
        var elements = [
            try #require(element("<iq type='get' id='1'/>")),
            try #require(element("<x:ping xmlns:x='urn:xmpp:ping'/>")),
            try #require(element("<a xmlns=''/>")),
            XElement(XMLName("message", namespace: "jabber:client")),
            XElement(XMLName("bare", namespace: nil)),
        ]
        let parent = try #require(element("<message><body>hi</body><x:y xmlns:x='urn:x'/></message>"))
        elements += parent.children
        let names = ["iq", "ping", "a", "message", "bare", "body", "y", "", "i", "iqq"]
        let namespaces: [String?] = [nil, "", "jabber:client", "urn:xmpp:ping", "urn:x", "jabber:clien"]
        #expect(elements.count == 7)
        for element in elements {
            for name in names {
                #expect(element.hasLocalName(name) == (element.localName == name), "\(element.name) \(name)")
                for namespace in namespaces {
                    #expect(
                        element.isNamed(name, namespace: namespace)
                            == (element.localName == name && element.namespace == namespace),
                        "\(element.name) \(name) \(String(describing: namespace))"
                    )
                }
            }
            for namespace in namespaces {
                #expect(element.isIn(namespace: namespace) == (element.namespace == namespace))
            }
        }
    }

    @Test func namesResolveInTheScopeOfTheirDeclarations() throws {
        let stanza =
            "<message xmlns:p='urn:p' p:a='1' b='2' xml:lang='de'>"
            + "<p:x xmlns='urn:d'><y/><p:z xmlns:p='urn:q' p:c='3'/><w xmlns=''/></p:x><body/></message>"
        let message = try #require(element(stanza))
        #expect(message.name == XMLName("message", namespace: "jabber:client"))
        #expect(message.name.prefix == nil)
        #expect(
            message.attributes == [
                XMLAttribute(XMLName("a", namespace: "urn:p"), "1"),
                XMLAttribute(XMLName("b"), "2"),
                XMLAttribute(XMLName("lang", namespace: Self.xmlNamespace), "de"),
            ]
        )
        #expect(message.attributes.map(\.name.prefix) == ["p", nil, "xml"])
        #expect(message.namespaceDeclarations == [XMLNamespaceDeclaration(prefix: "p", uri: "urn:p")])
        let x = try #require(message.children.first)
        #expect(x.name == XMLName("x", namespace: "urn:p"))
        #expect(x.name.prefix == "p")
        #expect(
            x.children.map(\.name) == [
                XMLName("y", namespace: "urn:d"), XMLName("z", namespace: "urn:q"), XMLName("w"),
            ]
        )
        #expect(x.children[1].attributes == [XMLAttribute(XMLName("c", namespace: "urn:q"), "3")])
        #expect(x.children[1].namespaceDeclarations == [XMLNamespaceDeclaration(prefix: "p", uri: "urn:q")])
        #expect(x.children[2].namespaceDeclarations == [XMLNamespaceDeclaration(prefix: nil, uri: "")])
        // Each scope ends with its element: `body` is in the stream's default namespace again.
        #expect(message.children.last?.name == XMLName("body", namespace: "jabber:client"))
    }

    /// The cache keys names by how they are written and the declaration in scope: the same
    /// written name under other declarations is another name, and the same declaration on
    /// another stanza finds the cached one.
    @Test func theSameWrittenNameInOtherScopesIsAnotherName() throws {
        let stanzas = [
            ("<a xmlns:p='urn:1'><p:n p:m='1'/></a>", "urn:1"),
            ("<a xmlns:p='urn:2'><p:n p:m='1'/></a>", "urn:2"),
            ("<a xmlns:p='urn:1'><p:n p:m='1'/></a>", "urn:1"),
            ("<a xmlns='urn:3' xmlns:p='urn:3'><p:n p:m='1'/><n/></a>", "urn:3"),
        ]
        let result = parseAllWays(Self.open + stanzas.map(\.0).joined())
        #expect(result.error == nil)
        let elements = result.events.compactMap { event -> XElement? in
            if case .element(let element) = event { return element }
            return nil
        }
        #expect(elements.count == stanzas.count)
        for (element, (_, namespace)) in zip(elements, stanzas) {
            let child = try #require(element.children.first)
            #expect(child.name == XMLName("n", namespace: namespace))
            #expect(child.attributes == [XMLAttribute(XMLName("m", namespace: namespace), "1")])
        }
        #expect(elements[0].name == XMLName("a", namespace: "jabber:client"))
        #expect(elements[3].name == XMLName("a", namespace: "urn:3"))
        #expect(elements[3].children.last?.name == XMLName("n", namespace: "urn:3"))
        #expect(elements[3].children.last?.name.prefix == nil)
    }

    /// After many stanzas with new names the parser starts a new shared name table: the stream
    /// header's prefixes (bound to declarations in the old table) still resolve.
    @Test func theHeadersPrefixesResolveAfterTheNameTableIsReplaced() throws {
        var text = Self.open
        for index in 0..<600 { text += "<m\(index) xmlns:q='urn:\(index)' q:a='1'/>" }
        text += "<stream:features xml:lang='fr'><f xmlns='urn:f'/></stream:features><iq/>"
        let result = parse(Array(text.utf8), configuration: .init(nameCacheCapacity: 64))
        #expect(result.error == nil)
        let elements = result.events.compactMap { event -> XElement? in
            if case .element(let element) = event { return element }
            return nil
        }
        try #require(elements.count == 602)
        for (index, element) in elements.prefix(600).enumerated() {
            #expect(element.name == XMLName("m\(index)", namespace: "jabber:client"))
            #expect(element.attributes == [XMLAttribute(XMLName("a", namespace: "urn:\(index)"), "1")])
        }
        let features = elements[600]
        #expect(features.name == XMLName("features", namespace: streamsNamespace))
        #expect(features.name.prefix == "stream")
        #expect(features.attributes == [XMLAttribute(XMLName("lang", namespace: Self.xmlNamespace), "fr")])
        #expect(features.children.first?.name == XMLName("f", namespace: "urn:f"))
        #expect(elements[601].name == XMLName("iq", namespace: "jabber:client"))
    }

    @Test func acceptsWhatNamespacesAllow() throws {
        let allowed = [
            // `xml` may be declared, to its own namespace.
            "<m xmlns:xml='\(Self.xmlNamespace)' xml:lang='en'/>",
            // Names that start like `xmlns` but are not declarations.
            "<m xmlnsfoo='1' xmlfoo:m='2' xmlns:xmlfoo='urn:x'/>",
            // The default namespace undeclared.
            "<m xmlns=''><n/></m>",
            // The same local name in two namespaces, and with and without a prefix.
            "<m xmlns:a='urn:a' xmlns:b='urn:b' a:x='1' b:x='2' x='3'/>",
            // A local part starting with a letter outside ASCII (two and three bytes in UTF-8),
            // and names that start with the same letter (Expat's verdict on it remembered).
            "<p:\u{E9}t\u{E9} xmlns:p='urn:p'/>",
            "<p:\u{65E5}\u{672C} xmlns:p='urn:p'><p:\u{65E5}x/><p:\u{E9}a p:\u{E9}b='1'/></p:\u{65E5}\u{672C}>",
        ]
        for stanza in allowed { #expect(element(stanza) != nil, "\(stanza)") }
        let undeclared = try #require(element("<m xmlns=''><n/></m>"))
        #expect(undeclared.name == XMLName("m"))
        #expect(undeclared.children.first?.name == XMLName("n"))
        let plain = try #require(element("<m xmlnsfoo='1' xmlfoo:m='2' xmlns:xmlfoo='urn:x'/>"))
        #expect(plain.attributes.map(\.name) == [XMLName("xmlnsfoo"), XMLName("m", namespace: "urn:x")])
    }

    static let refused: [String] = [
        // Unbound prefixes, on elements and attributes, and `xmlns` used as an element's prefix.
        "<foo:bar/>",
        "<m q:a='1'/>",
        "<xmlns:m/>",
        // A prefix's scope ends with its element.
        "<m xmlns:p='urn:p'><p:n/></m><p:n/>",
        // A prefix cannot be undeclared.
        "<m xmlns:p=''/>",
        // `xml` and `xmlns` and their namespaces.
        "<m xmlns:xml='urn:other'/>",
        "<m xmlns:x='\(XMLName.xmlNamespace)'/>",
        "<m xmlns='\(XMLName.xmlNamespace)'/>",
        "<m xmlns:xmlns='urn:y'/>",
        "<m xmlns:x='http://www.w3.org/2000/xmlns/'/>",
        "<m xmlns='http://www.w3.org/2000/xmlns/'/>",
        // Two attributes with the same expanded name.
        "<m xmlns:a='urn:u' xmlns:b='urn:u' a:x='1' b:x='2'/>",
        // Names that are not qualified names.
        "<:m/>",
        "<m:/>",
        "<a:b:c xmlns:a='urn:a'/>",
        "<a:1b xmlns:a='urn:a'/>",
        "<a:-b xmlns:a='urn:a'/>",
        "<m a:.b='1' xmlns:a='urn:a'/>",
        "<m xmlns:='urn:a'/>",
        "<m xmlns:a:b='urn:a'/>",
        "<m xmlns:1a='urn:a'/>",
        // A local part starting with a combining character (a name character, not a start),
        // also after a name with that character inside it, and after the same refusal once.
        "<p:\u{300}x xmlns:p='urn:p'/>",
        "<p:x\u{300} xmlns:p='urn:p'><p:\u{300}y/></p:x\u{300}>",
        "<p:\u{E9}a xmlns:p='urn:p'><p:\u{E9}\u{300}/><p:\u{B7}z/></p:\u{E9}a>",
    ]

    @Test(arguments: refused)
    func refusesWhatNamespacesForbid(_ stanza: String) {
        let result = parseAllWays(Self.open + stanza)
        #expect(result.error?.condition == .notWellFormed, "\(stanza)")
    }

    /// Messages name the rule, never the offending bytes.
    @Test func errorsSayWhichRuleWasBroken() {
        let cases = [
            ("<foo:bar/>", "an element's prefix is unbound"),
            ("<m q:a='1'/>", "an attribute's prefix is unbound"),
            ("<m xmlns:p=''/>", "a prefix undeclared (xmlns:prefix='')"),
            ("<m xmlns:xml='urn:other'/>", "the prefix xml bound to another namespace"),
            (
                "<m xmlns:a='urn:u' xmlns:b='urn:u' a:x='1' b:x='2'/>",
                "two attributes with the same local name and namespace"
            ),
            ("<a:b:c xmlns:a='urn:a'/>", "a name that is not a qualified name (prefix:local)"),
            ("<p:\u{300}x xmlns:p='urn:p'/>", "a name that is not a qualified name (prefix:local)"),
            (
                "<p:x\u{300} xmlns:p='urn:p'><p:\u{300}y/><p:\u{300}z/></p:x\u{300}>",
                "a name that is not a qualified name (prefix:local)"
            ),
            (
                "<p:\u{E9}a xmlns:p='urn:p'><p:\u{E9}\u{300}/><p:\u{B7}z/></p:\u{E9}a>",
                "a name that is not a qualified name (prefix:local)"
            ),
        ]
        for (stanza, message) in cases {
            #expect(parse(Array((Self.open + stanza).utf8)).error?.message == message, "\(stanza)")
        }
    }

    /// A stream restart forgets the old stream's declarations; the implicit `xml` stays bound.
    @Test func aRestartForgetsTheOldStreamsDeclarations() throws {
        var parser = XMLStreamParser()
        parser.append(Array((Self.open + "<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>").utf8))
        _ = try parser.next()
        _ = try parser.next()
        let rest = parser.restart()
        #expect(rest.isEmpty)
        parser.append(Array("<s xml:lang='en'><stream:x/></s>".utf8))
        #expect(throws: XMLStreamError.self) {
            while try parser.next() != nil {}
        }
        var second = XMLStreamParser()
        second.append(Array((Self.open + "<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>").utf8))
        _ = try second.next()
        _ = try second.next()
        _ = second.restart()
        second.append(Array("<s xml:lang='en'><x/></s>".utf8))
        guard case .streamOpen(let header) = try second.next() else {
            Issue.record("no header")
            return
        }
        #expect(header.name == XMLName("s"))
        #expect(header.attributes == [XMLAttribute(XMLName("lang", namespace: Self.xmlNamespace), "en")])
        guard case .element(let element) = try second.next() else {
            Issue.record("no element")
            return
        }
        #expect(element.name == XMLName("x"))
    }
}
