import Testing

@testable import TetherXML

/// `XElement.text`: an element's direct text, its text children joined (the text of child
/// elements left out), read from one text child straight from the tree and joined from several.
struct ElementTextTests {
    static let open = "<stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams'>"

    static func parsed(_ stanza: String) throws -> XElement {
        let result = parseAllWays(Self.open + stanza)
        #expect(result.error == nil)
        let elements = result.events.compactMap { event -> XElement? in
            if case .element(let element) = event { return element }
            return nil
        }
        return try #require(elements.first)
    }

    @Test func oneTextChild() throws {
        #expect(try Self.parsed("<body>héllo &amp; bye</body>").text == "héllo & bye")
        #expect(XElement(XMLName("body"), children: [.text("built")]).text == "built")
    }

    @Test func noText() throws {
        #expect(try Self.parsed("<body/>").text == "")
        #expect(try Self.parsed("<a><b>inner</b></a>").text == "")
        #expect(XElement(XMLName("a")).text == "")
    }

    @Test func textAroundChildElementsIsJoined() throws {
        #expect(try Self.parsed("<a>one<b>not this</b>two<c/>three</a>").text == "onetwothree")
        #expect(try Self.parsed("<a><b/>only after</a>").text == "only after")
        let built = XElement(
            XMLName("a"),
            children: [.text("x"), .element(XElement(XMLName("b"), children: [.text("no")])), .text("y"), .text("z")]
        )
        #expect(built.text == "xyz")
    }
}
